"""The official Python client (``rocketmq-python-client``, own process) sends DELAY messages with
``delivery_timestamp``: they arrive no earlier than due and at most 1 s late, and one recalled
with its receipt's recall handle (RecallMessage to the name server, its access point) never
arrives."""

from __future__ import annotations

from conformance.conftest import Cluster

LATE_MS_MAX = 1_000


def test_official_client_delay_messages_arrive_on_time_and_a_recalled_one_never(
    cluster: Cluster,
) -> None:
    """Three sent 4 s ahead, the second recalled: the other two arrive on time, once."""
    cluster.admin("topic", "create", "py-later", "--queues", "2", "--type", "DELAY")
    code, sent = cluster.run_driver(
        "produce", "--topic", "py-later", "--count", "3", "--delay-s", "4", "--recall", "1"
    )
    assert code == 0
    sends = [e for e in sent if e["event"] == "sent"]
    assert all(e["recall_handle"] for e in sends)
    [recalled] = [e["message_id"] for e in sent if e["event"] == "recalled"]
    assert recalled == sends[1]["message_id"]
    code, got = cluster.run_driver(
        "simple-consume",
        "--topic",
        "py-later",
        "--group",
        "later-readers",
        "--count",
        "3",
        "--deadline-s",
        "15",
    )
    assert code == 3  # the deadline passed: the recalled message never came
    received = [e for e in got if e["event"] == "received"]
    due_ms = {e["message_id"]: e["delivery_s"] * 1000 for e in sends}
    assert sorted(e["message_id"] for e in received) == sorted(
        e["message_id"] for e in sends if e["message_id"] != recalled
    )
    for event in received:
        due = due_ms[event["message_id"]]
        assert event["delivery_timestamp"] == due
        assert due <= event["received_ms"] <= due + LATE_MS_MAX, (event, due)
