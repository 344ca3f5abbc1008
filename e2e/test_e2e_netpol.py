"""A Broker's NetworkPolicies on the real apiserver: the operator applies them (the apiserver
validates them), and their selectors admit exactly the pods they must, per port.

The Broker is reconciled in-process (``reconcile.reconcile_broker``, no admin API), as the
operator does, with the operator's side of the policies (its namespace, the chart's pod labels,
Prometheus' namespace) given as ``netpol.OperatorSide``. The StatefulSet and Deployment
controllers create the name-server and broker pods with the labels the operator renders (kwok
runs them; nothing listens). The operator, client, Prometheus and stranger pods are created by
the test (the operator pod with the labels of the chart's own Deployment template). A pure
evaluator (``e2e.netpol_eval``) then answers, for every pod and port, who is admitted. kwok's
pods have no network: enforcement is tested on the real node (``test_e2e_realnode_secure``,
kube-router's firewall between real pods).
"""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Iterator
from typing import Any

import kubernetes  # type: ignore[import-untyped]
import pytest
import yaml

from ariane.operator import kube, netpol, reconcile
from e2e import netpol_eval, operator_support
from e2e.testenv import cluster, objects, processes

pytestmark = pytest.mark.k8s

WAIT_S = 60.0
NAMESRV, GRPC, REMOTING, HA, METRICS = 9876, 8081, 10911, 10912, 5557


@pytest.fixture
def extra_namespaces(k8s: cluster.Cluster) -> Iterator[dict[str, str]]:
    """Namespaces ``ops`` (the operator), ``mon`` (Prometheus), ``apps`` (team=apps clients)
    and ``other`` (a stranger), each with a unique name."""
    core = kubernetes.client.CoreV1Api(k8s.api_client)
    names = {role: f"{role}-{uuid.uuid4().hex[:8]}" for role in ("ops", "mon", "apps", "other")}
    for role, name in names.items():
        labels = {"team": "apps"} if role == "apps" else {}
        labels |= objects.RESTRICTED_NAMESPACE_LABELS  # issue 24 item 5: every e2e namespace
        core.create_namespace({"metadata": {"name": name, "labels": labels}})
    yield names
    for name in names.values():
        core.delete_namespace(name)


def _chart_operator_labels(k8s: cluster.Cluster, namespace: str) -> dict[str, str]:
    """The operator pod's labels as the chart's Deployment template renders them."""
    text = k8s.helm("template", "rel", str(operator_support.CHART_DIR), "-n", namespace).stdout
    for doc in yaml.safe_load_all(text):
        if doc and doc["kind"] == "Deployment":
            return dict(doc["spec"]["template"]["metadata"]["labels"])
    raise AssertionError("the chart renders no Deployment")


def _pod(core: Any, namespace: str, name: str, labels: dict[str, str]) -> None:
    container = {
        "name": "c",
        "image": "pause",
        "securityContext": objects.restricted_container_security_context(),
    }
    spec = {"securityContext": objects.restricted_pod_security_context(), "containers": [container]}
    body = {"metadata": {"name": name, "labels": labels}, "spec": spec}
    core.create_namespaced_pod(namespace, body)


def _broker(k8s: cluster.Cluster, namespace: str, spec: dict[str, Any]) -> dict[str, Any]:
    custom = kubernetes.client.CustomObjectsApi(k8s.api_client)
    body = {"apiVersion": "ariane.dev/v1alpha1", "kind": "Broker", "metadata": {"name": "demo"}}
    custom.create_namespaced_custom_object(
        "ariane.dev", "v1alpha1", namespace, "brokers", {**body, "spec": spec}
    )
    found: dict[str, Any] = custom.get_namespaced_custom_object(
        "ariane.dev", "v1alpha1", namespace, "brokers", "demo"
    )
    return found


def _policies(k8s: cluster.Cluster, namespace: str) -> list[dict[str, Any]]:
    api = kubernetes.client.NetworkingV1Api(k8s.api_client)
    items = api.list_namespaced_network_policy(namespace).items
    return [k8s.api_client.sanitize_for_serialization(p) for p in items]


def _view(k8s: cluster.Cluster, namespaces: list[str]) -> tuple[list[netpol_eval.Pod], Any]:
    core = kubernetes.client.CoreV1Api(k8s.api_client)
    pods = []
    for namespace in namespaces:
        for pod in core.list_namespaced_pod(namespace).items:
            ports = {
                p.name: p.container_port
                for c in pod.spec.containers
                for p in c.ports or []
                if p.name
            }
            pods.append(
                netpol_eval.Pod(
                    pod.metadata.name, namespace, dict(pod.metadata.labels or {}), ports
                )
            )
    labels = {n: dict(core.read_namespace(n).metadata.labels or {}) for n in namespaces}
    return pods, labels


def test_policies_admit_exactly_the_pods_they_must_per_port(
    k8s: cluster.Cluster, namespace: str, extra_namespaces: dict[str, str]
) -> None:
    """Name servers admit clients, brokers and the operator on 9876; a group's brokers admit
    clients, the operator, name servers and their own group on the client ports (gRPC and
    Remoting), only their own group on the HA port; Prometheus alone reaches metrics; a
    stranger in the namespace and a pod of another namespace reach nothing."""
    operator_support.apply_crds(k8s)
    ops, mon, apps, other = (extra_namespaces[r] for r in ("ops", "mon", "apps", "other"))
    spec = {
        "groups": 2,
        "replicasPerGroup": 2,
        "storage": {"size": "1Gi"},
        "config": {"remoting_listen": "0.0.0.0:10911"},
        "networkPolicy": {
            "clientSelectors": [
                {"podSelector": {"matchLabels": {"role": "client"}}},
                {
                    "namespaceSelector": {"matchLabels": {"team": "apps"}},
                    "podSelector": {
                        "matchExpressions": [{"key": "app", "operator": "In", "values": ["shop"]}]
                    },
                },
            ]
        },
    }
    body = _broker(k8s, namespace, spec)
    operator_labels = _chart_operator_labels(k8s, ops)
    selector = {
        k: operator_labels[k]
        for k in (
            "app.kubernetes.io/name",
            "app.kubernetes.io/instance",
            "app.kubernetes.io/component",
        )
    }
    side = netpol.OperatorSide(ops, tuple(sorted(selector.items())), (mon,))
    client = kube.Kube(k8s.api_client)
    now = datetime.datetime.now(datetime.UTC)

    result = reconcile.reconcile_broker(client, body, now, side=side)

    core = kubernetes.client.CoreV1Api(k8s.api_client)
    _pod(core, ops, "operator", operator_labels)
    _pod(core, namespace, "client", {"role": "client"})
    _pod(core, apps, "shop", {"app": "shop"})
    _pod(core, apps, "shop-like", {"app": "other"})
    _pod(core, mon, "prometheus", {"app": "prometheus"})
    _pod(core, namespace, "stranger", {"role": "intruder"})
    _pod(core, other, "outsider", {"role": "client"})
    processes.wait_until(
        lambda: len(core.list_namespaced_pod(namespace).items) == 1 + 4 + 2,
        timeout_s=WAIT_S,
        what="1 name-server and 4 broker pods created by their controllers",
    )
    policies = _policies(k8s, namespace)
    pods, namespace_labels = _view(k8s, [namespace, ops, mon, apps, other])
    by_name = {p.name: p for p in pods}
    namesrv = next(p.name for p in pods if p.name.startswith("demo-namesrv-"))

    def who(target: str, port: int) -> set[str]:
        return netpol_eval.admitted(policies, namespace_labels, pods, by_name[target], port)

    brokers = {"demo-a-0", "demo-a-1", "demo-b-0", "demo-b-1"}
    clients = {"client", "shop", "operator"}
    assert "observedGeneration" in result
    assert sorted(p["metadata"]["name"] for p in policies) == ["demo-a", "demo-b", "demo-namesrv"]
    assert all(
        p["metadata"]["ownerReferences"][0]["uid"] == body["metadata"]["uid"] for p in policies
    )
    assert who(namesrv, NAMESRV) == clients | brokers
    assert who(namesrv, METRICS) == {"prometheus"}
    assert who(namesrv, GRPC) == set()
    for pod, peer in (("demo-a-0", "demo-a-1"), ("demo-b-1", "demo-b-0")):
        for port in (GRPC, REMOTING):
            assert who(pod, port) == clients | {namesrv, peer}, (pod, port)
        assert who(pod, HA) == {peer}, pod
        assert who(pod, METRICS) == {"prometheus"}, pod
        assert who(pod, NAMESRV) == set(), pod
    assert who("stranger", HA) >= {"outsider"}  # a pod no policy selects admits everything


def test_policies_follow_the_spec_and_go_when_disabled(
    k8s: cluster.Cluster, namespace: str
) -> None:
    """Without clientSelectors the client ports admit any source while the HA port stays
    closed; a new clientSelector is applied on the next reconcile; ``enabled: false`` removes
    every policy of the Broker."""
    operator_support.apply_crds(k8s)
    body = _broker(k8s, namespace, {"groups": 1, "storage": {"size": "1Gi"}})
    client = kube.Kube(k8s.api_client)
    now = datetime.datetime.now(datetime.UTC)
    reconcile.reconcile_broker(client, body, now)
    open_rules = {p["metadata"]["name"]: p["spec"]["ingress"] for p in _policies(k8s, namespace)}
    custom = kubernetes.client.CustomObjectsApi(k8s.api_client)
    selectors = [{"podSelector": {"matchLabels": {"role": "client"}}}]

    body["spec"]["networkPolicy"] = {"enabled": True, "clientSelectors": selectors}
    body = custom.replace_namespaced_custom_object(
        "ariane.dev", "v1alpha1", namespace, "brokers", "demo", body
    )
    reconcile.reconcile_broker(client, body, now)
    narrowed = {p["metadata"]["name"]: p["spec"]["ingress"] for p in _policies(k8s, namespace)}
    body["spec"]["networkPolicy"]["enabled"] = False
    body = custom.replace_namespaced_custom_object(
        "ariane.dev", "v1alpha1", namespace, "brokers", "demo", body
    )
    reconcile.reconcile_broker(client, body, now)

    assert sorted(open_rules) == ["demo-a", "demo-namesrv"]
    assert "from" not in open_rules["demo-a"][0]  # client ports: any source
    assert open_rules["demo-a"][1]["ports"] == [{"port": HA, "protocol": "TCP"}]
    assert "from" in open_rules["demo-a"][1]
    assert selectors[0] in narrowed["demo-a"][0]["from"]
    assert _policies(k8s, namespace) == []


def test_evaluator_follows_label_selector_and_peer_semantics() -> None:
    """The test's evaluator: matchExpressions operators, podSelector-only peers stay in the
    policy's namespace, namespaceSelector + podSelector are ANDed, unselected pods are open."""
    labels = {"a": "1", "b": "2"}
    assert netpol_eval.selector_matches(
        {"matchExpressions": [{"key": "a", "operator": "In", "values": ["1"]}]}, labels
    )
    assert not netpol_eval.selector_matches(
        {"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["1"]}]}, labels
    )
    assert netpol_eval.selector_matches(
        {"matchExpressions": [{"key": "c", "operator": "DoesNotExist"}]}, labels
    )
    assert not netpol_eval.selector_matches(
        {"matchExpressions": [{"key": "c", "operator": "Exists"}]}, labels
    )
    assert not netpol_eval.selector_matches({"matchLabels": {"a": "2"}}, labels)
    policy = {
        "metadata": {"namespace": "x"},
        "spec": {
            "podSelector": {"matchLabels": {"app": "t"}},
            "policyTypes": ["Ingress"],
            "ingress": [
                {"ports": [{"port": 1}], "from": [{"podSelector": {"matchLabels": {"c": "1"}}}]},
                {
                    "ports": [{"port": "named"}],
                    "from": [
                        {
                            "namespaceSelector": {"matchLabels": {"n": "y"}},
                            "podSelector": {"matchLabels": {"c": "2"}},
                        }
                    ],
                },
            ],
        },
    }
    target = netpol_eval.Pod("t", "x", {"app": "t"}, {"named": 2})
    spaces = {"x": {"n": "x"}, "y": {"n": "y"}}
    same = netpol_eval.Pod("s", "x", {"c": "1"})
    far = netpol_eval.Pod("f", "y", {"c": "1"})
    far2 = netpol_eval.Pod("g", "y", {"c": "2"})
    assert netpol_eval.admits([policy], spaces, same, target, 1)
    assert not netpol_eval.admits([policy], spaces, far, target, 1)
    assert not netpol_eval.admits([policy], spaces, same, target, 2)
    assert netpol_eval.admits([policy], spaces, far2, target, 2)
    assert not netpol_eval.admits([policy], spaces, far2, target, 1)
    assert netpol_eval.admits([policy], spaces, far, netpol_eval.Pod("u", "x", {}), 9)
