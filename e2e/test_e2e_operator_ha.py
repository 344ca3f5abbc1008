"""The operator runs master/slave groups on the real apiserver, with real brokers behind the pods.

Each test gets its own namespace, a loopback name server, a ``LoopbackKubelet`` running the
broker pods' containers as ``ariane broker`` processes on 127.0.0.1 (kwok marks the pods
Ready; there is no kubelet), and its own operator whose override maps point the Broker's name
server and each pod at those processes (never a cluster address). A test can have the operator
alone dial a pod through a ``CutProxy`` and cut it: a partition between the operator and that
broker only (clients and the name server still dial it directly).

Faults (issue 25 item 4): a master cut off from the operator alone is not failed over while it
renews its lease at the name server, and once it stops too it is failed over within
``masterDownTimeoutSeconds`` + the lease and fenced; a SIGKILLed master behind a pod kwok keeps
Ready is failed over within the same measured bound.

``test_master_pod_gone_past_the_timeout_is_failed_over``: 20 runs in a row passed (2026-11-29,
each a separate ``pytest`` of that test, niced, while other engineers' tests ran: load 4-11,
28-53 s a run), after two fixes for what made it slow and load-sensitive: a Broker deleted
while a resync reconcile ran waited kopf's 60 s ``cancellation_polling`` for its finalizer
(``handlers.TIMER_STOP_POLL_S``: 1 s; one run took 111 s that way), and ``_read_all``
long-polled at the end of each queue (about 9 s per read). Before them, 13 runs in a row also
passed, at load 10-30, at 53-138 s a run; the TOPIC_NOT_FOUND window of issue 25 was not seen.
Each wait prints how long it took, for the next slow or failed run.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import pathlib
import signal
import sys
import time
from collections.abc import Iterator
from typing import Any

import grpc
import kubernetes  # type: ignore[import-untyped]
import pytest

from ariane.client import admin, admin_types, failover, producer, pull_consumer
from ariane.grpcwire import messages, pb, rpc
from ariane.operator import ha, reconcile, status
from ariane.operator import settings as operator_settings
from e2e import operator_support
from e2e.testenv import cluster, cutproxy, kubelet, processes

pytestmark = pytest.mark.k8s

WAIT_S = 90.0
RESYNC_S = 2
TOPIC = "orders"
GROUP = "billing"


@dataclasses.dataclass
class HAEnv:
    """One test's namespace, name server, stand-in kubelet and operator."""

    k8s: cluster.Cluster
    namespace: str
    namesrv: str
    kubelet: kubelet.LoopbackKubelet
    operator_log: pathlib.Path
    proxies: dict[str, cutproxy.CutProxy] = dataclasses.field(default_factory=dict)
    """Pod → the proxy the operator (alone) dials that pod's broker through."""

    def custom(self) -> Any:
        return kubernetes.client.CustomObjectsApi(self.k8s.api_client)

    def core(self) -> Any:
        return kubernetes.client.CoreV1Api(self.k8s.api_client)

    def apply(self, body: dict[str, Any]) -> None:
        self.k8s.kubectl("apply", "-n", self.namespace, "-f", "-", input_text=json.dumps(body))

    def broker(self) -> dict[str, Any]:
        found: dict[str, Any] = self.custom().get_namespaced_custom_object(
            "ariane.dev", "v1alpha1", self.namespace, "brokers", "demo"
        )
        return found

    def condition(self, kind: str) -> dict[str, Any]:
        for cond in self.broker().get("status", {}).get("conditions", []):
            if cond["type"] == kind:
                return dict(cond)
        return {}

    def group_status(self, group: str) -> dict[str, Any]:
        for entry in self.broker().get("status", {}).get("groups", []):
            if entry["name"] == group:
                return dict(entry)
        return {}

    def roles(self) -> dict[str, str]:
        found = self.core().read_namespaced_config_map("demo-roles", self.namespace)
        return dict(found.data or {})

    def reasons(self) -> list[str]:
        events = self.core().list_namespaced_event(self.namespace).items
        return [e.reason for e in events if e.involved_object.kind == "Broker"]

    def wait(self, check: Any, what: str) -> None:
        """Polls ``check`` until true (``WAIT_S``); prints how long each wait took (the
        test's phases, read when a run is slow or fails)."""
        start = time.monotonic()
        try:
            processes.wait_until(check, timeout_s=WAIT_S, what=what)
            print(f"{time.strftime('%H:%M:%S')} waited {time.monotonic() - start:.1f} s: {what}")
        except TimeoutError as error:
            seen = json.dumps(self.broker().get("status", {}), indent=1)[-6000:]
            pods = self.k8s.kubectl("get", "pods", "-n", self.namespace, check=False).stdout
            raise AssertionError(f"{error}\nstatus: {seen}\npods:\n{pods}") from error


@contextlib.contextmanager
def _ha_env(
    k8s: cluster.Cluster,
    namespace: str,
    work: pathlib.Path,
    pods: list[str],
    *,
    proxied: tuple[str, ...] = (),
) -> Iterator[HAEnv]:
    """A name server, the stand-in kubelet for ``pods`` and an operator for ``namespace``; the
    operator dials the brokers of ``proxied`` pods through a ``CutProxy`` (everyone else dials
    them directly)."""
    port = processes.free_port()
    namesrv = processes.ManagedProcess.start(
        "namesrv",
        [sys.executable, "-m", "ariane", "namesrv", "--listen", f"127.0.0.1:{port}"],
        log_dir=work,
        cwd=work,
    )
    stand_in = kubelet.LoopbackKubelet(k8s.kubeconfig, namespace, pods, f"127.0.0.1:{port}", work)
    proxies = {pod: cutproxy.CutProxy(stand_in.endpoint(pod)) for pod in proxied}
    routes = stand_in.overrides()
    routes.update({f"{namespace}/{pod}": proxy.endpoint for pod, proxy in proxies.items()})
    env = {
        operator_settings.NAMESRV_OVERRIDES_ENV: json.dumps(
            {f"{namespace}/demo": f"127.0.0.1:{port}"}
        ),
        operator_settings.POD_OVERRIDES_ENV: json.dumps(routes),
    }
    log = work / "operator.log"
    try:
        for proxy in proxies.values():
            proxy.start()
        stand_in.start()
        with operator_support.run_operator(k8s, log, namespace, env=env, resync_s=RESYNC_S):
            yield HAEnv(k8s, namespace, f"127.0.0.1:{port}", stand_in, log, proxies)
            _delete_broker(k8s, namespace)  # while the operator runs: it releases the finalizer
    finally:
        stand_in.stop()
        for proxy in proxies.values():
            proxy.stop()
        namesrv.stop()


def _delete_broker(k8s: cluster.Cluster, namespace: str) -> None:
    custom = kubernetes.client.CustomObjectsApi(k8s.api_client)
    custom.delete_namespaced_custom_object("ariane.dev", "v1alpha1", namespace, "brokers", "demo")
    start = time.monotonic()
    processes.wait_until(
        lambda: (
            not custom.list_namespaced_custom_object(
                "ariane.dev", "v1alpha1", namespace, "brokers"
            )["items"]
        ),
        timeout_s=WAIT_S,
        what="Broker deleted (finalizer released)",
    )
    print(f"{time.strftime('%H:%M:%S')} Broker deleted in {time.monotonic() - start:.1f} s")


def _broker_body(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "ariane.dev/v1alpha1",
        "kind": "Broker",
        "metadata": {"name": "demo"},
        "spec": {
            "storage": {"size": "1Gi"},
            "config": {"slave_sync": {"interval_ms": 300}},
            **spec,
        },
    }


SYNC_GROUP = {
    "groups": 1,
    "replicasPerGroup": 2,
    "brokerRole": "SYNC_MASTER",
    "flushDiskType": "SYNC_FLUSH",
    "failover": {"masterDownTimeoutSeconds": 5},
}


def _role(env: HAEnv, pod: str) -> str:
    [state] = asyncio.run(failover.broker_states([env.kubelet.endpoint(pod)], timeout_s=2.0))
    return state.role if state is not None else ""


def _send(namesrv: str, count: int, prefix: str) -> list[str]:
    """Sends ``count`` messages (retrying each refusal until the deadline); their ids."""

    async def run() -> list[str]:
        sent = []
        async with producer.Producer(namesrv) as client:
            for index in range(count):
                receipt = await client.send(TOPIC, f"{prefix}-{index}".encode())
                sent.append(str(receipt.message_id))
        return sent

    found: list[list[str]] = []
    attempts = [0]

    def attempt() -> bool:
        attempts[0] += 1
        found.append(asyncio.run(run()))
        return True

    start = time.monotonic()
    processes.wait_until(attempt, timeout_s=WAIT_S, what=f"{count} acknowledged sends")
    if attempts[0] > 1 or not prefix.startswith("held"):  # the hold's rounds: only a retry
        took_s = time.monotonic() - start
        print(f"{time.strftime('%H:%M:%S')} sent {prefix}: {attempts[0]} attempts, {took_s:.1f} s")
    return found[-1]


def _read_all(namesrv: str) -> set[str]:
    """Every message id of ``TOPIC`` the name server's brokers serve, read from offset 0."""

    async def run() -> set[str]:
        seen: set[str] = set()
        async with pull_consumer.PullConsumer(namesrv) as client:
            for queue in await client.queues_for_topic(TOPIC):
                offset = 0
                while True:
                    batch = await client.fetch(
                        queue, offset, max_messages=256, long_polling_timeout_s=0
                    )
                    seen.update(str(m.message_id) for m in batch.messages)
                    if not batch.messages:
                        break
                    offset = batch.next_offset
        return seen

    return asyncio.run(run())


def _create_topic(namesrv: str, groups: int = 1) -> None:
    """Creates ``TOPIC`` on every master once ``groups`` masters are registered."""

    async def run() -> bool:
        async with admin.AdminClient(namesrv) as client:
            if len(await client.masters()) < groups:
                return False
            await client.create_topic(TOPIC, read_queue_nums=2, write_queue_nums=2)
            return True

    processes.wait_until(lambda: asyncio.run(run()), timeout_s=WAIT_S, what="topic")


def _start_group(env: HAEnv, spec: dict[str, Any] | None = None) -> None:
    """Apply the SYNC_MASTER group (``spec``, default ``SYNC_GROUP``), wait until its master and
    in-sync slave serve a topic."""
    env.apply(_broker_body(**(spec or SYNC_GROUP)))
    env.wait(lambda: env.condition(status.READY).get("status") == "True", "Broker Ready")
    env.wait(
        lambda: (_role(env, "demo-a-0"), _role(env, "demo-a-1")) == ("SYNC_MASTER", "SLAVE"),
        "master and slave brokers answering",
    )
    _create_topic(env.namesrv)


def test_image_change_switches_over_before_restarting_the_master(
    k8s: cluster.Cluster, namespace: str, tmp_path: pathlib.Path
) -> None:
    """An image change rolls the slave, then promotes it (switchover) before the old master's
    pod is deleted; the old master rejoins as a slave, the new master takes sends, and every
    acknowledged message is still served."""
    with _ha_env(k8s, namespace, tmp_path, ["demo-a-0", "demo-a-1"]) as env:
        _start_group(env)
        before = _send(env.namesrv, 30, "before")
        uids = {
            p.metadata.name: p.metadata.uid
            for p in env.core().list_namespaced_pod(env.namespace).items
            if p.metadata.name.startswith("demo-a-")
        }
        replaced: list[tuple[str, str]] = []  # (pod, master ordinal when it was replaced)

        def rolled() -> bool:
            roles = env.roles()
            for pod in env.core().list_namespaced_pod(env.namespace).items:
                name = pod.metadata.name
                if name not in uids:
                    continue
                gone = pod.metadata.uid != uids[name] or pod.metadata.deletion_timestamp
                if gone and name not in [r[0] for r in replaced]:
                    replaced.append((name, roles["demo-a"]))
            group = env.group_status("demo-a")
            return (
                len(replaced) == 2
                and group.get("masterPod") == "demo-a-1"
                and all(p.get("ready") for p in group.get("pods", []))
                and env.condition(status.PROGRESSING).get("status") == "False"
            )

        env.apply(_broker_body(image="ariane:0.2.0", **SYNC_GROUP))
        env.wait(rolled, "both pods rolled, demo-a-1 master")

        assert replaced == [("demo-a-1", "0"), ("demo-a-0", "1")]
        promotion = env.group_status("demo-a")["lastPromotion"]
        assert promotion["reason"] == "switchover before a roll"
        assert (promotion["previousMasterPod"], promotion["masterPod"]) == ("demo-a-0", "demo-a-1")
        assert promotion["epoch"] >= 2
        env.wait(lambda: "Promoted" in env.reasons(), "Promoted event")
        env.wait(
            lambda: (_role(env, "demo-a-1"), _role(env, "demo-a-0")) == ("SYNC_MASTER", "SLAVE"),
            "the new master serving, the old one its slave",
        )
        after = _send(env.namesrv, 10, "after")
        served = _read_all(env.namesrv)
        assert set(before) | set(after) <= served


def _cordon(env: HAEnv, unschedulable: bool) -> None:
    for node in env.core().list_node().items:
        env.core().patch_node(node.metadata.name, {"spec": {"unschedulable": unschedulable}})


def test_master_pod_gone_past_the_timeout_is_failed_over(
    k8s: cluster.Cluster, namespace: str, tmp_path: pathlib.Path
) -> None:
    """The master's broker killed and its pod deleted (its node cordoned, so it stays
    Pending): after ``masterDownTimeoutSeconds`` the operator promotes the slave, records the
    epoch, the new master and the time in status (and an Event); the old pod, scheduled
    again, rejoins as a slave, and no acknowledged message is lost."""
    with _ha_env(k8s, namespace, tmp_path, ["demo-a-0", "demo-a-1"]) as env:
        _start_group(env)
        before = _send(env.namesrv, 30, "before")
        env.wait(
            lambda: env.group_status("demo-a").get("epoch", 0) >= 1,
            "the serving master's epoch in status",
        )
        first_epoch = env.group_status("demo-a")["epoch"]
        try:
            _cordon(env, True)
            env.kubelet.kill("demo-a-0")
            env.core().delete_namespaced_pod("demo-a-0", env.namespace)
            env.wait(
                lambda: (
                    env.group_status("demo-a").get("lastPromotion", {}).get("masterPod")
                    == "demo-a-1"
                ),
                "a promotion of demo-a-1 in status",
            )
        finally:
            _cordon(env, False)
        promotion = env.group_status("demo-a")["lastPromotion"]
        assert promotion["reason"].startswith("failover: master down for")
        assert promotion["previousMasterPod"] == "demo-a-0"
        assert promotion["epoch"] > first_epoch >= 1
        assert promotion["time"].endswith("Z")
        assert env.roles() == {"demo-a": "1"}
        env.wait(lambda: "Promoted" in env.reasons(), "Promoted event")
        env.wait(
            lambda: (_role(env, "demo-a-1"), _role(env, "demo-a-0")) == ("SYNC_MASTER", "SLAVE"),
            "the promoted master serving, the old pod back as its slave",
        )
        after = _send(env.namesrv, 10, "after")
        assert set(before) | set(after) <= _read_all(env.namesrv)


LEASE_MS = 3_000
"""The masters' write lease in the lease tests (``[ha] lease_ms``), ms."""
DOWN_TIMEOUT_S = 3
"""``masterDownTimeoutSeconds`` in the lease tests, s."""
LEASED_GROUP = {
    **SYNC_GROUP,
    "config": {"slave_sync": {"interval_ms": 300}, "ha": {"lease_ms": LEASE_MS}},
    "failover": {"masterDownTimeoutSeconds": DOWN_TIMEOUT_S},
}
PROMOTION_SLACK_S = RESYNC_S + 2 * ha.ADMIN_TIMEOUT_S + 3.0
"""What a failover may take beyond ``masterDownTimeoutSeconds`` + the lease: one resync until
the operator looks, its own member read and the promote call's (each bounded by the admin
deadline: a SIGSTOPped master never answers), and 3 s for the apiserver and kopf on a loaded
machine."""
HOLD_S = DOWN_TIMEOUT_S + LEASE_MS / 1000 + RESYNC_S
"""How long a master cut off from the operator alone is watched not being failed over, s."""
OK_CODE = 20000


def _send_direct(endpoint: str, count: int, prefix: str) -> list[int]:
    """``count`` SendMessage calls straight to the broker at ``endpoint`` (a client's cached
    route); each one's status code."""

    def one(body: str) -> pb.v2.Message:
        props = pb.v2.SystemProperties(
            message_id=body,
            message_type=pb.v2.MessageType.NORMAL,
            born_timestamp=messages.timestamp(1_700_000_000_000),
            born_host="e2e",
            body_encoding=pb.v2.Encoding.IDENTITY,
        )
        return pb.v2.Message(
            topic=pb.v2.Resource(name=TOPIC), body=body.encode(), system_properties=props
        )

    async def run() -> list[int]:
        found = []
        async with grpc.aio.insecure_channel(endpoint) as channel:
            for index in range(count):
                answer = await rpc.unary_call(
                    channel,
                    pb.MESSAGING_SERVICE,
                    "SendMessage",
                    pb.v2_service.SendMessageRequest(messages=[one(f"{prefix}-{index}")]),
                    pb.v2_service.SendMessageResponse,
                    timeout_s=10,
                    metadata=(("x-mq-client-id", "e2e-stale@1"),),
                )
                entry = answer.entries[0].status if answer.entries else answer.status
                found.append(int(entry.code))
        return found

    return asyncio.run(run())


def _master_seen_up(env: HAEnv) -> bool:
    """The operator's last status shows ``demo-a-0`` answering as master, no failover pending."""
    group = env.group_status("demo-a")
    roles = {p["name"]: p.get("role") for p in group.get("pods", [])}
    return "failover" not in group and roles.get("demo-a-0") == "SYNC_MASTER"


def _wait_for_promotion(env: HAEnv, since_s: float) -> float:
    """Waits for ``demo-a-1``'s promotion in status; seconds from ``since_s`` (monotonic)."""
    env.wait(
        lambda: env.group_status("demo-a").get("lastPromotion", {}).get("masterPod") == "demo-a-1",
        "a promotion of demo-a-1 in status",
    )
    return time.monotonic() - since_s


def test_a_master_cut_off_from_the_operator_alone_is_not_failed_over_while_it_holds_its_lease(
    k8s: cluster.Cluster, namespace: str, tmp_path: pathlib.Path
) -> None:
    """The operator's path to the master cut (a proxy only the operator dials through) past
    ``masterDownTimeoutSeconds``: no promotion and the master keeps acknowledging sends, as it
    renews its lease at the name server; then the master SIGSTOPped too: the operator promotes
    the slave within the timeout + the lease, the old master resumed acknowledges nothing
    (fenced), and every message it acknowledged is served by the new master."""
    with _ha_env(k8s, namespace, tmp_path, ["demo-a-0", "demo-a-1"], proxied=("demo-a-0",)) as env:
        _start_group(env, LEASED_GROUP)
        acknowledged = _send(env.namesrv, 10, "before")
        env.wait(lambda: _master_seen_up(env), "the operator seeing the master up")
        env.proxies["demo-a-0"].cut()
        cut_at = time.monotonic()
        env.wait(
            lambda: "failover" in env.group_status("demo-a"),
            "the operator seeing the master unreachable",
        )
        rounds = 0
        while time.monotonic() - cut_at < HOLD_S:  # the hold itself: sends go on meanwhile
            acknowledged += _send(env.namesrv, 5, f"held-{rounds}")
            rounds += 1
            group = env.group_status("demo-a")
            assert "lastPromotion" not in group and "masterDownSince" not in group, group
            assert env.roles() == {"demo-a": "0"}
        assert "renews its lease" in env.group_status("demo-a")["failover"]
        assert _role(env, "demo-a-0") == "SYNC_MASTER"  # dialled directly: it serves
        assert "PromotionFailed" not in env.reasons() and "Promoted" not in env.reasons()

        pid = env.kubelet.slots["demo-a-0"].process.popen.pid  # type: ignore[union-attr]
        os.kill(pid, signal.SIGSTOP)
        stopped_at = time.monotonic()
        try:
            took_s = _wait_for_promotion(env, stopped_at)
        finally:
            os.kill(pid, signal.SIGCONT)
        print(f"promoted {took_s:.1f} s after the master stopped (held {HOLD_S:.0f} s before)")
        assert took_s <= DOWN_TIMEOUT_S + LEASE_MS / 1000 + PROMOTION_SLACK_S
        assert took_s >= LEASE_MS / 1000 - 1.0  # never inside its lease (renewed each 1 s)
        assert env.roles() == {"demo-a": "1"}
        codes = _send_direct(env.kubelet.endpoint("demo-a-0"), 10, "stale")
        assert OK_CODE not in codes, f"the resumed old master acknowledged: {codes}"
        env.wait(lambda: _role(env, "demo-a-1") == "SYNC_MASTER", "the promoted master serving")
        assert set(acknowledged) <= _read_all(env.namesrv)


def test_a_killed_master_behind_a_ready_pod_is_failed_over_within_the_timeout_and_the_lease(
    k8s: cluster.Cluster, namespace: str, tmp_path: pathlib.Path
) -> None:
    """The master's broker SIGKILLed while kwok keeps its pod Ready: the operator promotes the
    slave once the name server no longer holds the dead master's lease, within
    ``masterDownTimeoutSeconds`` + the lease (measured), never inside the lease, and every
    acknowledged message is served by the new master."""
    with _ha_env(k8s, namespace, tmp_path, ["demo-a-0", "demo-a-1"]) as env:
        _start_group(env, LEASED_GROUP)
        acknowledged = _send(env.namesrv, 20, "before")
        env.wait(lambda: _master_seen_up(env), "the operator seeing the master up")
        env.kubelet.kill("demo-a-0")
        killed_at = time.monotonic()
        took_s = _wait_for_promotion(env, killed_at)
        print(f"promoted {took_s:.1f} s after the master was killed")
        assert took_s <= DOWN_TIMEOUT_S + LEASE_MS / 1000 + PROMOTION_SLACK_S
        assert took_s >= LEASE_MS / 1000 - 1.0  # never inside its lease (renewed each 1 s)
        assert env.group_status("demo-a")["lastPromotion"]["reason"].startswith(
            "failover: master down for"
        )
        env.wait(lambda: _role(env, "demo-a-1") == "SYNC_MASTER", "the promoted master serving")
        assert set(acknowledged) <= _read_all(env.namesrv)


def _lag_on(namesrv: str, broker_name: str) -> int:
    async def run() -> int:
        async with admin.AdminClient(namesrv) as client:
            queues = await client.consumer_lag(GROUP, TOPIC)
        return sum(q.lag for q in queues if q.broker_name == broker_name)

    return asyncio.run(run())


def _reset(namesrv: str, target: admin_types.ResetTarget) -> None:
    async def run() -> None:
        async with admin.AdminClient(namesrv) as client:
            await client.create_group(GROUP)
            await client.reset_offset(GROUP, TOPIC, target)

    asyncio.run(run())


def _perms(namesrv: str) -> dict[str, int]:
    async def run() -> dict[str, int]:
        async with admin.AdminClient(namesrv) as client:
            return {t.broker_name: t.perm for t in await client.list_topics() if t.name == TOPIC}

    return asyncio.run(run())


def test_scale_in_refuses_while_messages_are_unconsumed(
    k8s: cluster.Cluster, namespace: str, tmp_path: pathlib.Path
) -> None:
    """Two groups scaled in to one: the removed group's write permission goes off and, while a
    consumer group has not consumed its messages, the scale-in is refused (condition, Event,
    StatefulSet kept); once the consumers caught up, the group is deleted."""
    with _ha_env(k8s, namespace, tmp_path, ["demo-a-0", "demo-b-0"]) as env:
        env.apply(_broker_body(groups=2, replicasPerGroup=1))
        env.wait(lambda: env.condition(status.READY).get("status") == "True", "Broker Ready")
        _create_topic(env.namesrv, groups=2)
        env.wait(lambda: set(_perms(env.namesrv)) == {"demo-a", "demo-b"}, "topic on both groups")
        _send(env.namesrv, 40, "m")
        _reset(env.namesrv, admin_types.ResetTarget.EARLIEST)
        assert _lag_on(env.namesrv, "demo-b") > 0

        env.apply(_broker_body(groups=1, replicasPerGroup=1))
        env.wait(
            lambda: env.condition(reconcile.SCALE_IN_BLOCKED).get("reason") == "UnconsumedMessages",
            "scale-in refused",
        )
        env.wait(lambda: "ScaleInRefused" in env.reasons(), "ScaleInRefused event")
        apps = kubernetes.client.AppsV1Api(env.k8s.api_client)
        assert apps.read_namespaced_stateful_set("demo-b", env.namespace) is not None
        assert _perms(env.namesrv)["demo-b"] & 2 == 0  # write permission wiped
        assert _perms(env.namesrv)["demo-a"] & 2 == 2

        _reset(env.namesrv, admin_types.ResetTarget.LATEST)
        env.wait(
            lambda: env.condition(reconcile.SCALE_IN_BLOCKED).get("reason") == "Drained",
            "scale-in done once drained",
        )

        def deleted() -> bool:
            try:
                apps.read_namespaced_stateful_set("demo-b", env.namespace)
            except kubernetes.client.ApiException as error:
                return bool(error.status == 404)
            return False

        env.wait(deleted, "StatefulSet demo-b deleted")
