"""ConsumeQueue units checked against their records and rebuilt from the CommitLog.

Units carry no CRC (as in RocketMQ), so a flipped bit can make a unit point outside the
CommitLog, into the middle of a record or at another queue's record, or carry a wrong size or
tag code; a cut file loses its last units. RocketMQ notices only units with a negative offset
or size at start-up and otherwise serves whatever the unit points at (or skips it). Here:

- every unit a queue read uses is checked against the record it reads (``serves``: topic,
  queue id, queue offset, size and tag code all the unit's); a unit that fails is rebuilt
  (``UnitChecker.check``) from the CommitLog and the record read again; if the unit was sound
  and the record fails its CRCs, the CommitLog is what is damaged: ``record_repair`` asks a
  slave for it and the read stops there (CORRUPT), so nothing is skipped or served wrong;
- at start-up (``rebuild_on_start``) a queue whose newest file was cut short (padded with zeros
  on load) and the last ``START_CHECK_UNITS`` units of every queue are checked, and a queue
  failing either has its tail rebuilt up to the dispatched end. Measured: 0.12 s for 2,000
  queues (two record reads each) on the 2-core development machine, about 60 µs per queue.

Limits, stated: a unit skipped by a tag filter is not read, so a flipped tag code can hide its
message from that subscription (as in RocketMQ) until a read without that filter meets it; a
damaged unit more than ``ANCHOR_SEARCH_UNITS`` after the queue's first with no sound unit in
between is left alone (logged) and the read stops there.

A rebuild (``rebuild``) re-derives the queue's units from the nearest sound unit before the
damaged one (looked for at most ``ANCHOR_SEARCH_UNITS`` back; the CommitLog's start when the
damaged unit is within that many of the queue's first) by scanning the CommitLog (headers
only, no CRCs: a record damaged in its body still has its place) and writes them with
``ConsumeQueue.put``, which rewrites units that differ and appends missing ones, under the
store's put lock. Its cost is the CommitLog scanned from that anchor (about 40 MB/s on the
development machine), paid once per damaged unit (``VERIFIED_MAX`` sound units whose record is
damaged are remembered, so a record awaiting repair is not rescanned on every read).
"""

from __future__ import annotations

import collections
import logging
import threading
from collections.abc import Callable

from ariane.common import ids
from ariane.store import (
    commit_log,
    consume_queue,
    dispatcher,
    record_reader,
    record_repair,
)

_log = logging.getLogger(__name__)

ANCHOR_SEARCH_UNITS = 64
"""Units looked at before a damaged one for a sound unit to rebuild from."""
START_CHECK_UNITS = 2
"""Newest units of every queue checked at start-up."""
VERIFIED_MAX = 1024
"""Sound units remembered as pointing at a damaged record (no rebuild on their next read)."""

_LookupStatus = record_reader.LookupStatus


def serves(
    queue: consume_queue.ConsumeQueue, unit: consume_queue.CqUnit, found: record_reader.LookupResult
) -> bool:
    """Whether ``found`` is the record ``unit`` of ``queue`` stands for."""
    stored = found.message
    if found.status is not _LookupStatus.FOUND or stored is None:
        return False
    return (
        stored.topic == queue.topic
        and stored.queue_id == queue.queue_id
        and stored.queue_offset == unit.queue_offset
        and stored.store_size_bytes == unit.size_bytes
        and commit_log.tags_code_of(stored.message, stored.store_timestamp_ms) == unit.tag_hash
    )


def rebuild(
    log: commit_log.CommitLog,
    queue: consume_queue.ConsumeQueue,
    feed: dispatcher.Dispatcher,
    put_lock: threading.Lock,
    *,
    from_queue_offset: int,
    until_queue_offset: int | None,
) -> int:
    """Rewrite the units of ``queue`` from ``from_queue_offset`` on from the CommitLog.

    Args:
        log: the CommitLog.
        queue: the damaged queue.
        feed: the dispatcher (its dispatched offset ends the scan; its topic floors skip
            records of a deleted topic of the same name).
        put_lock: the store's put lock, held while units are written.
        from_queue_offset: the first unit suspected.
        until_queue_offset: stop after the unit before it; ``None``: up to the dispatched end.

    Returns:
        the queue offset past the last unit the scan produced (every unit below it now
        stands for its record); -1 when there was no anchor to rebuild from.

    Raises:
        OSError: a ConsumeQueue write failed.
    """
    anchor = _anchor(log, queue, from_queue_offset)
    if anchor is None:
        _log.error(
            "ConsumeQueue %s-%d: no sound unit within %d before %d; not rebuilt",
            queue.topic,
            queue.queue_id,
            ANCHOR_SEARCH_UNITS,
            from_queue_offset,
        )
        return -1
    start, first = anchor
    end = feed.dispatched_offset
    floor = feed.topic_floors.get(queue.topic, -1)
    units: list[consume_queue.NewUnit] = []
    for item in log.scan(start, check_crc=False):
        stored = item.result.message
        if item.offset >= end or stored is None:
            break
        if stored.topic != queue.topic or stored.queue_id != queue.queue_id:
            continue
        if until_queue_offset is not None and stored.queue_offset >= until_queue_offset:
            break
        request = commit_log.dispatch_request_of(stored)
        if (
            request.to_consume_queue
            and item.offset >= floor
            and stored.queue_offset == first + len(units)
        ):
            unit = (stored.commit_log_offset, request.size_bytes, request.tags_code)
            units.append(consume_queue.NewUnit(*unit))
    with put_lock:
        if units:
            queue.put(ids.QueueOffset(first), units)
    _log.info(  # a unit that differed was logged by ``put`` as it rewrote it
        "ConsumeQueue %s-%d: units %d..%d checked against the CommitLog",
        queue.topic,
        queue.queue_id,
        first,
        first + len(units),
    )
    return first + len(units)


def _anchor(
    log: commit_log.CommitLog, queue: consume_queue.ConsumeQueue, queue_offset: int
) -> tuple[int, int] | None:
    """(CommitLog offset to scan from, the queue offset of the first unit it yields)."""
    low = int(queue.min_queue_offset)
    for at in range(queue_offset - 1, max(low, queue_offset - ANCHOR_SEARCH_UNITS) - 1, -1):
        unit = queue.unit_at(ids.QueueOffset(at))
        if unit is None or unit.is_filler:
            break
        if serves(queue, unit, log.read(unit.commit_log_offset, unit.size_bytes)):
            return unit.commit_log_offset, at
    if queue_offset - low <= ANCHOR_SEARCH_UNITS:
        return log.min_offset, low
    return None


class UnitChecker:
    """Checks the units queue reads use (``queue_read.read``'s ``check_unit``).

    Args:
        log: the CommitLog.
        feed: the dispatcher.
        put_lock: the store's put lock.
        repairs: where a damaged record (behind a sound unit) is reported.
    """

    def __init__(
        self,
        log: commit_log.CommitLog,
        feed: dispatcher.Dispatcher,
        put_lock: threading.Lock,
        repairs: record_repair.RecordRepairs,
    ) -> None:
        self._log = log
        self._feed = feed
        self._put_lock = put_lock
        self._repairs = repairs
        self._lock = threading.Lock()
        self._verified: collections.OrderedDict[tuple[str, int, consume_queue.CqUnit], None] = (
            collections.OrderedDict()
        )
        self.rebuild_count = 0
        """Rebuilds run by reads since start."""

    def for_queue(
        self, queue: consume_queue.ConsumeQueue
    ) -> Callable[[consume_queue.CqUnit, record_reader.LookupResult], record_reader.LookupResult]:
        """The ``check_unit`` of reads of ``queue``."""
        return lambda unit, found: self.check(queue, unit, found)

    def check(
        self,
        queue: consume_queue.ConsumeQueue,
        unit: consume_queue.CqUnit,
        found: record_reader.LookupResult,
    ) -> record_reader.LookupResult:
        """What a queue read may use of the record ``found`` through ``unit``.

        Returns:
            FOUND with the record the unit stands for (read again after a rebuild); NOT_FOUND
            for a record deleted by retention; CORRUPT when the record is damaged (a slave is
            asked for it) or the unit still disagrees with its record after a rebuild (the
            read stops there: never skipped, never served wrong).

        Raises:
            OSError: a ConsumeQueue write failed.
        """
        if serves(queue, unit, found) or (
            found.status is _LookupStatus.NOT_FOUND
            and unit.commit_log_offset < self._log.min_offset
        ):
            return found
        key = (queue.topic, queue.queue_id, unit)
        with self._lock:
            known = key in self._verified
        if not known:
            self.rebuild_count += 1
            covered = rebuild(
                self._log,
                queue,
                self._feed,
                self._put_lock,
                from_queue_offset=unit.queue_offset,
                until_queue_offset=unit.queue_offset + 1,
            )
            rebuilt = queue.unit_at(unit.queue_offset)
            if rebuilt is not None and rebuilt != unit:
                unit, found = rebuilt, self._log.read(rebuilt.commit_log_offset, rebuilt.size_bytes)
                if serves(queue, unit, found):
                    return found
            elif found.status is _LookupStatus.CORRUPT:
                self._remember(key)
            elif found.status is _LookupStatus.FOUND and covered > unit.queue_offset:
                return found  # the CommitLog itself gives this unit: it stands for its record
        if found.status is _LookupStatus.CORRUPT:
            self._repairs.corrupt(unit.commit_log_offset, found.reason)
            return found
        _log.error(
            "ConsumeQueue %s-%d: unit %d still disagrees with its record after a rebuild",
            queue.topic,
            queue.queue_id,
            unit.queue_offset,
        )
        return record_reader.LookupResult(_LookupStatus.CORRUPT, reason="unit disagrees")

    def _remember(self, key: tuple[str, int, consume_queue.CqUnit]) -> None:
        with self._lock:
            self._verified[key] = None
            if len(self._verified) > VERIFIED_MAX:
                self._verified.popitem(last=False)


def rebuild_on_start(
    log: commit_log.CommitLog,
    queues: consume_queue.ConsumeQueueStore,
    feed: dispatcher.Dispatcher,
) -> int:
    """Rebuild the tail of every queue whose newest file was cut short or whose newest
    ``START_CHECK_UNITS`` units disagree with their records, up to the dispatched end.

    Returns:
        how many queues were rebuilt.

    Raises:
        OSError: a ConsumeQueue write failed.
    """
    rebuilt = 0
    lock = threading.Lock()
    for queue in queues.queues():
        suspect = _first_bad_tail_unit(log, queue)
        if suspect is None and not queue.padded:
            continue
        start = suspect if suspect is not None else int(queue.max_queue_offset)
        _log.warning(
            "ConsumeQueue %s-%d: %s; rebuilding its tail from the CommitLog",
            queue.topic,
            queue.queue_id,
            "its newest file was cut short" if queue.padded else f"unit {start} is damaged",
        )
        rebuild(log, queue, feed, lock, from_queue_offset=start, until_queue_offset=None)
        queue.padded = False
        rebuilt += 1
    return rebuilt


def _first_bad_tail_unit(
    log: commit_log.CommitLog, queue: consume_queue.ConsumeQueue
) -> int | None:
    high = int(queue.max_queue_offset)
    low = max(int(queue.min_queue_offset), high - START_CHECK_UNITS)
    for at in range(low, high):
        unit = queue.unit_at(ids.QueueOffset(at))
        if unit is None or unit.is_filler:
            continue
        found = log.read(unit.commit_log_offset, unit.size_bytes)
        if not serves(queue, unit, found) and unit.commit_log_offset >= log.min_offset:
            return at
    return None
