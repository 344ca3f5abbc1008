"""The official Java (``rocketmq-client-java`` 5.0.8 and 5.2.0) and Go (``golang/v5`` v5.1.3)
clients work.

Each client is unmodified and runs in its own process (``polyglot.py``: fetched and built by the
tests' own scripts into ``~/.cache/ariane``; the one Java driver source built against each Java
version) against the session's shared ``ariane namesrv`` + ``ariane broker`` pair, addressed
through the name server as their access point. Every scenario runs once per client, on topics and
groups of its own (``CASES``): normal, async, FIFO, tag and SQL92 filters, push redelivery, delay,
transactions with check-back, and recall (Java; the Go client has no recall API). Java 5.2.0's
priority messages and lite push consumer (issue 27 items 1-2) are served; 5.0.8 lacks their API.

A Java client runs all its scenarios at once in one JVM (``polyglot.Client.run_batch``, on the
first test that asks), so a Java version costs about its slowest scenario (the transaction
check-back) instead of the sum; the Go driver runs one scenario per process.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import pathlib
from collections.abc import Iterator, Sequence

import pytest

import live_testing
from ariane import client as ariane_client
from ariane.common import message
from conformance import polyglot
from conformance.conftest import Cluster

pytestmark = pytest.mark.slow

DELAY_LATE_MS_MAX = 5_000
"""How late a delayed message may arrive: the 1 s bound of issue 11 plus process and poll slack."""


@dataclasses.dataclass(frozen=True, slots=True)
class Case:
    """One scenario of a client on a topic (and group) of its own.

    Args:
        kind: the topic's message type (``ariane admin topic create --type``).
        queues: the topic's queue count.
        scenario: the driver's scenario.
        args: the driver's arguments after ``--topic`` and ``--group``.
        fifo_group: the group is created orderly (``--fifo``) first.
    """

    kind: str
    queues: int
    scenario: str
    args: tuple[str, ...]
    fifo_group: bool = False


CASES = {
    "normal": Case("NORMAL", 4, "send-consume", ("--count", "20")),
    "async": Case("NORMAL", 2, "send-consume", ("--count", "20", "--mode", "async")),
    "fifo": Case(
        "FIFO", 3, "send-consume", ("--count", "40", "--groups", "5", "--deadline-s", "120"),
        fifo_group=True,
    ),
    "tags": Case(
        "NORMAL", 2, "send-consume",
        ("--count", "20", "--tags", "TagA,TagB", "--expr", "TagA", "--expect", "10",
         "--linger-s", "3"),
    ),
    "sql": Case(
        "NORMAL", 2, "send-consume",
        ("--count", "20", "--expr", "n >= 15", "--expr-type", "SQL92", "--expect", "5",
         "--linger-s", "3"),
    ),
    "push": Case("NORMAL", 2, "push-redelivery", ("--count", "3", "--deadline-s", "90")),
    "delay": Case("DELAY", 2, "send-consume", ("--count", "3", "--delay-ms", "3000")),
    "tx": Case("TRANSACTION", 2, "transaction", ("--linger-s", "3", "--deadline-s", "120")),
    "recall": Case("DELAY", 1, "recall", ("--delay-ms", "3000", "--linger-s", "4")),
    "priority": Case(
        "PRIORITY", 4, "send-consume", ("--count", "1", "--priority", "5", "--deadline-s", "30"),
    ),
    "lite": Case(
        "LITE", 1, "lite-push",
        ("--lite-topic", "session-1", "--count", "1", "--deadline-s", "30"),
    ),
}  # fmt: skip
"""Every scenario by name; topic and group are ``v5-<client slug>-<name>``. The last three are
Java's only (the Go client has no API for them): their tests take the Java clients alone, and a
Java batch runs every case."""

RUN_TIMEOUT_S = 240
"""Longest run of one driver process (a batch: its slowest scenario, the check-back, ~45 s)."""


class Runs:
    """The outcomes of one client's ``CASES`` on a cluster, each run once (a Java client runs
    all of its cases in one batch on the first ask; Go one per ask)."""

    def __init__(self, cluster: Cluster, client: polyglot.Client) -> None:
        self.cluster = cluster
        self.client = client
        self.done: dict[str, polyglot.Outcome] = {}

    def name(self, case: str) -> str:
        """The topic and group of ``case``."""
        return f"v5-{self.client.slug}-{case}"

    def create(self, cases: Sequence[str]) -> None:
        """Create the topics (and orderly groups) of ``cases``; return once all are routed.

        In process (``AdminClient``): a dozen ``ariane admin`` processes cost a minute here.
        """

        async def create_all() -> None:
            async with ariane_client.AdminClient(self.cluster.namesrv) as admin:
                for case in cases:
                    spec, name = CASES[case], self.name(case)
                    await admin.create_topic(
                        name,
                        read_queue_nums=spec.queues,
                        write_queue_nums=spec.queues,
                        message_type=message.MessageType(spec.kind),
                    )
                    if spec.fifo_group:
                        await admin.create_group(name, consume_orderly=True)
                for case in cases:
                    await live_testing.wait_routed(admin, self.name(case))

        asyncio.run(create_all())

    def plan(self, case: str) -> tuple[str, ...]:
        """The driver's scenario and arguments for ``case``."""
        name = self.name(case)
        return (CASES[case].scenario, "--topic", name, "--group", name, *CASES[case].args)

    def __call__(self, case: str) -> polyglot.Outcome:
        """The outcome of ``case``, run (with the rest of a Java batch) when not yet."""
        if case not in self.done:
            endpoints = self.cluster.namesrv
            if self.client.name.startswith("java"):
                cases = [name for name in CASES if name not in self.done]
                self.create(cases)
                plan = {name: self.plan(name) for name in cases}
                self.done |= self.client.run_batch(
                    plan, endpoints=endpoints, timeout_s=RUN_TIMEOUT_S
                )
            else:
                self.create([case])
                scenario, *args = self.plan(case)
                self.done[case] = self.client.run(
                    scenario, *args, endpoints=endpoints, timeout_s=RUN_TIMEOUT_S
                )
        return self.done[case]


@pytest.fixture(scope="module", params=polyglot.CLIENTS)
def client(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[polyglot.Client]:
    """One official client, fetched and built (cached by a stamp), its logs in a temp dir."""
    name: str = request.param
    yield polyglot.build(name, pathlib.Path(tmp_path_factory.mktemp(f"{name}-logs")))


@pytest.fixture(scope="module")
def runs(cluster: Cluster, client: polyglot.Client) -> Runs:
    """The client's scenario outcomes on the shared cluster."""
    return Runs(cluster, client)


def test_send_and_simple_consume(runs: Runs) -> None:
    """Twenty messages sent one by one come back once each with body, tag, keys and attempt 1."""
    got = runs("normal")
    assert got.code == 0, got.stderr
    sent = got.sent_ids()
    received = got.of("received")
    assert len(set(sent)) == 20
    assert sorted(e["message_id"] for e in received) == sorted(sent)
    by_n = {int(e["n"]): e for e in received}
    assert by_n[7]["body"] == "m-7" and by_n[7]["keys"] == ["k-7"]
    assert all(e["tag"] == "TagA" and e["attempt"] == 1 for e in received)


def test_async_send(runs: Runs) -> None:
    """Twenty asynchronous sends all complete with distinct ids, and every message is consumed."""
    got = runs("async")
    assert got.code == 0, got.stderr
    sent = got.of("sent")
    assert len({e["message_id"] for e in sent}) == 20 and all(e["async"] for e in sent)
    assert sorted(e["message_id"] for e in got.of("received")) == sorted(got.sent_ids())


def test_fifo_order_per_message_group(runs: Runs) -> None:
    """On a FIFO topic with an orderly group, each of five message groups arrives in send order."""
    got = runs("fifo")
    assert got.code == 0, got.stderr
    order: dict[str, list[int]] = collections.defaultdict(list)
    for event in got.of("received"):
        order[event["group"]].append(int(event["n"]))
    assert sorted(order) == [f"g{i}" for i in range(5)]
    for message_group, seqs in order.items():
        assert seqs == sorted(seqs), f"{message_group} out of order: {seqs}"
        assert len(seqs) == 8


def test_tag_filter(runs: Runs) -> None:
    """Subscribed to ``TagA``, the consumer gets exactly the TagA half of TagA/TagB messages."""
    got = runs("tags")
    assert got.code == 0, got.stderr
    even = {e["message_id"] for e in got.of("sent") if e["i"] % 2 == 0}
    received = got.of("received")
    assert {e["message_id"] for e in received} == even and len(received) == 10
    assert {e["tag"] for e in received} == {"TagA"}


def test_sql92_filter(runs: Runs) -> None:
    """Subscribed with SQL92 ``n >= 15``, the consumer gets exactly messages 15..19."""
    got = runs("sql")
    assert got.code == 0, got.stderr
    assert sorted(int(e["n"]) for e in got.of("received")) == [15, 16, 17, 18, 19]


def test_push_consumer_redelivers_a_failed_message(runs: Runs) -> None:
    """A PushConsumer (via the name server) that fails attempt 1 gets each message back as 2.

    The Go client asks its access point, the name server, for QueryAssignment: this proves the
    name server forwards it (issue 11 item 6); before, a Go PushConsumer received nothing.
    """
    got = runs("push")
    assert got.code == 0, got.stderr
    attempts: dict[str, list[tuple[int, str]]] = collections.defaultdict(list)
    for event in got.of("consumed"):
        attempts[event["message_id"]].append((event["attempt"], event["result"]))
    assert sorted(attempts) == sorted(got.sent_ids())
    for message_id, seen in attempts.items():
        assert seen == [(1, "FAILURE"), (2, "SUCCESS")], f"{message_id}: {seen}"


def test_delayed_messages_arrive_when_due(runs: Runs) -> None:
    """Three messages delayed 3 s arrive no earlier than due and at most a few seconds late."""
    got = runs("delay")
    assert got.code == 0, got.stderr
    received = got.of("received")
    assert sorted(e["message_id"] for e in received) == sorted(got.sent_ids())
    for event in received:
        assert event["due_ms"] > 0
        assert event["due_ms"] <= event["at_ms"] <= event["due_ms"] + DELAY_LATE_MS_MAX


def test_transaction_commit_rollback_and_check_back(runs: Runs) -> None:
    """Commit delivers, rollback never does, and an unresolved half is committed by check-back."""
    got = runs("tx")
    assert got.code == 0, got.stderr
    assert sorted(e["body"] for e in got.of("received")) == ["commit", "unknown"]
    assert "unknown" in {e["body"] for e in got.of("checked")}


@pytest.mark.parametrize("client", polyglot.JAVA_CLIENTS, indirect=True)
def test_recalled_delayed_message_is_never_delivered(runs: Runs) -> None:
    """Of two messages delayed 3 s, the recalled one never arrives and the other does.

    Java only: the Go client (v5.1.3) has no recall API; both Java versions have it.
    """
    got = runs("recall")
    assert got.code == 0, got.stderr
    first, second = got.sent_ids()
    assert [e["message_id"] for e in got.of("recalled")] == [first]
    assert [e["message_id"] for e in got.of("received")] == [second]


@pytest.mark.parametrize("client", polyglot.JAVA_CLIENTS, indirect=True)
def test_priority_send(runs: Runs, client: polyglot.Client) -> None:
    """A message with priority 5 to a PRIORITY topic (its route accepts PRIORITY) is sent and
    received by 5.2.0; 5.0.8's producer does not start on that topic: its ``MessageType`` has
    no PRIORITY, so reading the route's ``accept_message_types`` throws (as against RocketMQ
    5.4, whose route of a PRIORITY topic accepts PRIORITY only)."""
    got = runs("priority")
    if client.name == "java-5.0.8":
        assert got.code == 2 and not got.of("sent") and not got.of("received"), got.events
        kind, _ = got.error()
        assert kind == "IllegalStateException", got.events
        assert "ProducerImpl" in got.of("error")[0]["message"], got.events
    else:
        assert got.code == 0, got.events
        assert len(got.of("sent")) == 1 and len(got.of("received")) == 1, got.events


@pytest.mark.parametrize("client", polyglot.JAVA_CLIENTS, indirect=True)
def test_lite_push_consumer(runs: Runs, client: polyglot.Client) -> None:
    """5.2.0's LitePushConsumer bound to a LITE topic subscribes a lite topic, and the message
    its producer sends to that lite topic (created by the send) is consumed; 5.0.8 has no
    LitePushConsumer."""
    got = runs("lite")
    if client.name == "java-5.0.8":
        assert got.code == 2 and not got.of("step") and not got.of("consumed"), got.events
        kind, _ = got.error()
        assert kind == "UnsupportedOperationException", got.events
    else:
        assert got.code == 0, got.events
        assert [e["step"] for e in got.of("step")] == ["built", "subscribed"], got.events
        assert len(got.of("consumed")) == 1, got.events
