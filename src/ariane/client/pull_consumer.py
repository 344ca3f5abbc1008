"""``PullConsumer``: read assigned queues by offset and commit offsets to a group (asyncio).

Mirrors RocketMQ's ``DefaultLitePullConsumer`` in ``assign`` mode (and the v5 clients'
``PullConsumer``) over v2 ``PullMessage``, ``GetOffset``, ``UpdateOffset`` and
``QueryOffset``, with the shape of aiokafka's ``AIOKafkaConsumer`` (``assign``, ``seek``,
``getmany``, ``commit``, ``beginning_offsets``, ``end_offsets``, ``offsets_for_times``):

* a ``MessageQueue`` (topic, broker name, queue id) plays Kafka's ``TopicPartition``; a queue
  offset plays the Kafka offset: the next offset to read, every message below it read;
* reads are non-destructive: ``fetch(queue, offset)`` returns messages of
  ``[offset, next_offset)`` and can be repeated (what the Spark connector builds on);
  ``getmany`` reads from each assigned queue's position and advances it;
* a queue without a position starts at the group's committed offset, else at
  ``auto_offset_reset`` (``earliest`` or ``latest``); an offset outside the queue's
  [min, max] raises ``OffsetOutOfRangeError`` naming the broker's corrected offset (no silent
  jump);
* ``commit`` stores offsets in the broker's consumer offset table, the one POP consumption
  and ``ariane admin group lag`` use.

Errors: statuses raise their ``ariane.common.errors`` class (``TopicNotFoundError``,
``IllegalOffsetError``, …); ``OffsetOutOfRangeError`` is an ``IllegalOffsetError``.

Invariants: one pull reads at most ``max_messages`` + ``RESPONSES_SLACK`` responses; positions
are kept only for assigned queues.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Literal, TypeAlias

from ariane.client import consumer as consumer_mod
from ariane.client import route_cache, session
from ariane.client import transport as transport_mod
from ariane.common import clock, errors, ids, limits
from ariane.grpcwire import codes, convert, messages, pb, rpc

PULL_MESSAGES_MAX = 1_024
"""Most messages one pull asks for (Ariane's brokers return at most 1,024)."""

RESPONSES_SLACK = 4
"""Responses a pull reads beyond its messages (status, next offset, spare)."""

OffsetReset = Literal["earliest", "latest"]
"""Where a queue without a position or committed offset starts."""

_Policy: TypeAlias = pb.v2.QueryOffsetPolicy


@dataclasses.dataclass(frozen=True, slots=True, order=True)
class MessageQueue:
    """One queue of a topic on one broker group (RocketMQ ``MessageQueue``).

    Attributes:
        topic: the topic.
        broker_name: the broker group that holds it.
        queue_id: the queue id on that broker.
    """

    topic: str
    broker_name: str
    queue_id: int


@dataclasses.dataclass(frozen=True, slots=True)
class PullBatch:
    """What one pull of one queue read.

    Attributes:
        messages: the messages, in queue-offset order (``receipt_handle`` is empty).
        next_offset: where the next read starts (past filtered-out offsets too).
    """

    messages: tuple[consumer_mod.ReceivedMessage, ...]
    next_offset: int


class OffsetOutOfRangeError(errors.IllegalOffsetError):
    """A read named an offset outside the queue's [min, max] (retention deleted it, or it was
    never written).

    Attributes:
        queue: the queue.
        offset: the offset asked for.
        next_offset: the broker's corrected offset (the min when too small, the max when too
            big); ``seek`` there to go on.
    """

    def __init__(self, message: str, queue: MessageQueue, offset: int, next_offset: int) -> None:
        super().__init__(message)
        self.queue = queue
        self.offset = offset
        self.next_offset = next_offset


@dataclasses.dataclass(frozen=True, slots=True)
class PullSettings:
    """How a ``PullConsumer`` reads."""

    connection: session.ConnectionSettings = dataclasses.field(
        default_factory=session.ConnectionSettings
    )
    """Deadlines, route refresh and channel bounds."""

    long_polling_timeout_s: float = 5.0
    """How long a read waits for new messages at the end of a queue, seconds (0 .. 20)."""

    max_messages: int = 256
    """Most messages one read of one queue returns (1 .. 1,024)."""

    auto_offset_reset: OffsetReset = "earliest"
    """Where a queue without a position or committed offset starts (Kafka's
    ``auto_offset_reset``; RocketMQ ``CONSUME_FROM_FIRST_OFFSET`` / ``LAST_OFFSET``)."""

    def __post_init__(self) -> None:
        high = limits.LONG_POLLING_MS_MAX / 1000
        if not 0 <= self.long_polling_timeout_s <= high:
            raise ValueError(
                f"long_polling_timeout_s must be 0..{high}, not {self.long_polling_timeout_s}"
            )
        if not 1 <= self.max_messages <= PULL_MESSAGES_MAX:
            raise ValueError(
                f"max_messages must be 1..{PULL_MESSAGES_MAX}, not {self.max_messages}"
            )
        if self.auto_offset_reset not in ("earliest", "latest"):
            raise ValueError(
                f"auto_offset_reset must be earliest or latest, not {self.auto_offset_reset!r}"
            )


class PullConsumer:
    """Reads assigned queues by offset and commits offsets to ``group`` (like aiokafka's
    ``AIOKafkaConsumer`` with manual assignment).

    Use it as an async context manager, or call ``close()``; use it from one event loop::

        async with PullConsumer(namesrv, "analytics") as consumer:
            await consumer.assign("orders")
            while True:
                batches = await consumer.getmany()
                for queue, pulled in batches.items():
                    handle(pulled)
                await consumer.commit()

    Args:
        endpoints: the name servers, ``host:port`` (sequence or ``;``-separated).
        group: the consumer group offsets are committed to; ``None`` reads without a group
            (``commit`` and ``committed`` then raise ``ValueError``).
        tag_expression: which tags to read: ``*``, ``a`` or ``a||b``.
        sql_expression: an SQL92 filter over properties instead of tags.
        settings: how to read.
        time: the clock for routes.
        transport: the transport to use (tests); a new one when ``None``.

    Raises:
        ValueError: malformed endpoints, an empty group or expression, both expressions, or
            settings out of range.
    """

    def __init__(
        self,
        endpoints: str | Sequence[str],
        group: str | None = None,
        *,
        tag_expression: str = "*",
        sql_expression: str | None = None,
        settings: PullSettings | None = None,
        time: clock.Clock | None = None,
        transport: transport_mod.Transport | None = None,
    ) -> None:
        if group is not None and not group:
            raise ValueError("group must be a name or None")
        if sql_expression is not None and tag_expression != "*":
            raise ValueError("give a tag expression or an SQL92 expression, not both")
        if not (sql_expression or tag_expression).strip():
            raise ValueError("the filter expression is empty")
        self._settings = settings or PullSettings()
        self._session = session.Session(
            endpoints, self._settings.connection, time=time, transport=transport
        )
        self._group = convert.resource(group) if group is not None else None
        self._filter = (
            pb.v2.FilterExpression(type=pb.v2.FilterType.SQL, expression=sql_expression)
            if sql_expression is not None
            else pb.v2.FilterExpression(type=pb.v2.FilterType.TAG, expression=tag_expression)
        )
        self._positions: dict[MessageQueue, int | None] = {}

    @property
    def client_id(self) -> ids.ClientId:
        """The ``x-mq-client-id`` this consumer sends."""
        return self._session.client_id

    @property
    def group(self) -> str | None:
        """The consumer group, or ``None``."""
        return self._group.name if self._group is not None else None

    async def __aenter__(self) -> PullConsumer:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Tell the brokers this consumer is gone and close its channels (idempotent); nothing
        is committed implicitly."""
        await self._session.close(self.group)

    # -- assignment ----------------------------------------------------------------------------

    async def queues_for_topic(self, topic: str) -> list[MessageQueue]:
        """Every readable queue of ``topic`` on the masters, sorted (Kafka
        ``partitions_for_topic``; RocketMQ ``fetchMessageQueues``).

        Raises:
            TopicNotFoundError: the name servers do not know the topic.
        """
        self._session.check_open()
        found = await self._session.routes.get(topic)
        return sorted(MessageQueue(topic, q.broker_name, q.queue_id) for q in found.readable)

    async def assign(
        self, topic: str, queue_ids: Iterable[int] | None = None
    ) -> list[MessageQueue]:
        """Add queues of ``topic`` to the assignment: all readable ones, or those with the
        given ids (on every broker that has them). Positions of queues already assigned stay.

        Returns:
            the queues added or kept, sorted.

        Raises:
            TopicNotFoundError: unknown topic.
            ValueError: a queue id the topic does not have.
        """
        available = await self.queues_for_topic(topic)
        chosen = available
        if queue_ids is not None:
            wanted = set(queue_ids)
            chosen = [q for q in available if q.queue_id in wanted]
            missing = wanted - {q.queue_id for q in chosen}
            if missing:
                raise ValueError(f"topic {topic!r} has no readable queue {sorted(missing)}")
        for queue in chosen:
            self._positions.setdefault(queue, None)
        return chosen

    def assignment(self) -> frozenset[MessageQueue]:
        """The queues assigned."""
        return frozenset(self._positions)

    def unassign(self, queues: Iterable[MessageQueue] | None = None) -> None:
        """Drop queues (all when ``None``) and their positions."""
        for queue in list(self._positions) if queues is None else queues:
            self._positions.pop(queue, None)

    def seek(self, queue: MessageQueue, offset: int) -> None:
        """Set the next offset ``getmany`` reads from ``queue`` (Kafka ``seek``).

        Raises:
            ValueError: ``queue`` is not assigned or ``offset`` is negative.
        """
        self._require_assigned(queue)
        if offset < 0:
            raise ValueError(f"offset must be >= 0, not {offset}")
        self._positions[queue] = offset

    async def position(self, queue: MessageQueue) -> int:
        """The next offset ``getmany`` reads from ``queue`` (resolved from the committed offset
        or ``auto_offset_reset`` when none was set)."""
        self._require_assigned(queue)
        found = self._positions[queue]
        if found is None:
            found = await self._initial_position(queue)
            self._positions[queue] = found
        return found

    async def seek_to_beginning(self, *queues: MessageQueue) -> None:
        """Move the given queues (all assigned when none) to their min offset."""
        chosen = queues or tuple(self._positions)
        for queue, offset in (await self.beginning_offsets(chosen)).items():
            self.seek(queue, offset)

    async def seek_to_end(self, *queues: MessageQueue) -> None:
        """Move the given queues (all assigned when none) to their max offset."""
        chosen = queues or tuple(self._positions)
        for queue, offset in (await self.end_offsets(chosen)).items():
            self.seek(queue, offset)

    def _require_assigned(self, queue: MessageQueue) -> None:
        if queue not in self._positions:
            raise ValueError(f"{queue} is not assigned to this consumer")

    async def _initial_position(self, queue: MessageQueue) -> int:
        if self._group is not None:
            found = await self.committed(queue)
            if found is not None:
                return found
        if self._settings.auto_offset_reset == "earliest":
            return (await self.beginning_offsets([queue]))[queue]
        return (await self.end_offsets([queue]))[queue]

    # -- offsets -------------------------------------------------------------------------------

    async def beginning_offsets(self, queues: Iterable[MessageQueue]) -> dict[MessageQueue, int]:
        """Each queue's min offset, the first still stored (QueryOffset BEGINNING).

        Raises:
            TopicNotFoundError: unknown topic; ValueError: a queue the route does not have.
        """
        return await self._query_many(queues, pb.v2.QueryOffsetPolicy.BEGINNING, None)

    async def end_offsets(self, queues: Iterable[MessageQueue]) -> dict[MessageQueue, int]:
        """Each queue's max offset, the next to be written (QueryOffset END)."""
        return await self._query_many(queues, pb.v2.QueryOffsetPolicy.END, None)

    async def offsets_for_times(
        self, timestamps_ms: Mapping[MessageQueue, int]
    ) -> dict[MessageQueue, int]:
        """Per queue, the first offset whose message was stored at or after the time, ms since
        the epoch (QueryOffset TIMESTAMP; RocketMQ ``searchOffset``). A time after the last
        message gives the max offset; one before the first gives the min offset.
        """
        pairs = list(timestamps_ms.items())
        found = await asyncio.gather(
            *(self._query(q, pb.v2.QueryOffsetPolicy.TIMESTAMP, ms) for q, ms in pairs)
        )
        return {q: offset for (q, _), offset in zip(pairs, found, strict=True)}

    async def _query_many(
        self, queues: Iterable[MessageQueue], policy: _Policy, stamp_ms: int | None
    ) -> dict[MessageQueue, int]:
        chosen = list(queues)
        found = await asyncio.gather(*(self._query(q, policy, stamp_ms) for q in chosen))
        return dict(zip(chosen, found, strict=True))

    async def _query(self, queue: MessageQueue, policy: _Policy, stamp_ms: int | None) -> int:
        route = await self._route(queue)
        request = pb.v2_service.QueryOffsetRequest(
            message_queue=route.message_queue, query_offset_policy=policy
        )
        if stamp_ms is not None:
            request.timestamp.CopyFrom(messages.timestamp(stamp_ms))
        response = await self._unary(
            route, "QueryOffset", request, pb.v2_service.QueryOffsetResponse
        )
        return int(response.offset)

    async def committed(self, queue: MessageQueue) -> int | None:
        """The group's committed offset on ``queue`` (GetOffset), ``None`` when it never
        committed there.

        Raises:
            ValueError: the consumer has no group.
        """
        route = await self._route(queue)
        request = pb.v2_service.GetOffsetRequest(
            group=self._require_group(), message_queue=route.message_queue
        )
        try:
            response = await self._unary(
                route, "GetOffset", request, pb.v2_service.GetOffsetResponse
            )
        except errors.OffsetNotFoundError:
            return None
        return int(response.offset)

    async def commit(self, offsets: Mapping[MessageQueue, int] | None = None) -> None:
        """Commit offsets to the group (UpdateOffset per queue): the given ones, else every
        assigned queue's position that is known. An offset is the next to read.

        Raises:
            ValueError: the consumer has no group.
            IllegalOffsetError: an offset outside its queue's [min, max].
        """
        group = self._require_group()
        chosen = (
            dict(offsets)
            if offsets is not None
            else {q: o for q, o in self._positions.items() if o is not None}
        )
        await asyncio.gather(*(self._commit_one(group, q, o) for q, o in chosen.items()))

    async def _commit_one(self, group: pb.v2.Resource, queue: MessageQueue, offset: int) -> None:
        route = await self._route(queue)
        request = pb.v2_service.UpdateOffsetRequest(
            group=group, message_queue=route.message_queue, offset=offset
        )
        await self._unary(route, "UpdateOffset", request, pb.v2_service.UpdateOffsetResponse)

    def _require_group(self) -> pb.v2.Resource:
        if self._group is None:
            raise ValueError("this consumer has no group: give one to commit offsets")
        return self._group

    # -- reads ---------------------------------------------------------------------------------

    async def fetch(
        self,
        queue: MessageQueue,
        offset: int,
        *,
        max_messages: int | None = None,
        long_polling_timeout_s: float | None = None,
    ) -> PullBatch:
        """Read messages of ``queue`` from ``offset`` without moving any position (one
        PullMessage): the same call returns the same messages again.

        Args:
            queue: any readable queue (need not be assigned).
            offset: the first offset wanted.
            max_messages: most messages, 1 .. 1,024 (default: the settings').
            long_polling_timeout_s: how long to wait at the end of the queue (default: the
                settings'); 0 answers at once.

        Raises:
            OffsetOutOfRangeError: ``offset`` is outside the queue's [min, max].
            TopicNotFoundError, ConsumerGroupNotFoundError, ...: the broker's refusal.
        """
        count = max_messages or self._settings.max_messages
        if not 1 <= count <= PULL_MESSAGES_MAX:
            raise ValueError(f"max_messages must be 1..{PULL_MESSAGES_MAX}, not {count}")
        polling_s = (
            self._settings.long_polling_timeout_s
            if long_polling_timeout_s is None
            else long_polling_timeout_s
        )
        route = await self._route(queue)
        request = pb.v2_service.PullMessageRequest(
            message_queue=route.message_queue,
            offset=offset,
            batch_size=count,
            filter_expression=self._filter,
            long_polling_timeout=messages.duration(round(polling_s * 1000)),
        )
        if self._group is not None:
            request.group.CopyFrom(self._group)
        self._session.used(route.endpoint)
        responses = await self._session.transport.stream(
            route.endpoint,
            "PullMessage",
            request,
            pb.v2_service.PullMessageResponse,
            timeout_s=self._settings.connection.request_timeout_s + polling_s,
            responses_max=count + RESPONSES_SLACK,
        )
        return _pulled(queue, route, offset, responses)

    async def getmany(
        self, *queues: MessageQueue, max_messages: int | None = None
    ) -> dict[MessageQueue, list[consumer_mod.ReceivedMessage]]:
        """Read the given assigned queues (all when none) from their positions and advance
        them (aiokafka ``getmany``).

        First every queue is read at once without waiting; when none has messages, each is
        read with long polling and the call returns as soon as one has messages (the other
        reads are cancelled: reads change nothing on the broker), or empty after the
        long-polling time.

        Raises:
            OffsetOutOfRangeError: a position is outside its queue's [min, max]; ``seek``.
            ValueError: a queue that is not assigned.
        """
        chosen = queues or tuple(sorted(self._positions))
        starts = {q: await self.position(q) for q in chosen}
        out: dict[MessageQueue, list[consumer_mod.ReceivedMessage]] = {}
        reads = [
            self.fetch(q, o, max_messages=max_messages, long_polling_timeout_s=0)
            for q, o in starts.items()
        ]
        for queue, batch in zip(starts, await asyncio.gather(*reads), strict=True):
            self._advance(queue, starts[queue], batch, out)
        if out or self._settings.long_polling_timeout_s == 0:
            return out
        for queue, start in list(starts.items()):  # past what the first pass skipped
            moved = self._positions.get(queue)
            starts[queue] = start if moved is None else moved
        pending = {
            asyncio.ensure_future(self.fetch(q, o, max_messages=max_messages)): q
            for q, o in starts.items()
        }
        try:
            while pending and not out:
                done, _ = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    queue = pending.pop(task)
                    self._advance(queue, starts[queue], task.result(), out)
        finally:
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
        return out

    def _advance(
        self,
        queue: MessageQueue,
        start: int,
        batch: PullBatch,
        out: dict[MessageQueue, list[consumer_mod.ReceivedMessage]],
    ) -> None:
        """Move ``queue`` past ``batch`` unless it was moved (``seek``) meanwhile."""
        if self._positions.get(queue) == start:
            self._positions[queue] = batch.next_offset
        if batch.messages:
            out[queue] = list(batch.messages)

    async def _route(self, queue: MessageQueue) -> route_cache.QueueRoute:
        self._session.check_open()
        found = await self._session.routes.get(queue.topic)
        for route in found.readable:
            if route.broker_name == queue.broker_name and route.queue_id == queue.queue_id:
                return route
        raise ValueError(f"{queue} is not a readable queue of the topic's route")

    async def _unary(
        self,
        route: route_cache.QueueRoute,
        rpc_name: str,
        request: object,
        response_type: type[rpc.M],
    ) -> rpc.M:
        """One unary call to the queue's broker; raises the error of a non-OK status."""
        self._session.used(route.endpoint)
        response = await self._session.transport.unary(
            route.endpoint, rpc_name, request, response_type
        )
        status: pb.v2.Status = getattr(response, "status")  # noqa: B009 (every answer has one)
        codes.raise_for_status(status)
        return response


def _pulled(
    queue: MessageQueue,
    route: route_cache.QueueRoute,
    offset: int,
    responses: Sequence[pb.v2_service.PullMessageResponse],
) -> PullBatch:
    """The batch of a PullMessage answer, or the error its status stands for."""
    status: pb.v2.Status | None = None
    next_offset: int | None = None
    out: list[consumer_mod.ReceivedMessage] = []
    for response in responses:
        kind = response.WhichOneof("content")
        if kind == "status" and status is None:
            status = response.status
        elif kind == "message":
            out.append(consumer_mod.message_view(route, response.message))
        elif kind == "next_offset":
            next_offset = response.next_offset
    if status is None:
        raise errors.ArianeError(f"{route.endpoint} answered a pull without a status")
    code = codes.code_of(status)
    if code == errors.Code.ILLEGAL_OFFSET and next_offset is not None:
        raise OffsetOutOfRangeError(
            f"{queue}: offset {offset} is out of range: {status.message}",
            queue,
            offset,
            next_offset,
        )
    if code != errors.Code.MESSAGE_NOT_FOUND:
        codes.raise_for_status(status)
    if next_offset is None:
        raise errors.ArianeError(f"{route.endpoint} answered a pull without a next offset")
    return PullBatch(tuple(out), next_offset)
