"""Measured alternative (not served): a v2 ``PullMessageResponse`` written straight from a
stored CommitLog record, for ``bench.pull_v2``.

Issue 26 asked whether a v2 pull is cheaper when each message's protobuf wire bytes are
written in one pass over the stored record (header integers and slices of body, topic and
properties; no ``StoredMessage``, no ``pb.v2.Message``) than when the decoded message is copied
into a ``pb.v2.Message`` by ``grpcwire.messages.outgoing_into`` and serialized by upb. It is
not: in pure Python, the ~25 fields' tags, varints and joins cost as much as upb's C setters
plus ``SerializeToString`` (``bench/results/pull_v2-*.md``), and the store's read decodes every
record anyway (CRC checks, the ConsumeQueue unit check, the filter), so the decoded message
the protobuf path starts from is free. The broker keeps the protobuf path; this writer stays
here so the measurement can be repeated.

``message_response(record)`` parses as exactly the ``PullMessageResponse`` the broker sends
for that record (``bench.pull_v2`` checks it before timing).
"""

from __future__ import annotations

import functools
import hashlib
import socket
from typing import NamedTuple

from ariane.common import message
from ariane.grpcwire import messages, pb
from ariane.store import message_codec

P = message.Property

_NAME_VALUE = message_codec.NAME_VALUE_SEPARATOR.encode()
_PROPERTY_END = message_codec.PROPERTY_SEPARATOR.encode()
_KEY_SEPARATOR = message.KEY_SEPARATOR.encode()
_RESERVED = frozenset(k.encode() for k in message.RESERVED_PROPERTY_KEYS)
_TAGS, _KEYS, _UNIQ = P.TAGS.encode(), P.KEYS.encode(), P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX.encode()
_BORN_HOST_NAME, _TYPE = P.BORN_HOST_NAME.encode(), P.MESSAGE_TYPE.encode()
_GROUP, _TRACE = P.SHARDING_KEY.encode(), P.TRACE_CONTEXT.encode()
_DELIVER_MS, _PRIORITY = P.TIMER_DELIVER_MS.encode(), P.PRIORITY.encode()
_COMPRESSED = int(message.SysFlag.COMPRESSED)

_TYPE_VALUES: dict[bytes, int] = {
    name.encode(): int(value) for value, name in messages.MESSAGE_TYPE_NAMES.items()
}
_NORMAL = int(pb.v2.MessageType.NORMAL)
_DIGEST_MD5 = bytes([0x22, 36, 0x08, int(pb.v2.DigestType.MD5), 0x12, 32])
"""Field 4 ``body_digest`` (36 bytes): ``Digest{type: MD5}``, then the tag and length of its
32-character checksum."""
_ENCODING = {True: int(pb.v2.Encoding.GZIP), False: int(pb.v2.Encoding.IDENTITY)}
_PULL_TAIL = b"\x62\x00"
"""SystemProperties field 12 ``receipt_handle`` set to "" (a pull has none; the field has
presence, as ``outgoing_into`` sets it)."""
_NO_INVISIBLE = b"\x7a\x00"
"""Field 15 ``invisible_duration``: a present, zero ``Duration``."""
_ATTEMPT_TAG = b"\x80\x01"  # field 16, varint
_GROUP_TAG = b"\x8a\x01"  # field 17, bytes
_TRACE_TAG = b"\x92\x01"  # field 18, bytes
_PRIORITY_TAG = b"\xb0\x01"  # field 22, varint
_U64 = (1 << 64) - 1


class RecordSections(NamedTuple):
    """A checked record cut into its parts, as slices of it: nothing decoded or copied.

    Attributes:
        queue_id: QUEUEID.
        queue_offset: QUEUEOFFSET.
        sys_flag: SYSFLAG (raw int).
        born_timestamp_ms: BORNTIMESTAMP.
        born_ip: packed born IP (4 or 16 bytes).
        store_timestamp_ms: STORETIMESTAMP.
        store_ip: packed store IP.
        store_port: the store host's port.
        reconsume_times: RECONSUMETIMES.
        body: BODY, a slice of the record.
        topic: the UTF-8 TOPIC, a slice.
        properties: the UTF-8 PROPERTIES without the record-CRC property, a slice.
    """

    queue_id: int
    queue_offset: int
    sys_flag: int
    born_timestamp_ms: int
    born_ip: bytes
    store_timestamp_ms: int
    store_ip: bytes
    store_port: int
    reconsume_times: int
    body: memoryview
    topic: memoryview
    properties: memoryview


def sections(record: memoryview) -> RecordSections:
    """The parts of one whole record already checked by ``decode`` (a store read's
    ``LookupResult.record``), sliced in one pass over its lengths.

    Raises:
        struct.error, ValueError: only for bytes ``decode`` would not have said OK to.
    """
    (sys_flag,) = message_codec._SYSFLAG.unpack_from(record, 36)
    born_v6, store_v6 = message_codec._BORN_V6, message_codec._STORE_V6
    fixed = message_codec._FIXED[(bool(sys_flag & born_v6), bool(sys_flag & store_v6))]
    h = fixed.unpack_from(record, 0)
    p = fixed.size
    body_end = p + h[16]
    if h[1] == message_codec.MAGIC_CODE_V2:
        (topic_length,) = message_codec._SHORT.unpack_from(record, body_end)
        topic_start = body_end + 2
    else:
        topic_length = record[body_end]
        topic_start = body_end + 1
    properties_start = topic_start + topic_length + 2
    if not body_end <= properties_start <= len(record):
        raise ValueError("record lengths do not add up")
    return RecordSections(
        h[3],
        h[5],
        h[7],
        h[8],
        h[9],
        h[11],
        h[12],
        h[13],
        h[14],
        record[p:body_end],
        record[topic_start : topic_start + topic_length],
        message_codec._strip_crc_property(record[properties_start:]),
    )


@functools.lru_cache(maxsize=65_536)
def _varint(value: int) -> bytes:
    """A protobuf varint; a negative value as its 64-bit two's complement (int32/int64).
    Cached: lengths, seconds, nanos and small counts repeat from message to message."""
    value &= _U64
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _timestamp(tag: bytes, ms: int) -> bytes:
    """A present ``Timestamp`` field for ``ms`` (seconds and nanos as ``outgoing_into``)."""
    seconds, millis = divmod(ms, 1000)
    inner = (b"\x08" + _varint(seconds) if seconds else b"") + (
        b"\x10" + _varint(millis * 1_000_000) if millis else b""
    )
    return tag + _varint(len(inner)) + inner


@functools.lru_cache(maxsize=1024)
def _resource(namespace: str, topic: bytes) -> bytes:
    """Message field 1, the topic ``Resource`` (one per topic and namespace)."""
    inner = b"\x12" + _varint(len(topic)) + topic
    if namespace:
        name = namespace.encode()
        inner = b"\x0a" + _varint(len(name)) + name + inner
    return b"\x0a" + _varint(len(inner)) + inner


def _ip_text(packed: bytes) -> str:
    return socket.inet_ntop(socket.AF_INET6 if len(packed) == 16 else socket.AF_INET, packed)


@functools.lru_cache(maxsize=1024)
def _born_ip(packed: bytes) -> bytes:
    return _ip_text(packed).encode()


@functools.lru_cache(maxsize=1024)
def _store_host(packed: bytes, port: int) -> bytes:
    """SystemProperties field 10 ``store_host`` as ``str(HostAddress)`` writes it."""
    text = str(message.HostAddress(_ip_text(packed), port)).encode()
    return b"\x52" + _varint(len(text)) + text


@functools.lru_cache(maxsize=64)
def _kind(compressed: bool, type_name: bytes) -> bytes:
    """Fields 5 ``body_encoding`` and 6 ``message_type``."""
    encoding = _ENCODING[compressed]
    return b"\x28" + _varint(encoding) + b"\x30" + _varint(_TYPE_VALUES.get(type_name, _NORMAL))


def _properties(data: memoryview) -> dict[bytes, bytes] | None:
    """The properties of a record, name to value, as bytes (``bytes_to_properties`` without
    decoding); ``None`` when they are not strict UTF-8."""
    raw = bytes(data)
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    try:  # every item "name\x01value": one C-level split each
        found = dict(item.split(_NAME_VALUE, 1) for item in raw.split(_PROPERTY_END) if item)
    except ValueError:  # an item without a separator, skipped as RocketMQ does
        found = {}
        for item in raw.split(_PROPERTY_END):
            name, sep, value = item.partition(_NAME_VALUE)
            if sep:
                found[name] = value
    found.pop(b"", None)  # an empty name is no property
    return found


@functools.lru_cache(maxsize=4096)
def _entry_head(name: bytes) -> bytes:
    """A ``user_properties`` map entry up to its value's length: key field and value tag
    (property names are a small vocabulary; one per name)."""
    return b"\x0a" + _varint(len(name)) + name + b"\x12"


def _utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def message_response(record: memoryview, namespace: str = "") -> bytes | None:
    """The serialized ``PullMessageResponse`` carrying the message of one stored record.

    Args:
        record: one whole record as the store read and checked it (``LookupResult.record``).
        namespace: the resource namespace the request named (set on the topic when not "").

    Returns:
        the response's wire bytes, or ``None`` when the record's properties or topic are not
        strict UTF-8 (the caller builds the protobuf message instead).
    """
    parts = sections(record)
    props = _properties(parts.properties)
    topic = bytes(parts.topic)
    if props is None or (not topic.isascii() and not _utf8(topic)):
        return None
    out: list[bytes | memoryview] = [_resource(namespace, topic)]
    for name, value in props.items():
        if name not in _RESERVED:
            entry = _entry_head(name) + _varint(len(value)) + value
            out += (b"\x12", _varint(len(entry)), entry)
    system = _system_properties(parts, props)
    body = parts.body
    out += [b"\x1a", _varint(len(system)), system, b"\x22", _varint(len(body)), body]
    inner = b"".join(out)
    return b"\x12" + _varint(len(inner)) + inner


def _system_properties(parts: RecordSections, props: dict[bytes, bytes]) -> bytes:
    """``SystemProperties`` in field order, as ``messages._system_properties`` sets them."""
    get = props.get
    out = []
    tag = get(_TAGS)
    if tag is not None:
        out.append(b"\x0a%b%b" % (_varint(len(tag)), tag))
    keys = get(_KEYS)
    if keys:
        out += [b"\x12%b%b" % (_varint(len(k)), k) for k in keys.split(_KEY_SEPARATOR) if k]
    message_id = get(_UNIQ)
    if message_id:
        out.append(b"\x1a%b%b" % (_varint(len(message_id)), message_id))
    checksum = hashlib.md5(parts.body, usedforsecurity=False).hexdigest().upper().encode()
    out += [_DIGEST_MD5, checksum, _kind(bool(parts.sys_flag & _COMPRESSED), get(_TYPE, b""))]
    out.append(_timestamp(b"\x3a", parts.born_timestamp_ms))
    born_host = get(_BORN_HOST_NAME)
    if born_host is None:
        born_host = _born_ip(parts.born_ip)
    if born_host:
        out.append(b"\x42%b%b" % (_varint(len(born_host)), born_host))
    out += [
        _timestamp(b"\x4a", parts.store_timestamp_ms),
        _store_host(parts.store_ip, parts.store_port),
    ]
    deliver_ms = get(_DELIVER_MS)
    if deliver_ms is not None:
        out.append(_timestamp(b"\x5a", int(deliver_ms)))
    queue_id = b"\x68" + _varint(parts.queue_id) if parts.queue_id else b""
    out.append(
        b"%b%b\x70%b%b%b%b"
        % (
            _PULL_TAIL,
            queue_id,
            _varint(parts.queue_offset),
            _NO_INVISIBLE,
            _ATTEMPT_TAG,
            _varint(parts.reconsume_times + 1),
        )
    )
    group = get(_GROUP)
    if group is not None:
        out.append(_GROUP_TAG + _varint(len(group)) + group)
    trace = get(_TRACE)
    if trace is not None:
        out.append(_TRACE_TAG + _varint(len(trace)) + trace)
    priority = get(_PRIORITY)
    if priority is not None:
        out.append(_PRIORITY_TAG + _varint(int(priority)))
    return b"".join(out)
