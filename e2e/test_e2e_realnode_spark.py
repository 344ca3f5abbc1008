"""The flights SparkApplication on the real node: the Kubeflow spark-operator runs it on real
driver and executor pods against the chart's sample Broker's pods, and its tables hold the
data set's totals.

Everything runs in pods in one namespace enforcing the ``restricted`` Pod Security Standard:
the Ariane chart with its sample Broker (TLS enforcing, as a user installs it), the
spark-operator's own Helm chart (controller + webhook; pinned module, image built by
build-spark.sh), a producer pod filling ``flights`` with a slice of the data set, and
``examples/spark/flights-sparkapplication.yaml`` applied with kubectl. What the test changes in
that file: the image name, ``--limit`` (the slice), one executor instead of two and small CPU
requests (``coreRequest``: the node has 2 cores; ``cores`` stays 1) — nothing else.
"""

from __future__ import annotations

import collections
import json
import pathlib
import shutil
from typing import Any

import kubernetes  # type: ignore[import-untyped]
import pyarrow.parquet as pq  # type: ignore[import-untyped]  # (pyarrow ships no stubs)
import pytest
from examples import spark as spark_examples
from examples.flights import dataset, spark_job

from e2e import operator_support
from e2e import test_e2e_realnode_chart as chart
from e2e.testenv import objects, processes, realnode

pytestmark = pytest.mark.realnode

FLIGHTS = 1000
"""The slice of the data set sent and checked (the first flights in departure order)."""
APP = "flights-spark"
CLAIM = "ariane-flights-spark"
SPARK_UID = 185
"""The Spark image's user (the official image's ``spark``): owner of the shared volume."""
APP_TIMEOUT_S = 480.0
"""Submission → COMPLETED on a busy 2-core node: two JVMs, 4 micro-batches, read back."""
FAILED_STATES = ("FAILING", "FAILED", "SUBMISSION_FAILED", "INVALIDATING")
CA_FILE = "/etc/ariane/tls/ca.crt"


def _install_spark_operator(node: realnode.RealNode, ns: str, image: str) -> None:
    """``helm install`` of the pinned spark-operator chart watching ``ns``, with the image
    build-spark.sh made; waits until the webhook's configuration carries its CA bundle."""
    registry, rest = image.split("/", 1)
    repository, tag = rest.rsplit(":", 1)
    release = f"spark-operator-{ns}"
    chart_dir = operator_support.spark_operator_dir() / "charts" / "spark-operator-chart"
    node.cluster.helm(
        "install", release, str(chart_dir), "--namespace", ns, "--wait", "--timeout", "3m",
        f"--set=image.registry={registry}", f"--set=image.repository={repository}",
        f"--set=image.tag={tag}", "--set=image.pullPolicy=Never",
        f"--set=spark.jobNamespaces={{{ns}}}", "--set=controller.uiService.enable=false",
    )  # fmt: skip
    # Spark 4.2's submission client also applies a NetworkPolicy per application (its
    # NetworkPolicyFeatureStep), which the pinned chart's controller Role does not grant: a
    # Role for it, as a user of this operator version with Spark 4.2 needs too.
    rule = {"apiGroups": ["networking.k8s.io"], "resources": ["networkpolicies"]}
    rule["verbs"] = ["get", "list", "watch", "create", "update", "patch", "delete"]
    account = {"kind": "ServiceAccount", "name": f"{release}-controller", "namespace": ns}
    ref = {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "spark-networkpolicies"}
    _apply(node, ns, [
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
         "metadata": {"name": ref["name"]}, "rules": [rule]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
         "metadata": {"name": ref["name"]}, "subjects": [account], "roleRef": ref},
    ])  # fmt: skip
    admission = kubernetes.client.AdmissionregistrationV1Api(node.cluster.api_client)

    def ca_bundled() -> bool:
        found = admission.list_mutating_webhook_configuration().items
        hooks = [h for c in found if c.metadata.name.startswith(release) for h in c.webhooks]
        return bool(hooks) and all(h.client_config.ca_bundle for h in hooks)

    processes.wait_until(ca_bundled, timeout_s=120.0, what="the spark-operator webhook's CA")


def _install_ariane(node: realnode.RealNode, ns: str) -> None:
    """``helm install`` of the Ariane chart with its sample Broker, TLS enforcing and ACL off (the
    README's command, with the built image); waits until the Broker is Ready."""
    repository, tag = node.image.rsplit(":", 1)
    node.cluster.helm(
        "install", chart._release(ns), str(operator_support.CHART_DIR), "--namespace", ns,
        "--wait", "--timeout", "3m", "--set=sampleBroker.enabled=true",
        "--set=sampleBroker.auth=false", f"--set=image.repository={repository}",
        f"--set=image.tag={tag}", "--set=image.pullPolicy=Never", "--set=operator.resyncSeconds=2",
        f"--set=operator.watchNamespaces={{{ns}}}",
    )  # fmt: skip
    chart._wait(node, ns, lambda: chart._ready(node, ns), "Broker demo Ready")


def _shared_volume(node: realnode.RealNode, ns: str) -> pathlib.Path:
    """A ReadWriteMany hostPath PersistentVolume bound to the manifest's claim (one node, so a
    host directory is shared storage), owned by the Spark user; its directory."""
    path = node.cluster.work_dir / "volumes" / f"spark-{ns}"
    path.mkdir(parents=True)
    shutil.chown(path, SPARK_UID, SPARK_UID)
    kubernetes.client.CoreV1Api(node.cluster.api_client).create_persistent_volume(
        {
            "metadata": {"name": f"spark-{ns}"},
            "spec": {
                "capacity": {"storage": "1Gi"},
                "accessModes": ["ReadWriteMany"],
                "persistentVolumeReclaimPolicy": "Retain",
                "storageClassName": realnode.STORAGE_CLASS,
                "claimRef": {"namespace": ns, "name": CLAIM},
                "hostPath": {"path": str(path), "type": "Directory"},
            },
        }
    )
    return path


def _manifest(image: str) -> list[dict[str, Any]]:
    """The file's objects with the test's changes (module docstring)."""
    found = spark_examples.manifest_objects()
    (app,) = [o for o in found if o["kind"] == "SparkApplication"]
    spec = app["spec"]
    spec["image"] = image
    spec["arguments"] += ["--limit", str(FLIGHTS)]
    spec["executor"]["instances"] = 1
    spec["driver"]["coreRequest"] = spec["executor"]["coreRequest"] = "200m"
    return found


def _apply(node: realnode.RealNode, ns: str, items: list[dict[str, Any]]) -> None:
    body = json.dumps({"apiVersion": "v1", "kind": "List", "items": items})
    node.cluster.kubectl("apply", "-n", ns, "-f", "-", input_text=body)


def _producer_pod(image: str, attempt: int) -> dict[str, Any]:
    """The README's producer (``examples.flights.worker produce``) over TLS, in a pod of the
    job's image: the first ``FLIGHTS`` flights."""
    command = ["/opt/ariane/venv/bin/python", "-m", "examples.flights.worker", "produce"]
    command += ["--endpoints", "demo-namesrv:9876", "--topic", "flights", "--shard", "0"]
    command += ["--shards", "1", "--limit", str(FLIGHTS), "--threads", "4", "--tls"]
    return {
        "metadata": {"name": f"flights-producer-{attempt}"},
        "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 1,
            "securityContext": objects.restricted_pod_security_context(),
            "containers": [
                {
                    "name": "produce",
                    "image": image,
                    "imagePullPolicy": "Never",
                    "command": command,
                    "env": [
                        {"name": "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH", "value": CA_FILE},
                        {"name": "HOME", "value": "/tmp"},  # the client logs under ~/logs
                    ],
                    "securityContext": objects.restricted_container_security_context(),
                    "volumeMounts": [
                        {"name": "tls", "mountPath": "/etc/ariane/tls"},
                        {"name": "tmp", "mountPath": "/tmp"},
                    ],
                }
            ],
            "volumes": [
                {"name": "tls", "secret": {"secretName": "demo-namesrv-tls"}},
                {"name": "tmp", "emptyDir": {}},
            ],
        },
    }


def _produce(node: realnode.RealNode, ns: str, image: str) -> None:
    """Sends the slice; a new pod while an attempt sent nothing (the topic's route may reach
    the name server a moment after the Topic is Ready); a partial send fails the test (a
    retry would duplicate flights)."""
    logs: list[str] = []

    def attempt() -> bool:
        _, log = realnode.run_pod(node, ns, _producer_pod(image, len(logs)))
        logs.append(log)
        sent = sum(1 for line in log.splitlines() if line.startswith("S "))
        if sent not in (0, FLIGHTS):
            raise processes.StartupError(f"{sent} of {FLIGHTS} flights sent:\n{log[-3000:]}")
        return sent == FLIGHTS

    try:
        processes.wait_until(attempt, timeout_s=180.0, what=f"{FLIGHTS} flights sent")
    except TimeoutError as error:
        raise AssertionError(f"{error}; the last attempt:\n{logs[-1][-3000:]}") from error


def _application(node: realnode.RealNode, ns: str) -> dict[str, Any]:
    found: dict[str, Any] = kubernetes.client.CustomObjectsApi(
        node.cluster.api_client
    ).get_namespaced_custom_object("sparkoperator.k8s.io", "v1beta2", ns, "sparkapplications", APP)
    return found


def _diagnose(node: realnode.RealNode, ns: str) -> str:
    """The application's status, the pods, the spark-operator's and the driver's log tails."""
    kubectl = node.cluster.kubectl
    parts = [json.dumps(_application(node, ns).get("status", {}))[:4000]]
    parts.append(kubectl("get", "pods", "-n", ns, "-o", "wide", check=False).stdout)
    for target in (f"deploy/spark-operator-{ns}-controller", f"{APP}-driver"):
        tail = kubectl("logs", "-n", ns, target, "--tail=60", check=False)
        parts.append(f"--- {target}\n{tail.stdout}{tail.stderr}")
    return "\n".join(parts)


def _wait_completed(node: realnode.RealNode, ns: str) -> dict[str, Any]:
    """Polls the SparkApplication until COMPLETED; fails at the first failure state."""

    def completed() -> bool:
        state = str(
            _application(node, ns).get("status", {}).get("applicationState", {}).get("state")
        )
        if state in FAILED_STATES:  # ends the wait at once (an assertion would be retried)
            raise processes.StartupError(f"{APP} is {state}:\n{_diagnose(node, ns)}")
        return state == "COMPLETED"

    try:
        processes.wait_until(completed, timeout_s=APP_TIMEOUT_S, what=f"{APP} COMPLETED")
    except TimeoutError as error:
        raise AssertionError(f"{error}\n{_diagnose(node, ns)}") from error
    return _application(node, ns)


def _carrier_counts(out: pathlib.Path) -> collections.Counter[str]:
    """Flights per carrier of the ``carriers`` table the job wrote (parquet, read on the host)."""
    counts: collections.Counter[str] = collections.Counter()
    for part in sorted((out / "carriers").glob("*.parquet")):
        for row in pq.read_table(part, columns=["key", "flights"]).to_pylist():
            counts[row["key"]] += row["flights"]
    return counts


def test_flights_sparkapplication_runs_on_real_pods_and_writes_the_data_sets_totals(
    real_node: realnode.RealNode, real_namespace: str, spark_images: realnode.SparkArtifacts
) -> None:
    """The spark-operator (its chart, controller and webhook in pods) submits the manifest's
    SparkApplication; its driver and executor pods, under the restricted standard, read the
    ``flights`` topic of the sample Broker's pods over TLS and COMPLETE, and the per-carrier
    table on the shared volume counts exactly the flights sent, carrier by carrier."""
    node, ns = real_node, real_namespace
    _install_ariane(node, ns)
    _install_spark_operator(node, ns, spark_images.operator_image)
    out = _shared_volume(node, ns)
    manifest = _manifest(spark_images.app_image)
    node.cluster.kubectl(  # the README's first step: only the Topic
        "apply", "-n", ns, "-l", "ariane.dev/step=topic", "-f", str(spark_examples.MANIFEST)
    )
    _produce(node, ns, spark_images.app_image)
    try:
        _apply(node, ns, manifest)
        status = _wait_completed(node, ns)["status"]
        log = realnode.pod_log(node, ns, status["driverInfo"]["podName"])
        want = spark_job.expected(dataset.load_flights()[:FLIGHTS])

        assert len(status.get("executorState", {})) == 1, status  # the executor pod ran
        assert f"matches the data set: {FLIGHTS:,} flights" in " ".join(log.split()), log[-3000:]
        assert _carrier_counts(out / "flights-spark") == want.carriers
        assert sum(want.carriers.values()) == FLIGHTS
    finally:
        kubernetes.client.CoreV1Api(node.cluster.api_client).delete_persistent_volume(f"spark-{ns}")
        shutil.rmtree(out, ignore_errors=True)
