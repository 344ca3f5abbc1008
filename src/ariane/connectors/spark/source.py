"""``RocketMQDataSource``: the PySpark Python Data Source ``rocketmq`` (batch and streaming
reads, batch and streaming writes), mirroring Spark's Kafka source (``specs/spark.md``).

Reads: the driver resolves offset maps (``ranges.OffsetMap``); ``partitions`` cuts them into
``QueueRangePartition``s; ``read`` runs in Python workers and pulls exactly ``[start, end)``.
A stream's offsets are Spark's checkpoint (``offsets/N`` before batch N, ``commits/N`` after),
so a restarted query replays an unfinished batch with the same range and the same rows;
together with an idempotent sink (the file sink's ``_spark_metadata``, Delta) the output holds
every message once. ``commit`` may report progress to a consumer group, best effort, for lag
views only. Rate limits use Spark 4.2's read limits (``ReadMaxRows``) and
``SupportsTriggerAvailableNow``; ``minOffsetsPerTrigger``/``maxTriggerDelay`` are kept here
(Spark has no composite limit for Python sources). ``reportLatestOffset`` gives Spark the
queues' max offsets for the progress (``latestOffset`` next to ``endOffset``): the query's lag
(``ranges.offsets_behind_latest``), since a Python source cannot report Kafka's
``*OffsetsBehindLatest`` as progress ``metrics``.

Writes (``writer``/``streamWriter``): rows with ``body`` (binary or string, required) and
optional ``topic``, ``tag``, ``keys``, ``properties``, ``messageGroup``, ``deliveryTimestamp``
are sent. A row with a ``deliveryTimestamp`` (TIMESTAMP, or BIGINT ms since the epoch) is sent
as a DELAY message that consumers receive from that time on (RocketMQ 5 timer messages; the
topic must accept DELAY messages).

Exactly-once writes (``exactlyOnce``, the default): the Kafka and rocketmq-spark sinks are at
least once (a retried task or a batch replayed after a driver crash sends again). Here every
row is sent with an idempotency key, ``spark/<query id>/<batch id>/<partition>/<row>/<digest
of the row>`` (a batch write: a write id drawn on the driver instead of query and batch), which
is the same in every attempt of a task and in the replay of a batch (Spark keeps the query id
in the checkpoint and replays a batch with the same offsets), and the broker stores a key once
(``ariane.common.idempotency``). The row's index is its place in the task's input, so the
guarantee holds when a replay gives each partition the same rows in the same order (a
replayable source such as ``rocketmq`` through narrow transformations); otherwise the digest
makes a moved row a new key: at least once, never a lost row.

Invariants: ``initialOffset`` gives the same map on every call of a query when
``initialOffsetsPath`` is set or the start is ``earliest``/explicit JSON with a stable min
offset; ``latestOffset`` never moves backwards from ``start``.
"""

# ruff: noqa: N802, N803 (method and argument names are the PySpark Data Source API's)

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import json
import logging
import os
import pathlib
import time
import uuid
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from pyspark import TaskContext
from pyspark.sql import datasource
from pyspark.sql.streaming import datasource as stream_datasource
from pyspark.sql.types import StructType

from ariane import client
from ariane.connectors.spark import broker_io, ranges
from ariane.connectors.spark import options as options_mod

log = logging.getLogger(__name__)


class QueueRangePartition(datasource.InputPartition):
    """One Spark partition: offsets ``[start, end)`` of one queue (picklable)."""

    def __init__(self, found: ranges.QueueRange) -> None:
        super().__init__(dataclasses.astuple(found))
        self.range = found


def _partitions(
    opts: options_mod.ReadOptions, start: ranges.OffsetMap, end: ranges.OffsetMap
) -> list[QueueRangePartition]:
    cut = ranges.split(
        ranges.between(start, end),
        min_partitions=opts.min_partitions,
        max_records=opts.max_records_per_partition,
    )
    return [QueueRangePartition(r) for r in cut]


def _read(
    opts: options_mod.ReadOptions, partition: datasource.InputPartition
) -> Iterator[tuple[Any, ...]]:
    """The rows of one partition; none for the placeholder partition Spark reads when
    ``partitions`` returned none (an empty range)."""
    if not isinstance(partition, QueueRangePartition):
        return iter(())
    return broker_io.read_range(opts, partition.range)


class RocketMQDataSource(datasource.DataSource):
    """The ``rocketmq`` format: ``spark.dataSource.register(RocketMQDataSource)``, then
    ``spark.read.format("rocketmq").option("endpoints", NAMESRV).option("topics", "a,b")``.

    Options and their errors: ``options.read_options``/``options.write_options``
    (``OptionError`` names the option and the fix). Schema: ``broker_io.SCHEMA``.
    """

    @classmethod
    def name(cls) -> str:
        return "rocketmq"

    def schema(self) -> str:
        """``broker_io.SCHEMA``, with ``broker_io.HEADERS_COLUMN`` when ``includeHeaders``."""
        return broker_io.schema(options_mod.include_headers(self.options))

    def reader(self, schema: StructType) -> datasource.DataSourceReader:
        return RocketMQBatchReader(options_mod.read_options(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> datasource.DataSourceStreamReader:
        return RocketMQStreamReader(options_mod.read_options(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> datasource.DataSourceWriter:
        return RocketMQWriter(options_mod.write_options(self.options))

    def streamWriter(
        self, schema: StructType, overwrite: bool
    ) -> datasource.DataSourceStreamWriter:
        return RocketMQStreamWriter(options_mod.write_options(self.options))


class RocketMQBatchReader(datasource.DataSourceReader):
    """A batch read: start and end resolved once, on the driver, when Spark plans the read."""

    def __init__(self, opts: options_mod.ReadOptions) -> None:
        self.opts = opts
        start, self.end = broker_io.batch_plan(opts)
        low, _ = broker_io.bounds(opts)
        self.start = broker_io.check_loss(opts, start, low)

    def partitions(self) -> Sequence[datasource.InputPartition]:
        return _partitions(self.opts, self.start, self.end)

    def read(self, partition: datasource.InputPartition) -> Iterator[tuple[Any, ...]]:
        return _read(self.opts, partition)


class RocketMQStreamReader(
    datasource.DataSourceStreamReader, stream_datasource.SupportsTriggerAvailableNow
):
    """A micro-batch stream over the queues of ``topics``/``assign``; offsets are
    ``ranges.OffsetMap``s."""

    def __init__(self, opts: options_mod.ReadOptions) -> None:
        self.opts = opts
        self._pinned: ranges.OffsetMap | None = None
        self._held_since_s: float | None = None
        self._latest: ranges.OffsetMap | None = None

    def initialOffset(self) -> dict[str, Any]:
        """Where the query starts; with ``initialOffsetsPath`` the first resolution is kept in
        that file and read back on later calls (Spark calls this again when batch 0 never
        committed: without the file a ``latest`` or timestamp start could move)."""
        path = self.opts.initial_offsets_path
        if path is not None and os.path.exists(path):
            kept: ranges.OffsetMap = json.loads(pathlib.Path(path).read_text())
            return kept
        found = broker_io.initial_offsets(self.opts)
        if path is not None:
            target = pathlib.Path(path)
            target.parent.mkdir(parents=True, exist_ok=True)
            spare = target.with_name(target.name + ".tmp")
            spare.write_text(json.dumps(found, sort_keys=True))
            os.replace(spare, target)
        elif self.opts.starting != "earliest" and not isinstance(self.opts.starting, dict):
            log.warning(
                "startingOffsets=%s without initialOffsetsPath: a restart before the "
                "first commit may start elsewhere",
                self.opts.starting,
            )
        return found

    def getDefaultReadLimit(self) -> stream_datasource.ReadLimit:
        if self.opts.max_offsets_per_trigger is not None:
            return stream_datasource.ReadMaxRows(self.opts.max_offsets_per_trigger)
        return stream_datasource.ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._pinned = broker_io.bounds(self.opts)[1]

    def reportLatestOffset(self) -> dict[str, Any]:
        """The queues' max offsets seen by the last ``latestOffset`` (before any read limit;
        asked of the brokers when there was none yet): Spark's ``MicroBatchExecution`` calls
        this right after ``latestOffset``, as Kafka's source caches its
        ``latestPartitionOffsets`` for it. Spark shows them as the progress's
        ``latestOffset``, next to ``endOffset``: ``ranges.offsets_behind_latest`` turns the
        pair into the query's lag per queue (Kafka's ``*OffsetsBehindLatest``)."""
        if self._latest is None:
            self._latest = broker_io.bounds(self.opts)[1]
        return self._latest

    def latestOffset(
        self, start: dict[str, Any], limit: stream_datasource.ReadLimit
    ) -> dict[str, Any]:
        """The end of the next batch: the queues' max offsets (or the ``availableNow``
        target), capped by the read limit; ``start`` itself while ``minOffsetsPerTrigger``
        holds the batch back."""
        low, high = broker_io.bounds(self.opts)
        self._latest = high
        begin = broker_io.check_loss(self.opts, start, low)
        if self._pinned is not None:
            high = {
                t: {k: min(v, self._pinned.get(t, {}).get(k, v)) for k, v in q.items()}
                for t, q in high.items()
            }
        high = {
            t: {k: max(v, begin.get(t, {}).get(k, 0)) for k, v in q.items()}
            for t, q in high.items()
        }
        if isinstance(limit, stream_datasource.ReadMaxRows):
            high = ranges.cap(begin, high, limit.max_rows)
        if self._holds(begin, high):
            return start
        return high

    def _holds(self, begin: ranges.OffsetMap, high: ranges.OffsetMap) -> bool:
        """Whether ``minOffsetsPerTrigger`` keeps this batch back (until ``maxTriggerDelay``)."""
        wanted = self.opts.min_offsets_per_trigger
        if wanted is None or self._pinned is not None or ranges.backlog(begin, high) >= wanted:
            self._held_since_s = None
            return False
        now = time.monotonic()
        if self._held_since_s is None:
            self._held_since_s = now
        if (now - self._held_since_s) * 1000 >= self.opts.max_trigger_delay_ms:
            self._held_since_s = None
            return False
        return True

    def partitions(
        self, start: dict[str, Any], end: dict[str, Any]
    ) -> Sequence[datasource.InputPartition]:
        return _partitions(self.opts, start, end)

    def read(self, partition: datasource.InputPartition) -> Iterator[tuple[Any, ...]]:
        return _read(self.opts, partition)

    def commit(self, end: dict[str, Any]) -> None:
        """Best effort: report ``end`` to ``consumerGroup`` when ``commitOffsetsToBroker``;
        a failure is logged (Spark calls this late, for the previous batch)."""
        if not self.opts.commit_offsets_to_broker:
            return
        try:
            broker_io.commit_group(self.opts, end)
        except Exception:
            log.warning(
                "committing offsets to group %s failed", self.opts.consumer_group, exc_info=True
            )


@dataclasses.dataclass
class SentMessage(datasource.WriterCommitMessage):
    """What one write task sent."""

    count: int


def _message(row: Any, topic: str | None) -> tuple[str, client.OutgoingMessage]:
    """The topic and the message of one sink row.

    Raises:
        OptionError: no body, no topic, or a ``deliveryTimestamp`` with a ``messageGroup``.
    """
    fields = row.asDict() if hasattr(row, "asDict") else dict(row)
    body = fields.get("body")
    if body is None:
        raise options_mod.OptionError("a row without body: the body column is required")
    chosen = fields.get("topic") or topic
    if not chosen:
        raise options_mod.OptionError("no topic: give option topic or a topic column")
    raw_keys = fields.get("keys") or ()
    keys = (raw_keys,) if isinstance(raw_keys, str) else tuple(raw_keys)
    group = fields.get("messageGroup")
    due_ms = _epoch_ms(fields.get("deliveryTimestamp"))
    if group is not None and due_ms is not None:
        raise options_mod.OptionError(
            "a row with both messageGroup and deliveryTimestamp: a message is FIFO or DELAY, "
            "not both; null one of them"
        )
    return chosen, client.OutgoingMessage(
        body=body.encode() if isinstance(body, str) else bytes(body),
        tag=fields.get("tag"),
        keys=keys,
        message_group=group,
        properties=dict(fields.get("properties") or {}),
        delivery_timestamp_ms=due_ms,
    )


def _epoch_ms(value: datetime.datetime | int | None) -> int | None:
    """ms since the epoch of a ``deliveryTimestamp`` value: a TIMESTAMP (as PySpark hands it
    over: naive in the session's local time zone, or aware) or a BIGINT of ms; ``None`` for
    null."""
    if value is None or isinstance(value, int):
        return value
    return round(value.timestamp() * 1000)


QUERY_ID_PROPERTY = "sql.streaming.queryId"
BATCH_ID_PROPERTY = "streaming.sql.batchId"
"""The local properties Spark's ``StreamExecution``/``MicroBatchExecution`` give every task of a
micro-batch: the query's id (kept in the checkpoint's ``metadata``) and the batch id."""

DIGEST_HEX_CHARS = 16
"""Hex characters of a row's digest in its idempotency key."""


def _digest(topic: str, message: client.OutgoingMessage) -> str:
    """A short hash of what a row sends (topic, body, tag, keys, group, properties, time)."""
    fields = (
        topic,
        message.tag,
        message.keys,
        message.message_group,
        sorted(message.properties.items()),
        message.delivery_timestamp_ms,
    )
    digest = hashlib.sha256(repr(fields).encode())
    digest.update(message.body)
    return digest.hexdigest()[:DIGEST_HEX_CHARS]


def _keyed(
    rows: Iterable[tuple[str, client.OutgoingMessage]], prefix: str
) -> Iterator[tuple[str, client.OutgoingMessage]]:
    """``rows`` with idempotency keys ``<prefix>/<partition>/<row index>/<digest>``."""
    context = TaskContext.get()
    partition = context.partitionId() if context is not None else 0
    for index, (topic, message) in enumerate(rows):
        key = f"{prefix}/{partition}/{index}/{_digest(topic, message)}"
        yield topic, dataclasses.replace(message, idempotency_key=key)


def _stream_prefix() -> str:
    """``spark/<query id>/<batch id>`` of the running micro-batch task.

    Raises:
        OptionError: not in a task of a micro-batch (no query or batch id).
    """
    context = TaskContext.get()
    query = context.getLocalProperty(QUERY_ID_PROPERTY) if context is not None else None
    batch = context.getLocalProperty(BATCH_ID_PROPERTY) if context is not None else None
    if not query or batch is None:
        raise options_mod.OptionError(
            "option exactlyOnce: this task has no streaming query or batch id (Spark sets "
            f"{QUERY_ID_PROPERTY} and {BATCH_ID_PROPERTY} for micro-batches); set "
            "exactlyOnce=false"
        )
    return f"spark/{query}/{batch}"


def _send(
    opts: options_mod.WriteOptions, iterator: Iterator[Any], prefix: str | None
) -> SentMessage:
    rows: Iterable[tuple[str, client.OutgoingMessage]] = (
        _message(row, opts.topic) for row in iterator
    )
    if prefix is not None:
        rows = _keyed(rows, prefix)
    return SentMessage(broker_io.send(opts, rows))


class RocketMQWriter(datasource.DataSourceWriter):
    """A batch write: each task sends its rows, exactly once per write with ``exactlyOnce``
    (a write id drawn here, on the driver, keys the rows of every task attempt)."""

    def __init__(self, opts: options_mod.WriteOptions) -> None:
        self.opts = opts
        self.write_id = uuid.uuid4().hex

    def write(self, iterator: Iterator[Any]) -> SentMessage:
        prefix = f"spark/{self.write_id}/0" if self.opts.exactly_once else None
        return _send(self.opts, iterator, prefix)


class RocketMQStreamWriter(datasource.DataSourceStreamWriter):
    """A streaming write: each micro-batch's tasks send their rows; with ``exactlyOnce`` keyed
    by query, batch, partition and row, so retried tasks and replayed batches store nothing
    twice (without it at least once: a batch replayed after a crash sends again)."""

    def __init__(self, opts: options_mod.WriteOptions) -> None:
        self.opts = opts

    def write(self, iterator: Iterator[Any]) -> SentMessage:
        prefix = _stream_prefix() if self.opts.exactly_once else None
        return _send(self.opts, iterator, prefix)

    def commit(self, messages: list[datasource.WriterCommitMessage | None], batchId: int) -> None:
        log.info(
            "batch %d: %d messages sent",
            batchId,
            sum(m.count for m in messages if isinstance(m, SentMessage)),
        )
