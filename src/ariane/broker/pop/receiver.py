"""The read-and-mark of RocketMQ 5 POP consumption: ``PopReceiver``.

RocketMQ's ``PopMessageProcessor`` reads a queue from the group's start offset, filters, and
writes a checkpoint (CK) per popped batch; ``AckMessageProcessor`` and
``ChangeInvisibleTimeProcessor`` check a receipt handle and write an ACK or a new CK. Here one
object does both for every group of one broker: a receive pass (``receive``) is given the
group, the queues to read in order with the filter of each (``Source``), the batch size and
the invisible duration; it reads the store through one reader (``reader.QueueReader``),
filters, marks what it delivers in flight (``group_state.GroupPopState`` + the POP journal of
``service.PopService``, one journal write per pass) and returns the messages with their
receipt handles. The acknowledgements (``ack``, ``change_invisible``, ``holds``, ``current``)
check a handle against the same state. Policy stays with the caller
(``processors.consume.ConsumeProcessor``): which queues and retry topics, which filter, the
long polling between passes, nack/DLQ decisions; retry copies and dead letters are written by
the injected ``RetryWriter`` (``processors.retry.RetryProcessor``: backoff, max attempts).

One queue of a pass, in order: (1) deliveries whose invisible time ran out: a concurrent
group's (and every one past the max attempts) become a retry copy or a dead letter through
``RetryWriter.retry_failed`` inside ``GroupPopState.reviving``; an orderly group's are
delivered again in place with attempt + 1; (2) FIFO messages that became free; (3) new
messages from the scan cursor (tag-hash prefilter in the store read, then the full tag/SQL92
filter): a rejected one is marked done (``skip``, it moves the committed offset), a matching
one is reserved (in flight, or held back behind its FIFO message group). Before the queues, a
concurrent group's copies in the shared ``%RETRY%<group>`` are moved to per-topic retry topics
(``SHARED_RETRY_MOVES_MAX`` per pass; the copy is stored before the shared one is marked done:
a crash duplicates, never loses).

The v2 ReceiveMessage path before this module (issue 26: 19 ``GroupPopState`` methods called
from the processor, 24 returns to a module already left, the store read from three places)::

    grpc.messaging -> grpc.receive_rpc -> processors.consume -> pop.service (check, state)
      -> consume -> processors.pop_cursor (shared retry) -> pop.service -> pop.group_state
      -> pop_cursor -> consume (redeliver callback) -> group_state -> consume
      -> pop.service.read_messages -> store -> consume -> group_state -> processors.retry
      -> consume -> group_state -> consume -> pop.service.read_messages -> store -> consume
      -> pop_cursor.read_at_cursor -> store -> pop_cursor -> group_state -> consume
      -> group_state -> consume -> pop.service (commit, flush, replicated) -> consume
      -> receive_rpc -> messaging

and with it (one call down and one return per long-polling pass; every leaf returns to the
receiver and nothing calls back up)::

    grpc.messaging -> grpc.receive_rpc -> processors.consume (checks, sources, filters)
      -> pop.receiver.PopReceiver.receive
           -> pop.service (writable, state, open/commit queue, journal flush, replicated)
           -> pop.group_state (collect, reserve, skip, redeliver: the marks)
           -> pop.reader.QueueReader -> store (every message read)
           -> processors.retry via RetryWriter -> store (copies of expired deliveries)
      <- consume (counters, retry copies shown under their topic) <- receive_rpc <- messaging

Invariants: used from the broker's event loop only; every pass flushes its journal records
with one write, also when it raises; a message is marked at most once per pass (in flight,
done, or held); nothing filtered out is in flight; a pass returns at most ``batch_size``
messages; the handles of returned messages reached the slave or the wait failed (logged).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from collections.abc import Awaitable, Sequence
from typing import Protocol

from ariane.broker import filters
from ariane.broker.pop import delivery, receipt
from ariane.broker.pop import group_state as pop
from ariane.broker.pop import service as pop_service_mod
from ariane.broker.tables import subscriptions, topic_config
from ariane.common import errors, ids, message, topics
from ariane.store import message_store, queue_read

_log = logging.getLogger(__name__)
P = message.Property
GMS = message_store.GetMessageStatus
EVERYTHING = filters.compile_filter(filters.FilterKind.TAG, "*")
"""The filter of a retry topic (RocketMQ 5 pops it with ``*``: its copies matched the
subscription when first delivered)."""

SHARED_RETRY_MOVES_MAX = 64
"""Most copies of the shared ``%RETRY%<group>`` one receive pass moves to per-topic retry
topics, a count (bounds the extra work of a receive; the rest move on later passes)."""


class RetryWriter(Protocol):
    """Writes retry copies and dead letters (``processors.retry.RetryProcessor``)."""

    def retry_failed(
        self,
        group: subscriptions.SubscriptionGroupConfig,
        stored: message.StoredMessage,
        *,
        failed_attempt: int,
        delay_ms: int | None = None,
    ) -> Awaitable[object]:
        """A retry copy of ``stored`` due after ``delay_ms``, or a dead letter once
        ``failed_attempt`` reached the group's max attempts; raises ``ArianeError``."""
        ...

    def move_to_pop_retry(
        self, group: ids.GroupName, stored: message.StoredMessage
    ) -> Awaitable[object]:
        """Copy a shared ``%RETRY%<group>`` message to its per-topic retry topic now."""
        ...


@dataclasses.dataclass(frozen=True, slots=True)
class Source:
    """One queue a receive pass reads, with the filter its new messages must match.

    Attributes:
        topic: the topic (or the group's retry topic of it).
        queue_id: the queue.
        message_filter: the subscription's filter (``*`` for a retry topic).
    """

    topic: ids.TopicName
    queue_id: ids.QueueId
    message_filter: filters.MessageFilter


@dataclasses.dataclass(frozen=True, slots=True)
class PopRequest:
    """One receive pass.

    Attributes:
        group: the consumer group's config (orderly or not, max attempts, retry policy).
        sources: the queues to read, in order (one may come twice: read again if room is
            left); a source whose topic is missing or unreadable now is passed over.
        batch_size: most messages to return, ≥ 1.
        invisible_ms: invisible duration of delivered messages, ms (> 0).
        shared_retry: the group's shared ``%RETRY%<group>`` to move copies out of first, or
            ``None`` (orderly groups have none).
    """

    group: subscriptions.SubscriptionGroupConfig
    sources: Sequence[Source]
    batch_size: int
    invisible_ms: int
    shared_retry: ids.TopicName | None = None

    def __post_init__(self) -> None:
        assert self.batch_size >= 1, f"batch_size must be >= 1, got {self.batch_size}"
        assert self.invisible_ms > 0, f"invisible_ms must be > 0, got {self.invisible_ms}"


@dataclasses.dataclass(frozen=True, slots=True)
class Popped:
    """One delivered message (as stored) and what the delivery adds to it."""

    stored: message.StoredMessage
    delivery: message.Delivery


class PopReceiver:
    """Receive passes and receipt checks for every group of one broker.

    Args:
        pop_service: group POP states, queue opening, offsets, the POP journal, the reader.
        topic_table: whether a source's topic exists and is readable.
        group_table: the config of a group acking before it received (restored state).
        retrier: writes retry copies and dead letters of expired deliveries.
        broker_name: this broker group's name (in receipt handles).
    """

    def __init__(
        self,
        *,
        pop_service: pop_service_mod.PopService,
        topic_table: topic_config.TopicConfigManager,
        group_table: subscriptions.SubscriptionGroupManager,
        retrier: RetryWriter,
        broker_name: ids.BrokerName,
    ) -> None:
        self._pop = pop_service
        self._reader = pop_service.reader
        self._topics = topic_table
        self._groups = group_table
        self._retry = retrier
        self._broker_name = broker_name

    # -- receive ---------------------------------------------------------------------------

    async def receive(self, request: PopRequest) -> list[Popped]:
        """One receive pass: up to ``batch_size`` messages from the sources, in order, marked
        in flight; expired deliveries met on the way are revived (retry copy, dead letter or,
        orderly, delivered again). Waits for the journal write to reach the slave when it
        delivers (a failed wait still delivers: logged by ``PopService.replicated``).

        Raises:
            HaNotAvailableError: a SYNC_MASTER without its in-sync slaves (nothing changed).
            TooManyRequestsError: too many active groups, or the group's in-flight bounds.
            ServiceUnavailableError: a retry copy could not be stored (it stays due).
        """
        self._pop.check_writable()  # its checkpoints are writes (SYNC_MASTER: replicated)
        state = self._pop.state(request.group)
        out: list[Popped] = []
        try:
            if request.shared_retry is not None and self._readable(request.shared_retry):
                await self._move_shared(state, request, request.shared_retry)
            for source in request.sources:
                if len(out) >= request.batch_size:
                    break
                if self._readable(source.topic):
                    await self._pop_queue(state, request, source, out)
        finally:
            self._pop.flush()
        if out:
            await self._pop.replicated()
        return out

    def _readable(self, topic: ids.TopicName) -> bool:
        config = self._topics.get(topic)
        return config is not None and config.readable

    async def _pop_queue(
        self, state: pop.GroupPopState, request: PopRequest, source: Source, out: list[Popped]
    ) -> None:
        """One queue of one pass: expired deliveries, FIFO-ready ones, then new messages."""
        self._pop.open_queue(state, source.topic, source.queue_id)
        await self._redeliver_due(state, request, source, out)
        self._deliver_fifo_ready(state, request, source, out)
        if self._scan_new(state, request, source, out):
            # restored deliveries whose deadline passed during the restart
            await self._redeliver_due(state, request, source, out)
        self._pop.commit(state, source.topic, source.queue_id)

    async def _redeliver_due(
        self, state: pop.GroupPopState, request: PopRequest, source: Source, out: list[Popped]
    ) -> None:
        """Deliveries whose invisible time ran out: a concurrent group's go to its
        ``%RETRY%`` topic at once (the invisible time was their wait) or to the DLQ; an
        orderly group's are delivered again in place (FIFO keeps them at the head)."""
        topic, queue_id = source.topic, source.queue_id
        dues = state.collect_due(topic, queue_id)
        if not dues:
            return
        found = self._reader.at(topic, queue_id, [d.queue_offset for d in dues])
        for due in dues:
            stored = found.get(due.queue_offset)  # None: deleted by retention, nothing to copy
            if stored is None or due.to_dlq or not state.orderly:
                with state.reviving(topic, queue_id, due.queue_offset) as claimed:
                    if claimed and stored is not None:  # not claimed: another pass copies it
                        await self._retry.retry_failed(
                            request.group, stored, failed_attempt=due.next_attempt - 1, delay_ms=0
                        )
                continue
            if len(out) >= request.batch_size:
                continue
            if not source.message_filter.matches(stored.message.tags, stored.properties):
                continue  # subscription changed; it stays due for a consumer that wants it
            in_flight = state.redeliver(
                topic, queue_id, due.queue_offset, invisible_ms=request.invisible_ms
            )
            out.append(self._popped(stored, in_flight))

    def _deliver_fifo_ready(
        self, state: pop.GroupPopState, request: PopRequest, source: Source, out: list[Popped]
    ) -> None:
        topic, queue_id = source.topic, source.queue_id
        ready = state.fifo_ready(topic, queue_id)[: request.batch_size - len(out)]
        if not ready:
            return
        found = self._reader.at(topic, queue_id, [o for o, _ in ready])
        for offset, group_name in ready:
            stored = found.get(offset)
            in_flight = state.reserve(
                topic, queue_id, offset, invisible_ms=request.invisible_ms, message_group=group_name
            )
            if in_flight is not None and stored is not None:
                out.append(self._popped(stored, in_flight))

    def _scan_new(
        self, state: pop.GroupPopState, request: PopRequest, source: Source, out: list[Popped]
    ) -> bool:
        """Deliver new messages from the scan cursor; returns whether the journal restored
        any of the scanned offsets (they may be due for redelivery now)."""
        topic, queue_id = source.topic, source.queue_id
        budget = min(request.batch_size - len(out), state.scan_budget(topic, queue_id))
        wanted = source.message_filter
        prefilter = (
            wanted.matches_tag_hash
            if isinstance(wanted, (filters.TagFilter, filters.LiteFilter))
            and not wanted.matches_all
            else None
        )
        read = self._read_at_cursor(state, topic, queue_id, budget, prefilter)
        if read is None:
            return False
        start, found, next_offset = read
        restored = False
        for offset in range(start, next_offset):
            queue_offset = ids.QueueOffset(offset)
            if state.adopt_restored(topic, queue_id, queue_offset):
                restored = True
                continue
            stored = found.get(queue_offset)
            if stored is None or not wanted.matches(stored.message.tags, stored.properties):
                state.skip(topic, queue_id, queue_offset)
                continue
            in_flight = state.reserve(
                topic,
                queue_id,
                queue_offset,
                invisible_ms=request.invisible_ms,
                message_group=stored.message.message_group,
                attempt=stored.reconsume_times + 1,
            )
            if in_flight is not None:
                out.append(self._popped(stored, in_flight))
        return restored

    def _read_at_cursor(
        self,
        state: pop.GroupPopState,
        topic: ids.TopicName,
        queue_id: ids.QueueId,
        budget: int,
        prefilter: queue_read.TagFilter | None,
    ) -> tuple[ids.QueueOffset, dict[ids.QueueOffset, message.StoredMessage], int] | None:
        """Up to ``budget`` messages from the group's scan cursor: (cursor, messages by
        offset, the offset after the scanned range), or ``None`` when there is nothing to
        scan now: no budget, or the cursor was moved over a retention gap
        (OFFSET_TOO_SMALL / OFFSET_FOUND_NULL) or back from beyond the queue's end
        (OFFSET_OVERFLOW_BADLY), as RocketMQ's ``PopMessageProcessor`` corrects its start."""
        if budget <= 0:
            return None
        start = state.scan_offset(topic, queue_id)
        result = self._reader.scan(topic, queue_id, start, max_count=budget, prefilter=prefilter)
        if result.status is GMS.OFFSET_TOO_SMALL or result.status is GMS.OFFSET_FOUND_NULL:
            state.skip_to(topic, queue_id, result.next_begin_offset)
            return None
        if result.status is GMS.OFFSET_OVERFLOW_BADLY:
            _log.warning(
                "%s/%d: offset %d beyond max %d; restarting the group there",
                topic,
                queue_id,
                start,
                result.max_offset,
            )
            state.reset_queue(topic, queue_id, result.max_offset)
            return None
        found = {m.queue_offset: m for m in result.messages}
        return start, found, result.next_begin_offset

    async def _move_shared(
        self, state: pop.GroupPopState, request: PopRequest, shared: ids.TopicName
    ) -> None:
        """Move up to ``SHARED_RETRY_MOVES_MAX`` copies of the shared ``%RETRY%<group>`` to
        the per-topic retry topics of their ``RETRY_TOPIC`` and mark them done there (RocketMQ
        5's ``retrieveMessageFromPopRetryTopicV1`` plays the same upgrade role).

        Shared-topic deliveries restored in flight from before a restart are revived first
        (they expire, then become per-topic copies). A copy without ``RETRY_TOPIC`` (written
        there by a producer) names no topic to deliver it under and is skipped with a warning.
        """
        source = Source(shared, ids.QueueId(0), EVERYTHING)
        queue_id = source.queue_id
        self._pop.open_queue(state, shared, queue_id)
        await self._redeliver_due(state, request, source, [])
        budget = min(SHARED_RETRY_MOVES_MAX, state.scan_budget(shared, queue_id))
        read = self._read_at_cursor(state, shared, queue_id, budget, None)
        if read is not None:
            start, found, next_offset = read
            for offset in range(start, next_offset):
                queue_offset = ids.QueueOffset(offset)
                if state.adopt_restored(shared, queue_id, queue_offset):
                    continue
                stored = found.get(queue_offset)
                if stored is not None and P.RETRY_TOPIC in stored.properties:
                    await self._retry.move_to_pop_retry(state.group, stored)
                elif stored is not None:
                    _log.warning("%s/%d: no RETRY_TOPIC; skipped", shared, offset)
                state.skip(shared, queue_id, queue_offset)
        self._pop.commit(state, shared, queue_id)

    def _popped(self, stored: message.StoredMessage, in_flight: delivery.InFlight) -> Popped:
        handle = in_flight.receipt_handle(
            broker_name=self._broker_name, commit_log_offset=stored.commit_log_offset
        )
        origin = None
        if topics.is_dlq_topic(stored.topic):
            props = stored.properties
            origin = (props.get(P.DLQ_ORIGIN_TOPIC, ""), props.get(P.DLQ_ORIGIN_MESSAGE_ID, ""))
        return Popped(
            stored,
            message.Delivery(
                receipt_handle=receipt.encode(handle),
                invisible_ms=in_flight.invisible_ms,
                attempt=in_flight.attempt,
                dead_letter_origin=origin,
            ),
        )

    # -- receipts --------------------------------------------------------------------------

    def _handle(
        self, group: ids.GroupName, topic: str, text: str
    ) -> tuple[receipt.ReceiptHandle, pop.GroupPopState]:
        handle = receipt.decode(text)
        if handle.broker_name != self._broker_name:
            raise errors.InvalidReceiptHandleError(
                f"receipt handle was issued by broker {handle.broker_name!r}, not this one"
            )
        if handle.topic not in (
            topic,
            topics.pop_retry_topic(group, ids.TopicName(topic)),
            topics.retry_topic(group),
        ):
            # a retry copy is acked under the topic it was consumed as (RETRY_TOPIC); one of
            # the shared %RETRY%<group> may still be in flight from before an upgrade
            raise errors.InvalidReceiptHandleError(
                f"receipt handle is for topic {handle.topic!r}, not {topic!r}"
            )
        state = self._pop.existing_state(group) or self._pop.restored_state(self._groups.get(group))
        if state is None:
            raise errors.InvalidReceiptHandleError(
                f"group {group!r} has received nothing from this broker since it started"
            )
        self._pop.adopt_through(state, handle.topic, handle.queue_id, handle.queue_offset)
        return handle, state

    def reread(
        self, topic: ids.TopicName, queue_id: ids.QueueId, queue_offset: ids.QueueOffset
    ) -> message.StoredMessage | None:
        """The stored message at a queue offset (``None`` once retention deleted it)."""
        return self._reader.at(topic, queue_id, [queue_offset]).get(queue_offset)

    def holds(self, group: ids.GroupName, topic: str, receipt_text: str) -> bool:
        """Whether ``receipt_text`` is the current handle of a message in flight (neither
        acked, nor nacked, nor redelivered since it was issued); a bad handle is not held."""
        try:
            handle, state = self._handle(group, topic, receipt_text)
        except errors.InvalidReceiptHandleError:
            return False
        current = state.in_flight(handle.topic, handle.queue_id, handle.queue_offset)
        return current is not None and current.handle_version == handle.handle_version

    def ack(self, group: ids.GroupName, topic: str, receipt_text: str) -> ids.TopicName | None:
        """Ack one delivery (RocketMQ ``AckMessageProcessor``); returns the topic whose parked
        receives may find a message now (an orderly group's next one), else ``None``.

        Raises:
            InvalidReceiptHandleError: the handle does not decode, is not this broker's, or is
                not the message's current handle (stale, already acked, redelivered).
            HaNotAvailableError: as ``receive`` (nothing changed).
        """
        self._pop.check_writable()
        with self._pop.batch():
            handle, state = self._handle(group, topic, receipt_text)
            outcome = state.ack(
                handle.topic, handle.queue_id, handle.queue_offset, handle.handle_version
            )
            _raise_unless_ok(outcome)
            self._pop.commit(state, handle.topic, handle.queue_id)
        return handle.topic if state.orderly else None

    def ack_batch(self) -> contextlib.AbstractContextManager[None]:
        """Around several ``ack`` calls: their journal records are written with one write."""
        return self._pop.batch()

    def change_invisible(
        self, group: ids.GroupName, topic: str, receipt_text: str, invisible_ms: int
    ) -> str:
        """Move a delivery's deadline to now + ``invisible_ms``; returns the new handle.

        Raises:
            InvalidReceiptHandleError: as for ``ack``; the old handle becomes stale.
        """
        self._pop.check_writable()
        with self._pop.batch():
            handle, state = self._handle(group, topic, receipt_text)
            changed = state.change_invisible(
                handle.topic,
                handle.queue_id,
                handle.queue_offset,
                handle.handle_version,
                max(1, invisible_ms),
            )
        _raise_unless_ok(changed.outcome)
        assert changed.in_flight is not None
        renewed = changed.in_flight.receipt_handle(
            broker_name=self._broker_name, commit_log_offset=handle.commit_log_offset
        )
        return receipt.encode(renewed)

    def current(
        self, group: ids.GroupName, topic: str, receipt_text: str
    ) -> tuple[message.StoredMessage | None, int]:
        """The message a current handle names (``None`` if retention deleted it) and the
        attempt it was delivered as.

        Raises:
            InvalidReceiptHandleError: the handle is not the message's current one.
        """
        handle, state = self._handle(group, topic, receipt_text)
        current = state.in_flight(handle.topic, handle.queue_id, handle.queue_offset)
        if current is None or current.handle_version != handle.handle_version:
            raise errors.InvalidReceiptHandleError("receipt handle is stale or already acked")
        return self.reread(handle.topic, handle.queue_id, handle.queue_offset), current.attempt

    async def replicated(self) -> errors.ArianeError | None:
        """Wait for the POP journal records of the last acks or changes to reach the slave
        (SYNC_MASTER); the error to answer them with, or ``None`` (``pop.replica``)."""
        return await self._pop.replicated()


def _raise_unless_ok(outcome: delivery.AckOutcome) -> None:
    if outcome is delivery.AckOutcome.STALE:
        raise errors.InvalidReceiptHandleError(
            "receipt handle is stale: the message was redelivered or its invisible time changed"
        )
    if outcome is delivery.AckOutcome.UNKNOWN:
        raise errors.InvalidReceiptHandleError(
            "receipt handle names no message in flight (already acked, expired into the DLQ, "
            "or reset)"
        )
