"""Classic sends as drafts for the send core (``send.SendProcessor.send_classic``).

Classic clients (``DefaultMQProducer`` over Remoting ``SEND_MESSAGE`` / ``SEND_MESSAGE_V2`` /
``SEND_BATCH_MESSAGE``) send the message as RocketMQ stores it: topic, body, FLAG, SYSFLAG and
the full properties string, with the queue the client chose. This adapter mirrors the broker's
``SendMessageProcessor`` for them:

* the topic must exist and be writable, or be auto-created (``auto_create_topic_enable``, as
  RocketMQ creates it from ``TBW102``); otherwise TopicNotFoundError (Remoting
  ``TOPIC_NOT_EXIST``);
* the queue id is the client's (a ``MessageQueueSelector`` chose it): one at or above
  ``max(read, write)`` queue count is refused (``msgCheck``), a negative one means "pick"
  (round-robin over the write queues);
* properties are kept as sent (KEYS, TAGS, user properties, ``TRAN_MSG``, ``PGROUP`` ...);
  ``UNIQ_KEY`` is added when absent (``MessageClientIDSetter.setUniqID``). When nothing is
  added and the message is stored as sent, the properties string as it arrived is the one
  stored (``message_codec.is_encoding_of``): it is not encoded again;
* classic clients declare no message type, so the topic's message type is not checked (as the
  Java broker, which accepts any kind on any topic);
* ``DELAY`` (a level 1..18, higher clamps) parks the message in ``SCHEDULE_TOPIC_XXXX``; the
  5.x timer properties ``TIMER_DELAY_SEC`` > ``TIMER_DELAY_MS`` > ``TIMER_DELIVER_MS`` (in that
  precedence, ``HookUtils.handleScheduleMessage``) park it on the timer wheel;
* ``TRAN_MSG=true`` stores a half message (never delayed);
* a batch holds messages of one topic, all to one queue, appended atomically with consecutive
  queue offsets; it may not hold DELAY, timer or transactional messages (``MessageBatch``);
* a batch's body is walked once (``remoting.message_codec.batch_items``, every length checked
  before anything is kept): when every message is stored as sent (its properties string is the
  encoding of what it parses to, with a ``UNIQ_KEY`` and nothing that reroutes or renames it:
  what the Java client writes), each becomes its append request straight from slices of the
  body, its properties string reused as the stored one (RocketMQ's ``MessageExtBatch``, no
  per-message decode); otherwise the whole batch takes the per-message path above. A malformed
  body raises ``MessageCodecError`` (MESSAGE_ILLEGAL) and nothing of the batch is stored.

Idempotent sends (Ariane's, as for v2): a message whose user property ``ARIANE_IDEMPOTENCY_KEY``
holds a key K is stored with ``UNIQ_KEY`` = ``idempotency.message_id_of(K)`` in place of the
client's, so the send core finds an earlier try of K whichever protocol sent it.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterator, Mapping, Sequence

from ariane.broker.processors import send_draft
from ariane.broker.tables import topic_config
from ariane.common import clock, errors, idempotency, ids, message, message_id
from ariane.remoting import message_codec as remoting_codec
from ariane.store import commit_log, message_codec
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
        properties_bytes: the properties string as it arrived (``properties`` was parsed
            from it), or ``None``.
    """

    body: bytes
    properties: Mapping[str, str]
    flag: int = 0
    sys_flag: int = 0
    born_timestamp_ms: int = 0
    reconsume_times: int = 0
    properties_bytes: bytes | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class ClassicSendRequest:
    """A classic send: one message, or a batch of one topic to one queue.

    Attributes:
        topic: the topic as sent.
        queue_id: the queue the client chose; negative lets the broker pick.
        messages: the messages (one unless ``batch``); empty when ``batch_body`` holds them.
        batch: the request was a batch (``SEND_BATCH_MESSAGE`` / header ``batch=true``).
        born_host: the producer's address as the broker sees the connection.
        batch_body: a batch's body as it arrived (``MessageDecoder.encodeMessages``), walked
            once by ``ClassicDrafts.drafts``; ``None`` when ``messages`` are given.
        sys_flag: SYSFLAG of every message of ``batch_body`` (the header's).
        born_timestamp_ms: BORNTIMESTAMP of every message of ``batch_body``.
        reconsume_times: RECONSUMETIMES of every message of ``batch_body``.
    """

    topic: str
    queue_id: int
    messages: Sequence[ClassicMessage]
    batch: bool
    born_host: message.HostAddress
    batch_body: bytes | memoryview | None = None
    sys_flag: int = 0
    born_timestamp_ms: int = 0
    reconsume_times: int = 0


@dataclasses.dataclass(frozen=True, slots=True)
class ClassicSendResult:
    """What a classic send stored (the fields of RocketMQ's ``SendMessageResponseHeader``).

    Attributes:
        status: the store's outcome (of the first message not stored, else PUT_OK; PUT_OK
            for a message an earlier try stored).
        queue_id: the queue the messages went to (the half queue for a transaction; the
            earlier try's for a message it stored).
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


class ClassicDrafts:
    """Turns classic send requests into drafts (module docstring).

    Args:
        table: the topic table (``require`` with auto-create).
        store_settings: the body size limit.
        round_robin: the shared counter a queue is picked with when the client lets the
            broker pick.
        time: the clock (timer delays, generated ``UNIQ_KEY``).
    """

    def __init__(
        self,
        *,
        table: topic_config.TopicConfigManager,
        store_settings: store_settings_mod.StoreSettings,
        round_robin: Iterator[int],
        time: clock.Clock,
    ) -> None:
        self._topics = table
        self._limits = store_settings
        self._round_robin = round_robin
        self._clock = time
        self._ids = message_id.MessageIdFactory(time=time)

    def drafts(self, request: ClassicSendRequest) -> list[send_draft.Draft]:
        """One draft per message, in order.

        Raises:
            TopicNotFoundError: unknown topic and no auto-creation (``TOPIC_NOT_EXIST``).
            ForbiddenError: the topic is not writable (``NO_PERMISSION``).
            BadRequestError: the queue id is out of range, an empty batch, or a batch holding
                DELAY, timer or transactional messages.
            MessageBodyEmptyError, MessageBodyTooLargeError, IllegalTopicError,
                IllegalDeliveryTimeError, IllegalPropertyKeyError: an invalid message
                (``MESSAGE_ILLEGAL``).
        """
        body = request.batch_body
        if not request.messages and not body:
            raise errors.BadRequestError("the request holds no message")
        topic = send_draft.writable_topic(self._topics, request.topic)
        queue_id = self._queue_id(topic, request.queue_id)
        messages = request.messages
        if body is not None:
            as_sent = self._as_sent(topic, queue_id, body, request)
            if as_sent is not None:
                return as_sent
            messages = [
                ClassicMessage(
                    m.body,
                    m.properties,
                    m.flag,
                    request.sys_flag,
                    request.born_timestamp_ms,
                    request.reconsume_times,
                    m.properties_bytes,
                )
                for m in remoting_codec.decode_batch(body)
            ]
        return [self._draft(topic, queue_id, m, request) for m in messages]

    def _as_sent(
        self,
        topic: topic_config.TopicConfig,
        queue_id: ids.QueueId,
        body: bytes | memoryview,
        request: ClassicSendRequest,
    ) -> list[send_draft.Draft] | None:
        """The drafts of a batch whose every message is stored as sent, walking its body once
        (RocketMQ's ``MessageExtBatch``: no per-message object between the wire and the
        store's record): each message's body and properties are slices of the body, checked
        in place, the properties string reused as the stored one; ``None`` when some message
        needs the general path (``_stored_as_sent`` says which).

        Raises:
            MessageCodecError: a malformed body or non-UTF-8 properties (MESSAGE_ILLEGAL).
            MessageBodyEmptyError, MessageBodyTooLargeError: a message's body.
        """
        drafts: list[send_draft.Draft] = []
        name, limits = topic.name, self._limits
        normal, store = message.MessageType.NORMAL, send_draft.Route.STORE
        for flag, message_body, raw_view in remoting_codec.batch_items(body):
            raw = bytes(raw_view)
            props = _stored_as_sent(raw)
            if props is None:
                return None
            data = bytes(message_body)
            send_draft.check_body(data, limits)
            append = commit_log.AppendRequest(
                message.Message(name, data, props, flag),
                queue_id,
                request.sys_flag,
                ids.TimestampMs(request.born_timestamp_ms),
                request.born_host,
                request.reconsume_times,
            )
            drafts.append(
                send_draft.Draft(append, request.topic, normal, props[_UNIQ], store, None, 0, raw)
            )
        return drafts

    def _queue_id(self, topic: topic_config.TopicConfig, wanted: int) -> ids.QueueId:
        if wanted < 0:
            return ids.QueueId(next(self._round_robin) % topic.write_queue_nums)
        count = max(topic.read_queue_nums, topic.write_queue_nums)
        if wanted >= count:
            raise errors.BadRequestError(
                f"request queueId[{wanted}] is illegal: topic {topic.name!r} has {count} queues"
            )
        return ids.QueueId(wanted)

    def _draft(
        self,
        topic: topic_config.TopicConfig,
        queue_id: ids.QueueId,
        incoming: ClassicMessage,
        request: ClassicSendRequest,
    ) -> send_draft.Draft:
        send_draft.check_body(incoming.body, self._limits)
        props = incoming.properties
        client_id = props.get(_UNIQ, "")
        key = props.get(idempotency.IDEMPOTENCY_KEY_PROPERTY)
        as_sent = bool(client_id) and key is None
        if not as_sent:
            props = dict(props)
            props[_UNIQ] = client_id or self._ids.next_id()
            if key is not None:
                props[_UNIQ] = send_draft.keyed_message_id(key)
        route, level, delivery_ms = self._route(props)
        if request.batch and route is not send_draft.Route.STORE:
            raise errors.BadRequestError(
                "a batch may not hold delayed, timer or transactional messages"
            )
        raw = incoming.properties_bytes
        if raw is not None and not (
            as_sent and route is send_draft.Route.STORE and message_codec.is_encoding_of(raw, props)
        ):
            raw = None
        append = commit_log.AppendRequest(
            message=message.Message(topic.name, incoming.body, props, incoming.flag),
            queue_id=queue_id,
            sys_flag=incoming.sys_flag,
            born_timestamp_ms=ids.TimestampMs(incoming.born_timestamp_ms),
            born_host=request.born_host,
            reconsume_times=incoming.reconsume_times,
        )
        normal = message.MessageType.NORMAL
        return send_draft.Draft(
            append, request.topic, normal, client_id, route, delivery_ms, level, raw
        )

    def _route(self, props: Mapping[str, str]) -> tuple[send_draft.Route, int, int | None]:
        """(route, delay level, timer delivery ms) the properties ask for.

        Raises:
            BadRequestError: DELAY is no integer. IllegalDeliveryTimeError: a bad timer.
        """
        transactional = props.get(P.TRANSACTION_PREPARED) == "true"
        level = _delay_level(props)
        delivery_ms = self._timer_delivery_ms(props)
        if transactional:
            return send_draft.Route.HALF, 0, None
        if delivery_ms is not None:
            return send_draft.Route.TIMER, 0, delivery_ms
        if level > 0:
            return send_draft.Route.LEVEL, level, None
        return send_draft.Route.STORE, 0, None

    def _timer_delivery_ms(self, props: Mapping[str, str]) -> int | None:
        """The absolute delivery time the TIMER_* properties ask for, or ``None``.

        Raises:
            IllegalDeliveryTimeError: a value is not an integer, or more than
                ``TIMER_DELAY_MS_MAX`` ahead (RocketMQ ``MESSAGE_ILLEGAL``).
        """
        for name, scale_ms, relative in _TIMER_PROPERTIES:
            raw = props.get(name)
            if raw is None:
                continue
            now_ms = self._clock.now_ms()  # read only for a timer message
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


_NOT_AS_SENT = frozenset(
    {
        P.DELAY_TIME_LEVEL,
        P.TRANSACTION_PREPARED,
        idempotency.IDEMPOTENCY_KEY_PROPERTY,
        *(name for name, _, _ in _TIMER_PROPERTIES),
    }
)
"""Properties that make a batch message take the general path (a refusal, or a rewritten id)."""


_NAME_VALUE_REPEAT = itertools.repeat(message_codec.NAME_VALUE_SEPARATOR)
_ONE_REPEAT = itertools.repeat(1)


def _stored_as_sent(raw: bytes) -> dict[str, str] | None:
    """The properties of a batch message when it is stored exactly as sent, else ``None``.

    As sent means: ``raw`` is exactly the encoding of what it parses to (every item one
    ``name\x01value\x02`` with a name and a value, no name twice: ``is_encoding_of``), it
    holds a ``UNIQ_KEY`` (no id to add) and none of ``_NOT_AS_SENT``. One C-level split per
    item; the separator counts catch a stray separator, an empty item or a repeated name.

    Raises:
        MessageCodecError: ``raw`` is not UTF-8 (as ``decode_properties``).
    """
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise remoting_codec.MessageCodecError(f"properties are not UTF-8: {exc}") from exc
    if not text.endswith(message_codec.PROPERTY_SEPARATOR):
        return None
    items = text[:-1].split(message_codec.PROPERTY_SEPARATOR)
    try:  # str.split mapped in C over the items: no Python frame per property
        props = dict(map(str.split, items, _NAME_VALUE_REPEAT, _ONE_REPEAT))
    except ValueError:  # an item without a separator
        return None
    count = len(props)
    if (
        text.count(message_codec.PROPERTY_SEPARATOR) != count
        or text.count(message_codec.NAME_VALUE_SEPARATOR) != count
        or "" in props
        or "" in props.values()
        or not props.get(_UNIQ)
        or not _NOT_AS_SENT.isdisjoint(props)
    ):
        return None
    return props


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
