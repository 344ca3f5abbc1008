"""What the ``rocketmq`` data source asks of the brokers, through ``ariane.client`` only.

Each call opens a ``PullConsumer`` (or ``Producer``) on a private event loop and closes it:
Spark calls a data source from plain threads and from worker processes, never from a running
loop. Reads are non-destructive pulls (``PullConsumer.fetch``), so the same range read twice
gives the same rows: what makes a replayed micro-batch equal to the first run.

Errors: ``OptionError`` for an unknown topic or unreachable endpoints (the option to fix is
named), and for a start time after a queue's last message with
``startingOffsetsByTimestampStrategy=error`` (Kafka's default; an end time there means latest,
as Kafka's); ``DataLossError`` when a start offset is below a queue's min offset (retention
deleted its CommitLog segments) and ``failOnDataLoss`` is true; with false the skipped range is
logged as a warning (on the driver when a batch is planned, in the task when a read meets it).

Transient failures (a name server or broker that does not answer in ``pullTimeoutMs``, e.g.
on a saturated machine, or a broker restarting) are retried ``fetchOffset.numRetries`` times,
waiting ``fetchOffset.retryIntervalMs`` doubled each time up to ``RETRY_INTERVAL_MS_MAX``, as
Kafka's consumer retries a fetch and Spark's Kafka source an offset lookup: inside a read task
(Spark's task retries come on top) and on the driver when it asks for the queues' offsets to
plan a batch, where a failure would end the streaming query. Only reads are retried, so a
retry cannot duplicate a row.

Invariants: ``read_range`` yields exactly the messages of ``[start, end)`` that pass the tag
expression, in offset order, as rows of ``schema(opts.include_headers)``; every pull asks
for at most ``pull_batch_size`` messages and waits for none (long polling 0).
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import functools
import logging
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Iterator
from typing import Any, TypeVar

from ariane import client
from ariane.common import errors
from ariane.connectors.spark import options as options_mod
from ariane.connectors.spark import ranges

T = TypeVar("T")

log = logging.getLogger(__name__)

Row = tuple[Any, ...]
"""One output row, in the order of ``SCHEMA``."""

SCHEMA = (
    "topic STRING, brokerName STRING, queueId INT, queueOffset BIGINT, messageId STRING, "
    "tag STRING, keys ARRAY<STRING>, body BINARY, properties MAP<STRING,STRING>, "
    "bornTimestamp TIMESTAMP, storeTimestamp TIMESTAMP, messageGroup STRING, deliveryAttempt INT"
)
"""The rows a read yields (DDL), as the issue and DESIGN.md §10 name them."""

HEADERS_COLUMN = "headers ARRAY<STRUCT<key: STRING, value: BINARY>>"
"""The column ``includeHeaders=true`` adds: the message's user properties as Kafka's source
types its headers (``array<struct<key:string,value:binary>>``), values UTF-8 encoded."""


def schema(include_headers: bool) -> str:
    """The DDL of a read's rows: ``SCHEMA``, plus ``HEADERS_COLUMN`` with ``includeHeaders``."""
    return f"{SCHEMA}, {HEADERS_COLUMN}" if include_headers else SCHEMA


RETRY_INTERVAL_MS_MAX = 4_000
"""Longest wait between two tries of a read or offset lookup, ms."""


class DataLossError(errors.ArianeError):
    """Offsets a query needs are gone (retention deleted them, or the queue disappeared)."""


def _consumer(opts: options_mod.ReadOptions) -> client.PullConsumer:
    """A pull consumer of ``opts``: signed and over TLS as the options say, reading as
    ``consumerGroup`` when one is given. RocketMQ's PULL_MESSAGE always names a group, and with
    ACL 2.0 on the pull needs ``Sub`` on it (``security.requests``), so a query that reads as a
    Normal user must name a group its ACL allows; offsets are committed to it only with
    ``commitOffsetsToBroker``."""
    group = opts.consumer_group
    connection = client.ConnectionSettings(
        request_timeout_s=opts.pull_timeout_ms / 1000, credentials=opts.credentials, tls=opts.tls
    )
    settings = client.PullSettings(
        connection=connection, long_polling_timeout_s=0, max_messages=opts.pull_batch_size
    )
    return client.PullConsumer(
        opts.endpoints, group, tag_expression=opts.sub_expression, settings=settings
    )


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run ``coroutine`` on a fresh event loop, turning unreachable endpoints into an
    ``OptionError`` that names the option."""
    try:
        return asyncio.run(coroutine)
    except errors.ServiceUnavailableError as exc:
        raise options_mod.OptionError(
            f"option endpoints: cannot reach the name servers or brokers ({exc}); check the "
            "address and that they run"
        ) from exc


async def _queues(
    consumer: client.PullConsumer, opts: options_mod.ReadOptions
) -> list[client.MessageQueue]:
    out: list[client.MessageQueue] = []
    for topic in opts.topics:
        try:
            found = await consumer.queues_for_topic(topic)
        except errors.TopicNotFoundError:
            raise options_mod.OptionError(
                f"option topics: topic {topic!r} does not exist; create it "
                f"(ariane admin topic create {topic}) or fix the name"
            ) from None
        if opts.assign is not None:
            wanted = set(opts.assign[topic])
            found = [q for q in found if q.queue_id in wanted]
            missing = wanted - {q.queue_id for q in found}
            if missing:
                raise options_mod.OptionError(
                    f"option assign: topic {topic!r} has no queue {sorted(missing)}"
                )
        out += found
    return sorted(out)


def _as_map(found: dict[client.MessageQueue, int]) -> ranges.OffsetMap:
    out: ranges.OffsetMap = {}
    for queue, offset in sorted(found.items()):
        out.setdefault(queue.topic, {})[ranges.queue_key(queue.broker_name, queue.queue_id)] = (
            offset
        )
    return out


@dataclasses.dataclass(frozen=True, slots=True)
class _Bound:
    """One end of a read as the options give it: offsets, and store times that override
    them (``stamp_ms`` for every queue, else ``stamps`` for the queues it names).

    Attributes:
        spec: ``startingOffsets``/``endingOffsets``.
        stamp_ms: ``startingTimestamp``/``endingTimestamp``, or ``None``.
        stamps: ``startingOffsetsByTimestamp``/``endingOffsetsByTimestamp``, or ``None``.
        strict: a time after a queue's last message raises (else: the max offset).
    """

    spec: options_mod.OffsetSpec
    stamp_ms: int | None
    stamps: options_mod.TimestampSpec | None
    strict: bool


def _check_named(
    name: str, given: dict[str, dict[str, int]], queues: list[client.MessageQueue]
) -> None:
    """Raise ``OptionError`` when the JSON option ``name`` names a queue that is not read."""
    known = {(q.topic, ranges.queue_key(q.broker_name, q.queue_id)) for q in queues}
    for topic, keys in given.items():
        for key in keys:
            if (topic, key) not in known:
                raise options_mod.OptionError(
                    f"{name} JSON names {topic}/{key}, which is not a queue read; the queues "
                    f"are {sorted(known)}"
                )


async def _by_time(
    consumer: client.PullConsumer,
    queues: list[client.MessageQueue],
    bound: _Bound,
    high: dict[client.MessageQueue, int],
) -> dict[client.MessageQueue, int]:
    """Per queue with a time in ``bound``, the first offset stored at or after it; a time
    after the queue's last message gives the max offset, or ``OptionError`` when
    ``bound.strict`` (Kafka: ``startingOffsetsByTimestampStrategy=error``)."""
    wanted: dict[client.MessageQueue, int] = {}
    for queue in queues:
        key = ranges.queue_key(queue.broker_name, queue.queue_id)
        stamp = bound.stamp_ms
        if stamp is None and bound.stamps is not None:
            stamp = bound.stamps.get(queue.topic, {}).get(key)
        if stamp is not None:
            wanted[queue] = stamp
    found = await consumer.offsets_for_times(wanted) if wanted else {}
    for queue, offset in found.items():
        if offset >= high[queue] and bound.strict:
            raise options_mod.OptionError(
                f"no message of {queue} was stored at or after {wanted[queue]} ms (the start "
                "time); set option startingOffsetsByTimestampStrategy to latest to start such "
                "queues at their latest offset, or give an earlier time"
            )
        found[queue] = min(offset, high[queue])
    return found


async def _resolve(
    consumer: client.PullConsumer, queues: list[client.MessageQueue], bound: _Bound
) -> ranges.OffsetMap:
    """Offsets of ``bound`` for every queue: the time of a queue where one is given, else
    its offset in ``bound.spec`` (earliest, latest, or the JSON's, absent: earliest)."""
    spec = bound.spec
    if isinstance(spec, dict):
        _check_named("offsets", spec, queues)
    if bound.stamps is not None:
        _check_named("timestamps", bound.stamps, queues)
    low = await consumer.beginning_offsets(queues)
    high = await consumer.end_offsets(queues)
    timed = await _by_time(consumer, queues, bound, high)
    out: dict[client.MessageQueue, int] = {}
    for queue in queues:
        value = options_mod.EARLIEST if spec == "earliest" else options_mod.LATEST
        if isinstance(spec, dict):
            key = ranges.queue_key(queue.broker_name, queue.queue_id)
            value = spec.get(queue.topic, {}).get(key, options_mod.EARLIEST)
        if queue in timed:
            out[queue] = timed[queue]
        elif value == options_mod.EARLIEST:
            out[queue] = low[queue]
        elif value == options_mod.LATEST:
            out[queue] = high[queue]
        else:
            out[queue] = value
    return _as_map(out)


def _starting(opts: options_mod.ReadOptions) -> _Bound:
    strict = opts.starting_timestamp_strategy == options_mod.STRATEGY_ERROR
    return _Bound(opts.starting, opts.starting_timestamp_ms, opts.starting_by_timestamp, strict)


def _ending(opts: options_mod.ReadOptions) -> _Bound:
    return _Bound(opts.ending, opts.ending_timestamp_ms, opts.ending_by_timestamp, False)


async def _plan(
    opts: options_mod.ReadOptions, *, streaming: bool
) -> tuple[ranges.OffsetMap, ranges.OffsetMap]:
    async with _consumer(opts) as consumer:
        queues = await _queues(consumer, opts)
        start = await _resolve(consumer, queues, _starting(opts))
        if streaming:
            return start, start
        return start, await _resolve(consumer, queues, _ending(opts))


def batch_plan(opts: options_mod.ReadOptions) -> tuple[ranges.OffsetMap, ranges.OffsetMap]:
    """``(start, end)`` of a batch read: resolved once, on the driver."""
    return run(_retried(opts, lambda: _plan(opts, streaming=False)))


def initial_offsets(opts: options_mod.ReadOptions) -> ranges.OffsetMap:
    """Where a new stream starts (``startingOffsets``/``startingTimestamp`` resolved now)."""
    return run(_retried(opts, lambda: _plan(opts, streaming=True)))[0]


async def _bounds(
    opts: options_mod.ReadOptions,
) -> tuple[ranges.OffsetMap, ranges.OffsetMap]:
    async with _consumer(opts) as consumer:
        queues = await _queues(consumer, opts)
        low = await consumer.beginning_offsets(queues)
        return _as_map(low), _as_map(await consumer.end_offsets(queues))


def bounds(opts: options_mod.ReadOptions) -> tuple[ranges.OffsetMap, ranges.OffsetMap]:
    """Every read queue's ``(min, max)`` offsets now (queues created since are included)."""
    return run(_retried(opts, lambda: _bounds(opts)))


def check_loss(
    opts: options_mod.ReadOptions, start: ranges.OffsetMap, low: ranges.OffsetMap
) -> ranges.OffsetMap:
    """``start`` with every offset below its queue's min offset raised to it, or
    ``DataLossError`` when ``failOnDataLoss`` is true."""
    out = {topic: dict(queues) for topic, queues in start.items()}
    for topic, queues in low.items():
        for key, first in queues.items():
            wanted = out.setdefault(topic, {}).get(key, 0)
            if wanted >= first:
                continue
            if opts.fail_on_data_loss:
                raise DataLossError(
                    f"{topic}/{key}: offsets {wanted}..{first - 1} are gone (retention); set "
                    "option failOnDataLoss to false to skip them"
                )
            log.warning(
                "%s/%s: offsets %d..%d are gone (retention deleted them); skipping to %d as "
                "failOnDataLoss is false (set it to true to fail the query instead)",
                topic,
                key,
                wanted,
                first - 1,
                first,
            )
            out[topic][key] = first
    return out


def _row(message: client.ReceivedMessage, include_headers: bool) -> Row:
    def stamp(ms: int) -> datetime.datetime:
        return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)

    row = (
        message.topic,
        message.broker_name,
        message.queue_id,
        message.queue_offset,
        message.message_id,
        message.tag,
        list(message.keys),
        message.body,
        dict(message.properties),
        stamp(message.born_timestamp_ms),
        stamp(message.store_timestamp_ms),
        message.message_group,
        message.delivery_attempt,
    )
    if not include_headers:
        return row
    return (*row, [(k, v.encode()) for k, v in message.properties.items()])


def read_range(opts: options_mod.ReadOptions, found: ranges.QueueRange) -> Iterator[Row]:
    """The rows of ``[found.start, found.end)``, pulled ``pull_batch_size`` at a time.

    Raises:
        DataLossError: offsets of the range were deleted and ``failOnDataLoss`` is true.
    """
    loop = asyncio.new_event_loop()
    consumer = _consumer(opts)
    queue = client.MessageQueue(found.topic, found.broker_name, found.queue_id)
    try:
        offset = found.start
        while offset < found.end:
            count = min(opts.pull_batch_size, found.end - offset)
            try:
                pull = functools.partial(consumer.fetch, queue, offset, max_messages=count)
                batch = loop.run_until_complete(_retried(opts, pull))
            except client.OffsetOutOfRangeError as exc:
                if opts.fail_on_data_loss or exc.next_offset <= offset:
                    raise DataLossError(
                        f"{queue}: offset {offset} is no longer stored; set option "
                        "failOnDataLoss to false to skip lost offsets"
                    ) from exc
                log.warning(
                    "%s: offsets %d..%d are gone (retention deleted them); skipping to %d as "
                    "failOnDataLoss is false",
                    queue,
                    offset,
                    exc.next_offset - 1,
                    exc.next_offset,
                )
                offset = exc.next_offset
                continue
            for message in batch.messages:
                if message.queue_offset < found.end:
                    yield _row(message, opts.include_headers)
            assert batch.next_offset > offset, f"{queue}: a pull at {offset} did not advance"
            offset = batch.next_offset
    finally:
        loop.run_until_complete(consumer.close())
        loop.close()


async def _retried(opts: options_mod.ReadOptions, call: Callable[[], Awaitable[T]]) -> T:
    """``call()``, tried again after a retriable error (``ArianeError.retriable``: no answer
    in time, a broker unreachable or restarting) ``opts.fetch_retries`` times, waiting
    ``opts.fetch_retry_interval_ms`` doubling to ``RETRY_INTERVAL_MS_MAX``; the last error is
    raised. Refusals (unknown topic, offset out of range) are raised at once."""
    interval_ms = opts.fetch_retry_interval_ms
    for _ in range(opts.fetch_retries):
        try:
            return await call()
        except errors.ArianeError as exc:
            if not exc.retriable:
                raise
        await asyncio.sleep(interval_ms / 1000)
        interval_ms = min(interval_ms * 2, max(RETRY_INTERVAL_MS_MAX, interval_ms))
    return await call()


async def _commit(opts: options_mod.ReadOptions, end: ranges.OffsetMap) -> None:
    async with _consumer(opts) as consumer:
        offsets = {
            client.MessageQueue(topic, *ranges.parse_key(key)): offset
            for topic, queues in end.items()
            for key, offset in queues.items()
        }
        await consumer.commit(offsets)


def commit_group(opts: options_mod.ReadOptions, end: ranges.OffsetMap) -> None:
    """Store ``end`` as the consumer group's offsets (for lag views only)."""
    run(_commit(opts, end))


async def _send(
    opts: options_mod.WriteOptions, rows: Iterable[tuple[str, client.OutgoingMessage]]
) -> int:
    settings = client.ProducerSettings(
        connection=client.ConnectionSettings(
            request_timeout_s=opts.pull_timeout_ms / 1000,
            credentials=opts.credentials,
            tls=opts.tls,
        )
    )
    sent = 0
    async with client.Producer(opts.endpoints, settings=settings) as producer:
        pending: dict[str, list[client.OutgoingMessage]] = {}
        for topic, message in rows:
            pending.setdefault(topic, []).append(message)
            if len(pending[topic]) >= options_mod.PULL_BATCH_SIZE_DEFAULT:
                sent += len(await producer.send_batch(topic, pending.pop(topic)))
        for topic, batch in pending.items():
            sent += len(await producer.send_batch(topic, batch))
    return sent


def send(opts: options_mod.WriteOptions, rows: Iterable[tuple[str, client.OutgoingMessage]]) -> int:
    """Send ``(topic, message)`` pairs in batches per topic; the count sent."""
    return run(_send(opts, rows))
