"""Broker reconciliation steps against the real apiserver: create, idempotent, drift reverted."""

from __future__ import annotations

import datetime
import json
from typing import Any

import kubernetes  # type: ignore[import-untyped]
import pytest

from ariane.operator import kube, reconcile, status
from e2e import operator_support
from e2e.testenv import cluster, processes

WAIT_S = 90.0

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


def _claims(k8s: cluster.Cluster, namespace: str) -> dict[str, tuple[str, str]]:
    """Store claim name → (phase, requested storage)."""
    core = kubernetes.client.CoreV1Api(k8s.api_client)
    return {
        c.metadata.name: (c.status.phase, c.spec.resources.requests["storage"])
        for c in core.list_namespaced_persistent_volume_claim(namespace).items
    }


def _grow(k8s: cluster.Cluster, namespace: str, size: str) -> dict[str, Any]:
    custom = kubernetes.client.CustomObjectsApi(k8s.api_client)
    patch = {"spec": {"storage": {"size": size}}}
    custom.patch_namespaced_custom_object(
        "ariane.dev", "v1alpha1", namespace, "brokers", "demo", patch
    )
    return dict(
        custom.get_namespaced_custom_object("ariane.dev", "v1alpha1", namespace, "brokers", "demo")
    )


def test_storage_size_grows_the_bound_claims_and_blocks_without_expansion(
    k8s: cluster.Cluster, namespace: str
) -> None:
    """Raising storage.size patches every bound store claim (the StatefulSets' immutable claim
    templates are left alone, so the apply still succeeds); with a StorageClass that does not
    allow expansion the claims stay and StorageGrowthBlocked says why."""
    client = kube.Kube(k8s.api_client)
    broker = _broker(k8s, namespace)
    reconcile.reconcile_broker(client, broker, NOW)
    processes.wait_until(
        lambda: [p for p, _ in _claims(k8s, namespace).values()] == ["Bound"] * 4,
        timeout_s=WAIT_S,
        what="4 bound store claims",
    )

    grown = reconcile.reconcile_broker(client, _grow(k8s, namespace, "2Gi"), NOW)

    assert {size for _, size in _claims(k8s, namespace).values()} == {"2Gi"}
    assert status.READY in {c["type"] for c in grown["conditions"]}
    assert "StorageGrowthBlocked" not in {c["type"] for c in grown["conditions"]}
    storage_api = kubernetes.client.StorageV1Api(k8s.api_client)
    classes = [c for c in storage_api.list_storage_class().items]
    [default] = [c for c in classes if c.allow_volume_expansion]
    storage_api.patch_storage_class(default.metadata.name, {"allowVolumeExpansion": False})
    try:
        blocked = reconcile.reconcile_broker(client, _grow(k8s, namespace, "3Gi"), NOW)
    finally:
        storage_api.patch_storage_class(default.metadata.name, {"allowVolumeExpansion": True})
    [condition] = [c for c in blocked["conditions"] if c["type"] == "StorageGrowthBlocked"]
    assert (condition["status"], condition["reason"]) == ("True", "NotExpandable")
    assert {size for _, size in _claims(k8s, namespace).values()} == {"2Gi"}
