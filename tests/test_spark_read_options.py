"""Read options of the ``rocketmq`` Spark source at parity with Spark's Kafka source, against
real ``ariane`` processes and real PySpark in local mode: timestamps per queue
(``startingOffsetsByTimestamp`` / ``endingOffsetsByTimestamp`` and the strategy for a timestamp
after the last message), ``includeHeaders``, ``failOnDataLoss`` when retention deleted the
CommitLog segments a query's checkpoint points into, and the query's lag (offsets behind the
latest per queue, from the streaming progress, and as the consumer group's lag on the broker).

The session's shared cluster (``shared_cluster``) serves the module, with its own ``sparkopt-*``
topics and groups.

Own cluster: the data-loss test runs its own broker with 64 KiB CommitLog segments and a
retention that deletes every hour, and ages its oldest segments."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import pathlib
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from examples.spark import stream_to_parquet
from pyspark.sql.streaming import datasource as stream_datasource

import ha_testing
import live_testing
from ariane import client, dev
from ariane.connectors.spark import ranges, source
from ariane.operator import metadata

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("spark_jvm")]

DEADLINE_S = 240.0
"""Longest wait for a Spark job step on a loaded 2-core machine, seconds."""

PATIENT = client.ConnectionSettings(request_timeout_s=30)
"""The tests' own clients: a loaded name server has taken over 10 s to open a connection."""


@pytest.fixture(scope="module")
def cluster(shared_cluster: dev.DevEndpoints) -> dev.DevEndpoints:
    """The shared name server and broker (``shared_cluster``)."""
    return shared_cluster


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    """One local-mode SparkSession with ``rocketmq`` registered. Its Python workers wait up
    to 120 s (PySpark's default: 15) for the JVM's answer when they connect: on the loaded
    2-core machine a streaming source runner once timed out there (``CANNOT_OPEN_SOCKET``);
    effective when this module starts the session's JVM."""
    os.environ.setdefault("SPARK_AUTH_SOCKET_TIMEOUT", "120")
    session = stream_to_parquet.session("ariane-read-options-tests")
    yield session
    session.stop()  # type: ignore[attr-defined]


def _create(namesrv: str, topic: str, queues: int) -> None:
    async def main() -> None:
        async with client.AdminClient(namesrv, timeout_s=PATIENT.request_timeout_s) as admin:
            await admin.create_topic(topic, write_queue_nums=queues)
            await live_testing.wait_routed(admin, topic)

    asyncio.run(main())


def _send(namesrv: str, topic: str, bodies: list[bytes], **properties: str) -> None:
    async def main() -> None:
        settings = client.ProducerSettings(connection=PATIENT)
        async with client.Producer(namesrv, settings=settings) as producer:
            for body in bodies:  # one by one: round-robin over the queues
                await producer.send(topic, body, properties=properties)

    asyncio.run(main())


def _read(spark: Any, namesrv: str, topic: str, **extra: str) -> Any:
    reader = spark.read.format("rocketmq").option("endpoints", namesrv).option("topics", topic)
    for key, value in extra.items():
        reader = reader.option(key, value)
    return reader.load()


def _bodies(rows: list[Any]) -> list[bytes]:
    return sorted(bytes(r.body) for r in rows)


def test_offsets_by_timestamp_per_queue_and_the_strategy_past_the_end(
    spark: Any, cluster: dev.DevEndpoints
) -> None:
    """startingOffsetsByTimestamp / endingOffsetsByTimestamp pick, per queue, the first
    message stored at or after the time; a start after the last message fails the read naming
    startingOffsetsByTimestampStrategy (Kafka's default, error) or reads nothing with
    strategy latest; an end after the last message reads to the latest (as Kafka's)."""
    namesrv, topic = cluster.namesrv, "sparkopt-stamps"
    _create(namesrv, topic, 2)
    _send(namesrv, topic, [f"old{i}".encode() for i in range(10)])
    first = _read(spark, namesrv, topic).collect()
    cut_ms = max(round(r.storeTimestamp.timestamp() * 1000) for r in first) + 1
    deadline = time.monotonic() + DEADLINE_S
    while time.time() * 1000 <= cut_ms + 1:  # the next messages are stored after cut_ms
        assert time.monotonic() < deadline
        time.sleep(0.01)
    _send(namesrv, topic, [f"new{i}".encode() for i in range(10)])
    queues = sorted({f"{r.brokerName}:{r.queueId}" for r in first})
    assert len(queues) == 2
    both = json.dumps({topic: {q: cut_ms for q in queues}})
    newer = _read(spark, namesrv, topic, startingOffsetsByTimestamp=both).collect()
    assert _bodies(newer) == sorted(f"new{i}".encode() for i in range(10))
    older = _read(spark, namesrv, topic, endingOffsetsByTimestamp=both).collect()
    assert _bodies(older) == sorted(f"old{i}".encode() for i in range(10))
    one = json.dumps({topic: {queues[0]: cut_ms}})  # the other queue: startingOffsets
    mixed = _read(spark, namesrv, topic, startingOffsetsByTimestamp=one).collect()
    stamped, other = (ranges.parse_key(q)[1] for q in queues)
    assert {bytes(r.body)[:3] for r in mixed if r.queueId == other} == {b"old", b"new"}
    assert {bytes(r.body)[:3] for r in mixed if r.queueId == stamped} == {b"new"}
    later = str(int(time.time() * 1000) + 60_000)
    assert _read(spark, namesrv, topic, endingTimestamp=later).count() == 20
    with pytest.raises(Exception, match="startingOffsetsByTimestampStrategy"):
        _read(spark, namesrv, topic, startingTimestamp=later).collect()
    lenient = {"startingTimestamp": later, "startingOffsetsByTimestampStrategy": "latest"}
    assert _read(spark, namesrv, topic, **lenient).count() == 0


def test_include_headers_adds_the_user_properties_as_kafka_headers(
    spark: Any, cluster: dev.DevEndpoints
) -> None:
    """includeHeaders=true adds a headers column typed as Kafka's,
    array<struct<key:string,value:binary>>, holding the message's user properties; without
    it the schema has no such column."""
    namesrv, topic = cluster.namesrv, "sparkopt-headers"
    _create(namesrv, topic, 1)
    _send(namesrv, topic, [b"h0", b"h1"], trace="t-1", origin="eu")
    frame = _read(spark, namesrv, topic, includeHeaders="true")
    assert frame.schema["headers"].dataType.simpleString() == (
        "array<struct<key:string,value:binary>>"
    )
    rows = frame.collect()
    assert len(rows) == 2
    for row in rows:
        headers = {h.key: bytes(h.value) for h in row.headers}
        assert headers == {k: v.encode() for k, v in row.properties.items()}
        assert {"trace": b"t-1", "origin": b"eu"}.items() <= headers.items()
    assert "headers" not in _read(spark, namesrv, topic).columns


def _available_now(spark: Any, namesrv: str, topic: str, tmp: pathlib.Path, **extra: str) -> Any:
    """Run an availableNow query ``topic`` (from earliest) -> parquet ``tmp/out`` (checkpoint
    ``tmp/checkpoint``) until it ends; the ended query (its exception, if it failed, is
    ``query.exception()``)."""
    reader = (
        spark.readStream.format("rocketmq")
        .option("endpoints", namesrv)
        .option("topics", topic)
        .option("startingOffsets", "earliest")
    )
    for key, value in extra.items():
        reader = reader.option(key, value)
    query = (
        reader.load()
        .writeStream.format("parquet")
        .option("path", str(tmp / "out"))
        .option("checkpointLocation", str(tmp / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    deadline = time.monotonic() + DEADLINE_S
    while query.isActive:
        assert time.monotonic() < deadline, "the availableNow query did not end in time"
        time.sleep(0.1)
    return query


LOSS_TOML = """\
[retention]
file_reserved_hours = 1
delete_when = "00;01;02;03;04;05;06;07;08;09;10;11;12;13;14;15;16;17;18;19;20;21;22;23"
clean_resource_interval_ms = 200
"""
"""Retention of the data-loss broker: a segment last written an hour ago is deleted at any
hour, checked every 200 ms (the test ages segments instead of waiting an hour)."""


def _segments(store: pathlib.Path) -> list[pathlib.Path]:
    return sorted((store / "commitlog").glob("[0-9]*"), key=lambda p: int(p.name))


def _min_offset(namesrv: str, topic: str) -> int:
    async def main() -> int:
        async with client.PullConsumer(
            namesrv, settings=client.PullSettings(connection=PATIENT)
        ) as consumer:
            queues = await consumer.queues_for_topic(topic)
            return min((await consumer.beginning_offsets(queues)).values())

    return asyncio.run(main())


def _age_until_deleted(namesrv: str, topic: str, store: pathlib.Path, above: int) -> int:
    """Age the two oldest CommitLog segments by two hours (their mtime; retention deletes by
    it) until retention removed them and the queue's min offset is above ``above``; that
    min offset."""
    old = _segments(store)[:2]
    aged_s = time.time() - 2 * 3600
    deadline = time.monotonic() + DEADLINE_S
    while (low := _min_offset(namesrv, topic)) <= above:
        assert time.monotonic() < deadline, f"retention kept {old}; min offset {low}"
        for segment in old:
            if segment.exists():
                os.utime(segment, (aged_s, aged_s))
        time.sleep(0.2)
    return low


@pytest.fixture
def loss_cluster(tmp_path: pathlib.Path) -> Iterator[tuple[str, pathlib.Path]]:
    """A name server and one broker (``ha-group``) with 64 KiB segments and ``LOSS_TOML``;
    ``(name server, broker store)``."""
    with ha_testing.running_namesrv(tmp_path) as namesrv:
        broker = ha_testing.new_broker(tmp_path, "loss")
        extra = ha_testing.small_store_config(tmp_path, "loss-store", LOSS_TOML)
        broker.start(tmp_path, namesrv, "ASYNC_MASTER", broker_id=0, extra=extra)
        try:
            yield namesrv, broker.store
        finally:
            broker.stop()


def test_fail_on_data_loss_when_retention_deleted_the_checkpointed_offsets(
    spark: Any,
    loss_cluster: tuple[str, pathlib.Path],
    tmp_path: pathlib.Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A stream checkpointed at offset 10, whose next offsets retention then deleted with
    their CommitLog segments, fails on restart with the data-loss message (failOnDataLoss
    true, the default); with false it skips to the earliest offset still stored, reads every
    message from there exactly once, and logs the skipped range."""
    namesrv, store = loss_cluster
    topic = "sparkopt-loss"
    _create(namesrv, topic, 1)
    _send(namesrv, topic, [b"a%03d" % i + bytes(1000) for i in range(10)])
    first = _available_now(spark, namesrv, topic, tmp_path)
    assert first.exception() is None
    _send(namesrv, topic, [b"b%03d" % i + bytes(1000) for i in range(300)])
    assert len(_segments(store)) >= 4
    low = _age_until_deleted(namesrv, topic, store, 10)
    failed = _available_now(spark, namesrv, topic, tmp_path)
    assert failed.exception() is not None
    text = str(failed.exception())
    assert "DataLossError" in text and f"offsets 10..{low - 1} are gone" in text, text
    assert "failOnDataLoss" in text
    skipped = _available_now(spark, namesrv, topic, tmp_path, failOnDataLoss="false")
    assert skipped.exception() is None
    out = spark.read.parquet(str(tmp_path / "out")).collect()
    assert sorted(r.queueOffset for r in out) == list(range(10)) + list(range(low, 310))
    reader = source.RocketMQDataSource(
        {"endpoints": namesrv, "topics": topic, "failOnDataLoss": "false"}
    ).streamReader(None)  # type: ignore[arg-type]
    queue = ranges.queue_key("ha-group", 0)
    with caplog.at_level(logging.WARNING):
        end = reader.latestOffset({topic: {queue: 10}}, stream_datasource.ReadAllAvailable())
    assert end == {topic: {queue: 310}}
    assert any(
        f"offsets 10..{low - 1}" in r.getMessage() and "skipping" in r.getMessage()
        for r in caplog.records
    ), [r.getMessage() for r in caplog.records]


def _prometheus_lag(url: str, group: str, topic: str) -> float | None:
    with urllib.request.urlopen(url, timeout=30) as response:
        text = response.read().decode()
    labels = (f'consumer_group="{group}"', f'topic="{topic}"')
    for line in text.splitlines():
        if line.startswith("rocketmq_consumer_lag_messages{") and all(x in line for x in labels):
            return float(line.rsplit(" ", 1)[1])
    return None


def _offsets(value: str | dict[str, Any]) -> dict[str, dict[str, int]]:
    """An offset of a progress report (Spark gives it parsed, or as JSON text)."""
    found: dict[str, dict[str, int]] = json.loads(value) if isinstance(value, str) else value
    return found


def test_query_lag_from_progress_and_as_the_group_lag(
    spark: Any, cluster: dev.DevEndpoints, tmp_path: pathlib.Path
) -> None:
    """The streaming progress reports, per micro-batch, each queue's latest offset next to the
    batch's end, and ``offsets_behind_latest`` turns a progress into the lag per queue and
    Kafka's min/max/avgOffsetsBehindLatest; with commitOffsetsToBroker the group's lag (the
    query trails by its last batch) is the broker's rocketmq_consumer_lag_messages and the
    operator's ConsumerGroup status."""
    namesrv, topic, group = cluster.namesrv, "sparkopt-lag", "sparkopt-lag-group"
    _create(namesrv, topic, 2)
    _send(namesrv, topic, [f"l{i}".encode() for i in range(50)])
    extra = {"consumerGroup": group, "commitOffsetsToBroker": "true"}
    query = _available_now(spark, namesrv, topic, tmp_path, maxOffsetsPerTrigger="30", **extra)
    assert query.exception() is None
    progress = [p for p in query.recentProgress if p["numInputRows"]]
    assert [p["numInputRows"] for p in progress] == [30, 20]
    first = progress[0]["sources"][0]
    lag = ranges.offsets_behind_latest(first)
    end, latest = (_offsets(first[k])[topic] for k in ("endOffset", "latestOffset"))
    assert sum(latest.values()) == 50 and sum(end.values()) == 30
    assert lag.per_queue == {topic: {q: latest[q] - end[q] for q in latest}}
    assert lag.max_offsets_behind_latest == max(lag.per_queue[topic].values())
    assert lag.min_offsets_behind_latest == min(lag.per_queue[topic].values())
    assert lag.avg_offsets_behind_latest == 10.0
    assert ranges.offsets_behind_latest(progress[1]["sources"][0]).max_offsets_behind_latest == 0
    assert _prometheus_lag(cluster.broker_metrics, group, topic) == 20

    async def status() -> dict[str, Any]:
        async with client.AdminClient(namesrv) as admin:
            return {"lag": metadata.lag_by_topic(await admin.consumer_lag(group))}

    found = asyncio.run(status())["lag"]
    assert [(e["topic"], e["lag"]) for e in found] == [(topic, 20)]
