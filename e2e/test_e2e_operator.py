"""The real operator process (``python -m ariane operator``) against the real apiserver.

One operator and one loopback cluster (``ariane.dev.dev_cluster``: name server + broker on
127.0.0.1) serve the whole module; the operator reaches that name server through the override
seam (``operator_settings.NAMESRV_OVERRIDES_ENV``), never a cluster address. Each test works
in its own namespace.

Own cluster: the operator under test must reach a name server through its override seam; one
loopback cluster serves the module.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import pathlib
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import kubernetes  # type: ignore[import-untyped]
import pytest

from ariane import dev
from ariane.client import admin
from ariane.operator import handlers, model, status
from ariane.operator import settings as operator_settings
from e2e import operator_support
from e2e.testenv import cluster, objects, processes

pytestmark = pytest.mark.k8s

WAIT_S = 90.0
RESYNC_S = 2


@pytest.fixture(scope="module")
def loopback(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dev.DevEndpoints]:
    """A name server and a broker on 127.0.0.1 standing in for a Broker's pods."""
    with dev.dev_cluster(tmp_path_factory.mktemp("loopback"), namesrv_port=0) as endpoints:
        yield endpoints


Running = operator_support.Running


@contextlib.contextmanager
def _run_operator(
    k8s: cluster.Cluster,
    loopback: dev.DevEndpoints,
    log_path: pathlib.Path,
    namespace_glob: str,
    resync_s: int = RESYNC_S,
) -> Iterator[operator_support.Running]:
    """``ariane operator --standalone --namespace GLOB`` as a child process, stopped by PID."""
    env = {operator_settings.NAMESRV_OVERRIDES_ENV: json.dumps({"*": loopback.namesrv})}
    with operator_support.run_operator(
        k8s, log_path, namespace_glob, env=env, resync_s=resync_s
    ) as running:
        yield running


@pytest.fixture(scope="module")
def operator(
    k8s: cluster.Cluster, loopback: dev.DevEndpoints, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Running]:
    """One operator for the module, watching the per-test namespaces (``t-*``)."""
    log_path = tmp_path_factory.mktemp("operator") / "operator.log"
    operator_support.apply_monitoring_crds(k8s)  # before the operator reads the API groups
    with _run_operator(k8s, loopback, log_path, "t-*") as running:
        _warm_up(k8s)
        yield running


WARM_UP_ATTEMPTS = 4
WARM_UP_WAIT_S = 20.0


def _has_condition(k8s: cluster.Cluster, namespace: str, kind: str) -> bool:
    return _condition(_get(k8s, namespace, "topics", "warm-up"), kind) is not None


def _warm_up(k8s: cluster.Cluster) -> None:
    """Wait until the operator handles objects in a new ``t-*`` namespace before any test.

    Right after start, kopf may not yet watch a namespace created at that moment (its
    namespace observer and watch streams come up asynchronously); a test object applied then
    was seen to stay unhandled. Each attempt uses a fresh namespace with a Topic naming a
    Broker that does not exist: a live operator marks it Degraded (BrokerNotFound) at once.
    """
    core = kubernetes.client.CoreV1Api(k8s.api_client)
    for attempt in range(WARM_UP_ATTEMPTS):
        name = f"t-warmup-{uuid.uuid4().hex[:8]}"
        labels = objects.RESTRICTED_NAMESPACE_LABELS
        core.create_namespace({"metadata": {"name": name, "labels": labels}})
        topic = {
            "apiVersion": "ariane.dev/v1alpha1",
            "kind": "Topic",
            "metadata": {"name": "warm-up"},
            "spec": {"broker": "absent", "queues": 1},
        }
        try:
            _apply(k8s, name, topic)
            processes.wait_until(
                functools.partial(_has_condition, k8s, name, status.DEGRADED),
                timeout_s=WARM_UP_WAIT_S,
                what=f"the operator to handle a Topic in {name} (attempt {attempt + 1})",
            )
            return
        except TimeoutError:
            continue
        finally:
            with contextlib.suppress(Exception):
                _custom(k8s).delete_namespaced_custom_object(
                    "ariane.dev", "v1alpha1", name, "topics", "warm-up"
                )
            core.delete_namespace(name)
    raise AssertionError(f"the operator handled nothing in {WARM_UP_ATTEMPTS} warm-up namespaces")


def _custom(k8s: cluster.Cluster) -> Any:
    return kubernetes.client.CustomObjectsApi(k8s.api_client)


def _apply(k8s: cluster.Cluster, namespace: str, body: dict[str, Any]) -> None:
    k8s.kubectl("apply", "-n", namespace, "-f", "-", input_text=json.dumps(body))


def _get(k8s: cluster.Cluster, namespace: str, plural: str, name: str) -> dict[str, Any]:
    found: dict[str, Any] = _custom(k8s).get_namespaced_custom_object(
        "ariane.dev", "v1alpha1", namespace, plural, name
    )
    return found


def _condition(body: dict[str, Any], kind: str) -> str | None:
    for cond in body.get("status", {}).get("conditions", []):
        if cond["type"] == kind:
            return str(cond["status"])
    return None


def _broker(namespace: str, **annotations: str) -> dict[str, Any]:
    return {
        "apiVersion": "ariane.dev/v1alpha1",
        "kind": "Broker",
        "metadata": {"name": "demo", "annotations": annotations},
        "spec": {"groups": 1, "replicasPerGroup": 2, "storage": {"size": "1Gi"}},
    }


def test_operator_applies_broker_and_reports_ready(
    k8s: cluster.Cluster, namespace: str, operator: Running
) -> None:
    """A Broker gets its objects, Ready once kwok's pods are ready, diff base in status."""
    _apply(k8s, namespace, _broker(namespace))
    apps = kubernetes.client.AppsV1Api(k8s.api_client)

    _wait_condition(k8s, namespace, "brokers", "demo", status.READY, "True")
    body = _get(k8s, namespace, "brokers", "demo")
    assert body["status"]["observedGeneration"] == body["metadata"]["generation"]
    assert apps.read_namespaced_stateful_set("demo-a", namespace).spec.replicas == 2
    processes.wait_until(  # pods are listed before readiness is read: one more run at most
        lambda: all(
            p["ready"]
            for p in _get(k8s, namespace, "brokers", "demo")["status"]["groups"][0]["pods"]
        ),
        timeout_s=WAIT_S,
        what="pods ready in status",
    )
    body = _get(k8s, namespace, "brokers", "demo")
    assert body["status"]["groups"] == [
        {
            "name": "demo-a",
            "statefulSet": "demo-a",
            "readyPods": 2,
            "masterPod": "demo-a-0",
            "pods": [
                {"name": "demo-a-0", "brokerId": 0, "role": "ASYNC_MASTER", "ready": True},
                {"name": "demo-a-1", "brokerId": 1, "role": "SLAVE", "ready": True},
            ],
        }
    ]
    assert body["status"]["nameServerAddress"] == f"demo-namesrv.{namespace}.svc:9876"
    assert _condition(body, status.PROGRESSING) == "False"
    assert _condition(body, status.PAUSED) == "False"
    assert body["metadata"]["finalizers"] == [handlers.FINALIZER]
    assert "diffbase" in body["status"]["kopf"]
    assert not [a for a in body["metadata"].get("annotations", {}) if "kopf" in a]
    processes.wait_until(  # kopf posts events from a background queue
        lambda: "Applied" in _reasons(k8s, namespace, "Broker"),
        timeout_s=WAIT_S,
        what="Applied event on the Broker",
    )


METRICS_PORT = 5599
"""A non-default metrics port, so the test sees it carried from the spec to every place."""


def test_the_tls_service_monitor_is_admitted(
    k8s: cluster.Cluster, namespace: str, operator: Running
) -> None:
    """The ServiceMonitor of a TLS-enforcing Broker (``scheme: https``, ``tlsConfig`` naming
    Secrets, per-component ``relabelings``) passes the pinned CRD's strict validation on the
    real apiserver (server-side dry run: an unknown or misspelt field is refused)."""
    owner = model.Owner(name="demo", namespace=namespace, uid="u")
    monitor = model.service_monitor(owner, {"tls": {"mode": "enforcing"}})
    monitor["metadata"] = {"name": "demo-tls", "namespace": namespace}
    assert {e.get("scheme") for e in monitor["spec"]["endpoints"]} == {"https"}
    done = k8s.kubectl(
        "apply", "--dry-run=server", "--validate=strict", "-n", namespace, "-f", "-",
        check=False, input_text=json.dumps(monitor),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr


def test_service_monitor_selects_the_ports_that_serve_metrics(
    k8s: cluster.Cluster, namespace: str, operator: Running
) -> None:
    """With ``metrics.serviceMonitor`` the operator creates a ServiceMonitor (and with
    ``prometheusRule`` a PrometheusRule) on the real apiserver, whose selector picks the
    Broker's name-server and broker Services and whose endpoint port is, in each Service and in
    its EndpointSlices, the pods' container port that ``--metrics-listen`` binds."""
    body = _broker(namespace)
    body["spec"]["metrics"] = {
        "port": METRICS_PORT,
        "serviceMonitor": True,
        "prometheusRule": True,
    }
    _apply(k8s, namespace, body)
    custom = _custom(k8s)

    def monitoring(plural: str) -> dict[str, Any] | None:
        try:
            found: dict[str, Any] = custom.get_namespaced_custom_object(
                "monitoring.coreos.com", "v1", namespace, plural, "demo"
            )
        except kubernetes.client.ApiException as error:
            if error.status == 404:
                return None
            raise
        return found

    processes.wait_until(  # one reconcile applies both, one after the other
        lambda: (
            monitoring("servicemonitors") is not None and monitoring("prometheusrules") is not None
        ),
        timeout_s=WAIT_S,
        what="ServiceMonitor and PrometheusRule demo",
    )
    monitor = monitoring("servicemonitors")
    assert monitor is not None
    assert monitoring("prometheusrules") is not None
    selector = monitor["spec"]["selector"]["matchLabels"]
    [endpoint] = monitor["spec"]["endpoints"]
    assert endpoint["path"] == "/metrics"
    core = kubernetes.client.CoreV1Api(k8s.api_client)
    absent = [f"!{e['key']}" for e in monitor["spec"]["selector"]["matchExpressions"]]
    services = core.list_namespaced_service(
        namespace, label_selector=",".join([*(f"{k}={v}" for k, v in selector.items()), *absent])
    ).items
    assert sorted(s.metadata.name for s in services) == ["demo-a", "demo-namesrv"]
    for service in services:
        [port] = [p for p in service.spec.ports if p.name == endpoint["port"]]
        assert port.port == METRICS_PORT
        _assert_pods_serve_metrics_on(core, namespace, service, port.target_port)
        _wait_endpoint_slice_port(k8s, namespace, service.metadata.name, endpoint["port"])


def _assert_pods_serve_metrics_on(
    core: Any, namespace: str, service: Any, target_port: str
) -> None:
    """Every pod the Service selects names ``target_port`` and binds it with --metrics-listen."""
    selector = ",".join(f"{k}={v}" for k, v in service.spec.selector.items())

    def pods() -> list[Any]:
        return list(core.list_namespaced_pod(namespace, label_selector=selector).items)

    processes.wait_until(
        lambda: bool(pods()), timeout_s=WAIT_S, what=f"pods of Service {service.metadata.name}"
    )
    for pod in pods():
        [container] = pod.spec.containers
        [named] = [p for p in container.ports if p.name == target_port]
        assert named.container_port == METRICS_PORT
        listen = container.args[container.args.index("--metrics-listen") + 1]
        assert listen == f"0.0.0.0:{METRICS_PORT}", pod.metadata.name


def _wait_endpoint_slice_port(
    k8s: cluster.Cluster, namespace: str, service: str, name: str
) -> None:
    """The Service's EndpointSlices (what Prometheus discovers) carry port ``name`` with the
    metrics port number."""
    discovery = kubernetes.client.DiscoveryV1Api(k8s.api_client)

    def ports() -> list[tuple[str, int]]:
        slices = discovery.list_namespaced_endpoint_slice(
            namespace, label_selector=f"kubernetes.io/service-name={service}"
        ).items
        return [(p.name, p.port) for s in slices if s.endpoints for p in s.ports or ()]

    processes.wait_until(
        lambda: (name, METRICS_PORT) in ports(),
        timeout_s=WAIT_S,
        what=f"port {name}={METRICS_PORT} in the EndpointSlices of {service} (got {ports()})",
    )


def test_timer_reverts_drift(k8s: cluster.Cluster, namespace: str, operator: Running) -> None:
    """A hand-scaled StatefulSet is scaled back by the resync timer without any CR change."""
    _apply(k8s, namespace, _broker(namespace))
    apps = kubernetes.client.AppsV1Api(k8s.api_client)
    processes.wait_until(
        lambda: apps.read_namespaced_stateful_set("demo-a", namespace) is not None,
        timeout_s=WAIT_S,
        what="StatefulSet demo-a",
    )
    apps.patch_namespaced_stateful_set("demo-a", namespace, {"spec": {"replicas": 4}})
    processes.wait_until(
        lambda: apps.read_namespaced_stateful_set("demo-a", namespace).spec.replicas == 2,
        timeout_s=WAIT_S,
        what="StatefulSet demo-a scaled back to 2",
    )


def test_paused_broker_is_left_alone_and_says_so(
    k8s: cluster.Cluster, namespace: str, operator: Running
) -> None:
    """A Broker created paused gets no objects and ReconciliationPaused True; unpaused, it does."""
    _apply(k8s, namespace, _broker(namespace, **{status.PAUSE_ANNOTATION: "true"}))
    processes.wait_until(
        lambda: _condition(_get(k8s, namespace, "brokers", "demo"), status.PAUSED) == "True",
        timeout_s=WAIT_S,
        what="ReconciliationPaused True",
    )
    apps = kubernetes.client.AppsV1Api(k8s.api_client)
    assert apps.list_namespaced_stateful_set(namespace).items == []
    _apply(k8s, namespace, _broker(namespace, **{status.PAUSE_ANNOTATION: "false"}))
    processes.wait_until(
        lambda: len(apps.list_namespaced_stateful_set(namespace).items) == 1,
        timeout_s=WAIT_S,
        what="StatefulSet created once unpaused",
    )
    _wait_condition(k8s, namespace, "brokers", "demo", status.PAUSED, "False")


def _topics(namesrv: str) -> set[str]:
    async def listing() -> set[str]:
        async with admin.AdminClient(namesrv) as client:
            return {t.name for t in await client.list_topics()}

    return asyncio.run(listing())


def _groups(namesrv: str) -> set[str]:
    async def listing() -> set[str]:
        async with admin.AdminClient(namesrv) as client:
            return {g.name for g in await client.list_groups()}

    return asyncio.run(listing())


def test_topic_and_group_reach_the_broker_and_leave_with_the_cr(
    k8s: cluster.Cluster, namespace: str, operator: Running, loopback: dev.DevEndpoints
) -> None:
    """Topic and ConsumerGroup CRs are created on the broker with route/lag in status; deleting
    them deletes them from the broker (finalizer)."""
    topic, group = f"orders-{namespace}", f"billing-{namespace}"
    _apply(k8s, namespace, _broker(namespace))
    meta_topic = {"name": "orders", "annotations": {}}
    _apply(
        k8s,
        namespace,
        {
            "apiVersion": "ariane.dev/v1alpha1",
            "kind": "Topic",
            "metadata": meta_topic,
            "spec": {"broker": "demo", "topicName": topic, "queues": 4},
        },
    )
    billing: dict[str, Any] = {
        "apiVersion": "ariane.dev/v1alpha1",
        "kind": "ConsumerGroup",
        "metadata": {"name": "billing"},
        "spec": {"broker": "demo", "groupName": group, "consumeOrderly": True},
    }
    _apply(k8s, namespace, billing)
    processes.wait_until(lambda: topic in _topics(loopback.namesrv), timeout_s=WAIT_S, what=topic)
    processes.wait_until(lambda: group in _groups(loopback.namesrv), timeout_s=WAIT_S, what=group)
    processes.wait_until(
        lambda: _condition(_get(k8s, namespace, "topics", "orders"), status.READY) == "True",
        timeout_s=WAIT_S,
        what="Topic Ready",
    )
    processes.wait_until(
        lambda: _condition(_get(k8s, namespace, "consumergroups", "billing"), "Ready") == "True",
        timeout_s=WAIT_S,
        what="ConsumerGroup Ready",
    )
    processes.wait_until(
        lambda: "Applied" in _reasons(k8s, namespace, "Topic"),
        timeout_s=WAIT_S,
        what="Applied event on the Topic",
    )
    route = _get(k8s, namespace, "topics", "orders")["status"]["route"]
    assert [(r["readQueues"], r["writeQueues"], r["perm"]) for r in route] == [(4, 4, 6)]
    assert route[0]["masterAddress"] == loopback.broker
    cg = _get(k8s, namespace, "consumergroups", "billing")["status"]
    assert (cg["groupName"], cg["totalLag"], cg["lag"]) == (group, 0, [])
    billing["spec"]["resetOffset"] = {"requestId": "r1", "to": "Earliest", "topic": topic}
    _apply(k8s, namespace, billing)
    processes.wait_until(  # applied once: the group now has offsets on the topic's queues
        lambda: (
            _get(k8s, namespace, "consumergroups", "billing")["status"]
            .get("lastResetOffset", {})
            .get("requestId")
            == "r1"
        ),
        timeout_s=WAIT_S,
        what="resetOffset r1 applied",
    )
    processes.wait_until(
        lambda: (
            [e["topic"] for e in _get(k8s, namespace, "consumergroups", "billing")["status"]["lag"]]
            == [topic]
        ),
        timeout_s=WAIT_S,
        what="lag listed for the reset topic",
    )

    custom = _custom(k8s)
    custom.delete_namespaced_custom_object("ariane.dev", "v1alpha1", namespace, "topics", "orders")
    custom.delete_namespaced_custom_object(
        "ariane.dev", "v1alpha1", namespace, "consumergroups", "billing"
    )
    processes.wait_until(
        lambda: topic not in _topics(loopback.namesrv), timeout_s=WAIT_S, what="topic deleted"
    )
    processes.wait_until(
        lambda: group not in _groups(loopback.namesrv), timeout_s=WAIT_S, what="group deleted"
    )


def _delete_and_wait(
    k8s: cluster.Cluster, namespace: str, plural: str, name: str, what: str
) -> None:
    custom = _custom(k8s)
    custom.delete_namespaced_custom_object("ariane.dev", "v1alpha1", namespace, plural, name)
    processes.wait_until(
        lambda: (
            not custom.list_namespaced_custom_object("ariane.dev", "v1alpha1", namespace, plural)[
                "items"
            ]
        ),
        timeout_s=WAIT_S,
        what=what,
    )


def _wait_condition(
    k8s: cluster.Cluster, namespace: str, plural: str, name: str, kind: str, value: str
) -> dict[str, Any]:
    try:
        processes.wait_until(
            lambda: _condition(_get(k8s, namespace, plural, name), kind) == value,
            timeout_s=WAIT_S,
            what=f"{plural}/{name} {kind}={value}",
        )
    except TimeoutError as error:  # say what the operator saw, and the pods
        pods = k8s.kubectl("get", "pods", "-n", namespace, "-o", "wide", check=False).stdout
        seen = json.dumps(_get(k8s, namespace, plural, name).get("status", {}), indent=1)
        raise AssertionError(f"{error}\nstatus: {seen}\npods:\n{pods}") from error
    return _get(k8s, namespace, plural, name)


def _reasons(k8s: cluster.Cluster, namespace: str, kind: str) -> list[str]:
    events = kubernetes.client.CoreV1Api(k8s.api_client).list_namespaced_event(namespace)
    return [
        e.reason
        for e in events.items
        for _ in range(e.count or 1)
        if e.involved_object.kind == kind
    ]


def test_own_status_patches_do_not_retrigger_change_handlers(
    k8s: cluster.Cluster, namespace: str, operator: Running
) -> None:
    """Timer status writes (Ready flips later) never re-run the change handler, and every status
    field the operator writes is declared, so kopf never reports a pruned patch."""
    _apply(k8s, namespace, _broker(namespace))
    _wait_condition(k8s, namespace, "brokers", "demo", status.READY, "True")
    apps = kubernetes.client.AppsV1Api(k8s.api_client)
    apps.patch_namespaced_stateful_set("demo-a", namespace, {"spec": {"replicas": 3}})
    processes.wait_until(  # one more timer run after Ready was written
        lambda: apps.read_namespaced_stateful_set("demo-a", namespace).spec.replicas == 2,
        timeout_s=WAIT_S,
        what="StatefulSet demo-a scaled back to 2",
    )

    assert _reasons(k8s, namespace, "Broker").count("Applied") == 1
    log = operator.log_path.read_text()
    assert "inconsistencies" not in log
    assert "Patching failed" not in log


def test_liveness_and_metrics_are_served(
    k8s: cluster.Cluster, namespace: str, operator: Running
) -> None:
    """The liveness endpoint answers with the probe's value; /metrics counts reconciliations."""
    _apply(k8s, namespace, _broker(namespace))
    _wait_condition(k8s, namespace, "brokers", "demo", status.PAUSED, "False")

    with urllib.request.urlopen(operator.liveness_url, timeout=10) as answer:
        probes = json.loads(answer.read())
    with urllib.request.urlopen(operator.metrics_url, timeout=10) as answer:
        metrics = answer.read().decode()

    assert probes["last_success_age_s"] >= 0
    assert 'ariane_operator_reconciliations_total{kind="Broker"}' in metrics
    assert "ariane_operator_reconciliation_duration_seconds_bucket" in metrics


def test_topic_waits_for_its_broker_and_is_released_when_the_broker_is_gone(
    k8s: cluster.Cluster, namespace: str, operator: Running, loopback: dev.DevEndpoints
) -> None:
    """A Topic without its Broker is Degraded (BrokerNotFound) and converges once the Broker
    exists; after the Broker is deleted, deleting the Topic does not hang on the finalizer."""
    topic = f"late-{namespace}"
    body = {
        "apiVersion": "ariane.dev/v1alpha1",
        "kind": "Topic",
        "metadata": {"name": "late"},
        "spec": {"broker": "demo", "topicName": topic},
    }
    _apply(k8s, namespace, body)
    degraded = _wait_condition(k8s, namespace, "topics", "late", status.DEGRADED, "True")
    reasons = {c["type"]: c["reason"] for c in degraded["status"]["conditions"]}
    assert reasons[status.READY] == "BrokerNotFound"

    _apply(k8s, namespace, _broker(namespace))
    _wait_condition(k8s, namespace, "topics", "late", status.READY, "True")
    assert topic in _topics(loopback.namesrv)

    _delete_and_wait(k8s, namespace, "brokers", "demo", "Broker gone")
    _delete_and_wait(k8s, namespace, "topics", "late", "Topic released by the finalizer")


def test_restarted_operator_resumes_and_reverts_drift_made_while_it_was_down(
    k8s: cluster.Cluster, loopback: dev.DevEndpoints, tmp_path: pathlib.Path
) -> None:
    """on.resume: a Broker handled by one operator, drifted while none runs, is re-applied at
    once by the next operator (its timer is an hour away, so only resume can do it)."""
    core = kubernetes.client.CoreV1Api(k8s.api_client)
    apps = kubernetes.client.AppsV1Api(k8s.api_client)
    namespace = f"r-{uuid.uuid4().hex[:10]}"
    labels = objects.RESTRICTED_NAMESPACE_LABELS  # as every e2e namespace (issue 24 item 5)
    core.create_namespace({"metadata": {"name": namespace, "labels": labels}})
    try:
        with _run_operator(k8s, loopback, tmp_path / "first.log", namespace, resync_s=3600):
            _apply(k8s, namespace, _broker(namespace))
            processes.wait_until(
                lambda: "observedGeneration" in _get(k8s, namespace, "brokers", "demo")["status"],
                timeout_s=WAIT_S,
                what="Broker handled",
            )
        apps.patch_namespaced_stateful_set("demo-a", namespace, {"spec": {"replicas": 4}})
        with _run_operator(k8s, loopback, tmp_path / "second.log", namespace, resync_s=3600):
            processes.wait_until(
                lambda: apps.read_namespaced_stateful_set("demo-a", namespace).spec.replicas == 2,
                timeout_s=WAIT_S,
                what="drift reverted on resume",
            )
            _delete_and_wait(
                k8s, namespace, "brokers", "demo", "Broker deleted (finalizer released)"
            )
    finally:
        core.delete_namespace(namespace)


def test_image_change_rolls_slave_then_master_one_at_a_time(
    k8s: cluster.Cluster, namespace: str, operator: Running
) -> None:
    """A new image restarts the group's pods, slave (ordinal 1) before master (0); at every
    observation at most one pod of the group is missing or unready."""
    core = kubernetes.client.CoreV1Api(k8s.api_client)
    _apply(k8s, namespace, _broker(namespace))
    _wait_condition(k8s, namespace, "brokers", "demo", status.READY, "True")
    original = {p.metadata.name: p.metadata.uid for p in core.list_namespaced_pod(namespace).items}
    replaced: list[str] = []
    most_down = 0
    changed = _broker(namespace)
    changed["spec"]["image"] = "ariane:0.2.0"
    _apply(k8s, namespace, changed)

    def rolled() -> bool:
        nonlocal most_down
        pods = [
            p
            for p in core.list_namespaced_pod(namespace).items
            if p.metadata.name.startswith("demo-a-")
        ]
        up = [
            p
            for p in pods
            if p.metadata.deletion_timestamp is None
            and any(c.type == "Ready" and c.status == "True" for c in p.status.conditions or [])
        ]
        most_down = max(most_down, 2 - len(up))
        for pod in pods:
            if pod.metadata.uid != original.get(pod.metadata.name) and (
                pod.metadata.name not in replaced
            ):
                replaced.append(pod.metadata.name)
        images = {p.spec.containers[0].image for p in up}
        return len(up) == 2 and images == {"ariane:0.2.0"}

    processes.wait_until(rolled, timeout_s=WAIT_S, what="both pods on ariane:0.2.0")

    assert [n for n in replaced if n.startswith("demo-a-")] == ["demo-a-1", "demo-a-0"]
    assert most_down <= 1
    processes.wait_until(
        lambda: "RollingPod" in _reasons(k8s, namespace, "Broker"),
        timeout_s=WAIT_S,
        what="RollingPod event",
    )
    _wait_condition(k8s, namespace, "brokers", "demo", status.PROGRESSING, "False")
