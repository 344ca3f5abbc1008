"""Priority messages (RocketMQ 5.4, RIP-80) with the official Java client 5.2.0
(``MessageBuilder.setPriority``, ``MessageView.getPriority``; the driver ``java/Driver.java`` in
its own JVM, ``polyglot.py``) against the shared real name server + broker: the scenario of
``test_official_python_priority.py`` — a backlog of mixed priorities received one by one comes
highest first, and a message a push consumer failed comes back, after its retry, still ahead of
lower priorities (RocketMQ loses it: apache/rocketmq#10350).

Java 5.2.0 only: 5.0.8 has neither method, and its producer does not start on a PRIORITY
topic (``test_official_java_go.py::test_priority_send`` asserts that refusal).
"""

from __future__ import annotations

import pathlib

import pytest

from conformance import polyglot
from conformance.conftest import Cluster

pytestmark = pytest.mark.slow

TOPIC = "java-prio"
GROUP = "java-prio-readers"
RETRY_TOPIC = f"%RETRY%{GROUP}_{TOPIC}"
RUN_TIMEOUT_S = 120
"""Longest run of one driver JVM (a start, a producer and a consumer: ~5-15 s here)."""


def _received(got: polyglot.Outcome) -> list[tuple[str, int | None, int]]:
    """(body, priority, delivery attempt) of each received message, in receive order."""
    return [(e["body"], e.get("priority"), e["attempt"]) for e in got.of("received")]


def _run(client: polyglot.Client, cluster: Cluster, *args: str) -> polyglot.Outcome:
    """One driver run on the test's topic and group; it must end with exit code 0."""
    got = client.run(
        *args, "--topic", TOPIC, "--group", GROUP, endpoints=cluster.namesrv,
        timeout_s=RUN_TIMEOUT_S,
    )  # fmt: skip
    assert got.code == 0, got.events
    return got


def test_official_java_client_priority_backlog_comes_highest_first_also_after_a_retry(
    cluster: Cluster, tmp_path: pathlib.Path
) -> None:
    """Eight messages of priorities 0..3 sent by Java 5.2.0 come back to its SimpleConsumer,
    one per receive, 3,3,2,2,1,1,0,0 (store order within a level); a priority-2 message its
    PushConsumer failed once comes back as attempt 2 after a newer priority-3 one and before
    priorities 1 and 0."""
    client = polyglot.build("java-5.2.0", tmp_path / "java-logs")
    cluster.admin("topic", "create", TOPIC, "--queues", "4", "--message-type", "PRIORITY")
    cluster.admin("group", "create", GROUP, "--retry-delays", "2s")
    got = _run(
        client, cluster, "send-consume", "--count", "8", "--priorities", "0,3,1,2",
        "--batch", "1", "--deadline-s", "30",
    )  # fmt: skip
    assert [e["priority"] for e in got.of("sent")] == [0, 3, 1, 2] * 2
    assert _received(got) == [
        ("m-1", 3, 1), ("m-5", 3, 1), ("m-3", 2, 1), ("m-7", 2, 1),
        ("m-2", 1, 1), ("m-6", 1, 1), ("m-0", 0, 1), ("m-4", 0, 1),
    ]  # fmt: skip

    # Sent, then failed once by a PushConsumer whose process ends open (Driver.pushFail: a
    # closing Java PushConsumer would consume the retry itself).
    got = _run(
        client, cluster, "push-fail", "--count", "1", "--priorities", "2",
        "--prefix", "retried", "--linger-s", "0.5", "--deadline-s", "30",
    )  # fmt: skip
    (retried_id,) = got.sent_ids()
    assert [(e["body"], e["attempt"]) for e in got.of("consumed")] == [("retried-0", 1)]
    cluster.wait_for_message(retried_id, RETRY_TOPIC)
    # Newer messages (stored after the retry copy), then one per receive.
    got = _run(
        client, cluster, "send-consume", "--count", "3", "--priorities", "0,1,3",
        "--prefix", "new", "--expect", "4", "--batch", "1", "--deadline-s", "30",
    )  # fmt: skip
    assert _received(got) == [
        ("new-2", 3, 1), ("retried-0", 2, 2), ("new-1", 1, 1), ("new-0", 0, 1),
    ]  # fmt: skip
