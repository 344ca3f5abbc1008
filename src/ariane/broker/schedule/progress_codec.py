"""The schedule progress record's body: which parked messages one delivery batch finished.

The schedule service appends one progress record to the system topic
``rmq_sys_schedule_progress`` (queue 0) in the same store append as the batch it describes,
*before* the delivered messages (``schedule.progress``). Its body lists the batch's origins in
delivery order; a delivered message is recognised by its *delivery key* (a digest of what the
restored message's record holds: topic, queue id, UNIQ_KEY, born time, body CRC), so a reader
can tell which of the listed deliveries follow the record in the CommitLog.

Body layout, little-endian::

    offset  size    field
    0       4       magic 0x53505231 ("SPR1")
    4       2       n, the number of origins (1..ORIGINS_MAX)
    6       18 * n  origins, each:
                      0   1  kind (1 LEVEL delivered, 2 TIMER delivered, 3 TIMER recalled)
                      1   1  delay level (1..64 for LEVEL, 0 otherwise)
                      2   8  queue offset: in SCHEDULE_TOPIC_XXXX queue level-1 (LEVEL), in
                             rmq_sys_wheel_timer queue 0 (TIMER)
                      10  8  delivery key (0 for RECALLED: nothing is delivered)

Pure: encode/decode over bytes, no I/O, no clock. The CommitLog record around the body carries
its CRC; ``decode`` still refuses a body whose length or fields are wrong (ValueError).
"""

from __future__ import annotations

import dataclasses
import enum
import struct
import zlib

MAGIC = 0x53505231
_HEADER = struct.Struct("<IH")
_ORIGIN = struct.Struct("<BBqQ")
ORIGINS_MAX = 4_096
"""Most origins one record lists, a count (``deliver_batch_max`` is at most this)."""
LEVEL_MAX = 64
"""Highest delay level a record names (``schedule.settings.DELAY_LEVELS_MAX``)."""


class Kind(enum.IntEnum):
    """What became of a parked message."""

    LEVEL = 1
    """A delay-level message written to its real topic."""
    TIMER = 2
    """A timer message written to its real topic."""
    RECALLED = 3
    """A timer message cancelled by RecallMessage (no delivery follows)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Origin:
    """One parked message a progress record finishes.

    Attributes:
        kind: delivered from a level, delivered from the timer, or recalled.
        level: the delay level (1..LEVEL_MAX) for LEVEL, else 0.
        queue_offset: its offset in the schedule queue of its level, or in the timer queue.
        key: the delivery key of the written message (``delivery_key``); 0 for RECALLED.
    """

    kind: Kind
    level: int
    queue_offset: int
    key: int = 0


def delivery_key(
    topic: str, queue_id: int, unique_key: str, born_timestamp_ms: int, body_crc: int
) -> int:
    """A 64-bit digest of a delivered message's record: CRC32 of topic, queue id, UNIQ_KEY and
    born time in the high half, the body CRC in the low half (both are in the parked record
    and in its delivered copy, which keeps body, born time and properties)."""
    text = f"{topic}\x00{queue_id}\x00{unique_key}\x00{born_timestamp_ms}".encode()
    return (zlib.crc32(text) << 32) | (body_crc & 0xFFFFFFFF)


def encode(origins: list[Origin]) -> bytes:
    """The body of a progress record listing ``origins`` in order.

    Raises:
        ValueError: no origin or more than ``ORIGINS_MAX``, a level outside 0..LEVEL_MAX, a
            negative queue offset or a key beyond 64 bits (programmer errors).
    """
    if not 1 <= len(origins) <= ORIGINS_MAX:
        raise ValueError(f"a progress record lists 1..{ORIGINS_MAX} origins, not {len(origins)}")
    parts = [_HEADER.pack(MAGIC, len(origins))]
    for o in origins:
        if not 0 <= o.level <= LEVEL_MAX or o.queue_offset < 0 or not 0 <= o.key < 2**64:
            raise ValueError(f"bad origin {o!r}")
        parts.append(_ORIGIN.pack(o.kind, o.level, o.queue_offset, o.key))
    return b"".join(parts)


def decode(body: bytes | memoryview) -> list[Origin]:
    """The origins of a progress record body, in order.

    Raises:
        ValueError: a bad magic, a count or length that does not match, an unknown kind.
    """
    view = memoryview(body)
    if len(view) < _HEADER.size:
        raise ValueError(f"a progress record of {len(view)} bytes is too short")
    magic, count = _HEADER.unpack_from(view, 0)
    if magic != MAGIC or not 1 <= count <= ORIGINS_MAX:
        raise ValueError(f"not a progress record (magic {magic:#x}, {count} origins)")
    if len(view) != _HEADER.size + count * _ORIGIN.size:
        raise ValueError(f"a progress record of {count} origins cannot be {len(view)} bytes")
    origins = []
    for index in range(count):
        kind, level, offset, key = _ORIGIN.unpack_from(view, _HEADER.size + index * _ORIGIN.size)
        if kind not in Kind._value2member_map_ or offset < 0 or level > LEVEL_MAX:
            raise ValueError(f"origin {index} of a progress record is malformed")
        origins.append(Origin(Kind(kind), level, offset, key))
    return origins
