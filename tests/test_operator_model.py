"""The operator's pure model: a Broker spec → the Kubernetes objects that run it."""

from __future__ import annotations

import pathlib
import re
import tomllib
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from ariane.operator import failover, model, resources

ROOT = pathlib.Path(__file__).resolve().parents[1]
OWNER = model.Owner(name="demo", namespace="mq", uid="1234-abcd")
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def _by_key(objects: list[resources.Manifest]) -> dict[tuple[str, str], resources.Manifest]:
    return {(m["kind"], m["metadata"]["name"]): m for m in objects}


def _two_by_two() -> resources.BrokerSpec:
    return {"groups": 2, "replicasPerGroup": 2, "storage": {"size": "5Gi"}}


def test_objects_come_in_apply_order_with_expected_names() -> None:
    """Config and roles first, then the name server, then Service/StatefulSet/PDB per group."""
    objects = model.desired_objects(OWNER, _two_by_two())

    assert [(m["kind"], m["metadata"]["name"]) for m in objects] == [
        ("ConfigMap", "demo-config"),
        ("ConfigMap", "demo-roles"),
        ("Service", "demo-namesrv"),
        ("Service", "demo-namesrv-pods"),
        ("Deployment", "demo-namesrv"),
        ("Service", "demo-a"),
        ("StatefulSet", "demo-a"),
        ("PodDisruptionBudget", "demo-a"),
        ("Service", "demo-b"),
        ("StatefulSet", "demo-b"),
        ("PodDisruptionBudget", "demo-b"),
    ]
    assert {m["metadata"]["namespace"] for m in objects} == {"mq"}


def test_every_object_is_owned_and_labelled() -> None:
    """Each object has the Broker as controller owner and the app.kubernetes.io labels."""
    for manifest in model.desired_objects(OWNER, _two_by_two()):
        meta = manifest["metadata"]
        assert meta["ownerReferences"] == [
            {
                "apiVersion": "ariane.dev/v1alpha1",
                "kind": "Broker",
                "name": "demo",
                "uid": "1234-abcd",
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
        assert meta["labels"]["app.kubernetes.io/instance"] == "demo"
        assert meta["labels"]["app.kubernetes.io/managed-by"] == "ariane-operator"


def test_statefulset_runs_one_broker_per_ordinal() -> None:
    """A group's StatefulSet: replicasPerGroup pods, OnDelete, broker id and role from the pod
    index and the master ordinal of the roles ConfigMap."""
    sts = _by_key(model.desired_objects(OWNER, _two_by_two()))[("StatefulSet", "demo-b")]
    spec = sts["spec"]
    pod = spec["template"]["spec"]
    container = pod["containers"][0]

    assert spec["replicas"] == 2
    assert spec["updateStrategy"] == {"type": "OnDelete"}
    assert spec["serviceName"] == "demo-b"
    assert container["args"] == [
        "broker",
        "--config",
        "/etc/ariane/broker.toml",
        "--broker-name",
        "demo-b",
        "--pod-ordinal",
        "$(ARIANE_POD_INDEX)",
        "--master-ordinal",
        "$(ARIANE_MASTER_ORDINAL)",
        "--advertise",
        "$(POD_NAME).demo-b.mq.svc:8081",
        "--metrics-listen",
        "0.0.0.0:5557",
    ]
    env = {e["name"]: e["valueFrom"] for e in container["env"]}
    assert env["ARIANE_POD_INDEX"] == {
        "fieldRef": {"fieldPath": "metadata.labels['apps.kubernetes.io/pod-index']"}
    }
    assert env["ARIANE_MASTER_ORDINAL"] == {
        "configMapKeyRef": {"name": "demo-roles", "key": "demo-b"}
    }
    assert {"name": "ha", "containerPort": 10912} in container["ports"]
    assert container["readinessProbe"]["tcpSocket"] == {"port": "grpc"}
    assert {"name": "grpc", "containerPort": 8081} in container["ports"]


def test_pods_are_non_root_with_read_only_root() -> None:
    """Broker and name-server pods run as non-root with a read-only root and a /tmp volume."""
    objects = _by_key(model.desired_objects(OWNER, _two_by_two()))
    for key in [("StatefulSet", "demo-a"), ("Deployment", "demo-namesrv")]:
        pod = objects[key]["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True
        container = pod["containers"][0]
        assert container["securityContext"]["readOnlyRootFilesystem"] is True
        assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
        assert {"name": "tmp", "mountPath": "/tmp"} in container["volumeMounts"]


def test_claims_follow_storage_and_delete_claim() -> None:
    """The claim template takes size and class; deleteClaim switches retention to Delete."""
    kept = model.group_statefulset(OWNER, "demo-a", _two_by_two())["spec"]
    spec: resources.BrokerSpec = {
        "storage": {"size": "1Gi", "storageClassName": "fast", "deleteClaim": True}
    }
    deleted = model.group_statefulset(OWNER, "demo-a", spec)["spec"]

    assert kept["volumeClaimTemplates"][0]["spec"]["resources"] == {"requests": {"storage": "5Gi"}}
    assert "storageClassName" not in kept["volumeClaimTemplates"][0]["spec"]
    assert kept["persistentVolumeClaimRetentionPolicy"]["whenDeleted"] == "Retain"
    assert deleted["volumeClaimTemplates"][0]["spec"]["storageClassName"] == "fast"
    assert deleted["persistentVolumeClaimRetentionPolicy"] == {
        "whenDeleted": "Delete",
        "whenScaled": "Retain",
    }
    assert "ownerReferences" not in deleted["volumeClaimTemplates"][0]["metadata"]


def test_default_anti_affinity_separates_a_groups_pods_and_can_be_replaced() -> None:
    """By default pods of one group prefer different nodes; spec.affinity replaces that."""
    pod = model.group_statefulset(OWNER, "demo-a", {})["spec"]["template"]["spec"]
    term = pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    custom = {"nodeAffinity": {"x": 1}}
    replaced = model.group_statefulset(OWNER, "demo-a", {"affinity": custom})

    assert term[0]["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    assert term[0]["podAffinityTerm"]["labelSelector"]["matchLabels"][model.GROUP_LABEL] == (
        "demo-a"
    )
    assert replaced["spec"]["template"]["spec"]["affinity"] == custom


def test_config_map_holds_a_broker_toml_the_broker_can_read() -> None:
    """broker.toml parses as TOML, points at the name-server pods (headless Service, every
    address) and merges spec.config."""
    spec: resources.BrokerSpec = {
        "flushDiskType": "SYNC_FLUSH",
        "config": {"register_interval_ms": 10_000, "store": {"flush_interval_ms": 200}},
    }
    text = model.config_map(OWNER, spec)["data"]["broker.toml"]

    parsed = tomllib.loads(text)

    assert parsed["cluster"] == "demo"
    assert parsed["listen"] == "0.0.0.0:8081"
    assert parsed["namesrv"] == ["demo-namesrv-pods.mq.svc:9876"]
    assert parsed["namesrv_resolve_all"] is True
    assert parsed["store_dir"] == "/var/lib/ariane/store"
    assert parsed["register_interval_ms"] == 10_000
    assert parsed["store"] == {"flush_disk_type": "SYNC_FLUSH", "flush_interval_ms": 200}


def test_config_may_not_override_operator_owned_keys() -> None:
    """spec.config setting broker_id (the operator's business) is a SpecError naming it."""
    with pytest.raises(model.SpecError, match="broker_id"):
        model.desired_objects(OWNER, {"config": {"broker_id": 3}})


def test_config_change_changes_the_pod_template_hash() -> None:
    """A different broker.toml gives a different config-hash annotation (an out-of-date pod)."""

    def annotation(spec: resources.BrokerSpec) -> str:
        sts = model.group_statefulset(OWNER, "demo-a", spec)
        return str(sts["spec"]["template"]["metadata"]["annotations"][model.CONFIG_HASH_ANNOTATION])

    assert annotation({}) == annotation({})
    assert annotation({}) != annotation({"flushDiskType": "SYNC_FLUSH"})


def test_pdb_allows_one_pod_of_a_group_down() -> None:
    """Each group's PDB selects exactly that group's pods with maxUnavailable 1."""
    pdb = model.group_pdb(OWNER, "demo-a")

    assert pdb["spec"]["maxUnavailable"] == 1
    assert pdb["spec"]["selector"]["matchLabels"][model.GROUP_LABEL] == "demo-a"


def test_monitoring_objects_only_when_asked() -> None:
    """ServiceMonitor and PrometheusRule appear only with their metrics flags."""
    plain = model.keys(model.desired_objects(OWNER, {}))
    spec: resources.BrokerSpec = {"metrics": {"serviceMonitor": True, "prometheusRule": True}}
    monitored = model.desired_objects(OWNER, spec)

    kinds = [m["kind"] for m in monitored]
    assert "ServiceMonitor" not in {k[1] for k in plain}
    assert kinds[-2:] == ["ServiceMonitor", "PrometheusRule"]
    assert monitored[-2]["spec"]["endpoints"][0]["port"] == "metrics"


def test_service_monitor_selects_the_port_every_pod_serves_metrics_on() -> None:
    """The ServiceMonitor selects the broker and name-server Services, each has a ``metrics``
    port, and the pods behind it run with ``--metrics-listen`` on that very port."""
    spec: resources.BrokerSpec = {"metrics": {"serviceMonitor": True, "port": 6000}}
    objects = model.desired_objects(OWNER, spec)
    (monitor,) = [o for o in objects if o["kind"] == "ServiceMonitor"]
    wanted = monitor["spec"]["selector"]["matchLabels"]
    endpoint_port = monitor["spec"]["endpoints"][0]["port"]
    absent = {e["key"] for e in monitor["spec"]["selector"]["matchExpressions"]}
    assert absent == {"ariane.dev/discovery"}
    services = [
        o
        for o in objects
        if o["kind"] == "Service"
        and wanted.items() <= o["metadata"]["labels"].items()
        and not absent & o["metadata"]["labels"].keys()
    ]
    components = {s["metadata"]["labels"]["app.kubernetes.io/component"] for s in services}
    assert components == {"broker", "namesrv"}
    for service in services:
        (port,) = [p for p in service["spec"]["ports"] if p["name"] == endpoint_port]
        assert port["port"] == 6000
    pods = [
        o["spec"]["template"]["spec"]["containers"][0]
        for o in objects
        if o["kind"] in ("StatefulSet", "Deployment")
    ]
    for container in pods:
        named = {p["name"]: p["containerPort"] for p in container["ports"]}
        args = container["args"]
        listen = args[args.index("--metrics-listen") + 1]
        assert named["metrics"] == 6000 and listen == "0.0.0.0:6000"


def test_namesrv_deployment_and_service() -> None:
    """The name server listens on 9876 in the pod, and its Service selects only its pods."""
    objects = _by_key(model.desired_objects(OWNER, {"nameServer": {"replicas": 3}}))
    deployment = objects[("Deployment", "demo-namesrv")]["spec"]
    service = objects[("Service", "demo-namesrv")]["spec"]

    assert deployment["replicas"] == 3
    assert deployment["template"]["spec"]["containers"][0]["args"] == [
        "namesrv",
        "--listen",
        "0.0.0.0:9876",
        "--metrics-listen",
        "0.0.0.0:5557",
    ]
    assert service["selector"]["app.kubernetes.io/component"] == "namesrv"
    assert service["ports"] == [
        {"name": "grpc", "port": 9876, "targetPort": "grpc"},
        {"name": "metrics", "port": 5557, "targetPort": "metrics"},
    ]


def test_bad_group_counts_and_names_are_spec_errors() -> None:
    """0 or 27 groups, or a too-long Broker name, raise SpecError rather than bad objects."""
    with pytest.raises(model.SpecError, match="groups"):
        model.group_names("demo", 27)
    with pytest.raises(model.SpecError, match="groups"):
        model.group_names("demo", 0)
    with pytest.raises(model.SpecError, match="40"):
        model.desired_objects(model.Owner("x" * 41, "mq", "u"), {})


def _crd_default(kind_file: str, *path: str) -> Any:
    crd = yaml.safe_load((ROOT / "crds" / kind_file).read_text())
    node = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    for key in path:
        node = node["properties"][key]
    return node["default"]


def test_model_defaults_equal_the_crd_defaults() -> None:
    """The defaults the model assumes for an undefaulted spec are the CRD's defaults."""
    brokers = "ariane.dev_brokers.yaml"
    assert _crd_default(brokers, "image") == resources.DEFAULT_IMAGE
    assert _crd_default(brokers, "imagePullPolicy") == resources.DEFAULT_PULL_POLICY
    assert _crd_default(brokers, "groups") == resources.DEFAULT_GROUPS
    assert _crd_default(brokers, "replicasPerGroup") == resources.DEFAULT_REPLICAS_PER_GROUP
    assert _crd_default(brokers, "brokerRole") == resources.DEFAULT_BROKER_ROLE
    assert _crd_default(brokers, "flushDiskType") == resources.DEFAULT_FLUSH_DISK_TYPE
    assert _crd_default(brokers, "storage", "size") == resources.DEFAULT_STORAGE_SIZE
    assert _crd_default(brokers, "metrics", "port") == resources.DEFAULT_METRICS_PORT
    assert _crd_default(brokers, "nameServer", "replicas") == resources.DEFAULT_NAMESRV_REPLICAS
    assert (
        _crd_default(brokers, "failover", "masterDownTimeoutSeconds")
        == failover.DEFAULT_MASTER_DOWN_TIMEOUT_S
    )
    assert _crd_default(brokers, "tls", "mode") == resources.DEFAULT_TLS_MODE
    assert _crd_default(brokers, "tls", "clientAuth") == resources.DEFAULT_CLIENT_AUTH
    assert (
        _crd_default(brokers, "tls", "certificateValidityDays")
        == resources.DEFAULT_CERTIFICATE_VALIDITY_DAYS
    )
    assert _crd_default(brokers, "tls", "caValidityDays") == resources.DEFAULT_CA_VALIDITY_DAYS


broker_names = st.from_regex(r"\A[a-z]([-a-z0-9]{0,38}[a-z0-9])?\Z")
specs = st.fixed_dictionaries(
    {},
    optional={
        "groups": st.integers(1, resources.GROUPS_MAX),
        "replicasPerGroup": st.integers(1, resources.REPLICAS_PER_GROUP_MAX),
        "flushDiskType": st.sampled_from(["ASYNC_FLUSH", "SYNC_FLUSH"]),
        "storage": st.fixed_dictionaries(
            {"size": st.sampled_from(["1Gi", "500Mi"]), "deleteClaim": st.booleans()}
        ),
        "metrics": st.fixed_dictionaries(
            {"serviceMonitor": st.booleans(), "prometheusRule": st.booleans()}
        ),
    },
)


@settings(max_examples=60, deadline=None)
@given(name=broker_names, spec=specs)
def test_model_is_deterministic_and_names_are_dns_labels(name: str, spec: Any) -> None:
    """For any admitted name and spec: same output twice, and every name (pods too) is a label."""
    owner = model.Owner(name=name, namespace="ns", uid="u")

    first = model.desired_objects(owner, spec)
    second = model.desired_objects(owner, spec)

    assert first == second
    replicas = spec.get("replicasPerGroup", 1)
    for manifest in first:
        object_name = manifest["metadata"]["name"]
        assert DNS_LABEL.match(object_name) and len(object_name) <= 63, object_name
        if manifest["kind"] == "StatefulSet":
            last_pod = f"{object_name}-{replicas - 1}"
            assert DNS_LABEL.match(last_pod) and len(last_pod) <= 52, last_pod
    assert len(model.keys(first)) == len(set(model.keys(first)))


@pytest.mark.parametrize(
    ("container_resources", "workers"),
    [
        ({"limits": {"cpu": "4"}, "requests": {"cpu": "1"}}, 4),
        ({"requests": {"cpu": "1500m"}}, 2),
        ({"limits": {"cpu": 1}}, 0),
        ({"requests": {"cpu": "500m"}}, 0),
        ({"requests": {"memory": "1Gi"}}, None),
    ],
)
def test_front_end_workers_follow_the_pods_cpus(
    container_resources: dict[str, dict[str, object]], workers: int | None
) -> None:
    """broker.toml's workers: ceil(limit, else request) CPUs, 0 for one CPU, absent if unset."""
    parsed = tomllib.loads(
        model.config_map(OWNER, {"resources": container_resources})["data"]["broker.toml"]
    )
    assert parsed.get("workers") == workers
    explicit: resources.BrokerSpec = {"resources": container_resources, "config": {"workers": 3}}
    assert tomllib.loads(model.config_map(OWNER, explicit)["data"]["broker.toml"])["workers"] == 3
    with pytest.raises(model.SpecError, match="CPU quantity"):
        model.cpu_count("two")
