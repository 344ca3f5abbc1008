"""Building ConsumeQueues and the key index from CommitLog records (``ReputMessageService``).

``Dispatcher`` turns DispatchRequests into ConsumeQueue units (one write per run of units of a
queue) and key-index entries, and advances ``dispatched_offset``: every record below it has
been dispatched. The store calls it right after an append (so a read-after-write finds the
message through its ConsumeQueue); ``ReputMessageService`` tails the CommitLog from
``dispatched_offset`` for records written by someone else (recovery, a replication stream).

The key index is pluggable through ``KeyIndexSink``; it receives ``topic#KEY`` for each key of
a message and ``topic#UNIQ_KEY`` for its client message id, as RocketMQ's ``IndexService``.

Invariant: the index is secondary. A key-index write that raises ``OSError`` (``ENOSPC`` when
no new IndexFile fits on the volume) never fails the dispatch nor the message: the batch is
counted in ``index_write_failure_count`` and logged without a traceback, at most one line per
``INDEX_FAILURE_LOG_INTERVAL_S`` naming how many failures it suppressed. Those messages are
stored, consumable and readable by offset, but a query by key does not find them (a documented
gap; RocketMQ logs an error per message and also leaves them unindexed).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import Protocol

from ariane.common import ids, log_limits
from ariane.common import message as message_mod
from ariane.store import commit_log, consume_queue, message_codec, record_reader

_log = logging.getLogger(__name__)

KEY_SEPARATOR = "#"

_TRANSACTION_TYPE_MASK = message_mod.TRANSACTION_TYPE_MASK

INDEX_FAILURE_LOG_INTERVAL_S = 60.0
"""Least time between two log lines about failing key-index writes, s."""


class KeyIndexSink(Protocol):
    """Where the dispatcher sends index keys (the store's ``IndexService`` implements it)."""

    def put(
        self,
        keys: Sequence[str],
        commit_log_offset: ids.CommitLogOffset,
        store_timestamp_ms: ids.TimestampMs,
    ) -> None:
        """Index ``keys`` (each ``topic#key``) to the record at ``commit_log_offset``."""
        ...


class BatchKeyIndexSink(KeyIndexSink, Protocol):
    """A key index that takes a whole dispatched batch at once (the IndexFile does); the
    dispatcher uses ``put_many`` when the sink has it."""

    def put_many(self, messages: Sequence[tuple[Sequence[str], ids.CommitLogOffset, int]]) -> None:
        """``put`` for each ``(keys, commit_log_offset, store_timestamp_ms)``, in order."""
        ...


def index_keys_of(request: commit_log.DispatchRequest) -> list[str]:
    """``topic#KEY`` for every key and ``topic#UNIQ_KEY`` for the client message id."""
    keys = [f"{request.topic}{KEY_SEPARATOR}{key}" for key in request.keys]
    if request.uniq_key:
        keys.append(f"{request.topic}{KEY_SEPARATOR}{request.uniq_key}")
    return keys


class Dispatcher:
    """Feeds ConsumeQueues and the key index; not thread-safe (called under the put lock).

    Args:
        consume_queues: the ConsumeQueue store.
        key_index: the key index, or ``None`` for none.
        start_offset: the CommitLog offset below which everything is dispatched.
    """

    def __init__(
        self,
        consume_queues: consume_queue.ConsumeQueueStore,
        key_index: KeyIndexSink | None,
        *,
        start_offset: int,
    ) -> None:
        self.consume_queues = consume_queues
        self.key_index = key_index
        self.dispatched_offset = ids.CommitLogOffset(start_offset)
        self.last_store_timestamp_ms = ids.TimestampMs(0)
        self.topic_floors: dict[str, int] = {}
        """Deleted topics: topic → the CommitLog offset at its deletion. Records of the topic
        below it belong to the deleted incarnation and are never dispatched again (recovery
        re-dispatching the tail must not bring them back into a re-created topic)."""
        self.index_write_failure_count = 0
        """Messages whose key-index write raised ``OSError`` since start (counted per batch
        that failed: some of its messages may have been indexed before the failure)."""
        self.index_failure_log = log_limits.LineLimiter(key_interval_s=INDEX_FAILURE_LOG_INTERVAL_S)
        """Bounds the lines about failing index writes (replaceable, for a test's clock)."""
        self._index_failures_reported = 0

    def dispatch(self, requests: Sequence[commit_log.DispatchRequest]) -> None:
        """Write the units and index keys of ``requests`` (in CommitLog order).

        Raises:
            OSError: if a ConsumeQueue write fails.
        """
        if not requests:
            return
        runs: dict[tuple[ids.TopicName, ids.QueueId], tuple[int, list[consume_queue.NewUnit]]] = {}
        indexing = self.key_index is not None
        indexed: list[tuple[Sequence[str], ids.CommitLogOffset, int]] = []
        new_unit = consume_queue.NewUnit
        floors = self.topic_floors
        for request in requests:
            # One unpacking per request: this loop runs for every appended message.
            topic, queue_id, offset, size, tags_code, stamp, queue_offset, keys, uniq, sys_flag = (
                request
            )
            assert offset >= self.dispatched_offset, "dispatch out of order"
            if floors and offset < floors.get(topic, -1):
                continue  # a record of a deleted topic
            if (sys_flag & _TRANSACTION_TYPE_MASK) not in commit_log.NOT_IN_CONSUME_QUEUE:
                key = (topic, queue_id)
                run = runs.get(key)
                if run is not None and run[0] + len(run[1]) == queue_offset:
                    run[1].append(new_unit(offset, size, tags_code))
                else:
                    if run is not None:
                        self._write_run(key, run)
                    runs[key] = (queue_offset, [new_unit(offset, size, tags_code)])
            if indexing and (keys or uniq):
                indexed.append((index_keys_of(request), offset, stamp))
        for key, run in runs.items():
            self._write_run(key, run)
        if indexed:
            self._index(indexed)
        last = requests[-1]
        self.dispatched_offset = ids.CommitLogOffset(last.end_offset)
        self.last_store_timestamp_ms = last.store_timestamp_ms

    def _index(self, indexed: list[tuple[Sequence[str], ids.CommitLogOffset, int]]) -> None:
        key_index = self.key_index
        assert key_index is not None
        # ``getattr``, not ``isinstance`` against the runtime-checkable Protocol: that check
        # walks the Protocol's members on every call (3 % of a SYNC_FLUSH send's CPU).
        put_many = getattr(key_index, "put_many", None)
        try:
            if put_many is not None:
                put_many(indexed)
                return
            for keys, offset, store_timestamp_ms in indexed:
                key_index.put(keys, offset, ids.TimestampMs(store_timestamp_ms))
        except OSError as error:
            self._index_failed(error, len(indexed))

    def _index_failed(self, error: OSError, message_count: int) -> None:
        """Count a failed index write; log it unless a line went out within the interval."""
        self.index_write_failure_count += message_count
        limiter = self.index_failure_log
        if not limiter.allow("index-write"):
            return
        suppressed = max(0, limiter.suppressed - self._index_failures_reported)
        self._index_failures_reported = limiter.suppressed
        _log.error(
            "key index write failed (%s): %d message(s) stored without index entries (not "
            "found by key); %d more failed write(s) since the last such line, %d messages in all",
            error,
            message_count,
            suppressed,
            self.index_write_failure_count,
        )

    def _write_run(
        self,
        key: tuple[ids.TopicName, ids.QueueId],
        run: tuple[int, list[consume_queue.NewUnit]],
    ) -> None:
        # One write per queue per batch: the units of a queue in a batch are consecutive.
        queue = self.consume_queues.get_or_create(*key)
        queue.put(ids.QueueOffset(run[0]), run[1])

    def skip_to(self, offset: int) -> None:
        """Declare everything below ``offset`` dispatched (a BLANK or a truncation)."""
        self.dispatched_offset = ids.CommitLogOffset(max(self.dispatched_offset, offset))


class ReputMessageService:
    """Tails the CommitLog from the dispatcher's offset and dispatches what it finds.

    Args:
        log: the CommitLog.
        dispatcher: the dispatcher to feed.
        lock: the store's put lock (dispatch must not interleave with appends).
        check_crc: verify CRCs of every record read.
        batch_records_max: most records dispatched per lock hold.
    """

    def __init__(
        self,
        log: commit_log.CommitLog,
        dispatcher: Dispatcher,
        lock: threading.Lock,
        *,
        check_crc: bool = True,
        batch_records_max: int = 1024,
    ) -> None:
        self._log = log
        self._dispatcher = dispatcher
        self._lock = lock
        self._check_crc = check_crc
        self._batch_records_max = batch_records_max
        self.scanned_records = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def reput(self) -> int:
        """Dispatch every record from ``dispatched_offset`` to the CommitLog's end.

        Returns:
            how many records were dispatched. Stops (and logs) at a corrupt record.
        """
        total = 0
        while True:
            with self._lock:
                batch, done = self._collect()
                self._dispatcher.dispatch(batch)
            total += len(batch)
            if done:
                return total

    def _collect(self) -> tuple[list[commit_log.DispatchRequest], bool]:
        start = self._dispatcher.dispatched_offset
        if start >= self._log.max_offset:
            return [], True
        batch: list[commit_log.DispatchRequest] = []
        for item in self._log.scan(start, check_crc=self._check_crc):
            status = item.result.status
            if status is not message_codec.DecodeStatus.OK:
                if batch:  # a CORRUPT record is looked at again by the next call
                    return batch, status is not message_codec.DecodeStatus.CORRUPT
                self._dispatcher.skip_to(item.offset)
                if status is message_codec.DecodeStatus.CORRUPT:
                    damaged = self._damaged_unit(item.offset, item.result.reason)
                    if damaged is not None:
                        return [damaged], False  # dispatched alone: its queue's next unit
                    _log.error("reput stopped at %d: %s", item.offset, item.result.reason)
                return batch, True
            assert item.result.message is not None
            self.scanned_records += 1
            batch.append(commit_log.dispatch_request_of(item.result.message))
            if len(batch) >= self._batch_records_max:
                return batch, False
        return batch, True

    def _damaged_unit(self, offset: int, reason: str) -> commit_log.DispatchRequest | None:
        """The unit of the record at ``offset``, which failed its checks, when it is a whole
        damaged record inside the log (as recovery's ``_Rescan`` tells it: it fails only its
        CRCs, fits in the written data, and a record passing every check follows it) whose
        header names its queue's next unit (or no unit, its body alone damaged); else ``None``:
        a torn or partial record (the HA stream stops at any byte), or one whose unit cannot
        be placed, where the reput waits. A replica receives its master's bytes verbatim, a
        damaged record included: stopping there would leave every later record undispatched,
        and a promotion cut them (``cut_partial_record``). The record is never served: reads
        check CRCs and answer CORRUPT."""
        found = self._log.read(offset, damaged=True)
        stored = found.message
        if found.status is not record_reader.LookupStatus.FOUND or stored is None:
            return None
        after = offset + stored.store_size_bytes
        if after >= self._log.max_offset:
            return None
        follower = next(iter(self._log.scan(after, check_crc=self._check_crc)), None)
        if follower is None or follower.result.status is not message_codec.DecodeStatus.OK:
            return None
        request = commit_log.dispatch_request_of(stored)
        if not request.to_consume_queue:
            placed = reason == message_codec.BODY_CRC_MISMATCH
        else:
            queue = self._dispatcher.consume_queues.get(request.topic, request.queue_id)
            next_offset = 0 if queue is None else int(queue.max_queue_offset)
            placed = next_offset == request.queue_offset
        if not placed:
            return None
        _log.error(
            "CommitLog record at %d is damaged (%s) but whole, with a sound record after it: "
            "dispatched past (reads of it answer CORRUPT)",
            offset,
            reason,
        )
        return request

    def start(self, *, interval_ms: int = 1) -> None:
        """Run ``reput`` in a thread every ``interval_ms`` until ``stop``."""
        assert self._thread is None, "already started"
        self._stop.clear()
        self._thread = threading.Thread(
            target=self._run, args=(interval_ms,), name="ariane-store-reput", daemon=True
        )
        self._thread.start()

    def _run(self, interval_ms: int) -> None:
        while not self._stop.wait(interval_ms / 1000):
            try:
                self.reput()
            except Exception:
                _log.exception("reput failed; retrying")

    def stop(self) -> None:
        """Stop the thread and wait for it."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
