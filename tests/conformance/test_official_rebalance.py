"""Official Python PushConsumers of one FIFO group share its queues through QueryAssignment, on
real ``ariane namesrv`` + ``ariane broker`` processes: two, then three consumers split the six
queues as AllocateMessageQueueAveragely does; a consumer that shuts down (NotifyClientTermination)
or is SIGKILLed (its channel closes) hands its queues to the others; a frozen one (SIGSTOP: its
connection stays open, it calls nothing) keeps them until the broker's idle expiry drops it.

The broker's idle expiry is shortened from RocketMQ's 120 s to 15 s (``[core.consumers]
channel_expired_ms``, scanned every 0.5 s) so the test sees it happen; a live official push
consumer calls the broker at least every 5 s (QueryAssignment), so 15 s drops only a silent one.
Long polling (5 s) and the push consumer's invisible time (10 s) are shortened too, so receives
parked on a queue that moved, and messages popped by a consumer that died, come back quickly.

Which consumer reads which queue is what the consumers print: each consumed message's receipt
handle names its queue. A round sends one message to each of twelve message groups (they hash
onto all six queues) and waits until each was consumed; rounds repeat until every queue is read
by exactly the consumer the averaging strategy gives it over the live client ids.

Own cluster: the broker's consumer idle expiry is shortened to 15 s, and consumers are SIGKILLed and
SIGSTOPped.
"""

from __future__ import annotations

import os
import pathlib
import signal
import time
import zlib
from collections.abc import Iterator

import pytest

from ariane.broker.pop import receipt
from ariane.common import allocate, ids, route
from conformance import polyglot
from conformance.conftest import DriverProcess, ProcessCluster

pytestmark = pytest.mark.slow

REBALANCE_TOML = """
[core.consumers]
channel_expired_ms = 15000
expiry_scan_interval_ms = 500

[receive]
long_polling_ms_default = 5000
auto_renew_invisible_ms = 10000
"""
EXPIRY_MS = 15_000
TOPIC = "rebalance-fifo"
QUEUES = 6
MESSAGE_GROUPS = 12
ROUND_DEADLINE_S = 90.0
SETTLE_DEADLINE_S = 180.0


class Consumer:
    """An official PushConsumer of the group in its own process (``push-watch``): Python's,
    or the Go client's when ``go`` is given (it does not tell its client id)."""

    def __init__(
        self, cluster: ProcessCluster, group: str, go: polyglot.Client | None = None
    ) -> None:
        args = ("push-watch", "--group", group, "--topic", TOPIC, "--deadline-s", "900")
        if go is None:
            self.driver = DriverProcess(cluster, *args)
        else:
            self.driver = DriverProcess(cluster, *args, driver=go.command, env=go.env)
        self.client_id: str = self.driver.wait_for("started")["client_id"]
        self.label = self.client_id or f"go-{self.pid}"

    @property
    def pid(self) -> int:
        return self.driver.process.pid

    def consumed(self, prefix: str) -> list[tuple[str, int]]:
        """(body, queue id) of the messages of one round consumed since the last call."""
        return [
            (e["body"], receipt.decode(e["receipt_handle"]).queue_id)
            for e in self.driver.drain()
            if e["event"] == "consumed" and e["body"].startswith(prefix)
        ]


@pytest.fixture(scope="module")
def rebalance_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProcessCluster]:
    """The module's cluster with a six-queue FIFO topic."""
    made = ProcessCluster(tmp_path_factory.mktemp("rebalance"), broker_toml=REBALANCE_TOML)
    try:
        made.admin("topic", "create", TOPIC, "--queues", str(QUEUES), "--type", "FIFO")
        yield made
    finally:
        made.stop()


def test_message_groups_reach_every_queue() -> None:
    """The rounds' twelve message groups land on all six queues (the broker picks the queue as
    crc32(group) % queues), so a round shows every queue's reader."""
    assert {zlib.crc32(f"g{k}".encode()) % QUEUES for k in range(MESSAGE_GROUPS)} == set(
        range(QUEUES)
    )


class Rounds:
    """Sends rounds of messages and reads who consumed which queue."""

    def __init__(self, cluster: ProcessCluster, name: str) -> None:
        self.cluster = cluster
        self.name = name
        self.count = 0

    def once(self, consumers: list[Consumer]) -> dict[int, set[str]]:
        """One round: queue id → the labels of the consumers that consumed its messages."""
        self.count += 1
        prefix = f"{self.name}{self.count}-"
        self.cluster.run_driver(
            "produce", "--topic", TOPIC, "--count", str(MESSAGE_GROUPS),
            "--groups", str(MESSAGE_GROUPS), "--prefix", prefix.rstrip("-"),
        )  # fmt: skip
        readers: dict[int, set[str]] = {}
        bodies: set[str] = set()
        deadline = time.monotonic() + ROUND_DEADLINE_S
        while len(bodies) < MESSAGE_GROUPS:
            assert time.monotonic() < deadline, f"round {prefix} consumed only {sorted(bodies)}"
            for consumer in consumers:
                for body, queue_id in consumer.consumed(prefix):
                    bodies.add(body)
                    readers.setdefault(queue_id, set()).add(consumer.label)
            time.sleep(0.1)  # polling the consumers' output with the deadline above
        return readers

    def settle(
        self, consumers: list[Consumer], *, sizes: list[int] | None = None
    ) -> dict[str, list[int]]:
        """Rounds until each queue is read by one consumer only, each reading the share AVG
        gives its client id (or, when ``sizes`` is given, shares of those sizes); the shares."""
        labels = [c.label for c in consumers]
        deadline = time.monotonic() + SETTLE_DEADLINE_S
        while True:
            readers = self.once(consumers)
            shares = {m: sorted(q for q, who in readers.items() if who == {m}) for m in labels}
            exclusive = all(len(who) == 1 for who in readers.values())
            if sizes is not None and exclusive and sorted(map(len, shares.values())) == sizes:
                return shares
            if sizes is None and shares == _averagely(labels):
                return shares
            assert time.monotonic() < deadline, f"queues never settled: {readers}"


def _averagely(members: list[str]) -> dict[str, list[int]]:
    """The queue ids AllocateMessageQueueAveragely gives each client id."""
    queues = [
        route.MessageQueue(ids.TopicName(TOPIC), ids.BrokerName("broker-a"), ids.QueueId(i))
        for i in range(QUEUES)
    ]
    strategy = allocate.DEFAULT_STRATEGY
    return {
        m: [q.queue_id for q in allocate.allocate(strategy, queues, members, m)] for m in members
    }


def test_two_then_three_consumers_split_the_queues_and_a_leaver_hands_its_own_over(
    rebalance_cluster: ProcessCluster,
) -> None:
    """Two consumers read 3 + 3 queues, three read 2 + 2 + 2; when one shuts down cleanly
    (NotifyClientTermination) the other two read 3 + 3 again."""
    rebalance_cluster.admin("group", "create", "split-readers", "--fifo")
    rounds = Rounds(rebalance_cluster, "split")
    first = Consumer(rebalance_cluster, "split-readers")
    second = Consumer(rebalance_cluster, "split-readers")
    third: Consumer | None = None
    try:
        shares = rounds.settle([first, second])
        assert sorted(len(s) for s in shares.values()) == [3, 3]
        third = Consumer(rebalance_cluster, "split-readers")
        shares = rounds.settle([first, second, third])
        assert sorted(len(s) for s in shares.values()) == [2, 2, 2]
        second.driver.close()
        second.driver.wait_for("stopped")  # it shut down: NotifyClientTermination was sent
        shares = rounds.settle([first, third])
        assert sorted(len(s) for s in shares.values()) == [3, 3]
    finally:
        for consumer in (first, second, third):
            if consumer is not None:
                consumer.driver.close()


def test_a_killed_and_a_frozen_consumer_lose_their_queues(
    rebalance_cluster: ProcessCluster,
) -> None:
    """A SIGKILLed consumer's queues move to the survivor (its channel closed); a SIGSTOPped
    one keeps its queues while its silence is below the 15 s expiry, then they move."""
    rebalance_cluster.admin("group", "create", "crash-readers", "--fifo")
    rounds = Rounds(rebalance_cluster, "crash")
    survivor = Consumer(rebalance_cluster, "crash-readers")
    doomed = Consumer(rebalance_cluster, "crash-readers")
    frozen: Consumer | None = None
    try:
        rounds.settle([survivor, doomed])
        os.kill(doomed.pid, signal.SIGKILL)
        doomed.driver.process.wait(timeout=30)
        assert rounds.settle([survivor]) == {survivor.label: list(range(QUEUES))}
        frozen = Consumer(rebalance_cluster, "crash-readers")
        rounds.settle([survivor, frozen])
        os.kill(frozen.pid, signal.SIGSTOP)
        stopped_at = time.monotonic()
        assert rounds.settle([survivor]) == {survivor.label: list(range(QUEUES))}
        # the frozen consumer's last call came at most ~5 s before the SIGSTOP
        assert time.monotonic() - stopped_at >= (EXPIRY_MS - 5_000) / 1000
    finally:
        if frozen is not None:
            os.kill(frozen.pid, signal.SIGKILL)
            frozen.driver.close()
        survivor.driver.close()
        doomed.driver.close()


def test_a_go_and_a_python_consumer_share_one_groups_queues(
    rebalance_cluster: ProcessCluster, tmp_path: pathlib.Path
) -> None:
    """The official Go PushConsumer (it asks the name server for its assignment, which forwards
    to the broker) and a Python one read 3 + 3 queues of one FIFO group, each its own; when the
    Go one stops gracefully the Python one reads all six."""
    go = polyglot.build("go", tmp_path / "go-logs")
    rebalance_cluster.admin("group", "create", "mixed-readers", "--fifo")
    rounds = Rounds(rebalance_cluster, "mixed")
    python = Consumer(rebalance_cluster, "mixed-readers")
    gopher = Consumer(rebalance_cluster, "mixed-readers", go)
    try:
        rounds.settle([python, gopher], sizes=[3, 3])
        gopher.driver.close()
        gopher.driver.wait_for("stopped")
        assert rounds.settle([python]) == {python.label: list(range(QUEUES))}
    finally:
        gopher.driver.close()
        python.driver.close()
