"""The NetworkPolicies of a Broker (``spec.networkPolicy``): one per name-server Deployment and
one per broker group, ingress only (pure: a spec → manifests; Strimzi renders one per
listener, RocketMQ's operator none).

Who may connect, per port (every other ingress to these pods is dropped once a policy selects
them; egress is not restricted):

- name servers, client port (gRPC and Remoting, sniffed on one port): the client peers, this
  Broker's broker pods (registration), the operator;
- broker pods of group ``g``, client ports (gRPC; Remoting when ``spec.config.remoting_listen``
  binds a non-loopback address): the client peers, the operator, this Broker's name servers
  (they forward RecallMessage/QueryAssignment to a master), the pods of ``g`` (a slave's
  metadata sync reads its master's admin API);
- broker pods of ``g``, HA port: the pods of ``g`` only (a slave replicates from its master;
  after a failover any pod of the group may be master);
- every pod's metrics port: the Prometheus peers.

Client peers are ``spec.networkPolicy.clientSelectors`` (NetworkPolicy peers, ORed). Empty or
absent: any source may reach the client ports, as Strimzi's ``networkPolicyPeers`` (clients
authenticate with TLS and ACL there; the internal ports stay closed). Prometheus peers are
``spec.networkPolicy.metricsSelectors``; absent: the pods of the namespaces whose
``kubernetes.io/metadata.name`` (set by the apiserver, immutable) is in the operator's list
(``settings.PROMETHEUS_NAMESPACES_ENV``, the chart's ``networkPolicy.prometheusNamespaces``,
default ``monitoring``). The operator peer is its pod's labels in its namespace
(``settings.OPERATOR_*_ENV``, set by the chart); an operator running outside the cluster (no
namespace known) has no pod to admit.

Invariants: same input, same output; each policy is owned by the Broker (garbage-collected with
it) and carries the Broker's labels (``reconcile`` prunes the ones no longer wanted).
"""

from __future__ import annotations

import dataclasses
import ipaddress
from collections.abc import Mapping, Sequence
from typing import Any, Final

from ariane.operator import model, resources

NAMESPACE_NAME_LABEL: Final = "kubernetes.io/metadata.name"
DEFAULT_PROMETHEUS_NAMESPACES: Final = ("monitoring",)
DEFAULT_OPERATOR_LABELS: Final = (
    ("app.kubernetes.io/component", "operator"),
    ("app.kubernetes.io/name", "ariane"),
)
PEERS_MAX: Final = 32
"""Most peers one selector list may hold (the CRD's ``maxItems``)."""


@dataclasses.dataclass(frozen=True, slots=True)
class OperatorSide:
    """What the policies need to know about the operator's own deployment
    (``settings.OperatorSettings.side``, from the chart's environment)."""

    namespace: str = ""
    """The operator pod's namespace; empty: not a pod (no operator peer)."""
    pod_labels: tuple[tuple[str, str], ...] = DEFAULT_OPERATOR_LABELS
    """Labels selecting the operator pod (sorted pairs)."""
    prometheus_namespaces: tuple[str, ...] = DEFAULT_PROMETHEUS_NAMESPACES
    """Namespaces whose pods may scrape metrics when a Broker names no ``metricsSelectors``."""


def enabled(spec: resources.BrokerSpec) -> bool:
    """``spec.networkPolicy.enabled`` (default true)."""
    return bool(spec.get("networkPolicy", {}).get("enabled", True))


def _port_of(listen: object) -> int | None:
    """The port of a ``HOST:PORT`` the pod binds for others (``None``: unset or loopback)."""
    if not isinstance(listen, str) or ":" not in listen:
        return None
    host, _, port = listen.rpartition(":")
    host = host.strip("[]")
    try:
        if host == "localhost" or ipaddress.ip_address(host).is_loopback:
            return None
    except ValueError:
        pass  # a host name: bound for others
    return int(port) if port.isdigit() and 0 < int(port) <= 65535 else None


def client_ports(spec: resources.BrokerSpec) -> list[int]:
    """The broker pods' client ports: gRPC, and Remoting when ``spec.config`` serves it."""
    remoting = _port_of(spec.get("config", {}).get("remoting_listen"))
    return [model.BROKER_PORT] + ([remoting] if remoting and remoting != model.BROKER_PORT else [])


def ha_port(spec: resources.BrokerSpec) -> int:
    """The HA port of broker pods (``spec.config.ha.ha_listen`` may move it)."""
    return _port_of(spec.get("config", {}).get("ha", {}).get("ha_listen")) or model.HA_PORT


def namesrv_policy_name(broker: str) -> str:
    """The name servers' NetworkPolicy (the Deployment's name)."""
    return model.namesrv_name(broker)


def _ports(numbers: Sequence[int]) -> list[dict[str, Any]]:
    return [{"protocol": "TCP", "port": number} for number in numbers]


def _pods(labels: Mapping[str, str]) -> dict[str, Any]:
    """A peer: the pods with ``labels`` in the policy's namespace."""
    return {"podSelector": {"matchLabels": dict(labels)}}


def _peers(given: Sequence[Mapping[str, Any]] | None) -> list[dict[str, Any]]:
    """The peers a user gave (only the two selector keys, in a fixed order)."""
    result = []
    for peer in given or []:
        result.append({k: peer[k] for k in ("namespaceSelector", "podSelector") if k in peer})
    return result


def operator_peers(side: OperatorSide) -> list[dict[str, Any]]:
    """The operator pod as a peer (none when it does not run in a pod)."""
    if not side.namespace:
        return []
    return [
        {
            "namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: side.namespace}},
            "podSelector": {"matchLabels": dict(side.pod_labels)},
        }
    ]


def metrics_peers(spec: resources.BrokerSpec, side: OperatorSide) -> list[dict[str, Any]]:
    """Who may scrape the metrics port (module docstring); ``[]``: nobody."""
    given = _peers(spec.get("networkPolicy", {}).get("metricsSelectors"))
    if given:
        return given
    if not side.prometheus_namespaces:
        return []
    names = sorted(set(side.prometheus_namespaces))
    expression = {"key": NAMESPACE_NAME_LABEL, "operator": "In", "values": names}
    return [{"namespaceSelector": {"matchExpressions": [expression]}}]


def _rule(ports: Sequence[int], peers: list[dict[str, Any]] | None) -> dict[str, Any]:
    """An ingress rule; ``peers=None``: from anywhere."""
    return {"ports": _ports(ports), **({} if peers is None else {"from": peers})}


def _client_rule(
    ports: Sequence[int], spec: resources.BrokerSpec, insiders: list[dict[str, Any]]
) -> dict[str, Any]:
    clients = _peers(spec.get("networkPolicy", {}).get("clientSelectors"))
    return _rule(ports, clients + insiders if clients else None)


def _policy(
    owner: model.Owner,
    name: str,
    component: str,
    group: str | None,
    rules: list[dict[str, Any]],
) -> resources.Manifest:
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {
            "name": name,
            "namespace": owner.namespace,
            "labels": model.labels(owner, component, group),
            "ownerReferences": [owner.reference()],
        },
        "spec": {
            "podSelector": {"matchLabels": model.selector_labels(owner, component, group)},
            "policyTypes": ["Ingress"],
            "ingress": rules,
        },
    }


def policies(
    owner: model.Owner, spec: resources.BrokerSpec, groups: Sequence[str], side: OperatorSide
) -> list[resources.Manifest]:
    """The name servers' policy, then one per group in ``groups`` (``[]`` when disabled).

    Args:
        owner: the Broker.
        spec: its spec.
        groups: the groups to cover: ``spec.groups``'s and those still draining.
        side: the operator's namespace, labels and Prometheus namespaces.
    """
    if not enabled(spec):
        return []
    metrics = model.metrics_port(spec)
    scrapers = metrics_peers(spec, side)
    operator = operator_peers(side)
    brokers = _pods(model.selector_labels(owner, "broker"))
    namesrv_rules = [_client_rule([model.NAMESRV_PORT], spec, [brokers, *operator])]
    if scrapers:
        namesrv_rules.append(_rule([metrics], scrapers))
    result = [_policy(owner, namesrv_policy_name(owner.name), "namesrv", None, namesrv_rules)]
    namesrv = _pods(model.selector_labels(owner, "namesrv"))
    for group in groups:
        same_group = _pods(model.selector_labels(owner, "broker", group))
        rules = [
            _client_rule(client_ports(spec), spec, [*operator, namesrv, same_group]),
            _rule([ha_port(spec)], [same_group]),
        ]
        if scrapers:
            rules.append(_rule([metrics], scrapers))
        result.append(_policy(owner, group, "broker", group, rules))
    return result
