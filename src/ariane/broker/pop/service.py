"""The owner of RocketMQ 5 POP consumption state: ``PopService`` and ``PopReviveService``.

``PopService`` (RocketMQ's ``PopBufferMergeService`` is the noun) owns every group's
``pop.GroupPopState``, opens queues at their start offsets, mirrors committed offsets into the
offset table and keeps the POP journal (``pop_journal_file``): deliveries (CK), acks and
forgotten queues are buffered as records during one processor call and appended with one
``write`` when the call ends (``flush``, or the end of the outermost ``batch``). At start-up it
replays the journal above each group's committed offset, so delivery attempts and in-flight
receipts survive a restart; the journal is compacted (live state rewritten atomically) when it
passes half of ``journal_bytes_max`` in the background, or ``journal_bytes_max`` inline.

``PopReviveService`` (RocketMQ ``PopReviveService``) is the background loop: it revives
deliveries whose invisible time ran out even when no consumer receives (a concurrent group's
into a copy in ``%RETRY%<group>_<topic>``, or ``%DLQ%<group>`` after the last attempt; an orderly
group's only into the DLQ, its other redeliveries happen in place at the next receive), and
compacts the journal.

What the journal holds: the deliveries in flight (CK: handle version, deadline, attempt,
message group) and the done offsets (ACK) above each group's committed offset, so that after a
restart an unacked delivery is still revived and a stale handle refused (a concurrent group's
attempt is also its retry copy's RECONSUMETIMES + 1). The master of a replicating group writes
every flush into the CommitLog too, and a promoted slave rebuilds from it (``pop.replica``;
the roles: ``start_replicating``, ``become_master``, ``become_slave``).

Every dependency is passed in (store reads, offset table, settings, clock, the reviver);
nothing here reaches into ``BrokerRuntime``. Invariants: used from the broker's event loop
only; a group's POP state exists only while the group has been seen since start; the offset
table is persisted before a compaction drops the ack records below the committed offsets.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import pathlib
from collections.abc import Awaitable, Callable, Iterator
from typing import Protocol

from ariane.broker import settings
from ariane.broker.pop import delivery
from ariane.broker.pop import group_state as pop
from ariane.broker.pop import journal as pop_journal
from ariane.broker.pop import journal_file as pop_journal_file
from ariane.broker.pop import reader as pop_reader
from ariane.broker.pop import replica as pop_replica
from ariane.broker.tables import offsets
from ariane.broker.tables import subscriptions as subs
from ariane.common import clock, errors, ids, message, topics
from ariane.store import commit_log, message_store

_log = logging.getLogger(__name__)
GMS = message_store.GetMessageStatus


class Reviver(Protocol):
    """Revives an expired delivery (``ConsumeProcessor.revive``): a retry copy in
    ``%RETRY%<group>_<topic>``, or a dead letter once ``failed_attempt`` reached the max
    attempts."""

    def __call__(
        self, group: ids.GroupName, stored: message.StoredMessage, *, failed_attempt: int
    ) -> Awaitable[None]:
        """Store the copy; raises ``ArianeError`` when the store refuses it."""
        ...


class PopService:
    """POP state of every group of one broker, persisted in the POP journal.

    Use ``PopService.open`` (it replays the journal). Args of ``__init__`` as ``open``, plus
    the opened ``journal`` (``None``: nothing is persisted) and what it ``restored``.
    """

    def __init__(
        self,
        *,
        store: message_store.MessageStore,
        offset_table: offsets.ConsumerOffsetManager,
        core: settings.CoreSettings,
        receive: settings.ReceiveSettings,
        time: clock.Clock,
        journal: pop_journal_file.PopJournal | None,
        restored: dict[pop_journal.QueueKey, pop_journal.RestoredQueue],
    ) -> None:
        self._store = store
        self._offsets = offset_table
        self._pop_settings = core.pop
        self._group_count_max = core.subscriptions.group_count_max
        self._receive = receive
        self._clock = time
        self._journal = journal
        self._restored = restored
        self._states: dict[ids.GroupName, pop.GroupPopState] = {}
        self._pending = bytearray()
        self._depth = 0
        self._replica: pop_replica.JournalReplica | None = None
        """Set while this broker is the master of a replicating group (``start_replicating``,
        ``become_master``; ``become_slave`` clears it): the journal goes to the CommitLog too."""
        self._snapshot_due = False
        self.reader = pop_reader.QueueReader(store, max_bytes=receive.message_bytes_max)
        """Every message read of the POP path (receives, receipts, the revive loop)."""

    @classmethod
    def open(
        cls,
        root: pathlib.Path,
        *,
        store: message_store.MessageStore,
        offset_table: offsets.ConsumerOffsetManager,
        core: settings.CoreSettings,
        receive: settings.ReceiveSettings,
        time: clock.Clock,
    ) -> PopService:
        """Open the journal under ``root`` and replay it above the committed offsets.

        Args:
            root: the store root (the journal is ``pop/popJournal`` under it).
            store: where messages are read (redeliveries, start offsets).
            offset_table: committed consumer offsets (read at replay, written by ``commit``).
            core: ``pop`` bounds, ``subscriptions.group_count_max``.
            receive: ``consume_from_where``.
            time: the clock (deadlines: monotonic; journal deadlines: wall).

        Raises:
            OSError, ValueError: the journal cannot be read or is over 64 MiB.
        """
        journal, records = pop_journal_file.open_journal(root)
        restored: dict[pop_journal.QueueKey, pop_journal.RestoredQueue] = {}
        for key, queue in pop_journal.replay(records).items():
            committed = offset_table.query(*key)
            kept = queue if committed is None else queue.above(committed)
            if kept:
                restored[key] = kept
        service = cls(
            store=store,
            offset_table=offset_table,
            core=core,
            receive=receive,
            time=time,
            journal=journal,
            restored=restored,
        )
        if restored:
            _log.info("POP journal: restored %d group queues", len(restored))
        return service

    # -- group states -------------------------------------------------------------------------

    def state(self, group: subs.SubscriptionGroupConfig) -> pop.GroupPopState:
        """The POP state of ``group``, created on first use (and re-created, its queues
        forgotten, when its kind or max attempts changed through the admin API).

        Raises:
            TooManyRequestsError: ``group_count_max`` groups are active already.
        """
        state = self._states.get(group.group)
        if (
            state is None
            or state.orderly != group.consume_orderly
            or state.max_delivery_attempts != group.max_delivery_attempts
        ):
            if state is None and len(self._states) >= self._group_count_max:
                raise errors.TooManyRequestsError("too many active consumer groups")
            if state is not None:
                self.drop_state(group.group)
            state = pop.GroupPopState(
                group.group,
                time=self._clock,
                pop_settings=self._pop_settings,
                max_delivery_attempts=group.max_delivery_attempts,
                orderly=group.consume_orderly,
                journal=self,
            )
            self._states[group.group] = state
        return state

    def existing_state(self, group: ids.GroupName) -> pop.GroupPopState | None:
        """The POP state of ``group`` if it has received since start."""
        return self._states.get(group)

    def states(self) -> list[pop.GroupPopState]:
        """Every group's POP state (groups that received since start)."""
        return list(self._states.values())

    def drop_state(self, group: ids.GroupName) -> None:
        """Forget a group's POP state, in memory and in the journal (group deleted, its kind
        changed)."""
        self._states.pop(group, None)
        for key in [k for k in self._restored if k[0] == group]:
            del self._restored[key]
        self.forget(group, ids.TopicName(""), pop_journal.ALL_QUEUES)
        self.flush()

    def close_topic(self, topic: ids.TopicName, queue_ids: range) -> None:
        """Stop tracking every queue of a deleted topic for every group."""
        for state in self._states.values():
            for queue_id in queue_ids:
                state.close_queue(topic, ids.QueueId(queue_id))
        for key in [k for k in self._restored if k[1] == topic]:
            del self._restored[key]
            self.forget(key[0], topic, pop_journal.ALL_QUEUES)
        self.flush()

    def reset_queues(
        self,
        group: ids.GroupName,
        topic: ids.TopicName,
        new_offsets: dict[ids.QueueId, ids.QueueOffset],
    ) -> None:
        """Restart a group's queues at new offsets (admin reset; the caller stored them)."""
        state = self._states.get(group)
        for queue_id, offset in new_offsets.items():
            if state is not None:
                state.reset_queue(topic, queue_id, offset)
            elif self._restored.pop((group, topic, queue_id), None) is not None:
                self.forget(group, topic, queue_id)
        self.flush()

    # -- queues and offsets -------------------------------------------------------------------

    def open_queue(
        self, state: pop.GroupPopState, topic: ids.TopicName, queue_id: ids.QueueId
    ) -> None:
        """Start tracking a queue for a group from its start offset, with what the journal
        restored for it."""
        if state.is_open(topic, queue_id):
            return
        restored = self._restored.pop((state.group, topic, queue_id), None)
        committed = self.start_offset(state.group, topic, queue_id)
        state.open_queue(topic, queue_id, committed=committed, restored=restored)

    def start_offset(
        self, group: ids.GroupName, topic: ids.TopicName, queue_id: ids.QueueId
    ) -> ids.QueueOffset:
        """Where ``group`` resumes on a queue it does not track yet: its stored offset (raised
        to the queue's min offset when retention deleted below it), or the initial offset of
        ``consume_from_where`` when it never committed there; a retry topic always starts at
        its min offset (RocketMQ ``PopMessageProcessor.getInitOffset``): its copies were
        written for this group, possibly before the group first read the topic."""
        stored = self._offsets.query(group, topic, queue_id)
        low = self._store.min_queue_offset(topic, queue_id)
        if stored is not None:
            return ids.QueueOffset(max(stored, low))
        first = self._receive.consume_from_where is settings.ConsumeFromWhere.FIRST_OFFSET
        if first or topics.is_retry_topic(topic):
            return low
        return self._store.max_queue_offset(topic, queue_id)

    def commit(self, state: pop.GroupPopState, topic: ids.TopicName, queue_id: ids.QueueId) -> None:
        """Mirror the group's committed offset of one queue into the offset table."""
        self._offsets.commit(state.group, topic, queue_id, state.committed_offset(topic, queue_id))

    def restored_dead_letters(
        self, max_attempts_of: Callable[[ids.GroupName], int | None]
    ) -> list[pop_journal.Checkpoint]:
        """Restored deliveries of queues no receive opened since the restart whose deadline
        (wall clock) passed and whose attempt reached ``max_attempts_of(group)``, in
        (group, topic, queue, offset) order: RocketMQ's revive of its CK records.

        Args:
            max_attempts_of: the attempt from which the group's expired deliveries are
                revived (1 for a concurrent group: all; the max attempts for an orderly
                one: the dead letters), ``None`` if the group is gone.
        """
        now_ms = self._clock.now_ms()
        due: list[pop_journal.Checkpoint] = []
        for (group, _, _), restored in sorted(self._restored.items()):
            limit = max_attempts_of(group)
            if limit is not None:
                due += [
                    c
                    for _, c in sorted(restored.checkpoints.items())
                    if c.deadline_ms <= now_ms and c.attempt >= limit
                ]
        return due

    def settle_restored(self, checkpoint: pop_journal.Checkpoint) -> None:
        """Mark a restored delivery done after the caller forwarded it to the DLQ."""
        key = (checkpoint.group, checkpoint.topic, checkpoint.queue_id)
        restored = self._restored.get(key)
        if restored is None or restored.checkpoints.get(checkpoint.queue_offset) != checkpoint:
            return  # a receive opened the queue meanwhile: the state owns it now
        restored.settle(checkpoint.queue_offset)
        self.done(*key, checkpoint.queue_offset)

    # -- the journal ----------------------------------------------------------------------------

    def checkpoint(self, group: ids.GroupName, entry: delivery.InFlight) -> None:
        """``delivery.JournalSink``: buffer a CK record of ``entry``."""
        if self._journal is not None:
            self._pending += pop_journal.encode(delivery.checkpoint_of(group, entry))

    def done(
        self, group: ids.GroupName, topic: ids.TopicName, queue_id: ids.QueueId, offset: int
    ) -> None:
        """``delivery.JournalSink``: buffer an ACK record of one offset."""
        if self._journal is not None:
            at = ids.QueueOffset(offset)
            self._pending += pop_journal.encode(pop_journal.Ack(group, topic, queue_id, at))

    def forget(self, group: ids.GroupName, topic: ids.TopicName, queue_id: int) -> None:
        """``delivery.JournalSink``: buffer a FORGET record."""
        if self._journal is not None:
            self._pending += pop_journal.encode(pop_journal.Forget(group, topic, queue_id))

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """Collect the records of several synchronous calls into one write (an AckMessage
        of many entries); nested batches write once, when the outermost ends."""
        self._depth += 1
        try:
            yield
        finally:
            self._depth -= 1
            self.flush()

    def flush(self) -> None:
        """Append the buffered records with one write, unless inside a ``batch``; compact
        inline when the journal reached ``journal_bytes_max``.

        A failed write is logged, not raised: the POP state in memory stays right, only a
        restart would lose it (as before the journal existed).
        """
        if self._depth or not self._pending or self._journal is None:
            return
        data, self._pending = bytes(self._pending), bytearray()
        if self._replica is not None:
            self._replica.append(data)
        try:
            self._journal.append(data)
        except OSError as exc:
            _log.warning("POP journal append of %d bytes failed: %s", len(data), exc)
            return
        if self._journal.size_bytes >= self._pop_settings.journal_bytes_max:
            self.compact()

    def maybe_compact(self) -> bool:
        """Compact if the journal passed half of ``journal_bytes_max``; returns whether. A
        replicating master also writes a CommitLog snapshot when one is due (start, a failed
        one, retention deleted the last)."""
        journal = self._journal
        if journal is None or journal.size_bytes < self._pop_settings.journal_bytes_max // 2:
            replica = self._replica
            if replica is not None and (self._snapshot_due or replica.base_deleted):
                self._snapshot_due = not replica.snapshot(self._live_records(committed=True))
            return False
        return self.compact()

    def _live_records(self, *, committed: bool = False) -> list[pop_journal.Record]:
        """The live state as journal records; with ``committed``, the committed offsets too
        (``replica.committed_ack``: a slave's synced offsets may lag)."""
        records: list[pop_journal.Record] = []
        for state in self._states.values():
            records += state.journal_records()
            if committed:
                for topic, queue_id in state.open_queues():
                    offset = state.committed_offset(topic, queue_id)
                    records += pop_replica.committed_ack(state.group, topic, queue_id, offset)
        for key, restored in sorted(self._restored.items()):
            records += delivery.restored_records(key, restored)
            if committed:
                records += pop_replica.committed_ack(*key, self._offsets.query(*key) or 0)
        return records

    def compact(self) -> bool:
        """Rewrite the journal as the live state (persist offsets first); returns success."""
        if self._journal is None:
            return False
        data = pop_journal.encode_all(self._live_records())
        before = self._journal.size_bytes
        try:
            self._offsets.persist()
            self._journal.rewrite(data)
        except (OSError, ValueError) as exc:
            _log.warning("POP journal compaction failed (the old journal stays): %s", exc)
            return False
        self._pending = bytearray()
        _log.info("POP journal compacted from %d to %d bytes", before, len(data))
        if self._replica is not None:
            self._snapshot_due = not self._replica.snapshot(self._live_records(committed=True))
        return True

    # -- roles (``services.replication.RoleFollower``) ----------------------------------------

    def start_replicating(self) -> None:
        """A master of a replicating group at start: journal into the CommitLog too (see
        ``pop.replica``), beginning with a snapshot of what the file restored, if anything."""
        if self._replica is None:
            self._replica = pop_replica.JournalReplica(self._store, time=self._clock)
            self._snapshot_due = bool(self._restored)

    def become_master(self) -> int:
        """A promoted slave: rebuild the POP state from the replicated journal topic (the
        file journal of a slave holds nothing), raise lagging committed offsets, rewrite the
        file journal from it and start replicating. Nothing when replicating already.

        Returns:
            how many group queues have state restored.
        """
        if self._replica is not None:
            return len(self._restored)
        replica = pop_replica.JournalReplica(self._store, time=self._clock)
        restored, commits = pop_replica.promoted(replica.read_state(), self._offsets.query)
        for (group, topic, queue_id), offset in commits.items():
            self._offsets.commit(group, topic, queue_id, ids.QueueOffset(offset))
        self._states.clear()
        self._restored = restored
        self._pending = bytearray()
        self.compact()
        self._replica, self._snapshot_due = replica, bool(restored)
        _log.warning("promoted: POP state of %d group queues rebuilt", len(restored))
        return len(restored)

    def become_slave(self) -> None:
        """Give the POP state up (the master owns it): forget every group's state and empty
        the file journal, so nothing stale survives into a later promotion or restart."""
        self._replica, self._snapshot_due = None, False
        self._states.clear()
        self._restored.clear()
        self._pending = bytearray()
        self.compact()

    async def replicated(self) -> errors.ArianeError | None:
        """Wait until the last journal write holds its flush and replication condition
        (``pop.replica``): ``None``, or the error an ack answers (logged: a failover now
        forgets the last deliveries and acks). ``None`` when not replicating."""
        if self._replica is None:
            return None
        status = await self._replica.replicated()
        if status is commit_log.PutMessageStatus.PUT_OK:
            return None
        _log.warning("POP journal write not replicated: %s", status.value)
        return pop_replica.error_of(status)

    def adopt_through(
        self, state: pop.GroupPopState, topic: ids.TopicName, queue_id: ids.QueueId, offset: int
    ) -> None:
        """Before an ack or change of a restored delivery no receive reached yet (a receipt of
        the old master, or from before a restart): open its queue and adopt the restored
        offsets up to ``offset`` (stops at the first offset not restored); raises
        ``TooManyRequestsError`` when the group's in-flight table is full."""
        if not state.is_open(topic, queue_id):
            if (state.group, topic, queue_id) not in self._restored:
                return
            self.open_queue(state, topic, queue_id)
        at = state.scan_offset(topic, queue_id)
        while at <= offset and state.adopt_restored(topic, queue_id, at):
            at = state.scan_offset(topic, queue_id)

    def check_writable(self) -> None:
        """Raise what a POP journal write would be refused with now (``replica``)."""
        if self._replica is not None:
            self._replica.check_writable()

    def restored_state(
        self, group: subs.SubscriptionGroupConfig | None
    ) -> pop.GroupPopState | None:
        """The state of a group with restored state that has not received since start (an ack
        of a receipt from before a restart or a promotion); raises ``TooManyRequestsError``
        past ``group_count_max``."""
        if group is None or not any(key[0] == group.group for key in self._restored):
            return None
        return self.state(group)

    def close(self) -> None:
        """Write what is buffered and close the journal."""
        self.flush()
        if self._replica is not None:
            self._replica.write_pending()
        if self._journal is not None:
            self._journal.close()


class PopReviveService:
    """Background loop: expired deliveries are revived (retry copy or DLQ); compaction.

    Args:
        pop_service: the POP state owner.
        group_table: subscription group configs (kind and max attempts).
        reviver: writes the retry copy or dead letter of one message (raises
            ``ArianeError``).
        interval_ms: pause between runs, ms.
    """

    def __init__(
        self,
        *,
        pop_service: PopService,
        group_table: subs.SubscriptionGroupManager,
        reviver: Reviver,
        interval_ms: int,
    ) -> None:
        self._pop = pop_service
        self._groups = group_table
        self._revive = reviver
        self._interval_ms = interval_ms

    async def run(self) -> None:
        """Revive and compact every ``interval_ms`` until cancelled."""
        while True:
            await asyncio.sleep(self._interval_ms / 1000)
            try:
                await self.revive_once()
            except errors.ArianeError as exc:
                _log.warning("reviving expired deliveries failed: %s", exc)
            self._pop.maybe_compact()

    async def revive_once(self) -> int:
        """Revive every expired delivery; returns how many messages were copied.

        Mirrors RocketMQ's ``PopReviveService``: a concurrent group's expired message becomes
        a ``%RETRY%<group>_<topic>`` copy at once (a parked receive wakes on it), and a message
        whose consumers all went away still reaches ``%DLQ%<group>``; an orderly group's
        redeliveries with attempts left wait for a receive (in place). The messages of one
        queue are read in batches (``reader.QueueReader.at``).
        """
        moved = 0
        try:
            for state in self._pop.states():
                by_queue: dict[pop.QueueKey, list[delivery.Due]] = {}
                for due in state.collect_due():
                    if due.to_dlq or not state.orderly:
                        by_queue.setdefault((due.topic, due.queue_id), []).append(due)
                for (topic, queue_id), dues in by_queue.items():
                    moved += await self._dead_letter_queue(state, topic, queue_id, dues)
            moved += await self._dead_letter_restored()
        finally:
            self._pop.flush()
        return moved

    def _revived_from(self, group: ids.GroupName) -> int | None:
        config = self._groups.get(group)
        if config is None:
            return None
        return config.max_delivery_attempts if config.consume_orderly else 1

    async def _dead_letter_restored(self) -> int:
        """Restored deliveries past their max attempts, in queues no receive opened yet."""
        by_queue: dict[pop_journal.QueueKey, list[pop_journal.Checkpoint]] = {}
        for checkpoint in self._pop.restored_dead_letters(self._revived_from):
            key = (checkpoint.group, checkpoint.topic, checkpoint.queue_id)
            by_queue.setdefault(key, []).append(checkpoint)
        moved = 0
        for (group, topic, queue_id), checkpoints in by_queue.items():
            wanted = [c.queue_offset for c in checkpoints]
            found = self._pop.reader.at(topic, queue_id, wanted)
            for checkpoint in checkpoints:
                stored = found.get(checkpoint.queue_offset)
                if stored is not None:
                    await self._revive(group, stored, failed_attempt=checkpoint.attempt)
                    moved += 1
                self._pop.settle_restored(checkpoint)
        return moved

    async def _dead_letter_queue(
        self,
        state: pop.GroupPopState,
        topic: ids.TopicName,
        queue_id: ids.QueueId,
        dues: list[delivery.Due],
    ) -> int:
        moved = 0
        found = self._pop.reader.at(topic, queue_id, [d.queue_offset for d in dues])
        for due in dues:  # not claimed: acked, reset, or a receive is copying it
            with state.reviving(topic, queue_id, due.queue_offset) as claimed:
                stored = found.get(due.queue_offset) if claimed else None
                if stored is not None:
                    await self._revive(state.group, stored, failed_attempt=due.next_attempt - 1)
                    moved += 1
        if state.is_open(topic, queue_id):
            self._pop.commit(state, topic, queue_id)
        return moved
