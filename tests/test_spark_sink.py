"""The ``rocketmq`` Spark sink (``writeStream.format("rocketmq")``) against real name-server and
broker processes of two broker groups and real PySpark in local mode: exactly-once writes across
a task retry and a SIGKILL of the driver mid-batch, and a stream using the sink's options, rows
bound for a topic of the other broker group and rows with a ``deliveryTimestamp``.

Own cluster: one module-scoped name server with the broker groups ``broker-a`` and
``broker-b``; the jobs SIGKILLed run in their own process groups."""

from __future__ import annotations

import asyncio
import collections
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
from examples.spark import stream_to_parquet

import ha_testing as ht
import spark_sink_job
from ariane import client
from ariane.common import idempotency, message

pytestmark = pytest.mark.slow

DEADLINE_S = 240.0
"""Longest wait for a Spark job step on a loaded 2-core machine, seconds."""

PATIENT = client.ConnectionSettings(request_timeout_s=30)


@pytest.fixture(scope="module")
def namesrv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A name server and two single-broker groups, ``broker-a`` and ``broker-b``."""
    tmp = tmp_path_factory.mktemp("cluster")
    brokers = [ht.new_broker(tmp, "broker-a"), ht.new_broker(tmp, "broker-b")]
    with ht.running_namesrv(tmp) as endpoint:
        try:
            for broker in brokers:
                extra = ("--broker-name", broker.name)
                broker.start(tmp, endpoint, "ASYNC_MASTER", broker_id=0, extra=extra)
            yield endpoint
        finally:
            for broker in brokers:
                broker.stop()


@pytest.fixture(scope="module")
def spark() -> Any:
    """One local-mode SparkSession with ``rocketmq`` registered."""
    session: Any = stream_to_parquet.session("ariane-sink-tests")
    yield session
    session.stop()


def _topic(
    namesrv: str,
    name: str,
    *,
    brokers: tuple[str, ...] | None = None,
    kind: message.MessageType = message.MessageType.NORMAL,
    count: int = 0,
) -> None:
    """Create ``name`` (2 queues) on ``brokers`` (all when ``None``) and send ``count``
    messages ``m<i>``."""

    async def main() -> None:
        async with client.AdminClient(namesrv, timeout_s=30) as admin:
            await admin.create_topic(
                name, write_queue_nums=2, message_type=kind, broker_names=brokers or ()
            )
            deadline = time.monotonic() + DEADLINE_S
            want = set(brokers or ("broker-a", "broker-b"))
            while {q.broker_name for q in await _queues(namesrv, name)} != want:
                assert time.monotonic() < deadline, f"{name} not routed to {want}"
                await asyncio.sleep(0.1)
        settings = client.ProducerSettings(connection=PATIENT)
        async with client.Producer(namesrv, settings=settings) as producer:
            for start in range(0, count, 500):
                bodies = [f"m{i}".encode() for i in range(start, min(count, start + 500))]
                await producer.send_batch(name, bodies)

    asyncio.run(main())


async def _queues(namesrv: str, topic: str) -> list[client.MessageQueue]:
    settings = client.PullSettings(connection=PATIENT)
    async with client.PullConsumer(namesrv, settings=settings) as consumer:
        try:
            return await consumer.queues_for_topic(topic)
        except Exception:
            return []


def _messages(namesrv: str, topic: str) -> list[client.ReceivedMessage]:
    """Every message ``topic`` stores, over its queues and broker groups (the brokers' truth,
    read with ``PullConsumer``)."""

    async def main() -> list[client.ReceivedMessage]:
        out: list[client.ReceivedMessage] = []
        settings = client.PullSettings(connection=PATIENT)
        async with client.PullConsumer(namesrv, settings=settings) as consumer:
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


def _job(namesrv: str, tmp: pathlib.Path, *extra: str) -> subprocess.Popen[bytes]:
    """``spark_sink_job`` (source ``sink-src`` -> ``sink-out``) in its own session, so a
    SIGKILL of its group ends the driver, its JVM and its Python workers; logs to job.log."""
    args = [sys.executable, "-m", "spark_sink_job", "--endpoints", namesrv]
    args += ["--source", "sink-src", "--sink", "sink-out"]
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


def _mid_write(namesrv: str, checkpoint: pathlib.Path, batch_min: int) -> Callable[[], bool]:
    """Whether a batch >= ``batch_min`` is planned but not committed and the sink holds some of
    its rows (more than the committed batches wrote)."""

    def check() -> bool:
        open_batches = _batches(checkpoint, "offsets") - _batches(checkpoint, "commits")
        if not any(n >= batch_min for n in open_batches):
            return False
        return spark_sink_job.stored(namesrv, "sink-out") > _committed_rows(checkpoint)

    return check


def test_exactly_once_across_executor_kills_and_a_driver_sigkill_mid_batch(
    namesrv: str, tmp_path: pathlib.Path
) -> None:
    """A stream topic -> topic (spread over both broker groups) whose Python workers are
    SIGKILLed while a batch is sending (its tasks fail and are retried), then whose driver is
    SIGKILLed with its JVM while a later batch is sending, restarted from the checkpoint with
    availableNow, leaves each source row in the sink topic exactly once."""
    total = 3_000
    _topic(namesrv, "sink-src", brokers=("broker-a",), count=total)
    _topic(namesrv, "sink-out")
    checkpoint, log = tmp_path / "checkpoint", tmp_path / "job.log"
    job = _job(namesrv, tmp_path, "--max-per-trigger", "600")  # 300 rows a task
    try:
        _until(_mid_write(namesrv, checkpoint, 0), job, log)
        killed_in = max(_batches(checkpoint, "offsets"))
        workers = _python_workers(job.pid)
        assert workers, "no PySpark worker to kill"
        for pid in workers:
            os.kill(pid, signal.SIGKILL)
        _until(_mid_write(namesrv, checkpoint, killed_in + 1), job, log)
        os.killpg(job.pid, signal.SIGKILL)
        job.wait()
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
            job.wait()
    assert "Lost task" in log.read_text() or "Exception in task" in log.read_text()
    again = _job(namesrv, tmp_path, "--available-now", "--max-per-trigger", "100000")
    assert again.wait(DEADLINE_S) == 0, log.read_text()[-3000:]
    got = _messages(namesrv, "sink-out")
    counts = collections.Counter(m.body for m in got)
    twice = sorted(b for b, n in counts.items() if n > 1)
    assert not twice, f"{len(twice)} rows stored more than once, e.g. {twice[:5]}"
    assert set(counts) == {f"m{i}".encode() for i in range(total)}
    assert {m.broker_name for m in got} == {"broker-a", "broker-b"}


def test_stream_sink_options_another_broker_group_and_delivery_timestamps(
    spark: Any, namesrv: str, tmp_path: pathlib.Path
) -> None:
    """A stream written with the sink's options (endpoints, topic, exactlyOnce, pullTimeoutMs,
    checkpointLocation) sends each row once with its body, tag, keys and properties: rows with
    a topic column to that topic, which lives on the other broker group only, the others to
    the option's topic; a messageGroup row as FIFO; a deliveryTimestamp row as a DELAY message
    stored (delivered) only once due; each message carries its idempotency key."""
    from pyspark.sql import functions as f

    _topic(namesrv, "opt-src", brokers=("broker-a",), count=24)
    _topic(namesrv, "opt-a", brokers=("broker-a",), kind=message.MessageType.MIXED)
    _topic(namesrv, "opt-b", brokers=("broker-b",))
    due = f.current_timestamp() + f.expr("INTERVAL 15 SECONDS")  # the batch's time + 15 s
    n = f.regexp_extract(f.col("body").cast("string"), r"m(\d+)", 1).cast("int")
    rows = (
        spark.readStream.format("rocketmq")
        .option("endpoints", namesrv)
        .option("topics", "opt-src")
        .option("startingOffsets", "earliest")
        .load()
        .select(
            f.concat(f.lit("x-"), f.col("body").cast("string")).alias("body"),
            f.when(n % 2 == 0, f.lit("opt-b")).alias("topic"),
            f.lit("t").alias("tag"),
            f.array(f.concat(f.lit("k"), n.cast("string"))).alias("keys"),
            f.create_map(
                f.lit("n"), n.cast("string"), f.lit("due"), f.unix_millis(due).cast("string")
            ).alias("properties"),
            f.when(n % 4 == 1, f.lit("g1")).alias("messageGroup"),
            f.when(n % 4 == 3, due).alias("deliveryTimestamp"),
        )
    )
    query = (
        rows.writeStream.format("rocketmq")
        .option("endpoints", namesrv)
        .option("topic", "opt-a")
        .option("exactlyOnce", "true")
        .option("pullTimeoutMs", "20000")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(DEADLINE_S), "the availableNow query did not finish"
    assert query.exception() is None
    to_b = _messages(namesrv, "opt-b")
    assert sorted(m.body for m in to_b) == sorted(f"x-m{i}".encode() for i in range(0, 24, 2))
    assert {m.broker_name for m in to_b} == {"broker-b"}
    deadline = time.monotonic() + DEADLINE_S
    while len(to_a := _messages(namesrv, "opt-a")) < 12:
        assert time.monotonic() < deadline, f"opt-a holds {len(to_a)} of 12"
        time.sleep(0.1)
    assert sorted(m.body for m in to_a) == sorted(f"x-m{i}".encode() for i in range(1, 24, 2))
    for got in to_a + to_b:
        i = int(got.properties["n"])
        assert (got.tag, got.keys, got.body) == ("t", (f"k{i}",), f"x-m{i}".encode())
        assert got.message_group == ("g1" if i % 4 == 1 else None)
        assert got.properties[idempotency.IDEMPOTENCY_KEY_PROPERTY].startswith("spark/")
        if i % 4 == 3:
            due_ms = int(got.properties["due"])
            assert got.born_timestamp_ms < due_ms <= got.store_timestamp_ms
