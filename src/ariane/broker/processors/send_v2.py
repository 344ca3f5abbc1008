"""v2 ``SendMessage`` messages as drafts for the send core (``send.SendProcessor.send``).

Mirrors the RocketMQ 5 proxy's ``SendMessageActivity`` plus the broker's
``SendMessageProcessor`` checks (grpc-v2.md §6.3): the topic must exist and be writable; the
message type must be one the topic accepts; the body is 1 byte .. ``message_size_bytes_max``;
a body flagged GZIP must be a complete gzip (or zlib) stream that inflates to at most
``message_size_bytes_max`` (the official clients inflate it on receive and stop at a poison
body, so it is refused at send: MESSAGE_CORRUPTED when it does not inflate, MESSAGE_BODY_TOO_LARGE
when it inflates beyond the limit; inflation is bounded and never allocates more than the limit);
the client's message id is required and stored as ``UNIQ_KEY``; tags may not contain ``|``; user
property keys may not be reserved names and stay within the proxy's 128 keys / 16 KiB; a FIFO
message group is 1..64 characters. The request carries no queue id: normal messages go
round-robin over the topic's write queues, FIFO messages to ``crc32(group) % write queues`` so
a group always lands in one queue, PRIORITY messages (to a PRIORITY topic only; priority 0 or
more, else BAD_REQUEST) to queue ``min(priority, write queues - 1)`` with the priority stored as
``_SYS_MSG_PRIORITY_`` (``pop.priority``, RocketMQ 5.4), LITE messages (to a LITE topic only;
``lite_topic`` set, else ILLEGAL_LITE_TOPIC) to queue ``crc32(lite topic) % write queues`` with
the name stored as ``__LITE_TOPIC``, their lite topic created on first use (``tables.
lite_topics``: name rules, LITE_TOPIC_QUOTA_EXCEEDED; RocketMQ 5.5). A DELAY message (to a
DELAY or MIXED topic; to any other the proxy's ``DefaultTopicMessageTypeValidator`` answer,
MESSAGE_PROPERTY_CONFLICT_WITH_TYPE) is routed to the timer, a TRANSACTION message to the half
messages; without them those kinds are refused with UNSUPPORTED.

Idempotent sends (Ariane's): a message whose user property ``ARIANE_IDEMPOTENCY_KEY`` holds a
key gets the message id derived from it (``common.idempotency``) instead of the client's.

Invariant: the first invalid message refuses the whole request (``send_draft.refuse_request``:
its error's class and code, its position in the text), as the Java proxy's ``buildMessage``
throws for the request.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator, Sequence

from ariane.broker.pop import priority as priority_mod
from ariane.broker.processors import send_draft
from ariane.broker.tables import lite_topics, topic_config
from ariane.common import clock, errors, idempotency, ids, limits, message, topics
from ariane.store import commit_log
from ariane.store import settings as store_settings_mod

P = message.Property

_ACCEPTED_WIRE_TYPES = {
    "NORMAL": message.MessageType.NORMAL,
    "FIFO": message.MessageType.FIFO,
    "DELAY": message.MessageType.DELAY,
    "TRANSACTION": message.MessageType.TRANSACTION,
    "PRIORITY": message.MessageType.PRIORITY,
    "LITE": message.MessageType.LITE,
}


class V2Drafts:
    """Turns v2 messages into drafts (module docstring).

    Args:
        table: the topic table (``require`` with auto-create).
        store_settings: the body size limit.
        round_robin: the shared counter normal messages pick their queue with.
        delay_supported: a schedule service parks DELAY messages.
        transactions_supported: a transaction service takes TRANSACTION messages.
        lite: the broker's lite topics (``None``: LITE messages answer UNSUPPORTED).
        time: the clock lite topics are stamped with (monotonic).
    """

    def __init__(
        self,
        *,
        table: topic_config.TopicConfigManager,
        store_settings: store_settings_mod.StoreSettings,
        round_robin: Iterator[int],
        delay_supported: bool,
        transactions_supported: bool,
        lite: lite_topics.LiteTopicTable | None = None,
        time: clock.Clock | None = None,
    ) -> None:
        self._lite = lite
        self._time = time or clock.SystemClock()
        self._topics = table
        self._limits = store_settings
        self._round_robin = round_robin
        self._delay = delay_supported
        self._transactions = transactions_supported

    def drafts(
        self, batch: Sequence[message.IncomingMessage], born_ip: str
    ) -> list[send_draft.Draft]:
        """One draft per message, in order.

        Raises:
            ArianeError: the error of the first invalid message, refusing the request.
        """
        drafts: list[send_draft.Draft] = []
        born_host = message.HostAddress(born_ip, 0)
        writable: dict[str, topic_config.TopicConfig] = {}  # topics already checked
        lite: list[tuple[ids.TopicName, str, int]] = []  # lite topics, created if all pass
        for position, incoming in enumerate(batch):
            try:
                drafts.append(self._draft(incoming, born_host, writable, lite))
            except errors.ArianeError as exc:
                raise send_draft.refuse_request(exc, position, len(batch)) from None
        if lite and self._lite is not None:
            self._lite.touch_all(lite, self._time.monotonic_ms())
        return drafts

    def _draft(
        self,
        incoming: message.IncomingMessage,
        born_host: message.HostAddress,
        writable: dict[str, topic_config.TopicConfig],
        lite: list[tuple[ids.TopicName, str, int]],
    ) -> send_draft.Draft:
        # ``writable``: topics of this request that passed ``writable_topic`` (name check,
        # lookup or auto-creation, write permission), so each is checked once per request.
        topic = writable.get(incoming.topic)
        if topic is None:
            topic = writable[incoming.topic] = send_draft.writable_topic(
                self._topics, incoming.topic
            )
        kind = message_type(incoming)
        if not topic.message_type.accepts(kind):
            raise errors.MessageTypeConflictError(
                f"topic {topic.name!r} accepts {topic.message_type.value} messages, not "
                f"{kind.value}; send to a topic of that type or change the topic's type"
            )
        route = (  # identity tests: an enum's hash is a Python call
            send_draft.Route.TIMER
            if kind is message.MessageType.DELAY
            else send_draft.Route.HALF
            if kind is message.MessageType.TRANSACTION
            else send_draft.Route.STORE
        )
        if (route is send_draft.Route.HALF and not self._transactions) or (
            route is send_draft.Route.TIMER and not self._delay
        ):
            raise errors.UnsupportedError(
                f"{kind.value} messages are not supported by this broker yet"
            )
        send_draft.check_body(incoming.body, self._limits)
        if incoming.gzip:
            send_draft.check_gzip_body(incoming.body, self._limits.message_size_bytes_max)
        properties = _properties(incoming, kind)
        if kind is message.MessageType.PRIORITY:
            level = priority_mod.check_priority(incoming.priority)
            properties[P.PRIORITY] = str(level)
            queue_id = priority_mod.queue_of(level, topic.write_queue_nums)
        elif kind is message.MessageType.LITE:
            name = properties[P.LITE_TOPIC] = self._lite_topic(incoming)
            queue_id = ids.QueueId(zlib.crc32(name.encode()) % topic.write_queue_nums)
            lite.append((topic.name, name, queue_id))
        else:
            queue_id = self._choose_queue(topic, incoming.message_group)
        request = commit_log.AppendRequest(
            message=message.Message(topic=topic.name, body=incoming.body, properties=properties),
            queue_id=queue_id,
            sys_flag=int(message.SysFlag.COMPRESSED) if incoming.gzip else 0,
            born_timestamp_ms=ids.TimestampMs(incoming.born_timestamp_ms),
            born_host=born_host,
        )
        return send_draft.Draft(
            request,
            incoming.topic,
            kind,
            incoming.message_id,
            route,
            incoming.delivery_timestamp_ms,
        )

    def _lite_topic(self, incoming: message.IncomingMessage) -> str:
        """The lite topic a LITE message names, checked (``tables.lite_topics``).

        Raises:
            UnsupportedError: no lite topic table. IllegalLiteTopicError: none named, or a bad
                name.
        """
        if self._lite is None:
            raise errors.UnsupportedError("LITE messages are not supported by this broker")
        name = incoming.lite_topic
        if name is None:
            raise errors.IllegalLiteTopicError("a LITE message needs a lite_topic")
        return topics.validate_lite_topic(name, bytes_max=self._lite.name_bytes_max)

    def _choose_queue(
        self, topic: topic_config.TopicConfig, message_group: str | None
    ) -> ids.QueueId:
        count = topic.write_queue_nums
        if message_group is not None:
            return ids.QueueId(zlib.crc32(message_group.encode()) % count)
        return ids.QueueId(next(self._round_robin) % count)


def parks(incoming: message.IncomingMessage) -> bool:
    """Whether the message is parked until a delivery time it names (its receipt carries it)."""
    return incoming.message_type == "DELAY" and incoming.delivery_timestamp_ms is not None


def message_type(incoming: message.IncomingMessage) -> message.MessageType:
    """The message's type (UNSPECIFIED: LITE with a lite topic, FIFO with a group, else
    NORMAL).

    Raises:
        UnsupportedError: a type this broker does not take. IllegalMessageGroupError: FIFO
            without a group.
    """
    kind = _ACCEPTED_WIRE_TYPES.get(incoming.message_type)
    if kind is None:
        if incoming.message_type != "UNSPECIFIED":
            raise errors.UnsupportedError(f"{incoming.message_type} messages are not supported")
        kind = (
            message.MessageType.LITE
            if incoming.lite_topic is not None
            else message.MessageType.FIFO
            if incoming.message_group
            else message.MessageType.NORMAL
        )
    if kind is message.MessageType.FIFO and not incoming.message_group:
        raise errors.IllegalMessageGroupError("a FIFO message needs a message group")
    return kind


def _properties(incoming: message.IncomingMessage, kind: message.MessageType) -> dict[str, str]:
    if not incoming.message_id:
        raise errors.IllegalMessageIdError("message id is empty; the client must set one")
    props = _user_properties(incoming.user_properties)
    key = props.get(idempotency.IDEMPOTENCY_KEY_PROPERTY)
    props[P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = (
        incoming.message_id if key is None else send_draft.keyed_message_id(key)
    )
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
