"""A small pure evaluator of Kubernetes NetworkPolicy ingress (networking.k8s.io/v1), for tests.

It answers "may pod S open a TCP connection to port P of pod T?" from the policies and the live
pods and namespaces, with the API's semantics: a pod selected by no Ingress policy admits
everything; a selected pod admits a connection when any rule of any policy selecting it matches
the port (no ``ports``: every port) and the source (no ``from``: any source). A peer's
``podSelector`` alone means pods of the policy's namespace; ``namespaceSelector`` alone every
pod of the matching namespaces; both, pods matching both. Label selectors: ``matchLabels`` and
``matchExpressions`` (In, NotIn, Exists, DoesNotExist), ANDed; ``{}`` matches everything.
``ipBlock`` peers are not evaluated (they never match a pod here). Named ports are resolved
against the target's container ports. Traffic from the node (kubelet probes) is out of scope.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any


@dataclasses.dataclass(frozen=True)
class Pod:
    """A pod as the evaluator sees it."""

    name: str
    namespace: str
    labels: Mapping[str, str]
    ports: Mapping[str, int] = dataclasses.field(default_factory=dict)
    """Container port name → number (for named ports in policies)."""


def selector_matches(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """Whether a ``LabelSelector`` matches ``labels`` (``None`` or ``{}``: everything).

    Raises:
        ValueError: an unknown ``matchExpressions`` operator.
    """
    if not selector:
        return True
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expression in selector.get("matchExpressions") or []:
        key, operator = expression["key"], expression["operator"]
        values = expression.get("values") or []
        if operator == "In":
            ok = key in labels and labels[key] in values
        elif operator == "NotIn":
            ok = key not in labels or labels[key] not in values
        elif operator == "Exists":
            ok = key in labels
        elif operator == "DoesNotExist":
            ok = key not in labels
        else:
            raise ValueError(f"unknown selector operator {operator!r}")
        if not ok:
            return False
    return True


def _peer_matches(
    peer: Mapping[str, Any],
    policy_namespace: str,
    source: Pod,
    namespace_labels: Mapping[str, Mapping[str, str]],
) -> bool:
    if "ipBlock" in peer:
        return False
    if "namespaceSelector" in peer:
        in_namespace = selector_matches(
            peer["namespaceSelector"], namespace_labels[source.namespace]
        )
    else:
        in_namespace = source.namespace == policy_namespace
    return in_namespace and selector_matches(peer.get("podSelector"), source.labels)


def _port_matches(rule_ports: Sequence[Mapping[str, Any]] | None, target: Pod, port: int) -> bool:
    if not rule_ports:
        return True
    for entry in rule_ports:
        if entry.get("protocol", "TCP") != "TCP":
            continue
        wanted = entry.get("port")
        if wanted is None:
            return True
        number = target.ports.get(wanted) if isinstance(wanted, str) else int(wanted)
        end = int(entry.get("endPort", number or 0))
        if number is not None and number <= port <= max(end, number):
            return True
    return False


def admits(
    policies: Sequence[Mapping[str, Any]],
    namespace_labels: Mapping[str, Mapping[str, str]],
    source: Pod,
    target: Pod,
    port: int,
) -> bool:
    """Whether ``source`` may connect to ``target`` on TCP ``port`` (module docstring)."""
    selecting = [
        p
        for p in policies
        if p["metadata"]["namespace"] == target.namespace
        and "Ingress" in p["spec"].get("policyTypes", ["Ingress"])
        and selector_matches(p["spec"].get("podSelector"), target.labels)
    ]
    if not selecting:
        return True
    for policy in selecting:
        for rule in policy["spec"].get("ingress") or []:
            if not _port_matches(rule.get("ports"), target, port):
                continue
            peers = rule.get("from")
            if not peers:
                return True
            namespace = policy["metadata"]["namespace"]
            if any(_peer_matches(q, namespace, source, namespace_labels) for q in peers):
                return True
    return False


def admitted(
    policies: Sequence[Mapping[str, Any]],
    namespace_labels: Mapping[str, Mapping[str, str]],
    pods: Sequence[Pod],
    target: Pod,
    port: int,
) -> set[str]:
    """The names of the ``pods`` (the target excluded) that may reach ``target`` on ``port``."""
    return {
        s.name
        for s in pods
        if s.name != target.name and admits(policies, namespace_labels, s, target, port)
    }
