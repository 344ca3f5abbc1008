"""ConsumeQueues: per (topic, queue id) arrays of 20-byte units (RocketMQ ``ConsumeQueue``).

Unit layout (big-endian)::

    offset  size  field
    0       8     commit-log offset of the message record
    8       4     record size, bytes
    12      8     tag hash code (Java ``String.hashCode`` of TAGS; delivery time for delays)

Unit ``q`` (queue offset ``q``) sits at byte ``20 * q`` of the queue's log; segment files live
in ``consumequeue/<topic>/<queueId>/<20-digit byte offset>``. Invariants: units are dense and
their commit-log offsets strictly increase with ``q``; a unit with size 0 is never written, so
the first zero unit marks the end. Filler units (offset 0, size 0x7FFFFFFF, tag 0, RocketMQ's
``fillPreBlank``) pad a segment that starts before the queue's first real unit.
"""

from __future__ import annotations

import dataclasses
import logging
import pathlib
import re
import struct
from collections.abc import Callable, Iterator, Sequence
from typing import NamedTuple

from ariane.common import ids
from ariane.store import file_layer, mapped_file_queue

_log = logging.getLogger(__name__)

UNIT_BYTES = 20
FILLER_SIZE = 0x7FFFFFFF
READ_CHUNK_UNITS_MIN = 16
"""First chunk ``iter_units`` decodes, in units."""
READ_CHUNK_UNITS_MAX = 1024
"""Largest chunk ``iter_units`` decodes at once, in units."""
_UNIT = struct.Struct(">qiq")
_FILLER = _UNIT.pack(0, FILLER_SIZE, 0)
_TOPIC_DIR = re.compile(r"^[%a-zA-Z0-9_-]{1,255}$")


@dataclasses.dataclass(frozen=True, slots=True)
class CqUnit:
    """One ConsumeQueue unit with its queue offset."""

    queue_offset: ids.QueueOffset
    commit_log_offset: ids.CommitLogOffset
    size_bytes: int
    tag_hash: int

    @property
    def is_filler(self) -> bool:
        """Whether this unit only pads the start of a segment."""
        return self.size_bytes == FILLER_SIZE


class NewUnit(NamedTuple):
    """A unit to write: where its record is and its tag hash, in unit layout order.

    A NamedTuple rather than a dataclass: one is built per appended message, and the units
    of a batch are packed with one ``struct`` call each straight from the tuple.
    """

    commit_log_offset: ids.CommitLogOffset
    size_bytes: int
    tag_hash: int


FILLER_UNIT = NewUnit(ids.CommitLogOffset(0), FILLER_SIZE, 0)
"""A filler: no record (a gap, or a slot reserved for a damaged record); reads skip it."""

StoreTimestampOf = Callable[[ids.CommitLogOffset, int], "int | None"]
"""``(commit_log_offset, size) -> store timestamp ms`` of a record, ``None`` if unreadable."""


class ConsumeQueue:
    """The ConsumeQueue of one (topic, queue id).

    Args:
        topic: the topic.
        queue_id: the queue id.
        root: the ``consumequeue`` directory.
        entries_per_file: units per segment file.
        layer: the file layer.
    """

    def __init__(
        self,
        topic: ids.TopicName,
        queue_id: ids.QueueId,
        root: pathlib.Path,
        entries_per_file: int,
        layer: file_layer.FileLayer,
    ) -> None:
        self.topic = topic
        self.queue_id = queue_id
        self.log = mapped_file_queue.MappedFileQueue(
            root / topic / str(queue_id), entries_per_file * UNIT_BYTES, layer
        )
        self._min_queue_offset = 0
        self.padded = False
        """The newest file was found cut short and padded with zeros on ``load``: its tail is
        rebuilt from the CommitLog at start-up (``queue_repair.rebuild_on_start``)."""

    @property
    def max_queue_offset(self) -> ids.QueueOffset:
        """The next queue offset to write (number of units including fillers)."""
        return ids.QueueOffset(self.log.max_offset // UNIT_BYTES)

    @property
    def min_queue_offset(self) -> ids.QueueOffset:
        """The first readable queue offset."""
        return ids.QueueOffset(max(self._min_queue_offset, self.log.min_offset // UNIT_BYTES))

    def load(self) -> None:
        """Open the segment files and find the end of the units.

        Units form a prefix of non-zero sizes, so the end is found by a binary search over
        every file (a crash can leave an empty newest file after a partly written one). A
        newest file cut short is padded with zeros (``padded``; units carry no CRC and are
        rebuilt from the CommitLog, so a lost tail is never fatal).

        Raises:
            StoreLayoutError: if the files do not form a valid log.
        """
        self.padded = self.log.load(pad_short_tail=True)
        files = self.log.files
        if not files:
            return
        low = files[0].start_offset // UNIT_BYTES
        high = files[-1].end_offset // UNIT_BYTES  # the first zero unit lies in [low, high]
        while low < high:
            mid = (low + high) // 2
            segment = self.log.find(mid * UNIT_BYTES)
            assert segment is not None
            raw = segment.read(mid * UNIT_BYTES - segment.start_offset, UNIT_BYTES)
            if raw and _UNIT.unpack(raw)[1] != 0:
                low = mid + 1
            else:
                high = mid
        end = low * UNIT_BYTES
        if any(segment.start_offset > end for segment in self.log.files):
            # Files past the end (created just before a crash) are dropped so that only the
            # last segment is partial.
            self.log.truncate_to(end)
        self.log.set_max_offset(end)
        self._min_queue_offset = self._first_real_unit_offset()

    def _first_real_unit_offset(self) -> int:
        first = self.log.min_offset // UNIT_BYTES
        end = self.max_queue_offset
        while first < end:
            unit = self.unit_at(ids.QueueOffset(first))
            if unit is None or not unit.is_filler:
                break
            first += 1
        return first

    def unit_at(self, queue_offset: ids.QueueOffset) -> CqUnit | None:
        """The unit at ``queue_offset``, or ``None`` outside the stored range."""
        units = self.read(queue_offset, 1)
        return units[0] if units else None

    def read(self, queue_offset: ids.QueueOffset, units_max: int) -> list[CqUnit]:
        """Up to ``units_max`` units from ``queue_offset``, stopping at a segment end.

        Returns:
            the units (fillers included), empty outside the stored range.
        """
        position = queue_offset * UNIT_BYTES
        segment = self.log.find(position)
        if segment is None or queue_offset < self.min_queue_offset:
            return []
        raw = segment.read(position - segment.start_offset, units_max * UNIT_BYTES)
        if not raw:
            return []
        return [
            CqUnit(ids.QueueOffset(queue_offset + i), ids.CommitLogOffset(c), s, t)
            for i, (c, s, t) in enumerate(_UNIT.iter_unpack(raw[: len(raw) - len(raw) % 20]))
        ]

    def iter_units(self, queue_offset: ids.QueueOffset, units_max: int) -> Iterator[CqUnit]:
        """Units from ``queue_offset`` across segment files, at most ``units_max``.

        Reads in chunks that start small and double (``READ_CHUNK_UNITS_MIN`` up to
        ``READ_CHUNK_UNITS_MAX``): a caller that stops after one or two units (a FIFO
        redelivery, a 1-message read) decodes a few units, not a thousand.
        """
        left = units_max
        chunk = READ_CHUNK_UNITS_MIN
        while left > 0:
            units = self.read(queue_offset, min(left, chunk))
            if not units:
                return
            yield from units
            left -= len(units)
            queue_offset = ids.QueueOffset(queue_offset + len(units))
            chunk = min(chunk * 2, READ_CHUNK_UNITS_MAX)

    def put(self, first_queue_offset: ids.QueueOffset, units: Sequence[NewUnit]) -> None:
        """Store units for consecutive queue offsets from ``first_queue_offset``.

        Units already present (a re-dispatch in recovery) are checked and repaired if they
        differ (a filler there, a slot reserved for a damaged record, is replaced without a
        warning); a gap before ``first_queue_offset`` is padded with filler units and logged.

        Raises:
            OSError: if a segment cannot be created or written.
        """
        end = self.max_queue_offset
        skip = 0
        while skip < len(units) and first_queue_offset + skip < end:
            self._verify(ids.QueueOffset(first_queue_offset + skip), units[skip])
            skip += 1
        start = first_queue_offset + skip
        if not self.log.files:
            # The first unit decides where the log starts; pad its segment up to it.
            self.log.reset_empty_start(start * UNIT_BYTES)
            self._min_queue_offset = start
        elif start > end:
            _log.error(
                "ConsumeQueue %s-%d: gap %d..%d filled with blanks",
                self.topic,
                self.queue_id,
                end,
                start,
            )
        if start > self.max_queue_offset:
            self._append_raw(_FILLER * (start - self.max_queue_offset))
        pack = _UNIT.pack
        data = b"".join([pack(*unit) for unit in units[skip:]])
        self._append_raw(data)

    def _verify(self, queue_offset: ids.QueueOffset, unit: NewUnit) -> None:
        present = self.unit_at(queue_offset)
        expected = (unit.commit_log_offset, unit.size_bytes, unit.tag_hash)
        if present is None or (
            (present.commit_log_offset, present.size_bytes, present.tag_hash) == expected
        ):
            return
        if not present.is_filler:  # a filler is a reserved slot: its unit replaces it
            _log.warning(
                "ConsumeQueue %s-%d: repairing unit %d", self.topic, self.queue_id, queue_offset
            )
        segment = self.log.find(queue_offset * UNIT_BYTES)
        assert segment is not None
        segment.overwrite(queue_offset * UNIT_BYTES - segment.start_offset, _UNIT.pack(*expected))

    def _append_raw(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            segment = self.log.segment_for_append()
            chunk = min(len(view), segment.remaining_bytes)
            segment.append(view[:chunk])
            view = view[chunk:]

    def truncate_from_commit_log_offset(
        self, commit_log_offset: int, *, zero_tail: bool = False
    ) -> None:
        """Drop every unit whose record starts at or after ``commit_log_offset`` (recovery).

        Walking back from the end, zero-size units (torn writes, holes left by a crash) are
        dropped too: units below the checkpoint's dispatched offset were synced, so every hole
        lies in the dropped region.

        Args:
            commit_log_offset: the first CommitLog offset whose units must go.
            zero_tail: also zero everything past the kept units and delete later files, even
                when no unit was dropped (after an unclean stop, garbage may hide there).

        Raises:
            OSError: if zeroing or deleting fails.
        """
        low = self.log.min_offset // UNIT_BYTES
        q = int(self.max_queue_offset)
        while q > low:
            unit = self.unit_at(ids.QueueOffset(q - 1))
            if unit is None or unit.is_filler:
                break
            if unit.size_bytes > 0 and unit.commit_log_offset < commit_log_offset:
                break
            q -= 1
        if q < self.max_queue_offset or zero_tail:
            _log.info("ConsumeQueue %s-%d: truncated to %d", self.topic, self.queue_id, q)
            self.log.truncate_to(q * UNIT_BYTES)
            self._min_queue_offset = min(self._min_queue_offset, q)

    def offset_by_time(
        self, timestamp_ms: int, store_timestamp_of: StoreTimestampOf
    ) -> ids.QueueOffset:
        """The first queue offset whose message was stored at or after ``timestamp_ms``.

        Mirrors RocketMQ ``ConsumeQueue.getOffsetInQueueByTime`` (lower boundary): a binary
        search over store timestamps read through ``store_timestamp_of``; unreadable
        messages count as older. Returns ``max_queue_offset`` when every message is older.
        """
        low, high = int(self.min_queue_offset), int(self.max_queue_offset)
        while low < high:
            mid = (low + high) // 2
            unit = self.unit_at(ids.QueueOffset(mid))
            stamp = None
            if unit is not None and not unit.is_filler:
                stamp = store_timestamp_of(unit.commit_log_offset, unit.size_bytes)
            if stamp is None or stamp < timestamp_ms:
                low = mid + 1
            else:
                high = mid
        return ids.QueueOffset(low)

    def correct_min_offset(self, commit_log_min_offset: int) -> None:
        """Advance the min queue offset past units whose records were deleted (retention)."""
        low, high = int(self.min_queue_offset), int(self.max_queue_offset)
        while low < high:
            mid = (low + high) // 2
            unit = self.unit_at(ids.QueueOffset(mid))
            if unit is None or unit.is_filler or unit.commit_log_offset < commit_log_min_offset:
                low = mid + 1
            else:
                high = mid
        self._min_queue_offset = max(self._min_queue_offset, low)

    def has_unit_between(self, start_offset: int, end_offset: int) -> bool:
        """Whether a unit of this queue points into CommitLog ``[start_offset, end_offset)``
        (a binary search: units point at increasing CommitLog offsets)."""
        low, high = int(self.min_queue_offset), int(self.max_queue_offset)
        while low < high:  # the first unit at or past start_offset
            mid = (low + high) // 2
            unit = self.unit_at(ids.QueueOffset(mid))
            if unit is not None and unit.commit_log_offset < start_offset:
                low = mid + 1
            else:
                high = mid
        unit = self.unit_at(ids.QueueOffset(low)) if low < self.max_queue_offset else None
        return unit is not None and start_offset <= unit.commit_log_offset < end_offset

    def delete_expired(self, commit_log_min_offset: int, *, batch_max: int = 10) -> int:
        """Delete segment files whose every unit points below ``commit_log_min_offset``.

        Mirrors RocketMQ ``ConsumeQueue.deleteExpiredFile``; the newest file is kept.

        Returns:
            how many files were deleted.
        """

        def expired(info: mapped_file_queue.SegmentInfo) -> bool:
            last = self.unit_at(ids.QueueOffset(info.end_offset // UNIT_BYTES - 1))
            return last is not None and last.commit_log_offset < commit_log_min_offset

        deleted = self.log.delete_oldest(expired, batch_max=batch_max)
        self.correct_min_offset(commit_log_min_offset)
        return deleted

    def flush(self) -> None:
        """Sync every unflushed unit.

        Raises:
            OSError: if a sync fails.
        """
        self.log.flush()


def is_valid_topic_dir(name: str) -> bool:
    """Whether a directory name can be a topic (RocketMQ topic characters, 1..255)."""
    return bool(_TOPIC_DIR.match(name))


class ConsumeQueueStore:
    """Every ConsumeQueue of the store, bounded by ``count_max``.

    Args:
        root: the ``consumequeue`` directory.
        entries_per_file: units per segment file.
        layer: the file layer.
        count_max: most (topic, queue id) pairs.
    """

    def __init__(
        self, root: pathlib.Path, entries_per_file: int, layer: file_layer.FileLayer, count_max: int
    ) -> None:
        self.root = root
        self._entries_per_file = entries_per_file
        self._layer = layer
        self._count_max = count_max
        self._queues: dict[tuple[ids.TopicName, ids.QueueId], ConsumeQueue] = {}

    def load(self) -> None:
        """Open every queue directory under ``root``; unknown names are skipped with a warning."""
        self._layer.make_dirs(self.root)
        for topic_name in self._layer.list_dir(self.root):
            if not is_valid_topic_dir(topic_name):
                _log.warning("ignoring %s: not a topic name", self.root / topic_name)
                continue
            for queue_name in self._layer.list_dir(self.root / topic_name):
                if not queue_name.isdigit():
                    _log.warning("ignoring %s: not a queue id", self.root / topic_name / queue_name)
                    continue
                queue = self._make(ids.TopicName(topic_name), ids.QueueId(int(queue_name)))
                queue.load()
                if queue.log.files:  # an empty directory is what a deleted topic leaves
                    self._queues[(queue.topic, queue.queue_id)] = queue

    def _make(self, topic: ids.TopicName, queue_id: ids.QueueId) -> ConsumeQueue:
        return ConsumeQueue(topic, queue_id, self.root, self._entries_per_file, self._layer)

    def get(self, topic: str, queue_id: int) -> ConsumeQueue | None:
        """The queue, or ``None`` if it was never written."""
        return self._queues.get((ids.TopicName(topic), ids.QueueId(queue_id)))

    def get_or_create(self, topic: ids.TopicName, queue_id: ids.QueueId) -> ConsumeQueue:
        """The queue, created empty if missing (the caller checked ``count`` against the bound)."""
        key = (topic, queue_id)
        queue = self._queues.get(key)
        if queue is None:
            assert len(self._queues) < self._count_max, "ConsumeQueue bound checked by the caller"
            queue = self._queues[key] = self._make(topic, queue_id)
        return queue

    @property
    def count(self) -> int:
        """How many queues exist."""
        return len(self._queues)

    def queues(self) -> list[ConsumeQueue]:
        """Every queue, sorted by (topic, queue id)."""
        return [self._queues[k] for k in sorted(self._queues)]

    def delete_topic(self, topic: ids.TopicName) -> int:
        """Delete every ConsumeQueue of ``topic`` with its files (RocketMQ
        ``ConsumeQueueStore.deleteTopic``); returns how many queues went."""
        doomed = [key for key in self._queues if key[0] == topic]
        for key in doomed:
            self._queues.pop(key).log.destroy()
        return len(doomed)

    def flush_all(self) -> None:
        """Sync every queue.

        Raises:
            OSError: if a sync fails.
        """
        for queue in list(self._queues.values()):
            queue.flush()

    def truncate_from_commit_log_offset(
        self, commit_log_offset: int, *, zero_tail: bool = False
    ) -> None:
        """Drop units pointing at or past ``commit_log_offset`` in every queue (see
        ``ConsumeQueue.truncate_from_commit_log_offset``)."""
        for queue in list(self._queues.values()):
            queue.truncate_from_commit_log_offset(commit_log_offset, zero_tail=zero_tail)

    def next_offset_table(self) -> dict[tuple[ids.TopicName, ids.QueueId], int]:
        """(topic, queue id) → next queue offset, for the CommitLog's queue-offset table."""
        return {key: int(queue.max_queue_offset) for key, queue in self._queues.items()}

    def topics_between(self, start_offset: int, end_offset: int) -> set[ids.TopicName]:
        """The topics with a message in CommitLog ``[start_offset, end_offset)`` (one
        segment's range: per-topic retention asks which topics a segment holds)."""
        return {
            topic
            for (topic, _), queue in list(self._queues.items())
            if queue.has_unit_between(start_offset, end_offset)
        }

    def delete_expired(self, commit_log_min_offset: int, *, batch_max: int = 10) -> int:
        """Delete ConsumeQueue files wholly below ``commit_log_min_offset`` in every queue."""
        return sum(
            q.delete_expired(commit_log_min_offset, batch_max=batch_max)
            for q in list(self._queues.values())
        )
