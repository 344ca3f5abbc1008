"""The flights SparkApplication (examples/spark/flights-sparkapplication.yaml) on the real
apiserver, with the Kubeflow spark-operator's own ``SparkApplication`` CRD installed from its
published Go module (pinned ``operator_support.SPARK_OPERATOR_VERSION``).

What this proves: the file passes a server-side dry run and is created with nothing pruned by
the CRD's schema; a broken SparkApplication is refused (so the schema really checks); the
ServiceAccount may do everything the spark-operator's chart grants its Spark driver; and the
endpoints are the name-server Service the operator renders for the Broker the chart installs.
What it cannot prove: no spark-operator controller runs and kwok pods run nothing, so no Spark
driver starts here (e2e/test_e2e_realnode_spark.py runs the file with the spark-operator on
real pods; tests/test_spark_image.py runs the job's main file with these arguments).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import kubernetes  # type: ignore[import-untyped]
import pytest
import yaml
from examples import spark as spark_examples

from ariane.operator import model
from e2e import operator_support
from e2e.testenv import cluster

pytestmark = pytest.mark.k8s

GROUP = "sparkoperator.k8s.io"
VERSION = "v1beta2"
SPARK_OPERATOR_RELEASE = "spark-operator"
"""The release name the spark-operator's docs install with (its Spark ServiceAccount is then
``spark-operator-spark``)."""


@pytest.fixture(scope="module")
def crds(k8s: cluster.Cluster) -> Iterator[str]:
    """Ariane's CRDs (the file holds a Topic) and the pinned SparkApplication CRD, Established."""
    operator_support.apply_crds(k8s)
    yield operator_support.apply_spark_operator_crds(k8s)


def _apply(k8s: cluster.Cluster, namespace: str, objects: list[dict[str, Any]], *extra: str) -> Any:
    body = json.dumps({"apiVersion": "v1", "kind": "List", "items": objects})
    return k8s.kubectl(
        "apply", "--server-side", "-n", namespace, "-f", "-", *extra,
        check=False, input_text=body,
    )  # fmt: skip


def _differences(sent: Any, stored: Any, path: str = "spec") -> list[str]:
    """Paths of ``sent`` that ``stored`` lacks or holds with another value (pruned or changed);
    fields only ``stored`` has (schema defaults) are not differences."""
    if isinstance(sent, dict) and isinstance(stored, dict):
        found = [f"{path}.{k} missing" for k in sent if k not in stored]
        for key in sent.keys() & stored.keys():
            found += _differences(sent[key], stored[key], f"{path}.{key}")
        return found
    if isinstance(sent, list) and isinstance(stored, list) and len(sent) == len(stored):
        return [d for i, (a, b) in enumerate(zip(sent, stored, strict=True))
                for d in _differences(a, b, f"{path}[{i}]")]  # fmt: skip
    return [] if sent == stored else [f"{path}: sent {sent!r}, stored {stored!r}"]


def test_spark_application_crd_is_served(k8s: cluster.Cluster, crds: str) -> None:
    """The pinned module's CRD is Established and serves ``SparkApplication`` at v1beta2."""
    crd = json.loads(k8s.kubectl("get", "crd", crds, "-o", "json").stdout)

    assert crds == f"sparkapplications.{GROUP}"
    assert crd["spec"]["names"]["kind"] == "SparkApplication"
    assert [v["name"] for v in crd["spec"]["versions"] if v["served"]] == [VERSION]


def test_manifest_passes_dry_run_and_is_created_unpruned(
    k8s: cluster.Cluster, namespace: str, crds: str
) -> None:
    """Every object of the file passes a server-side dry run, then is created, and the stored
    SparkApplication holds every field the file sets with the value it sets (kubectl asks for
    strict field validation, so an unknown field fails the apply; the comparison also catches
    a value the schema changes or a field it prunes)."""
    objects = spark_examples.manifest_objects()

    dry = _apply(k8s, namespace, objects, "--dry-run=server")
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.count("(server dry run)") == len(objects)
    created = _apply(k8s, namespace, objects)
    assert created.returncode == 0, created.stderr
    custom = kubernetes.client.CustomObjectsApi(k8s.api_client)
    sent = spark_examples.spark_application()
    stored = custom.get_namespaced_custom_object(
        GROUP, VERSION, namespace, "sparkapplications", sent["metadata"]["name"]
    )

    assert _differences(sent["spec"], stored["spec"]) == []


def _break_type(spec: dict[str, Any]) -> None:
    spec["type"] = "Pyton"


def _drop_spark_version(spec: dict[str, Any]) -> None:
    del spec["sparkVersion"]


def _bad_restart_policy(spec: dict[str, Any]) -> None:
    spec["restartPolicy"]["type"] = "Sometimes"


def _text_cores(spec: dict[str, Any]) -> None:
    spec["executor"]["instances"] = "two"


@pytest.mark.parametrize(
    ("breaks", "field"),
    [
        (_break_type, "spec.type"),
        (_drop_spark_version, "spec.sparkVersion"),
        (_bad_restart_policy, "spec.restartPolicy.type"),
        (_text_cores, "spec.executor.instances"),
    ],
)
def test_broken_application_is_refused_naming_the_field(
    k8s: cluster.Cluster, namespace: str, crds: str, breaks: Any, field: str
) -> None:
    """The CRD's schema refuses the SparkApplication with one field broken, naming that field."""
    application = copy.deepcopy(spark_examples.spark_application())
    breaks(application["spec"])

    # --validate=false: kubectl's own check (from the served OpenAPI) is off, so the refusal
    # is the apiserver's, from the CRD's schema.
    result = _apply(k8s, namespace, [application], "--dry-run=server", "--validate=false")

    assert result.returncode != 0
    assert field in result.stderr, result.stderr


def _spark_operator_driver_rules(k8s: cluster.Cluster, namespace: str) -> list[dict[str, Any]]:
    """The rules of the Role the pinned spark-operator chart gives Spark drivers in a job
    namespace (``helm template`` of the chart in the module)."""
    chart = operator_support.spark_operator_dir() / "charts" / "spark-operator-chart"
    text = k8s.helm(
        "template", SPARK_OPERATOR_RELEASE, str(chart), "--namespace", namespace,
        "--set", f"spark.jobNamespaces={{{namespace}}}",
    ).stdout  # fmt: skip
    roles = [
        doc
        for doc in yaml.safe_load_all(text)
        if doc and doc["kind"] == "Role" and doc["metadata"]["name"].endswith("-spark")
    ]
    assert len(roles) == 1, [r["metadata"]["name"] for r in roles]
    rules: list[dict[str, Any]] = roles[0]["rules"]
    return rules


def _can(k8s: cluster.Cluster, namespace: str, account: str, verb: str, resource: str) -> bool:
    result = k8s.kubectl(
        "auth", "can-i", verb, resource, "-n", namespace,
        f"--as=system:serviceaccount:{namespace}:{account}", check=False,
    )  # fmt: skip
    return result.stdout.strip() == "yes"


def test_service_account_may_do_what_the_spark_operator_grants_drivers(
    k8s: cluster.Cluster, namespace: str, crds: str
) -> None:
    """The apiserver's RBAC lets the driver's ServiceAccount do every (verb, resource) of the
    spark-operator chart's driver Role, and nothing on secrets; the namespace's ``default``
    account may not create pods (so the check can say no)."""
    created = _apply(k8s, namespace, spark_examples.manifest_objects())
    assert created.returncode == 0, created.stderr
    account = spark_examples.spark_application()["spec"]["driver"]["serviceAccount"]
    wanted = [
        (verb, resource)
        for rule in _spark_operator_driver_rules(k8s, namespace)
        for resource in rule["resources"]
        for verb in rule["verbs"]
    ]

    assert {"pods", "services", "configmaps"} <= {resource for _, resource in wanted}
    assert [w for w in wanted if not _can(k8s, namespace, account, *w)] == []
    assert not _can(k8s, namespace, account, "get", "secrets")
    assert not _can(k8s, namespace, "default", "create", "pods")


def test_endpoints_are_the_name_server_service_of_the_charts_broker(
    k8s: cluster.Cluster, namespace: str, crds: str
) -> None:
    """With the chart installed with its sample Broker, the job's ``--endpoints`` is the
    name-server Service (name and gRPC port) the operator's model renders for that Broker, the
    Topic names that Broker, and no object pins a namespace (all land beside the Broker)."""
    k8s.helm(
        "install", "rel", operator_support.CHART_DIR.as_posix(), "--namespace", namespace,
        "--set", "sampleBroker.enabled=true",
    )  # fmt: skip
    custom = kubernetes.client.CustomObjectsApi(k8s.api_client)
    (broker,) = custom.list_namespaced_custom_object(
        "ariane.dev", "v1alpha1", namespace, "brokers"
    )["items"]
    owner = model.Owner(broker["metadata"]["name"], namespace, broker["metadata"]["uid"])
    service = model.namesrv_service(owner, broker["spec"])
    grpc = next(p["port"] for p in service["spec"]["ports"] if p["name"] == "grpc")
    arguments = spark_examples.spark_application()["spec"]["arguments"]
    objects = spark_examples.manifest_objects()
    (topic,) = [o for o in objects if o["kind"] == "Topic"]

    assert arguments[arguments.index("--endpoints") + 1] == f"{service['metadata']['name']}:{grpc}"
    assert topic["spec"]["broker"] == owner.name
    assert [o["kind"] for o in objects if "namespace" in o["metadata"]] == []
    k8s.helm("uninstall", "rel", "--namespace", namespace)
