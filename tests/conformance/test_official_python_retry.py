"""Redelivery through ``%RETRY%<group>_<topic>`` with the official ``rocketmq-python-client``
PushConsumer against real ``ariane namesrv`` + ``ariane broker`` processes: the group's backoff
measured, attempts across a broker SIGKILL, the DLQ after the last attempt,
ForwardMessageToDeadLetterQueue from a FIFO push consumer, a group consuming two topics getting
each redelivery on its own topic, and ``ariane admin dlq list|resend``.

The broker is the SIGKILL-able one of ``test_official_transactions`` (two front-end workers).
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from conformance.conftest import DriverProcess
from conformance.test_official_transactions import TxCluster

pytestmark = pytest.mark.slow

LATE_MS_MAX = 2_500
"""Most a redelivery may come after its backoff on a loaded 2-core machine, ms (the schedule
ticks every 100 ms; a stall would be the 20 s long poll)."""


@pytest.fixture(scope="module")
def retry_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TxCluster]:
    """The module's SIGKILL-able name server + broker."""
    made = TxCluster(tmp_path_factory.mktemp("retry-cluster"))
    try:
        yield made
    finally:
        made.stop()


def _consumed(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if e["event"] == "consumed"]


def _admin_until(cluster: TxCluster, args: tuple[str, ...], done: Callable[[Any], bool]) -> Any:
    """The JSON answer of ``ariane admin --json ARGS`` once ``done`` holds (30 s deadline)."""
    deadline = time.monotonic() + 30
    while True:
        answer = json.loads(cluster.admin("--json", *args).stdout)
        if done(answer):
            return answer
        assert time.monotonic() < deadline, f"admin {args} still answers {answer}"
        time.sleep(0.2)  # polling the admin API with a deadline


def _wait_for_topic(cluster: TxCluster, topic: str) -> None:
    _admin_until(cluster, ("topic", "list", "--all"), lambda ts: topic in {t["name"] for t in ts})


def _dead_letters(cluster: TxCluster, group: str, count: int) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = _admin_until(
        cluster, ("dlq", "list", group), lambda found: len(found) >= count
    )
    return rows


def test_failing_push_listener_is_redelivered_after_the_group_backoff(
    retry_cluster: TxCluster,
) -> None:
    """A listener that always fails sees attempts 1..4 of the same message, 2 s, 4 s and 4 s
    apart (the group's customized policy, not a 20 s long poll), then the message is in
    %DLQ%<group> with its topic, id and 4 attempts; `dlq resend` delivers it once more."""
    retry_cluster.admin("topic", "create", "flaky", "--queues", "2", "--type", "NORMAL")
    retry_cluster.admin(
        "group", "create", "backoff", "--max-delivery-attempts", "4", "--retry-delays", "2s,4s"
    )
    _, sent = retry_cluster.run_driver("produce", "--topic", "flaky", "--count", "1")
    (message_id,) = [e["message_id"] for e in sent if e["event"] == "sent"]
    code, got = retry_cluster.run_driver(
        "push-consume", "--topic", "flaky", "--group", "backoff", "--count", "4", "--fail",
        "--deadline-s", "60",
    )  # fmt: skip
    assert code == 0
    seen = _consumed(got)
    assert [e["attempt"] for e in seen] == [1, 2, 3, 4]
    assert {(e["message_id"], e["topic"]) for e in seen} == {(message_id, "flaky")}
    gaps = [b["received_ms"] - a["received_ms"] for a, b in itertools.pairwise(seen)]
    for gap, backoff in zip(gaps, (2_000, 4_000, 4_000), strict=True):
        assert backoff <= gap <= backoff + LATE_MS_MAX, gaps
    (letter,) = _dead_letters(retry_cluster, "backoff", 1)
    assert (letter["message_id"], letter["origin_topic"], letter["attempts"]) == (
        message_id, "flaky", 4,
    )  # fmt: skip
    retry_cluster.admin("dlq", "resend", "backoff", "--id", message_id)
    code, again = retry_cluster.run_driver(
        "push-consume", "--topic", "flaky", "--group", "backoff", "--count", "1"
    )
    assert code == 0
    assert [(e["message_id"], e["attempt"]) for e in _consumed(again)] == [(message_id, 1)]


def test_attempts_survive_a_broker_sigkill(retry_cluster: TxCluster) -> None:
    """A message nacked once and parked for its 5 s backoff when the broker is SIGKILLed comes
    back after the restart as attempt 2, then 3: the count lives in the stored retry copy."""
    retry_cluster.admin("topic", "create", "sturdy", "--queues", "1", "--type", "NORMAL")
    retry_cluster.admin(
        "group", "create", "survivor", "--max-delivery-attempts", "5", "--retry-delays", "5s,1s"
    )
    _, sent = retry_cluster.run_driver("produce", "--topic", "sturdy", "--count", "1")
    (message_id,) = [e["message_id"] for e in sent if e["event"] == "sent"]
    code, first = retry_cluster.run_driver(
        "push-consume", "--topic", "sturdy", "--group", "survivor", "--count", "1", "--fail"
    )
    assert code == 0 and [e["attempt"] for e in _consumed(first)] == [1]
    _wait_for_topic(retry_cluster, "%RETRY%survivor_sturdy")  # the nack stored its copy
    retry_cluster.kill_broker()
    retry_cluster.broker_process = retry_cluster.start_broker()
    code, after = retry_cluster.run_driver(
        "push-consume", "--topic", "sturdy", "--group", "survivor", "--count", "2", "--fail",
        "--deadline-s", "60",
    )  # fmt: skip
    assert code == 0
    assert [(e["message_id"], e["attempt"]) for e in _consumed(after)] == [
        (message_id, 2), (message_id, 3),
    ]  # fmt: skip


def test_fifo_push_consumer_forwards_to_the_dlq(retry_cluster: TxCluster) -> None:
    """A FIFO push consumer retries locally, then calls ForwardMessageToDeadLetterQueue: the
    message is in %DLQ%<group> with its origin topic and id, and not delivered again."""
    retry_cluster.admin("topic", "create", "fifo-poison", "--queues", "1", "--type", "FIFO")
    retry_cluster.admin(
        "group", "create", "fifo-fragile", "--fifo", "--max-delivery-attempts", "2",
        "--retry-delays", "1s",
    )  # fmt: skip
    _, sent = retry_cluster.run_driver(
        "produce", "--topic", "fifo-poison", "--count", "1", "--groups", "1"
    )
    (message_id,) = [e["message_id"] for e in sent if e["event"] == "sent"]
    code, got = retry_cluster.run_driver(
        "push-consume", "--topic", "fifo-poison", "--group", "fifo-fragile", "--count", "2",
        "--fail",
    )  # fmt: skip
    assert code == 0 and len(_consumed(got)) == 2
    (letter,) = _dead_letters(retry_cluster, "fifo-fragile", 1)
    assert (letter["message_id"], letter["origin_topic"]) == (message_id, "fifo-poison")
    code, later = retry_cluster.run_driver(
        "push-consume", "--topic", "fifo-poison", "--group", "fifo-fragile", "--count", "1",
        "--deadline-s", "5",
    )  # fmt: skip
    assert code == 3 and _consumed(later) == []


def test_a_group_on_two_topics_gets_each_redelivery_on_its_own_topic(
    retry_cluster: TxCluster,
) -> None:
    """One group, two failing push consumers in their own processes, one subscribed to each of
    two topics: each sees only its own topic's messages, every one as attempts 1, 2 and 3 (the
    retry copies live in %RETRY%<group>_<topic>, so one topic's receive never takes the other
    topic's copy)."""
    topics = ("split-a", "split-b")
    for topic in topics:
        retry_cluster.admin("topic", "create", topic, "--queues", "2", "--type", "NORMAL")
    retry_cluster.admin(
        "group", "create", "split", "--max-delivery-attempts", "3", "--retry-delays", "1s"
    )
    args = ("--group", "split", "--count", "6", "--fail", "--deadline-s", "60", "--linger-s", "3")
    consumers = {
        topic: DriverProcess(retry_cluster, "push-consume", "--topic", topic, *args)
        for topic in topics
    }
    try:
        for consumer in consumers.values():
            consumer.wait_for("started")
        sent: dict[str, set[str]] = {}
        for topic in topics:
            _, events = retry_cluster.run_driver("produce", "--topic", topic, "--count", "2")
            sent[topic] = {e["message_id"] for e in events if e["event"] == "sent"}
        for consumer in consumers.values():
            consumer.process.wait(timeout=90)
    finally:
        for consumer in consumers.values():
            consumer.close()
    for topic, consumer in consumers.items():
        consumer.drain()  # the rest of its events, into ``seen``
        seen = _consumed(consumer.seen)
        assert {e["topic"] for e in seen} == {topic}, seen
        attempts = {
            m: sorted(e["attempt"] for e in seen if e["message_id"] == m) for m in sent[topic]
        }
        assert attempts == {m: [1, 2, 3] for m in sent[topic]}, seen
