"""The store's one rule for damaged CommitLog records: what starts at an offset, and where a
damaged record's ConsumeQueue unit goes.

Recovery's rescan (``recovery._Rescan``), the reput (``dispatcher.ReputMessageService``) and a
promotion's cut of a partial record (``broker.services.replication.cut_partial_record``) all
ask ``look`` what an offset holds, and ``place`` where a damaged record's unit goes:

- SOUND: a record passing every check (sizes, magic code, CRCs, PHYSICALOFFSET);
- BLANK: the end-of-segment filler (the next record starts the next segment);
- END: nothing was written here (zeros, or the end of the written data);
- DAMAGED: a *whole* record that fails only its CRCs (read without them, its sizes, magic code,
  lengths and PHYSICALOFFSET are sound and it fits in the written data:
  ``RecordReader.peek(damaged=True)``) that ends at or below a flushed offset the caller trusts
  (synced bytes are changed only by a flip, never torn), or that a SOUND record follows,
  possibly after further whole damaged records (at most ``DAMAGED_STEPS_MAX``, BLANKs
  followed). It is kept and stepped over; reads of it answer CORRUPT (and ask an in-sync slave
  for its bytes, ``record_repair``), never serve its bytes;
- UNVOUCHED: a whole damaged record nothing SOUND follows (yet);
- TORN: not a whole record (cut short by the end of the written data, or its size or magic
  code damaged).

UNVOUCHED and TORN are a torn tail: recovery and a promotion cut there; the reput waits there
(the writer or the HA stream, which stops at any byte, may be mid-record: ``Found.partial``).

RocketMQ: ``CommitLog.recoverAbnormally`` cuts at the first record whose CRC fails, so one
flipped bit drops every later record, acknowledged ones included; its reput
(``ReputMessageService.doReput``) reads without CRC checks and dispatches a damaged record by
whatever its header says (a flipped TOPIC or QUEUEID puts its unit in another queue, a flipped
QUEUEOFFSET at another offset), and stops for good at a record it cannot parse. Here the rule
keeps a damaged record with every record after it and never trusts its header blindly:

``place`` decides its unit. When BODYCRC fails first, only the body or BODYCRC can have
changed (one flip), so the header is its master's: the unit is the one it claims. Otherwise
(its record CRC fails, so TOPIC, QUEUEID and QUEUEOFFSET are suspect) the unit goes to the one
queue where it would be the next unit, matching at least two of the three fields its header
claims (one flip damages one field; a queue nothing else names must match all three), and
whose first later record (a scan ahead of at most ``lookahead_bytes_max``) has the queue offset
after it; of several, the one a later record shows a gap in. With several places and no
later record to tell, the damaged record gets no unit and each place is *reserved* (a filler
unit at that queue offset: reads skip it, and a later record of that queue at that offset
takes it over): no queue offset its master gave is ever given to another message, before or
after a promotion. A record whose SYSFLAG says it has no unit (a prepared or rolled-back half)
gets none (when its record CRC fails, a flipped SYSFLAG may hide a unit: the next record of
its queue then leaves a filled gap, logged by ``ConsumeQueue.put``).
"""

from __future__ import annotations

import dataclasses
import enum

from ariane.common import ids
from ariane.common import message as message_mod
from ariane.store import commit_log, consume_queue, message_codec, record_reader

DAMAGED_STEPS_MAX = 64
"""Whole damaged records (and BLANKs) ``look`` steps over looking for a sound record."""

_QueueKey = tuple[ids.TopicName, ids.QueueId]


class Kind(enum.Enum):
    """What starts at a CommitLog offset (the module docstring defines each)."""

    SOUND = "SOUND"
    BLANK = "BLANK"
    END = "END"
    DAMAGED = "DAMAGED"
    UNVOUCHED = "UNVOUCHED"
    TORN = "TORN"


@dataclasses.dataclass(frozen=True, slots=True)
class Found:
    """What ``look`` found at ``offset``.

    Attributes:
        kind: what it is.
        offset: the CommitLog offset looked at.
        size_bytes: the record's TOTALSIZE (SOUND, DAMAGED, UNVOUCHED), the bytes to the next
            segment (BLANK), 0 otherwise.
        message: the decoded record (SOUND: checked; DAMAGED, UNVOUCHED: read without CRCs,
            never to be served), else ``None``.
        reason: why it failed its checks ("" for SOUND, BLANK and END).
        partial: TORN only: its header is cut by, or its size reaches past, the end of the
            written data (a writer or the HA stream mid-record), not damage inside the data.
    """

    kind: Kind
    offset: int
    size_bytes: int = 0
    message: message_mod.StoredMessage | None = None
    reason: str = ""
    partial: bool = False

    @property
    def next_offset(self) -> int:
        """Where the next record starts (SOUND, DAMAGED, UNVOUCHED, BLANK)."""
        return self.offset + self.size_bytes


def look(
    reader: record_reader.RecordReader,
    offset: int,
    *,
    check_crc: bool = True,
    flushed: int = -1,
    keep_damaged: bool = True,
) -> Found:
    """What the CommitLog holds at ``offset`` (a record boundary), by the module's rule.

    Args:
        reader: the CommitLog's reader.
        offset: where to look.
        check_crc: verify CRCs (without, nothing is DAMAGED: a record failing other checks
            is TORN).
        flushed: a CommitLog offset below which bytes were synced (a damaged record ending
            at or below it is DAMAGED with nothing after it); -1 to trust none.
        keep_damaged: False: a record failing its checks is TORN, whole or not.

    Returns:
        what is there; reads at most ``DAMAGED_STEPS_MAX + 2`` records.
    """
    found = _one(reader, offset, check_crc=check_crc, whole=check_crc and keep_damaged)
    if found.kind is not Kind.UNVOUCHED:
        return found
    if found.next_offset <= flushed or _sound_after(reader, found.next_offset):
        return dataclasses.replace(found, kind=Kind.DAMAGED)
    return dataclasses.replace(
        found,
        reason=f"torn tail: a record failing its CRCs ({found.reason}) with no sound record "
        "after it",
    )


def _one(
    reader: record_reader.RecordReader, offset: int, *, check_crc: bool, whole: bool = True
) -> Found:
    """One step: SOUND, BLANK, END, TORN, or UNVOUCHED for any whole damaged record (TORN for
    every record failing its checks when not ``whole``)."""
    decoded = reader.peek(offset, check_crc=check_crc)
    status = decoded.status
    if status is message_codec.DecodeStatus.OK:
        return Found(Kind.SOUND, offset, decoded.size, decoded.message)
    if status is message_codec.DecodeStatus.BLANK:
        return Found(Kind.BLANK, offset, decoded.size)
    if status is message_codec.DecodeStatus.END:
        return Found(Kind.END, offset)
    read = reader.peek(offset, damaged=True) if whole else decoded
    if read.status is message_codec.DecodeStatus.OK:
        return Found(Kind.UNVOUCHED, offset, read.size, read.message, decoded.reason)
    partial = _reaches_past_end(reader, offset)
    return Found(Kind.TORN, offset, reason=decoded.reason, partial=partial)


def _sound_after(reader: record_reader.RecordReader, offset: int) -> bool:
    """Whether whole records from ``offset`` (damaged ones and BLANKs stepped over, at most
    ``DAMAGED_STEPS_MAX``) reach a record passing every check."""
    for _ in range(DAMAGED_STEPS_MAX):
        found = _one(reader, offset, check_crc=True)
        if found.kind is Kind.SOUND:
            return True
        if found.kind not in (Kind.UNVOUCHED, Kind.BLANK):
            return False
        offset = found.next_offset
    return False


def _reaches_past_end(reader: record_reader.RecordReader, offset: int) -> bool:
    """Whether the record at ``offset`` is cut by the end of the written data: fewer than a
    header's bytes are written, or its header (a message magic code, a believable TOTALSIZE)
    says it reaches past the written data."""
    left = reader.max_offset - offset
    if left < message_codec.END_FILE_MIN_BLANK_BYTES:
        return left > 0
    segment = reader.log.find(offset)
    header = None if segment is None else segment.read(offset - segment.start_offset, 8)
    if not header or len(header) < 8:
        return False
    total = int.from_bytes(header[:4], "big", signed=True)
    magic = int.from_bytes(header[4:], "big", signed=True)
    return (
        magic in (message_codec.MAGIC_CODE_V1, message_codec.MAGIC_CODE_V2)
        and message_codec.RECORD_BYTES_MIN <= total <= reader.record_bytes_max
        and offset + total > reader.max_offset
    )


@dataclasses.dataclass(frozen=True, slots=True)
class Placement:
    """Where a damaged record's unit goes (``place``).

    Attributes:
        unit: the record's DispatchRequest with the topic, queue id and queue offset decided
            (its SYSFLAG may say it has no unit: only its keys are then indexed); ``None``
            when it gets no unit.
        reserved: with several possible places: each ``(topic, queue id, queue offset)``,
            every one its queue's next, to hold a filler unit.
        problem: why it has no single place ("" when it has one, or needs none).
    """

    unit: commit_log.DispatchRequest | None
    reserved: tuple[tuple[ids.TopicName, ids.QueueId, ids.QueueOffset], ...] = ()
    problem: str = ""


def place(
    reader: record_reader.RecordReader,
    queues: consume_queue.ConsumeQueueStore,
    damaged: Found,
    *,
    lookahead_bytes_max: int,
) -> Placement:
    """The unit of a DAMAGED record, by the module's rule; ``queues`` must hold every unit of
    the records before it.

    Args:
        reader: the CommitLog's reader (for the scan ahead).
        queues: the ConsumeQueues.
        damaged: what ``look`` found (DAMAGED, its message read without CRCs).
        lookahead_bytes_max: how far past the record the scan ahead reads, bytes (0: none).

    Returns:
        the placement.
    """
    assert damaged.message is not None, "place needs a whole record"
    request = commit_log.dispatch_request_of(damaged.message)
    if damaged.reason == message_codec.BODY_CRC_MISMATCH:
        return Placement(request)  # only the body or BODYCRC changed: the header is sound
    if not request.to_consume_queue:
        return Placement(request, problem="its SYSFLAG (no unit) may be damaged")
    claim = (request.topic, request.queue_id)
    queue = queues.get(*claim)
    if queue is not None and queue.max_queue_offset == request.queue_offset:
        return Placement(request)
    nexts = _first_queue_offsets(reader, request.end_offset, lookahead_bytes_max)
    known = {*nexts, *queues.next_offset_table()}
    named = {claim} if consume_queue.is_valid_topic_dir(claim[0]) else set()  # a flip to "/"
    fits = [
        (key, expected)
        for key in {*named, *known}
        for expected in [_expected(queues, key)]
        if nexts.get(key, expected + 1) == expected + 1
        and (key[0] == claim[0]) + (key[1] == claim[1]) + (expected == request.queue_offset)
        >= (2 if key in known else 3)  # a queue nothing else names: only its first record
    ]
    gaps = [fit for fit in fits if fit[0] in nexts]  # a later record shows the gap
    if len(gaps) == 1:
        fits = gaps
    if len(fits) == 1:
        (topic, queue_id), at = fits[0]
        return Placement(
            request._replace(topic=topic, queue_id=queue_id, queue_offset=ids.QueueOffset(at))
        )
    reserved = tuple(sorted((t, q, ids.QueueOffset(at)) for (t, q), at in fits))
    return Placement(None, reserved, f"{len(fits)} ConsumeQueue places fit what its header claims")


def describe(placement: Placement) -> str:
    """A log phrase for ``placement``: where its unit went, or why none and what is reserved."""
    unit = placement.unit
    if not placement.problem and unit is not None:
        return f"its unit is {unit.topic}-{unit.queue_id} offset {unit.queue_offset}"
    reserved = ", ".join(f"{t}-{q} offset {at}" for t, q, at in placement.reserved)
    return f"{placement.problem}; no unit" + (f", reserved: {reserved}" if reserved else "")


def _expected(queues: consume_queue.ConsumeQueueStore, key: _QueueKey) -> int:
    queue = queues.get(*key)
    return 0 if queue is None else int(queue.max_queue_offset)


def _first_queue_offsets(
    reader: record_reader.RecordReader, start: int, bytes_max: int
) -> dict[_QueueKey, int]:
    """The queue offset of each queue's first record from ``start`` on, over at most
    ``bytes_max`` of records (sound ones; damaged ones are stepped over, not read)."""
    firsts: dict[_QueueKey, int] = {}
    offset = start
    while offset < start + bytes_max:
        last = None
        for item in reader.scan(offset, check_crc=True):
            last = item
            stored = item.result.message
            if stored is None or item.offset >= start + bytes_max:
                break
            if commit_log.dispatch_request_of(stored).to_consume_queue:
                firsts.setdefault((stored.topic, stored.queue_id), stored.queue_offset)
        if last is None or not last.result.reason or last.offset >= start + bytes_max:
            return firsts
        found = reader.peek(last.offset, damaged=True)
        if found.status is not message_codec.DecodeStatus.OK:
            return firsts
        offset = last.offset + found.size
    return firsts
