"""The ``rocketmq`` Spark sink (``writeStream.format("rocketmq")``) against real name-server and
broker processes of two broker groups, TLS enforcing and ACL 2.0 on, and real PySpark in local
mode: exactly-once writes across executor (Python worker) kills and a SIGKILL of the driver
mid-batch, and a stream using every write option, rows bound for a topic of the other broker
group, FIFO rows and rows with a ``deliveryTimestamp``.

Own cluster: one module-scoped secure ``dev_cluster`` (group ``broker-a``) plus a group
``broker-b`` on its TOML; the jobs SIGKILLed run in their own process groups."""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import json
import os
import pathlib
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from e2e.testenv import processes
from examples.spark import stream_to_parquet

import spark_sink_job
from ariane import client, dev
from ariane.client import credentials
from ariane.common import idempotency, message
from ariane.grpcwire import tls as grpc_tls

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("spark_jvm")]

DEADLINE_S = 240.0
"""Longest wait for a Spark job step on a loaded 2-core machine, seconds."""


@dataclasses.dataclass(frozen=True)
class Cluster:
    """A secure cluster: TLS enforcing on every port and ACL 2.0 on (``dev --secure``)."""

    namesrv: str
    ca_file: str
    access_key: str
    secret_key: str

    @property
    def connection(self) -> client.ConnectionSettings:
        """The tests' own clients: the Super user over TLS, patient (a loaded machine)."""
        return client.ConnectionSettings(
            request_timeout_s=30,
            credentials=credentials.Credentials(self.access_key, self.secret_key),
            tls=grpc_tls.ClientTls(ca_file=self.ca_file),
        )

    def job_args(self) -> list[str]:
        return ["--ca-file", self.ca_file, "--access-key", self.access_key]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """``dev_cluster(secure=True)`` (name server, broker group ``broker-a``) plus a broker
    group ``broker-b`` started with the same TOML (TLS, ACLs, the inner credential)."""
    tmp = tmp_path_factory.mktemp("cluster")
    with dev.dev_cluster(tmp, namesrv_port=0, workers=0, secure=True) as ends:
        user = json.loads(pathlib.Path(ends.credentials_path).read_text())
        args = ["broker", "--config", str(tmp / "broker.toml"), "--store-dir", str(tmp / "b")]
        args += ["--namesrv", ends.namesrv, "--broker-name", "broker-b", "--workers", "0"]
        port = dev.free_port()
        args += ["--listen", f"127.0.0.1:{port}", "--remoting-listen", ""]
        broker_b = processes.spawn_ariane(args, tmp / "broker-b.log")
        try:
            dev.wait_until_registered(
                ends.namesrv,
                "broker-b",
                process=broker_b,
                timeout_s=DEADLINE_S,
                ca_path=pathlib.Path(ends.ca_path),
            )
            yield Cluster(ends.namesrv, ends.ca_path, user["access_key"], user["secret_key"])
        finally:
            dev.stop_process(broker_b)


@pytest.fixture(scope="module")
def spark() -> Any:
    """One local-mode SparkSession with ``rocketmq`` registered."""
    session: Any = stream_to_parquet.session("ariane-sink-tests")
    yield session
    session.stop()


def _topic(
    cluster: Cluster,
    name: str,
    *,
    brokers: tuple[str, ...] | None = None,
    kind: message.MessageType = message.MessageType.NORMAL,
    count: int = 0,
) -> None:
    """Create ``name`` (2 queues) on ``brokers`` (all when ``None``) and send ``count``
    messages ``m<i>``."""

    connection = cluster.connection

    async def main() -> None:
        async with client.AdminClient(
            cluster.namesrv, timeout_s=30, credentials=connection.credentials, tls=connection.tls
        ) as admin:
            await admin.create_topic(
                name, write_queue_nums=2, message_type=kind, broker_names=brokers or ()
            )
            deadline = time.monotonic() + DEADLINE_S
            want = set(brokers or ("broker-a", "broker-b"))
            while {q.broker_name for q in await _queues(cluster, name)} != want:
                assert time.monotonic() < deadline, f"{name} not routed to {want}"
                await asyncio.sleep(0.1)
        settings = client.ProducerSettings(connection=connection)
        async with client.Producer(cluster.namesrv, settings=settings) as producer:
            for start in range(0, count, 500):
                bodies = [f"m{i}".encode() for i in range(start, min(count, start + 500))]
                await producer.send_batch(name, bodies)

    asyncio.run(main())


async def _queues(cluster: Cluster, topic: str) -> list[client.MessageQueue]:
    settings = client.PullSettings(connection=cluster.connection)
    async with client.PullConsumer(cluster.namesrv, "sink-check", settings=settings) as consumer:
        try:
            return await consumer.queues_for_topic(topic)
        except Exception:
            return []


def _messages(cluster: Cluster, topic: str) -> list[client.ReceivedMessage]:
    """Every message ``topic`` stores, over its queues and broker groups (the brokers' truth,
    read with ``PullConsumer``)."""

    async def main() -> list[client.ReceivedMessage]:
        out: list[client.ReceivedMessage] = []
        settings = client.PullSettings(connection=cluster.connection)
        async with client.PullConsumer(
            cluster.namesrv, "sink-check", settings=settings
        ) as consumer:
            queues = await consumer.queues_for_topic(topic)
            low = await consumer.beginning_offsets(queues)
            high = await consumer.end_offsets(queues)
            for queue in queues:
                offset = low[queue]
                while offset < high[queue]:
                    batch = await consumer.fetch(queue, offset, long_polling_timeout_s=0)
                    out += batch.messages
                    offset = batch.next_offset
        return out

    return asyncio.run(main())


def _job(cluster: Cluster, tmp: pathlib.Path, *extra: str) -> subprocess.Popen[bytes]:
    """``spark_sink_job`` (source ``sink-src`` -> ``sink-out``, over TLS, signed) in its own
    session, so a SIGKILL of its group ends the driver, its JVM and its Python workers; logs to
    job.log."""
    args = [sys.executable, "-m", "spark_sink_job", "--endpoints", cluster.namesrv]
    args += ["--source", "sink-src", "--sink", "sink-out", *cluster.job_args()]
    args += [f"--secret-key={cluster.secret_key}"]  # a generated key may start with "-"
    args += ["--checkpoint", str(tmp / "checkpoint"), *extra]
    with (tmp / "job.log").open("ab") as log:
        return subprocess.Popen(
            args,
            stdout=log,
            stderr=log,
            start_new_session=True,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        )


def _batches(checkpoint: pathlib.Path, kind: str) -> set[int]:
    folder = checkpoint / kind
    return {int(p.name) for p in folder.glob("[0-9]*")} if folder.exists() else set()


def _committed_rows(checkpoint: pathlib.Path) -> int:
    """Source offsets below the end of the last committed batch (the rows it wrote)."""
    done = _batches(checkpoint, "commits")
    if not done:
        return 0
    last = (checkpoint / "offsets" / str(max(done))).read_text().strip().splitlines()[-1]
    ends: dict[str, dict[str, int]] = json.loads(last)
    return sum(sum(q.values()) for q in ends.values())


def _until(check: Callable[[], bool], job: subprocess.Popen[bytes], log: pathlib.Path) -> None:
    """Poll ``check`` while ``job`` runs; fail with the log's tail if it ends, or after
    ``DEADLINE_S``."""
    deadline = time.monotonic() + DEADLINE_S
    while not check():
        assert job.poll() is None, log.read_text()[-3000:]
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)


def _python_workers(group: int) -> list[int]:
    """PIDs of the PySpark Python workers of the job whose process group is ``group``: the
    processes the ``pyspark.daemon`` forks (the executor side of local mode: the source's
    reads, the sink's writes)."""

    def facts(pid: str) -> tuple[int, int, bytes]:
        stat = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return int(stat[1]), int(stat[2]), pathlib.Path(f"/proc/{pid}/cmdline").read_bytes()

    found: dict[int, tuple[int, int, bytes]] = {}
    for entry in pathlib.Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                found[int(entry.name)] = facts(entry.name)
            except (OSError, IndexError):
                continue  # gone meanwhile
    members = {pid for pid, (_, g, _) in found.items() if g == group}
    daemons = {
        pid
        for pid, (parent, _, cmd) in found.items()
        if parent in members and b"pyspark.daemon" in cmd
    }  # in a process group of their own (``pyspark/daemon.py``)
    return [pid for pid, (parent, _, _) in found.items() if parent in daemons]


def _mid_write(cluster: Cluster, checkpoint: pathlib.Path, batch_min: int) -> Callable[[], bool]:
    """Whether a batch >= ``batch_min`` is planned but not committed and the sink holds some of
    its rows (more than the committed batches wrote)."""

    def check() -> bool:
        open_batches = _batches(checkpoint, "offsets") - _batches(checkpoint, "commits")
        if not any(n >= batch_min for n in open_batches):
            return False
        stored = spark_sink_job.stored(cluster.namesrv, "sink-out", cluster.connection)
        return stored > _committed_rows(checkpoint)

    return check


def _messages_in(cluster: Cluster, broker: str) -> int:
    """Messages ``broker`` stored from producers since it started (parked DELAY ones too)."""

    async def main() -> int:
        connection = cluster.connection
        async with client.AdminClient(
            cluster.namesrv, timeout_s=30, credentials=connection.credentials, tls=connection.tls
        ) as admin:
            (stats,) = await admin.broker_stats([broker])
            return stats.messages_in_total

    return asyncio.run(main())


def _secured(options: Any, cluster: Cluster) -> Any:
    """A reader or writer with the options ``tls``, ``caFile``, ``accessKey``, ``secretKey``."""
    options = options.option("tls", "true").option("caFile", cluster.ca_file)
    return options.option("accessKey", cluster.access_key).option("secretKey", cluster.secret_key)


def test_exactly_once_across_executor_kills_and_a_driver_sigkill_mid_batch(
    cluster: Cluster, tmp_path: pathlib.Path
) -> None:
    """A stream topic -> topic (spread over both broker groups) whose Python workers are
    SIGKILLed while a batch is sending (its tasks fail and are retried), then whose driver is
    SIGKILLed with its JVM while a later batch is sending, restarted from the checkpoint with
    availableNow, leaves each source row in the sink topic exactly once."""
    total = 3_000
    _topic(cluster, "sink-src", brokers=("broker-a",), count=total)
    _topic(cluster, "sink-out")
    checkpoint, log = tmp_path / "checkpoint", tmp_path / "job.log"
    job = _job(cluster, tmp_path, "--max-per-trigger", "600")  # 300 rows a task
    try:
        _until(_mid_write(cluster, checkpoint, 0), job, log)
        killed_in = max(_batches(checkpoint, "offsets"))
        workers = _python_workers(job.pid)
        assert workers, "no PySpark worker to kill"
        for pid in workers:
            os.kill(pid, signal.SIGKILL)
        _until(_mid_write(cluster, checkpoint, killed_in + 1), job, log)
        os.killpg(job.pid, signal.SIGKILL)
        job.wait()
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
            job.wait()
    assert "Lost task" in log.read_text() or "Exception in task" in log.read_text()
    again = _job(cluster, tmp_path, "--available-now", "--max-per-trigger", "100000")
    assert again.wait(DEADLINE_S) == 0, log.read_text()[-3000:]
    got = _messages(cluster, "sink-out")
    counts = collections.Counter(m.body for m in got)
    twice = sorted(b for b, n in counts.items() if n > 1)
    assert not twice, f"{len(twice)} rows stored more than once, e.g. {twice[:5]}"
    assert set(counts) == {f"m{i}".encode() for i in range(total)}
    assert {m.broker_name for m in got} == {"broker-a", "broker-b"}


def test_stream_sink_options_another_broker_group_and_delivery_timestamps(
    spark: Any, cluster: Cluster, tmp_path: pathlib.Path
) -> None:
    """A stream written with every sink option (endpoints, topic, exactlyOnce, pullTimeoutMs,
    tls, caFile, accessKey, secretKey, checkpointLocation) sends each row once with its body,
    tag, keys and properties: rows with a topic column to that topic, which lives on the other
    broker group only, the others to the option's topic; a messageGroup row as FIFO; a row
    with a deliveryTimestamp an hour ahead is stored but held back (parked: the broker counts
    it, its topic does not hold it); each message carries its idempotency key."""
    from pyspark.sql import functions as f

    _topic(cluster, "opt-src", brokers=("broker-a",), count=24)
    _topic(cluster, "opt-a", brokers=("broker-a",), kind=message.MessageType.MIXED)
    _topic(cluster, "opt-b", brokers=("broker-b",))
    due = f.current_timestamp() + f.expr("INTERVAL 1 HOUR")  # held for the whole test
    n = f.regexp_extract(f.col("body").cast("string"), r"m(\d+)", 1).cast("int")
    before = _messages_in(cluster, "broker-a")
    rows = (
        _secured(spark.readStream.format("rocketmq"), cluster)
        .option("endpoints", cluster.namesrv)
        .option("topics", "opt-src")
        .option("consumerGroup", "opt-reader")
        .option("startingOffsets", "earliest")
        .load()
        .select(
            f.concat(f.lit("x-"), f.col("body").cast("string")).alias("body"),
            f.when(n % 2 == 0, f.lit("opt-b")).alias("topic"),
            f.lit("t").alias("tag"),
            f.array(f.concat(f.lit("k"), n.cast("string"))).alias("keys"),
            f.create_map(f.lit("n"), n.cast("string")).alias("properties"),
            f.when(n % 4 == 1, f.lit("g1")).alias("messageGroup"),
            f.when(n % 4 == 3, due).alias("deliveryTimestamp"),
        )
    )
    query = (
        _secured(rows.writeStream.format("rocketmq"), cluster)
        .option("endpoints", cluster.namesrv)
        .option("topic", "opt-a")
        .option("exactlyOnce", "true")
        .option("pullTimeoutMs", "20000")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(DEADLINE_S), "the availableNow query did not finish"
    assert query.exception() is None
    to_b = _messages(cluster, "opt-b")
    assert sorted(m.body for m in to_b) == sorted(f"x-m{i}".encode() for i in range(0, 24, 2))
    assert {m.broker_name for m in to_b} == {"broker-b"}
    assert _messages_in(cluster, "broker-a") - before == 12  # stored, 6 of them parked
    to_a = _messages(cluster, "opt-a")
    assert sorted(m.body for m in to_a) == sorted(f"x-m{i}".encode() for i in range(1, 24, 4))
    for got in to_a + to_b:
        i = int(got.properties["n"])
        assert (got.tag, got.keys, got.body) == ("t", (f"k{i}",), f"x-m{i}".encode())
        assert got.message_group == ("g1" if i % 4 == 1 else None)
        assert got.properties[idempotency.IDEMPOTENCY_KEY_PROPERTY].startswith("spark/")
