"""The official Java (``rocketmq-client-java`` 5.0.8) and Go (``golang/v5`` v5.1.3) clients work.

Each client is unmodified and runs in its own process (``polyglot.py``: fetched and built by the
tests' own scripts into ``~/.cache/ariane``) against one real ``ariane namesrv`` + ``ariane broker``
pair per module, addressed through the name server as their access point. Every scenario runs
once per client, on topics and groups of its own: normal, async, FIFO, tag and SQL92 filters, push
redelivery, delay, transactions with check-back, and recall (Java; the Go client has no recall API).
"""

from __future__ import annotations

import collections
import pathlib
from collections.abc import Iterator

import pytest

from conformance import polyglot
from conformance.conftest import Cluster

pytestmark = pytest.mark.slow

DELAY_LATE_MS_MAX = 5_000
"""How late a delayed message may arrive: the 1 s bound of issue 11 plus process and poll slack."""


@pytest.fixture(scope="module", params=polyglot.CLIENTS)
def client(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[polyglot.Client]:
    """One official client, fetched and built (cached by a stamp), its logs in a temp dir."""
    name: str = request.param
    yield polyglot.build(name, pathlib.Path(tmp_path_factory.mktemp(f"{name}-logs")))


def _topic(cluster: Cluster, client: polyglot.Client, name: str, kind: str, queues: int) -> str:
    topic = f"v5-{client.name}-{name}"
    cluster.admin("topic", "create", topic, "--queues", str(queues), "--type", kind)
    return topic


def test_send_and_simple_consume(cluster: Cluster, client: polyglot.Client) -> None:
    """Twenty messages sent one by one come back once each with body, tag, keys and attempt 1."""
    topic = _topic(cluster, client, "normal", "NORMAL", 4)
    got = client.run(
        "send-consume", "--topic", topic, "--group", f"v5-{client.name}-normal", "--count", "20",
        endpoints=cluster.namesrv,
    )  # fmt: skip
    assert got.code == 0, got.stderr
    sent = got.sent_ids()
    received = got.of("received")
    assert len(set(sent)) == 20
    assert sorted(e["message_id"] for e in received) == sorted(sent)
    by_n = {int(e["n"]): e for e in received}
    assert by_n[7]["body"] == "m-7" and by_n[7]["keys"] == ["k-7"]
    assert all(e["tag"] == "TagA" and e["attempt"] == 1 for e in received)


def test_async_send(cluster: Cluster, client: polyglot.Client) -> None:
    """Twenty asynchronous sends all complete with distinct ids, and every message is consumed."""
    topic = _topic(cluster, client, "async", "NORMAL", 2)
    got = client.run(
        "send-consume", "--topic", topic, "--group", f"v5-{client.name}-async", "--count", "20",
        "--mode", "async", endpoints=cluster.namesrv,
    )  # fmt: skip
    assert got.code == 0, got.stderr
    sent = got.of("sent")
    assert len({e["message_id"] for e in sent}) == 20 and all(e["async"] for e in sent)
    assert sorted(e["message_id"] for e in got.of("received")) == sorted(got.sent_ids())


def test_fifo_order_per_message_group(cluster: Cluster, client: polyglot.Client) -> None:
    """On a FIFO topic with an orderly group, each of five message groups arrives in send order."""
    topic = _topic(cluster, client, "fifo", "FIFO", 3)
    group = f"v5-{client.name}-fifo"
    cluster.admin("group", "create", group, "--fifo")
    got = client.run(
        "send-consume", "--topic", topic, "--group", group, "--count", "40", "--groups", "5",
        "--deadline-s", "120", endpoints=cluster.namesrv,
    )  # fmt: skip
    assert got.code == 0, got.stderr
    order: dict[str, list[int]] = collections.defaultdict(list)
    for event in got.of("received"):
        order[event["group"]].append(int(event["n"]))
    assert sorted(order) == [f"g{i}" for i in range(5)]
    for message_group, seqs in order.items():
        assert seqs == sorted(seqs), f"{message_group} out of order: {seqs}"
        assert len(seqs) == 8


def test_tag_filter(cluster: Cluster, client: polyglot.Client) -> None:
    """Subscribed to ``TagA``, the consumer gets exactly the TagA half of TagA/TagB messages."""
    topic = _topic(cluster, client, "tags", "NORMAL", 2)
    got = client.run(
        "send-consume", "--topic", topic, "--group", f"v5-{client.name}-tags", "--count", "20",
        "--tags", "TagA,TagB", "--expr", "TagA", "--expect", "10", "--linger-s", "3",
        endpoints=cluster.namesrv,
    )  # fmt: skip
    assert got.code == 0, got.stderr
    even = {e["message_id"] for e in got.of("sent") if e["i"] % 2 == 0}
    received = got.of("received")
    assert {e["message_id"] for e in received} == even and len(received) == 10
    assert {e["tag"] for e in received} == {"TagA"}


def test_sql92_filter(cluster: Cluster, client: polyglot.Client) -> None:
    """Subscribed with SQL92 ``n >= 15``, the consumer gets exactly messages 15..19."""
    topic = _topic(cluster, client, "sql", "NORMAL", 2)
    got = client.run(
        "send-consume", "--topic", topic, "--group", f"v5-{client.name}-sql", "--count", "20",
        "--expr", "n >= 15", "--expr-type", "SQL92", "--expect", "5", "--linger-s", "3",
        endpoints=cluster.namesrv,
    )  # fmt: skip
    assert got.code == 0, got.stderr
    assert sorted(int(e["n"]) for e in got.of("received")) == [15, 16, 17, 18, 19]


def test_push_consumer_redelivers_a_failed_message(
    cluster: Cluster, client: polyglot.Client
) -> None:
    """A PushConsumer (via the name server) that fails attempt 1 gets each message back as 2.

    The Go client asks its access point, the name server, for QueryAssignment: this proves the
    name server forwards it (issue 11 item 6); before, a Go PushConsumer received nothing.
    """
    topic = _topic(cluster, client, "push", "NORMAL", 2)
    got = client.run(
        "push-redelivery", "--topic", topic, "--group", f"v5-{client.name}-push", "--count", "3",
        "--deadline-s", "90", endpoints=cluster.namesrv,
    )  # fmt: skip
    assert got.code == 0, got.stderr
    consumed = got.of("consumed")
    attempts: dict[str, list[tuple[int, str]]] = collections.defaultdict(list)
    for event in consumed:
        attempts[event["message_id"]].append((event["attempt"], event["result"]))
    assert sorted(attempts) == sorted(got.sent_ids())
    for message_id, seen in attempts.items():
        assert seen == [(1, "FAILURE"), (2, "SUCCESS")], f"{message_id}: {seen}"


def test_delayed_messages_arrive_when_due(cluster: Cluster, client: polyglot.Client) -> None:
    """Three messages delayed 3 s arrive no earlier than due and at most a few seconds late."""
    topic = _topic(cluster, client, "delay", "DELAY", 2)
    got = client.run(
        "send-consume", "--topic", topic, "--group", f"v5-{client.name}-delay", "--count", "3",
        "--delay-ms", "3000", endpoints=cluster.namesrv,
    )  # fmt: skip
    assert got.code == 0, got.stderr
    received = got.of("received")
    assert sorted(e["message_id"] for e in received) == sorted(got.sent_ids())
    for event in received:
        assert event["due_ms"] > 0
        assert event["due_ms"] <= event["at_ms"] <= event["due_ms"] + DELAY_LATE_MS_MAX


def test_transaction_commit_rollback_and_check_back(
    cluster: Cluster, client: polyglot.Client
) -> None:
    """Commit delivers, rollback never does, and an unresolved half is committed by check-back."""
    topic = _topic(cluster, client, "tx", "TRANSACTION", 2)
    got = client.run(
        "transaction", "--topic", topic, "--group", f"v5-{client.name}-tx", "--linger-s", "3",
        "--deadline-s", "120", endpoints=cluster.namesrv, timeout_s=240,
    )  # fmt: skip
    assert got.code == 0, got.stderr
    assert sorted(e["body"] for e in got.of("received")) == ["commit", "unknown"]
    assert "unknown" in {e["body"] for e in got.of("checked")}


@pytest.mark.parametrize("client", ["java"], indirect=True)
def test_recalled_delayed_message_is_never_delivered(
    cluster: Cluster, client: polyglot.Client
) -> None:
    """Of two messages delayed 3 s, the recalled one never arrives and the other does.

    Java only: the Go client (v5.1.3) has no recall API.
    """
    topic = _topic(cluster, client, "recall", "DELAY", 1)
    got = client.run(
        "recall", "--topic", topic, "--group", f"v5-{client.name}-recall", "--delay-ms", "3000",
        "--linger-s", "4", endpoints=cluster.namesrv,
    )  # fmt: skip
    assert got.code == 0, got.stderr
    first, second = got.sent_ids()
    assert [e["message_id"] for e in got.of("recalled")] == [first]
    assert [e["message_id"] for e in got.of("received")] == [second]
