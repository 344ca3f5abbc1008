"""The consume path of RocketMQ 5 per-message consumption: receive (pop), ack, change the
invisible duration, forward to the dead-letter queue.

Mirrors the proxy's ``ReceiveMessageActivity``/``AckMessageActivity``/
``ChangeInvisibleDurationActivity``/``ForwardMessageToDLQActivity``: the policy of a receive
over the broker's POP seam, ``pop.receiver.PopReceiver`` (grpc-v2.md §6.4 and §6.5), which owns
the read-and-mark (store reads, filtering, in-flight marks, receipt handles, the POP journal;
see its module docstring for the call graph). This processor keeps the policy:

* which queues a receive reads, in order: every readable queue of the topic on this broker
  (starting with the queue a FIFO consumer names; only that one for an assigned queue) and,
  for a concurrent group, the group's retry queue of that topic, ``%RETRY%<group>_<topic>``
  (RocketMQ 5's ``KeyBuilder.buildPopRetryTopic``; filter ``*``; a copy is delivered under its
  ``RETRY_TOPIC`` with attempt = reconsume times + 1), first on every other pass and last on
  each, so a retry copy is only ever delivered on a receive for its own topic; a concurrent
  group's receive also moves copies out of the shared ``%RETRY%<group>`` (stored before
  per-topic retry topics, or by a classic send-back);
* a PRIORITY topic (RocketMQ 5.4, RIP-80) read by a concurrent group: its levels highest first,
  each level's retry queue before its topic queue, with a fair round-robin pass once its passes
  skipped lower levels for ``ReceiveSettings.priority_aging_ms`` in a row (``pop.priority``:
  the layout, the kept priority of retries and the aging rule); an orderly group reads it as
  any topic;
* the subscription's filter (tag or SQL92) for the topic's queues, ``*`` for retry topics;
* retry and DLQ: expired deliveries become retry copies or dead letters through
  ``retry.RetryProcessor`` (injected into the receiver; past the group's
  ``max_delivery_attempts`` to ``%DLQ%<group>``); a push consumer's nack (``nack``) stores a
  retry copy due after the group's retry policy backoff (the timer delivers it) and marks the
  original done; ``forward_to_dlq``; ``revive`` for the background ``PopReviveService``;
* long polling: with nothing to deliver a receive parks on the topic and the retry topic in
  slices of ``poll_slice_ms`` until a send or a due retry copy notifies it or the polling time
  ends, always answering before the deadline; an orderly group's ack wakes its topic;
* an ack / change must carry this broker's current handle of the message: anything else is
  INVALID_RECEIPT_HANDLE (so push consumers stop retrying it);
* time comes from the injected clock only (long-poll deadlines use its monotonic time).
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Protocol

from ariane.broker import filters
from ariane.broker import settings as broker_settings
from ariane.broker.pop import priority, receiver
from ariane.broker.pop import service as pop_service_mod
from ariane.broker.processors import long_polling, retry
from ariane.broker.tables import subscriptions, topic_config, traffic_stats
from ariane.common import clock, errors, ids, limits, message, topics


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
    traffic: traffic_stats.TrafficStats


class ConsumeProcessor:
    """Receive, ack, change-invisible and DLQ forwarding for every group of one broker.

    Args:
        pop_service: group POP states, queue opening, offsets, the POP journal (the
            receiver's, ``pop.receiver.PopReceiver``).
        topic_table: topic configs (``require``).
        group_table: subscription group configs.
        polling: long polling (park receives, wake them on DLQ appends and FIFO acks).
        counters: totals for the admin API (``messages_out``, ``bytes_out``).
        retrier: writes retry copies (``%RETRY%<group>_<topic>``) and dead letters.
        receive: ``poll_slice_ms``.
        broker_name: this broker group's name (in receipt handles).
        time: the clock (long-poll deadlines use its monotonic time).
    """

    def __init__(
        self,
        *,
        pop_service: pop_service_mod.PopService,
        topic_table: topic_config.TopicConfigManager,
        group_table: subscriptions.SubscriptionGroupManager,
        polling: long_polling.LongPolling,
        counters: ConsumeCounters,
        retrier: retry.RetryProcessor,
        receive: broker_settings.ReceiveSettings,
        broker_name: ids.BrokerName,
        time: clock.Clock,
    ) -> None:
        self._topics = topic_table
        self._groups = group_table
        self._polling = polling
        self._counters = counters
        self._retry = retrier
        self._receive = receive
        self._clock = time
        self._next_queue = 0
        self._retry_first = False
        self._priority = priority.PriorityOrder(receive.priority_aging_ms)
        self._receiver = receiver.PopReceiver(
            pop_service=pop_service,
            topic_table=topic_table,
            group_table=group_table,
            retrier=retrier,
            broker_name=broker_name,
        )

    # -- receive ---------------------------------------------------------------------------

    async def receive(self, request: ReceiveRequest) -> list[Received]:
        """Pop up to ``batch_size`` messages, long polling up to ``poll_s``: one
        ``PopReceiver.receive`` pass per wake-up, parked in between.

        Raises:
            TopicNotFoundError, ForbiddenError, TooManyRequestsError: as the checks say.
            HaNotAvailableError: a SYNC_MASTER without its in-sync slaves (checked by every
                pass: each writes journal records).
        """
        group = self._groups.require(request.group)
        if not group.consume_enable:
            raise errors.ForbiddenError(f"consumer group {group.group!r} may not consume")
        topic = self._topics.require(request.topic)
        if not topic.readable:
            raise errors.ForbiddenError(f"topic {topic.name!r} is not readable on this broker")
        deadline_ms = self._clock.monotonic_ms() + round(request.poll_s * 1000)
        slice_ms = self._receive.poll_slice_ms
        keys = (topic.name, topics.pop_retry_topic(group.group, topic.name))
        while True:
            since = self._polling.snapshot()
            pop_request = self._pop_request(request, group, topic)
            popped = await self._receiver.receive(pop_request)
            if topic.message_type is message.MessageType.PRIORITY and not group.consume_orderly:
                last_level = pop_request.sources[-1].queue_id
                self._priority.passed(
                    group.group,
                    topic.name,
                    skipped=len(popped) >= request.batch_size
                    and popped[-1].stored.queue_id != last_level,
                    now_ms=self._clock.monotonic_ms(),
                )
            remaining_ms = deadline_ms - self._clock.monotonic_ms()
            if popped or remaining_ms <= 0:
                size_bytes = sum(len(p.stored.body) for p in popped)
                self._counters.messages_out += len(popped)
                self._counters.bytes_out += size_bytes
                self._counters.traffic.got(group.group, topic.name, len(popped), size_bytes)
                return [Received(retry.as_consumed(p.stored), p.delivery) for p in popped]
            hold_s = min(slice_ms, remaining_ms) / 1000
            await self._polling.hold_any(keys, hold_s, since=since)

    async def journal_replicated(self) -> errors.ArianeError | None:
        """Wait for the POP journal records of the last acks or changes to reach the slave
        (SYNC_MASTER); the error to answer them with, or ``None`` (``pop.replica``)."""
        return await self._receiver.replicated()

    def _pop_request(
        self,
        request: ReceiveRequest,
        group: subscriptions.SubscriptionGroupConfig,
        topic: topic_config.TopicConfig,
    ) -> receiver.PopRequest:
        """What one receive pass reads, in order. RocketMQ 5 pops the group's retry topic of
        this topic (``%RETRY%<group>_<topic>``, filter ``*``) with every receive: first on
        every other pass (a busy topic cannot starve it), and last (copies this pass wrote
        for expired deliveries go out at once); orderly groups have none, and no shared
        ``%RETRY%<group>`` to move copies out of."""
        shared = None
        if topic.message_type is message.MessageType.PRIORITY and not group.consume_orderly:
            return receiver.PopRequest(
                group=group,
                sources=self._priority_sources(request, group, topic),
                batch_size=request.batch_size,
                invisible_ms=request.invisible_ms,
                shared_retry=topics.retry_topic(group.group),
            )
        queues = [
            receiver.Source(topic.name, queue_id, request.message_filter)
            for queue_id in self._queue_order(request, group, topic)
        ]
        self._retry_first = not self._retry_first
        if not group.consume_orderly:
            shared = topics.retry_topic(group.group)
            pop_retry = receiver.Source(
                topics.pop_retry_topic(group.group, topic.name), ids.QueueId(0), receiver.EVERYTHING
            )
            queues = [pop_retry, *queues, pop_retry] if self._retry_first else [*queues, pop_retry]
        return receiver.PopRequest(
            group=group,
            sources=queues,
            batch_size=request.batch_size,
            invisible_ms=request.invisible_ms,
            shared_retry=shared,
        )

    def _priority_sources(
        self,
        request: ReceiveRequest,
        group: subscriptions.SubscriptionGroupConfig,
        topic: topic_config.TopicConfig,
    ) -> list[receiver.Source]:
        """A PRIORITY topic's queues level by level (``pop.priority``: highest first, or a
        fair pass once the group's passes skipped lower levels for ``aging_ms``), each level's
        retry queue (``%RETRY%<group>_<topic>``, filter ``*``) before its topic queue: a retried
        message
        keeps its priority and, older than the level's new messages, goes first within it. A
        retry topic made before the topic became PRIORITY has fewer queues: its queues above
        the top level it has are not read, and all its copies sit in queue 0 (the lowest)."""
        retry_topic = topics.pop_retry_topic(group.group, topic.name)
        retry_config = self._topics.get(retry_topic)
        retry_queues = (
            topic.read_queue_nums if retry_config is None else retry_config.read_queue_nums
        )
        order = self._priority.levels(
            group.group, topic.name, topic.read_queue_nums, self._clock.monotonic_ms()
        )
        sources: list[receiver.Source] = []
        for level in order:
            if level < retry_queues:
                sources.append(receiver.Source(retry_topic, level, receiver.EVERYTHING))
            sources.append(receiver.Source(topic.name, level, request.message_filter))
        return sources

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

    # -- acknowledgements ------------------------------------------------------------------

    def reread(
        self, topic: ids.TopicName, queue_id: ids.QueueId, queue_offset: ids.QueueOffset
    ) -> message.StoredMessage | None:
        """The stored message at a queue offset (``None`` once retention deleted it)."""
        return self._receiver.reread(topic, queue_id, queue_offset)

    def holds(self, group: ids.GroupName, topic: str, receipt_text: str) -> bool:
        """Whether ``receipt_text`` is the current handle of a message in flight (neither
        acked, nor nacked, nor redelivered since it was issued); a bad handle is not held."""
        return self._receiver.holds(group, topic, receipt_text)

    def ack(self, group: ids.GroupName, topic: str, receipt_text: str) -> None:
        """Ack one delivery (RocketMQ ``AckMessageProcessor``); an orderly group's next
        message may be free then: parked receives of its topic wake.

        Raises:
            InvalidReceiptHandleError: the handle does not decode, is not this broker's, or is
                not the message's current handle (stale, already acked, redelivered).
        """
        freed = self._receiver.ack(group, topic, receipt_text)
        if freed is not None:
            self._polling.notify(freed)

    def ack_batch(self) -> contextlib.AbstractContextManager[None]:
        """Around several ``ack`` calls of one AckMessage: their journal records are written
        with one write when the batch ends."""
        return self._receiver.ack_batch()

    def change_invisible(
        self, group: ids.GroupName, topic: str, receipt_text: str, invisible_ms: int
    ) -> str:
        """Move a delivery's deadline to now + ``invisible_ms``; returns the new handle.

        Raises:
            InvalidReceiptHandleError: as for ``ack``; the old handle becomes stale.
        """
        return self._receiver.change_invisible(group, topic, receipt_text, invisible_ms)

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
        stored, attempt = self._receiver.current(group, topic, receipt_text)
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
        stored, attempt = self._receiver.current(group, topic, receipt_text)
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
