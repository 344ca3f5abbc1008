"""Start-up recovery of the CommitLog and ConsumeQueues (RocketMQ ``recoverNormally/Abnormally``).

Clean stop (no ``abort`` file, a valid checkpoint): the checkpoint's flushed offset is the end
of the CommitLog; the 8 bytes at that offset must be zero (a cheap sign the tail is what the
checkpoint says), else recovery falls back to the unclean path. On a slave
(``repair_from_master``) the records of the newest ``verify_segments_on_clean_start`` segments
(3, as RocketMQ ``recoverNormally`` rescans from the third-newest file) are CRC-checked, and the
CommitLog is cut at the first bad one: its HA client then asks its master for everything from
the cut on (a repair from its peer, byte-identical). The check costs a scan (about 40 MB/s of
CommitLog on the 2-core development machine: 4 s for 171 MB of 1 KiB messages), so a master,
which would keep what it finds, skips it: RocketMQ cuts at the first bad record on any broker,
but a master cutting would drop acknowledged messages that follow it (and its slaves would then
be told to cut them too); its reads of a damaged record answer CORRUPT, never its bytes.
Damage in older segments is found by reads (every read is CRC-checked), not at start-up.

Unclean stop: walk back from the newest segment to the first one that starts at or below
``min(flushed, dispatched)`` of the checkpoint, at most ``max_recovery_commit_log_files``
segments; rescan forward with CRC checks (``check_crc_on_recover``); the first torn, corrupt
or misplaced record ends the valid data. Then: drop ConsumeQueue units at or past the
re-dispatch start (the checkpoint's dispatched offset), re-dispatch every valid record from
there (ConsumeQueue units and key index, whose entries from that start on are dropped first so
that they are rebuilt from valid records only), cut the CommitLog at the valid end (zero the rest of
its segment up to the CommitLog's high-water mark, delete later segments) and sync what was
scanned, since after a process crash those bytes may still sit unsynced in the page cache.

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
)

_log = logging.getLogger(__name__)

_REDISPATCH_BATCH = 1024


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
    """

    clean: bool
    scanned_records: int
    redispatched_records: int
    scan_start_offset: int
    valid_end_offset: int
    stop_reason: str


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
    scanned = redispatched = 0
    pending: list[commit_log.DispatchRequest] = []
    end, reason = start, ""
    for item in log.scan(start, check_crc=log.settings.check_crc_on_recover):
        if item.result.status is not message_codec.DecodeStatus.OK:
            end, reason = item.offset, item.result.reason
            break
        scanned += 1
        assert item.result.message is not None
        if item.offset >= redispatch_from:
            pending.append(commit_log.dispatch_request_of(item.result.message))
            if len(pending) >= _REDISPATCH_BATCH:
                feed.dispatch(pending)
                redispatched += len(pending)
                pending = []
    feed.dispatch(pending)
    redispatched += len(pending)
    if reason:
        _log.warning("CommitLog valid data ends at %d: %s", end, reason)
    for segment in log.log.files:
        if segment.end_offset > start:
            segment.force_sync()
    high_water = log.high_water.load()
    if high_water is None:
        _log.warning("no CommitLog high-water mark: zeroing the whole tail of the cut segment")
    log.log.truncate_to(end, zero_end_offset=high_water)
    queues.truncate_from_commit_log_offset(end)
    feed.dispatched_offset = ids.CommitLogOffset(end)  # dispatched up to end, nothing past it
    queues.flush_all()
    return RecoveryReport(False, scanned, redispatched, start, end, reason)
