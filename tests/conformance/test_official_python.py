"""The official ``rocketmq-python-client`` (PyPI 5.1.2), unmodified, against real Ariane processes.

Each client runs in its own process through ``official_py_driver.py``; the broker and name
server are real ``ariane`` processes on 127.0.0.1 (see ``conftest.py``).
"""

from __future__ import annotations

import collections
import time
from typing import Any

import pytest

from conformance.conftest import Cluster

pytestmark = pytest.mark.slow


def _sent_ids(events: list[dict[str, Any]]) -> list[str]:
    return [e["message_id"] for e in events if e["event"] == "sent"]


def test_producer_send_and_simple_consumer_receive_ack(cluster: Cluster) -> None:
    """Every sent message is received once with its body, tag, keys and attempt 1, and acked."""
    cluster.admin("topic", "create", "orders", "--queues", "4", "--type", "NORMAL")
    code, sent = cluster.run_driver(
        "produce", "--topic", "orders", "--count", "20", "--tag", "TagA", "--keys-prefix", "k"
    )
    assert code == 0
    ids = _sent_ids(sent)
    assert len(set(ids)) == 20
    code, got = cluster.run_driver(
        "simple-consume", "--topic", "orders", "--group", "billing", "--count", "20"
    )
    assert code == 0
    received = [e for e in got if e["event"] == "received"]
    assert sorted(e["message_id"] for e in received) == sorted(ids)
    by_id = {e["message_id"]: e for e in received}
    first = next(e for e in sent if e["event"] == "sent" and e["i"] == 0)
    assert by_id[first["message_id"]]["body"] == "m-0"
    assert all(e["tag"] == "TagA" and e["attempt"] == 1 and not e["corrupted"] for e in received)
    assert by_id[first["message_id"]]["keys"] == ["k-0"]
    assert sum(1 for e in got if e["event"] == "acked") == 20
    # acked messages are not delivered again to the same group
    code, again = cluster.run_driver(
        "simple-consume",
        "--topic",
        "orders",
        "--group",
        "billing",
        "--count",
        "1",
        "--deadline-s",
        "6",
    )
    assert code == 3 and not [e for e in again if e["event"] == "received"]


def test_push_consumer_consumes_every_message(cluster: Cluster) -> None:
    """A PushConsumer (settings reply, QueryAssignment, auto-renew receive) gets all messages."""
    cluster.admin("topic", "create", "pushed", "--queues", "2", "--type", "NORMAL")
    _, sent = cluster.run_driver("produce", "--topic", "pushed", "--count", "10")
    code, got = cluster.run_driver(
        "push-consume", "--topic", "pushed", "--group", "pushers", "--count", "10"
    )
    assert code == 0
    consumed = {e["message_id"] for e in got if e["event"] == "consumed"}
    assert consumed == set(_sent_ids(sent))


def test_unacked_message_comes_back_after_its_invisible_time(cluster: Cluster) -> None:
    """Received but not acked for 10 s, a message is delivered again with attempt 2."""
    cluster.admin("topic", "create", "retry-me", "--queues", "1", "--type", "NORMAL")
    _, sent = cluster.run_driver("produce", "--topic", "retry-me", "--count", "1")
    code, first = cluster.run_driver(
        "simple-consume",
        "--topic",
        "retry-me",
        "--group",
        "slow",
        "--count",
        "1",
        "--invisible-s",
        "10",
        "--no-ack",
    )
    assert code == 0
    code, second = cluster.run_driver(
        "simple-consume",
        "--topic",
        "retry-me",
        "--group",
        "slow",
        "--count",
        "1",
        "--deadline-s",
        "40",
    )
    assert code == 0
    again = [e for e in second if e["event"] == "received"]
    assert [e["message_id"] for e in again] == _sent_ids(sent)
    assert again[0]["attempt"] == 2
    assert [e["attempt"] for e in first if e["event"] == "received"] == [1]


def test_fifo_topic_delivers_each_message_group_in_send_order(cluster: Cluster) -> None:
    """On a FIFO topic with an orderly group, each message group arrives in send order.

    Three queues, because crc32 puts the groups g0..g4 in all three of them: the official
    SimpleConsumer polls queues round-robin, and an empty queue would cost a whole long poll.
    """
    cluster.admin("topic", "create", "fifo-orders", "--queues", "3", "--type", "FIFO")
    cluster.admin("group", "create", "fifo-readers", "--fifo")
    code, _ = cluster.run_driver(
        "produce", "--topic", "fifo-orders", "--count", "40", "--groups", "5"
    )
    assert code == 0
    code, got = cluster.run_driver(
        "simple-consume",
        "--topic",
        "fifo-orders",
        "--group",
        "fifo-readers",
        "--count",
        "40",
        "--batch",
        "32",
        "--deadline-s",
        "120",
    )
    assert code == 0
    order: dict[str, list[int]] = collections.defaultdict(list)
    for event in got:
        if event["event"] == "received":
            order[event["group"]].append(int(event["body"].split("-")[1]))
    assert sorted(order) == [f"g{i}" for i in range(5)]
    for group, seqs in order.items():
        assert seqs == sorted(seqs), f"{group} out of order: {seqs}"
        assert len(seqs) == 8


def test_failing_push_listener_ends_in_the_dlq_after_max_attempts(cluster: Cluster) -> None:
    """A listener that always fails sees 2 attempts, then the message is in %DLQ%<group>."""
    cluster.admin("topic", "create", "py-poison", "--queues", "1", "--type", "NORMAL")
    cluster.admin("group", "create", "fragile", "--max-delivery-attempts", "2")
    _, sent = cluster.run_driver("produce", "--topic", "py-poison", "--count", "1")
    code, got = cluster.run_driver(
        "push-consume", "--topic", "py-poison", "--group", "fragile", "--count", "2", "--fail"
    )
    assert code == 0
    assert [e["attempt"] for e in got if e["event"] == "consumed"] == [1, 2]
    (message_id,) = _sent_ids(sent)
    deadline = time.monotonic() + 60
    while (
        cluster.admin(
            "message", "get", "--id", message_id, "--topic", "%DLQ%fragile", check=False
        ).returncode
        != 0
    ):
        assert time.monotonic() < deadline, "the message never reached %DLQ%fragile"
        time.sleep(0.5)
    code, dead = cluster.run_driver(
        "simple-consume",
        "--topic",
        "%DLQ%fragile",
        "--group",
        "dlq-reader",
        "--count",
        "1",
        "--deadline-s",
        "60",
    )
    assert code == 0
    letters = [e for e in dead if e["event"] == "received"]
    assert [e["message_id"] for e in letters] == _sent_ids(sent)
