"""The official classic Go client (``github.com/apache/rocketmq-client-go/v2``, Remoting),
unmodified, against real ``ariane namesrv`` + ``ariane broker`` processes (plaintext; the same
client over TLS + ACL is ``test_polyglot_auth.py``).

The version is the Go module proxy's pseudo-version of the client's unreleased master,
``v2.1.3-0.20251226070945-2173d070fd1b``: the last release, v2.1.2, has no TLS, and master has
``WithTls`` (apache/rocketmq-client-go#951). These scenarios passed on v2.1.2 before the bump.

The client runs in its own process through ``go_classic/main.go`` (fetched from the Go module proxy
and built by ``go_classic/build.sh`` into ``~/.cache/ariane``) and reaches the broker through the
name server's routes (the name server's one port serves Remoting), as a user's application does.
Each run's client log (the Go client logs a lot) goes to a file under the test's temporary
directory, and its tail is shown when an assertion fails. Scenarios: sync, async, oneway and batch
sends; push consumers in CLUSTERING (each message once across two consumers) and BROADCASTING
(each consumer gets all); ordered sends through a queue selector read by an orderly consumer;
``ConsumeRetryLater`` redelivered through ``%RETRY%<group>`` and then dead-lettered into
``%DLQ%<group>``; transactions with commit, rollback and check-back; delay level 3.
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import pathlib
import time
from collections.abc import Iterator
from typing import Any

import pytest

from conformance import polyglot
from conformance.conftest import Cluster, DriverProcess

pytestmark = pytest.mark.slow

HERE = pathlib.Path(__file__).resolve().parent
RUN_DEADLINE_S = 150
"""Longest life of one driver run (its own ``--deadline-s``; it exits 3 then)."""
EVENT_DEADLINE_S = 60.0
"""Longest wait for one awaited event."""
REDELIVERY_DEADLINE_S = 90.0
"""Longest wait for a retry's redelivery: the first waits for the client's 20 s rebalance after
its 30 s route poll has seen ``%RETRY%<group>`` (created by its first heartbeat, after its first
route query), about 40 s."""
CHECK_BACK_DEADLINE_S = 80.0
"""Longest wait for a transaction check-back (the broker checks every 30 s, after 6 s)."""
LOG_TAIL_CHARS = 4000
DELAY_LEVEL_3_MS = 10_000
DELAY_LATE_MS_MAX = 5_000
"""How late a delayed message may arrive (the schedule's poll and process slack)."""


class Run:
    """One driver process (its events read as they come, its stderr in ``log``)."""

    def __init__(self, process: DriverProcess, log: pathlib.Path) -> None:
        self.process = process
        self.log = log

    def tail(self) -> str:
        """The end of the client's log, for failure messages."""
        return self.log.read_text(errors="replace")[-LOG_TAIL_CHARS:]

    def wait_for(self, event: str, deadline_s: float = EVENT_DEADLINE_S) -> dict[str, Any]:
        """The next ``event``; fails with the log's tail after ``deadline_s``."""
        try:
            return self.process.wait_for(event, deadline_s=deadline_s)
        except AssertionError as failed:
            raise AssertionError(f"{failed}\n--- {self.log.name}:\n{self.tail()}") from None

    def of(self, event: str) -> list[dict[str, Any]]:
        """Events named ``event`` seen so far (after ``drain``)."""
        self.process.drain()
        return [e for e in self.process.seen if e["event"] == event]

    def finish(self) -> list[dict[str, Any]]:
        """Wait for ``done`` (the run ends by itself), stop the process, return every event."""
        self.wait_for("done", deadline_s=RUN_DEADLINE_S)
        return self.close()

    def close(self) -> list[dict[str, Any]]:
        """Close stdin (the client shuts down), wait for exit and return every event."""
        self.process.close()
        self.process.drain()
        code = self.process.process.returncode
        assert code == 0, f"driver exited {code}: {self.process.seen[-5:]}\n{self.tail()}"
        return self.process.seen


class GoClassic:
    """The built driver: ``start`` a scenario against the cluster's name server."""

    def __init__(self, binary: str, cluster: Cluster, logs: pathlib.Path) -> None:
        self._binary = binary
        self._cluster = cluster
        self._logs = logs
        self._env = {
            **os.environ,
            # BROADCASTING offsets in the test's directory, not under $HOME
            "rocketmq.client.localOffsetStoreDir": str(logs / "offsets"),
        }
        self._runs = 0

    def start(self, scenario: str, *args: str) -> Run:
        """Start a scenario (``--deadline-s`` bounded); its log is ``NN-scenario.log``."""
        self._runs += 1
        log = self._logs / f"{self._runs:02d}-{scenario}.log"
        process = DriverProcess(
            self._cluster,
            scenario,
            *args,
            "--deadline-s",
            str(RUN_DEADLINE_S),
            driver=(self._binary,),
            env=self._env,
            log=log,
        )
        return Run(process, log)

    def run(self, scenario: str, *args: str) -> list[dict[str, Any]]:
        """Run a scenario to its ``done``; every event it printed."""
        return self.start(scenario, *args).finish()


@pytest.fixture(scope="module")
def go(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> GoClassic:
    """The classic Go driver, fetched and built (cached by a stamp)."""
    binary = polyglot.script_output(HERE / "go_classic" / "build.sh")
    return GoClassic(binary, cluster, tmp_path_factory.mktemp("go-classic"))


@contextlib.contextmanager
def consumers(go: GoClassic, count: int, *args: str) -> Iterator[list[Run]]:
    """``count`` push consumers started one after another (each waits for the previous one's
    ``started``), closed on exit."""
    runs: list[Run] = []
    try:
        for i in range(count):
            runs.append(go.start("push", *args, "--count", "0", "--instance", f"c{i}"))
            runs[-1].wait_for("started")
        yield runs
    finally:
        for run in runs:
            run.process.close()


def _topic(cluster: Cluster, name: str, queues: int = 4) -> str:
    cluster.admin("topic", "create", name, "--queues", str(queues), "--type", "NORMAL")
    return name


def _sent(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if e["event"] == "sent"]


def _received(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if e["event"] == "received"]


def _until_received(runs: list[Run], bodies: set[str], *, each: bool = False) -> None:
    """Poll the runs' ``received`` events until ``bodies`` arrived at all of them together
    (``each``: at every one of them); fails after ``EVENT_DEADLINE_S`` with what is missing."""
    deadline = time.monotonic() + EVENT_DEADLINE_S
    while True:
        got = [{e["body"] for e in r.of("received")} for r in runs]
        missing = [bodies - g for g in got] if each else [bodies - set().union(*got)]
        if not any(missing):
            return
        if time.monotonic() > deadline:
            tails = "\n".join(r.tail()[-1500:] for r in runs)
            raise AssertionError(f"missing {missing}; got {[len(g) for g in got]}\n{tails}")
        time.sleep(0.2)  # polling the drivers' output, with a deadline


def _until_allocated(runs: list[Run], topic: str, *, queues: int) -> None:
    """Poll until each run's latest rebalance of ``topic`` counted all runs and together they
    hold each of the ``queues`` once (messages sent earlier could move with a queue)."""
    deadline = time.monotonic() + EVENT_DEADLINE_S
    while True:
        latest = [[e for e in r.of("allocated") if e["topic"] == topic][-1:] for r in runs]
        held = sorted(q for got in latest for e in got for q in e["queues"])
        if held == list(range(queues)) and all(got[0]["clients"] == len(runs) for got in latest):
            return
        assert time.monotonic() < deadline, f"no settled rebalance: {latest}"
        time.sleep(0.2)  # polling the drivers' output, with a deadline


def test_every_send_mode_reaches_two_clustering_consumers_once(
    cluster: Cluster, go: GoClassic
) -> None:
    """Sync, async, oneway and batch sends all arrive at a CLUSTERING group of two push
    consumers, each message at exactly one of them, with body, tag, keys and user property;
    both consumers take part (the group's queues are split between them)."""
    topic = _topic(cluster, "go-modes")
    args = ("--topic", topic, "--group", "go-modes-g")
    with consumers(go, 2, *args) as runs:
        _until_allocated(runs, topic, queues=4)
        sent: dict[str, dict[str, Any]] = {}
        for mode in ("sync", "async", "oneway", "batch"):
            events = go.run(
                "send", "--topic", topic, "--count", "5", "--mode", mode, "--prefix", mode
            )
            assert len(_sent(events)) == 5, events
            sent |= {e["body"]: e for e in _sent(events)}
        _until_received(runs, set(sent))
        for run in runs:
            run.close()
    received = [e for r in runs for e in _received(r.process.seen)]
    assert all(_received(r.process.seen) for r in runs), "both consumers take part"
    counts = collections.Counter(e["body"] for e in received)
    assert counts == collections.Counter(sent.keys()), "each message once across the group"
    for event in received:
        assert (event["tag"], event["color"], event["topic"]) == ("TagA", "red", topic)
        origin = sent[event["body"]]
        assert event["keys"] == f"k-{origin['i']}"
        if origin["message_id"]:  # a batch's ids are the broker's (the Go client sets none)
            assert event["message_id"] == origin["message_id"]
        if origin.get("offset_msg_id"):
            assert event["offset_msg_id"] == origin["offset_msg_id"]
    assert len({e["message_id"] for e in received}) == len(received)


def test_broadcasting_consumers_each_get_every_message(cluster: Cluster, go: GoClassic) -> None:
    """Two BROADCASTING push consumers of one group each receive every message once."""
    topic = _topic(cluster, "go-broadcast")
    sent = [e["body"] for e in _sent(go.run("send", "--topic", topic, "--count", "8"))]
    args = ("--topic", topic, "--group", "go-bc", "--model", "BROADCASTING")
    with consumers(go, 2, *args) as runs:
        _until_received(runs, set(sent), each=True)
        for run in runs:
            run.close()
    for run in runs:
        assert sorted(e["body"] for e in _received(run.process.seen)) == sorted(sent)


def test_selector_orders_are_consumed_in_order(cluster: Cluster, go: GoClassic) -> None:
    """Messages a QueueSelector sends by order id land on that order's queue, and an orderly
    push consumer (queue locks) receives each order's steps in the order they were sent."""
    topic = _topic(cluster, "go-orders")
    orders, steps = 4, 8
    sent = _sent(
        go.run("send", "--topic", topic, "--count", str(orders * steps), "--orders", str(orders))
    )
    assert {e["body"]: e["queue_id"] for e in sent} == {
        f"o{o}-{s}": o % 4 for o in range(orders) for s in range(steps)
    }
    args = ("--topic", topic, "--group", "go-orders-g", "--orderly")
    events = go.run("push", *args, "--count", str(orders * steps))
    by_order: dict[str, list[int]] = collections.defaultdict(list)
    for event in _received(events):
        order, _, step = event["body"].partition("-")
        by_order[order].append(int(step))
    assert by_order == {f"o{o}": list(range(steps)) for o in range(orders)}


def _until_dead_lettered(cluster: Cluster, group: str) -> list[dict[str, Any]]:
    """Poll ``ariane admin dlq list GROUP`` until it lists a letter; returns the letters."""
    deadline = time.monotonic() + EVENT_DEADLINE_S
    while True:
        listed = cluster.admin("--json", "dlq", "list", group, check=False)
        if listed.returncode == 0 and (letters := json.loads(listed.stdout)):
            return list(letters)
        assert time.monotonic() < deadline, f"no dead letter of {group}: {listed.stderr}"
        time.sleep(0.5)  # polling the broker, with a deadline


def test_retry_later_goes_through_the_retry_topic_then_the_dlq(
    cluster: Cluster, go: GoClassic
) -> None:
    """A message a consumer keeps answering ConsumeRetryLater comes back through
    ``%RETRY%<group>`` with growing reconsume times, and after MaxReconsumeTimes (2) lands in
    ``%DLQ%<group>``, where a consumer reads it with its id and original topic."""
    topic = _topic(cluster, "go-retry", queues=1)
    (sent,) = _sent(go.run("send", "--topic", topic, "--count", "1"))
    failure = ("--fail", "--max-reconsume", "2", "--retry-delay-level", "1")
    failing = go.start("push", "--topic", topic, "--group", "go-retry-g", *failure, "--count", "0")
    try:
        for _ in range(3):
            failing.wait_for("received", deadline_s=REDELIVERY_DEADLINE_S)
        letters = _until_dead_lettered(cluster, "go-retry-g")
    finally:
        failing.process.close()
    assert [(e["message_id"], e["attempts"]) for e in letters] == [(sent["message_id"], 3)]
    got = failing.of("received")
    assert [(e["queue_topic"], e["reconsume_times"]) for e in got] == [
        (topic, 0),
        ("%RETRY%go-retry-g", 1),
        ("%RETRY%go-retry-g", 2),
    ]
    assert {(e["message_id"], e["topic"], e["body"]) for e in got} == {
        (sent["message_id"], topic, "m-0")
    }
    assert [e["retry_topic"] for e in got[1:]] == [topic, topic]
    dead = go.run("push", "--topic", "%DLQ%go-retry-g", "--group", "go-dlq-reader", "--count", "1")
    (letter,) = _received(dead)
    assert letter["message_id"] == sent["message_id"] and letter["body"] == "m-0"
    assert letter["retry_topic"] == topic and letter["reconsume_times"] == 3


def test_transaction_commit_rollback_and_check_back(cluster: Cluster, go: GoClassic) -> None:
    """Of three transactional messages, the committed one and the one committed by the broker's
    check-back are consumed; the rolled-back one never is, and only the unknown one is checked."""
    topic = _topic(cluster, "go-tx", queues=1)
    producer = go.start("transaction", "--topic", topic, "--group", "go-tx-p")
    try:
        sent = [producer.wait_for("sent") for _ in range(3)]
        assert all(len(e["offset_msg_id"]) == 32 for e in sent), sent
        checked = producer.wait_for("checked", deadline_s=CHECK_BACK_DEADLINE_S)
        assert checked["body"] == "m-2"
        events = go.run("push", "--topic", topic, "--group", "go-tx-c", "--count", "2")
        assert sorted(e["body"] for e in _received(events)) == ["m-0", "m-2"]
    finally:
        producer.process.close()
    assert {e["body"] for e in producer.of("checked")} == {"m-2"}


def test_delay_level_3_arrives_after_ten_seconds(cluster: Cluster, go: GoClassic) -> None:
    """A message sent with delay level 3 is put in its topic 10 s after it was made (its store
    time there), and never consumed before."""
    topic = _topic(cluster, "go-delay", queues=1)
    (sent,) = _sent(go.run("send", "--topic", topic, "--count", "1", "--delay-level", "3"))
    events = go.run("push", "--topic", topic, "--group", "go-delay-g", "--count", "1")
    (received,) = _received(events)
    assert received["message_id"] == sent["message_id"]
    late_ms = received["store_ms"] - received["born_ms"] - DELAY_LEVEL_3_MS
    assert 0 <= late_ms <= DELAY_LATE_MS_MAX, late_ms
    assert received["at_ms"] >= received["born_ms"] + DELAY_LEVEL_3_MS
