"""Broker reconciliation steps against the real apiserver: create, idempotent, drift reverted."""

from __future__ import annotations

import datetime
import json
from typing import Any

import kubernetes  # type: ignore[import-untyped]
import pytest

from ariane.operator import kube, reconcile, status
from e2e import operator_support
from e2e.testenv import cluster

pytestmark = pytest.mark.k8s

NOW = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)


def _broker(k8s: cluster.Cluster, namespace: str, **annotations: str) -> dict[str, Any]:
    operator_support.apply_crds(k8s)
    body = {
        "apiVersion": "ariane.dev/v1alpha1",
        "kind": "Broker",
        "metadata": {"name": "demo", "annotations": annotations},
        "spec": {"groups": 2, "replicasPerGroup": 2, "storage": {"size": "1Gi"}},
    }
    k8s.kubectl("apply", "-n", namespace, "-f", "-", input_text=json.dumps(body))
    custom = kubernetes.client.CustomObjectsApi(k8s.api_client)
    return dict(
        custom.get_namespaced_custom_object("ariane.dev", "v1alpha1", namespace, "brokers", "demo")
    )


def test_reconcile_creates_objects_idempotently_and_reverts_drift(
    k8s: cluster.Cluster, namespace: str
) -> None:
    """Steps create every object; a second run changes nothing; a hand-scaled set is reverted."""
    client = kube.Kube(k8s.api_client)
    broker = _broker(k8s, namespace)
    apps = kubernetes.client.AppsV1Api(k8s.api_client)

    first = reconcile.reconcile_broker(client, broker, NOW)
    version = apps.read_namespaced_stateful_set("demo-b", namespace).metadata.generation
    reconcile.reconcile_broker(client, broker, NOW)
    again = apps.read_namespaced_stateful_set("demo-b", namespace).metadata.generation
    apps.patch_namespaced_stateful_set("demo-b", namespace, {"spec": {"replicas": 5}})
    reconcile.reconcile_broker(client, broker, NOW)

    assert first["observedGeneration"] == broker["metadata"]["generation"]
    types = {c["type"]: c["status"] for c in first["conditions"]}
    # Nothing is ready right after the first apply: Ready waits for the pods.
    assert types == {
        status.PROGRESSING: "True",
        status.PAUSED: "False",
        status.READY: "False",
        status.DEGRADED: "False",
    }
    assert version == again  # generation: spec unchanged by the second run
    assert apps.read_namespaced_stateful_set("demo-b", namespace).spec.replicas == 2
    assert apps.read_namespaced_deployment("demo-namesrv", namespace).spec.replicas == 1
    written = client.patch_status("Broker", namespace, "demo", first)
    assert written["status"]["observedGeneration"] == first["observedGeneration"]


def test_paused_broker_applies_nothing_and_says_so(k8s: cluster.Cluster, namespace: str) -> None:
    """With the pause annotation no object is created and ReconciliationPaused is True."""
    broker = _broker(k8s, namespace, **{status.PAUSE_ANNOTATION: "true"})

    result = reconcile.reconcile_broker(kube.Kube(k8s.api_client), broker, NOW)

    assert result["conditions"][0]["type"] == status.PAUSED
    assert result["conditions"][0]["status"] == "True"
    assert "observedGeneration" not in result
    apps = kubernetes.client.AppsV1Api(k8s.api_client)
    assert apps.list_namespaced_stateful_set(namespace).items == []
