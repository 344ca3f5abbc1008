"""Priority messages (RocketMQ 5.4, RIP-80) with the official Python client 5.1.2
(``Message.priority``, own process) against the shared real name server + broker: a PRIORITY
topic made with ``ariane admin topic create --message-type PRIORITY``, a backlog of mixed
priorities received highest first, and a message nacked by a push consumer received after its
retry still ahead of lower priorities (RocketMQ loses it: apache/rocketmq#10350)."""

from __future__ import annotations

from typing import Any

from conformance.conftest import Cluster

TOPIC = "py-prio"
GROUP = "prio-readers"
RETRY_TOPIC = f"%RETRY%{GROUP}_{TOPIC}"


def _received(events: list[dict[str, Any]]) -> list[tuple[str, int, int]]:
    return [(e["body"], e["priority"], e["attempt"]) for e in events if e["event"] == "received"]


def _receive_one_by_one(cluster: Cluster, count: int) -> list[tuple[str, int, int]]:
    code, got = cluster.run_driver(
        "simple-consume", "--topic", TOPIC, "--group", GROUP, "--count", str(count),
        "--batch", "1", "--deadline-s", "30",
    )  # fmt: skip
    assert code == 0, got
    return _received(got)


def test_official_client_priority_backlog_comes_highest_first_also_after_a_retry(
    cluster: Cluster,
) -> None:
    """Eight messages of priorities 0..3 come back 3,3,2,2,1,1,0,0 (store order within a
    level); a priority-2 message nacked once comes back as attempt 2 after the priority-3 one
    and before priorities 1 and 0."""
    cluster.admin("topic", "create", TOPIC, "--queues", "4", "--message-type", "PRIORITY")
    cluster.admin("group", "create", GROUP, "--retry-delays", "2s")
    code, sent = cluster.run_driver(
        "produce", "--topic", TOPIC, "--count", "8", "--priorities", "0,3,1,2"
    )
    assert code == 0 and [e["priority"] for e in sent if e["event"] == "sent"] == [0, 3, 1, 2] * 2
    assert _receive_one_by_one(cluster, 8) == [
        ("m-1", 3, 1), ("m-5", 3, 1), ("m-3", 2, 1), ("m-7", 2, 1),
        ("m-2", 1, 1), ("m-6", 1, 1), ("m-0", 0, 1), ("m-4", 0, 1),
    ]  # fmt: skip

    code, sent = cluster.run_driver(
        "produce", "--topic", TOPIC, "--count", "1", "--priorities", "2", "--prefix", "retried"
    )
    (retried_id,) = [e["message_id"] for e in sent if e["event"] == "sent"]
    code, failed = cluster.run_driver(
        "push-consume", "--topic", TOPIC, "--group", GROUP, "--count", "1", "--fail",
        "--linger-s", "0.5", "--deadline-s", "30",
    )  # fmt: skip
    assert code == 0 and [e["body"] for e in failed if e["event"] == "consumed"] == ["retried-0"]
    code, _ = cluster.run_driver(
        "produce", "--topic", TOPIC, "--count", "3", "--priorities", "0,1,3", "--prefix", "new"
    )
    assert code == 0
    cluster.wait_for_message(retried_id, RETRY_TOPIC)
    assert _receive_one_by_one(cluster, 4) == [
        ("new-2", 3, 1), ("retried-0", 2, 2), ("new-1", 1, 1), ("new-0", 0, 1),
    ]  # fmt: skip
