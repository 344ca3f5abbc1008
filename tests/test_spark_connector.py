"""The ``rocketmq`` Spark data source against real ``ariane namesrv`` + ``ariane broker``
processes and real PySpark in local mode: batch reads, options, streaming with read limits and
``availableNow``, the sink, and exactly-once output across a SIGKILL of the driver.

The session's shared cluster (``shared_cluster``) serves the module, with its own ``spark-*``
topics and groups.

Own cluster: the broker-crash test SIGKILLs and restarts its own broker."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import itertools
import json
import os
import pathlib
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from examples.spark import stream_to_parquet
from pyspark.sql.streaming import datasource as stream_datasource

import live_testing
from ariane import client, dev
from ariane.common import errors, message
from ariane.connectors.spark import broker_io, options, ranges, source

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("spark_jvm")]

DEADLINE_S = 240.0
"""Longest wait for a Spark job step on a loaded 2-core machine, seconds."""

PATIENT = client.ConnectionSettings(request_timeout_s=30)
"""The tests' own clients (setting up topics, sending): a Python name server on a loaded
2-core machine has been seen taking over 10 s (the default deadline) to open a connection."""


@pytest.fixture(scope="module")
def namesrv(shared_cluster: dev.DevEndpoints) -> str:
    """The shared name server and broker (``shared_cluster``); the name server's endpoint."""
    return shared_cluster.namesrv


@pytest.fixture(scope="module")
def spark() -> Any:
    """One local-mode SparkSession with ``rocketmq`` registered."""
    session = stream_to_parquet.session("ariane-connector-tests")
    yield session
    session.stop()  # type: ignore[attr-defined]


def test_local_session_listens_on_loopback_only(spark: Any) -> None:
    """The driver and the block manager of the local session bind 127.0.0.1, not the address
    of the first network interface Spark picks when the host name resolves to loopback."""
    context = spark.sparkContext
    block_manager = context._jsc.sc().env().blockManager().blockManagerId()
    assert block_manager.host() == stream_to_parquet.LOOPBACK
    assert context.getConf().get("spark.driver.host") == stream_to_parquet.LOOPBACK
    assert context.getConf().get("spark.driver.bindAddress") == stream_to_parquet.LOOPBACK


def _topic(
    namesrv: str,
    name: str,
    count: int,
    *,
    queues: int = 2,
    kind: message.MessageType = message.MessageType.NORMAL,
) -> None:
    async def main() -> None:
        async with client.AdminClient(namesrv, timeout_s=PATIENT.request_timeout_s) as admin:
            await admin.create_topic(name, write_queue_nums=queues, message_type=kind)
            await live_testing.wait_routed(admin, name)
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
            async with client.Producer(namesrv, settings=_patient_producer()) as producer:
                await producer.send_batch(name, batch)

    asyncio.run(main())


def _patient_producer() -> client.ProducerSettings:
    return client.ProducerSettings(connection=PATIENT)


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
    """Per-queue JSON offsets bound the read, a start time after the last message reads
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
    past_end = {"startingTimestamp": later, "startingOffsetsByTimestampStrategy": "latest"}
    assert _read(spark, namesrv, "spark-ranges", **past_end).count() == 0
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
            {
                "topics": "spark-batch",
                "endpoints": "127.0.0.1:1",
                "pullTimeoutMs": "2000",
                "fetchOffset.numRetries": "0",
            },
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


def _topic_more(namesrv: str, topic: str, count: int, *, prefix: str = "more") -> None:
    """Send ``count`` messages with bodies ``<prefix>0``, ``<prefix>1``, ..."""

    async def main() -> None:
        async with client.Producer(namesrv, settings=_patient_producer()) as producer:
            await producer.send_batch(topic, [f"{prefix}{i}".encode() for i in range(count)])

    asyncio.run(main())


def test_available_now_with_max_offsets_per_trigger(
    spark: Any, namesrv: str, tmp_path: pathlib.Path
) -> None:
    """availableNow with maxOffsetsPerTrigger reads the backlog in batches of at most that
    many rows and writes every message once."""
    _topic(namesrv, "spark-stream", 100)
    query = _available_now(spark, namesrv, "spark-stream", tmp_path, maxOffsetsPerTrigger="30")
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


def test_sink_delivery_timestamp_holds_a_row_back_until_it_is_due(spark: Any, namesrv: str) -> None:
    """A sunk row with a deliveryTimestamp 8 s ahead becomes a DELAY message no consumer
    receives before that time and one receives after it, while a row without one, sent in the
    same write, arrives at once (a first write warms Spark's workers so the timed one is
    quick)."""
    _topic(namesrv, "spark-due", 0, kind=message.MessageType.MIXED)

    def write(rows: list[tuple[str, datetime.datetime | None]]) -> None:
        frame = spark.createDataFrame(rows, "body STRING, deliveryTimestamp TIMESTAMP")
        writer = frame.write.format("rocketmq").option("endpoints", namesrv)
        writer.option("topic", "spark-due").mode("append").save()

    write([("warm", None)])
    due = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=8)
    write([("later", due), ("soon", None)])
    arrived = asyncio.run(_arrivals(namesrv, "spark-due", 3))
    assert arrived[b"soon"] < due.timestamp() <= arrived[b"later"]


async def _arrivals(namesrv: str, topic: str, count: int) -> dict[bytes, float]:
    """Body -> wall time (s since the epoch) a consumer first received it, for ``count``
    messages of ``topic`` (fail after ``DEADLINE_S``)."""
    async with client.AdminClient(namesrv) as admin:
        await admin.create_group(f"{topic}-group")
    arrived: dict[bytes, float] = {}
    deadline = time.monotonic() + DEADLINE_S
    async with client.SimpleConsumer(namesrv, f"{topic}-group", topic) as consumer:
        while len(arrived) < count:
            assert time.monotonic() < deadline, f"received {sorted(arrived)} only"
            for got in await consumer.receive(32, invisible_duration_s=60):
                arrived.setdefault(got.body, time.time())
                await consumer.ack([got])
    return arrived


def _memory_query(spark: Any, namesrv: str, topic: str, name: str, **extra: str) -> Any:
    """A stream of ``topic`` from earliest into the memory table ``name``, a trigger every
    200 ms, and a progress event for every trigger, idle ones too (Spark reports an idle
    trigger every 10 s by default)."""
    spark.conf.set("spark.sql.streaming.noDataProgressEventInterval", "0")
    return (
        _read_stream(spark, namesrv, topic, **extra)
        .load()
        .writeStream.format("memory")
        .queryName(name)
        .trigger(processingTime="200 milliseconds")
        .start()
    )


def _query_ended(query: Any) -> Callable[[], str | None]:
    """For ``_until``: how an in-process streaming query ended, once it is no longer active."""
    return lambda: None if query.isActive else f"{query.exception()}"


def _batch_sizes(query: Any) -> list[int]:
    """The input rows of each micro-batch that read any, in order."""
    return [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]


def test_min_offsets_per_trigger_waits_for_enough_messages_or_max_trigger_delay(
    spark: Any, namesrv: str
) -> None:
    """With minOffsetsPerTrigger 30 and maxTriggerDelay 8 s (Kafka's pair), a running query
    reads 5 lone messages once the delay has passed; then it leaves 10 new messages unread
    over 5 triggers and reads them with 25 more as one micro-batch of 35."""
    _topic(namesrv, "spark-min", 0)
    query = _memory_query(
        spark, namesrv, "spark-min", "spark_min", minOffsetsPerTrigger="30", maxTriggerDelay="8s"
    )
    ended = _query_ended(query)
    try:
        _until(lambda: bool(query.recentProgress), ended)
        _topic_more(namesrv, "spark-min", 5)
        _until(lambda: _batch_sizes(query) == [5], ended)  # released by maxTriggerDelay
        _topic_more(namesrv, "spark-min", 10)  # a new delay window began with that batch
        seen = len(query.recentProgress)
        _until(lambda: len(query.recentProgress) >= seen + 5, ended)
        assert _batch_sizes(query) == [5]
        _topic_more(namesrv, "spark-min", 25)
        _until(lambda: len(_batch_sizes(query)) == 2, ended)
        assert _batch_sizes(query) == [5, 35]
    finally:
        query.stop()
        spark.conf.unset("spark.sql.streaming.noDataProgressEventInterval")
    assert spark.table("spark_min").count() == 40


def test_max_trigger_delay_is_measured_from_the_first_held_trigger(namesrv: str) -> None:
    """The stream reader answers latestOffset with the start while fewer than
    minOffsetsPerTrigger offsets wait, for maxTriggerDelay (1.5 s) and no longer; enough
    offsets go at once."""
    _topic(namesrv, "spark-delay", 10)
    reader = source.RocketMQDataSource(
        {
            "endpoints": namesrv,
            "topics": "spark-delay",
            "startingOffsets": "earliest",
            "minOffsetsPerTrigger": "30",
            "maxTriggerDelay": "1500ms",
        }
    ).streamReader(None)  # type: ignore[arg-type]
    everything = stream_datasource.ReadAllAvailable()
    start = reader.initialOffset()
    began = time.monotonic()
    ends = [reader.latestOffset(start, everything)]
    while ends[-1] == start:
        assert time.monotonic() - began < 1.5 + DEADLINE_S, "never released"
        time.sleep(0.05)
        ends.append(reader.latestOffset(start, everything))
    assert time.monotonic() - began >= 1.5 and len(ends) > 2
    assert sum(ends[-1]["spark-delay"].values()) == 10
    _topic_more(namesrv, "spark-delay", 30)
    assert sum(reader.latestOffset(ends[-1], everything)["spark-delay"].values()) == 40


def test_commit_offsets_to_broker_shows_the_query_as_group_lag(
    spark: Any, namesrv: str, tmp_path: pathlib.Path
) -> None:
    """With consumerGroup and commitOffsetsToBroker, each finished micro-batch's end reaches
    the broker as the group's offset (what ``ariane admin group lag`` shows): after an
    availableNow run over 50 messages in batches of 30 the group stands at the end of the
    first batch and lags by the second's 20 (Spark commits a batch when it plans the next
    one); a restart that finds 10 new messages commits the second batch's end."""
    _topic(namesrv, "spark-lag", 50)

    def run() -> None:
        extra = {"consumerGroup": "spark-lag-group", "commitOffsetsToBroker": "true"}
        _available_now(spark, namesrv, "spark-lag", tmp_path, maxOffsetsPerTrigger="30", **extra)

    def group_offsets() -> dict[str, int]:
        lag = asyncio.run(_lag(namesrv, "spark-lag-group", "spark-lag"))
        return {ranges.queue_key(q.broker_name, q.queue_id): q.consumer_offset for q in lag}

    run()
    ends = [_offsets_of(tmp_path / "checkpoint", n, "spark-lag") for n in range(2)]
    assert [sum(end.values()) for end in ends] == [30, 50]
    assert group_offsets() == ends[0]
    _topic_more(namesrv, "spark-lag", 10)
    run()
    assert group_offsets() == ends[1]


async def _lag(namesrv: str, group: str, topic: str) -> list[client.QueueLag]:
    async with client.AdminClient(namesrv) as admin:
        return await admin.consumer_lag(group, topic)


def _offsets_of(checkpoint: pathlib.Path, batch: int, topic: str) -> dict[str, int]:
    """The end offsets of micro-batch ``batch`` of ``topic`` (the last line of
    ``offsets/N``)."""
    last = (checkpoint / "offsets" / str(batch)).read_text().strip().splitlines()[-1]
    found: dict[str, int] = json.loads(last).get(topic, {})
    return found


def _read_stream(spark: Any, namesrv: str, topic: str, **extra: str) -> Any:
    """A ``rocketmq`` stream reader of ``topic`` from earliest, with ``extra`` options."""
    reader = (
        spark.readStream.format("rocketmq")
        .option("endpoints", namesrv)
        .option("topics", topic)
        .option("startingOffsets", "earliest")
    )
    for key, value in extra.items():
        reader = reader.option(key, value)
    return reader


def _available_now(spark: Any, namesrv: str, topic: str, tmp: pathlib.Path, **extra: str) -> Any:
    """Run an availableNow query ``topic`` -> parquet ``tmp/out`` (checkpoint ``tmp/checkpoint``)
    to its end; the finished query."""
    query = (
        _read_stream(spark, namesrv, topic, **extra)
        .load()
        .writeStream.format("parquet")
        .option("path", str(tmp / "out"))
        .option("checkpointLocation", str(tmp / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(DEADLINE_S)
    return query


def _job(
    namesrv: str, tmp: pathlib.Path, *extra: str, topic: str = "spark-exactly"
) -> subprocess.Popen[bytes]:
    """``examples/spark/stream_to_parquet`` on ``topic`` in its own session (so a SIGKILL of
    the group ends the driver, its JVM and its Python workers), logging to ``tmp/job.log``."""
    args = [
        sys.executable,
        "-m",
        "examples.spark.stream_to_parquet",
        "--endpoints",
        namesrv,
        "--topics",
        topic,
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


def _batches(checkpoint: pathlib.Path, kind: str) -> set[int]:
    """The batch ids with a file under ``checkpoint/kind`` (``offsets`` or ``commits``)."""
    folder = checkpoint / kind
    return {int(p.name) for p in folder.glob("[0-9]*")} if folder.exists() else set()


def _mid_batch(checkpoint: pathlib.Path) -> bool:
    """An offsets/N written whose commits/N is not, for some N >= 1."""
    return any(n >= 1 for n in _batches(checkpoint, "offsets") - _batches(checkpoint, "commits"))


def _committed_end(checkpoint: pathlib.Path, topic: str) -> int:
    """Offsets below the end of the last committed batch, summed over ``topic``'s queues (the
    source offset is the last line of ``offsets/N``); 0 before the first commit."""
    done = _batches(checkpoint, "commits")
    return sum(_offsets_of(checkpoint, max(done), topic).values()) if done else 0


class _Producing:
    """A thread sending batches of 10 uniquely numbered bodies to ``topic`` until ``stop``;
    ``acked`` holds the bodies the broker acknowledged, ``failed`` counts refused or
    unanswered batches (not retried by the client: each try sends new bodies, so a body is
    in the topic at most once)."""

    PAUSE_S = 0.2
    """Pause between batches, seconds: a trickle of under 50 messages a second, which the
    streaming job (about a batch a second on a loaded machine) keeps up with."""

    def __init__(self, namesrv: str, topic: str) -> None:
        self.acked: list[bytes] = []
        self.failed = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=asyncio.run, args=(self._main(namesrv, topic),))
        self._thread.start()

    async def _main(self, namesrv: str, topic: str) -> None:
        settings = client.ProducerSettings(
            connection=client.ConnectionSettings(request_timeout_s=2), send_attempts=1
        )
        async with client.Producer(namesrv, settings=settings) as producer:
            for tried in itertools.count():
                if self._stop.is_set():
                    return
                batch = [f"live-{tried}-{i}".encode() for i in range(10)]
                try:
                    await producer.send_batch(topic, batch)
                except client.PartialSendError as exc:
                    self.acked += [b for b, r in zip(batch, exc.receipts, strict=True) if r]
                    self.failed += 1
                except errors.ArianeError:
                    self.failed += 1
                else:
                    self.acked += batch
                await asyncio.sleep(self.PAUSE_S)

    def stop(self) -> None:
        """Stop sending and wait for the batch under way (idempotent)."""
        self._stop.set()
        self._thread.join()

    def __enter__(self) -> _Producing:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


@contextlib.contextmanager
def _streaming(spark: Any, namesrv: str, topic: str, tmp: pathlib.Path) -> Iterator[Any]:
    """In this test's Spark session, the query of ``examples/spark/stream_to_parquet`` (topic ->
    ``tmp/out`` with checkpoint ``tmp/checkpoint``, 200 offsets a batch, back to back); stopped
    on exit."""
    query: Any = stream_to_parquet.start(
        spark,
        endpoints=namesrv,
        topics=topic,
        out=str(tmp / "out"),
        checkpoint=str(tmp / "checkpoint"),
        max_per_trigger=200,
    )
    try:
        yield query
    finally:
        query.stop()


@contextlib.contextmanager
def _running(job: subprocess.Popen[bytes]) -> Iterator[subprocess.Popen[bytes]]:
    """``job``, SIGKILLed with its process group on exit if it still runs."""
    try:
        yield job
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
            job.wait()


def test_exactly_once_across_a_sigkill_of_the_driver_while_producers_write(
    spark: Any, namesrv: str, tmp_path: pathlib.Path
) -> None:
    """A streaming query topic -> parquet SIGKILLed (driver and JVM) in the middle of a batch
    while a producer keeps sending, then restarted with availableNow, leaves every message in
    the output exactly once, read through Spark."""
    _topic(namesrv, "spark-exactly", 1_000)
    with (
        _Producing(namesrv, "spark-exactly") as producing,
        _running(_job(namesrv, tmp_path)) as job,
    ):
        _until(lambda: _mid_batch(tmp_path / "checkpoint"), _job_ended(job, tmp_path / "job.log"))
        os.killpg(job.pid, signal.SIGKILL)
        job.wait()
    again = _job(namesrv, tmp_path, "--available-now")
    assert again.wait(DEADLINE_S) == 0, (tmp_path / "job.log").read_text()[-3000:]
    out = spark.read.parquet(str(tmp_path / "out")).collect()
    stored = _stored(namesrv, "spark-exactly")  # a batch that timed out may be stored too
    assert sorted((r.queueId, r.queueOffset, r.body) for r in out) == stored
    assert len({body for _, _, body in stored}) == len(stored) >= 1_000 + len(producing.acked)
    assert set(producing.acked) <= {r.body for r in out}


def _stored(namesrv: str, topic: str) -> list[tuple[int, int, bytes]]:
    """``(queueId, queueOffset, body)`` of every message ``topic`` stores, sorted, read with the
    client's ``PullConsumer`` (the broker's truth, not the connector's)."""

    async def main() -> list[tuple[int, int, bytes]]:
        out: list[tuple[int, int, bytes]] = []
        settings = client.PullSettings(connection=PATIENT)
        async with client.PullConsumer(namesrv, settings=settings) as consumer:
            queues = await consumer.queues_for_topic(topic)
            low = await consumer.beginning_offsets(queues)
            high = await consumer.end_offsets(queues)
            for queue in queues:
                offset = low[queue]
                while offset < high[queue]:
                    batch = await consumer.fetch(queue, offset, long_polling_timeout_s=0)
                    out += [(m.queue_id, m.queue_offset, m.body) for m in batch.messages]
                    offset = batch.next_offset
        return sorted(out)

    return asyncio.run(main())


def _until(check: Callable[[], bool], ended: Callable[[], str | None]) -> None:
    """Poll ``check`` while the streaming query keeps running; fail if ``ended()`` says how it
    ended, or after ``DEADLINE_S``."""
    deadline = time.monotonic() + DEADLINE_S
    while not check():
        how = ended()
        assert how is None, f"the query ended: {how}"
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)


def _job_ended(job: subprocess.Popen[bytes], log: pathlib.Path) -> Callable[[], str | None]:
    """For ``_until``: the end of the job's log once the job process has exited."""
    return lambda: None if job.poll() is None else log.read_text()[-3000:]


def test_exactly_once_across_broker_sigkills_and_restarts_while_producers_write(
    spark: Any, tmp_path: pathlib.Path
) -> None:
    """A streaming query topic -> parquet keeps running (no read task or offset lookup gives
    up) while its broker is SIGKILLed and restarted on the same store and port twice: in the
    middle of a batch with a producer sending throughout, then while the caught-up query polls
    for new offsets. Once caught up, the output read through Spark is exactly what the broker
    stores: each (queueId, queueOffset) once with its body, every acknowledged message among
    them."""
    topic, checkpoint = "spark-restart", tmp_path / "checkpoint"
    with live_testing.namesrv_process(tmp_path) as namesrv:
        port = dev.free_port()
        broker = live_testing.start_broker(tmp_path, namesrv, port)
        try:
            asyncio.run(_registered(namesrv))
            _topic(namesrv, topic, 500)
            with (
                _Producing(namesrv, topic) as producing,
                _streaming(spark, namesrv, topic, tmp_path) as query,
            ):
                ended = _query_ended(query)
                _until(lambda: _mid_batch(checkpoint), ended)
                live_testing.kill(broker)
                failed = producing.failed
                _until(lambda: producing.failed > failed, ended)  # the outage was seen
                broker = live_testing.start_broker(tmp_path, namesrv, port)
                acked = len(producing.acked)
                _until(lambda: len(producing.acked) >= acked + 100, ended)
                producing.stop()
                before = len(_stored(namesrv, topic))
                _until(lambda: _committed_end(checkpoint, topic) == before, ended)
                live_testing.kill(broker)  # the query now asks for offsets over and over
                broker = live_testing.start_broker(tmp_path, namesrv, port)
                _topic_more(namesrv, topic, 100, prefix="after")
                stored = _stored(namesrv, topic)
                _until(lambda: _committed_end(checkpoint, topic) == len(stored), ended)
        finally:
            dev.stop_process(broker)
    out = spark.read.parquet(str(tmp_path / "out")).collect()
    assert sorted((r.queueId, r.queueOffset, r.body) for r in out) == stored
    acked_all = {*producing.acked, *(f"after{i}".encode() for i in range(100))}
    assert len({body for _, _, body in stored}) == len(stored) >= 500 + len(acked_all)
    assert acked_all <= {body for _, _, body in stored}


async def _registered(namesrv: str) -> None:
    async with client.AdminClient(namesrv) as admin:
        await live_testing.wait_registered(admin)
