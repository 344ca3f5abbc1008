"""The send path of the classic protocol: messages that arrive in RocketMQ's stored form.

Classic clients (``DefaultMQProducer`` over Remoting ``SEND_MESSAGE`` / ``SEND_MESSAGE_V2`` /
``SEND_BATCH_MESSAGE``) send the message as RocketMQ stores it: topic, body, FLAG, SYSFLAG and
the full properties string, with the queue the client chose. This processor mirrors the
broker's ``SendMessageProcessor`` for them, beside ``send.SendProcessor`` (which serves the v2
``SendMessage``) and over the same store, topic table, delay schedule and transaction service:

* the topic must exist and be writable, or be auto-created (``auto_create_topic_enable``, as
  RocketMQ creates it from ``TBW102``); otherwise TopicNotFoundError (Remoting
  ``TOPIC_NOT_EXIST``);
* the queue id is the client's (a ``MessageQueueSelector`` chose it): one at or above
  ``max(read, write)`` queue count is refused (``msgCheck``), a negative one means "pick"
  (round-robin over the write queues);
* properties are kept as sent (KEYS, TAGS, user properties, ``TRAN_MSG``, ``PGROUP`` ...);
  ``UNIQ_KEY`` is added when absent (``MessageClientIDSetter.setUniqID``);
* classic clients declare no message type, so the topic's message type is not checked (as the
  Java broker, which accepts any kind on any topic);
* ``DELAY`` (a level 1..18, higher clamps) parks the message in ``SCHEDULE_TOPIC_XXXX``; the
  5.x timer properties ``TIMER_DELAY_SEC`` > ``TIMER_DELAY_MS`` > ``TIMER_DELIVER_MS`` (in that
  precedence, ``HookUtils.handleScheduleMessage``) park it on the timer wheel; both through the
  schedule service;
* ``TRAN_MSG=true`` stores a half message through the transaction service (never delayed);
* a batch holds messages of one topic, all to one queue, appended atomically with consecutive
  queue offsets; it may not hold DELAY, timer or transactional messages (``MessageBatch``).

Invariant: a request is all-or-nothing, as ``send.SendProcessor``: every message is checked
before anything reaches the store, and the store appends the batch atomically.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Mapping, Sequence
from typing import Protocol

from ariane.broker.processors import long_polling, send
from ariane.broker.tables import topic_config
from ariane.client import message_id
from ariane.common import clock, errors, ids, message, topics
from ariane.store import commit_log
from ariane.store import message_store as message_store_mod
from ariane.store import settings as store_settings_mod

P = message.Property
_UNIQ = P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX

TIMER_DELAY_MS_MAX = 3 * 24 * 3600 * 1000
"""Longest timer delay a classic send may ask for, ms (RocketMQ ``timerMaxDelaySec``, 3 days)."""

_TIMER_PROPERTIES = (
    (P.TIMER_DELAY_SEC, 1000, True),
    (P.TIMER_DELAY_MS, 1, True),
    (P.TIMER_DELIVER_MS, 1, False),
)
"""Timer properties in precedence order: name, ms per unit, relative to now."""


@dataclasses.dataclass(frozen=True, slots=True)
class ClassicMessage:
    """One message of a classic send request, decoded but not validated.

    Attributes:
        body: the body as sent (compressed when ``sys_flag`` has COMPRESSED).
        properties: every property of the message (system and user), as sent.
        flag: the application FLAG.
        sys_flag: the SYSFLAG the client set (compression, transaction type bits).
        born_timestamp_ms: when the client made it, ms since the epoch.
        reconsume_times: RECONSUMETIMES as sent (a retried message sent back by the client).
    """

    body: bytes
    properties: Mapping[str, str]
    flag: int = 0
    sys_flag: int = 0
    born_timestamp_ms: int = 0
    reconsume_times: int = 0


@dataclasses.dataclass(frozen=True, slots=True)
class ClassicSendRequest:
    """A classic send: one message, or a batch of one topic to one queue.

    Attributes:
        topic: the topic as sent.
        queue_id: the queue the client chose; negative lets the broker pick.
        messages: the messages (one unless ``batch``).
        batch: the request was a batch (``SEND_BATCH_MESSAGE`` / header ``batch=true``).
        born_host: the producer's address as the broker sees the connection.
    """

    topic: str
    queue_id: int
    messages: Sequence[ClassicMessage]
    batch: bool
    born_host: message.HostAddress


@dataclasses.dataclass(frozen=True, slots=True)
class ClassicSendResult:
    """What a classic send stored (the fields of RocketMQ's ``SendMessageResponseHeader``).

    Attributes:
        status: the store's outcome (of the first message not stored, else PUT_OK).
        queue_id: the queue the messages went to (the half queue for a transaction).
        queue_offset: the first message's queue offset.
        offset_message_ids: each message's offset message id (store host + CommitLog offset).
        unique_keys: each message's ``UNIQ_KEY``.
        transaction_id: the transaction id of a stored half message, else "".
    """

    status: commit_log.PutMessageStatus
    queue_id: ids.QueueId
    queue_offset: int
    offset_message_ids: tuple[str, ...]
    unique_keys: tuple[str, ...]
    transaction_id: str = ""


class ClassicSendProcessor:
    """Validates and appends classic send requests (RocketMQ ``SendMessageProcessor``).

    Args:
        store: the message store.
        topics: the topic table (``require`` with auto-create).
        polling: long polling, notified of the queues that got messages.
        counters: the broker's totals (messages and bytes in).
        store_settings: the body and property size limits.
        schedule: parks DELAY-level and timer messages.
        half_messages: the transaction service (half messages).
        time: the clock (timer delays, generated ``UNIQ_KEY``).
    """

    def __init__(
        self,
        *,
        store: message_store_mod.MessageStore,
        topics: topic_config.TopicConfigManager,
        polling: long_polling.LongPolling,
        counters: send.SendCounters,
        store_settings: store_settings_mod.StoreSettings,
        schedule: ClassicScheduleHook,
        half_messages: send.HalfMessages,
        time: clock.Clock,
    ) -> None:
        self._store = store
        self._topics = topics
        self._polling = polling
        self._counters = counters
        self._limits = store_settings
        self._schedule = schedule
        self._half = half_messages
        self._clock = time
        self._ids = message_id.MessageIdFactory(time=time)
        self._round_robin = itertools.count()

    async def send(self, request: ClassicSendRequest) -> ClassicSendResult:
        """Check every message, append them atomically, say where they went.

        Raises:
            TopicNotFoundError: unknown topic and no auto-creation (``TOPIC_NOT_EXIST``).
            ForbiddenError: the topic is not writable (``NO_PERMISSION``).
            BadRequestError: the queue id is out of range, an empty batch, or a batch holding
                DELAY, timer or transactional messages (``SYSTEM_ERROR`` / ``MESSAGE_ILLEGAL``).
            MessageBodyEmptyError, MessageBodyTooLargeError, MessagePropertiesTooLargeError,
            IllegalTopicError, IllegalDeliveryTimeError: an invalid message
                (``MESSAGE_ILLEGAL``).
            TooManyRequestsError: the timer wheel or the half-message table is full.
        """
        if not request.messages:
            raise errors.BadRequestError("the request holds no message")
        topic = send.writable_topic(self._topics, request.topic)
        queue_id = self._queue_id(topic, request.queue_id)
        appends = [self._append(topic, queue_id, m, request) for m in request.messages]
        results = await self._store.put_messages(appends, atomic=True)
        first_failed = next((r for r in results if not r.status.is_stored), None)
        transaction_id = ""
        if first_failed is None and appends[0].message.topic == topics.TRANS_HALF_TOPIC:
            transaction_id = self._half.prepared(appends[0], results[0])
        self._count(request, results)
        return ClassicSendResult(
            status=(first_failed or results[0]).status,
            queue_id=appends[0].queue_id,
            queue_offset=results[0].queue_offset,
            offset_message_ids=tuple(r.message_id for r in results),
            unique_keys=tuple(
                a.message.properties[P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX] for a in appends
            ),
            transaction_id=transaction_id,
        )

    def _count(
        self, request: ClassicSendRequest, results: Sequence[commit_log.PutMessageResult]
    ) -> None:
        stored = [m for m, r in zip(request.messages, results, strict=True) if r.status.is_stored]
        self._counters.messages_in += len(stored)
        self._counters.bytes_in += sum(len(m.body) for m in stored)
        sizes = self._counters.message_size_bytes[message.MessageType.NORMAL]
        for stored_message in stored:
            sizes.observe(len(stored_message.body))
        if stored:
            self._polling.notify_many([request.topic])

    def _queue_id(self, topic: topic_config.TopicConfig, wanted: int) -> ids.QueueId:
        if wanted < 0:
            return ids.QueueId(next(self._round_robin) % topic.write_queue_nums)
        count = max(topic.read_queue_nums, topic.write_queue_nums)
        if wanted >= count:
            raise errors.BadRequestError(
                f"request queueId[{wanted}] is illegal: topic {topic.name!r} has {count} queues"
            )
        return ids.QueueId(wanted)

    def _append(
        self,
        topic: topic_config.TopicConfig,
        queue_id: ids.QueueId,
        incoming: ClassicMessage,
        request: ClassicSendRequest,
    ) -> commit_log.AppendRequest:
        send.check_body(incoming.body, self._limits)
        props = dict(incoming.properties)
        if not props.get(P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX):
            props[P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = self._ids.next_id()
        send.check_properties(props, self._limits)
        transactional = props.get(P.TRANSACTION_PREPARED) == "true"
        level = _delay_level(props)
        delivery_ms = self._timer_delivery_ms(props)
        if request.batch and (transactional or level > 0 or delivery_ms is not None):
            raise errors.BadRequestError(
                "a batch may not hold delayed, timer or transactional messages"
            )
        append = commit_log.AppendRequest(
            message=message.Message(topic.name, incoming.body, props, incoming.flag),
            queue_id=queue_id,
            sys_flag=incoming.sys_flag,
            born_timestamp_ms=ids.TimestampMs(incoming.born_timestamp_ms),
            born_host=request.born_host,
            reconsume_times=incoming.reconsume_times,
        )
        if transactional:
            return self._half.to_half(append)
        if delivery_ms is not None:
            return self._schedule.park(append, delivery_ms=delivery_ms)
        if level > 0:
            return self._schedule.park_level(append, level)
        return append

    def _timer_delivery_ms(self, props: Mapping[str, str]) -> int | None:
        """The absolute delivery time the TIMER_* properties ask for, or ``None``.

        Raises:
            IllegalDeliveryTimeError: a value is not an integer, or more than
                ``TIMER_DELAY_MS_MAX`` ahead (RocketMQ ``MESSAGE_ILLEGAL``).
        """
        now_ms = self._clock.now_ms()
        for name, scale_ms, relative in _TIMER_PROPERTIES:
            raw = props.get(name)
            if raw is None:
                continue
            try:
                value = int(raw)
            except ValueError:
                raise errors.IllegalDeliveryTimeError(
                    f"{name}={raw[:40]!r} is no integer"
                ) from None
            delivery_ms = max(now_ms, value * scale_ms + (now_ms if relative else 0))
            if delivery_ms - now_ms > TIMER_DELAY_MS_MAX:
                raise errors.IllegalDeliveryTimeError(
                    f"{name} asks for {delivery_ms - now_ms} ms ahead; the limit is "
                    f"{TIMER_DELAY_MS_MAX} ms"
                )
            return delivery_ms
        return None


class ClassicScheduleHook(send.ScheduleHook, Protocol):
    """Parks delay-level and timer messages (``schedule.service.ScheduleService``)."""

    def park_level(self, request: commit_log.AppendRequest, level: int) -> commit_log.AppendRequest:
        """The request rewritten into ``SCHEDULE_TOPIC_XXXX`` queue ``level - 1``."""
        ...


def _delay_level(props: Mapping[str, str]) -> int:
    """The ``DELAY`` property as a level (0: none; negative counts as none).

    Raises:
        BadRequestError: the value is not an integer (Java's ``Integer.parseInt`` fails too).
    """
    raw = props.get(P.DELAY_TIME_LEVEL)
    if raw is None or raw == "":
        return 0
    try:
        return max(0, int(raw))
    except ValueError:
        raise errors.BadRequestError(f"DELAY={raw[:40]!r} is no delay level") from None
