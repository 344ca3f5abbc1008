"""DeleteTopic removes the ConsumeQueues: a topic deleted with ``ariane admin topic delete`` and
created again starts empty (queue offsets from 0, nothing old readable, the group offsets of
the old topic gone), also after the broker is SIGKILLed and restarted; messages are sent and
received with the official ``rocketmq-python-client``."""

from __future__ import annotations

import json
import pathlib
from collections.abc import Iterator

import pytest

from conformance import test_official_transactions as tx

pytestmark = pytest.mark.slow

TOPIC = "reborn"


@pytest.fixture(scope="module")
def restartable(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tx.TxCluster]:
    """A name server and a broker the test may SIGKILL and start again."""
    cluster = tx.TxCluster(pathlib.Path(tmp_path_factory.mktemp("delete")), extra_toml="")
    try:
        yield cluster
    finally:
        cluster.stop()


def _consume(cluster: tx.TxCluster, group: str, count: int) -> set[str]:
    """Bodies one official SimpleConsumer of ``group`` receives (and acks) until ``count``."""
    code, got = cluster.run_driver(
        "simple-consume", "--topic", TOPIC, "--group", group, "--count", str(count)
    )
    assert code == 0, got
    return {e["body"] for e in got if e["event"] == "received"}


def _broker_offset(cluster: tx.TxCluster, group: str) -> int:
    """The queue's max offset (next offset to write) as ``ariane admin group lag`` shows it."""
    rows = json.loads(cluster.admin("group", "lag", group, "--topic", TOPIC, "--json").stdout)
    return sum(r["broker_offset"] for r in rows)


def test_recreated_topic_starts_empty_also_after_a_restart(restartable: tx.TxCluster) -> None:
    """Old messages and the group's offset die with the topic; the new topic counts from 0."""
    restartable.admin("topic", "create", TOPIC, "--queues", "1", "--type", "NORMAL")
    restartable.run_driver("produce", "--topic", TOPIC, "--count", "3", "--prefix", "old")
    assert _consume(restartable, "keeper", 3) == {"old-0", "old-1", "old-2"}
    restartable.admin("topic", "delete", TOPIC)
    restartable.admin("topic", "create", TOPIC, "--queues", "1", "--type", "NORMAL")
    restartable.run_driver("produce", "--topic", TOPIC, "--count", "1", "--prefix", "new")
    assert _consume(restartable, "keeper", 1) == {"new-0"}
    assert _broker_offset(restartable, "keeper") == 1
    restartable.kill_broker()
    restartable.broker_process = restartable.start_broker()
    restartable.run_driver("produce", "--topic", TOPIC, "--count", "1", "--prefix", "later")
    assert _consume(restartable, "fresh", 2) == {"new-0", "later-0"}
    assert _broker_offset(restartable, "fresh") == 2
