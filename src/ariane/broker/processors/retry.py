"""``RetryProcessor``: a failed delivery becomes a stored retry message or a dead letter.

Protocol-neutral home of RocketMQ's "send back" (``AbstractSendMessageProcessor
.consumerSendMsgBack`` for the classic protocol, ``PopReviveService.reviveRetry`` and the
proxy's ``ForwardMessageToDLQActivity`` for RocketMQ 5). The gRPC consume path calls it when a
push consumer nacks, when an invisible time runs out unacked, and for
ForwardMessageToDeadLetterQueue; the classic Remoting adapter calls ``send_msg_back`` for
CONSUMER_SEND_MSG_BACK (36).

Two retry topics, as in RocketMQ 5: a RocketMQ 5 (POP, gRPC) group's copies go to one retry
topic per (group, topic), ``%RETRY%<group>_<topic>`` (``KeyBuilder.buildPopRetryTopic``), so a
receive for one topic reads only that topic's copies; a classic consumer's send-back goes to
``%RETRY%<group>``, which classic consumers subscribe to as a topic. Copies a POP group left in
``%RETRY%<group>`` before per-topic retry topics existed are moved to their per-topic topic
(``move_to_pop_retry``) when a receive of the group reads them. A POP retry copy of a PRIORITY
topic's message keeps its priority: the retry topic has one queue per level and the copy goes
to its level's queue (``pop.priority``; RocketMQ loses it, apache/rocketmq#10350).

Record layout of what it writes (remoting.md "Retry and DLQ"):

============================  ================================================================
retry copy                    DLQ copy
============================  ================================================================
topic ``%RETRY%<group>_<t>``  topic ``%DLQ%<group>``
(POP) or ``%RETRY%<group>``
(classic send-back)
queue 0 (1 queue, perm 6;     queue 0 (1 queue, perm 6: readable, so operators can read it)
a PRIORITY topic's: its
level's of one per level)
RECONSUMETIMES = failed       RECONSUMETIMES = attempts (one above the last delivery's
attempt (= reconsume + 1)     reconsume times)
``RETRY_TOPIC`` = origin      ``RETRY_TOPIC`` = origin topic, ``DLQ_ORIGIN_TOPIC`` = origin
topic (set once, kept)        topic, ``DLQ_ORIGIN_MESSAGE_ID`` = origin message id
``ORIGIN_MESSAGE_ID``,        ``ORIGIN_MESSAGE_ID``, ``UNIQ_KEY`` kept
``UNIQ_KEY`` kept
parked in the timer topic     stored at once
(or a delay level) until due
============================  ================================================================

Invariants: the attempt count lives in the stored message (RECONSUMETIMES), so it survives a
restart or a SIGKILL with the message itself; a retry copy is stored (parked) before the caller
marks the original done, so a crash in between duplicates a delivery, never loses one; the
retry and DLQ topics are created on demand and ``route_changed`` is set so registration tells
the name servers.
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import logging
import zlib
from collections.abc import Callable, Hashable
from typing import Protocol

from ariane.broker.pop import priority
from ariane.broker.tables import subscriptions, topic_config, traffic_stats
from ariane.common import clock, errors, ids, message, topics
from ariane.store import commit_log, message_store

_log = logging.getLogger(__name__)
P = message.Property

SEND_BACK_LEVEL_BASE = 3
"""Classic send-back with delay level 0: level = 3 + reconsume times (10 s, 30 s, 1 m …)."""

DEAD_LETTERS_READ_MAX = 1_000
"""Most dead letters one list or resend reads from ``%DLQ%<group>``, a count."""

DEAD_LETTER_READ_BYTES_MAX = 4 * 1024 * 1024
"""Most bytes one read of ``%DLQ%<group>`` returns."""

_TIMER_PROPERTIES = (P.DELAY_TIME_LEVEL, P.REAL_TOPIC, P.REAL_QUEUE_ID, P.TIMER_DELIVER_MS)
"""Properties of an earlier park that a copy must not inherit (they are set afresh)."""

_RETRY_PROPERTIES = (
    P.RETRY_TOPIC,
    P.ORIGIN_MESSAGE_ID,
    P.DLQ_ORIGIN_TOPIC,
    P.DLQ_ORIGIN_MESSAGE_ID,
)
"""What a resent dead letter drops: it starts over as the message its producer sent."""


class Scheduler(Protocol):
    """Parks a message until due (``schedule.service.ScheduleService``)."""

    def park(
        self,
        request: commit_log.AppendRequest,
        *,
        delivery_ms: int | None,
        now_ms: int | None = None,
    ) -> commit_log.AppendRequest:
        """The request rewritten into the timer topic, or unchanged when due within the
        timer's precision of ``now_ms`` (default: the clock now); raises
        ``TooManyRequestsError`` when the wheel is full."""
        ...

    def park_level(self, request: commit_log.AppendRequest, level: int) -> commit_log.AppendRequest:
        """The request rewritten into ``SCHEDULE_TOPIC_XXXX`` for delay level ``level``."""
        ...


class Notifier(Protocol):
    """Wakes parked receives of a key (``long_polling.LongPolling``)."""

    def notify(self, key: Hashable) -> int:
        """Record new messages for ``key``; returns how many receives were woken."""
        ...


class RetryCounters(Protocol):
    """The totals the retry path adds to (``runtime.Counters``)."""

    sent_to_dlq: int
    traffic: traffic_stats.TrafficStats


class Destination(enum.Enum):
    """Where a failed message went."""

    RETRY = "RETRY"
    DLQ = "DLQ"


@dataclasses.dataclass(frozen=True, slots=True)
class SendBackResult:
    """What ``retry_failed``/``send_msg_back`` did.

    Attributes:
        destination: RETRY (a copy waits in a retry topic) or DLQ.
        topic: the topic the copy was written to (``%RETRY%<group>_<topic>`` for a POP
            group, ``%RETRY%<group>`` for a classic send-back, or ``%DLQ%<group>``).
        reconsume_times: RECONSUMETIMES of the copy.
        due_ms: when the retry copy becomes deliverable, ms since the epoch (``None`` for
            the DLQ).
    """

    destination: Destination
    topic: ids.TopicName
    reconsume_times: int
    due_ms: int | None


@dataclasses.dataclass(frozen=True, slots=True)
class DeadLetter:
    """One message of ``%DLQ%<group>``.

    Attributes:
        stored: the letter as stored in the DLQ.
        origin_topic: the topic it was first sent to.
        origin_message_id: its message id there (the letter keeps it as UNIQ_KEY).
        attempts: deliveries before it was given up (the letter's RECONSUMETIMES).
    """

    stored: message.StoredMessage
    origin_topic: ids.TopicName
    origin_message_id: ids.MessageId
    attempts: int


@dataclasses.dataclass(frozen=True, slots=True)
class Resent:
    """A dead letter written back to its origin topic.

    Attributes:
        message_id: its message id (unchanged).
        topic: the origin topic.
        queue_id: the queue it was written to.
        queue_offset: its offset there.
    """

    message_id: ids.MessageId
    topic: ids.TopicName
    queue_id: ids.QueueId
    queue_offset: ids.QueueOffset


def origin_topic(stored: message.StoredMessage) -> ids.TopicName:
    """The topic a consumer sees: ``RETRY_TOPIC`` for a retry copy, else the stored topic."""
    return ids.TopicName(stored.properties.get(P.RETRY_TOPIC, stored.topic))


def origin_message_id(stored: message.StoredMessage) -> ids.MessageId:
    """The id of the message first sent: ``ORIGIN_MESSAGE_ID`` when set, else its UNIQ_KEY."""
    found = stored.properties.get(P.ORIGIN_MESSAGE_ID)
    return ids.MessageId(found) if found else message.message_id_of(stored)


def as_consumed(stored: message.StoredMessage) -> message.StoredMessage:
    """``stored`` with the topic its consumers subscribed to (RocketMQ's proxy restores the
    topic of a ``%RETRY%`` message from ``RETRY_TOPIC``); other messages are returned as is."""
    if not topics.is_retry_topic(stored.topic):
        return stored
    consumed = dataclasses.replace(stored.message, topic=origin_topic(stored))
    return dataclasses.replace(stored, message=consumed)


class RetryProcessor:
    """Writes retry copies and dead letters for every group of one broker.

    Args:
        store: where the copies are appended (and a classic send-back's message is read).
        topic_table: creates the retry topics and ``%DLQ%<group>`` on demand.
        group_table: the group of a classic send-back (``require``: auto-created if allowed).
        schedule: parks retry copies until their backoff passed.
        polling: woken for a copy stored in its topic at once (a parked retry copy wakes
            receives when the schedule writes it to its retry topic).
        counters: ``sent_to_dlq``.
        route_changed: set when a retry or DLQ topic is created (re-registration).
        time: the wall clock of due times.
    """

    def __init__(
        self,
        *,
        store: message_store.MessageStore,
        topic_table: topic_config.TopicConfigManager,
        group_table: subscriptions.SubscriptionGroupManager,
        schedule: Scheduler,
        polling: Notifier,
        counters: RetryCounters,
        route_changed: asyncio.Event,
        time: clock.Clock,
    ) -> None:
        self._store = store
        self._topics = topic_table
        self._groups = group_table
        self._schedule = schedule
        self._polling = polling
        self._counters = counters
        self._route_changed = route_changed
        self._clock = time

    # -- RocketMQ 5 (pop revive, nack, ForwardMessageToDeadLetterQueue) -----------------------

    async def retry_failed(
        self,
        group: subscriptions.SubscriptionGroupConfig,
        stored: message.StoredMessage,
        *,
        failed_attempt: int,
        delay_ms: int | None = None,
    ) -> SendBackResult:
        """Delivery attempt ``failed_attempt`` of ``stored`` failed (nack or invisible time out).

        Mirrors ``PopReviveService.reviveRetry`` with the group's retry policy: when
        ``failed_attempt`` reached the group's ``max_delivery_attempts`` the message goes to
        ``%DLQ%<group>``, else a copy with RECONSUMETIMES = ``failed_attempt`` is parked until
        ``delay_ms`` (default: the policy's ``next_delay_ms(failed_attempt)``) has passed; it
        then lands in ``%RETRY%<group>_<origin topic>`` (``KeyBuilder.buildPopRetryTopic``).

        Raises:
            ServiceUnavailableError: the store refused the copy.
            TooManyRequestsError: the timer wheel is full.
        """
        assert failed_attempt >= 1, f"failed_attempt must be >= 1, got {failed_attempt}"
        if failed_attempt >= group.max_delivery_attempts:
            return await self.dead_letter(group.group, stored, attempts=failed_attempt)
        if delay_ms is None:
            delay_ms = group.effective_retry_policy().next_delay_ms(failed_attempt)
        now_ms = self._clock.now_ms()
        due_ms = now_ms + max(0, delay_ms)
        request = self._retry_copy(group.group, stored, reconsume_times=failed_attempt, pop=True)
        # one clock reading: a 1 s backoff (= the timer's precision) must not turn into "now"
        parked = self._schedule.park(request, delivery_ms=due_ms, now_ms=now_ms)
        return await self._put(parked, Destination.RETRY, due_ms)

    async def move_to_pop_retry(
        self, group: ids.GroupName, stored: message.StoredMessage
    ) -> SendBackResult:
        """Copy ``stored``, a due copy of ``%RETRY%<group>``, into the POP retry topic of its
        origin (``%RETRY%<group>_<RETRY_TOPIC>``) at once, keeping its RECONSUMETIMES.

        The upgrade path of per-topic retry topics (RocketMQ reads its V1 retry topics
        alongside V2 ones with ``retrieveMessageFromPopRetryTopicV1``): a receive reads the
        shared topic and moves every copy to where receives of its own topic find it.

        Raises:
            ServiceUnavailableError: the store refused the copy.
        """
        request = self._retry_copy(group, stored, reconsume_times=stored.reconsume_times, pop=True)
        return await self._put(request, Destination.RETRY, self._clock.now_ms())

    async def dead_letter(
        self, group: ids.GroupName, stored: message.StoredMessage, *, attempts: int
    ) -> SendBackResult:
        """Append a copy of ``stored`` to ``%DLQ%<group>`` (RocketMQ's send back to the DLQ,
        the proxy's ``ForwardMessageToDLQActivity``) with RECONSUMETIMES = ``attempts``.

        Raises:
            ServiceUnavailableError: the store refused the append.
        """
        dlq = self._ensure(topics.dlq_topic(group), lambda: self._topics.ensure_dlq_topic(group))
        props = _copied_properties(stored)
        props[P.DLQ_ORIGIN_TOPIC] = props[P.RETRY_TOPIC]
        props[P.DLQ_ORIGIN_MESSAGE_ID] = props[P.ORIGIN_MESSAGE_ID]
        request = _append_request(stored, dlq.name, props, reconsume_times=attempts)
        result = await self._put(request, Destination.DLQ, None)
        self._counters.sent_to_dlq += 1
        _log.info(
            "message %s of %s moved to %s after %d attempts",
            props[P.ORIGIN_MESSAGE_ID],
            props[P.RETRY_TOPIC],
            dlq.name,
            attempts,
        )
        return result

    # -- the classic protocol (CONSUMER_SEND_MSG_BACK) ------------------------------------------

    async def send_msg_back(
        self,
        group: subscriptions.SubscriptionGroupConfig,
        stored: message.StoredMessage,
        *,
        delay_level: int,
        max_reconsume_times: int,
    ) -> SendBackResult:
        """CONSUMER_SEND_MSG_BACK (RocketMQ ``AbstractSendMessageProcessor
        .consumerSendMsgBack``): the classic consumer failed ``stored``.

        Args:
            group: the consumer group.
            stored: the message as the consumer got it (found by its commit-log offset).
            delay_level: 0 → the broker decides (3 + reconsume times); < 0 → DLQ now;
                n > 0 → delay level n (clamped to the configured levels).
            max_reconsume_times: from the request; below 0 → the group's ``retry_max_times``
                (RocketMQ reads the subscription group's ``retryMaxTimes`` unless the request
                carries ``maxReconsumeTimes``).

        Counted, once stored, as ``SNDBCK_PUT_NUMS`` of the message's origin topic and the
        group (RocketMQ ``incSendBackNums``).

        Raises:
            ServiceUnavailableError: the store refused the copy.
        """
        limit = group.retry_max_times if max_reconsume_times < 0 else max_reconsume_times
        reconsume = stored.reconsume_times
        if delay_level < 0 or reconsume >= limit:
            result = await self.dead_letter(group.group, stored, attempts=reconsume + 1)
        else:
            level = SEND_BACK_LEVEL_BASE + reconsume if delay_level == 0 else delay_level
            request = self._retry_copy(
                group.group, stored, reconsume_times=reconsume + 1, pop=False
            )
            parked = self._schedule.park_level(request, level)
            result = await self._put(parked, Destination.RETRY, None)
        self._counters.traffic.sent_back(group.group, origin_topic(stored))
        return result

    async def send_msg_back_at(
        self,
        group_name: str,
        commit_log_offset: int,
        *,
        delay_level: int,
        max_reconsume_times: int,
    ) -> SendBackResult:
        """CONSUMER_SEND_MSG_BACK as the wire carries it: ``send_msg_back`` of the message whose
        record starts at ``commit_log_offset`` (the pulled record's physicalOffset) for group
        ``group_name``.

        Raises:
            IllegalConsumerGroupError, ConsumerGroupNotFoundError: a bad or unknown group.
            MessageNotFoundError: no readable message at the offset.
            ServiceUnavailableError: the store refused the copy.
        """
        group = self._groups.require(group_name)
        stored = self._store.get_message(ids.CommitLogOffset(commit_log_offset)).message
        if stored is None:
            raise errors.MessageNotFoundError(
                f"no message at CommitLog offset {commit_log_offset} to send back"
            )
        return await self.send_msg_back(
            group, stored, delay_level=delay_level, max_reconsume_times=max_reconsume_times
        )

    # -- dead letters, by hand (``ariane admin dlq``) -----------------------------------------

    def dead_letters(
        self, group: ids.GroupName, *, max_messages: int = DEAD_LETTERS_READ_MAX
    ) -> list[DeadLetter]:
        """The oldest letters of ``%DLQ%<group>`` still stored, at most ``max_messages``
        (capped at ``DEAD_LETTERS_READ_MAX``); empty when the group never dead-lettered.

        RocketMQ leaves its DLQ to operators (rocketmq-reference.md A4): nothing consumes it
        automatically, and reading it does not remove anything.
        """
        dlq = topics.dlq_topic(group)
        wanted = max(0, min(max_messages, DEAD_LETTERS_READ_MAX))
        offset = self._store.min_queue_offset(dlq, ids.QueueId(0))
        found: list[DeadLetter] = []
        while len(found) < wanted:
            result = self._store.get_messages(
                dlq,
                ids.QueueId(0),
                offset,
                max_count=wanted - len(found),
                max_bytes=DEAD_LETTER_READ_BYTES_MAX,
            )
            found += [_dead_letter(m) for m in result.messages]
            if result.next_begin_offset <= offset:
                break
            offset = result.next_begin_offset
        return found

    async def resend_dead_letters(
        self, group: ids.GroupName, *, message_ids: frozenset[str] | None
    ) -> list[Resent]:
        """Write dead letters of ``%DLQ%<group>`` back to their origin topics (what an
        operator does by hand in RocketMQ), as the message the producer sent: same id, body,
        properties, RECONSUMETIMES 0. The DLQ keeps its letters (it is a log).

        Args:
            group: the consumer group.
            message_ids: the letters to resend; ``None`` resends every letter read
                (``DEAD_LETTERS_READ_MAX`` at most).

        Raises:
            MessageNotFoundError: a requested id is not among the group's dead letters.
            TopicNotFoundError, ForbiddenError: an origin topic is gone or not writable.
            ServiceUnavailableError: the store refused the batch.
        """
        letters = self.dead_letters(group)
        if message_ids is not None:
            letters = [d for d in letters if d.origin_message_id in message_ids]
            missing = message_ids - {d.origin_message_id for d in letters}
            if missing:
                raise errors.MessageNotFoundError(
                    f"no dead letter of group {group!r} has id {', '.join(sorted(missing))}"
                )
        requests = [self._resend_request(d) for d in letters]
        if not requests:
            return []
        results = await self._store.put_messages(requests)
        refused = [r.status.value for r in results if not r.status.is_stored]
        if refused:
            raise errors.ServiceUnavailableError(
                f"{len(refused)} of {len(requests)} dead letters were not resent: {refused[0]}"
            )
        for topic in {r.message.topic for r in requests}:
            self._polling.notify(topic)
        _log.info("resent %d dead letters of %s to their topics", len(requests), group)
        return [
            Resent(d.origin_message_id, q.message.topic, q.queue_id, r.queue_offset)
            for d, q, r in zip(letters, requests, results, strict=True)
        ]

    def _resend_request(self, letter: DeadLetter) -> commit_log.AppendRequest:
        topic = self._topics.require(letter.origin_topic)
        if not topic.writeable:
            raise errors.ForbiddenError(f"topic {topic.name!r} is not writable on this broker")
        stored = letter.stored
        drop = _TIMER_PROPERTIES + _RETRY_PROPERTIES
        props = {k: v for k, v in stored.properties.items() if k not in drop}
        spread = stored.message.message_group or letter.origin_message_id
        queue_id = ids.QueueId(zlib.crc32(spread.encode()) % topic.write_queue_nums)
        request = _append_request(stored, topic.name, props, reconsume_times=0)
        return dataclasses.replace(request, queue_id=queue_id)

    # -- internals -----------------------------------------------------------------------------

    def _retry_copy(
        self,
        group: ids.GroupName,
        stored: message.StoredMessage,
        *,
        reconsume_times: int,
        pop: bool,
    ) -> commit_log.AppendRequest:
        """A copy for ``%RETRY%<group>_<origin>`` (``pop``) or ``%RETRY%<group>``."""
        origin = origin_topic(stored)
        levels = self._priority_levels(origin, stored)
        if pop:
            retry = self._ensure(
                topics.pop_retry_topic(group, origin),
                lambda: self._topics.ensure_pop_retry_topic(group, origin, levels or 1),
            )
        else:
            retry = self._ensure(
                topics.retry_topic(group), lambda: self._topics.ensure_retry_topic(group)
            )
        props = _copied_properties(stored)
        request = _append_request(stored, retry.name, props, reconsume_times=reconsume_times)
        if pop and levels:  # a retried priority message keeps its level (pop.priority)
            level = priority.queue_of(int(props[P.PRIORITY]), retry.write_queue_nums)
            request = dataclasses.replace(request, queue_id=level)
        return request

    def _priority_levels(self, origin: ids.TopicName, stored: message.StoredMessage) -> int:
        """The write queue count of ``origin`` when it is a PRIORITY topic and ``stored``
        carries a priority, else 0."""
        config = self._topics.get(origin)
        if config is None or config.message_type is not message.MessageType.PRIORITY:
            return 0
        if not stored.properties.get(P.PRIORITY, "").isdigit():
            return 0
        return config.write_queue_nums

    def _ensure(
        self, name: ids.TopicName, create: Callable[[], topic_config.TopicConfig]
    ) -> topic_config.TopicConfig:
        """The retry or DLQ topic ``name`` (``create`` makes it), announced when new."""
        known = self._topics.get(name) is not None
        config = create()
        if not known:
            self._route_changed.set()
        return config

    async def _put(
        self, request: commit_log.AppendRequest, destination: Destination, due_ms: int | None
    ) -> SendBackResult:
        (result,) = await self._store.put_messages([request])
        if not result.status.is_stored:
            raise errors.ServiceUnavailableError(
                f"could not store the {destination.value.lower()} copy in "
                f"{request.message.topic}: {result.status.value}"
            )
        self._polling.notify(request.message.topic)  # a copy stored in %RETRY% or %DLQ% at once
        topic = ids.TopicName(request.message.properties.get(P.REAL_TOPIC, request.message.topic))
        return SendBackResult(destination, topic, request.reconsume_times, due_ms)


def _dead_letter(stored: message.StoredMessage) -> DeadLetter:
    props = stored.properties
    return DeadLetter(
        stored=stored,
        origin_topic=ids.TopicName(props.get(P.DLQ_ORIGIN_TOPIC) or origin_topic(stored)),
        origin_message_id=ids.MessageId(
            props.get(P.DLQ_ORIGIN_MESSAGE_ID) or origin_message_id(stored)
        ),
        attempts=stored.reconsume_times,
    )


def _copied_properties(stored: message.StoredMessage) -> dict[str, str]:
    """The properties of a retry or DLQ copy: all of ``stored``'s, without an earlier park's,
    with ``RETRY_TOPIC`` and ``ORIGIN_MESSAGE_ID`` set once (the first failure's)."""
    props = {k: v for k, v in stored.properties.items() if k not in _TIMER_PROPERTIES}
    props[P.RETRY_TOPIC] = origin_topic(stored)
    props[P.ORIGIN_MESSAGE_ID] = origin_message_id(stored)
    return props


def _append_request(
    stored: message.StoredMessage,
    topic: ids.TopicName,
    props: dict[str, str],
    *,
    reconsume_times: int,
) -> commit_log.AppendRequest:
    return commit_log.AppendRequest(
        message=message.Message(
            topic=topic, body=stored.body, properties=props, flag=stored.message.flag
        ),
        queue_id=ids.QueueId(0),
        sys_flag=int(stored.sys_flag) & int(message.SysFlag.COMPRESSED),
        born_timestamp_ms=stored.born_timestamp_ms,
        born_host=stored.born_host,
        reconsume_times=reconsume_times,
    )
