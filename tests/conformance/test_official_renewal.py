"""Server-side invisible-time renewal with the official ``rocketmq-python-client`` PushConsumer
against real ``ariane namesrv`` + ``ariane broker`` processes.

The official push consumers receive with ``auto_renew`` and never renew a message themselves
(grpc-v2.md §5.5), so a listener running longer than the invisible duration relies on the
broker to keep the message invisible. The broker here runs with a 2 s auto-renew invisible
time, renewed 1 s ahead every 0.2 s (``[receive]``/``[renewal]`` in its TOML), and with two
front-end workers, so the consumer's calls travel the relay.
"""

from __future__ import annotations

import json
import pathlib
import time
from collections.abc import Iterator

import pytest

from conformance import test_official_transactions as tx

pytestmark = pytest.mark.slow

RENEWAL_TOML = """
[receive]
auto_renew_invisible_ms = 2000

[renewal]
renew_period_ms = 200
renew_ahead_ms = 1000
renew_delays_ms = [2000]
"""
LISTENER_S = 7.0
"""How long the listener works on each message: more than three invisible durations."""


@pytest.fixture(scope="module")
def renewing(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tx.TxCluster]:
    """A name server and a broker with a short auto-renew invisible time."""
    cluster = tx.TxCluster(
        pathlib.Path(tmp_path_factory.mktemp("renewal")), extra_toml=RENEWAL_TOML
    )
    try:
        yield cluster
    finally:
        cluster.stop()


def _group_lag(cluster: tx.TxCluster, group: str, topic: str) -> tuple[int, int]:
    """(total lag, total in flight) of ``group`` on ``topic`` from ``ariane admin``."""
    done = cluster.admin("group", "lag", group, "--topic", topic, "--json")
    rows = json.loads(done.stdout)
    return sum(r["lag"] for r in rows), sum(r["inflight"] for r in rows)


def test_slow_listener_gets_no_duplicate_and_its_ack_lands(renewing: tx.TxCluster) -> None:
    """A push listener busy for 3.5 invisible durations sees each message once, and its ack
    (with the handle it received, renewed by the broker since) clears the group's lag."""
    renewing.admin("topic", "create", "slow-work", "--queues", "1", "--type", "NORMAL")
    _, sent = renewing.run_driver("produce", "--topic", "slow-work", "--count", "2")
    code, got = renewing.run_driver(
        "push-consume",
        "--topic",
        "slow-work",
        "--group",
        "slow-listeners",
        "--count",
        "2",
        "--sleep-s",
        str(LISTENER_S),
        "--linger-s",
        "4",
        "--deadline-s",
        "60",
    )
    assert code == 0
    consumed = [(e["message_id"], e["attempt"]) for e in got if e["event"] == "consumed"]
    assert sorted(consumed) == sorted((e["message_id"], 1) for e in sent)
    deadline = time.monotonic() + 30
    while (found := _group_lag(renewing, "slow-listeners", "slow-work")) != (0, 0):
        assert time.monotonic() < deadline, f"lag and in-flight stayed {found}: acks were lost"
        time.sleep(0.5)
