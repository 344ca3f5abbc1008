"""The POP journal's record format and its replay, pure (no I/O, no clock).

RocketMQ keeps POP progress in its store as checkpoint (CK) and ack records, so a broker
restart neither forgets an unacked delivery nor resets delivery attempts. Ariane keeps the
same facts in one append-only journal per broker (``pop_journal_file.PopJournal`` does the
I/O; a replicating master also appends them to the CommitLog, ``pop.replica``); this module
encodes, decodes and folds them. A concurrent group's attempts also live in its
``%RETRY%<group>_<topic>`` copies (RECONSUMETIMES), so a CK's attempt matters on its own only
for orderly groups, which redeliver in place.

Record layout (all integers big-endian)::

    offset  size  field
    0       4     body_bytes      length of the body below (>= BODY_BYTES_MIN)
    4       4     body_crc32      zlib.crc32 of the body
    8       -     body:
      +0    1     kind            1 CHECKPOINT, 2 ACK, 3 FORGET
      +1    2     group_bytes     then the group name, UTF-8
      +3+g  2     topic_bytes     then the topic name, UTF-8 ("" in FORGET = every topic)
      ...   4     queue_id        ALL_QUEUES (0xFFFFFFFF) in FORGET = every queue of the topic
      ...   8     queue_offset    CHECKPOINT/ACK: the message's queue offset; FORGET: 0
    CHECKPOINT continues with:
            2     attempt         delivery attempt of this delivery, 1..
            8     handle_version  version in the receipt handle of this delivery
            8     deadline_ms     wall-clock ms since the epoch when it becomes visible again
                                  (monotonic time does not survive a restart)
            4     invisible_ms    the invisible duration of this delivery
            2     mgroup_bytes    NO_MESSAGE_GROUP (0xFFFF) or the FIFO message group, UTF-8
    ACK continues with:
            4     count           offsets queue_offset .. queue_offset + count - 1 are done

Meaning, folded in order by ``replay``: a CHECKPOINT makes its offset in flight (the latest one
wins); an ACK makes offsets done (done wins over any checkpoint before it); a FORGET drops
everything recorded before it for the group / topic / queue (offset reset, group or topic
deleted). Invariants: a decoded record passed its CRC; ``decode`` stops at the first record
that is torn or fails its CRC and reports the byte length of the valid prefix, which the file
layer truncates to.
"""

from __future__ import annotations

import bisect
import dataclasses
import enum
import functools
import struct
import zlib
from collections.abc import Iterable

from ariane.common import ids

HEADER = struct.Struct(">II")
_STR_LEN = struct.Struct(">H")
_QUEUE = struct.Struct(">IQ")
_CHECKPOINT = struct.Struct(">HQQI")
_ACK = struct.Struct(">I")
_CHECKPOINT_FIELDS = struct.Struct(">IQHQQI")
"""``_QUEUE`` then ``_CHECKPOINT``, packed at once."""
_ACK_FIELDS = struct.Struct(">IQI")
"""``_QUEUE`` then ``_ACK``, packed at once."""

ALL_QUEUES = 0xFFFFFFFF
"""``queue_id`` of a FORGET that covers every queue of its topic."""
NO_MESSAGE_GROUP = 0xFFFF
"""``mgroup_bytes`` of a CHECKPOINT without a FIFO message group."""
BODY_BYTES_MIN = 1 + 2 + 2 + _QUEUE.size
"""Smallest valid body (a FORGET with empty names)."""
BODY_BYTES_MAX = 64 * 1024
"""Largest valid body, bytes; a longer length field means a corrupt record."""
STRING_BYTES_MAX = 0xFFFE
"""Longest name or message group a record holds, bytes."""
NAMES_CACHE_MAX = 1024
"""Most (kind, group, topic) encodings ``encode`` keeps (bounded; least recently used go)."""
_NO_MESSAGE_GROUP = _STR_LEN.pack(NO_MESSAGE_GROUP)


class Kind(enum.IntEnum):
    """The record kinds."""

    CHECKPOINT = 1
    ACK = 2
    FORGET = 3


@dataclasses.dataclass(frozen=True, slots=True)
class Checkpoint:
    """One delivery that is invisible until ``deadline_ms`` (RocketMQ ``PopCheckPoint``).

    Attributes:
        group, topic, queue_id, queue_offset: the message and the group it was delivered to.
        attempt: the delivery attempt, 1 for the first delivery.
        handle_version: the version its receipt handle carries.
        deadline_ms: wall-clock ms since the epoch when it becomes due for redelivery.
        invisible_ms: its invisible duration, ms.
        message_group: its FIFO message group, or ``None``.
    """

    group: ids.GroupName
    topic: ids.TopicName
    queue_id: ids.QueueId
    queue_offset: ids.QueueOffset
    attempt: int
    handle_version: int
    deadline_ms: int
    invisible_ms: int
    message_group: str | None


@dataclasses.dataclass(frozen=True, slots=True)
class Ack:
    """Offsets ``queue_offset .. queue_offset + count - 1`` of a queue are done for a group."""

    group: ids.GroupName
    topic: ids.TopicName
    queue_id: ids.QueueId
    queue_offset: ids.QueueOffset
    count: int = 1


@dataclasses.dataclass(frozen=True, slots=True)
class Forget:
    """Drop what was recorded before for a group (``topic`` "" = every topic) / topic / queue
    (``queue_id`` ``ALL_QUEUES`` = every queue of the topic)."""

    group: ids.GroupName
    topic: ids.TopicName
    queue_id: int


Record = Checkpoint | Ack | Forget


@dataclasses.dataclass(frozen=True, slots=True)
class Decoded:
    """Result of ``decode``: the valid records and the byte length of the valid prefix.

    Attributes:
        records: the records in file order.
        valid_bytes: bytes of ``data`` covered by ``records``.
        problem: why decoding stopped before the end (torn tail, bad CRC, bad body), or
            ``None`` when all of ``data`` decoded.
    """

    records: list[Record]
    valid_bytes: int
    problem: str | None


def _pack_str(text: str) -> bytes:
    raw = text.encode("utf-8")
    assert len(raw) <= STRING_BYTES_MAX, f"{len(raw)} bytes do not fit a journal string"
    return _STR_LEN.pack(len(raw)) + raw


@functools.lru_cache(maxsize=NAMES_CACHE_MAX)
def _names(kind: Kind, group: str, topic: str) -> bytes:
    """The body's kind, group and topic fields: the same few per broker, so cached."""
    return bytes((kind,)) + _pack_str(group) + _pack_str(topic)


def encode(record: Record) -> bytes:
    """One record with its header (length and CRC); see the layout table.

    Runs for every delivery and every ack, so each kind packs its numbers with one ``struct``
    and reuses the encoded names (``_names``).
    """
    if isinstance(record, Checkpoint):
        assert 1 <= record.attempt <= 0xFFFF, f"attempt {record.attempt} out of range"
        group = record.message_group
        body = (
            _names(Kind.CHECKPOINT, record.group, record.topic)
            + _CHECKPOINT_FIELDS.pack(
                record.queue_id,
                record.queue_offset,
                record.attempt,
                record.handle_version,
                record.deadline_ms,
                record.invisible_ms,
            )
            + (_NO_MESSAGE_GROUP if group is None else _pack_str(group))
        )
    elif isinstance(record, Ack):
        assert record.count >= 1, f"an ack covers at least one offset, not {record.count}"
        fields = _ACK_FIELDS.pack(record.queue_id, record.queue_offset, record.count)
        body = _names(Kind.ACK, record.group, record.topic) + fields
    else:
        body = _names(Kind.FORGET, record.group, record.topic) + _QUEUE.pack(record.queue_id, 0)
    assert len(body) <= BODY_BYTES_MAX, "journal record too large"
    return HEADER.pack(len(body), zlib.crc32(body)) + body


def encode_all(records: Iterable[Record]) -> bytes:
    """Records back to back, as the journal file holds them."""
    return b"".join(encode(record) for record in records)


class _Reader:
    """Cursor over one record body; every read raises ``ValueError`` past the end."""

    def __init__(self, body: memoryview) -> None:
        self._body = body
        self._at = 0

    def unpack(self, layout: struct.Struct) -> tuple[int, ...]:
        if self._at + layout.size > len(self._body):
            raise ValueError("record body ends early")
        values = layout.unpack_from(self._body, self._at)
        self._at += layout.size
        return values

    def text(self, length: int) -> str:
        if self._at + length > len(self._body):
            raise ValueError("record body ends early")
        raw = bytes(self._body[self._at : self._at + length])
        self._at += length
        return raw.decode("utf-8")

    def string(self) -> str:
        return self.text(self.unpack(_STR_LEN)[0])

    def finish(self) -> None:
        if self._at != len(self._body):
            raise ValueError(f"{len(self._body) - self._at} bytes after the record's fields")


def _decode_body(body: memoryview) -> Record:
    """One record from its body (CRC already checked). Raises ValueError if malformed."""
    reader = _Reader(body)
    kind = Kind(reader.unpack(struct.Struct(">B"))[0])
    group = ids.GroupName(reader.string())
    topic = ids.TopicName(reader.string())
    queue_id, queue_offset = reader.unpack(_QUEUE)
    record: Record
    if kind is Kind.FORGET:
        record = Forget(group, topic, queue_id)
    elif kind is Kind.ACK:
        (count,) = reader.unpack(_ACK)
        if count < 1:
            raise ValueError("an ACK of zero offsets")
        queue = ids.QueueId(queue_id)
        record = Ack(group, topic, queue, ids.QueueOffset(queue_offset), count)
    else:
        attempt, version, deadline_ms, invisible_ms = reader.unpack(_CHECKPOINT)
        (length,) = reader.unpack(_STR_LEN)
        message_group = None if length == NO_MESSAGE_GROUP else reader.text(length)
        record = Checkpoint(
            group,
            topic,
            ids.QueueId(queue_id),
            ids.QueueOffset(queue_offset),
            attempt=attempt,
            handle_version=version,
            deadline_ms=deadline_ms,
            invisible_ms=invisible_ms,
            message_group=message_group,
        )
    reader.finish()
    return record


def decode(data: bytes | memoryview) -> Decoded:
    """Records from the start of ``data`` up to the first torn or corrupt one.

    A torn tail (a crash in the middle of an append) and a record whose CRC fails end the
    valid prefix: nothing after it is trusted (operating errors, reported in ``problem``).
    """
    view = memoryview(data)
    records: list[Record] = []
    at = 0
    while at < len(view):
        if at + HEADER.size > len(view):
            return Decoded(records, at, f"torn header at byte {at}")
        length, crc = HEADER.unpack_from(view, at)
        if not BODY_BYTES_MIN <= length <= BODY_BYTES_MAX:
            return Decoded(records, at, f"bad body length {length} at byte {at}")
        end = at + HEADER.size + length
        if end > len(view):
            return Decoded(records, at, f"torn record at byte {at}")
        body = view[at + HEADER.size : end]
        if zlib.crc32(body) != crc:
            return Decoded(records, at, f"CRC mismatch at byte {at}")
        try:
            records.append(_decode_body(body))
        except (ValueError, UnicodeDecodeError) as exc:
            return Decoded(records, at, f"bad record at byte {at}: {exc}")
        at = end
    return Decoded(records, at, None)


QueueKey = tuple[ids.GroupName, ids.TopicName, ids.QueueId]
"""(group, topic, queue id)."""


@dataclasses.dataclass(slots=True)
class RestoredQueue:
    """What the journal says about one group's queue: deliveries in flight and done offsets.

    Attributes:
        checkpoints: queue offset → its latest checkpoint (not acked since).
        done: sorted, disjoint, non-adjacent ``[start, end)`` ranges of done offsets.
    """

    checkpoints: dict[int, Checkpoint] = dataclasses.field(default_factory=dict)
    done: list[tuple[int, int]] = dataclasses.field(default_factory=list)

    def is_done(self, offset: int) -> bool:
        """Whether ``offset`` lies in a done range."""
        index = bisect.bisect_right(self.done, (offset, 1 << 64)) - 1
        return index >= 0 and self.done[index][0] <= offset < self.done[index][1]

    def above(self, committed: int) -> RestoredQueue:
        """A copy without anything below ``committed`` (the group's consumer offset)."""
        kept = {o: c for o, c in self.checkpoints.items() if o >= committed}
        done = [(max(s, committed), e) for s, e in self.done if e > committed]
        return RestoredQueue(kept, done)

    def settle(self, offset: int) -> None:
        """Mark a restored delivery done (it was forwarded to the DLQ before being adopted)."""
        self.checkpoints.pop(offset, None)
        self.done = _merge([*self.done, (offset, offset + 1)])

    def __bool__(self) -> bool:
        return bool(self.checkpoints or self.done)


def _merge(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for start, end in sorted(ranges):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def _forget(
    tables: dict[QueueKey, tuple[dict[int, Checkpoint], list[tuple[int, int]]]], record: Forget
) -> None:
    for key in [k for k in tables if k[0] == record.group]:
        if record.topic and key[1] != record.topic:
            continue
        if record.queue_id != ALL_QUEUES and key[2] != record.queue_id:
            continue
        del tables[key]


def replay(records: Iterable[Record]) -> dict[QueueKey, RestoredQueue]:
    """Fold records in file order into what each group's queue has in flight and done."""
    tables: dict[QueueKey, tuple[dict[int, Checkpoint], list[tuple[int, int]]]] = {}
    for record in records:
        if isinstance(record, Forget):
            _forget(tables, record)
            continue
        key = (record.group, record.topic, record.queue_id)
        checkpoints, done = tables.setdefault(key, ({}, []))
        if isinstance(record, Checkpoint):
            checkpoints[record.queue_offset] = record
            continue
        start, end = record.queue_offset, record.queue_offset + record.count
        done.append((start, end))
        if record.count <= len(checkpoints):
            for offset in range(start, end):
                checkpoints.pop(offset, None)
        else:
            for offset in [o for o in checkpoints if start <= o < end]:
                del checkpoints[offset]
    restored = {k: RestoredQueue(c, _merge(d)) for k, (c, d) in tables.items()}
    return {k: v for k, v in restored.items() if v}
