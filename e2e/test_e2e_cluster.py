"""The test control plane is a real Kubernetes: storage, validation, controllers, scheduling."""

from __future__ import annotations

import json
import pathlib
from typing import Any

import kubernetes  # type: ignore[import-untyped]
import pytest

from e2e.testenv import cluster, objects, processes, sockets

pytestmark = pytest.mark.k8s

K8S_VERSION = "v1.36.3"
HELM_VERSION = "v3.22.0"
ROLLOUT_TIMEOUT_S = 120.0


def test_configmap_round_trips_through_etcd(k8s: cluster.Cluster, namespace: str) -> None:
    """A ConfigMap written through the apiserver reads back with its data and a resourceVersion."""
    core = kubernetes.client.CoreV1Api(k8s.api_client)
    core.create_namespaced_config_map(
        namespace, {"metadata": {"name": "greeting"}, "data": {"hello": "world", "n": "42"}}
    )

    read = core.read_namespaced_config_map("greeting", namespace)

    assert read.data == {"hello": "world", "n": "42"}
    assert int(read.metadata.resource_version) > 0
    names = [cm.metadata.name for cm in core.list_namespaced_config_map(namespace).items]
    assert "greeting" in names


def test_server_side_dry_run_validates_and_stores_nothing(
    k8s: cluster.Cluster, namespace: str
) -> None:
    """Dry-run rejects an invalid object with 422 and accepts a valid one without storing it."""
    core = kubernetes.client.CoreV1Api(k8s.api_client)
    with pytest.raises(kubernetes.client.ApiException) as caught:
        core.create_namespaced_config_map(
            namespace, {"metadata": {"name": "Not_A_DNS_Name"}}, dry_run="All"
        )
    assert caught.value.status == 422
    assert json.loads(caught.value.body)["reason"] == "Invalid"

    core.create_namespaced_config_map(namespace, {"metadata": {"name": "ghost"}}, dry_run="All")

    with pytest.raises(kubernetes.client.ApiException) as missing:
        core.read_namespaced_config_map("ghost", namespace)
    assert missing.value.status == 404


def _statefulset(name: str, replicas: int) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "metadata": {"name": name},
        "spec": {
            "serviceName": name,
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "securityContext": objects.restricted_pod_security_context(),
                    "containers": [
                        {
                            "name": "main",
                            "image": "example.invalid/store:1",
                            "securityContext": objects.restricted_container_security_context(),
                        }
                    ],
                },
            },
            "volumeClaimTemplates": [
                {
                    "metadata": {"name": "data"},
                    "spec": {
                        "accessModes": ["ReadWriteOnce"],
                        "resources": {"requests": {"storage": "1Gi"}},
                    },
                }
            ],
        },
    }


def _pods_running(core: Any, namespace: str, app: str, count: int) -> bool:
    pods = core.list_namespaced_pod(namespace, label_selector=f"app={app}").items
    return len(pods) == count and all(p.status.phase == "Running" for p in pods)


def test_statefulset_pods_get_volumes_node_and_run(k8s: cluster.Cluster, namespace: str) -> None:
    """A 2-replica StatefulSet with a claim template ends with Bound PVCs and Running pods."""
    core = kubernetes.client.CoreV1Api(k8s.api_client)
    apps = kubernetes.client.AppsV1Api(k8s.api_client)
    apps.create_namespaced_stateful_set(namespace, _statefulset("store", replicas=2))

    processes.wait_until(
        lambda: _pods_running(core, namespace, "store", 2),
        timeout_s=ROLLOUT_TIMEOUT_S,
        what="2 Running pods of StatefulSet store",
    )

    pods = core.list_namespaced_pod(namespace, label_selector="app=store").items
    assert sorted(p.metadata.name for p in pods) == ["store-0", "store-1"]
    assert {p.spec.node_name for p in pods} == {k8s.settings.node_name}
    claims = core.list_namespaced_persistent_volume_claim(namespace).items
    assert sorted(c.metadata.name for c in claims) == ["data-store-0", "data-store-1"]
    assert {c.status.phase for c in claims} == {"Bound"}
    assert {c.spec.storage_class_name for c in claims} == {k8s.settings.storage_class}
    volume = core.read_persistent_volume(claims[0].spec.volume_name)
    assert volume.spec.claim_ref.name == claims[0].metadata.name
    processes.wait_until(
        lambda: apps.read_namespaced_stateful_set("store", namespace).status.ready_replicas == 2,
        timeout_s=ROLLOUT_TIMEOUT_S,
        what="StatefulSet store reporting 2 ready replicas",
    )


def _volume_gone(core: Any, name: str) -> bool:
    try:
        core.read_persistent_volume(name)
    except kubernetes.client.ApiException as error:
        return bool(error.status == 404)
    return False


def test_claim_gets_a_volume_that_goes_away_with_it(k8s: cluster.Cluster, namespace: str) -> None:
    """A claim with no class gets the default class and a Bound volume, deleted with the claim."""
    core = kubernetes.client.CoreV1Api(k8s.api_client)
    core.create_namespaced_persistent_volume_claim(
        namespace,
        {
            "metadata": {"name": "lone"},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "3Gi"}},
            },
        },
    )
    processes.wait_until(
        lambda: (
            core.read_namespaced_persistent_volume_claim("lone", namespace).status.phase == "Bound"
        ),
        timeout_s=ROLLOUT_TIMEOUT_S,
        what="claim lone Bound",
    )
    claim = core.read_namespaced_persistent_volume_claim("lone", namespace)
    assert claim.spec.storage_class_name == k8s.settings.storage_class
    volume = core.read_persistent_volume(claim.spec.volume_name)
    assert volume.spec.capacity == {"storage": "3Gi"}
    assert volume.spec.claim_ref.uid == claim.metadata.uid

    core.delete_namespaced_persistent_volume_claim("lone", namespace)

    processes.wait_until(
        lambda: _volume_gone(core, claim.spec.volume_name),
        timeout_s=ROLLOUT_TIMEOUT_S,
        what=f"volume {claim.spec.volume_name} deleted with its claim",
    )


def test_kubectl_and_server_report_the_pinned_version(k8s: cluster.Cluster) -> None:
    """kubectl from the wheel talks to the apiserver, and both say Kubernetes v1.36.3."""
    versions = json.loads(k8s.kubectl("version", "-o", "json").stdout)

    assert versions["clientVersion"]["gitVersion"] == K8S_VERSION
    assert versions["serverVersion"]["gitVersion"] == K8S_VERSION


def test_helm_version_comes_from_the_cache(k8s: cluster.Cluster) -> None:
    """The cached helm binary runs and reports the pinned release."""
    result = k8s.helm("version", "--template", "{{.Version}}")

    assert result.stdout.strip() == HELM_VERSION
    assert pathlib.Path(k8s.bin_dir / "helm").is_file()


def _probe_chart(root: pathlib.Path) -> pathlib.Path:
    """Writes a chart that requires Kubernetes >= 1.36 and records the version it sees."""
    chart = root / "probe"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text(
        "apiVersion: v2\nname: probe\nversion: 0.1.0\nkubeVersion: '>=1.36.0-0'\n"
    )
    (chart / "templates" / "cm.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: probe\n"
        "data:\n  kube: {{ .Capabilities.KubeVersion.Version | quote }}\n"
    )
    return chart


def test_helm_template_offline_assumes_kubernetes_1_36(
    k8s: cluster.Cluster, tmp_path: pathlib.Path
) -> None:
    """Offline ``helm template`` accepts a >=1.36 chart: build.sh set helm's KubeVersion."""
    rendered = k8s.helm("template", str(_probe_chart(tmp_path))).stdout

    assert 'kube: "v1.36.0"' in rendered


def test_helm_installs_a_chart_with_a_kube_version_constraint(
    k8s: cluster.Cluster, namespace: str, tmp_path: pathlib.Path
) -> None:
    """helm installs a chart requiring Kubernetes >= 1.36 into the cluster (server version real)."""
    chart = _probe_chart(tmp_path)

    k8s.helm("install", "probe", str(chart), "--namespace", namespace, "--wait")

    core = kubernetes.client.CoreV1Api(k8s.api_client)
    assert core.read_namespaced_config_map("probe", namespace).data == {"kube": K8S_VERSION}


def test_components_listen_and_connect_only_on_loopback(k8s: cluster.Cluster) -> None:
    """Every TCP socket of every component is bound to 127.0.0.0/8 and dials only 127.0.0.0/8."""
    seen = 0
    for process in k8s.processes:
        for sock in sockets.tcp_sockets(process.popen.pid):
            seen += 1
            assert sock.local.is_loopback, (process.name, sock)
            if sock.state == sockets.LISTEN_STATE:
                assert sock.remote.is_unspecified, (process.name, sock)
            else:
                assert sock.remote.is_loopback, (process.name, sock)
    assert seen > len(k8s.processes)  # each component talks to the apiserver or etcd
