"""Start-up recovery of the CommitLog and ConsumeQueues (RocketMQ ``recoverNormally/Abnormally``).

Clean stop (no ``abort`` file, a valid checkpoint): the checkpoint's flushed offset is the end
of the CommitLog; the 8 bytes at that offset must be zero (a cheap sign the tail is what the
checkpoint says), else recovery falls back to the unclean path. On a slave
(``repair_from_master``) the records of the newest ``verify_segments_on_clean_start`` segments
(3, as RocketMQ ``recoverNormally`` rescans from the third-newest file) are CRC-checked, and the
CommitLog is cut at the first bad one: its HA client then asks its master for everything from
the cut on (a repair from its peer, byte-identical: a flip in the slave's own copy is undone;
one in the master's comes back as it is and is kept by the reput, below). The check costs a scan
(about 40 MB/s of CommitLog on the 2-core development machine: 4 s for 171 MB of 1 KiB
messages), so a master, which would keep what it finds, skips it: RocketMQ cuts at the first bad
record on any broker, but a master cutting would drop acknowledged messages that follow it (and
its slaves would then be told to cut them too); its reads of a damaged record answer CORRUPT,
never its bytes. Damage in older segments is found by reads (every read is CRC-checked), not at
start-up.

Unclean stop: walk back from the newest segment to the first one that starts at or below
``min(flushed, dispatched)`` of the checkpoint, at most ``max_recovery_commit_log_files``
segments; rescan forward with CRC checks (``check_crc_on_recover``); the first torn, corrupt
or misplaced record ends the valid data, with one exception (below). Then: drop
ConsumeQueue units at or past the re-dispatch start (the checkpoint's dispatched offset),
re-dispatch every valid record from there (ConsumeQueue units and key index, whose entries from
that start on are dropped first so that they are rebuilt from valid records only), cut the
CommitLog at the valid end (zero the rest of its segment up to the CommitLog's high-water mark,
sync the zeros, delete later segments) and sync what was scanned, since after a process crash
those bytes may still sit unsynced in the page cache.

A damaged record is not a torn tail (Ariane's addition; RocketMQ ``recoverAbnormally`` cuts at
the first record whose CRC fails, on any broker, so one flipped bit drops every later record,
acknowledged ones included). Where the scan stops, ``record_scan.look`` says what is there by
the store's one rule (shared with the reput and a promotion's cut): a *whole* record failing
only its CRCs is kept as DAMAGED when it ends at or below the checkpoint's flushed CommitLog
offset (those bytes were synced before the checkpoint was written, and the checkpoint is
rewritten after every cut: a crash cannot have torn them, only a flip changed them), or when a
record passing every check follows it, possibly after further whole damaged records (should
page write-back order ever leave a whole but torn record before sound ones, it is kept as
damaged too, and when no slave holds it its queue waits at it, as for any record no slave can
repair). Anything else ends the valid data: a record that is not whole, or whole damaged records
past the flushed offset with no sound record after them (cut at the first of them: a torn
tail). Stale bytes cannot vouch for a damaged record: every cut (this one, a replica's diverged
tail, a promotion's partial record) zeroes and syncs its segment past the cut up to the
high-water mark, and a record must sit at its own PHYSICALOFFSET. A damaged record below the
re-dispatch start keeps the unit it had. One past it gets the unit ``record_scan.place``
decides (its properties read as none when they are not UTF-8: no tag code, no keys): the one
its header claims when only its body can have changed or the claim is its queue's next unit,
else the one queue where it would be the next unit matching two of the three fields its header
claims, that the records after it leave a gap for; with several such places each is reserved
(a filler unit: reads skip it, no queue offset is given twice), and the data never ends there
(it did before: every record after an unplaceable one was cut). A kept record is then handled
as on the clean path: listed in ``RecoveryReport.damaged_offsets``, answered CORRUPT by reads,
which stop its queue there and ask an in-sync slave for its bytes (``record_repair``). A slave
(``repair_from_master``) after an unclean stop keeps a whole damaged record only when a sound
record follows it (it trusts no flushed offset: its newest segment may have been padded after
a truncation): its master streams its CommitLog verbatim, so the master's own copy may be the
damaged one, and a slave cutting there lost every record after it once promoted (chaos run,
issue 25: 4.56 MB); its reput dispatches past such a record too
(``dispatcher.ReputMessageService``), and a promotion cuts only a partial last record.

Either way every ConsumeQueue whose newest file was cut short, or whose newest units disagree
with their records, has its tail rebuilt from the CommitLog (``queue_repair.rebuild_on_start``)
before the next queue offsets are taken from the ConsumeQueues, and the key index ends up
with no entry at or past the recovered end (RocketMQ deletes index files newer than the
checkpoint after an abnormal stop): otherwise a key of a cut record would point at whatever is
written at its offset next, and the index, which only accepts offsets above its highest one,
would never index the new records written there; a damaged index file is dropped and the
CommitLog's keys from its first offset indexed again (``index_repair.repair_on_start``).
"""

from __future__ import annotations

import dataclasses
import logging

from ariane.common import ids
from ariane.store import (
    checkpoint,
    commit_log,
    consume_queue,
    dispatcher,
    index_repair,
    index_service,
    message_codec,
    queue_repair,
    record_scan,
)

_log = logging.getLogger(__name__)

_REDISPATCH_BATCH = 1024
DAMAGED_LISTED_MAX = 64
"""Damaged records a recovery lists in its report and logs one by one; more are counted (and
placed without a scan ahead)."""
LOOKAHEAD_BYTES_MAX = 64 * 1024 * 1024
"""How far past a damaged record recovery scans to place its unit (``record_scan.place``),
bytes: about 1.6 s at the development machine's 40 MB/s, at most ``DAMAGED_LISTED_MAX`` times."""


@dataclasses.dataclass(frozen=True, slots=True)
class RecoveryReport:
    """What recovery did.

    Attributes:
        clean: the clean-stop path was taken (no scan).
        scanned_records: CommitLog records decoded by the scan.
        redispatched_records: records whose units/index keys were rebuilt.
        scan_start_offset: where the scan began (-1 when there was none).
        valid_end_offset: the CommitLog end after recovery.
        stop_reason: why the scan stopped ("" for END or no scan).
        damaged_offsets: the first ``DAMAGED_LISTED_MAX`` damaged records kept (a master's
            unclean recovery), ascending CommitLog offsets.
        damaged_count: how many damaged records were kept.
    """

    clean: bool
    scanned_records: int
    redispatched_records: int
    scan_start_offset: int
    valid_end_offset: int
    stop_reason: str
    damaged_offsets: tuple[int, ...] = ()
    damaged_count: int = 0


def recover(
    log: commit_log.CommitLog,
    queues: consume_queue.ConsumeQueueStore,
    feed: dispatcher.Dispatcher,
    saved: checkpoint.Checkpoint | None,
    *,
    unclean: bool,
    index: index_service.IndexService | None = None,
) -> RecoveryReport:
    """Bring a freshly loaded CommitLog, its ConsumeQueues and key index to a consistent state.

    Args:
        log: the loaded CommitLog (all segments marked full by ``load``).
        queues: the loaded ConsumeQueues.
        feed: the dispatcher to rebuild units with; its offset is set here.
        saved: the checkpoint, or ``None`` if missing or unreadable.
        unclean: the ``abort`` marker was found.
        index: the key index fed by ``feed``, if any; cut to the recovered end.

    Returns:
        a report; the CommitLog's next-queue-offset table is rebuilt from the ConsumeQueues.

    Raises:
        OSError: if truncation or syncing fails.
    """
    clean = saved is not None and not unclean
    if clean and saved is not None and _tail_is_clean(log, saved.flushed_commit_log_offset):
        end = saved.flushed_commit_log_offset
        bad = _first_corrupt_before(log, end)
        if bad is not None and log.settings.repair_from_master:
            report = _recover_unclean(log, queues, feed, saved, index, floor_max=bad)
            return _finish(log, queues, feed, index, report)
        log.log.set_max_offset(end)
        queues.truncate_from_commit_log_offset(end)
        feed.dispatched_offset = ids.CommitLogOffset(min(saved.dispatched_commit_log_offset, end))
        report = RecoveryReport(True, 0, 0, -1, end, "")
    elif not log.log.files:
        start = saved.flushed_commit_log_offset if saved is not None else 0
        log.log.set_max_offset(start)
        queues.truncate_from_commit_log_offset(start)
        feed.dispatched_offset = ids.CommitLogOffset(start)
        report = RecoveryReport(True, 0, 0, -1, start, "")
    else:
        report = _recover_unclean(log, queues, feed, saved, index)
    return _finish(log, queues, feed, index, report)


def _finish(
    log: commit_log.CommitLog,
    queues: consume_queue.ConsumeQueueStore,
    feed: dispatcher.Dispatcher,
    index: index_service.IndexService | None,
    report: RecoveryReport,
) -> RecoveryReport:
    if index is not None:
        index.truncate_after(log.max_offset)
        index_repair.repair_on_start(index, log, feed)  # a damaged file: keys indexed again
    queue_repair.rebuild_on_start(log, queues, feed)  # before the next queue offsets are taken
    log.set_queue_offset_table(queues.next_offset_table())
    log.high_water.cover(log.max_offset)  # raised here, not on the first append's path
    return report


def _first_corrupt_before(log: commit_log.CommitLog, end: int) -> int | None:
    """The offset of the first record below ``end`` in the newest
    ``verify_segments_on_clean_start`` segments that fails its checks (CRCs included), or
    ``None``. Logged either way it is handled: a slave cuts there, a master keeps it."""
    files = log.log.files
    count = log.settings.verify_segments_on_clean_start
    if count == 0 or not files or not log.settings.repair_from_master:
        return None  # a master would keep what it finds: its reads check CRCs anyway
    start = files[max(0, len(files) - count)].start_offset
    for item in log.scan(start, check_crc=True):
        if item.offset >= end or item.result.status is message_codec.DecodeStatus.END:
            return None
        if item.result.status is not message_codec.DecodeStatus.OK:
            cut = log.settings.repair_from_master
            _log.error(
                "CommitLog record at %d is corrupt (%s) below the clean end %d: %s",
                item.offset,
                item.result.reason,
                end,
                "cut there, the rest is re-fetched from the master"
                if cut
                else "kept (a master never cuts acknowledged data); reads of it answer CORRUPT",
            )
            return item.offset
    return None


def _tail_is_clean(log: commit_log.CommitLog, end: int) -> bool:
    files = log.log.files
    if not files:
        return True
    if not files[-1].start_offset <= end <= files[-1].end_offset or end < files[0].start_offset:
        _log.warning("checkpoint end %d is outside the CommitLog files; rescanning", end)
        return False
    segment = log.log.find(end)
    if segment is None:
        return True
    tail = segment.read(end - segment.start_offset, message_codec.END_FILE_MIN_BLANK_BYTES)
    if tail is None or any(tail):
        _log.warning("data after the checkpoint end %d; rescanning", end)
        return False
    return True


def _scan_start(log: commit_log.CommitLog, floor: int) -> int:
    files = log.log.files
    index = len(files) - 1
    limit = log.settings.max_recovery_commit_log_files
    while index > 0 and files[index].start_offset > floor and len(files) - index < limit:
        index -= 1
    return files[index].start_offset


def _recover_unclean(
    log: commit_log.CommitLog,
    queues: consume_queue.ConsumeQueueStore,
    feed: dispatcher.Dispatcher,
    saved: checkpoint.Checkpoint | None,
    index: index_service.IndexService | None,
    *,
    floor_max: int | None = None,
) -> RecoveryReport:
    if saved is None:
        floor = log.log.min_offset
    else:
        floor = min(saved.flushed_commit_log_offset, saved.dispatched_commit_log_offset)
    if floor_max is not None:
        floor = min(floor, floor_max)
    start = _scan_start(log, floor)
    redispatch_from = start if saved is None else max(start, saved.dispatched_commit_log_offset)
    _log.warning("unclean stop: rescanning the CommitLog from %d", start)
    queues.truncate_from_commit_log_offset(redispatch_from, zero_tail=True)
    if index is not None:  # rebuilt from the re-dispatch: no entry of a cut record survives
        index.truncate_after(ids.CommitLogOffset(redispatch_from))
    feed.dispatched_offset = ids.CommitLogOffset(redispatch_from)
    slave = log.settings.repair_from_master  # trusts no flushed offset: a padded segment
    flushed = -1 if saved is None or slave else saved.flushed_commit_log_offset
    keep = floor_max is None  # a slave's clean start cuts its own damage for a re-fetch
    rescan = _Rescan(
        log, queues, feed, redispatch_from=redispatch_from, flushed=flushed, keep_damaged=keep
    )
    end, reason = rescan.run(start)
    if reason:
        _log.warning("CommitLog valid data ends at %d: %s", end, reason)
    for segment in log.log.files:
        if segment.end_offset > start:
            segment.force_sync()
    high_water = log.high_water.load()
    if high_water is None:
        _log.warning("no CommitLog high-water mark: zeroing the whole tail of the cut segment")
    log.log.truncate_to(end, zero_end_offset=high_water)
    # Sync the re-dispatched units first: a cut below a queue's written end marks the files
    # before it flushed without a sync (units of a damaged tail are dispatched, then cut).
    queues.flush_all()
    queues.truncate_from_commit_log_offset(end)
    feed.dispatched_offset = ids.CommitLogOffset(end)  # dispatched up to end, nothing past it
    queues.flush_all()
    return RecoveryReport(
        False,
        rescan.scanned,
        rescan.redispatched,
        start,
        end,
        reason,
        tuple(rescan.damaged),
        rescan.damaged_count,
    )


class _Rescan:
    """The unclean path's forward scan: sound records re-dispatched from ``redispatch_from``,
    damaged records (a master's or a slave's) kept or cut by ``record_scan``'s rule.

    Args:
        log: the CommitLog.
        queues: the ConsumeQueues (cut at ``redispatch_from`` already).
        feed: the dispatcher (its offset at ``redispatch_from``).
        redispatch_from: the first CommitLog offset whose records are dispatched again.
        flushed: the checkpoint's flushed CommitLog offset, -1 without a checkpoint (or on a
            slave).
        keep_damaged: whole damaged records may be kept (False: the first one ends the data).
    """

    def __init__(
        self,
        log: commit_log.CommitLog,
        queues: consume_queue.ConsumeQueueStore,
        feed: dispatcher.Dispatcher,
        *,
        redispatch_from: int,
        flushed: int,
        keep_damaged: bool = True,
    ) -> None:
        self._log = log
        self._queues = queues
        self._feed = feed
        self._redispatch_from = redispatch_from
        self._flushed = flushed
        settings = log.settings
        self._check_crc = settings.check_crc_on_recover
        self._keep_damaged = settings.check_crc_on_recover and keep_damaged
        self._pending: list[commit_log.DispatchRequest] = []
        self._lookaheads = 0
        """Damaged records placed with a scan ahead (``record_scan.place``); past
        ``DAMAGED_LISTED_MAX`` the rest are placed by their claims alone."""
        self.scanned = 0
        self.redispatched = 0
        self.damaged: list[int] = []
        """The first ``DAMAGED_LISTED_MAX`` damaged records kept."""
        self.damaged_count = 0

    def run(self, start: int) -> tuple[int, str]:
        """Scan from ``start`` (a record boundary) and dispatch what is kept.

        Returns:
            (where the valid data ends, why: "" at the end of the data).

        Raises:
            OSError: a ConsumeQueue write failed.
        """
        offset = start
        while True:
            end, reason = self._scan_sound(offset)
            if not reason:
                break
            found = record_scan.look(
                self._log.reader,
                end,
                check_crc=self._check_crc,
                flushed=self._flushed,
                keep_damaged=self._keep_damaged,
            )
            if found.kind is not record_scan.Kind.DAMAGED:
                reason = found.reason or reason
                break
            self._hold(found)
            offset = found.next_offset
        self._dispatch_pending()
        return end, reason

    def _scan_sound(self, start: int) -> tuple[int, str]:
        """Dispatch the records passing every check from ``start``; where and why they end."""
        for item in self._log.scan(start, check_crc=self._check_crc):
            stored = item.result.message
            if item.result.status is not message_codec.DecodeStatus.OK or stored is None:
                return item.offset, item.result.reason
            self.scanned += 1
            if item.offset >= self._redispatch_from:
                self._pending.append(commit_log.dispatch_request_of(stored))
                if len(self._pending) >= _REDISPATCH_BATCH:
                    self._dispatch_pending()
        return start, ""  # not reached: a scan ends with an END or CORRUPT item

    def _hold(self, found: record_scan.Found) -> None:
        """Keep a DAMAGED record; past the re-dispatch start, dispatch the unit
        ``record_scan.place`` decides, or reserve its possible places (below it, its unit and
        keys were dispatched, and synced, before the stop)."""
        self.scanned += 1
        self._keep(found.offset, found.reason)
        if found.offset < self._redispatch_from:
            return
        self._dispatch_pending()  # the queues then hold every unit before this record
        self._lookaheads += 1
        placement = record_scan.place(
            self._log.reader,
            self._queues,
            found,
            lookahead_bytes_max=LOOKAHEAD_BYTES_MAX
            if self._lookaheads <= DAMAGED_LISTED_MAX
            else 0,
        )
        if placement.problem:
            _log.error(
                "damaged CommitLog record at %d (%s): %s",
                found.offset,
                found.reason,
                record_scan.describe(placement),
            )
        if placement.unit is not None:
            self._pending.append(placement.unit)
        else:
            self._feed.reserve(placement.reserved)

    def _keep(self, offset: int, reason: str) -> None:
        self.damaged_count += 1
        if len(self.damaged) >= DAMAGED_LISTED_MAX:
            return
        self.damaged.append(offset)
        _log.error(
            "CommitLog record at %d is damaged (%s) but whole, inside the log: kept with every "
            "record after it; reads answer CORRUPT until an in-sync slave's copy repairs it",
            offset,
            reason,
        )

    def _dispatch_pending(self) -> None:
        self._feed.dispatch(self._pending)
        self.redispatched += len(self._pending)
        self._pending = []
