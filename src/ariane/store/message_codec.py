"""The CommitLog record format: RocketMQ's stored-message layout, pure encode/decode, no I/O.

Module length: longer than the store's ~600-line bound on purpose: it is the one codec of the
record (layout table, encode, the hot-path prepare, decode with every bounds check, offset
message ids), and splitting the layout from the code that must match it byte for byte would
separate the table from its only readers.

Every integer is big-endian (Java ``ByteBuffer``). One record::

    offset  size    field                         notes
    0       4       TOTALSIZE                     whole record, bytes
    4       4       MAGICCODE                     V1 -626843481 / V2 -626843477 / BLANK -875286124
    8       4       BODYCRC                       zlib CRC32 of BODY & 0x7FFFFFFF (UtilAll.crc32)
    12      4       QUEUEID
    16      4       FLAG                          application flag
    20      8       QUEUEOFFSET                   index in the (topic, queue id) ConsumeQueue
    28      8       PHYSICALOFFSET                this record's CommitLog offset
    36      4       SYSFLAG                       0x10 BORNHOST_V6, 0x20 STOREHOST_V6, ...
    40      8       BORNTIMESTAMP                 ms since epoch
    48      8|20    BORNHOST                      IPv4 4 + port 4, or IPv6 16 + port 4
    ..      8       STORETIMESTAMP                ms since epoch
    ..      8|20    STOREHOST                     as BORNHOST
    ..      4       RECONSUMETIMES
    ..      8       PREPARED_TRANSACTION_OFFSET
    ..      4+n     BODY                          length, bytes
    ..      1+n     TOPIC (V1) | 2+n (V2)         UTF-8; V2 when the topic is over 127 bytes
    ..      2+n     PROPERTIES                    UTF-8 ``name\\x01value\\x02`` per property

With IPv4 hosts the fixed part is 84 bytes and BODY's length sits at offset 84. Ariane always
ends PROPERTIES with RocketMQ's record-CRC property (``enabledAppendPropCRC``): the 20 bytes
``__CRC32#\\x01`` + ten decimal digits + ``\\x02``, the CRC32 (& 0x7FFFFFFF) of every record byte
before those 20. It catches torn or flipped headers, topics and properties, which BODYCRC alone
misses. Decoding strips it from the returned properties.

A segment ends with a BLANK record: TOTALSIZE = bytes left in the segment, MAGICCODE = BLANK,
the rest zero. Bytes never written are zero, so eight zero bytes where a record would start
mean END (no more data). ``decode`` never raises for bad input: it answers OK, BLANK, END or
CORRUPT (bad magic, bad size, bad CRC, truncated, undecodable text).
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import socket
import struct
import zlib
from collections.abc import Mapping
from typing import NamedTuple

from ariane.common import hashing, ids, message_id
from ariane.common import message as message_mod

MAGIC_CODE_V1 = -626843481
MAGIC_CODE_V2 = -626843477
BLANK_MAGIC_CODE = -875286124

END_FILE_MIN_BLANK_BYTES = 8
"""A segment always keeps room for a BLANK header (TOTALSIZE + MAGICCODE)."""

BODY_LENGTH_POSITION_V4 = 84
"""Position of BODY's length field when both hosts are IPv4."""

NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"

CRC_PROPERTY_NAME = "__CRC32#"
"""RocketMQ ``MessageConst.PROPERTY_CRC32``."""
CRC_PROPERTY_BYTES = len(CRC_PROPERTY_NAME) + 1 + 10 + 1
"""Length of the record-CRC property (RocketMQ ``CommitLog.CRC32_RESERVED_LEN``)."""

BODY_CRC_MISMATCH = "body CRC mismatch"
"""``DecodeResult.reason`` when BODYCRC fails (checked before the record CRC): with one flipped
bit, only the body or the BODYCRC field changed, never the header, topic or properties."""

TOPIC_BYTES_MAX = 32_767
"""Longest encodable topic (V2 length field); the store enforces a much lower limit."""

_NAME_VALUE = NAME_VALUE_SEPARATOR.encode()
_PROPERTY_END = PROPERTY_SEPARATOR.encode()
_CRC_PREFIX = (CRC_PROPERTY_NAME + NAME_VALUE_SEPARATOR).encode()
_CRC_SUFFIX = PROPERTY_SEPARATOR.encode()
_V1_TOPIC_BYTES_MAX = 127
_CRC_MASK = 0x7FFFFFFF
_BORN_V6 = int(message_mod.SysFlag.BORNHOST_V6)
_STORE_V6 = int(message_mod.SysFlag.STOREHOST_V6)
_HOST_V6_BITS = _BORN_V6 | _STORE_V6

_SIZE_MAGIC = struct.Struct(">ii")
_SYSFLAG = struct.Struct(">i")
_INT = struct.Struct(">i")
_SHORT = struct.Struct(">h")


def _fixed_struct(born_ip_bytes: int, store_ip_bytes: int) -> struct.Struct:
    # TOTALSIZE .. BODY length, one pack/unpack per record.
    return struct.Struct(f">iiiiiqqiq{born_ip_bytes}siq{store_ip_bytes}siiqi")


_FIXED: dict[tuple[bool, bool], struct.Struct] = {
    (born_v6, store_v6): _fixed_struct(16 if born_v6 else 4, 16 if store_v6 else 4)
    for born_v6 in (False, True)
    for store_v6 in (False, True)
}
FIXED_PART_BYTES_MIN = _FIXED[(False, False)].size
"""Smallest possible record minus its variable parts: 88 bytes (IPv4, up to BODY length)."""
RECORD_BYTES_MIN = FIXED_PART_BYTES_MIN + 1 + 2
"""Smallest well-formed record (empty body, topic, properties)."""


class DecodeStatus(enum.Enum):
    """What ``decode`` found at a position."""

    OK = "OK"
    """A well-formed message record."""
    BLANK = "BLANK"
    """The end-of-segment filler: continue at the next segment."""
    END = "END"
    """Zero bytes (or nothing): no more data was ever written here."""
    CORRUPT = "CORRUPT"
    """Anything else: bad magic, bad size, bad CRC, truncated or undecodable."""


class PrepareProblem(enum.Enum):
    """Why a message cannot be encoded (mapped to a PutMessageStatus by the CommitLog)."""

    BODY_EMPTY = "BODY_EMPTY"
    BODY_TOO_LARGE = "BODY_TOO_LARGE"
    PROPERTIES_TOO_LARGE = "PROPERTIES_TOO_LARGE"
    PROPERTY_ILLEGAL = "PROPERTY_ILLEGAL"
    TOPIC_ILLEGAL = "TOPIC_ILLEGAL"
    HOST_ILLEGAL = "HOST_ILLEGAL"
    FIELD_OUT_OF_RANGE = "FIELD_OUT_OF_RANGE"
    RECORD_TOO_LARGE = "RECORD_TOO_LARGE"
    """The whole record exceeds what the CommitLog writes (``CommitLog.prepare``)."""


class PreparedRecord(NamedTuple):
    """The parts of a record known before its offsets are assigned (computed outside locks).

    A NamedTuple rather than a dataclass: one is built per appended message.

    Attributes:
        total_size: TOTALSIZE of the record, bytes.
        body: the body.
        body_crc: BODYCRC.
        topic_bytes: the UTF-8 topic.
        properties_bytes: the UTF-8 properties without the record-CRC property.
        fixed: the struct packing TOTALSIZE .. BODY length for these host kinds.
        magic: MAGIC_CODE_V1 or MAGIC_CODE_V2 (by topic length).
        sys_flag: SYSFLAG with the host-kind bits set.
        born_ip: packed born IP (4 or 16 bytes).
        store_ip: packed store IP.
    """

    total_size: int
    body: bytes
    body_crc: int
    topic_bytes: bytes
    properties_bytes: bytes
    fixed: struct.Struct
    magic: int
    sys_flag: int
    born_ip: bytes
    store_ip: bytes


class RecordFields(NamedTuple):
    """The fields of a record besides topic, body and properties (inputs to ``prepare``)."""

    queue_id: int
    flag: int
    sys_flag: int
    born_timestamp_ms: int
    born_host: message_mod.HostAddress
    store_host: message_mod.HostAddress
    reconsume_times: int
    prepared_transaction_offset: int


@dataclasses.dataclass(frozen=True, slots=True)
class DecodeResult:
    """The outcome of ``decode``.

    Attributes:
        status: OK, BLANK, END or CORRUPT.
        size: TOTALSIZE for OK and BLANK (bytes to skip), 0 otherwise.
        message: the stored message when OK, else ``None``.
        reason: a short human reason when CORRUPT.
    """

    status: DecodeStatus
    size: int = 0
    message: message_mod.StoredMessage | None = None
    reason: str = ""


_END = DecodeResult(DecodeStatus.END)


def body_crc(body: bytes | memoryview) -> int:
    """RocketMQ's body CRC: zlib CRC32 masked to 31 bits (``UtilAll.crc32``)."""
    return zlib.crc32(body) & _CRC_MASK


@functools.lru_cache(maxsize=4096)
def tag_hash_code(tag: str) -> int:
    """Java ``String.hashCode`` of a tag: the ConsumeQueue tag code (``tagsString2tagsCode``).

    Args:
        tag: the TAGS property; hashed over its UTF-16 code units as Java does.

    Returns:
        a signed 32-bit integer (stored sign-extended in the 8-byte tag field).
    """
    return hashing.java_string_hash(tag)


def properties_to_bytes(properties: Mapping[str, str]) -> bytes | None:
    """Encode properties as ``name\\x01value\\x02`` each (RocketMQ ``messageProperties2String``).

    Returns:
        the UTF-8 bytes, or ``None`` if a name is empty or a name/value holds a separator
        (such a message cannot round-trip, so the store refuses it).
    """
    if not properties:
        return b""
    text = "".join(
        [
            f"{name}{NAME_VALUE_SEPARATOR}{value}{PROPERTY_SEPARATOR}"
            for name, value in properties.items()
        ]
    )
    # Each property adds exactly one separator of each kind unless a name or value holds one.
    count = len(properties)
    if text.count(NAME_VALUE_SEPARATOR) != count or text.count(PROPERTY_SEPARATOR) != count:
        return None
    if "" in properties:
        return None
    return text.encode("utf-8", "surrogatepass")


def is_encoding_of(data: bytes, properties: Mapping[str, str]) -> bool:
    """Whether ``data`` is exactly ``properties_to_bytes(properties)``, for ``properties`` parsed
    from ``data`` (``bytes_to_properties`` or the Remoting codec's, which also skips empty
    values); cheaper than encoding again.

    Each parsed item took one name/value separator and ended at one property separator, so
    when both counts equal the number of properties and ``data`` ends with a property
    separator, no item was skipped, merged or repeated: ``data`` is their encoding in order.
    """
    count = len(properties)
    if not data:
        return count == 0
    return (
        data[-1:] == _PROPERTY_END
        and data.count(_NAME_VALUE) == count
        and data.count(_PROPERTY_END) == count
    )


def bytes_to_properties(data: bytes | memoryview) -> dict[str, str] | None:
    """Decode a properties string (``string2messageProperties``); ``None`` if it is not UTF-8.

    Items without a name/value separator are skipped, as RocketMQ does.
    """
    try:
        text = bytes(data).decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:
        return None
    result: dict[str, str] = {}
    for item in text.split(PROPERTY_SEPARATOR):
        name, sep, value = item.partition(NAME_VALUE_SEPARATOR)
        if sep and name:
            result[name] = value
    return result


@functools.lru_cache(maxsize=4096)
def _topic_bytes(topic: str) -> bytes:
    # Encoded once per topic, not once per appended message.
    return topic.encode("utf-8", "surrogatepass")


pack_ip = message_id.pack_ip
"""``common.message_id.pack_ip`` (the record codec packs hosts with it)."""


def prepare(
    topic: str,
    body: bytes,
    properties: Mapping[str, str],
    fields: RecordFields,
    *,
    body_bytes_max: int,
    properties_bytes_max: int,
    properties_bytes: bytes | None = None,
) -> PreparedRecord | PrepareProblem:
    """Compute everything about a record that does not depend on its offsets.

    Args:
        topic: the topic (1 .. TOPIC_BYTES_MAX UTF-8 bytes).
        body: 1 .. ``body_bytes_max`` bytes.
        properties: properties without separators in names or values.
        fields: the remaining header fields.
        body_bytes_max: largest body accepted, bytes.
        properties_bytes_max: largest encoded properties (without the CRC property), bytes.
        properties_bytes: ``properties`` already encoded, exactly as ``properties_to_bytes``
            would (a classic message's properties as sent: ``is_encoding_of``); ``None``
            encodes them here.

    Returns:
        a ``PreparedRecord`` for ``encode_into``, or the problem that forbids encoding.
    """
    if not body:
        return PrepareProblem.BODY_EMPTY
    if len(body) > body_bytes_max:
        return PrepareProblem.BODY_TOO_LARGE
    topic_bytes = _topic_bytes(topic)
    if not topic_bytes or len(topic_bytes) > TOPIC_BYTES_MAX:
        return PrepareProblem.TOPIC_ILLEGAL
    if properties_bytes is None:
        properties_bytes = properties_to_bytes(properties)
        if properties_bytes is None:
            return PrepareProblem.PROPERTY_ILLEGAL
    if len(properties_bytes) > properties_bytes_max:
        return PrepareProblem.PROPERTIES_TOO_LARGE
    if not _fields_in_range(fields):
        return PrepareProblem.FIELD_OUT_OF_RANGE
    hosts = _host_parts(fields.born_host.ip, fields.store_host.ip)
    if hosts is None:
        return PrepareProblem.HOST_ILLEGAL
    born_ip, store_ip, v6_bits, fixed = hosts
    v2 = len(topic_bytes) > _V1_TOPIC_BYTES_MAX
    total = (
        fixed.size
        + len(body)
        + (2 if v2 else 1)
        + len(topic_bytes)
        + 2
        + len(properties_bytes)
        + CRC_PROPERTY_BYTES
    )
    return PreparedRecord(  # positional, in field order: this runs for every appended message
        total,
        body,
        body_crc(body),
        topic_bytes,
        properties_bytes,
        fixed,
        MAGIC_CODE_V2 if v2 else MAGIC_CODE_V1,
        (int(fields.sys_flag) & ~_HOST_V6_BITS) | v6_bits,
        born_ip,
        store_ip,
    )


_INT_MIN, _INT_MAX = -(2**31), 2**31 - 1
_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1


def _fields_in_range(fields: RecordFields) -> bool:
    # Every header field fits its signed slot (``_fixed_struct``), so ``encode_into`` cannot
    # raise ``struct.error`` half-way through a batch.
    queue_id, flag, sys_flag, born_ms, born_host, store_host, reconsume, prepared_offset = fields
    return (
        _INT_MIN <= queue_id <= _INT_MAX
        and _INT_MIN <= flag <= _INT_MAX
        and _INT_MIN <= sys_flag <= _INT_MAX
        and _LONG_MIN <= born_ms <= _LONG_MAX
        and _INT_MIN <= born_host.port <= _INT_MAX
        and _INT_MIN <= store_host.port <= _INT_MAX
        and _INT_MIN <= reconsume <= _INT_MAX
        and _LONG_MIN <= prepared_offset <= _LONG_MAX
    )


@functools.lru_cache(maxsize=1024)
def _host_parts(born_ip: str, store_ip: str) -> tuple[bytes, bytes, int, struct.Struct] | None:
    """Packed born/store IPs, their SYSFLAG host bits and the fixed-part struct; once per pair.

    Returns ``None`` if either is not a literal IP address.
    """
    born, store = pack_ip(born_ip), pack_ip(store_ip)
    if born is None or store is None:
        return None
    born_v6, store_v6 = len(born) == 16, len(store) == 16
    v6_bits = (_BORN_V6 if born_v6 else 0) | (_STORE_V6 if store_v6 else 0)
    return born, store, v6_bits, _FIXED[(born_v6, store_v6)]


def encode_into(
    buffer: bytearray,
    position: int,
    record: PreparedRecord,
    fields: RecordFields,
    *,
    queue_offset: int,
    commit_log_offset: int,
    store_timestamp_ms: int,
) -> int:
    """Write one record into ``buffer`` at ``position``; the caller checked it fits.

    Args:
        buffer: the reusable write buffer.
        position: where the record starts in ``buffer``.
        record: from ``prepare`` with the same ``fields``.
        fields: the header fields given to ``prepare``.
        queue_offset: QUEUEOFFSET.
        commit_log_offset: PHYSICALOFFSET (where the record will sit in the CommitLog).
        store_timestamp_ms: STORETIMESTAMP.

    Returns:
        the position just past the record.
    """
    # One unpacking of each tuple instead of a NamedTuple attribute lookup per field: this
    # runs for every appended message.
    total, body, crc_of_body, topic_bytes, props_bytes, fixed, magic, sys_flag, born_ip, ip = record
    queue_id, flag, _, born_ms, born_host, store_host, reconsume, prepared_offset = fields
    end = position + total
    assert end <= len(buffer), "caller must check the record fits the buffer"
    body_length = len(body)
    fixed.pack_into(
        buffer,
        position,
        total,
        magic,
        crc_of_body,
        queue_id,
        flag,
        queue_offset,
        commit_log_offset,
        sys_flag,
        born_ms,
        born_ip,
        born_host.port,
        store_timestamp_ms,
        ip,
        store_host.port,
        reconsume,
        prepared_offset,
        body_length,
    )
    p = position + fixed.size
    buffer[p : p + body_length] = body
    p += body_length
    topic_length = len(topic_bytes)
    if magic == MAGIC_CODE_V2:
        _SHORT.pack_into(buffer, p, topic_length)
        p += 2
    else:
        buffer[p] = topic_length  # V1: one byte, at most 127
        p += 1
    buffer[p : p + topic_length] = topic_bytes
    p += topic_length
    properties_length = len(props_bytes)
    _SHORT.pack_into(buffer, p, properties_length + CRC_PROPERTY_BYTES)
    p += 2
    buffer[p : p + properties_length] = props_bytes
    p += properties_length
    crc = zlib.crc32(memoryview(buffer)[position:p]) & _CRC_MASK
    buffer[p:end] = b"%b%010d%b" % (_CRC_PREFIX, crc, _CRC_SUFFIX)
    return end


def encode_blank(buffer: bytearray, position: int, remaining_bytes: int) -> int:
    """Write the BLANK header that fills the ``remaining_bytes`` at a segment's end.

    Returns:
        the position just past the 8 header bytes (the rest of the segment stays zero).
    """
    assert remaining_bytes >= END_FILE_MIN_BLANK_BYTES
    _SIZE_MAGIC.pack_into(buffer, position, remaining_bytes, BLANK_MAGIC_CODE)
    return position + END_FILE_MIN_BLANK_BYTES


def _corrupt(reason: str) -> DecodeResult:
    return DecodeResult(DecodeStatus.CORRUPT, reason=reason)


def decode(
    view: memoryview, *, record_bytes_max: int, check_crc: bool = True, damaged: bool = False
) -> DecodeResult:
    """Decode the record at the start of ``view``; never raises for bad bytes.

    Args:
        view: bytes from a record start to (at most) the end of its segment or written data.
        record_bytes_max: largest TOTALSIZE believed; above is CORRUPT.
        check_crc: verify BODYCRC and the record-CRC property (RocketMQ ``checkCRCOnRecover``).
        damaged: read a record known to fail its CRCs for what its structure still tells
            (recovery's placement of a damaged record): no CRC check, properties that are
            not UTF-8 read as none, and a topic that is not UTF-8 with replacement
            characters (no queue has that name). Such a message is never served.

    Returns:
        OK with the message, BLANK with the bytes to skip, END, or CORRUPT with a reason.
    """
    if len(view) < END_FILE_MIN_BLANK_BYTES:
        return _END if not any(view) else _corrupt("fewer than 8 bytes and not zero")
    total, magic = _SIZE_MAGIC.unpack_from(view, 0)
    if total == 0 and magic == 0:
        return _END
    if magic == BLANK_MAGIC_CODE:
        if total < END_FILE_MIN_BLANK_BYTES:
            return _corrupt(f"blank of {total} bytes")
        return DecodeResult(DecodeStatus.BLANK, size=total)
    if magic not in (MAGIC_CODE_V1, MAGIC_CODE_V2):
        return _corrupt(f"bad magic code {magic}")
    if not RECORD_BYTES_MIN <= total <= record_bytes_max:
        return _corrupt(f"total size {total} outside [{RECORD_BYTES_MIN}, {record_bytes_max}]")
    if total > len(view):
        return _corrupt(f"record of {total} bytes truncated at {len(view)}")
    try:
        return _decode_fields(view[:total], total, magic, check_crc and not damaged, damaged)
    except (struct.error, ValueError, IndexError) as exc:
        return _corrupt(f"undecodable record: {exc}")


class _Header(NamedTuple):
    """The fixed part of a record, TOTALSIZE .. BODY length, in layout order."""

    total_size: int
    magic: int
    body_crc: int
    queue_id: int
    flag: int
    queue_offset: int
    commit_log_offset: int
    sys_flag: int
    born_timestamp_ms: int
    born_ip: bytes
    born_port: int
    store_timestamp_ms: int
    store_ip: bytes
    store_port: int
    reconsume_times: int
    prepared_transaction_offset: int
    body_length: int


def _decode_fields(
    view: memoryview, total: int, magic: int, check_crc: bool, damaged: bool
) -> DecodeResult:
    (sys_flag,) = _SYSFLAG.unpack_from(view, 36)
    born_v6 = bool(sys_flag & _BORN_V6)
    store_v6 = bool(sys_flag & _STORE_V6)
    fixed = _FIXED[(born_v6, store_v6)]
    if fixed.size > total:
        return _corrupt("fixed part longer than the record")
    header = _Header._make(fixed.unpack_from(view, 0))
    p = fixed.size
    if header.body_length < 0 or p + header.body_length > total:
        return _corrupt(f"body length {header.body_length} does not fit")
    body = bytes(view[p : p + header.body_length])
    p += header.body_length
    if magic == MAGIC_CODE_V2:
        (topic_length,) = _SHORT.unpack_from(view, p)
        p += 2
    else:
        topic_length = view[p]
        p += 1
    topic_bytes = view[p : p + topic_length]
    p += topic_length
    (properties_length,) = _SHORT.unpack_from(view, p)
    p += 2
    if topic_length <= 0 or properties_length < 0 or p + properties_length != total:
        return _corrupt("lengths do not add up to TOTALSIZE")
    properties_view = view[p:total]
    if check_crc:
        problem = _check_crcs(view, total, body, header.body_crc, properties_view)
        if problem:
            return _corrupt(problem)
    return _assemble(header, body, topic_bytes, _strip_crc_property(properties_view), damaged)


def _check_crcs(
    view: memoryview, total: int, body: bytes, stored_body_crc: int, properties: memoryview
) -> str:
    if body_crc(body) != stored_body_crc:
        return BODY_CRC_MISMATCH
    if len(properties) < CRC_PROPERTY_BYTES:
        return "record-CRC property missing"
    tail = bytes(properties[-CRC_PROPERTY_BYTES:])
    if not (tail.startswith(_CRC_PREFIX) and tail.endswith(_CRC_SUFFIX)):
        return "record-CRC property missing"
    digits = tail[len(_CRC_PREFIX) : -1]
    if not digits.isdigit():
        return "record-CRC property malformed"
    if int(digits) != zlib.crc32(view[: total - CRC_PROPERTY_BYTES]) & _CRC_MASK:
        return "record CRC mismatch"
    return ""


def _strip_crc_property(properties: memoryview) -> memoryview:
    n = len(properties)
    if n >= CRC_PROPERTY_BYTES and bytes(properties[n - CRC_PROPERTY_BYTES : n - 11]) == (
        _CRC_PREFIX
    ):
        return properties[: n - CRC_PROPERTY_BYTES]
    return properties


def _assemble(
    h: _Header, body: bytes, topic_bytes: memoryview, properties_view: memoryview, damaged: bool
) -> DecodeResult:
    properties = bytes_to_properties(properties_view)
    if properties is None and damaged:
        properties = {}
    if properties is None:
        return _corrupt("properties are not UTF-8")
    try:
        topic = bytes(topic_bytes).decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:
        if not damaged:
            return _corrupt("topic is not UTF-8")
        topic = bytes(topic_bytes).decode("utf-8", "replace")  # a flipped high bit
    stored = message_mod.StoredMessage(
        message=message_mod.Message(
            topic=ids.TopicName(topic), body=body, properties=properties, flag=h.flag
        ),
        queue_id=ids.QueueId(h.queue_id),
        queue_offset=ids.QueueOffset(h.queue_offset),
        commit_log_offset=ids.CommitLogOffset(h.commit_log_offset),
        store_size_bytes=h.total_size,
        sys_flag=_sys_flag(h.sys_flag & 0xFFFFFFFF),
        born_timestamp_ms=ids.TimestampMs(h.born_timestamp_ms),
        born_host=_host_address(h.born_ip, h.born_port),
        store_timestamp_ms=ids.TimestampMs(h.store_timestamp_ms),
        store_host=_host_address(h.store_ip, h.store_port),
        reconsume_times=h.reconsume_times,
        prepared_transaction_offset=ids.CommitLogOffset(h.prepared_transaction_offset),
        body_crc=h.body_crc,
    )
    return DecodeResult(DecodeStatus.OK, size=h.total_size, message=stored)


def without_crc_property(record: memoryview) -> tuple[bytes | memoryview, ...]:
    """A stored record as RocketMQ's default store holds it: without the record-CRC property.

    The parts, joined, are the record with its last ``CRC_PROPERTY_BYTES`` bytes (the
    ``__CRC32#`` property Ariane always appends) cut off and the two lengths that count them
    (TOTALSIZE, the PROPERTIES length) lowered by as much; every other byte is ``record``'s own,
    sliced, never copied or re-encoded (a pull body joins the parts once).

    Args:
        record: one whole record, TOTALSIZE long, already checked (``decode`` said OK).

    Returns:
        4 parts (2 patched lengths, 2 slices of ``record``), or ``(record,)`` when the record
        ends without the property (then it is sent as stored).
    """
    total = len(record)
    (sys_flag,) = _SYSFLAG.unpack_from(record, 36)
    fixed = _FIXED[(bool(sys_flag & _BORN_V6), bool(sys_flag & _STORE_V6))].size
    (body_length,) = _INT.unpack_from(record, fixed - 4)
    p = fixed + body_length
    (magic,) = _INT.unpack_from(record, 4)
    if magic == MAGIC_CODE_V2:
        (topic_length,) = _SHORT.unpack_from(record, p)
        p += 2 + topic_length
    else:
        p += 1 + record[p]
    (properties_length,) = _SHORT.unpack_from(record, p)
    crc_at = total - CRC_PROPERTY_BYTES
    if (
        properties_length < CRC_PROPERTY_BYTES
        or record[crc_at : crc_at + len(_CRC_PREFIX)] != _CRC_PREFIX
    ):
        return (record,)
    return (
        _INT.pack(crc_at),
        record[4:p],
        _SHORT.pack(properties_length - CRC_PROPERTY_BYTES),
        record[p + 2 : crc_at],
    )


@functools.lru_cache(maxsize=256)
def _sys_flag(value: int) -> message_mod.SysFlag:
    # Building an IntFlag member costs more than the rest of a header; few values ever occur.
    return message_mod.SysFlag(value)


@functools.lru_cache(maxsize=1024)
def _host_address(packed_ip: bytes, port: int) -> message_mod.HostAddress:
    # A store sees few distinct born/store hosts; HostAddress is an immutable value.
    return message_mod.HostAddress(_unpack_ip(packed_ip), port)


def _unpack_ip(packed: bytes) -> str:
    family = socket.AF_INET6 if len(packed) == 16 else socket.AF_INET
    return socket.inet_ntop(family, packed)


# Offset message ids live in ``common.message_id`` (the broker and clients make them too).
create_offset_message_id = message_id.create_offset_message_id
offset_message_id_prefix = message_id.offset_message_id_prefix
decode_offset_message_id = message_id.decode_offset_message_id


_LONG = struct.Struct(">q")
_BORN_HOST_POSITION = 48


def peek_store_timestamp(view: memoryview) -> int | None:
    """STORETIMESTAMP of the record at the start of ``view`` without decoding the rest.

    Returns:
        the timestamp in ms, or ``None`` if ``view`` does not start with a message header.
    """
    if len(view) < _BORN_HOST_POSITION + 28:
        return None
    _, magic = _SIZE_MAGIC.unpack_from(view, 0)
    if magic not in (MAGIC_CODE_V1, MAGIC_CODE_V2):
        return None
    (sys_flag,) = _SYSFLAG.unpack_from(view, 36)
    born_host_bytes = 20 if sys_flag & _BORN_V6 else 8
    (stamp,) = _LONG.unpack_from(view, _BORN_HOST_POSITION + born_host_bytes)
    return int(stamp)
