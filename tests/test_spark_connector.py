"""The ``rocketmq`` Spark data source against real ``ariane namesrv`` + ``ariane broker``
processes and real PySpark in local mode: batch reads, options, streaming with read limits and
``availableNow``, the sink, and exactly-once output across a SIGKILL of the driver."""

from __future__ import annotations

import asyncio
import contextlib
import os
import pathlib
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from examples.spark import stream_to_parquet

from ariane import client, dev
from ariane.connectors.spark import broker_io, options, ranges, source
from live_testing import wait_routed

pytestmark = pytest.mark.slow

DEADLINE_S = 240.0
"""Longest wait for a Spark job step on a loaded 2-core machine, seconds."""


@pytest.fixture(scope="module")
def namesrv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A name server and a broker as child processes; yields the name server's endpoint."""
    with dev.dev_cluster(tmp_path_factory.mktemp("cluster"), namesrv_port=0) as endpoints:
        yield endpoints.namesrv


@pytest.fixture(scope="module")
def spark() -> Any:
    """One local-mode SparkSession with ``rocketmq`` registered."""
    session = stream_to_parquet.session("ariane-connector-tests")
    yield session
    session.stop()  # type: ignore[attr-defined]


def _topic(namesrv: str, name: str, count: int, *, queues: int = 2) -> None:
    async def main() -> None:
        async with client.AdminClient(namesrv) as admin:
            await admin.create_topic(name, write_queue_nums=queues)
            await wait_routed(admin, name)
        batch = [
            client.OutgoingMessage(
                f"m{i}".encode(),
                tag="odd" if i % 2 else "even",
                keys=(f"k{i}",),
                properties={"i": str(i)},
            )
            for i in range(count)
        ]
        if batch:
            async with client.Producer(namesrv) as producer:
                await producer.send_batch(name, batch)

    asyncio.run(main())


def _read(spark: Any, namesrv: str, topic: str, **extra: str) -> Any:
    reader = spark.read.format("rocketmq").option("endpoints", namesrv).option("topics", topic)
    for key, value in extra.items():
        reader = reader.option(key, value)
    return reader.load()


def test_batch_read_returns_every_message_once_with_the_schema(spark: Any, namesrv: str) -> None:
    """A batch read from earliest to latest returns each stored message once, with its tag,
    keys, properties, queue coordinates and timestamps."""
    _topic(namesrv, "spark-batch", 60)
    rows = _read(spark, namesrv, "spark-batch").collect()
    assert len(rows) == 60
    assert len({(r.queueId, r.queueOffset) for r in rows}) == 60
    assert sorted(r.body for r in rows) == sorted(f"m{i}".encode() for i in range(60))
    first = next(r for r in rows if r.body == b"m7")
    assert (first.topic, first.brokerName, first.tag) == ("spark-batch", "broker-a", "odd")
    assert (first.keys, first.properties, first.deliveryAttempt) == (["k7"], {"i": "7"}, 1)
    assert first.storeTimestamp >= first.bornTimestamp
    assert first.messageGroup is None and first.messageId


def test_batch_offsets_timestamps_partitions_and_tags(spark: Any, namesrv: str) -> None:
    """Per-queue JSON offsets bound the read, a timestamp after the last message reads
    nothing, minPartitions/maxRecordsPerPartition set the partition count, and subExpression
    keeps only matching tags."""
    _topic(namesrv, "spark-ranges", 40)
    bounded = _read(
        spark,
        namesrv,
        "spark-ranges",
        startingOffsets='{"spark-ranges": {"broker-a:0": 5}}',
        endingOffsets='{"spark-ranges": {"broker-a:0": 15, "broker-a:1": -1}}',
    ).collect()
    assert sorted(r.queueOffset for r in bounded if r.queueId == 0) == list(range(5, 15))
    assert len([r for r in bounded if r.queueId == 1]) == 20
    later = str(int(time.time() * 1000) + 60_000)
    assert _read(spark, namesrv, "spark-ranges", startingTimestamp=later).count() == 0
    assert _read(spark, namesrv, "spark-ranges", minPartitions="7").rdd.getNumPartitions() == 7
    small = _read(spark, namesrv, "spark-ranges", maxRecordsPerPartition="6")
    assert small.rdd.getNumPartitions() == 8
    odd = _read(spark, namesrv, "spark-ranges", subExpression="odd").collect()
    assert sorted(r.body for r in odd) == sorted(f"m{i}".encode() for i in range(1, 40, 2))


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        ({"topics": "spark-none"}, "topic 'spark-none' does not exist"),
        ({"topics": "spark-batch", "topicz": "x"}, "unknown option 'topicz'"),
        ({"topics": "spark-batch", "assign": '{"a": [0]}'}, "exactly one of the options"),
        ({"topics": "spark-batch", "startingOffsets": "{bad"}, "option startingOffsets"),
        (
            {"topics": "spark-batch", "endpoints": "127.0.0.1:1", "pullTimeoutMs": "2000"},
            "option endpoints: cannot reach",
        ),
    ],
)
def test_bad_options_fail_the_read_naming_the_option(
    spark: Any, namesrv: str, extra: dict[str, str], named: str
) -> None:
    """Unknown topic, unknown option, two subscriptions, bad JSON and unreachable endpoints
    fail the Spark read with a message naming the option."""
    reader = spark.read.format("rocketmq").option("endpoints", namesrv)
    for key, value in extra.items():
        reader = reader.option(key, value)
    with pytest.raises(Exception, match=named) as raised:
        reader.load().collect()
    assert "OptionError" in str(raised.value)


def test_initial_offset_is_kept_in_initial_offsets_path(
    namesrv: str, tmp_path: pathlib.Path
) -> None:
    """With initialOffsetsPath a latest start resolves once: a second reader (a restart
    before batch 0 committed) gets the same offsets after more messages arrived."""
    _topic(namesrv, "spark-initial", 10)
    options = {
        "endpoints": namesrv,
        "topics": "spark-initial",
        "startingOffsets": "latest",
        "initialOffsetsPath": str(tmp_path / "initial.json"),
    }
    first = source.RocketMQDataSource(dict(options)).streamReader(None)  # type: ignore[arg-type]
    resolved = first.initialOffset()
    assert sum(resolved["spark-initial"].values()) == 10
    _topic_more(namesrv, "spark-initial", 5)
    again = source.RocketMQDataSource(dict(options)).streamReader(None)  # type: ignore[arg-type]
    assert again.initialOffset() == resolved


class _Gate:
    """A TCP relay in front of ``target`` that accepts connections at once but forwards no byte
    until ``opened`` is set: a name server that does not answer in time, as on a saturated
    machine (what failed ``make run``'s Spark job once: "timed out before receiving SETTINGS")."""

    WAIT_S = 30.0
    """Longest a held connection waits for the gate, seconds."""

    def __init__(self, target: str) -> None:
        host, port = target.rsplit(":", 1)
        self._target = (host, int(port))
        self.opened = threading.Event()
        self._server = socket.create_server(("127.0.0.1", 0))
        self._server.settimeout(0.2)
        self.address = f"127.0.0.1:{self._server.getsockname()[1]}"
        self._closed = threading.Event()
        self._sockets: list[socket.socket] = []
        self._acceptor = threading.Thread(target=self._accept, daemon=True)
        self._acceptor.start()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                conn, _ = self._server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self._sockets.append(conn)
            threading.Thread(target=self._relay, args=(conn,), daemon=True).start()

    def _relay(self, conn: socket.socket) -> None:
        if not self.opened.wait(self.WAIT_S) or self._closed.is_set():
            return
        upstream = socket.create_connection(self._target, timeout=self.WAIT_S)
        self._sockets.append(upstream)
        threading.Thread(target=_pipe, args=(upstream, conn), daemon=True).start()
        _pipe(conn, upstream)

    def close(self) -> None:
        self._closed.set()
        self.opened.set()
        self._server.close()
        self._acceptor.join(timeout=5)
        for sock in self._sockets:
            sock.close()


def _pipe(source_sock: socket.socket, sink: socket.socket) -> None:
    """Copy bytes until either side closes."""
    try:
        while chunk := source_sock.recv(65536):
            sink.sendall(chunk)
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)


def test_a_read_task_retries_a_name_server_that_does_not_answer_in_time(namesrv: str) -> None:
    """A read task whose name server answers nothing for 2.5 s (``pullTimeoutMs`` 1000) retries
    and returns its whole range, as Kafka's consumer retries a fetch; before, the first timeout
    failed the task (and with it the streaming query)."""
    _topic(namesrv, "stalled", 10, queues=1)
    gate = _Gate(namesrv)
    opener = threading.Timer(2.5, gate.opened.set)
    try:
        opts = options.read_options(
            {"endpoints": gate.address, "topics": "stalled", "pullTimeoutMs": "1000"},
            streaming=False,
        )
        opener.start()
        rows = list(broker_io.read_range(opts, ranges.QueueRange("stalled", "broker-a", 0, 0, 10)))
    finally:
        opener.cancel()
        gate.close()
    assert [row[3] for row in rows] == list(range(10))
    assert [row[7] for row in rows] == [f"m{i}".encode() for i in range(10)]


def _topic_more(namesrv: str, topic: str, count: int) -> None:
    async def main() -> None:
        async with client.Producer(namesrv) as producer:
            await producer.send_batch(topic, [b"more"] * count)

    asyncio.run(main())


def test_available_now_with_max_offsets_per_trigger(
    spark: Any, namesrv: str, tmp_path: pathlib.Path
) -> None:
    """availableNow with maxOffsetsPerTrigger reads the backlog in batches of at most that
    many rows and writes every message once."""
    _topic(namesrv, "spark-stream", 100)
    query = (
        spark.readStream.format("rocketmq")
        .option("endpoints", namesrv)
        .option("topics", "spark-stream")
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "30")
        .load()
        .writeStream.format("parquet")
        .option("path", str(tmp_path / "out"))
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(DEADLINE_S)
    sizes = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    assert sum(sizes) == 100 and max(sizes) <= 30 and len(sizes) >= 4
    out = spark.read.parquet(str(tmp_path / "out")).collect()
    assert len({(r.queueId, r.queueOffset) for r in out}) == len(out) == 100


def test_sink_sends_rows_as_messages(spark: Any, namesrv: str) -> None:
    """A batch write sends each row's body, tag, keys and properties to the topic."""
    _topic(namesrv, "spark-sink", 0)
    rows = [(f"s{i}", "t", [f"key{i}"], {"n": str(i)}) for i in range(25)]
    frame = spark.createDataFrame(
        rows, "body STRING, tag STRING, keys ARRAY<STRING>, properties MAP<STRING,STRING>"
    )
    frame.write.format("rocketmq").option("endpoints", namesrv).option("topic", "spark-sink").mode(
        "append"
    ).save()
    got = _read(spark, namesrv, "spark-sink").collect()
    assert sorted(r.body for r in got) == sorted(f"s{i}".encode() for i in range(25))
    assert {r.tag for r in got} == {"t"}
    assert all(r.keys == [f"key{r.properties['n']}"] for r in got)


def _job(namesrv: str, tmp: pathlib.Path, *extra: str) -> subprocess.Popen[bytes]:
    args = [
        sys.executable,
        "-m",
        "examples.spark.stream_to_parquet",
        "--endpoints",
        namesrv,
        "--topics",
        "spark-exactly",
        "--out",
        str(tmp / "out"),
        "--checkpoint",
        str(tmp / "checkpoint"),
        "--max-per-trigger",
        "200",
        *extra,
    ]
    with (tmp / "job.log").open("ab") as log:
        return subprocess.Popen(
            args,
            stdout=log,
            stderr=log,
            start_new_session=True,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        )


def _mid_batch(checkpoint: pathlib.Path) -> bool:
    """An offsets/N written whose commits/N is not, for some N >= 1."""
    names = (
        {p.name for p in (checkpoint / "offsets").glob("[0-9]*")} if checkpoint.exists() else set()
    )
    done = (
        {p.name for p in (checkpoint / "commits").glob("[0-9]*")} if checkpoint.exists() else set()
    )
    return any(int(n) >= 1 and n not in done for n in names)


def test_exactly_once_across_a_sigkill_of_the_driver_while_producers_write(
    spark: Any, namesrv: str, tmp_path: pathlib.Path
) -> None:
    """A streaming query topic -> parquet SIGKILLed (driver and JVM) in the middle of a batch
    while a producer keeps sending, then restarted with availableNow, leaves every message in
    the output exactly once, read through Spark."""
    _topic(namesrv, "spark-exactly", 1_000)
    sent = [1_000]
    stop = threading.Event()

    def produce() -> None:
        async def main() -> None:
            async with client.Producer(namesrv) as producer:
                while not stop.is_set():
                    await producer.send_batch("spark-exactly", [b"live"] * 20)
                    sent[0] += 20
                    await asyncio.sleep(0.05)

        asyncio.run(main())

    writer = threading.Thread(target=produce)
    writer.start()
    job = _job(namesrv, tmp_path)
    try:
        deadline = time.monotonic() + DEADLINE_S
        while not _mid_batch(tmp_path / "checkpoint"):
            assert job.poll() is None, (tmp_path / "job.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "no batch started in time"
            time.sleep(0.02)
        os.killpg(job.pid, signal.SIGKILL)
        job.wait()
    finally:
        stop.set()
        writer.join()
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
    again = _job(namesrv, tmp_path, "--available-now")
    assert again.wait(DEADLINE_S) == 0, (tmp_path / "job.log").read_text()[-3000:]
    out = spark.read.parquet(str(tmp_path / "out")).collect()
    assert len(out) == sent[0]
    assert len({(r.queueId, r.queueOffset) for r in out}) == sent[0]
