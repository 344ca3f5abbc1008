"""``MessageStore``: the storage engine's one entry point (RocketMQ ``DefaultMessageStore``).

It composes the CommitLog, the ConsumeQueues, the dispatcher, the flush services, the
checkpoint and recovery under one root directory::

    <root>/commitlog/<20-digit offset>          CommitLog segments
    <root>/consumequeue/<topic>/<queueId>/<20>  ConsumeQueue segments
    <root>/index/<yyyyMMddHHmmssSSS>            IndexFiles (query by key), see ``index_service``
    <root>/checkpoint                           see ``checkpoint``
    <root>/abort                                exists while the store is open

Invariants: appends are serialized by one put lock, and each append is dispatched to its
ConsumeQueues (and key index) before the lock is released, so a message is readable by queue
offset (and by key) as soon as ``put`` returns; queue offsets of a queue are dense; a SYNC_FLUSH
append is answered PUT_OK only after a sync covered its bytes; reads never return a record that
fails its CRC checks. The store owns its key index: it is synced before each checkpoint, cut to
the recovered CommitLog end by recovery (no key points past the end, and reused offsets are
indexed again) and its files are deleted with the CommitLog segments they index.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import pathlib
import threading
from collections.abc import Collection, Mapping, Sequence

from ariane.common import clock as clock_mod
from ariane.common import ids
from ariane.common import message as message_mod
from ariane.store import (
    checkpoint,
    commit_log,
    consume_queue,
    deleted_topics,
    dispatcher,
    file_layer,
    flush,
    index_file,
    index_service,
    mapped_file_queue,
    message_codec,
    put_wait,
    queue_read,
    queue_repair,
    record_reader,
    record_repair,
    recovery,
    replica,
    results,
    settings,
)

_log = logging.getLogger(__name__)

PutMessageStatus = commit_log.PutMessageStatus

GetMessageStatus = results.GetMessageStatus
GetMessageResult = results.GetMessageResult
StoreStats = results.StoreStats


class MessageStore:
    """The storage engine of one broker. Build it with ``MessageStore.open``."""

    def __init__(
        self,
        root: pathlib.Path,
        config: settings.StoreSettings,
        clock: clock_mod.Clock,
        layer: file_layer.FileLayer,
        index: index_file.IndexSettings | None,
    ) -> None:
        self.root = root
        self.settings = config
        self._clock = clock
        self._layer = layer
        self._put_lock = threading.Lock()
        self.commit_log = commit_log.CommitLog(root / "commitlog", config, layer, clock)
        self.consume_queues = consume_queue.ConsumeQueueStore(
            root / "consumequeue",
            config.consume_queue_file_entries,
            layer,
            config.consume_queue_count_max,
        )
        self._index = (
            None
            if index is None
            else index_service.IndexService(
                root / index_service.INDEX_DIR_NAME, index, clock=clock, layer=layer
            )
        )
        self.dispatcher = dispatcher.Dispatcher(self.consume_queues, self._index, start_offset=0)
        self._deleted = deleted_topics.DeletedTopics(root, layer, self.dispatcher.topic_floors)
        self._checkpoint = checkpoint.CheckpointFile(layer, root / "checkpoint")
        self._abort_path = root / "abort"
        self._flusher: flush.AsyncFlushService | flush.GroupCommitService
        if config.flush_disk_type is settings.FlushDiskType.SYNC_FLUSH:
            self._flusher = flush.GroupCommitService(self.commit_log, config)
        else:
            self._flusher = flush.AsyncFlushService(self.commit_log, config, clock)
        self._queue_flusher = flush.PeriodicService(
            "ariane-store-flush-consumequeue",
            config.flush_consume_queue_interval_ms,
            self.checkpoint_now,
        )
        self._checkpoint_lock = threading.Lock()
        self._closed = True
        self.recovery_report = recovery.RecoveryReport(True, 0, 0, -1, 0, "")
        self._counts = dict.fromkeys(results.STORE_COUNTERS, 0)
        self.repairs = record_repair.RecordRepairs(self.commit_log, self._counts)
        """Damaged records fetched back from a slave (the broker sets ``repairs.fetcher``)."""
        self._units = queue_repair.UnitChecker(
            self.commit_log, self.dispatcher, self._put_lock, self.repairs
        )
        self.replication: put_wait.ReplicationGate | None = None
        """Set by the broker when it replicates (``store.ha``): roles and the ack rule."""

    @classmethod
    def open(
        cls,
        root_dir: pathlib.Path,
        config: settings.StoreSettings,
        *,
        clock: clock_mod.Clock,
        index: index_file.IndexSettings | None = None,
        layer: file_layer.FileLayer | None = None,
    ) -> MessageStore:
        """Open (creating if needed) and recover the store under ``root_dir``; start services.

        Args:
            root_dir: the store root.
            config: store settings.
            clock: time source for store timestamps and flush intervals.
            index: the geometry of the key index (RocketMQ ``IndexService``, files under
                ``<root>/index``), or ``None`` for a store without query by key.
            layer: the file layer (default: the real file system).

        Raises:
            StoreLayoutError: if segment files are inconsistent (wrong size, gaps).
            IndexFileError: if an index file does not match ``index``.
            OSError: if the files cannot be read, written or synced.
        """
        store = cls(root_dir, config, clock, layer or file_layer.OsFileLayer(), index)
        store._start()
        return store

    def _start(self) -> None:
        layer = self._layer
        layer.make_dirs(self.root)
        unclean = checkpoint.abort_marker_exists(layer, self._abort_path)
        saved = self._checkpoint.load()
        padded = self.commit_log.log.load(pad_short_tail=self.settings.repair_from_master)
        self.consume_queues.load()
        self._deleted.load(self.commit_log.min_offset)
        self.recovery_report = recovery.recover(
            self.commit_log,
            self.consume_queues,
            self.dispatcher,
            saved,
            unclean=unclean or padded,  # a cut newest segment padded on a slave: rescan it
            index=self._index,
        )
        self._reput = dispatcher.ReputMessageService(
            self.commit_log, self.dispatcher, self._put_lock
        )
        self._reput.reput()
        checkpoint.create_abort_marker(layer, self._abort_path)
        self.checkpoint_now()
        self._closed = False
        self._flusher.start()
        self._queue_flusher.start()
        _log.info(
            "store open at %s: CommitLog [%d, %d), %d ConsumeQueues, clean=%s",
            self.root,
            self.commit_log.min_offset,
            self.commit_log.max_offset,
            len(self.consume_queues.queues()),
            self.recovery_report.clean,
        )

    def close(self) -> None:
        """Stop cleanly: refuse new appends, flush everything, checkpoint, remove ``abort``.

        Raises:
            OSError: if the final flush or checkpoint fails (``abort`` then stays).
        """
        with self._put_lock:
            if self._closed:
                return
            self._closed = True
        self._queue_flusher.stop()
        self._flusher.stop()
        self.commit_log.flush()
        self.checkpoint_now()
        end_offset = self.commit_log.max_offset
        checkpoint.remove_abort_marker(self._layer, self._abort_path)
        self._checkpoint.close()
        self.commit_log.log.close()
        self.commit_log.high_water.close()
        for queue in self.consume_queues.queues():
            queue.log.close()
        if self._index is not None:
            self._index.close()
        _log.info("store closed at CommitLog offset %d", end_offset)

    def checkpoint_now(self) -> None:
        """Sync the ConsumeQueues and the key index, then write the checkpoint.

        This is what the ConsumeQueue flush service runs every ``flush_consume_queue_interval_ms``.
        The dispatched offset is read before the syncs, so the checkpoint never claims more
        than is durable.

        Raises:
            OSError: if a sync or the checkpoint write fails.
        """
        with self._checkpoint_lock:
            dispatched = self.dispatcher.dispatched_offset
            logics_ms = self.dispatcher.last_store_timestamp_ms
            self.consume_queues.flush_all()
            if self._index is not None:
                self._index.flush()
            flushed = self.commit_log.flushed_offset
            self._checkpoint.write(
                checkpoint.Checkpoint(
                    physic_msg_timestamp_ms=logics_ms if flushed >= dispatched else 0,
                    logics_msg_timestamp_ms=logics_ms,
                    index_msg_timestamp_ms=logics_ms,
                    flushed_commit_log_offset=flushed,
                    dispatched_commit_log_offset=dispatched,
                )
            )

    @property
    def disk_full(self) -> bool:
        """The disk-full switch: while set, appends answer SERVICE_NOT_AVAILABLE."""
        return self.commit_log.disk_full

    @disk_full.setter
    def disk_full(self, value: bool) -> None:
        self.commit_log.disk_full = value

    def set_store_host(self, address: message_mod.HostAddress) -> None:
        """Write ``address`` as STOREHOST of the records appended from now on, and build their
        offset message ids from it (RocketMQ ``brokerIP1:listenPort``).

        The broker calls it with its advertised address once its port is bound, before it
        serves clients, so offset message ids identify the broker that stored the message.

        Raises:
            ValueError: if ``address.ip`` is not a literal IP address or the port is not
                0 .. 65535.
        """
        if message_codec.pack_ip(address.ip) is None or not 0 <= address.port <= 65_535:
            raise ValueError(f"STOREHOST {address} is not a literal IP address and port")
        with self._put_lock:
            self.commit_log.store_host = address

    @property
    def key_index(self) -> index_service.IndexService:
        """The key index (RocketMQ ``IndexService``): ``query`` answers the CommitLog offsets
        of the messages that may carry a ``topic#KEY`` or ``topic#UNIQ_KEY``.

        The store must have been opened with ``index`` settings (an assertion).
        """
        assert self._index is not None, "the store was opened without a key index"
        return self._index

    def submit(
        self, requests: Sequence[commit_log.AppendRequest]
    ) -> concurrent.futures.Future[list[commit_log.PutMessageResult]]:
        """Append a batch now; the future completes when the flush condition holds.

        Under ASYNC_FLUSH the future is already done. Under SYNC_FLUSH it completes after the
        group commit synced the batch's bytes; if that sync fails the stored results turn into
        FLUSH_DISK_TIMEOUT. Callers bound their wait with ``sync_flush_timeout_ms``
        (``put_messages``/``put_messages_sync`` do). Wrap it with ``asyncio.wrap_future``
        to await it.
        """
        return self._submit(requests)[1]

    def _submit(
        self, requests: Sequence[commit_log.AppendRequest], atomic: bool = False
    ) -> tuple[
        list[commit_log.PutMessageResult],
        concurrent.futures.Future[list[commit_log.PutMessageResult]],
    ]:
        outcome = concurrent.futures.Future[list[commit_log.PutMessageResult]]()
        prepared, refused = self._prepare(requests, atomic)
        if refused is not None:
            outcome.set_result(refused)
            return refused, outcome
        results, durable = self._append(prepared)
        assert isinstance(durable, concurrent.futures.Future), "no loop given, no asyncio future"

        def finish(done: concurrent.futures.Future[bool]) -> None:
            final = results if done.result() else put_wait.flush_timed_out(results)
            # The waiter may have given up (timeout) and cancelled the future.
            with contextlib.suppress(concurrent.futures.InvalidStateError):
                outcome.set_result(final)

        durable.add_done_callback(finish)
        return results, outcome

    def _prepare(
        self, requests: Sequence[commit_log.AppendRequest], atomic: bool
    ) -> tuple[list[commit_log.PreparedAppend], list[commit_log.PutMessageResult] | None]:
        """The prepared appends and, if ``atomic`` and one is refused, every failed result."""
        prepared = [self.commit_log.prepare(r) for r in requests]
        refused = next((p.status for p in prepared if p.record is None), None) if atomic else None
        failed = None if refused is None else [commit_log.PutMessageResult(refused)] * len(prepared)
        return prepared, failed

    def _append(
        self,
        prepared: list[commit_log.PreparedAppend],
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> tuple[list[commit_log.PutMessageResult], put_wait.Durable]:
        with self._put_lock:
            refused = PutMessageStatus.SERVICE_NOT_AVAILABLE if self._closed else None
            if refused is None and self.replication is not None:  # a refused batch stores nothing
                refused = self.replication.refusal()
            if refused is not None:
                results = [commit_log.PutMessageResult(refused)]
                return results * len(prepared), flush.completed_future(True)
            if isinstance(self._flusher, flush.GroupCommitService) and not self._flusher.has_room():
                results = [commit_log.PutMessageResult(PutMessageStatus.OS_PAGE_CACHE_BUSY)]
                return results * len(prepared), flush.completed_future(True)
            allowed = self.settings.consume_queue_count_max - self.consume_queues.count
            results, dispatches = self.commit_log.append(prepared, new_queues_allowed=allowed)
            try:
                self.dispatcher.dispatch(dispatches)
                self.dispatcher.skip_to(self.commit_log.max_offset)
            except OSError:
                _log.exception("ConsumeQueue dispatch failed; the reput service will retry")
            stored = [r for r in results if r.status.is_stored]
            self._counts["put_message_count"] += len(stored)
            self._counts["put_message_failure_count"] += len(results) - len(stored)
            self._counts["put_message_bytes"] += sum(r.wrote_bytes for r in stored)
            if not stored:
                return results, flush.completed_future(True)
            durable = self._flusher.request_durable(self.commit_log.max_offset, loop)
        return results, flush.completed_future(False) if durable is None else durable

    def put_messages_sync(
        self, requests: Sequence[commit_log.AppendRequest], *, atomic: bool = False
    ) -> list[commit_log.PutMessageResult]:
        """Append a batch and wait (at most ``sync_flush_timeout_ms``) for its flush condition.

        ``atomic``: as for ``put_messages``.
        """
        results, future = self._submit(requests, atomic)
        timeout_ms = self.settings.sync_flush_timeout_ms
        return put_wait.wait_blocking(results, future, self.replication, timeout_ms=timeout_ms)

    def put_message(self, request: commit_log.AppendRequest) -> commit_log.PutMessageResult:
        """Append one message and wait for its flush condition (``put_messages_sync``); blocks
        the calling thread under SYNC_FLUSH (asyncio code uses ``put_messages``)."""
        return self.put_messages_sync([request])[0]

    async def put_messages(
        self, requests: Sequence[commit_log.AppendRequest], *, atomic: bool = False
    ) -> list[commit_log.PutMessageResult]:
        """Append a batch (``put_prepared``). With ``atomic`` (an all-or-nothing request), a
        message ``CommitLog.prepare`` refuses fails the whole batch before any byte is written
        (every result carries its status); without it each message is answered on its own."""
        prepared, refused = self._prepare(requests, atomic)
        return refused if refused is not None else await self.put_prepared(prepared)

    async def put_prepared(
        self, prepared: list[commit_log.PreparedAppend]
    ) -> list[commit_log.PutMessageResult]:
        """Append messages ``CommitLog.prepare`` encoded, each answered on its own. The append
        runs in the calling thread (it only hands bytes to the OS); one await covers the flush
        of the batch (group commit under SYNC_FLUSH); after ``sync_flush_timeout_ms`` stored
        messages come back as FLUSH_DISK_TIMEOUT."""
        results, durable = self._append(prepared, asyncio.get_running_loop())
        timeout_ms = self.settings.sync_flush_timeout_ms
        return await put_wait.wait(results, durable, self.replication, timeout_ms=timeout_ms)

    def append_replicated(
        self, offset: ids.CommitLogOffset, data: bytes | memoryview
    ) -> ids.CommitLogOffset:
        """A slave: append CommitLog bytes received from the master, byte-identical, and
        dispatch the records they complete to the ConsumeQueues and index (RocketMQ
        ``DefaultMessageStore.appendToCommitLog`` + the reput service).

        ``data`` never crosses a segment end (the master bounds its frames so).

        Returns:
            the new max CommitLog offset.

        Raises:
            ValueError: ``offset`` is not this store's max offset (the stream skipped or
                repeated bytes; the caller reconnects).
            OSError: the write failed.
        """
        with self._put_lock:
            replica.append(self.commit_log, offset, data)
        self._reput.reput()
        return self.commit_log.max_offset

    def truncate_replica(self, offset: ids.CommitLogOffset) -> None:
        """Cut the CommitLog (and the ConsumeQueues and key index) at ``offset``: a slave whose
        tail diverged from its new master (RocketMQ ``truncateDirtyFiles`` on an epoch boundary).

        Raises:
            OSError: zeroing or deleting failed.
        """
        with self._put_lock:
            cut = replica.truncate(
                offset,
                log=self.commit_log,
                queues=self.consume_queues,
                index=self._index,
                dispatch=self.dispatcher,
            )
        if cut:
            self.checkpoint_now()

    def adopt_replicated_queue_offsets(self) -> None:
        """A promoted slave: take the next queue offsets from its ConsumeQueues, so its own
        appends continue each queue where the replicated ones ended."""
        self._reput.reput()  # takes the put lock itself
        with self._put_lock:
            self.commit_log.set_queue_offset_table(self.consume_queues.next_offset_table())

    def get_message(
        self, commit_log_offset: ids.CommitLogOffset, size_bytes: int = 0
    ) -> record_reader.LookupResult:
        """The message whose record starts at ``commit_log_offset`` (CRC-checked; a damaged one
        is counted, logged once and asked of a slave: ``record_repair``)."""
        result = self.commit_log.read(commit_log_offset, size_bytes)
        if result.status is record_reader.LookupStatus.CORRUPT:
            self.repairs.corrupt(commit_log_offset, result.reason)
        return result

    def get_messages(
        self,
        topic: ids.TopicName,
        queue_id: ids.QueueId,
        queue_offset: ids.QueueOffset,
        *,
        max_count: int,
        max_bytes: int,
        tag_filter: queue_read.TagFilter | None = None,
    ) -> GetMessageResult:
        """Read up to ``max_count`` messages (and about ``max_bytes``) from a queue offset.

        Mirrors RocketMQ ``DefaultMessageStore.getMessage``: statuses for offsets out of
        range; at least one message when any is found even if it exceeds ``max_bytes``;
        ``tag_filter`` skips units by tag code; a damaged unit is rebuilt and a damaged record
        stops the read (RECORD_CORRUPTED), never returned nor skipped (``queue_read``). At most
        ``get_message_scan_units_max`` units are scanned, ``get_message_count_max`` returned.
        """
        assert max_count > 0 and max_bytes > 0, "a read asks for at least one message and byte"
        queue = self.consume_queues.get(topic, queue_id)
        result = queue_read.read(
            queue,
            queue_offset,
            max_count=min(max_count, self.settings.get_message_count_max),
            max_bytes=max_bytes,
            tag_filter=tag_filter,
            get_message=self.commit_log.read,
            config=self.settings,
            check_unit=None if queue is None else self._units.for_queue(queue),
        )
        self._counts["get_message_count"] += len(result.messages)
        return result

    def min_queue_offset(self, topic: ids.TopicName, queue_id: ids.QueueId) -> ids.QueueOffset:
        """The first readable queue offset of a queue (0 if unknown)."""
        queue = self.consume_queues.get(topic, queue_id)
        return queue.min_queue_offset if queue is not None else ids.QueueOffset(0)

    def max_queue_offset(self, topic: ids.TopicName, queue_id: ids.QueueId) -> ids.QueueOffset:
        """The next queue offset to be written (0 if unknown)."""
        queue = self.consume_queues.get(topic, queue_id)
        return queue.max_queue_offset if queue is not None else ids.QueueOffset(0)

    def queue_offset_by_time(
        self, topic: ids.TopicName, queue_id: ids.QueueId, timestamp_ms: int
    ) -> ids.QueueOffset:
        """First queue offset stored at or after ``timestamp_ms`` (max if none; 0 if unknown).

        Mirrors RocketMQ ``getOffsetInQueueByTime``.
        """
        queue = self.consume_queues.get(topic, queue_id)
        if queue is None:
            return ids.QueueOffset(0)
        return queue.offset_by_time(timestamp_ms, self.commit_log.store_timestamp_at)

    def delete_topic(self, topic: ids.TopicName) -> int:
        """RocketMQ ``deleteTopics`` (``DeletedTopics.delete``); raises ``OSError``."""
        with self._put_lock, self._checkpoint_lock:
            return self._deleted.delete(topic, self.commit_log, self.consume_queues)

    def topic_queues(self) -> list[tuple[ids.TopicName, ids.QueueId]]:
        """Every (topic, queue id) with a ConsumeQueue, sorted."""
        return [(q.topic, q.queue_id) for q in self.consume_queues.queues()]

    @property
    def max_commit_log_offset(self) -> ids.CommitLogOffset:
        """Offset just past the last record."""
        return self.commit_log.max_offset

    @property
    def min_commit_log_offset(self) -> ids.CommitLogOffset:
        """First offset still stored."""
        return self.commit_log.min_offset

    def commit_log_segments(self) -> list[mapped_file_queue.SegmentInfo]:
        """The CommitLog segments, oldest first (for a retention policy)."""
        return self.commit_log.log.segment_infos()

    def delete_expired_commit_log(
        self, now_ms: int, reserved_ms: int, *, clean_immediately: bool = False, batch_max: int = 10
    ) -> int:
        """Delete expired CommitLog segments, then ConsumeQueue files wholly below the new min.

        See ``MappedFileQueue.delete_expired`` (RocketMQ ``deleteExpiredFileByTime``).

        Returns:
            how many CommitLog segments were deleted.
        """
        deleted = self.commit_log.log.delete_expired(
            now_ms, reserved_ms, clean_immediately=clean_immediately, batch_max=batch_max
        )
        self._delete_below_commit_log_min(batch_max)
        return deleted

    def delete_commit_log_segments(self, start_offsets: Collection[ids.CommitLogOffset]) -> int:
        """Delete the oldest CommitLog segments while their start offset is in
        ``start_offsets`` (a retention plan's prefix), then ConsumeQueue files wholly below
        the new min offset (RocketMQ ``CleanConsumeQueueService``).

        Returns:
            how many CommitLog segments were deleted.
        """
        wanted = frozenset(start_offsets)
        if not wanted:
            return 0
        deleted = self.commit_log.log.delete_oldest(
            lambda info: info.start_offset in wanted, batch_max=len(wanted)
        )
        self._delete_below_commit_log_min(len(wanted))
        return deleted

    def _delete_below_commit_log_min(self, batch_max: int) -> None:
        # ConsumeQueue and index files wholly below the CommitLog's new min offset.
        self.consume_queues.delete_expired(self.commit_log.min_offset, batch_max=batch_max)
        if self._index is not None:
            self._index.delete_files_before(self.commit_log.min_offset)

    def unconsumed_from(
        self, consumed: Mapping[tuple[ids.TopicName, ids.QueueId], ids.QueueOffset]
    ) -> ids.CommitLogOffset | None:
        """The lowest CommitLog offset of a message not consumed yet, ``None`` if none
        (``queue_read.first_unconsumed`` with ``get_message_scan_units_max``: ``consumed`` is,
        per queue, the lowest queue offset some consumer has not consumed)."""
        return queue_read.first_unconsumed(
            self.consume_queues,
            consumed,
            scan_units_max=self.settings.get_message_scan_units_max,
            fillers_only=self.commit_log.min_offset,
        )

    def count_retention(
        self, *, forced_segments: int, forced_bytes: int, unconsumed_messages: int
    ) -> None:
        """Add what one retention run deleted to the counters of ``stats``."""
        counts = self._counts
        counts["forced_deleted_segment_count"] += forced_segments
        counts["forced_deleted_bytes"] += forced_bytes
        counts["unconsumed_deleted_message_count"] += unconsumed_messages

    def stats(self) -> StoreStats:
        """A consistent-enough snapshot of offsets and counters (no locks taken)."""
        log = self.commit_log
        max_offset, flushed = log.max_offset, log.flushed_offset
        dispatched = self.dispatcher.dispatched_offset
        return StoreStats(
            min_commit_log_offset=log.min_offset,
            max_commit_log_offset=max_offset,
            flushed_commit_log_offset=flushed,
            dispatched_commit_log_offset=dispatched,
            flush_behind_bytes=max(0, max_offset - flushed),
            dispatch_behind_bytes=max(0, max_offset - dispatched),
            commit_log_segment_count=len(log.log.files),
            consume_queue_count=self.consume_queues.count,
            flush_count=self._flusher.flush_count,
            recovery_clean=self.recovery_report.clean,
            recovery_scanned_records=self.recovery_report.scanned_records,
            disk_full=log.disk_full,
            index_write_failure_count=self.dispatcher.index_write_failure_count,
            **self._counts,
        )
