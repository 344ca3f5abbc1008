"""The send path of v2 ``SendMessage``: validate, choose the queue, append, answer per message.

Mirrors the RocketMQ 5 proxy's ``SendMessageActivity`` plus the broker's
``SendMessageProcessor`` checks (grpc-v2.md §6.3): the topic must exist and be writable; the
message type must be one the topic accepts; the body is 1 byte .. ``message_size_bytes_max``;
a body flagged GZIP must be a complete gzip (or zlib) stream that inflates to at most
``message_size_bytes_max`` (the official clients inflate it on receive and stop at a poison
body, so it is refused at send: MESSAGE_CORRUPTED when it does not inflate, MESSAGE_BODY_TOO_LARGE
when it inflates beyond the limit; inflation is bounded and never allocates more than the limit);
the client's message id is required and stored as ``UNIQ_KEY``; tags may not contain ``|``; user
property keys may not be reserved names and stay within the proxy's 128 keys / 16 KiB; a FIFO
message group is 1..64 characters; no text stored as a property may hold the store's property
separators (``\x01``, ``\x02``) and all properties together fit ``properties_size_bytes_max``.
The request carries no queue id: normal messages go round-robin over the topic's write queues,
FIFO messages to ``crc32(group) % write queues`` so a group always lands in one queue, PRIORITY
messages (to a PRIORITY topic only; priority 0 or more, else BAD_REQUEST) to queue
``min(priority, write queues - 1)`` with the priority stored as ``_SYS_MSG_PRIORITY_``
(``pop.priority``, RocketMQ 5.4).

Invariant: a request is all-or-nothing. Every message is validated before anything reaches the
store; the first invalid one refuses the whole request with its code (as the Java proxy, whose
``buildMessage`` throws for the request) and nothing of it is stored, and the store appends the
batch atomically (``MessageStore.put_messages(..., atomic=True)``: a message its codec refuses
fails the batch before a byte is written). A DELAY message (to a DELAY or MIXED topic; to any
other the proxy's ``DefaultTopicMessageTypeValidator`` answer, MESSAGE_PROPERTY_CONFLICT_WITH_TYPE)
is parked by the schedule hook (``broker.schedule``) and its outcome carries its delivery time,
from which the adapter makes the recall handle. A TRANSACTION message is stored as a half
message by ``transaction.TransactionalMessageService`` (``half_messages``) and answered with its
transaction id. Without the hook or the service, those kinds are refused with UNSUPPORTED.

Idempotent sends (Ariane's, RocketMQ has none): a message whose user property
``ARIANE_IDEMPOTENCY_KEY`` holds a key gets the message id derived from it
(``common.idempotency``), and one an earlier try stored within the window is not stored again
but answered OK with the stored id and offset (``idempotency``); the rest of its request is
stored as one batch.
"""

from __future__ import annotations

import dataclasses
import itertools
import zlib
from collections.abc import Mapping, Sequence
from typing import Protocol

from ariane.broker.pop import priority as priority_mod
from ariane.broker.processors import idempotency as idempotency_mod
from ariane.broker.processors import long_polling
from ariane.broker.tables import topic_config
from ariane.common import errors, histogram, idempotency, ids, limits, message, topics
from ariane.store import commit_log, message_codec, message_store
from ariane.store import settings as store_settings_mod

P = message.Property

_STATUS_ERRORS: dict[commit_log.PutMessageStatus, errors.Code] = {
    commit_log.PutMessageStatus.FLUSH_DISK_TIMEOUT: errors.Code.MASTER_PERSISTENCE_TIMEOUT,
    commit_log.PutMessageStatus.FLUSH_SLAVE_TIMEOUT: errors.Code.SLAVE_PERSISTENCE_TIMEOUT,
    commit_log.PutMessageStatus.SLAVE_NOT_AVAILABLE: errors.Code.HA_NOT_AVAILABLE,
    commit_log.PutMessageStatus.IN_SYNC_REPLICAS_NOT_ENOUGH: errors.Code.HA_NOT_AVAILABLE,
    commit_log.PutMessageStatus.SERVICE_NOT_AVAILABLE: errors.Code.INTERNAL_SERVER_ERROR,
    commit_log.PutMessageStatus.CREATE_MAPPED_FILE_FAILED: errors.Code.INTERNAL_SERVER_ERROR,
    commit_log.PutMessageStatus.MESSAGE_ILLEGAL: errors.Code.BAD_REQUEST,
    commit_log.PutMessageStatus.PROPERTIES_SIZE_EXCEEDED: errors.Code.MESSAGE_PROPERTIES_TOO_LARGE,
    commit_log.PutMessageStatus.OS_PAGE_CACHE_BUSY: errors.Code.TOO_MANY_REQUESTS,
    commit_log.PutMessageStatus.CONSUME_QUEUE_NUM_EXCEEDED: errors.Code.TOO_MANY_REQUESTS,
    commit_log.PutMessageStatus.UNKNOWN_ERROR: errors.Code.INTERNAL_ERROR,
}
"""How store outcomes map to v2 codes (proxy ``SendMessageActivity``/``ProxyException``)."""

_STATUS_TEXT: dict[commit_log.PutMessageStatus, str] = {
    commit_log.PutMessageStatus.FLUSH_DISK_TIMEOUT: "stored but not flushed in time (SYNC_FLUSH)",
    commit_log.PutMessageStatus.SERVICE_NOT_AVAILABLE: (
        "service not available now: the disk may be full, the store stopping, or this broker "
        "is no writable master (a slave, a master fenced by a newer epoch, or one whose lease "
        "lapsed): retry on another broker"
    ),
    commit_log.PutMessageStatus.IN_SYNC_REPLICAS_NOT_ENOUGH: (
        "in-sync replicas not enough (fewer than min_in_sync_replicas): not stored, retry later"
    ),
}

_ACCEPTED_WIRE_TYPES = {
    "NORMAL": message.MessageType.NORMAL,
    "FIFO": message.MessageType.FIFO,
    "DELAY": message.MessageType.DELAY,
    "TRANSACTION": message.MessageType.TRANSACTION,
    "PRIORITY": message.MessageType.PRIORITY,
}


@dataclasses.dataclass(frozen=True, slots=True)
class SendOutcome:
    """The answer for one message of a request.

    Attributes:
        code: OK or the error code.
        text: the status message.
        message_id: the client's message id (echoed back).
        queue_offset: the queue offset it got, or -1.
        delivery_ms: a parked DELAY message's delivery time (the recall handle names it).
        transaction_id: the transaction id of a stored half message, else "".
    """

    code: errors.Code
    text: str
    message_id: str
    queue_offset: int = -1
    delivery_ms: int | None = None
    transaction_id: str = ""


class SendCounters(Protocol):
    """The totals the send path adds to (``runtime.Counters``); ``message_size_bytes`` holds
    one histogram per message type but MIXED."""

    messages_in: int
    bytes_in: int
    message_size_bytes: dict[message.MessageType, histogram.Histogram]


class ScheduleHook(Protocol):
    """Parks DELAY messages until due (``schedule.service.ScheduleService``)."""

    def park(
        self, request: commit_log.AppendRequest, *, delivery_ms: int | None
    ) -> commit_log.AppendRequest:
        """The request rewritten into the timer topic (see ``ScheduleService.park``)."""
        ...


class HalfMessages(Protocol):
    """Where TRANSACTION sends go (``transaction.TransactionalMessageService``)."""

    def to_half(self, request: commit_log.AppendRequest) -> commit_log.AppendRequest:
        """The half message's append request (raises TooManyRequestsError when full)."""

    def prepared(self, half: commit_log.AppendRequest, result: commit_log.PutMessageResult) -> str:
        """Record a stored half message; returns its transaction id."""


class SendProcessor:
    """Validates and appends the messages of SendMessage requests (RocketMQ
    ``SendMessageProcessor``), whatever protocol they came in on.

    Args:
        store: the message store the batch is appended to.
        topics: the topic table (``require`` with auto-create).
        polling: long polling, notified of the topics that got messages.
        counters: the broker's totals (messages and bytes in).
        store_settings: the body and property size limits.
        schedule: parks DELAY messages; without it they answer UNSUPPORTED.
        half_messages: the transaction service, or ``None`` to refuse TRANSACTION sends.
        idempotency_window: finds earlier tries of messages with an idempotency key
            (``idempotency``); ``None`` stores every try.
    """

    def __init__(
        self,
        *,
        store: message_store.MessageStore,
        topics: topic_config.TopicConfigManager,
        polling: long_polling.LongPolling,
        counters: SendCounters,
        store_settings: store_settings_mod.StoreSettings,
        schedule: ScheduleHook | None = None,
        half_messages: HalfMessages | None = None,
        idempotency_window: idempotency_mod.IdempotencyWindow | None = None,
    ) -> None:
        self._store = store
        self._topics = topics
        self._polling = polling
        self._counters = counters
        self._limits = store_settings
        self._schedule = schedule
        self._round_robin = itertools.count()
        self._half = half_messages
        self._idempotency = idempotency_window

    async def send(
        self, batch: Sequence[message.IncomingMessage], *, born_ip: str
    ) -> list[SendOutcome]:
        """Validate every message, then append all of them as one atomic batch, answer each.

        Args:
            batch: the decoded messages of one request.
            born_ip: the producer's IP as seen by the server (stored as BORNHOST).

        Returns:
            one outcome per message, in request order.

        Raises:
            ArianeError: the error of the first invalid message (its class and code, the
                message's position in the text); nothing of the request was stored.
        """
        requests: list[commit_log.AppendRequest] = []
        born_host = message.HostAddress(born_ip, 0)
        writable: dict[str, topic_config.TopicConfig] = {}  # topics already checked
        for position, incoming in enumerate(batch):
            try:
                requests.append(self._append_request(incoming, born_host, writable))
            except errors.ArianeError as exc:
                raise refuse_request(exc, position, len(batch)) from None
        results = await self._put(requests)
        answered: list[SendOutcome] = []
        stored_topics: set[str] = set()
        stored = stored_bytes = 0  # counted once per request, not per message
        sizes = self._counters.message_size_bytes
        for incoming, request, result in zip(batch, requests, results, strict=True):
            if not isinstance(result, commit_log.PutMessageResult):
                answered.append(_earlier(result, answered))
                continue
            outcome = self._outcome(incoming, request, result)
            half = self._half if request.message.topic == topics.TRANS_HALF_TOPIC else None
            if half is not None and result.status.is_stored:
                tid = half.prepared(request, result)
                outcome = dataclasses.replace(outcome, transaction_id=tid)
            answered.append(outcome)
            if result.status.is_stored:
                stored_topics.add(incoming.topic)
                stored += 1
                stored_bytes += len(incoming.body)
                sizes[_message_type(incoming)].observe(len(incoming.body))
        counters = self._counters
        counters.messages_in += stored
        counters.bytes_in += stored_bytes
        self._polling.notify_many(stored_topics)
        return answered

    async def _put(
        self, requests: list[commit_log.AppendRequest]
    ) -> list[commit_log.PutMessageResult | idempotency_mod.Stored | int]:
        """Append ``requests`` as one atomic batch, but those an earlier try stored
        (``idempotency``): for them the stored message, or the index of the request of this
        batch with the same key."""
        window = self._idempotency
        claim = None if window is None else await window.claim(requests)
        if claim is None or not claim.duplicates:
            try:
                return list(await self._store.put_messages(requests, atomic=True))
            finally:
                if claim is not None:
                    claim.release()
        try:
            fresh = [r for r, f in zip(requests, claim.found, strict=True) if f is None]
            results = iter(await self._store.put_messages(fresh, atomic=True) if fresh else [])
            return [next(results) if f is None else f for f in claim.found]
        finally:
            claim.release()

    def _outcome(
        self,
        incoming: message.IncomingMessage,
        request: commit_log.AppendRequest,
        result: commit_log.PutMessageResult,
    ) -> SendOutcome:
        if result.status is commit_log.PutMessageStatus.PUT_OK:
            return SendOutcome(
                errors.Code.OK,
                "OK",
                request.message.properties.get(P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
                or incoming.message_id,
                result.queue_offset,
                incoming.delivery_timestamp_ms if self._parks(incoming) else None,
            )
        code = _STATUS_ERRORS.get(result.status, errors.Code.INTERNAL_ERROR)
        text = _STATUS_TEXT.get(result.status, f"store answered {result.status.value}")
        return SendOutcome(code, text, incoming.message_id, result.queue_offset)

    def _append_request(
        self,
        incoming: message.IncomingMessage,
        born_host: message.HostAddress,
        writable: dict[str, topic_config.TopicConfig],
    ) -> commit_log.AppendRequest:
        # ``writable``: topics of this request that passed ``_writable_topic`` (name check,
        # lookup or auto-creation, write permission), so each is checked once per request.
        topic = writable.get(incoming.topic)
        if topic is None:
            topic = writable[incoming.topic] = self._writable_topic(incoming.topic)
        kind = _message_type(incoming)
        if not topic.message_type.accepts(kind):
            raise errors.MessageTypeConflictError(
                f"topic {topic.name!r} accepts {topic.message_type.value} messages, not "
                f"{kind.value}; send to a topic of that type or change the topic's type"
            )
        transactional = kind is message.MessageType.TRANSACTION
        half = self._half if transactional else None
        if (transactional and half is None) or (
            kind is message.MessageType.DELAY and self._schedule is None
        ):
            raise errors.UnsupportedError(
                f"{kind.value} messages are not supported by this broker yet"
            )
        self._check_body(incoming.body)
        if incoming.gzip:
            check_gzip_body(incoming.body, self._limits.message_size_bytes_max)
        properties = _properties(incoming, kind)
        self._check_properties(properties)
        if kind is message.MessageType.PRIORITY:
            level = priority_mod.check_priority(incoming.priority)
            properties[P.PRIORITY] = str(level)
            queue_id = priority_mod.queue_of(level, topic.write_queue_nums)
        else:
            queue_id = self._choose_queue(topic, incoming.message_group)
        request = commit_log.AppendRequest(
            message=message.Message(topic=topic.name, body=incoming.body, properties=properties),
            queue_id=queue_id,
            sys_flag=int(message.SysFlag.COMPRESSED) if incoming.gzip else 0,
            born_timestamp_ms=ids.TimestampMs(incoming.born_timestamp_ms),
            born_host=born_host,
        )
        if self._schedule is not None and kind is message.MessageType.DELAY:
            return self._schedule.park(request, delivery_ms=incoming.delivery_timestamp_ms)
        return request if half is None else half.to_half(request)

    def _parks(self, incoming: message.IncomingMessage) -> bool:
        return incoming.message_type == "DELAY" and incoming.delivery_timestamp_ms is not None

    def _writable_topic(self, name: str) -> topic_config.TopicConfig:
        return writable_topic(self._topics, name)

    def _check_body(self, body: bytes) -> None:
        check_body(body, self._limits)

    def _check_properties(self, properties: dict[str, str]) -> None:
        check_properties(properties, self._limits)

    def _choose_queue(
        self, topic: topic_config.TopicConfig, message_group: str | None
    ) -> ids.QueueId:
        count = topic.write_queue_nums
        if message_group is not None:
            return ids.QueueId(zlib.crc32(message_group.encode()) % count)
        return ids.QueueId(next(self._round_robin) % count)


def writable_topic(table: topic_config.TopicConfigManager, name: str) -> topic_config.TopicConfig:
    """The config of topic ``name`` for a producer (auto-created when that is on).

    Raises:
        IllegalTopicError: a bad name. TopicNotFoundError: unknown and not auto-created.
        ForbiddenError: the topic is not writable on this broker.
    """
    topic = table.require(topics.validate_topic(name), auto_create=True)
    if not topic.writeable:
        raise errors.ForbiddenError(f"topic {name!r} is not writable on this broker")
    return topic


def check_body(body: bytes, limits_: store_settings_mod.StoreSettings) -> None:
    """Refuse an empty body or one above ``message_size_bytes_max``.

    Raises:
        MessageBodyEmptyError, MessageBodyTooLargeError: as their names say.
    """
    if not body:
        raise errors.MessageBodyEmptyError("message body is empty; send at least one byte")
    limit = limits_.message_size_bytes_max
    if len(body) > limit:
        raise errors.MessageBodyTooLargeError(
            f"message body is {len(body)} bytes; the limit is {limit}"
        )


def check_properties(
    properties: Mapping[str, str], limits_: store_settings_mod.StoreSettings
) -> None:
    """Refuse properties the store would refuse: separators in names or values, or more than
    ``properties_size_bytes_max`` encoded.

    The store refuses these too, but only message by message inside its batch: checked before,
    one bad message refuses its request before anything is appended.

    Raises:
        BadRequestError: a separator. MessagePropertiesTooLargeError: too large.
    """
    encoded = message_codec.properties_to_bytes(properties)
    if encoded is None:
        raise errors.BadRequestError(
            "a property name or value holds a control character \\x01 or \\x02 "
            "(the store's property separators)"
        )
    limit = limits_.properties_size_bytes_max
    if len(encoded) > limit:
        raise errors.MessagePropertiesTooLargeError(
            f"the message's properties (keys, tag, ids, user properties) take "
            f"{len(encoded)} bytes; the limit is {limit}"
        )


GZIP_MAGIC = b"\x1f\x8b"
"""The first two bytes of a gzip member; a GZIP-flagged body without them must be zlib, as the
official Python client's ``Misc.uncompress_bytes_gzip`` reads it."""

GZIP_MEMBERS_MAX = 64
"""Most concatenated gzip members one body may hold (each costs a decompressor)."""


def refuse_request(error: errors.ArianeError, position: int, count: int) -> errors.ArianeError:
    """The error refusing a whole request because its message at ``position`` is invalid.

    Same class and code as ``error``; the text names the message and says nothing was stored.
    """
    return type(error)(
        f"message {position + 1} of {count}: {error.message}; no message of this request was stored"
    )


def check_gzip_body(body: bytes, inflated_bytes_max: int) -> None:
    """Refuse a GZIP-flagged body that a consumer could not inflate within the size limit.

    Reads ``body`` as the official Python client does: concatenated gzip members when it starts
    with ``1f 8b``, else one zlib stream. Inflation stops ``inflated_bytes_max + 1`` bytes in,
    so a compression bomb costs at most that much memory.

    Args:
        body: the body as sent (compressed).
        inflated_bytes_max: the largest inflated body accepted, bytes
            (``message_size_bytes_max``).

    Raises:
        MessageCorruptedError: (MESSAGE_CORRUPTED, 40016) the body is not a complete gzip or
            zlib stream, or has trailing bytes after its gzip members.
        MessageBodyTooLargeError: (MESSAGE_BODY_TOO_LARGE, 41301) it inflates beyond
            ``inflated_bytes_max``.
    """
    gzip_members = body[:2] == GZIP_MAGIC
    remaining, budget, members = body, inflated_bytes_max + 1, 0
    try:
        while remaining:
            members += 1
            if members > GZIP_MEMBERS_MAX:
                raise errors.MessageCorruptedError(
                    f"body flagged GZIP holds more than {GZIP_MEMBERS_MAX} gzip members"
                )
            inflater = zlib.decompressobj(wbits=31 if gzip_members else 15)
            budget -= len(inflater.decompress(remaining, budget))
            if budget <= 0 or inflater.unconsumed_tail:
                raise errors.MessageBodyTooLargeError(
                    f"body flagged GZIP inflates beyond {inflated_bytes_max} bytes, the limit"
                )
            if not inflater.eof:
                raise errors.MessageCorruptedError("body flagged GZIP is a truncated stream")
            remaining = inflater.unused_data if gzip_members else b""
            if remaining and remaining[:2] != GZIP_MAGIC:
                raise errors.MessageCorruptedError("body flagged GZIP has trailing garbage")
    except zlib.error as exc:
        raise errors.MessageCorruptedError(
            f"body flagged GZIP does not inflate ({exc}); send it with IDENTITY encoding or "
            "compress it with gzip"
        ) from None


def _earlier(found: idempotency_mod.Stored | int, answered: list[SendOutcome]) -> SendOutcome:
    """The answer to a message an earlier try stored: OK with the stored id and offset (or
    the answer to the message of this request with the same key)."""
    if isinstance(found, int):
        return answered[found]
    return SendOutcome(
        errors.Code.OK, "OK", found.message_id, found.queue_offset, found.delivery_ms
    )


def _message_type(incoming: message.IncomingMessage) -> message.MessageType:
    kind = _ACCEPTED_WIRE_TYPES.get(incoming.message_type)
    if kind is None:
        if incoming.message_type != "UNSPECIFIED":
            raise errors.UnsupportedError(f"{incoming.message_type} messages are not supported")
        kind = message.MessageType.FIFO if incoming.message_group else message.MessageType.NORMAL
    if kind is message.MessageType.FIFO and not incoming.message_group:
        raise errors.IllegalMessageGroupError("a FIFO message needs a message group")
    return kind


def _properties(incoming: message.IncomingMessage, kind: message.MessageType) -> dict[str, str]:
    if not incoming.message_id:
        raise errors.IllegalMessageIdError("message id is empty; the client must set one")
    props = _user_properties(incoming.user_properties)
    key = props.get(idempotency.IDEMPOTENCY_KEY_PROPERTY)
    if key is None:
        props[P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = incoming.message_id
    else:
        try:
            idempotency.check_key(key)
        except ValueError as exc:
            raise errors.IllegalPropertyKeyError(
                f"{idempotency.IDEMPOTENCY_KEY_PROPERTY}: {exc}"
            ) from None
        props[P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = idempotency.message_id_of(key)
    props[P.MESSAGE_TYPE] = kind.value
    if incoming.tag is not None:
        props[P.TAGS] = topics.validate_tag(incoming.tag)
    if incoming.keys:
        for key in incoming.keys:
            if not key.strip() or message.KEY_SEPARATOR in key:
                raise errors.IllegalMessageKeyError(f"key {key!r} is blank or has a space")
        props[P.KEYS] = message.KEY_SEPARATOR.join(incoming.keys)
    if incoming.message_group is not None:
        group = incoming.message_group
        if not group.strip() or len(group) > limits.MESSAGE_GROUP_CHARS_MAX:
            raise errors.IllegalMessageGroupError(
                f"message group must be 1..{limits.MESSAGE_GROUP_CHARS_MAX} characters"
            )
        props[P.SHARDING_KEY] = group
    if incoming.born_host:
        props[P.BORN_HOST_NAME] = incoming.born_host
    if incoming.trace_context:
        props[P.TRACE_CONTEXT] = incoming.trace_context
    return props


def _user_properties(raw: dict[str, str]) -> dict[str, str]:
    if not raw:  # most messages carry none
        return {}
    if len(raw) > limits.USER_PROPERTIES_COUNT_MAX:
        raise errors.MessagePropertiesTooLargeError(
            f"{len(raw)} user properties; the limit is {limits.USER_PROPERTIES_COUNT_MAX}"
        )
    size = sum(len(k.encode()) + len(v.encode()) for k, v in raw.items())
    if size > limits.USER_PROPERTIES_SIZE_BYTES_MAX:
        raise errors.MessagePropertiesTooLargeError(
            f"user properties take {size} bytes; the limit is "
            f"{limits.USER_PROPERTIES_SIZE_BYTES_MAX}"
        )
    for key in raw:
        if not key or key in message.RESERVED_PROPERTY_KEYS:
            raise errors.IllegalPropertyKeyError(
                f"user property key {key!r} is empty or a reserved system property name"
            )
    return dict(raw)
