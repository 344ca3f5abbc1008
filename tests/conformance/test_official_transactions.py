"""Transactions with the official ``rocketmq-python-client`` (its ``TransactionChecker``) against
real ``ariane namesrv`` + ``ariane broker`` processes: commit, rollback, check-back, SIGKILL.

The broker runs with a 1 s transaction timeout and a 0.5 s check interval (``[transaction]`` in
its TOML) so check-backs come within seconds, and with two front-end workers, so checks travel
the relay from the store-owning process to the worker holding the producer's Telemetry stream;
the module's own cluster can SIGKILL the broker and start it again on the same store and port.
"""

from __future__ import annotations

import json
import pathlib
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

import live_testing
from ariane import dev
from conformance.conftest import DRIVER, REPO, Cluster

pytestmark = pytest.mark.slow

TRANSACTION_TOML = """
[transaction]
transaction_timeout_ms = 1000
transaction_check_interval_ms = 500
transaction_check_max = 1000
"""
DEADLINE_S = 60.0
TOPICS = ("tx1", "tx2", "tx3")


class TxCluster(Cluster):
    """A name server and a broker whose process the test may SIGKILL and restart."""

    def __init__(self, data_dir: pathlib.Path, *, extra_toml: str = TRANSACTION_TOML) -> None:
        port = dev.free_port()
        super().__init__(
            dev.DevEndpoints(
                namesrv=f"127.0.0.1:{dev.free_port()}",
                broker=f"127.0.0.1:{port}",
                data_dir=str(data_dir),
            )
        )
        self.port = port
        self.config = data_dir / "broker.toml"
        self.config.write_text(
            dev.DEV_BROKER_TOML.format(flush_disk_type="ASYNC_FLUSH") + extra_toml
        )
        self.namesrv_process = self._spawn(["namesrv", "--listen", self.namesrv], "namesrv.log")
        dev.wait_until_listening(
            "127.0.0.1",
            int(self.namesrv.rpartition(":")[2]),
            process=self.namesrv_process,
            timeout_s=dev.READY_TIMEOUT_S,
        )
        self.broker_process = self.start_broker()

    def _spawn(self, args: list[str], log: str) -> subprocess.Popen[bytes]:
        with (self.data_dir / log).open("ab") as out:
            return subprocess.Popen(
                [sys.executable, "-m", "ariane", *args], stdout=out, stderr=subprocess.STDOUT
            )

    def start_broker(self) -> subprocess.Popen[bytes]:
        """Start the broker on the cluster's store and port; wait until it is registered."""
        args = ["broker", "--config", str(self.config), "--namesrv", self.namesrv]
        args += ["--listen", self.broker, "--store-dir", str(self.data_dir / "store")]
        process = self._spawn([*args, "--workers", "2"], "broker.log")
        ready_s = dev.READY_TIMEOUT_S
        dev.wait_until_listening("127.0.0.1", self.port, process=process, timeout_s=ready_s)
        dev.wait_until_registered(self.namesrv, "broker-a", process=process, timeout_s=ready_s)
        return process

    def kill_broker(self) -> None:
        """SIGKILL the broker (by PID); return once it and its front-end workers are gone."""
        live_testing.kill(self.broker_process)

    def stop(self) -> None:
        """Stop both processes by PID."""
        dev.stop_process(self.broker_process)
        dev.stop_process(self.namesrv_process)


class HeldProducer:
    """The driver's ``transaction --hold`` in a child process, its events read as they come."""

    def __init__(self, cluster: TxCluster, *args: str) -> None:
        self.events: queue.Queue[dict[str, Any]] = queue.Queue()
        self.seen: list[dict[str, Any]] = []
        endpoint = cluster.namesrv
        self.process = subprocess.Popen(
            [sys.executable, str(DRIVER), "transaction", *args, "--hold", "--endpoints", endpoint],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            cwd=REPO,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            if line.startswith("{"):
                self.events.put(json.loads(line))

    def wait_for(self, event: str) -> dict[str, Any]:
        """The next event named ``event`` (fail after ``DEADLINE_S``)."""
        deadline = time.monotonic() + DEADLINE_S
        while True:
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"no {event!r} event from the producer; saw {self.seen}"
            try:
                got = self.events.get(timeout=remaining)
            except queue.Empty:
                continue
            self.seen.append(got)
            if got["event"] == event:
                return got

    def close(self) -> None:
        """Close stdin (the driver then shuts its producer down) and wait for it."""
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._reader.join(timeout=30)  # the pipe ends with the process
        assert self.process.stdout is not None
        self.process.stdout.close()


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
    unsure = HeldProducer(tx_cluster, "--topic", "tx2", "--count", "1", "--end", "none",
                          "--checker", "unknown", "--checks", "2", "--prefix", "u")  # fmt: skip
    try:
        sent = unsure.wait_for("sent")
        assert unsure.wait_for("checked")["message_id"] == sent["message_id"]
        unsure.wait_for("checks")  # asked twice, answered "unknown" twice
        assert _consume(tx_cluster, "tx2", "tx-check", 1, 3) == []
    finally:
        unsure.close()
    sure = HeldProducer(tx_cluster, "--topic", "tx2", "--count", "0", "--end", "none",
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
    refuser = HeldProducer(tx_cluster, "--topic", "tx2", "--count", "0", "--end", "none",
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
    resolver = HeldProducer(tx_cluster, "--topic", "tx3", "--count", "0", "--end", "none",
                            "--checker", "commit", "--checks", "1")  # fmt: skip
    try:
        assert resolver.wait_for("checked")["message_id"] == sent["message_id"]
        received = _consume(tx_cluster, "tx3", "tx-kill", 1, 30)
        assert [(e["message_id"], e["body"]) for e in received] == [(sent["message_id"], "k-0")]
    finally:
        resolver.close()
