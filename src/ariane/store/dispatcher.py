"""Building ConsumeQueues and the key index from CommitLog records (``ReputMessageService``).

``Dispatcher`` turns DispatchRequests into ConsumeQueue units (one write per run of units of a
queue) and key-index entries, and advances ``dispatched_offset``: every record below it has
been dispatched. The store calls it right after an append (so a read-after-write finds the
message through its ConsumeQueue); ``ReputMessageService`` tails the CommitLog from
``dispatched_offset`` for records written by someone else (recovery, a replication stream).

Where the tail is damaged the reput follows the store's one rule (``record_scan``): it waits at
a torn tail (a record the writer or the HA stream has not finished: logged at DEBUG once per
offset) and passes a whole damaged record with a sound one after it, its unit placed by
``record_scan.place`` or, when several queues could hold it, those queue offsets reserved with
filler units until a later record of one of them shows which held it (``_settle``, in memory:
after a restart the filler stays and reads skip that offset). RocketMQ's reput reads without
CRC checks and dispatches a damaged record by whatever its header says.

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
from ariane.store import commit_log, consume_queue, message_codec, record_scan

_log = logging.getLogger(__name__)

KEY_SEPARATOR = "#"

_TRANSACTION_TYPE_MASK = message_mod.TRANSACTION_TYPE_MASK

INDEX_FAILURE_LOG_INTERVAL_S = 60.0
"""Least time between two log lines about failing key-index writes, s."""
REPUT_LOOKAHEAD_BYTES_MAX = 4 * 1024 * 1024
"""How far past a damaged record the reput scans to place its unit (``record_scan.place``),
bytes: at most ~0.1 s under the put lock on the development machine, once per damaged record."""
RESERVED_MAX = 64
"""Damaged records whose reserved slots the reput keeps settling (``ReputMessageService``)."""

QueueKey = tuple[ids.TopicName, ids.QueueId]


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

    def reserve(self, slots: Sequence[tuple[ids.TopicName, ids.QueueId, ids.QueueOffset]]) -> None:
        """A filler unit at each slot that is still its queue's next offset: a damaged record
        may hold any one of them (``record_scan.place``); reads skip a filler, and a unit later
        dispatched at that offset replaces it. Never gives a queue offset twice.

        Raises:
            OSError: if a ConsumeQueue write fails.
        """
        for topic, queue_id, queue_offset in slots:
            queue = self.consume_queues.get_or_create(topic, queue_id)
            if queue.max_queue_offset == queue_offset:
                queue.put(queue_offset, [consume_queue.FILLER_UNIT])

    def fill(self, unit: commit_log.DispatchRequest) -> None:
        """Write ``unit`` at its queue offset over the filler ``reserve`` left there.

        Raises:
            OSError: if a ConsumeQueue write fails.
        """
        queue = self.consume_queues.get_or_create(unit.topic, unit.queue_id)
        present = queue.unit_at(unit.queue_offset)
        if present is not None and present.is_filler:
            queue.put(
                unit.queue_offset,
                [consume_queue.NewUnit(unit.commit_log_offset, unit.size_bytes, unit.tags_code)],
            )

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
        self._waiting_at = -1
        """Where the reput last waited (logged once per offset)."""
        self._reserved: list[tuple[commit_log.DispatchRequest, dict[QueueKey, int]]] = []
        """Damaged records passed with their possible slots reserved, oldest first (at most
        ``RESERVED_MAX``): each slot (queue → queue offset) not yet settled by a later
        record of that queue (``_settle``)."""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def reput(self) -> int:
        """Dispatch every record from ``dispatched_offset`` to the CommitLog's end.

        Returns:
            how many records were dispatched (a DAMAGED record passed counts when it got a
            unit). Waits at a torn tail (``record_scan``): logged once per offset, at DEBUG
            when the record reaches past the written data (the writer or the HA stream is
            mid-record), WARNING for a whole damaged record nothing sound follows yet, ERROR
            for damage that stops the reput (records after it stay undispatched).
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
                if status is not message_codec.DecodeStatus.CORRUPT:
                    return batch, True
                return self._at_damage(item.offset)
            assert item.result.message is not None
            self.scanned_records += 1
            request = commit_log.dispatch_request_of(item.result.message)
            if self._reserved:
                self._settle(request)
            batch.append(request)
            if len(batch) >= self._batch_records_max:
                return batch, False
        return batch, True

    def _at_damage(self, offset: int) -> tuple[list[commit_log.DispatchRequest], bool]:
        """The scan stopped at ``offset``: pass a DAMAGED record (``record_scan``), else wait
        there (a torn tail: the next append or HA frame may complete it); (batch, done)."""
        found = record_scan.look(self._log.reader, offset, check_crc=self._check_crc)
        if found.kind is record_scan.Kind.DAMAGED:
            return self._pass_damaged(found), False
        if offset != self._waiting_at:
            self._waiting_at = offset
            if found.kind is record_scan.Kind.UNVOUCHED:
                _log.warning(
                    "reput waits at %d: %s yet (dispatched past once one follows)",
                    offset,
                    found.reason,
                )
            elif found.kind is record_scan.Kind.TORN and not found.partial:
                _log.error(
                    "reput stopped at %d: %s; the records after it stay undispatched",
                    offset,
                    found.reason,
                )
            else:  # a record the writer or the HA stream has not finished: normal catch-up
                _log.debug("reput waits at %d: %s", offset, found.reason)
        return [], True

    def _pass_damaged(self, found: record_scan.Found) -> list[commit_log.DispatchRequest]:
        """Dispatch past a DAMAGED record: its unit where ``record_scan.place`` puts it, or
        its possible places reserved (settled by later records, ``_settle``). The record is
        never served: reads check CRCs and answer CORRUPT."""
        placement = record_scan.place(
            self._log.reader,
            self._dispatcher.consume_queues,
            found,
            lookahead_bytes_max=REPUT_LOOKAHEAD_BYTES_MAX,
        )
        _log.error(
            "CommitLog record at %d is damaged (%s) but whole, with a sound record after it: "
            "dispatched past (reads of it answer CORRUPT); %s",
            found.offset,
            found.reason,
            record_scan.describe(placement),
        )
        if placement.unit is not None:
            return [placement.unit]
        assert found.message is not None
        self._dispatcher.reserve(placement.reserved)
        self._dispatcher.skip_to(found.next_offset)
        if placement.reserved:
            if len(self._reserved) >= RESERVED_MAX:
                self._reserved.pop(0)  # its fillers stay: reads skip its slot
            request = commit_log.dispatch_request_of(found.message)
            slots = {(t, q): int(at) for t, q, at in placement.reserved}
            self._reserved.append((request, slots))
        return []

    def _settle(self, request: commit_log.DispatchRequest) -> None:
        """A sound record of a queue holding a reserved slot: at the slot, the slot was its
        own (the dispatch writes it over the filler); right after it, the damaged record
        held the slot: its unit replaces the filler."""
        key = (request.topic, request.queue_id)
        settled = []
        for entry in self._reserved:
            damaged, slots = entry
            slot = slots.get(key)
            if slot is None:
                continue
            if request.queue_offset == slot + 1:
                unit = damaged._replace(
                    topic=key[0], queue_id=key[1], queue_offset=ids.QueueOffset(slot)
                )
                self._dispatcher.fill(unit)
                settled.append(entry)
                _log.warning(
                    "damaged CommitLog record at %d placed at %s-%d offset %d (the next "
                    "record of that queue follows it)",
                    damaged.commit_log_offset,
                    key[0],
                    key[1],
                    slot,
                )
            elif request.queue_offset == slot:
                del slots[key]
                if not slots:
                    settled.append(entry)
        if settled:
            self._reserved = [e for e in self._reserved if all(e is not s for s in settled)]

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
