"""The consume path of RocketMQ 5 per-message consumption: receive (pop), ack, change the
invisible duration, forward to the dead-letter queue.

Mirrors the proxy's ``ReceiveMessageActivity``/``AckMessageActivity``/
``ChangeInvisibleDurationActivity``/``ForwardMessageToDLQActivity`` over the broker's POP
service (grpc-v2.md §6.4 and §6.5): ``broker.pop_service.PopService`` owns the group states
(``broker.pop.GroupPopState``), queue opening, offsets and the POP journal; this processor
reads messages and decides what to deliver. Its dependencies are passed in explicitly:

* a receive looks at every readable queue of the topic on this broker (starting with the
  queue a FIFO consumer names) and, for a concurrent group, at the group's retry queue of that
  topic, ``%RETRY%<group>_<topic>`` (RocketMQ 5's ``KeyBuilder.buildPopRetryTopic``; filter
  ``*``; a copy is delivered under its ``RETRY_TOPIC`` with attempt = reconsume times + 1), so
  a retry copy is only ever delivered on a receive for its own topic: first deliveries whose
  invisible time ran out (a concurrent group's become retry copies through
  ``retry.RetryProcessor``, an orderly group's are redelivered in place with ``attempt + 1``;
  past the group's ``max_delivery_attempts`` they go to ``%DLQ%<group>``), then FIFO messages
  that became free, then new messages from the scan cursor, filtered by tag hash then by the
  full tag/SQL92 filter;
* copies a concurrent group has in the shared ``%RETRY%<group>`` (stored before per-topic retry
  topics, or by a classic send-back) are moved by any receive of the group to the per-topic
  retry topic of their ``RETRY_TOPIC`` (``pop_cursor.SharedRetryMover``), where receives of
  that topic deliver them; one still in flight from before a restart becomes a per-topic copy
  on expiry;
* a push consumer's nack (``nack``) stores a retry copy due after the group's retry policy
  backoff (the timer delivers it) and marks the original done;
* with nothing to deliver it parks on the topic and the retry topic (long polling) in slices
  of ``poll_slice_ms`` until a send or a due retry copy notifies it or the polling time ends,
  always answering before the deadline;
* an ack / change must carry this broker's current handle of the message: anything else is
  INVALID_RECEIPT_HANDLE (so push consumers stop retrying it);
* the group's committed offset (lowest offset not yet done) is mirrored into the offset table
  after every ack, skip and dead-letter;
* the POP journal gets one write per receive pass and per ack batch (``PopService.flush``);
  after a restart a restored delivery is taken back in flight as the scanner reaches it
  (``GroupPopState.adopt_restored``) and redelivered with its next attempt when due;
* time comes from the injected clock only (long-poll deadlines use its monotonic time).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from typing import Protocol

from ariane.broker import filters
from ariane.broker import settings as broker_settings
from ariane.broker.pop import delivery, receipt
from ariane.broker.pop import group_state as pop
from ariane.broker.pop import service as pop_service_mod
from ariane.broker.processors import long_polling, pop_cursor, retry
from ariane.broker.tables import subscriptions, topic_config
from ariane.common import clock, errors, ids, limits, message, topics
from ariane.store import message_store

_log = logging.getLogger(__name__)
P = message.Property
GMS = message_store.GetMessageStatus
_EVERYTHING = filters.compile_filter(filters.FilterKind.TAG, "*")


@dataclasses.dataclass(frozen=True, slots=True)
class Received:
    """One delivered message and what the delivery adds to it."""

    stored: message.StoredMessage
    delivery: message.Delivery


@dataclasses.dataclass(frozen=True, slots=True)
class ReceiveRequest:
    """A validated receive.

    Attributes:
        group: the consumer group.
        topic: the topic.
        queue_id: the queue the client named (-1 or any id for non-FIFO groups).
        message_filter: the subscription's filter.
        batch_size: most messages to return, 1..32.
        invisible_ms: invisible duration of delivered messages, ms.
        poll_s: how long to wait for messages before answering empty, seconds.
        assigned_queue: the named queue was assigned to the client by QueryAssignment (a push
            consumer's receive loop): a FIFO receive then reads that queue only.
    """

    group: ids.GroupName
    topic: ids.TopicName
    queue_id: int
    message_filter: filters.MessageFilter
    batch_size: int
    invisible_ms: int
    poll_s: float
    assigned_queue: bool = False


def check_invisible_ms(invisible_ms: int, *, minimum_ms: int) -> int:
    """Validate an invisible duration (proxy ``validateInvisibleTime``).

    Raises:
        IllegalInvisibleTimeError: below ``minimum_ms`` or above 12 h.
    """
    if not minimum_ms <= invisible_ms <= limits.INVISIBLE_DURATION_MS_MAX:
        raise errors.IllegalInvisibleTimeError(
            f"invisible duration {invisible_ms} ms is outside {minimum_ms}.."
            f"{limits.INVISIBLE_DURATION_MS_MAX} ms"
        )
    return invisible_ms


class ConsumeCounters(Protocol):
    """The totals the consume path adds to (``runtime.Counters``)."""

    messages_out: int
    bytes_out: int


class ConsumeProcessor:
    """Receive, ack, change-invisible and DLQ forwarding for every group of one broker.

    Args:
        pop_service: group POP states, queue opening, offsets, the POP journal.
        store: message reads and DLQ appends.
        topic_table: topic configs (``require``, ``ensure_dlq_topic``).
        group_table: subscription group configs.
        polling: long polling (park receives, wake them on DLQ appends and FIFO acks).
        counters: totals for the admin API (``messages_out``, ``bytes_out``).
        retrier: writes retry copies (``%RETRY%<group>_<topic>``) and dead letters.
        receive: ``poll_slice_ms``, ``message_bytes_max``.
        broker_name: this broker group's name (in receipt handles).
        time: the clock (long-poll deadlines use its monotonic time).
    """

    def __init__(
        self,
        *,
        pop_service: pop_service_mod.PopService,
        store: message_store.MessageStore,
        topic_table: topic_config.TopicConfigManager,
        group_table: subscriptions.SubscriptionGroupManager,
        polling: long_polling.LongPolling,
        counters: ConsumeCounters,
        retrier: retry.RetryProcessor,
        receive: broker_settings.ReceiveSettings,
        broker_name: ids.BrokerName,
        time: clock.Clock,
    ) -> None:
        self._pop = pop_service
        self._store = store
        self._topics = topic_table
        self._groups = group_table
        self._polling = polling
        self._counters = counters
        self._retry = retrier
        self._receive = receive
        self._broker_name = broker_name
        self._clock = time
        self._next_queue = 0
        self._retry_first = False
        self._shared_retry = pop_cursor.SharedRetryMover(
            pop_service=pop_service,
            store=store,
            topic_table=topic_table,
            retrier=retrier,
            max_bytes=receive.message_bytes_max,
        )

    # -- receive ---------------------------------------------------------------------------

    async def receive(self, request: ReceiveRequest) -> list[Received]:
        """Pop up to ``batch_size`` messages, long polling up to ``poll_s``.

        Raises:
            TopicNotFoundError, ForbiddenError, TooManyRequestsError: as the checks say.
        """
        group = self._groups.require(request.group)
        if not group.consume_enable:
            raise errors.ForbiddenError(f"consumer group {group.group!r} may not consume")
        topic = self._topics.require(request.topic)
        if not topic.readable:
            raise errors.ForbiddenError(f"topic {topic.name!r} is not readable on this broker")
        self._pop.check_writable()  # its checkpoints are writes (SYNC_MASTER: replicated)
        deadline_ms = self._clock.monotonic_ms() + round(request.poll_s * 1000)
        slice_ms = self._receive.poll_slice_ms
        keys = (topic.name, topics.pop_retry_topic(group.group, topic.name))
        while True:
            since = self._polling.snapshot()
            found = await self._pop_once(request, group, topic)
            remaining_ms = deadline_ms - self._clock.monotonic_ms()
            if found or remaining_ms <= 0:
                if found:  # the handles must reach the slave; a failed wait still delivers
                    await self._pop.replicated()
                return found
            hold_s = min(slice_ms, remaining_ms) / 1000
            await self._polling.hold_any(keys, hold_s, since=since)

    async def journal_replicated(self) -> errors.ArianeError | None:
        """Wait for the POP journal records of the last acks or changes to reach the slave
        (SYNC_MASTER); the error to answer them with, or ``None`` (``pop.replica``)."""
        return await self._pop.replicated()

    async def _pop_once(
        self,
        request: ReceiveRequest,
        group: subscriptions.SubscriptionGroupConfig,
        topic: topic_config.TopicConfig,
    ) -> list[Received]:
        state = self._pop.state(group)
        out: list[Received] = []
        # RocketMQ 5 pops the group's retry topic of this topic with every receive: first on
        # every other receive (a busy topic cannot starve it), and last (copies this pass
        # wrote for expired deliveries go out at once)
        self._retry_first = not self._retry_first
        try:
            await self._shared_retry.move(
                state,
                group,
                lambda shared: self._redeliver_due(
                    state,
                    group,
                    dataclasses.replace(request, topic=shared, message_filter=_EVERYTHING),
                    ids.QueueId(0),
                    [],
                ),
            )
            if self._retry_first:
                await self._pop_retry(state, group, request, out)
            for queue_id in self._queue_order(request, group, topic):
                if len(out) >= request.batch_size:
                    break
                await self._pop_queue(state, group, request, queue_id, out)
            await self._pop_retry(state, group, request, out)
        finally:
            self._pop.flush()
        self._counters.messages_out += len(out)
        self._counters.bytes_out += sum(len(r.stored.body) for r in out)
        return out

    async def _pop_retry(
        self,
        state: pop.GroupPopState,
        group: subscriptions.SubscriptionGroupConfig,
        request: ReceiveRequest,
        out: list[Received],
    ) -> None:
        """The group's retry queue of the receive's topic (``%RETRY%<group>_<topic>``), read
        with the filter ``*`` as RocketMQ 5 does (its copies matched the subscription when
        first delivered); orderly groups have none."""
        retry_topic = self._topics.get(topics.pop_retry_topic(group.group, request.topic))
        if group.consume_orderly or retry_topic is None or not retry_topic.readable:
            return
        if len(out) < request.batch_size:
            retry_request = dataclasses.replace(
                request, topic=retry_topic.name, message_filter=_EVERYTHING
            )
            await self._pop_queue(state, group, retry_request, ids.QueueId(0), out)

    async def _pop_queue(
        self,
        state: pop.GroupPopState,
        group: subscriptions.SubscriptionGroupConfig,
        request: ReceiveRequest,
        queue_id: ids.QueueId,
        out: list[Received],
    ) -> None:
        """One queue of one receive: expired deliveries, FIFO-ready ones, then new messages."""
        self._pop.open_queue(state, request.topic, queue_id)
        await self._redeliver_due(state, group, request, queue_id, out)
        self._deliver_fifo_ready(state, request, queue_id, out)
        if self._scan_new(state, request, queue_id, out):
            # restored deliveries whose deadline passed during the restart
            await self._redeliver_due(state, group, request, queue_id, out)
        self._pop.commit(state, request.topic, queue_id)

    def _queue_order(
        self,
        request: ReceiveRequest,
        group: subscriptions.SubscriptionGroupConfig,
        topic: topic_config.TopicConfig,
    ) -> list[ids.QueueId]:
        """Queues to pop from, in order: every readable queue of the topic on this broker.

        The Java proxy pops by broker for non-FIFO groups and by the named queue for FIFO ones.
        Here FIFO order is kept per message group by ``GroupPopState`` whichever queue a receive
        names, so a FIFO receive starts at the queue it names and then looks at the others:
        the official SimpleConsumer names queues round-robin, and a receive that named a
        drained queue would otherwise park for its whole long poll while other queues still
        hold deliverable groups. A receive of an assigned queue (a push consumer's) reads that
        queue only, as the proxy does: the group's members share its queues by assignment.
        """
        count = topic.read_queue_nums
        if group.consume_orderly and request.assigned_queue and 0 <= request.queue_id < count:
            return [ids.QueueId(request.queue_id)]
        if group.consume_orderly and 0 <= request.queue_id < count:
            first = request.queue_id
        else:
            self._next_queue = (self._next_queue + 1) % count
            first = self._next_queue
        return [ids.QueueId((first + i) % count) for i in range(count)]

    async def _redeliver_due(
        self,
        state: pop.GroupPopState,
        group: subscriptions.SubscriptionGroupConfig,
        request: ReceiveRequest,
        queue_id: ids.QueueId,
        out: list[Received],
    ) -> None:
        """Deliveries whose invisible time ran out: a concurrent group's go to its
        ``%RETRY%`` topic at once (the invisible time was their wait) or to the DLQ; an
        orderly group's are delivered again in place (FIFO keeps them at the head)."""
        dues = state.collect_due(request.topic, queue_id)
        if not dues:
            return
        found = self._pop.read_messages(request.topic, queue_id, [d.queue_offset for d in dues])
        for due in dues:
            stored = found.get(due.queue_offset)  # None: deleted by retention, nothing to copy
            if stored is None or due.to_dlq or not state.orderly:
                with state.reviving(request.topic, queue_id, due.queue_offset) as claimed:
                    if claimed and stored is not None:  # not claimed: another pass copies it
                        await self._retry.retry_failed(
                            group, stored, failed_attempt=due.next_attempt - 1, delay_ms=0
                        )
                continue
            if len(out) >= request.batch_size:
                continue
            if not request.message_filter.matches(stored.message.tags, stored.properties):
                continue  # subscription changed; it stays due for a consumer that wants it
            in_flight = state.redeliver(
                request.topic, queue_id, due.queue_offset, invisible_ms=request.invisible_ms
            )
            out.append(self._received(stored, in_flight))

    def _deliver_fifo_ready(
        self,
        state: pop.GroupPopState,
        request: ReceiveRequest,
        queue_id: ids.QueueId,
        out: list[Received],
    ) -> None:
        ready = state.fifo_ready(request.topic, queue_id)[: request.batch_size - len(out)]
        if not ready:
            return
        found = self._pop.read_messages(request.topic, queue_id, [o for o, _ in ready])
        for offset, group_name in ready:
            stored = found.get(offset)
            in_flight = state.reserve(
                request.topic,
                queue_id,
                offset,
                invisible_ms=request.invisible_ms,
                message_group=group_name,
            )
            if in_flight is not None and stored is not None:
                out.append(self._received(stored, in_flight))

    def _scan_new(
        self,
        state: pop.GroupPopState,
        request: ReceiveRequest,
        queue_id: ids.QueueId,
        out: list[Received],
    ) -> bool:
        """Deliver new messages from the scan cursor; returns whether the journal restored
        any of the scanned offsets (they may be due for redelivery now)."""
        budget = min(request.batch_size - len(out), state.scan_budget(request.topic, queue_id))
        tag_filter = request.message_filter
        prefilter = (
            tag_filter.matches_tag_hash
            if isinstance(tag_filter, filters.TagFilter) and not tag_filter.matches_all
            else None
        )
        read = pop_cursor.read_at_cursor(
            self._store,
            state,
            request.topic,
            queue_id,
            budget,
            prefilter,
            max_bytes=self._receive.message_bytes_max,
        )
        if read is None:
            return False
        start, result = read
        found = {m.queue_offset: m for m in result.messages}
        restored = False
        for offset in range(start, result.next_begin_offset):
            queue_offset = ids.QueueOffset(offset)
            if state.adopt_restored(request.topic, queue_id, queue_offset):
                restored = True
                continue
            stored = found.get(queue_offset)
            if stored is None or not tag_filter.matches(stored.message.tags, stored.properties):
                state.skip(request.topic, queue_id, queue_offset)
                continue
            in_flight = state.reserve(
                request.topic,
                queue_id,
                queue_offset,
                invisible_ms=request.invisible_ms,
                message_group=stored.message.message_group,
                attempt=stored.reconsume_times + 1,
            )
            if in_flight is not None:
                out.append(self._received(stored, in_flight))
        return restored

    def _received(self, stored: message.StoredMessage, in_flight: delivery.InFlight) -> Received:
        handle = in_flight.receipt_handle(
            broker_name=self._broker_name, commit_log_offset=stored.commit_log_offset
        )
        origin = None
        if topics.is_dlq_topic(stored.topic):
            props = stored.properties
            origin = (props.get(P.DLQ_ORIGIN_TOPIC, ""), props.get(P.DLQ_ORIGIN_MESSAGE_ID, ""))
        delivery = message.Delivery(
            receipt_handle=receipt.encode(handle),
            invisible_ms=in_flight.invisible_ms,
            attempt=in_flight.attempt,
            dead_letter_origin=origin,
        )
        return Received(retry.as_consumed(stored), delivery)

    # -- acknowledgements ------------------------------------------------------------------

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
        return self._pop.read_messages(topic, queue_id, [queue_offset]).get(queue_offset)

    def holds(self, group: ids.GroupName, topic: str, receipt_text: str) -> bool:
        """Whether ``receipt_text`` is the current handle of a message in flight (neither
        acked, nor nacked, nor redelivered since it was issued); a bad handle is not held."""
        try:
            handle, state = self._handle(group, topic, receipt_text)
        except errors.InvalidReceiptHandleError:
            return False
        current = state.in_flight(handle.topic, handle.queue_id, handle.queue_offset)
        return current is not None and current.handle_version == handle.handle_version

    def ack(self, group: ids.GroupName, topic: str, receipt_text: str) -> None:
        """Ack one delivery (RocketMQ ``AckMessageProcessor``).

        Raises:
            InvalidReceiptHandleError: the handle does not decode, is not this broker's, or is
                not the message's current handle (stale, already acked, redelivered).
        """
        self._pop.check_writable()
        with self._pop.batch():
            handle, state = self._handle(group, topic, receipt_text)
            outcome = state.ack(
                handle.topic, handle.queue_id, handle.queue_offset, handle.handle_version
            )
            _raise_unless_ok(outcome)
            self._pop.commit(state, handle.topic, handle.queue_id)
        if state.orderly:  # the group's next message may be free now: wake parked receives
            self._polling.notify(handle.topic)

    def ack_batch(self) -> contextlib.AbstractContextManager[None]:
        """Around several ``ack`` calls of one AckMessage: their journal records are written
        with one write when the batch ends."""
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

    async def nack(
        self,
        group: ids.GroupName,
        topic: str,
        receipt_text: str,
        invisible_ms: int,
        *,
        push: bool = True,
    ) -> str:
        """ChangeInvisibleDuration as the nack of a failed attempt (a push consumer's, sent
        after its listener's FAILURE with the retry policy's backoff).

        Mirrors RocketMQ 5's revive of a nacked message: a concurrent group's message is
        copied to ``%RETRY%<group>_<topic>`` due after the group's retry-policy backoff (or to
        ``%DLQ%<group>`` after its last attempt) and the original is done, so the attempt
        count lives in the stored copy. An orderly group's message, or any message when
        ``push`` is false (a simple consumer extending its time), stays in place with its
        deadline moved (``change_invisible``).

        Returns:
            the receipt handle to answer with (a nacked one acks nothing any more).

        Raises:
            InvalidReceiptHandleError: as for ``ack``.
            ServiceUnavailableError, TooManyRequestsError: the copy could not be stored;
                the message stays in flight under its handle.
        """
        config = self._groups.require(group)
        if config.consume_orderly or not push:
            return self.change_invisible(group, topic, receipt_text, invisible_ms)
        stored, attempt = self._current(group, topic, receipt_text)
        if stored is not None:
            await self._retry.retry_failed(config, stored, failed_attempt=attempt)
        self.ack(group, topic, receipt_text)
        return receipt_text

    async def forward_to_dlq(self, group: ids.GroupName, topic: str, receipt_text: str) -> None:
        """Copy a delivered message to ``%DLQ%<group>`` and ack it (ForwardMessageToDLQ).

        Raises:
            InvalidReceiptHandleError: as for ``ack``.
            ServiceUnavailableError: the DLQ append failed; the message stays in flight.
        """
        stored, attempt = self._current(group, topic, receipt_text)
        if stored is not None:
            await self._retry.dead_letter(group, stored, attempts=attempt)
        self.ack(group, topic, receipt_text)

    async def revive(
        self, group: ids.GroupName, stored: message.StoredMessage, *, failed_attempt: int
    ) -> None:
        """``pop_service.Reviver``: a delivery expired with no receive to notice it (the
        background ``PopReviveService``): retry copy or dead letter, as a receive would."""
        config = self._groups.get(group) or subscriptions.SubscriptionGroupConfig(group)
        await self._retry.retry_failed(config, stored, failed_attempt=failed_attempt, delay_ms=0)

    def _current(
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
        found = self._pop.read_messages(handle.topic, handle.queue_id, [handle.queue_offset])
        return found.get(handle.queue_offset), current.attempt


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
