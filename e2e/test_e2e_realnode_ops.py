"""Operations on real broker pods: SIGTERM stop, a deleted pod back on its PVC, a roll, Prometheus
discovering the pods through the operator's ServiceMonitor, a scale-in.

One ``helm install`` for the module (``ops``): a Broker ``demo`` of two SYNC_MASTER + slave
groups (``demo-a``, ``demo-b``) on the session's real node, the official client in pods. The tests
run in file order on that one Broker and each leaves it serving: the SIGTERM stop of a slave,
the restart of a master pod, the image roll, Prometheus (on the host, kubernetes_sd_configs
against the apiserver) scraping every pod until the lag alert fires, then the scale-in to one
group. Every message the
client had acknowledged and no test has received yet is in ``Ops.pending``; each test that
receives checks that all of them come back.

Invariants: a failed wait or assertion carries ``_diagnose`` (pods, the Broker's status, the
operator's and brokers' log tails); the extra image tag made for the roll is removed at the end.
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
import re
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import kubernetes  # type: ignore[import-untyped]
import pytest

import prometheus_testing
from e2e import operator_support, servicemonitor
from e2e import test_e2e_realnode_chart as chart
from e2e.testenv import objects, processes, realnode

pytestmark = pytest.mark.realnode

GROUPS = ("demo-a", "demo-b")
STOP_BOUND_S = 20.0
"""A broker pod's SIGTERM → container exit must take less than this (grace period: 60 s)."""
POD_GRACE_S = 60
"""The broker pods' ``terminationGracePeriodSeconds`` (``model.broker_statefulset``)."""
WAIT_S = 180.0
"""Bound on each wait for the operator, the kubelet or the client, s."""
_STORE_OPEN = re.compile(r"store open at \S+: CommitLog \[(\d+), (\d+)\), .*clean=(True|False)")
_STORE_CLOSED = re.compile(r"store closed at CommitLog offset (\d+)")


@dataclasses.dataclass(slots=True)
class Ops:
    """The module's one install: where it is, and what the client is owed."""

    node: realnode.RealNode
    ns: str
    core: Any
    endpoints: str
    pending: set[str]
    """Message ids acknowledged to the client and not received by any test yet."""


@pytest.fixture(scope="module")
def ops(real_node: realnode.RealNode) -> Iterator[Ops]:
    """The chart installed in a namespace of its own with a two-group Broker, the driver
    ConfigMap, and 20 messages acknowledged (the slaves in sync by then)."""
    core = kubernetes.client.CoreV1Api(real_node.cluster.api_client)
    ns = f"r-ops-{uuid.uuid4().hex[:8]}"
    labels = objects.RESTRICTED_NAMESPACE_LABELS  # restricted Pod Security, enforced
    core.create_namespace({"metadata": {"name": ns, "labels": labels}})
    try:
        processes.wait_until(
            lambda: core.read_namespaced_service_account("default", ns) is not None,
            timeout_s=60.0,
            what=f"ServiceAccount default in {ns}",
        )
        chart._install(real_node, ns, groups=len(GROUPS))
        driver = {
            "metadata": {"name": "driver"},
            "data": {chart.DRIVER.name: chart.DRIVER.read_text()},
        }
        core.create_namespaced_config_map(ns, driver)
        endpoints = f"demo-namesrv.{ns}.svc.cluster.local:9876"
        state = Ops(real_node, ns, core, endpoints, set())
        state.pending |= chart._produce_until_accepted(real_node, ns, endpoints, "setup", 20)
        yield state
    finally:
        core.delete_namespace(ns)
        real_node.ctr("images", "remove", _roll_image(real_node), check=False)


def _roll_image(node: realnode.RealNode) -> str:
    """A second tag of the built image (made by the roll test): a new ``spec.image``."""
    return f"{node.image}-roll"


def _fail(ops: Ops, message: str) -> AssertionError:
    return AssertionError(f"{message}\n{chart._diagnose(ops.node, ops.ns)}")


def _wait(ops: Ops, check: Any, what: str, timeout_s: float = WAIT_S) -> None:
    try:
        processes.wait_until(check, timeout_s=timeout_s, what=what)
    except TimeoutError as error:
        raise _fail(ops, str(error)) from error


def _roles(ops: Ops) -> dict[str, int]:
    data = ops.core.read_namespaced_config_map("demo-roles", ops.ns).data or {}
    return {group: int(ordinal) for group, ordinal in data.items()}


def _pod(ops: Ops, name: str) -> Any:
    """The live pod ``name``, or ``None``."""
    try:
        return ops.core.read_namespaced_pod(name, ops.ns)
    except kubernetes.client.ApiException as error:
        if error.status == 404:
            return None
        raise


def _serving(pod: Any) -> bool:
    """Running, Ready and not terminating."""
    if pod is None or pod.metadata.deletion_timestamp or pod.status.phase != "Running":
        return False
    return any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or [])


def _claim(ops: Ops, pod: str) -> tuple[str, str]:
    """(uid, bound volume) of the store claim of ``pod``."""
    found = ops.core.read_namespaced_persistent_volume_claim(f"store-{pod}", ops.ns)
    return str(found.metadata.uid), str(found.spec.volume_name)


def _log(ops: Ops, pod: str) -> str:
    return ops.node.cluster.kubectl("-n", ops.ns, "logs", pod, check=False).stdout


def _receive_pending(ops: Ops, prefix: str) -> None:
    """Consumes with the official client (group ``billing``), a new driver pod per attempt,
    until every id of ``ops.pending`` was received; then ``pending`` is empty."""
    wanted, got, attempts = set(ops.pending), set[str](), list[str]()

    def attempt() -> bool:
        name = f"consume-{prefix}-{len(attempts)}"
        attempts.append(name)
        args = ("simple-consume", "--endpoints", ops.endpoints, "--group", chart.GROUP)
        count = str(len(wanted - got))
        pod = chart._driver_pod(
            ops.node, name, *args, "--topic", chart.TOPIC, "--count", count, "--deadline-s", "30"
        )
        _, log = realnode.run_pod(ops.node, ops.ns, pod)
        got.update(e["message_id"] for e in chart._events(log) if e["event"] == "received")
        return wanted <= got

    try:
        processes.wait_until(attempt, timeout_s=WAIT_S, what="every acknowledged message")
    except TimeoutError as error:
        missing = sorted(wanted - got)
        raise _fail(ops, f"{error}: acknowledged, never received: {missing}") from error
    ops.pending.clear()


@dataclasses.dataclass(slots=True)
class _Stop:
    """What one pod's deletion showed: the old container's end, the new container's start."""

    exit_code: int | None = None
    stop_s: float = 0.0
    """Deletion request → the kubelet reporting the container terminated, s."""
    old_log: str = ""
    new_log: str = ""


def _watch_termination(ops: Ops, old: Any, seen: _Stop, started: float) -> None:
    """Sets ``seen.exit_code`` and ``seen.stop_s`` from the first watch event (from ``old``'s
    resource version on) in which the container of pod ``old`` is terminated; the DELETED
    event carries the pod's last status."""
    watch = kubernetes.watch.Watch()
    for event in watch.stream(
        ops.core.list_namespaced_pod,
        ops.ns,
        field_selector=f"metadata.name={old.metadata.name}",
        resource_version=old.metadata.resource_version,
        timeout_seconds=POD_GRACE_S + 30,
    ):
        obj = event["object"]
        mine = obj.metadata.uid == old.metadata.uid
        statuses = (obj.status.container_statuses or []) if mine else []
        ended = [s.state.terminated for s in statuses if s.state and s.state.terminated]
        if ended:
            seen.exit_code, seen.stop_s = int(ended[0].exit_code), time.monotonic() - started
            watch.stop()
            return


def _follow_log(ops: Ops, pod: str) -> tuple[subprocess.Popen[str], threading.Thread, list[str]]:
    """``kubectl logs -f pod`` once it printed its first line; the lines land in the list
    (a reader thread) until the container exits."""
    follower = subprocess.Popen(
        [str(ops.node.cluster.kubectl_path), "-n", ops.ns, "logs", "-f", pod],
        env=ops.node.cluster.tool_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert follower.stdout is not None
    lines = [follower.stdout.readline()]  # the broker logged long ago: returns at once
    stream = follower.stdout
    reader = threading.Thread(target=lambda: lines.extend(stream), daemon=True)
    reader.start()
    return follower, reader, lines


def _delete_pod(ops: Ops, pod: str) -> _Stop:
    """Deletes ``pod`` (its grace period, as ``kubectl delete pod``) while following its log
    and watching its container; waits until the StatefulSet's new pod serves again."""
    old = ops.core.read_namespaced_pod(pod, ops.ns)
    follower, reader, lines = _follow_log(ops, pod)
    seen, started = _Stop(), time.monotonic()
    watcher = threading.Thread(
        target=_watch_termination, args=(ops, old, seen, started), daemon=True
    )
    watcher.start()
    ops.core.delete_namespaced_pod(pod, ops.ns)
    try:
        follower.wait(timeout=POD_GRACE_S + 30)
    except subprocess.TimeoutExpired:
        follower.kill()
    watcher.join(timeout=POD_GRACE_S + 30)
    reader.join(timeout=10.0)
    if follower.stdout is not None:
        follower.stdout.close()
    seen.old_log = "".join(lines)

    def back() -> bool:
        new = _pod(ops, pod)
        return new is not None and new.metadata.uid != old.metadata.uid and _serving(new)

    _wait(ops, back, f"{pod} recreated and Ready")
    _wait(ops, lambda: bool(_STORE_OPEN.search(_log(ops, pod))), f"{pod}'s store open")
    seen.new_log = _log(ops, pod)
    return seen


def _assert_reopened_where_closed(ops: Ops, pod: str, stop: _Stop) -> int:
    """The old container closed its store cleanly at some offset, and the new one opened it
    on the clean path at that same offset; returns the offset."""
    closed = _STORE_CLOSED.search(stop.old_log)
    if closed is None:
        raise _fail(ops, f"{pod} never logged a clean store close:\n{stop.old_log[-3000:]}")
    opened = _STORE_OPEN.search(stop.new_log)
    assert opened is not None
    if opened.group(3) != "True" or "unclean stop" in stop.new_log:
        raise _fail(ops, f"{pod} recovered on the unclean path:\n{stop.new_log[-3000:]}")
    if int(opened.group(2)) != int(closed.group(1)):
        raise _fail(
            ops,
            f"{pod} closed its CommitLog at {closed.group(1)}, reopened it at "
            f"{opened.group(2)}: not the same volume",
        )
    return int(closed.group(1))


def test_a_broker_pod_stops_cleanly_on_the_kubelets_sigterm_well_within_its_grace(
    ops: Ops,
) -> None:
    """``kubectl delete pod`` of a slave: the kubelet's SIGTERM stops the broker with exit
    code 0 and its clean-shutdown log lines in well under the 60 s grace period, and the
    recreated pod opens the store on the clean path at the offset it was closed at."""
    master = _roles(ops)["demo-a"]
    pod = f"demo-a-{1 - master}"
    _wait(ops, lambda: _serving(_pod(ops, pod)), f"{pod} Ready")

    stop = _delete_pod(ops, pod)

    if stop.exit_code != 0 or not stop.stop_s < STOP_BOUND_S:
        raise _fail(
            ops,
            f"{pod}: exit code {stop.exit_code} after {stop.stop_s:.1f} s (wanted 0 in under "
            f"{STOP_BOUND_S:.0f} s; grace {POD_GRACE_S} s):\n{stop.old_log[-3000:]}",
        )
    for line in ("broker stopping", "broker stopped"):
        assert line in stop.old_log, f"{pod} never logged {line!r}:\n{stop.old_log[-3000:]}"
    _assert_reopened_where_closed(ops, pod, stop)
    print(f"{pod}: SIGTERM to exit 0 in {stop.stop_s:.2f} s")


def test_a_deleted_master_pod_comes_back_on_its_pvc_and_serves_its_data(ops: Ops) -> None:
    """The master pod of a group deleted: the StatefulSet recreates it on the same claim and
    volume, its store reopens cleanly at the offset it was closed at (more than the messages
    sent before), and every message acknowledged before the deletion is received after."""
    ops.pending |= chart._produce_until_accepted(ops.node, ops.ns, ops.endpoints, "restart", 20)
    pod = f"demo-a-{_roles(ops)['demo-a']}"
    claim = _claim(ops, pod)

    stop = _delete_pod(ops, pod)

    offset = _assert_reopened_where_closed(ops, pod, stop)
    assert offset > 0, f"{pod} closed an empty CommitLog"
    assert _claim(ops, pod) == claim, f"{pod} came back on another claim or volume"
    _wait(ops, lambda: chart._ready(ops.node, ops.ns), "Broker demo Ready again")
    _receive_pending(ops, "restart")


def _condition(ops: Ops, kind: str) -> dict[str, Any]:
    conditions = chart._broker(ops.node, ops.ns).get("status", {}).get("conditions", [])
    return next((c for c in conditions if c["type"] == kind), {})


def _patch_broker(ops: Ops, spec: dict[str, Any]) -> None:
    ops.node.cluster.kubectl(
        "-n", ops.ns, "patch", "brokers.ariane.dev", "demo", "--type=merge",
        "-p", json.dumps({"spec": spec}),
    )  # fmt: skip


def _broker_pods(ops: Ops) -> dict[str, Any]:
    found = ops.core.list_namespaced_pod(ops.ns, label_selector=chart.BROKER_PODS).items
    return {p.metadata.name: p for p in found}


def _group_of(pod: str) -> str:
    return pod.rsplit("-", 1)[0]


def _roll(ops: Ops, image: str) -> dict[str, list[tuple[str, int]]]:
    """Sets ``spec.image`` and waits until every broker pod serves it; per group, the pods in
    the order they went down, each with its group's master ordinal at that moment."""
    before = {name: p.metadata.uid for name, p in _broker_pods(ops).items()}
    replaced: dict[str, list[tuple[str, int]]] = {_group_of(n): [] for n in before}
    _patch_broker(ops, {"image": image})

    def rolled() -> bool:
        roles, live = _roles(ops), _broker_pods(ops)
        for name, uid in before.items():
            pod = live.get(name)
            gone = pod is None or pod.metadata.uid != uid or pod.metadata.deletion_timestamp
            if gone and name not in [r[0] for r in replaced[_group_of(name)]]:
                replaced[_group_of(name)].append((name, roles[_group_of(name)]))
        return (
            all(_serving(live.get(n)) and live[n].spec.containers[0].image == image for n in before)
            and chart._ready(ops.node, ops.ns)
            and _condition(ops, "Progressing").get("status") == "False"
        )

    _wait(ops, rolled, f"every broker pod rolled to {image}", timeout_s=240.0)
    return replaced


def test_an_image_change_rolls_each_group_switchover_first_on_the_pods_volumes(
    ops: Ops,
) -> None:
    """A new image tag (the same image) rolls every group: its slave restarts first, the
    operator switches the master over to it, then the old master restarts; every pod comes
    back on its own claim with its store reopened cleanly, and every message acknowledged
    before the roll is received after it."""
    ops.pending |= chart._produce_until_accepted(ops.node, ops.ns, ops.endpoints, "preroll", 20)
    image = _roll_image(ops.node)
    ops.node.ctr("images", "tag", "--force", ops.node.image, image)
    claims = {name: _claim(ops, name) for name in _broker_pods(ops)}
    masters = _roles(ops)

    replaced = _roll(ops, image)

    for group, order in replaced.items():
        slave, master = f"{group}-{1 - masters[group]}", f"{group}-{masters[group]}"
        if [name for name, _ in order] != [slave, master] or order[1][1] == masters[group]:
            raise _fail(
                ops,
                f"{group} rolled as {order}, not {slave} then a switchover "
                f"away from {master}, then {master}",
            )
        promotion = chart._broker(ops.node, ops.ns)["status"]["groups"]
        entry = next(g for g in promotion if g["name"] == group)["lastPromotion"]
        assert entry["reason"] == "switchover before a roll", entry
    for name, claim in claims.items():
        assert _claim(ops, name) == claim, f"{name} came back on another claim or volume"
        opened = _STORE_OPEN.search(_log(ops, name))
        assert opened is not None and opened.group(3) == "True", _log(ops, name)[-3000:]
    _receive_pending(ops, "roll")


LAG_ALERT = "ArianeConsumerLagGrowing"
LAG_ALERT_FOR = "2s"
"""The lag alert's ``for``, shortened from the chart's 30 minutes so that it fires in the test."""
CHART_RULES = operator_support.CHART_DIR / "files" / "prometheus-rules.json"
SCRAPE_WAIT_S = 60.0
"""Bound on each wait for Prometheus (targets up, series, the alert), scraping every second."""
PROMETHEUS_SA = "prometheus"
PROMETHEUS_READS = ("services", "endpoints", "pods")
"""What the Prometheus ServiceAccount may get, list and watch in the namespace (plus
EndpointSlices): the kubernetes_sd_configs' needs, nothing cluster-wide."""


def _lag_rule_groups() -> list[dict[str, Any]]:
    """The chart's consumer-lag rule, read from the chart's rule file, its ``for`` shortened."""
    [group] = json.loads(CHART_RULES.read_text())["groups"]
    [rule] = [r for r in group["rules"] if r.get("alert") == LAG_ALERT]
    return [{"name": "ariane-realnode", "rules": [{**rule, "for": LAG_ALERT_FOR}]}]


def _service_monitor(ops: Ops) -> dict[str, Any]:
    """Installs prometheus-operator's CRDs, turns ``metrics.serviceMonitor`` on for the Broker
    and returns the ServiceMonitor the operator pod then applies (only that object changes)."""
    operator_support.apply_monitoring_crds(ops.node.cluster)
    _patch_broker(ops, {"metrics": {"serviceMonitor": True}})
    custom = kubernetes.client.CustomObjectsApi(ops.node.cluster.api_client)
    found: list[dict[str, Any]] = []

    def rendered() -> bool:
        try:
            found.append(custom.get_namespaced_custom_object(
                "monitoring.coreos.com", "v1", ops.ns, "servicemonitors", "demo"
            ))  # fmt: skip
        except kubernetes.client.ApiException as error:
            if error.status != 404:
                raise
        return bool(found)

    _wait(ops, rendered, "the operator's ServiceMonitor demo")
    return found[0]


def _prometheus_sd(ops: Ops, tmp: pathlib.Path) -> dict[str, Any]:
    """The connection part of a ``kubernetes_sd_configs`` entry for the real apiserver: its
    CA, and a bound token of a ServiceAccount ``prometheus`` whose Role only reads Services,
    Endpoints, EndpointSlices and Pods of the namespace (RBAC enforced by the apiserver)."""
    rbac = kubernetes.client.RbacAuthorizationV1Api(ops.node.cluster.api_client)
    ops.core.create_namespaced_service_account(ops.ns, {"metadata": {"name": PROMETHEUS_SA}})
    verbs = ["get", "list", "watch"]
    rbac.create_namespaced_role(ops.ns, {"metadata": {"name": PROMETHEUS_SA}, "rules": [
        {"apiGroups": [""], "resources": list(PROMETHEUS_READS), "verbs": verbs},
        {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": verbs},
    ]})  # fmt: skip
    rbac.create_namespaced_role_binding(ops.ns, {
        "metadata": {"name": PROMETHEUS_SA},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": PROMETHEUS_SA},
        "subjects": [{"kind": "ServiceAccount", "name": PROMETHEUS_SA, "namespace": ops.ns}],
    })  # fmt: skip
    token = ops.core.create_namespaced_service_account_token(
        PROMETHEUS_SA, ops.ns, {"spec": {"expirationSeconds": 3600}}
    ).status.token
    token_file = tmp / "token"
    token_file.write_text(token)
    kubeconfig = json.loads(ops.node.cluster.kubeconfig.read_text())
    ca_file = kubeconfig["clusters"][0]["cluster"]["certificate-authority"]
    return {
        "api_server": ops.node.cluster.server_url,
        "tls_config": {"ca_file": ca_file},
        "authorization": {"credentials_file": str(token_file)},
    }


def _scraped_pods(url: str) -> tuple[list[str], list[str]]:
    """(pods of the targets that are up, sorted, one entry per target; the other targets
    (down, or not scraped yet) with their errors)."""
    active = prometheus_testing.api(url, "targets", state="active")["activeTargets"]
    up = sorted(t["labels"].get("pod", "?") for t in active if t["health"] == "up")
    down = [f"{t['scrapeUrl']}: {t['health']} {t['lastError']}" for t in active
            if t["health"] != "up"]  # fmt: skip
    return up, down


def _firing(url: str, ns: str) -> list[dict[str, Any]]:
    """The lag alerts firing for group ``billing`` on topic ``orders`` of the namespace."""
    return [
        a for a in prometheus_testing.api(url, "alerts")["alerts"]
        if a["labels"]["alertname"] == LAG_ALERT and a["state"] == "firing"
        and a["labels"].get("namespace") == ns
        and a["labels"].get("consumer_group") == chart.GROUP
        and a["labels"].get("topic") == chart.TOPIC
    ]  # fmt: skip


def _query(url: str, promql: str) -> list[dict[str, Any]]:
    result: list[dict[str, Any]] = prometheus_testing.api(url, "query", query=promql)["result"]
    return result


def test_prometheus_discovers_the_pods_through_the_service_monitor_and_the_lag_alert_fires(
    ops: Ops, tmp_path: pathlib.Path
) -> None:
    """Prometheus on the host, with the operator's ServiceMonitor translated into
    ``kubernetes_sd_configs`` against the real apiserver (a namespace-scoped ServiceAccount
    token), scrapes every broker pod and the name-server pod once each over the pod network,
    all ``up``; RocketMQ series come from the pods; and the chart's consumer-lag rule fires
    when ``billing`` stops consuming ``orders`` while the client keeps producing."""
    if ops.pending:  # run on its own: let billing consume once, so its lag is exported
        _receive_pending(ops, "prom")
    monitor = _service_monitor(ops)
    jobs = servicemonitor.scrape_configs(monitor, _prometheus_sd(ops, tmp_path), interval="1s")
    brokers = sorted(_broker_pods(ops))
    namesrv = sorted(p.metadata.name for p in ops.core.list_namespaced_pod(
        ops.ns, label_selector="app.kubernetes.io/component=namesrv").items)  # fmt: skip
    sel = f'namespace="{ops.ns}",app_kubernetes_io_instance="demo"'
    binary = prometheus_testing.k8s_sd_prometheus()  # Debian's lacks kubernetes_sd_configs
    with prometheus_testing.prometheus(
        tmp_path, [], _lag_rule_groups(), scrape_configs=jobs, binary=binary
    ) as url:
        try:
            processes.wait_until(
                lambda: _scraped_pods(url) == (sorted(brokers + namesrv), []),
                timeout_s=SCRAPE_WAIT_S, what=f"Prometheus scraping {brokers + namesrv}",
            )  # fmt: skip
        except TimeoutError as error:
            raise _fail(ops, f"{error}: (up, down) = {_scraped_pods(url)}") from error
        lag = f'rocketmq_consumer_lag_messages{{{sel},consumer_group="{chart.GROUP}"}}'
        _wait(ops, lambda: bool(_query(url, lag)), f"{lag} scraped", timeout_s=SCRAPE_WAIT_S)
        batches: list[int] = []

        def lag_alert_fires() -> bool:
            prefix = f"lag{len(batches)}"
            batches.append(len(batches))
            ops.pending.update(
                chart._produce_until_accepted(ops.node, ops.ns, ops.endpoints, prefix, 10)
            )
            return bool(_firing(url, ops.ns))

        _wait(ops, lag_alert_fires, f"{LAG_ALERT} firing for {chart.GROUP}", timeout_s=120.0)
        assert not _scraped_pods(url)[1], _scraped_pods(url)[1]
        stored = _query(
            url, f'rocketmq_messages_in_total{{{sel},app_kubernetes_io_component="broker"}} > 0'
        )
        assert {s["metric"]["pod"] for s in stored} & set(brokers), stored
        masters = _query(url, f"ariane_namesrv_broker_group_master{{{sel}}} == 1")
        assert {s["metric"]["pod"] for s in masters} == set(namesrv), masters
        assert {s["metric"]["broker_name"] for s in masters} == set(GROUPS), masters
    print(f"lag alert fired after {len(batches)} batch(es) of 10 messages")


def _statefulset_gone(ops: Ops, name: str) -> bool:
    apps = kubernetes.client.AppsV1Api(ops.node.cluster.api_client)
    try:
        apps.read_namespaced_stateful_set(name, ops.ns)
    except kubernetes.client.ApiException as error:
        return bool(error.status == 404)
    return False


def test_scale_in_is_refused_while_messages_are_unconsumed_then_drained(ops: Ops) -> None:
    """``spec.groups`` 2 → 1 while the removed group holds unconsumed messages: refused
    (ScaleInBlocked UnconsumedMessages, the StatefulSet and pods kept); once the official
    client consumed them, the group is deleted, and the remaining group serves."""
    ops.pending |= chart._produce_until_accepted(ops.node, ops.ns, ops.endpoints, "drain", 20)

    _patch_broker(ops, {"groups": 1})

    blocked = lambda: _condition(ops, "ScaleInBlocked").get("reason") == "UnconsumedMessages"  # noqa: E731
    _wait(ops, blocked, "the scale-in refused while messages are unconsumed")
    assert not _statefulset_gone(ops, "demo-b")
    assert {"demo-b-0", "demo-b-1"} <= set(_broker_pods(ops))
    _receive_pending(ops, "drain")
    drained = lambda: _condition(ops, "ScaleInBlocked").get("reason") == "Drained"  # noqa: E731
    _wait(ops, drained, "the scale-in done once the messages were consumed")
    _wait(ops, lambda: _statefulset_gone(ops, "demo-b"), "StatefulSet demo-b deleted")
    _wait(
        ops,
        lambda: not any(_group_of(n) == "demo-b" for n in _broker_pods(ops)),
        "the pods of demo-b gone",
    )
    ops.pending |= chart._produce_until_accepted(ops.node, ops.ns, ops.endpoints, "one", 10)
    _receive_pending(ops, "one")
