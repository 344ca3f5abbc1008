"""What the ``rocketmq`` data source asks of the brokers, through ``ariane.client`` only.

Each call opens a ``PullConsumer`` (or ``Producer``) on a private event loop and closes it:
Spark calls a data source from plain threads and from worker processes, never from a running
loop. Reads are non-destructive pulls (``PullConsumer.fetch``), so the same range read twice
gives the same rows: what makes a replayed micro-batch equal to the first run.

Errors: ``OptionError`` for an unknown topic or unreachable endpoints (the option to fix is
named); ``DataLossError`` when a start offset is below a queue's min offset and
``failOnDataLoss`` is true.

Transient failures (a name server or broker that does not answer in ``pullTimeoutMs``, e.g.
on a saturated machine, or a broker restarting) are retried ``fetchOffset.numRetries`` times,
waiting ``fetchOffset.retryIntervalMs`` doubled each time up to ``RETRY_INTERVAL_MS_MAX``, as
Kafka's consumer retries a fetch and Spark's Kafka source an offset lookup: inside a read task
(Spark's task retries come on top) and on the driver when it asks for the queues' offsets to
plan a batch, where a failure would end the streaming query. Only reads are retried, so a
retry cannot duplicate a row.

Invariants: ``read_range`` yields exactly the messages of ``[start, end)`` that pass the tag
expression, in offset order; every pull asks for at most ``pull_batch_size`` messages and
waits for none (long polling 0).
"""

from __future__ import annotations

import asyncio
import datetime
import functools
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Iterator
from typing import Any, TypeVar

from ariane import client
from ariane.common import errors
from ariane.connectors.spark import options as options_mod
from ariane.connectors.spark import ranges

T = TypeVar("T")

Row = tuple[Any, ...]
"""One output row, in the order of ``SCHEMA``."""

SCHEMA = (
    "topic STRING, brokerName STRING, queueId INT, queueOffset BIGINT, messageId STRING, "
    "tag STRING, keys ARRAY<STRING>, body BINARY, properties MAP<STRING,STRING>, "
    "bornTimestamp TIMESTAMP, storeTimestamp TIMESTAMP, messageGroup STRING, deliveryAttempt INT"
)
"""The rows a read yields (DDL), as the issue and DESIGN.md §10 name them."""


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


async def _resolve(
    consumer: client.PullConsumer,
    queues: list[client.MessageQueue],
    spec: options_mod.OffsetSpec,
    stamp_ms: int | None,
) -> ranges.OffsetMap:
    """Offsets of ``spec`` (or of the store time ``stamp_ms``) for every queue."""
    if stamp_ms is not None:
        return _as_map(await consumer.offsets_for_times({q: stamp_ms for q in queues}))
    low = await consumer.beginning_offsets(queues)
    high = await consumer.end_offsets(queues)
    if spec == "earliest":
        return _as_map(low)
    if spec == "latest":
        return _as_map(high)
    assert isinstance(spec, dict)
    known = {(q.topic, ranges.queue_key(q.broker_name, q.queue_id)) for q in queues}
    for topic, given in spec.items():
        for key in given:
            if (topic, key) not in known:
                raise options_mod.OptionError(
                    f"offsets JSON names {topic}/{key}, which is not a queue read; the queues "
                    f"are {sorted(known)}"
                )
    out: dict[client.MessageQueue, int] = {}
    for queue in queues:
        value = spec.get(queue.topic, {}).get(ranges.queue_key(queue.broker_name, queue.queue_id))
        if value is None or value == options_mod.EARLIEST:
            out[queue] = low[queue]
        elif value == options_mod.LATEST:
            out[queue] = high[queue]
        else:
            out[queue] = value
    return _as_map(out)


async def _plan(
    opts: options_mod.ReadOptions, *, streaming: bool
) -> tuple[ranges.OffsetMap, ranges.OffsetMap]:
    async with _consumer(opts) as consumer:
        queues = await _queues(consumer, opts)
        start = await _resolve(consumer, queues, opts.starting, opts.starting_timestamp_ms)
        if streaming:
            return start, start
        end = await _resolve(consumer, queues, opts.ending, opts.ending_timestamp_ms)
        return start, end


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
            out[topic][key] = first
    return out


def _row(message: client.ReceivedMessage) -> Row:
    def stamp(ms: int) -> datetime.datetime:
        return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)

    return (
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
                offset = exc.next_offset
                continue
            for message in batch.messages:
                if message.queue_offset < found.end:
                    yield _row(message)
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
