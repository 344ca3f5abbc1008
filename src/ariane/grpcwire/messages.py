"""v2 ``Message`` ↔ Ariane message values (grpc-v2.md §3, §6.3, §6.4).

``incoming`` turns a ``SendMessage`` message into a neutral ``common.message.IncomingMessage``.
It checks only what its conversions need: every enum is a value this build knows
(``message_type`` 99 and ``body_encoding`` 7 are BAD_REQUEST, not silently NORMAL/IDENTITY) and
every timestamp lies in protobuf's ``Timestamp`` range (years 1..9999, nanos 0..999,999,999), so
a converted value always fits the store's signed 64-bit fields; a seconds value of -2^62 is
refused here instead of failing inside ``struct`` mid-batch. The broker's send path validates
the rest.

``outgoing`` builds the v2 ``Message`` a consumer receives from a ``StoredMessage`` with the
system properties the official clients require: ``body_encoding`` set, an upper-case MD5
``body_digest``, ``delivery_attempt >= 1``, the receipt handle, and only non-reserved keys in
``user_properties``.

Stored properties use RocketMQ's names (``TAGS``, ``KEYS``, ``UNIQ_KEY``, ``__SHARDINGKEY`` …,
``ariane.common.message.Property``); everything else in a stored message's properties is a user
property.
"""

from __future__ import annotations

import hashlib
import typing
from collections.abc import Mapping

from google.protobuf import duration_pb2, timestamp_pb2

from ariane.common import errors, message
from ariane.grpcwire import pb

P = message.Property

MESSAGE_TYPE_NAMES: dict[int, str] = {
    pb.v2.MessageType.NORMAL: "NORMAL",
    pb.v2.MessageType.FIFO: "FIFO",
    pb.v2.MessageType.DELAY: "DELAY",
    pb.v2.MessageType.TRANSACTION: "TRANSACTION",
    pb.v2.MessageType.LITE: "LITE",
    pb.v2.MessageType.PRIORITY: "PRIORITY",
}
"""Wire message types by their stored name (``__MESSAGE_TYPE`` property)."""

_TYPE_NAMES = frozenset(MESSAGE_TYPE_NAMES.values())
_TYPE_VALUES: dict[str, pb.v2.MessageType] = {
    name: typing.cast(pb.v2.MessageType, value) for value, name in MESSAGE_TYPE_NAMES.items()
}
TIMESTAMP_SECONDS_MIN = -62_135_596_800
"""Earliest ``Timestamp.seconds`` protobuf allows (0001-01-01T00:00:00Z), s."""

TIMESTAMP_SECONDS_MAX = 253_402_300_799
"""Latest ``Timestamp.seconds`` protobuf allows (9999-12-31T23:59:59Z), s."""

_NANOS_MAX = 999_999_999
_KNOWN_MESSAGE_TYPES = frozenset(pb.v2.MessageType.values())
_KNOWN_ENCODINGS = frozenset(pb.v2.Encoding.values())
_NORMAL = pb.v2.MessageType.NORMAL
_MD5 = pb.v2.DigestType.MD5
_GZIP = pb.v2.Encoding.GZIP
_IDENTITY = pb.v2.Encoding.IDENTITY


def timestamp_ms(value: timestamp_pb2.Timestamp) -> int:
    """A protobuf ``Timestamp`` in ms since the epoch (seconds·1000 + nanos/1e6)."""
    return value.seconds * 1000 + value.nanos // 1_000_000


def checked_timestamp_ms(
    value: timestamp_pb2.Timestamp, field: str, error: type[errors.BadRequestError]
) -> int:
    """A client's ``Timestamp`` in ms since the epoch, refused when outside protobuf's range.

    Args:
        value: the timestamp as sent.
        field: its field name, for the message.
        error: the BAD_REQUEST-family error to raise (``IllegalDeliveryTimeError`` for
            ``delivery_timestamp``, ``BadRequestError`` for ``born_timestamp``).

    Returns:
        ms since the epoch, within ±2^53 (fits every signed 64-bit field of the store).

    Raises:
        BadRequestError: (``error``) when seconds are outside TIMESTAMP_SECONDS_MIN ..
            TIMESTAMP_SECONDS_MAX or nanos outside 0 .. 999,999,999.
    """
    seconds, nanos = value.seconds, value.nanos
    if (
        not TIMESTAMP_SECONDS_MIN <= seconds <= TIMESTAMP_SECONDS_MAX
        or not 0 <= nanos <= _NANOS_MAX
    ):
        raise error(
            f"{field} (seconds={seconds}, nanos={nanos}) is not a valid timestamp: seconds must "
            f"be {TIMESTAMP_SECONDS_MIN}..{TIMESTAMP_SECONDS_MAX} and nanos 0..{_NANOS_MAX}"
        )
    return seconds * 1000 + nanos // 1_000_000


def timestamp(ms: int) -> timestamp_pb2.Timestamp:
    """ms since the epoch as a protobuf ``Timestamp``."""
    return timestamp_pb2.Timestamp(seconds=ms // 1000, nanos=(ms % 1000) * 1_000_000)


def incoming(msg: pb.v2.Message) -> message.IncomingMessage:
    """Decode one message of a SendMessageRequest.

    Runs for every message sent: protobuf enum values are module constants (an attribute of
    an ``EnumTypeWrapper`` is a Python-level ``__getattr__``) and empty repeated/map fields are
    not converted.

    Raises:
        BadRequestError: ``message_type`` or ``body_encoding`` is a number this build does not
            know, or ``born_timestamp`` is outside protobuf's ``Timestamp`` range.
        IllegalDeliveryTimeError: ``delivery_timestamp`` is outside that range.
    """
    props = msg.system_properties
    user = msg.user_properties
    keys = props.keys
    if props.message_type not in _KNOWN_MESSAGE_TYPES:
        raise errors.BadRequestError(f"message_type {props.message_type} is not a MessageType")
    if props.body_encoding not in _KNOWN_ENCODINGS:
        raise errors.BadRequestError(f"body_encoding {props.body_encoding} is not an Encoding")
    return message.IncomingMessage(
        topic=msg.topic.name,
        body=msg.body,
        gzip=props.body_encoding == _GZIP,
        user_properties=dict(user) if user else {},
        tag=props.tag if props.HasField("tag") else None,
        keys=tuple(keys) if keys else (),
        message_id=props.message_id,
        message_type=MESSAGE_TYPE_NAMES.get(props.message_type, "UNSPECIFIED"),
        message_group=props.message_group if props.HasField("message_group") else None,
        delivery_timestamp_ms=(
            checked_timestamp_ms(
                props.delivery_timestamp, "delivery_timestamp", errors.IllegalDeliveryTimeError
            )
            if props.HasField("delivery_timestamp")
            else None
        ),
        born_timestamp_ms=checked_timestamp_ms(
            props.born_timestamp, "born_timestamp", errors.BadRequestError
        ),
        born_host=props.born_host,
        trace_context=props.trace_context if props.HasField("trace_context") else None,
        priority=props.priority if props.HasField("priority") else None,
        lite_topic=props.lite_topic if props.HasField("lite_topic") else None,
    )


def outgoing(
    stored: message.StoredMessage, delivery: message.Delivery, namespace: str = ""
) -> pb.v2.Message:
    """The v2 ``Message`` a consumer receives (grpc-v2.md §6.4 table); see ``outgoing_into``."""
    result = pb.v2.Message()
    outgoing_into(result, stored, delivery, namespace)
    return result


def outgoing_into(
    target: pb.v2.Message,
    stored: message.StoredMessage,
    delivery: message.Delivery,
    namespace: str = "",
) -> None:
    """Fill the empty ``target`` with the v2 ``Message`` a consumer receives (§6.4 table).

    Fields are set in place on ``target`` and its sub-messages: no intermediate ``Timestamp``,
    ``Digest`` or ``SystemProperties`` is built and then copied (upb copies every message
    passed as a constructor argument), and a caller can fill the ``message`` field of its
    response directly. Setting a field of a sub-message marks it present, so a zero
    timestamp is still sent, as the official clients require.
    """
    props = stored.properties
    target.topic.name = stored.topic
    if namespace:
        target.topic.resource_namespace = namespace
    user = {k: v for k, v in props.items() if k not in message.RESERVED_PROPERTY_KEYS}
    if user:
        target.user_properties.update(user)
    system = target.system_properties
    _system_properties(system, stored, props)
    system.receipt_handle = delivery.receipt_handle
    _set_duration(system.invisible_duration, delivery.invisible_ms)
    system.delivery_attempt = delivery.attempt
    if delivery.dead_letter_origin is not None:
        dead_letter = system.dead_letter_queue
        dead_letter.topic, dead_letter.message_id = delivery.dead_letter_origin
    target.body = stored.body


def _system_properties(
    system: pb.v2.SystemProperties, stored: message.StoredMessage, props: Mapping[str, str]
) -> None:
    # Field numbers order, as the constructor of the previous version set them.
    if P.TAGS in props:
        system.tag = props[P.TAGS]
    keys = props.get(P.KEYS)
    if keys:
        system.keys.extend([k for k in keys.split(message.KEY_SEPARATOR) if k])
    system.message_id = props.get(P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX, "")
    digest = system.body_digest
    digest.type = _MD5
    digest.checksum = hashlib.md5(stored.body).hexdigest().upper()
    system.body_encoding = _GZIP if stored.sys_flag & message.SysFlag.COMPRESSED else _IDENTITY
    system.message_type = _TYPE_VALUES.get(props.get(P.MESSAGE_TYPE, ""), _NORMAL)
    _set_timestamp(system.born_timestamp, stored.born_timestamp_ms)
    system.born_host = props.get(P.BORN_HOST_NAME, stored.born_host.ip)
    _set_timestamp(system.store_timestamp, stored.store_timestamp_ms)
    system.store_host = str(stored.store_host)
    system.queue_id = stored.queue_id
    system.queue_offset = stored.queue_offset
    if P.SHARDING_KEY in props:
        system.message_group = props[P.SHARDING_KEY]
    if P.TIMER_DELIVER_MS in props:
        _set_timestamp(system.delivery_timestamp, int(props[P.TIMER_DELIVER_MS]))
    if P.TRACE_CONTEXT in props:
        system.trace_context = props[P.TRACE_CONTEXT]
    if P.PRIORITY in props:
        system.priority = int(props[P.PRIORITY])
    if P.LITE_TOPIC in props:
        system.lite_topic = props[P.LITE_TOPIC]


def _set_timestamp(target: timestamp_pb2.Timestamp, ms: int) -> None:
    target.seconds = ms // 1000
    target.nanos = (ms % 1000) * 1_000_000


def _set_duration(target: duration_pb2.Duration, ms: int) -> None:
    target.seconds = ms // 1000
    target.nanos = (ms % 1000) * 1_000_000


def duration(ms: int) -> duration_pb2.Duration:
    """ms as a protobuf ``Duration``."""
    return duration_pb2.Duration(seconds=ms // 1000, nanos=(ms % 1000) * 1_000_000)


def duration_ms(value: duration_pb2.Duration) -> int:
    """A protobuf ``Duration`` in ms."""
    return value.seconds * 1000 + value.nanos // 1_000_000
