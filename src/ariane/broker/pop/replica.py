"""The POP journal in the replicated CommitLog, so a promoted slave carries the POP state.

The gap (issue 25): the POP journal (``journal_file``) is a file local to each broker; the HA
stream carries CommitLog bytes only. After a failover every in-flight message came back at
attempt 1, an ack of a message received from the old master was refused, and a message the old
master had acked could be delivered again.

RocketMQ 5 keeps POP state in the CommitLog: ``PopMessageProcessor`` appends a checkpoint (CK)
message per pop and ``AckMessageProcessor`` an ACK message per ack to the revive topic
``rmq_sys_REVIVE_LOG_<cluster>``; ``PopReviveService`` (masters only) consumes that topic from
its revive offset and revives what was not acked in time; ``SlaveSynchronize`` copies the revive
offset to slaves. So the state replicates with the messages and a promoted slave revives from
it. RocketMQ answers an ack OK whatever the ACK write's status (``handlePutMessageResult`` only
logs it), and with ``enablePopBufferMerge`` a CK acked within ``popCkStayBufferTime`` is never
written at all.

The choice, the same facts as the local journal, replicated the same way as RocketMQ's:

* **deltas**: every ``PopService.flush`` (one per receive pass, per ack batch, per revive
  round) hands its journal bytes, as they go to the file, to ``append``, which buffers them
  until the end of the event loop iteration: the flushes of one iteration become ONE message
  of ``JOURNAL_TOPIC`` queue 0 (split on record boundaries only past ``chunk_bytes_max``), in
  flush order. Batching is the hot-path bound: at most one extra CommitLog record per loop
  iteration, never one per message (a drain that acks every message with its own AckMessage
  still shares records between the acks that arrive together).
* **waiting**: a POP write is a write: a receive, ack or change is refused before it changes
  anything while the store would refuse the append (``check_writable``: a SYNC_MASTER with
  fewer than ``min_in_sync_replicas`` in sync answers HA_NOT_AVAILABLE, as a send), and
  ``replicated`` waits for the last journal write's flush and replication condition, as a send
  does (``store.put_wait``). The receive path waits before answering (so a receipt handle a
  client holds names a delivery its slave knows), AckMessage, ChangeInvisibleDuration and
  ForwardMessageToDeadLetterQueue before answering: under SYNC_MASTER an ack the client got OK
  for is on the slave. A failed wait is honest: an ack entry answers the store's error
  (SLAVE_PERSISTENCE_TIMEOUT, ...; the ack holds on this master), a receive still delivers
  (its messages are in flight here) and logs that a failover would bring them back at their
  previous attempt. Here Ariane goes further than RocketMQ, which answers such an ack OK.
* **snapshots**: the file journal is compacted (rewritten as its live state) when it grows;
  the CommitLog cannot be, so each compaction (and a master's start or promotion with state
  restored, and a retention that deleted the snapshot) appends the live state, plus each
  queue's committed offset as an ACK from offset 0, in ONE atomic batch. Every journal
  message carries ``BASE_PROPERTY``: the queue offset of the newest snapshot, so a replay
  reads at most one snapshot plus the deltas after it (about ``journal_bytes_max``, as the
  file).
* **promotion** (``read_state``): the slave reads its replicated journal topic from the last
  message's base to its end and folds it (``journal.replay``): exactly the state of the
  CommitLog prefix it holds, never ahead of it, whatever its periodic metadata sync copied.

Not chosen: shipping the journal file over the HA stream (a second stream and offset space to
keep consistent with the CommitLog across truncations), a periodic copy by the metadata sync
(loses up to one round of acks and attempts, so no SYNC_MASTER guarantee).

Invariants: only a master writes (``PopService`` replicates only between ``start_replicating``
or ``become_master`` and ``become_slave``); the records buffered in one loop iteration are
appended with one ``MessageStore.submit`` call, in flush order, and always before a snapshot,
which is one batch (nothing interleaves).
Limits: a delta or snapshot message body is at most ``chunk_bytes_max``; a replay reads at most
``REPLAY_BYTES_MAX`` bytes (more is an operating error: logged, the rest is not replayed).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
from collections.abc import Callable, Sequence

from ariane.broker.pop import journal as pop_journal
from ariane.common import clock, errors, ids, message, topics
from ariane.store import commit_log, message_store

_log = logging.getLogger(__name__)

PMS = commit_log.PutMessageStatus
JOURNAL_TOPIC = ids.TopicName("rmq_sys_POP_JOURNAL")
"""The system topic of POP journal records (Ariane's; RocketMQ's revive topic holds JSON CK and
ACK messages of its own layout, so a different name)."""
assert topics.is_system_topic(JOURNAL_TOPIC)
JOURNAL_QUEUE = ids.QueueId(0)
BASE_PROPERTY = "POP_JOURNAL_BASE"
"""Property of every journal message: the queue offset of the newest snapshot (replay start)."""
CHUNK_BYTES_MAX = 1024 * 1024
"""Largest body of one journal message, bytes (also at most half the store's message limit)."""
READ_COUNT_MAX = 256
"""Journal messages read per ``get_messages`` call during a replay."""
REPLAY_BYTES_MAX = 256 * 1024 * 1024
"""Most journal bytes one replay folds (a few snapshots' worth of ``journal_bytes_max``)."""


def split(data: bytes, chunk_bytes_max: int) -> list[bytes]:
    """``data`` (whole journal records back to back) in chunks of at most ``chunk_bytes_max``
    bytes cut on record boundaries (a record longer than that is a chunk of its own)."""
    chunks: list[bytes] = []
    start = at = 0
    while at < len(data):
        length, _ = pop_journal.HEADER.unpack_from(data, at)
        end = at + pop_journal.HEADER.size + length
        if end - start > chunk_bytes_max and at > start:
            chunks.append(data[start:at])
            start = at
        at = end
    if start < len(data):
        chunks.append(data[start:])
    return chunks


class JournalReplica:
    """Writes the POP journal into ``JOURNAL_TOPIC`` and reads it back at a promotion.

    Args:
        store: the broker's store (``submit`` appends, ``replication`` is the SYNC_MASTER gate).
        time: the clock (born timestamps).
    """

    def __init__(self, store: message_store.MessageStore, *, time: clock.Clock) -> None:
        self._store = store
        self._clock = time
        self._chunk_bytes_max = min(CHUNK_BYTES_MAX, store.settings.message_size_bytes_max // 2)
        self.base = self._last_base()
        """Queue offset of the newest snapshot (0 before any)."""
        self._last: concurrent.futures.Future[list[commit_log.PutMessageResult]] | None = None
        self._buffer = bytearray()
        self._slave_wait: tuple[int, asyncio.Future[commit_log.PutMessageStatus]] | None = None
        """The end offset of the last write a caller waits for the slave to hold, and that wait
        (every caller of the same write shares it)."""
        self._next: asyncio.Future[None] | None = None
        """While records wait in ``_buffer`` for the end of the loop iteration: done once
        they were handed to the store (``write_pending``)."""

    def _requests(self, chunks: Sequence[bytes], base: int) -> list[commit_log.AppendRequest]:
        now_ms = self._clock.now_ms()
        props = {BASE_PROPERTY: str(base)}
        return [
            commit_log.AppendRequest(
                message=message.Message(JOURNAL_TOPIC, chunk, props),
                queue_id=JOURNAL_QUEUE,
                born_timestamp_ms=ids.TimestampMs(now_ms),
            )
            for chunk in chunks
        ]

    def append(self, data: bytes) -> None:
        """Append journal records (one flush): buffered until the end of the current event
        loop iteration, so the flushes of concurrent calls (many AckMessage calls of one
        consumer) become one message; at once outside a loop or past ``chunk_bytes_max``."""
        self._buffer += data
        if self._next is not None and len(self._buffer) < self._chunk_bytes_max:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.write_pending()
            return
        if self._next is None:
            self._next = loop.create_future()
            loop.call_soon(self.write_pending)
        else:
            self.write_pending()

    def write_pending(self) -> None:
        """Hand the buffered records to the store now, as one message (more only past the
        chunk size); the CommitLog then holds them in flush order."""
        waiting, self._next = self._next, None
        if self._buffer:
            data, self._buffer = bytes(self._buffer), bytearray()
            requests = self._requests(split(data, self._chunk_bytes_max), self.base)
            self._last = self._store.submit(requests)
        if waiting is not None and not waiting.done():
            waiting.set_result(None)

    def snapshot(self, records: Sequence[pop_journal.Record]) -> bool:
        """Append the live state as one batch and make it the replay start; returns whether
        it was stored (refused, e.g. too few in-sync replicas: the old base stays)."""
        self.write_pending()  # deltas before the snapshot stay before it
        data = pop_journal.encode_all(records)
        base = self._store.max_queue_offset(JOURNAL_TOPIC, JOURNAL_QUEUE)
        chunks = split(data, self._chunk_bytes_max) if data else [_EMPTY_SNAPSHOT]
        self._last = self._store.submit(self._requests(chunks, base))
        stored = self._store.max_queue_offset(JOURNAL_TOPIC, JOURNAL_QUEUE) - base == len(chunks)
        if stored:
            self.base = base
        else:
            _log.warning("POP journal snapshot not stored in the CommitLog (retried later)")
        return stored

    @property
    def base_deleted(self) -> bool:
        """Whether retention deleted the newest snapshot (a replay would miss state)."""
        low = self._store.min_queue_offset(JOURNAL_TOPIC, JOURNAL_QUEUE)
        return self.base < low

    def check_writable(self) -> None:
        """Refuse a receive, ack or change before it changes anything when its journal write
        would be refused (a SYNC_MASTER with fewer than ``min_in_sync_replicas`` in sync): a
        POP write waits for replication like any write, so it is refused like a send.

        Raises:
            HaNotAvailableError (HA_NOT_AVAILABLE), InternalServerError: the gate's refusal.
        """
        gate = self._store.replication
        refused = None if gate is None else gate.refusal()
        if refused is not None:
            raise error_of(refused)

    async def replicated(self) -> commit_log.PutMessageStatus:
        """Wait for the last write's flush and replication condition (each bounded by
        ``sync_flush_timeout_ms``, as ``store.put_wait``); PUT_OK, or the failed status
        (FLUSH_DISK_TIMEOUT, FLUSH_SLAVE_TIMEOUT, SLAVE_NOT_AVAILABLE, a refusal). The
        callers waiting for one write share one wait for its slave."""
        if self._next is not None:
            await asyncio.shield(self._next)
        write = self._last
        if write is None:
            return PMS.PUT_OK
        timeout_s = self._store.settings.sync_flush_timeout_ms / 1000
        try:
            async with asyncio.timeout(timeout_s):
                results = write.result() if write.done() else await _shared(write)
        except TimeoutError:
            return PMS.FLUSH_DISK_TIMEOUT
        failed = next((r.status for r in results if r.status is not PMS.PUT_OK), None)
        gate = self._store.replication
        if failed is not None or gate is None:
            return failed or PMS.PUT_OK
        end = max(r.commit_log_offset + r.wrote_bytes for r in results)
        if self._slave_wait is None or self._slave_wait[0] != end:
            waited = gate.replicated(end)
            if waited.done():
                return waited.result()
            self._slave_wait = (end, asyncio.wrap_future(waited))
        try:
            async with asyncio.timeout(timeout_s):
                return await asyncio.shield(self._slave_wait[1])
        except TimeoutError:
            return PMS.FLUSH_SLAVE_TIMEOUT

    def _last_base(self) -> int:
        end = self._store.max_queue_offset(JOURNAL_TOPIC, JOURNAL_QUEUE)
        if end <= self._store.min_queue_offset(JOURNAL_TOPIC, JOURNAL_QUEUE):
            return 0
        last = self._read(ids.QueueOffset(end - 1), 1)
        if not last:
            return 0
        return int(last[0].properties.get(BASE_PROPERTY, "0"))

    def _read(self, start: ids.QueueOffset, count: int) -> list[message.StoredMessage]:
        result = self._store.get_messages(
            JOURNAL_TOPIC,
            JOURNAL_QUEUE,
            start,
            max_count=count,
            max_bytes=self._chunk_bytes_max * count + 4096,
        )
        return list(result.messages)

    def read_state(self) -> list[pop_journal.Record]:
        """The journal records from the newest snapshot to the end of the replicated topic,
        in CommitLog order (a promoted slave folds them with ``journal.replay``).

        A base retention deleted starts the replay at the oldest kept message (logged: state
        older than it is lost, at-least-once as before); a corrupt chunk ends the replay.
        """
        self.base = self._last_base()
        low = self._store.min_queue_offset(JOURNAL_TOPIC, JOURNAL_QUEUE)
        end = self._store.max_queue_offset(JOURNAL_TOPIC, JOURNAL_QUEUE)
        if self.base < low:
            _log.warning(
                "POP journal snapshot %d deleted by retention; replay from %d", self.base, low
            )
        at = ids.QueueOffset(max(self.base, low))
        records: list[pop_journal.Record] = []
        read_bytes = 0
        while at < end:
            batch = self._read(at, READ_COUNT_MAX)
            if not batch:
                _log.error("POP journal unreadable at queue offset %d; replay stops", at)
                break
            for stored in batch:
                decoded = pop_journal.decode(stored.body)
                if decoded.problem is not None:
                    _log.error("POP journal message %d: %s", stored.queue_offset, decoded.problem)
                records += decoded.records
                read_bytes += len(stored.body)
            if read_bytes > REPLAY_BYTES_MAX:
                _log.error("POP journal replay passed %d bytes; the rest is skipped", read_bytes)
                break
            at = ids.QueueOffset(batch[-1].queue_offset + 1)
        _log.info("POP journal: %d records replayed from the CommitLog at %d", len(records), at)
        return records


_STATUS_ERRORS = {
    PMS.FLUSH_DISK_TIMEOUT: errors.Code.MASTER_PERSISTENCE_TIMEOUT,
    PMS.FLUSH_SLAVE_TIMEOUT: errors.Code.SLAVE_PERSISTENCE_TIMEOUT,
    PMS.SLAVE_NOT_AVAILABLE: errors.Code.HA_NOT_AVAILABLE,
    PMS.IN_SYNC_REPLICAS_NOT_ENOUGH: errors.Code.HA_NOT_AVAILABLE,
}


def error_of(status: commit_log.PutMessageStatus) -> errors.ArianeError:
    """What an ack whose journal write failed answers (the codes a send answers)."""
    code = _STATUS_ERRORS.get(status, errors.Code.INTERNAL_SERVER_ERROR)
    text = f"done on this broker, but its POP journal write was {status.value}"
    return errors.error_for_code(int(code), text)


async def _shared(
    write: concurrent.futures.Future[list[commit_log.PutMessageResult]],
) -> list[commit_log.PutMessageResult]:
    """The results of a write not flushed yet (SYNC_FLUSH), without cancelling it on timeout."""
    return await asyncio.shield(asyncio.wrap_future(write))


def committed_ack(
    group: ids.GroupName, topic: ids.TopicName, queue_id: ids.QueueId, offset: int
) -> list[pop_journal.Record]:
    """A queue's committed offset as a snapshot record: an ACK of ``[0, offset)`` (none at 0;
    the count field holds 32 bits, so a higher offset keeps the top ``0xFFFFFFFF`` only)."""
    if offset <= 0:
        return []
    count = min(offset, ACK_COUNT_MAX)
    return [pop_journal.Ack(group, topic, queue_id, ids.QueueOffset(offset - count), count)]


ACK_COUNT_MAX = 0xFFFFFFFF
"""Most offsets one ACK record covers (its count field)."""

CommittedOf = Callable[[ids.GroupName, ids.TopicName, ids.QueueId], ids.QueueOffset | None]


def promoted(
    records: Sequence[pop_journal.Record], committed_of: CommittedOf
) -> tuple[dict[pop_journal.QueueKey, pop_journal.RestoredQueue], dict[pop_journal.QueueKey, int]]:
    """Fold a promoted slave's replicated journal against its (synced, maybe stale) offsets.

    Returns:
        what each queue has in flight and done above its committed offset, and the committed
        offsets to store: a done prefix from offset 0 (a snapshot's ``committed_ack``, or
        acks) raises a lagging synced offset; a queue with state and no stored offset starts
        at its lowest recorded offset (never at the queue's end, which would skip them).
    """
    restored: dict[pop_journal.QueueKey, pop_journal.RestoredQueue] = {}
    commits: dict[pop_journal.QueueKey, int] = {}
    for key, queue in pop_journal.replay(records).items():
        stored = committed_of(*key)
        offset: int | None = stored
        if queue.done and queue.done[0][0] == 0:
            offset = max(stored or 0, queue.done[0][1])
        elif stored is None:
            offset = min([*queue.checkpoints, *(start for start, _ in queue.done)])
        assert offset is not None
        if offset != stored:
            commits[key] = offset
        kept = queue.above(offset)
        if kept:
            restored[key] = kept
    return restored, commits


_EMPTY_SNAPSHOT = pop_journal.encode(
    pop_journal.Forget(ids.GroupName(""), ids.TopicName(""), pop_journal.ALL_QUEUES)
)
"""An empty state still needs a message to be the base: a FORGET of a group named "" (none)."""
