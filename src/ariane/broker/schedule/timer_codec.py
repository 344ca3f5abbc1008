"""The timer log's record format (in the spirit of RocketMQ 5's ``TimerLog`` units).

The timer log (``<store>/timer/timerlog``) is an append-only file of records saying what became
of the messages parked in the timer topic ``rmq_sys_wheel_timer``: ENQUEUED (read from the
topic's ConsumeQueue into the wheel, with its delivery time), DELIVERED (written to its real
topic), RECALLED (cancelled by RecallMessage), and CURSOR (the next timer-topic queue offset to
read; written first by a compaction, which drops the records of finished messages). Replaying
the records in order rebuilds the wheel without reading the CommitLog.

Record layout, little-endian::

    offset  size  field
    0       4     magic 0x544D5231 ("TMR1")
    4       4     CRC32 of bytes 8 .. end of record
    8       2     record length, bytes (HEADER_BYTES + message id length)
    10      1     kind (1 ENQUEUED, 2 DELIVERED, 3 RECALLED, 4 CURSOR)
    11      1     message id length, bytes (0..MESSAGE_ID_BYTES_MAX)
    12      8     delivery time, ms since the epoch (0 for CURSOR)
    20      8     timer-topic queue offset (CURSOR: the next offset to read)
    28      8     CommitLog offset of the parked message (0 for CURSOR)
    36      4     its record size in the CommitLog, bytes (0 for CURSOR)
    40      n     message id (UNIQ_KEY), UTF-8

Pure: encode/decode over bytes, no I/O, no clock. ``decode_all`` stops at the first record that
is short, has a bad magic, kind or length, or fails its CRC: what follows is a torn tail
(operating error: the caller truncates it), never delivered as data.
"""

from __future__ import annotations

import dataclasses
import enum
import struct
import zlib

MAGIC = 0x544D5231
HEADER = struct.Struct("<IIHBBqqqI")
HEADER_BYTES = HEADER.size
"""Bytes before the message id (40)."""

MESSAGE_ID_BYTES_MAX = 255
"""Longest message id a record holds, bytes (one length byte)."""

_CRC_FROM = 8  # the CRC covers everything after the magic and the CRC itself


class Kind(enum.IntEnum):
    """What a record says about a timer message."""

    ENQUEUED = 1
    DELIVERED = 2
    RECALLED = 3
    CURSOR = 4


@dataclasses.dataclass(frozen=True, slots=True)
class TimerRecord:
    """One timer-log record.

    Attributes:
        kind: what happened.
        delivery_ms: when the message is due, ms since the epoch (0 for CURSOR).
        queue_offset: the message's offset in the timer topic's queue (CURSOR: next to read).
        commit_log_offset: where its record starts in the CommitLog.
        size_bytes: its CommitLog record size, bytes.
        message_id: its UNIQ_KEY ("" for CURSOR).
    """

    kind: Kind
    delivery_ms: int
    queue_offset: int
    commit_log_offset: int = 0
    size_bytes: int = 0
    message_id: str = ""


def encode(record: TimerRecord) -> bytes:
    """The bytes of one record.

    Raises:
        ValueError: a message id longer than ``MESSAGE_ID_BYTES_MAX`` bytes, or a negative
            number (programmer errors: the service only logs values it read from the store).
    """
    id_bytes = record.message_id.encode()
    if len(id_bytes) > MESSAGE_ID_BYTES_MAX:
        raise ValueError(f"message id of {len(id_bytes)} bytes; at most {MESSAGE_ID_BYTES_MAX}")
    numbers = (record.delivery_ms, record.queue_offset, record.commit_log_offset)
    if min(numbers) < 0 or not 0 <= record.size_bytes < 2**32:
        raise ValueError(f"negative or oversized field in {record!r}")
    body = HEADER.pack(
        MAGIC,
        0,
        HEADER_BYTES + len(id_bytes),
        record.kind,
        len(id_bytes),
        *numbers,
        record.size_bytes,
    )[_CRC_FROM:]
    tail = body + id_bytes
    return struct.pack("<II", MAGIC, zlib.crc32(tail)) + tail


def decode_all(data: bytes | memoryview) -> tuple[list[TimerRecord], int]:
    """Every whole, valid record from the start of ``data``.

    Returns:
        the records in file order, and the number of bytes they take (the valid length: a
        torn or corrupt tail starts there).
    """
    view = memoryview(data)
    records: list[TimerRecord] = []
    position = 0
    while position + HEADER_BYTES <= len(view):
        magic, crc, length, kind, id_len, delivery, offset, cl_offset, size = HEADER.unpack_from(
            view, position
        )
        end = position + length
        if (
            magic != MAGIC
            or length != HEADER_BYTES + id_len
            or end > len(view)
            or kind not in Kind._value2member_map_
            or zlib.crc32(view[position + _CRC_FROM : end]) != crc
        ):
            break
        try:
            message_id = bytes(view[position + HEADER_BYTES : end]).decode()
        except UnicodeDecodeError:
            break
        records.append(TimerRecord(Kind(kind), delivery, offset, cl_offset, size, message_id))
        position = end
    return records, position
