"""Message value types and RocketMQ's well-known property names.

A ``Message`` is what a producer sends (topic, body, properties, flag); a ``StoredMessage`` is a
message as the broker stored it (RocketMQ's ``MessageExt``): with its queue id, queue offset,
commit-log offset, timestamps, hosts and reconsume count. Both are immutable values.
Property names and system-flag bits are RocketMQ's (``MessageConst``, ``MessageSysFlag``).
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping

from ariane.common import ids


class Property:
    """Names of RocketMQ's system properties (``MessageConst``)."""

    KEYS = "KEYS"
    TAGS = "TAGS"
    WAIT_STORE_MSG_OK = "WAIT"
    DELAY_TIME_LEVEL = "DELAY"
    RETRY_TOPIC = "RETRY_TOPIC"
    REAL_TOPIC = "REAL_TOPIC"
    REAL_QUEUE_ID = "REAL_QID"
    TRANSACTION_PREPARED = "TRAN_MSG"
    PRODUCER_GROUP = "PGROUP"
    MIN_OFFSET = "MIN_OFFSET"
    MAX_OFFSET = "MAX_OFFSET"
    ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"
    RECONSUME_TIME = "RECONSUME_TIME"
    UNIQ_CLIENT_MESSAGE_ID_KEYIDX = "UNIQ_KEY"
    MAX_RECONSUME_TIMES = "MAX_RECONSUME_TIMES"
    SHARDING_KEY = "__SHARDINGKEY"
    TIMER_DELIVER_MS = "TIMER_DELIVER_MS"
    TIMER_DELAY_SEC = "TIMER_DELAY_SEC"
    TIMER_DELAY_MS = "TIMER_DELAY_MS"
    TRANSACTION_CHECK_TIMES = "TRANSACTION_CHECK_TIMES"
    CHECK_IMMUNITY_TIME_IN_SECONDS = "CHECK_IMMUNITY_TIME_IN_SECONDS"
    TRACE_CONTEXT = "TRACE_CONTEXT"
    BORN_HOST_NAME = "__BORNHOST"
    MESSAGE_TYPE = "__MESSAGE_TYPE"
    DLQ_ORIGIN_TOPIC = "DLQ_ORIGIN_TOPIC"
    DLQ_ORIGIN_MESSAGE_ID = "DLQ_ORIGIN_MESSAGE_ID"
    PRIORITY = "_SYS_MSG_PRIORITY_"
    LITE_TOPIC = "__LITE_TOPIC"


KEY_SEPARATOR = " "
"""RocketMQ joins several keys into the KEYS property with a space (MessageConst.KEY_SEPARATOR)."""


class SysFlag(enum.IntFlag):
    """Bits of the stored SYSFLAG field (RocketMQ ``MessageSysFlag``)."""

    NONE = 0
    COMPRESSED = 0x1
    MULTI_TAGS = 0x2
    TRANSACTION_PREPARED = 0x4
    TRANSACTION_COMMIT = 0x8
    TRANSACTION_ROLLBACK = 0xC
    BORNHOST_V6 = 0x10
    STOREHOST_V6 = 0x20
    NEED_UNWRAP = 0x40
    INNER_BATCH = 0x80


TRANSACTION_TYPE_MASK = 0xC
"""The two SYSFLAG bits that hold the transaction type."""


class MessageType(enum.Enum):
    """Topic message types (RocketMQ ``TopicMessageType``).

    MIXED accepts NORMAL, FIFO, DELAY and TRANSACTION messages; PRIORITY (RocketMQ 5.4, RIP-80)
    accepts PRIORITY messages only and LITE (RocketMQ 5.5, RIP-83: the parent of many lite
    topics) LITE messages only, as RocketMQ's ``RouteActivity`` maps the types.
    """

    NORMAL = "NORMAL"
    FIFO = "FIFO"
    DELAY = "DELAY"
    TRANSACTION = "TRANSACTION"
    MIXED = "MIXED"
    PRIORITY = "PRIORITY"
    LITE = "LITE"

    def accepts(self, kind: MessageType) -> bool:
        """Whether a topic of this type accepts a message of ``kind``."""
        if self is MessageType.MIXED:
            return kind is not MessageType.PRIORITY and kind is not MessageType.LITE
        return self is kind


@dataclasses.dataclass(frozen=True, slots=True)
class HostAddress:
    """An IP address and port as stored in BORNHOST/STOREHOST.

    Attributes:
        ip: a literal IPv4 or IPv6 address (``"127.0.0.1"``, ``"::1"``).
        port: TCP port, 0..65535.
    """

    ip: str
    port: int

    def __str__(self) -> str:
        return f"[{self.ip}]:{self.port}" if ":" in self.ip else f"{self.ip}:{self.port}"


LOOPBACK = HostAddress("127.0.0.1", 0)


@dataclasses.dataclass(frozen=True, slots=True)
class Message:
    """A message as a producer sends it (RocketMQ ``Message``).

    Attributes:
        topic: the destination topic.
        body: the payload, 1 byte .. ``message_size_bytes_max``.
        properties: system and user properties (string → string).
        flag: an application-defined integer stored as FLAG.
    """

    topic: ids.TopicName
    body: bytes
    properties: Mapping[str, str] = dataclasses.field(default_factory=dict)
    flag: int = 0

    @property
    def tags(self) -> str | None:
        """The TAGS property, or ``None``."""
        return self.properties.get(Property.TAGS)

    @property
    def keys(self) -> tuple[str, ...]:
        """The KEYS property split on spaces (empty when absent)."""
        raw = self.properties.get(Property.KEYS, "")
        return tuple(k for k in raw.split(KEY_SEPARATOR) if k)

    @property
    def message_group(self) -> str | None:
        """The FIFO message group (``__SHARDINGKEY``), or ``None``."""
        return self.properties.get(Property.SHARDING_KEY)

    @property
    def uniq_key(self) -> ids.MessageId | None:
        """The client-made message id (``UNIQ_KEY``), or ``None``."""
        value = self.properties.get(Property.UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
        return None if value is None else ids.MessageId(value)


@dataclasses.dataclass(frozen=True, slots=True)
class StoredMessage:
    """A message as stored in the CommitLog (RocketMQ ``MessageExt``).

    Attributes:
        message: topic, body, properties and flag.
        queue_id: the queue the message was appended to.
        queue_offset: its index in that ConsumeQueue.
        commit_log_offset: byte position of its record in the CommitLog.
        store_size_bytes: length of the whole stored record (TOTALSIZE).
        sys_flag: SYSFLAG bits.
        born_timestamp_ms: when the producer made it, ms since epoch.
        born_host: the producer's address.
        store_timestamp_ms: when the broker stored it, ms since epoch.
        store_host: the broker's address.
        reconsume_times: how many times it was redelivered (RECONSUMETIMES).
        prepared_transaction_offset: commit-log offset of the half message, for op records.
        body_crc: CRC32 of the body as stored.
    """

    message: Message
    queue_id: ids.QueueId
    queue_offset: ids.QueueOffset
    commit_log_offset: ids.CommitLogOffset
    store_size_bytes: int
    sys_flag: SysFlag
    born_timestamp_ms: ids.TimestampMs
    born_host: HostAddress
    store_timestamp_ms: ids.TimestampMs
    store_host: HostAddress
    reconsume_times: int
    prepared_transaction_offset: ids.CommitLogOffset
    body_crc: int

    @property
    def topic(self) -> ids.TopicName:
        """The topic of the stored message."""
        return self.message.topic

    @property
    def body(self) -> bytes:
        """The stored body."""
        return self.message.body

    @property
    def properties(self) -> Mapping[str, str]:
        """The stored properties."""
        return self.message.properties


RESERVED_PROPERTY_KEYS: frozenset[str] = frozenset(
    value
    for name, value in vars(Property).items()
    if not name.startswith("_") and isinstance(value, str)
)
"""Property names that are system properties and may not be user property keys."""


@dataclasses.dataclass(frozen=True, slots=True)
class IncomingMessage:
    """A message of a SendMessage request, decoded but not validated.

    Attributes:
        topic: topic name as sent.
        body: the body bytes (compressed when ``gzip``).
        gzip: ``body_encoding`` was GZIP.
        user_properties: the user properties.
        tag: the tag, or ``None``.
        keys: the keys.
        message_id: the client's message id (stored as UNIQ_KEY).
        message_type: the wire message type name (``NORMAL``, ``FIFO`` …) or ``UNSPECIFIED``.
        message_group: the FIFO message group, or ``None``.
        delivery_timestamp_ms: requested delivery time, or ``None``.
        born_timestamp_ms: when the client made it (whole seconds from Python), ms.
        born_host: the host name/IP the client reported.
        trace_context: the trace context, or ``None``.
        priority: the ``priority`` system property (RocketMQ 5.4), or ``None`` when unset.
        lite_topic: the ``lite_topic`` system property (RocketMQ 5.5), or ``None`` when unset.
    """

    topic: str
    body: bytes
    gzip: bool
    user_properties: dict[str, str]
    tag: str | None
    keys: tuple[str, ...]
    message_id: str
    message_type: str
    message_group: str | None
    delivery_timestamp_ms: int | None
    born_timestamp_ms: int
    born_host: str
    trace_context: str | None
    priority: int | None = None
    lite_topic: str | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class Delivery:
    """What a receive adds to a stored message.

    Attributes:
        receipt_handle: the encoded handle the client acks with.
        invisible_ms: how long the message stays invisible, ms.
        attempt: the delivery attempt, ≥ 1.
        dead_letter_origin: ``(topic, message id)`` when read from a DLQ, else ``None``.
    """

    receipt_handle: str
    invisible_ms: int
    attempt: int
    dead_letter_origin: tuple[str, str] | None = None


def message_id_of(stored: StoredMessage) -> ids.MessageId:
    """The client message id (UNIQ_KEY) of a stored message, or "" when it has none."""
    return ids.MessageId(stored.properties.get(Property.UNIQ_CLIENT_MESSAGE_ID_KEYIDX, ""))
