"""The seeds' longer scenarios with the official classic Java client (``rocketmq-client`` 5.3.3,
Remoting), unmodified, against one ``ariane namesrv`` and two ``ariane broker`` groups
(``broker-a``, ``broker-b``) as real processes: orders through a ``MessageQueueSelector`` with
``MessageListenerOrderly`` consumers joining, leaving and dying; ``RECONSUME_LATER`` through
``%RETRY%<group>`` into ``%DLQ%<group>``; CLUSTERING with each rebalance strategy the client
ships; ``MQFaultStrategy`` with one broker SIGKILLed.

Shortened for the test: the brokers' queue-lock life (``[core.consumers] lock_expiry_ms``, 60 s
in RocketMQ) and, on the client side, the rebalance period (``rocketmq.client.rebalance.
waitInterval``, 20 s) and the orderly lock renewal (``...lockInterval``, 20 s, kept below the
lock life as RocketMQ keeps 20 s below 60 s). Consumers that run until told run in a
``DriverProcess``: their events are read as they come, closing stdin shuts them down cleanly.
"""

from __future__ import annotations

import collections
import json
import pathlib
import subprocess
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import live_testing
from ariane import dev
from conformance import classic_java_client
from conformance.classic_java_client import ClassicJava
from conformance.conftest import DriverProcess, ProcessCluster

pytestmark = pytest.mark.slow

LOCK_EXPIRY_MS = 6_000
BROKER_TOML = f"""
[core.consumers]
lock_expiry_ms = {LOCK_EXPIRY_MS}
"""
CLIENT_PROPERTIES = {
    "rocketmq.client.rebalance.waitInterval": "2000",
    "rocketmq.client.rebalance.lockInterval": "1000",
}
BROKERS = ("broker-a", "broker-b")
SCENARIO_DEADLINE_S = 120.0
"""Longest wait for one scenario's outcome (JVM starts and rebalances on a busy 2-core box)."""
ADMIN_FLAGS = ("--timeout", "30")
"""Each admin call's deadline, s: the shared 2-core machine is often loaded far beyond 2."""
LEVEL_3_MS, LEVEL_4_MS = 10_000, 30_000
"""RocketMQ's backoff of delay levels 3 and 4 (the first two RECONSUME_LATER redeliveries)."""


class Brokers(ProcessCluster):
    """A name server and the ``BROKERS`` groups as child processes (no front-end workers; each
    group with its own store and Remoting port); a broker may be SIGKILLed and started again."""

    def __init__(self, data_dir: pathlib.Path) -> None:
        self.ports = {name: (dev.free_port(), dev.free_port()) for name in BROKERS}
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        super().__init__(data_dir, broker_toml=BROKER_TOML)  # starts the first group
        for name in BROKERS[1:]:
            self.start_broker(name)

    def start_broker(self, name: str = BROKERS[0]) -> subprocess.Popen[bytes]:
        """Start broker group ``name`` on its store and ports; wait until it is registered."""
        grpc_port, remoting_port = self.ports[name]
        args = ["broker", "--config", str(self.config), "--namesrv", self.namesrv]
        args += ["--listen", f"127.0.0.1:{grpc_port}", "--broker-name", name, "--workers", "0"]
        args += ["--remoting-listen", f"127.0.0.1:{remoting_port}"]
        process = self._spawn([*args, "--store-dir", str(self.data_dir / name)], f"{name}.log")
        self.processes[name] = process
        ready_s = dev.READY_TIMEOUT_S
        dev.wait_until_listening("127.0.0.1", remoting_port, process=process, timeout_s=ready_s)
        dev.wait_until_registered(self.namesrv, name, process=process, timeout_s=ready_s)
        return process

    def kill_broker(self, name: str = BROKERS[0]) -> None:
        """SIGKILL broker group ``name`` by PID (nothing flushed or deregistered)."""
        live_testing.kill(self.processes[name])

    def stop(self) -> None:
        """Stop every process by PID."""
        for process in self.processes.values():
            dev.stop_process(process)
        dev.stop_process(self.namesrv_process)


@pytest.fixture(scope="module")
def brokers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Brokers]:
    made = Brokers(tmp_path_factory.mktemp("brokers"))
    try:
        yield made
    finally:
        made.stop()


@pytest.fixture(scope="module")
def java(brokers: Brokers, tmp_path_factory: pytest.TempPathFactory) -> ClassicJava:
    """The classic driver, fetched and compiled (cached by a stamp), with the short client
    rebalance and lock-renewal periods."""
    logs = tmp_path_factory.mktemp("java")
    return ClassicJava(classic_java_client.build(), brokers.namesrv, logs, CLIENT_PROPERTIES)


class JavaProcess(DriverProcess):
    """A long classic driver scenario (orderly, consumers, later, fault-send) whose events are
    read as they come; ``close`` closes its stdin, which shuts the client down cleanly."""

    def __init__(self, java: ClassicJava, brokers: Brokers, scenario: str, *args: str) -> None:
        super().__init__(
            brokers,
            scenario,
            *("--namesrv", brokers.namesrv, *args),
            driver=java.command,
            env=dict(classic_java_client.JAVA_ENV),
        )

    def received(self) -> list[dict[str, Any]]:
        """Every ``received`` event so far."""
        self.drain()
        return [e for e in self.seen if e["event"] == "received"]


def _topic(brokers: Brokers, name: str, queues: int, *only: str) -> str:
    flags = ("--type", "NORMAL", *(("--broker", only[0]) if only else ()))
    brokers.admin("topic", "create", name, "--queues", str(queues), *flags, *ADMIN_FLAGS)
    return name


def _poll(done: Callable[[], bool], what: str, deadline_s: float = SCENARIO_DEADLINE_S) -> None:
    """Call ``done`` every 0.2 s until it is true; fail with ``what`` after ``deadline_s``."""
    deadline = time.monotonic() + deadline_s
    while not done():
        assert time.monotonic() < deadline, f"{what} within {deadline_s} s"
        time.sleep(0.2)  # polling with the deadline above


def _step(event: dict[str, Any]) -> tuple[int, int]:
    """(order, step) of an orderly message, from its body ``o<order>-<step>``."""
    order, step = event["body"][1:].split("-")
    return int(order), int(step)


def _orders_in_order(events: list[dict[str, Any]]) -> dict[int, int]:
    """Checks that no step of an order was consumed before every earlier step had been (a
    redelivery of an earlier step is allowed: offsets of a killed consumer are replayed); the
    highest step consumed per order."""
    top: dict[int, int] = collections.defaultdict(lambda: -1)
    for event in sorted(events, key=lambda e: (e["at_ms"], _step(e)[1])):
        order, step = _step(event)
        assert step <= top[order] + 1, (order, step, top[order], event["instance"])
        top[order] = max(top[order], step)
    return dict(top)


def test_orderly_consumers_keep_each_order_while_joining_leaving_and_dying(
    brokers: Brokers, java: ClassicJava
) -> None:
    """Orders sent through a MessageQueueSelector by order id are consumed step after step by
    MessageListenerOrderly consumers while a third joins, one leaves and one is SIGKILLed; the
    killed one's queues go to the survivor, which then consumes every order to its end."""
    orders, steps = 8, 60
    total = orders * steps
    topic = _topic(brokers, "classic-orderly", 8, "broker-a")
    flags = ("--topic", topic, "--group", "classic-orderly-g")
    c1, c2 = (JavaProcess(java, brokers, "orderly", *flags, "--instance", f"c{i}") for i in (1, 2))
    for consumer in (c1, c2):
        consumer.wait_for("started", deadline_s=SCENARIO_DEADLINE_S)
    sender = JavaProcess(
        java, brokers, "orderly-send", "--topic", topic, "--orders", str(orders),
        "--count", str(total), "--interval-ms", "40",
    )  # fmt: skip
    consumers = [c1, c2]
    try:
        _sent_at_least(sender, total // 6)
        consumers.append(JavaProcess(java, brokers, "orderly", *flags, "--instance", "c3"))
        consumers[2].wait_for("started", deadline_s=SCENARIO_DEADLINE_S)
        _sent_at_least(sender, total // 3)
        c1.close()  # leaves cleanly: unlocks and hands its queues over
        _sent_at_least(sender, total // 2)
        c2.process.kill()  # SIGKILL by PID: no unlock, no offset persisted
        c2.process.wait(timeout=30)
        killed_at_ms, sent_at_kill = time.time() * 1000, len(_sent(sender))
        assert sent_at_kill + orders <= total, "the sends ended before the kill: nothing to move"
        finished = {o: steps - 1 for o in range(orders)}
        _poll(lambda: _orders_in_order(_all(consumers)) == finished, "orders left unfinished")
    finally:
        for process in (sender, *consumers):
            process.close()
    assert all(c.received() for c in consumers), "a consumer never got a queue"
    after_kill = {e["queue_id"] for e in consumers[2].received() if e["at_ms"] > killed_at_ms}
    assert after_kill == set(range(8)), "the killed consumer's queues did not move"


def _sent_at_least(sender: JavaProcess, count: int) -> None:
    _poll(lambda: len(_sent(sender)) >= count, f"{count} orderly sends")


def _all(consumers: list[JavaProcess]) -> list[dict[str, Any]]:
    return [e for c in consumers for e in c.received()]


def test_reconsume_later_backs_off_through_retry_then_lands_in_the_dlq(
    brokers: Brokers, java: ClassicJava
) -> None:
    """A message a MessageListenerConcurrently always answers RECONSUME_LATER to is redelivered
    through %RETRY%<group> after level 3's then level 4's backoff, and after maxReconsumeTimes
    (2) is in %DLQ%<group> carrying its origin topic and message id, delivered no more."""
    topic = _topic(brokers, "classic-later", 1, "broker-a")
    group = "classic-later-g"
    (sent,) = java.run("send", "--topic", topic, "--count", "1").sent_ids()
    consumer = JavaProcess(
        java, brokers, "later", "--topic", topic, "--group", group, "--max-reconsume", "2"
    )
    try:
        deadline_s = SCENARIO_DEADLINE_S + (LEVEL_3_MS + LEVEL_4_MS) / 1000
        _poll(lambda: len(consumer.received()) >= 3, "three deliveries", deadline_s)
        listed = _poll_dlq(brokers, group)
    finally:
        consumer.close()
    deliveries = consumer.received()
    assert [e["reconsume_times"] for e in deliveries] == [0, 1, 2]
    assert {(e["message_id"], e["topic"], e["body"]) for e in deliveries} == {(sent, topic, "m-0")}
    assert [e["retry_topic"] for e in deliveries[1:]] == [topic, topic]
    first, second, third = (e["at_ms"] for e in deliveries)
    assert second - first >= LEVEL_3_MS and third - second >= LEVEL_4_MS, (first, second, third)
    assert [(d["message_id"], d["origin_topic"]) for d in listed] == [(sent, topic)]
    dlq = f"%DLQ%{group}"
    read = java.run("lite", "--topic", dlq, "--group", "dlq-reader", "--assign-queue", "0")
    (letter,) = read.of("received")
    assert (letter["retry_topic"], letter["origin_id"], letter["body"]) == (topic, sent, "m-0")
    assert len(consumer.received()) == 3, "delivered after it went to the DLQ"


def _poll_dlq(brokers: Brokers, group: str) -> list[dict[str, Any]]:
    """The group's dead letters as ``ariane admin dlq list --json`` lists them, once there is
    one."""
    letters: list[dict[str, Any]] = []

    def listed() -> bool:
        letters[:] = json.loads(brokers.admin("dlq", "list", group, "--json", *ADMIN_FLAGS).stdout)
        return bool(letters)

    _poll(listed, f"no dead letter of {group}")
    return letters


STRATEGIES = {"cl-avg": "AVG", "cl-circle": "CIRCLE", "cl-hash": "HASH", "cl-config": "CONFIG"}
"""Each rebalance strategy of the client (``AllocateMessageQueueAveragely``, ``...ByCircle``,
``...ConsistentHash``, ``...ByConfig``) in its own group; ``...ByMachineRoom`` needs broker
names of the form ``room@name`` and ``AllocateMachineRoomNearby`` a resolver, so neither fits."""


def _settled(members: list[JavaProcess], topic: str, queues: int) -> bool:
    """Whether every group's latest allocations (one per member, over all members' ids)
    split the topic's queues between the members, each queue to exactly one."""
    latest: dict[tuple[str, int], list[str]] = {}
    for index, member in enumerate(members):
        member.drain()
        for e in member.seen:
            if e["event"] == "allocated" and e["topic"] == topic:
                latest[(e["group"], index)] = e["queues"] if e["cids"] == len(members) else []
    for group in STRATEGIES:
        owned = [q for i in range(len(members)) for q in latest.get((group, i), [])]
        if sorted(owned) != sorted(f"broker-a/{q}" for q in range(queues)):
            return False
    return True


def test_clustering_delivers_each_message_once_with_each_rebalance_strategy(
    brokers: Brokers, java: ClassicJava
) -> None:
    """Three CLUSTERING push consumers of a group, for each rebalance strategy, split the
    queues between them (the broker lists the ids, the client allocates) and together
    receive every message exactly once."""
    queues, count = 6, 30
    topic = _topic(brokers, "classic-clustering", queues, "broker-a")
    groups = ",".join(f"{g}:{s}" for g, s in STRATEGIES.items())
    flags = (
        *("--topic", topic, "--groups", groups, "--broker-name", "broker-a"),
        *("--members", "3", "--queues", str(queues)),
    )
    members = [
        JavaProcess(java, brokers, "consumers", *flags, "--instance", f"m{i}", "--index", str(i))
        for i in range(3)
    ]
    try:
        _poll(lambda: _settled(members, topic, queues), "the groups did not settle")
        sent = java.run("send", "--topic", topic, "--count", str(count)).sent_ids()
        counts: collections.Counter[tuple[str, str]] = collections.Counter()

        def all_received() -> bool:
            counts.clear()
            counts.update((e["group"], e["message_id"]) for e in _all(members))
            return all((g, m) in counts for g in STRATEGIES for m in sent)

        _poll(all_received, "a group missed messages")
    finally:
        for member in members:
            member.close()
    counts.clear()
    counts.update((e["group"], e["message_id"]) for m in members for e in m.seen
                  if e["event"] == "received")  # fmt: skip
    assert counts == {(g, m): 1 for g in STRATEGIES for m in sent}
    for group in STRATEGIES:
        readers = [i for i, m in enumerate(members) if any(
            e["event"] == "received" and e["group"] == group for e in m.seen)]  # fmt: skip
        assert len(readers) >= 2, (group, readers)


def test_fault_strategy_keeps_sending_when_a_broker_is_killed(
    brokers: Brokers, java: ClassicJava
) -> None:
    """A producer with sendLatencyFaultEnable sends to both broker groups; once broker-b is
    SIGKILLed mid-run every later send succeeds on broker-a, and every acknowledged send, of
    either broker (broker-b started again on its store), is read back by a push consumer."""
    count = 160
    topic = _topic(brokers, "classic-fault", 4)
    sender = JavaProcess(
        java, brokers, "fault-send", "--topic", topic, "--count", str(count), "--interval-ms", "40"
    )
    try:
        _poll(lambda: {e["broker"] for e in _sent(sender)} == set(BROKERS), "sends to both")
        brokers.kill_broker("broker-b")  # returns once the process is gone
        killed_at_ms = time.time() * 1000  # the clock of the driver's at_ms (CLOCK_REALTIME)
        sender.wait_for("done", deadline_s=SCENARIO_DEADLINE_S)  # absent: fails on the deadline
    finally:
        sender.close()
        if brokers.processes["broker-b"].poll() is not None:
            brokers.start_broker("broker-b")
    sent = _sent(sender)
    failed = [e for e in sender.seen if e["event"] == "failed"]
    assert not failed and len(sent) == count, failed
    # Acknowledged after the kill, by the driver's clock (not by what the test had read of its
    # output: a loaded machine delays that by several sends); the first such send may carry a
    # broker-b answer that was in the client's socket before the kill.
    after = [e for e in sent if e["at_ms"] > killed_at_ms][1:]
    assert after and {e["broker"] for e in after} == {"broker-a"}, after[:3]
    ids = [e["message_id"] for e in sent]
    got = java.run("push", "--topic", topic, "--group", "classic-fault-g", "--count", str(count))
    assert got.code == 0, got.of("done")
    assert {e["message_id"] for e in got.of("received")} == set(ids)


def _sent(process: JavaProcess) -> list[dict[str, Any]]:
    process.drain()
    return [e for e in process.seen if e["event"] == "sent"]
