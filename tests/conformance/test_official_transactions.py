"""Transactions with the official ``rocketmq-python-client`` (its ``TransactionChecker``) against
real ``ariane namesrv`` + ``ariane broker`` processes: commit, rollback, check-back, SIGKILL.

The broker runs with a 1 s transaction timeout and a 0.5 s check interval (``[transaction]`` in
its TOML) so check-backs come within seconds, and with two front-end workers, so checks travel
the relay from the store-owning process to the worker holding the producer's Telemetry stream;
the module's own cluster can SIGKILL the broker and start it again on the same store and port.
"""

from __future__ import annotations

import pathlib
import time
from collections.abc import Iterator
from typing import Any

import pytest

from conformance.conftest import Cluster, DriverProcess, ProcessCluster

pytestmark = pytest.mark.slow

TRANSACTION_TOML = """
[transaction]
transaction_timeout_ms = 1000
transaction_check_interval_ms = 500
transaction_check_max = 1000
"""
DEADLINE_S = 60.0
TOPICS = ("tx1", "tx2", "tx3")


class TxCluster(ProcessCluster):
    """The module's cluster: a broker with short transaction timeouts and check intervals."""

    def __init__(self, data_dir: pathlib.Path, *, extra_toml: str = TRANSACTION_TOML) -> None:
        super().__init__(data_dir, broker_toml=extra_toml)


def _held(cluster: Cluster, *args: str) -> DriverProcess:
    """The driver's ``transaction --hold`` in a child process, its events read as they come."""
    return DriverProcess(cluster, "transaction", *args, "--hold")


@pytest.fixture(scope="module")
def tx_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TxCluster]:
    """The module's cluster with TRANSACTION topics ``tx1``..``tx3`` (4 queues), one a test."""
    made = TxCluster(tmp_path_factory.mktemp("tx-cluster"))
    try:
        for topic in TOPICS:
            made.admin("topic", "create", topic, "--queues", "4", "--type", "TRANSACTION")
        yield made
    finally:
        made.stop()


def _consume(
    cluster: Cluster, topic: str, group: str, count: int, deadline_s: float
) -> list[dict[str, Any]]:
    _, events = cluster.run_driver(
        "simple-consume", "--topic", topic, "--group", group, "--count", str(count),
        "--deadline-s", str(deadline_s), "--await-s", "2",
    )  # fmt: skip
    return [e for e in events if e["event"] == "received"]


def _log_has(cluster: Cluster, needle: str) -> None:
    path = cluster.data_dir / "broker.log"
    deadline = time.monotonic() + DEADLINE_S
    while needle not in path.read_text(errors="replace"):
        assert time.monotonic() < deadline, f"{needle!r} never logged"
        time.sleep(0.05)  # polling a log file with a deadline, not waiting for an event


def test_commit_delivers_and_rollback_discards(tx_cluster: TxCluster) -> None:
    """Five transactions committed by the client are delivered once each, with their message
    ids; five rolled back are never delivered."""
    code, committed = tx_cluster.run_driver(
        "transaction", "--topic", "tx1", "--count", "5", "--end", "commit", "--prefix", "c"
    )
    assert code == 0 and all(e["transaction_id"] for e in committed if e["event"] == "sent")
    code, _ = tx_cluster.run_driver(
        "transaction", "--topic", "tx1", "--count", "5", "--end", "rollback", "--prefix", "r"
    )
    assert code == 0
    received = _consume(tx_cluster, "tx1", "tx-plain", 6, 8)
    sent_ids = sorted(e["message_id"] for e in committed if e["event"] == "sent")
    assert sorted(e["message_id"] for e in received) == sent_ids
    assert sorted(e["body"] for e in received) == [f"c-{i}" for i in range(5)]


def test_unknown_then_check_back_commit_and_rollback(tx_cluster: TxCluster) -> None:
    """A transaction left open is checked back while its checker answers "unknown" and stays
    invisible; after that producer leaves, another producer's checker answers COMMIT and the
    message is delivered with its id; a third checker's ROLLBACK leaves its message unseen."""
    unsure = _held(tx_cluster, "--topic", "tx2", "--count", "1", "--end", "none",
                          "--checker", "unknown", "--checks", "2", "--prefix", "u")  # fmt: skip
    try:
        sent = unsure.wait_for("sent")
        assert unsure.wait_for("checked")["message_id"] == sent["message_id"]
        unsure.wait_for("checks")  # asked twice, answered "unknown" twice
        assert _consume(tx_cluster, "tx2", "tx-check", 1, 3) == []
    finally:
        unsure.close()
    sure = _held(tx_cluster, "--topic", "tx2", "--count", "0", "--end", "none",
                        "--checker", "commit", "--checks", "1")  # fmt: skip
    try:
        checked = sure.wait_for("checked")
        assert (checked["message_id"], checked["body"]) == (sent["message_id"], "u-0")
        assert checked["topic"] == "tx2"
        received = _consume(tx_cluster, "tx2", "tx-check", 1, 30)
        assert [e["message_id"] for e in received] == [sent["message_id"]]
    finally:
        sure.close()
    code, open_one = tx_cluster.run_driver(
        "transaction", "--topic", "tx2", "--count", "1", "--end", "none", "--prefix", "z"
    )
    assert code == 0
    refuser = _held(tx_cluster, "--topic", "tx2", "--count", "0", "--end", "none",
                           "--checker", "rollback", "--checks", "1")  # fmt: skip
    try:
        tid = next(e["transaction_id"] for e in open_one if e["event"] == "sent")
        refuser.wait_for("checked")
        _log_has(tx_cluster, f"transaction {tid}: ROLLBACK by a check answer")
    finally:
        refuser.close()
    assert _consume(tx_cluster, "tx2", "tx-check", 1, 3) == []


def test_sigkill_between_half_and_commit_keeps_the_transaction_resolvable(
    tx_cluster: TxCluster,
) -> None:
    """A half message sent before a broker SIGKILL is checked back after the restart and,
    committed by the checker, delivered once with its message id."""
    code, events = tx_cluster.run_driver(
        "transaction", "--topic", "tx3", "--count", "1", "--end", "none", "--prefix", "k"
    )
    assert code == 0
    sent = next(e for e in events if e["event"] == "sent")
    tx_cluster.kill_broker()
    tx_cluster.broker_process = tx_cluster.start_broker()
    resolver = _held(tx_cluster, "--topic", "tx3", "--count", "0", "--end", "none",
                            "--checker", "commit", "--checks", "1")  # fmt: skip
    try:
        assert resolver.wait_for("checked")["message_id"] == sent["message_id"]
        received = _consume(tx_cluster, "tx3", "tx-kill", 1, 30)
        assert [(e["message_id"], e["body"]) for e in received] == [(sent["message_id"], "k-0")]
    finally:
        resolver.close()
