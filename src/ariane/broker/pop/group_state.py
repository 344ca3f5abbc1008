"""Invisible-time bookkeeping of one consumer group (RocketMQ 5 "POP" consumption), pure.

RocketMQ 5 balances load per message: a received message becomes invisible for its invisible
duration; an ack removes it; ChangeInvisibleDuration moves its deadline and issues a new receipt
handle; a message not acked in time is delivered again with ``delivery_attempt + 1``, and one
whose next attempt would exceed the group's ``max_delivery_attempts`` goes to ``%DLQ%<group>``.
``GroupPopState`` keeps that state for one group over the queues it reads, with an injected
``Clock`` (deadlines use its monotonic time) and no I/O.
The values it hands out (``InFlight``, ``Due``, ``AckOutcome``, ``ChangeResult``) and the
``JournalSink`` seam live in ``delivery``; the done flags of a queue in ``done_window``.

Per queue (topic, queue id) it keeps::

    committed ──────────────► cursor ───────────────► (never seen)
    │ all done below │ each offset here is exactly one of: done (acked/skipped/DLQ'd),
                       in flight (maybe due for redelivery), or held back (FIFO)

* ``committed``: the lowest offset not yet done. It is the group's consumer offset: the caller
  stores it with ``offsets.ConsumerOffsetManager.commit`` and it only moves forward, over a
  contiguous done prefix.
* ``cursor``: the next offset the scanner has never looked at.
* the in-flight table: offset → ``InFlight`` (deadline, attempt, handle version, message group).
* done flags above ``committed``, as a bitmap bounded by ``pop_span_max``.

How the receive path drives it, per queue: (1) ``collect_due`` → for each ``Due``: forward it
to the DLQ (or, for a concurrent group, copy it to ``%RETRY%<group>_<topic>``) inside
``reviving`` (which settles it), or (orderly groups) read it and ``redeliver``; (2) FIFO only:
``fifo_ready`` → ``reserve`` each; (3) read new messages from ``scan_offset`` (at most
``scan_budget``): ``skip`` those the filter rejects, ``reserve`` the others (``None`` means FIFO
held it back). Ack/ChangeInvisibleDuration decode the receipt handle and call ``ack`` /
``change_invisible`` with its version.

Handle versions come from one counter per group that starts at a random 40-bit value, so a
handle issued before a restart does not match a delivery made after it.

Restart: every delivery, ack and forgotten queue is reported to the injected ``JournalSink``
(``pop_service.PopService`` appends it to the POP journal). After a restart a queue is opened
with what the journal restored above ``committed`` (``pop_journal.RestoredQueue``); the scanner
calls ``adopt_restored`` at each offset first: a restored delivery is taken back in flight with
its attempt, handle version and deadline (not delivered now: it is redelivered with attempt + 1
once its deadline passes), a restored done offset is skipped. Handle versions are persisted, so
the handle of the last delivery before a restart still acks; new versions start above every
restored one.

Bounds: in-flight + held entries per group ≤ ``inflight_messages_max`` and
``cursor - committed`` ≤ ``pop_span_max``; a new reservation beyond them raises
``TooManyRequestsError`` (``scan_budget`` says how many new offsets fit).
"""

from __future__ import annotations

import contextlib
import dataclasses
import heapq
import secrets
from collections.abc import Iterator

from ariane.broker import settings
from ariane.broker.pop import delivery, done_window, fifo
from ariane.broker.pop import journal as pop_journal
from ariane.common import clock, errors, ids

_VERSION_START_BITS = 40
_HEAP_SLACK = 64

QueueKey = tuple[ids.TopicName, ids.QueueId]
"""(topic, queue id)."""


@dataclasses.dataclass(slots=True)
class _Queue:
    topic: ids.TopicName
    queue_id: ids.QueueId
    window: done_window.DoneWindow
    cursor: int
    in_flight: dict[int, delivery.InFlight] = dataclasses.field(default_factory=dict)
    heap: list[tuple[int, int, int]] = dataclasses.field(default_factory=list)
    due: set[int] = dataclasses.field(default_factory=set)
    reviving: dict[int, int] = dataclasses.field(default_factory=dict)
    """Due offsets whose copy is being written (``GroupPopState.reviving``) → the claimed
    handle version."""
    held: dict[int, str] = dataclasses.field(default_factory=dict)
    order: fifo.FifoOrder | None = None
    restored: pop_journal.RestoredQueue | None = None

    def outstanding(self) -> int:
        return len(self.in_flight) + len(self.held)


class GroupPopState:
    """POP bookkeeping of one consumer group over the queues it reads.

    Args:
        group: the consumer group.
        time: the clock; deadlines use ``monotonic_ms``, ``popped_at_ms`` uses ``now_ms``.
        pop_settings: ``inflight_messages_max`` and ``pop_span_max``.
        max_delivery_attempts: deliveries before a message goes to the DLQ (group config).
        orderly: FIFO group: hold back later messages of a message group (``broker.fifo``).
        first_handle_version: first handle version to issue; random when ``None`` (tests pin
            it).
        journal: told of every delivery, ack and forgotten queue (``None``: not persisted).
    """

    def __init__(
        self,
        group: ids.GroupName,
        *,
        time: clock.Clock,
        pop_settings: settings.PopSettings,
        max_delivery_attempts: int,
        orderly: bool = False,
        first_handle_version: int | None = None,
        journal: delivery.JournalSink | None = None,
    ) -> None:
        assert max_delivery_attempts >= 1, "max_delivery_attempts must be >= 1"
        self.group = group
        self.orderly = orderly
        self.max_delivery_attempts = max_delivery_attempts
        self._clock = time
        self._settings = pop_settings
        self._journal = journal
        self._queues: dict[QueueKey, _Queue] = {}
        self._outstanding = 0
        self._next_version = (
            secrets.randbits(_VERSION_START_BITS)
            if first_handle_version is None
            else first_handle_version
        )

    # -- queues ----------------------------------------------------------------------------

    def open_queue(
        self,
        topic: ids.TopicName,
        queue_id: ids.QueueId,
        *,
        committed: ids.QueueOffset,
        restored: pop_journal.RestoredQueue | None = None,
    ) -> None:
        """Start tracking a queue from its committed offset; a no-op if already tracked.

        Args:
            committed: the group's stored consumer offset, or the queue's initial offset for
                a group that never consumed it (RocketMQ 5 starts new groups at the max).
            restored: what the POP journal holds for the queue above ``committed`` (taken
                over by ``adopt_restored`` as the scanner reaches each offset).
        """
        if (topic, queue_id) in self._queues:
            return
        assert committed >= 0, f"committed offset {committed} is negative"
        if restored is not None:
            restored = restored.above(committed)
            top = max((c.handle_version for c in restored.checkpoints.values()), default=-1)
            self._next_version = max(self._next_version, top + 1)
        self._queues[(topic, queue_id)] = _Queue(
            topic=topic,
            queue_id=queue_id,
            window=done_window.DoneWindow(committed),
            cursor=committed,
            order=fifo.FifoOrder() if self.orderly else None,
            restored=restored or None,
        )

    def is_open(self, topic: ids.TopicName, queue_id: ids.QueueId) -> bool:
        """Whether the queue is tracked."""
        return (topic, queue_id) in self._queues

    def close_queue(self, topic: ids.TopicName, queue_id: ids.QueueId) -> None:
        """Stop tracking a queue (topic deleted); its in-flight handles become UNKNOWN."""
        queue = self._queues.pop((topic, queue_id), None)
        if queue is not None:
            self._outstanding -= queue.outstanding()
        if self._journal is not None:
            self._journal.forget(self.group, topic, queue_id)

    def reset_queue(
        self, topic: ids.TopicName, queue_id: ids.QueueId, offset: ids.QueueOffset
    ) -> None:
        """Restart a queue at ``offset`` (admin offset reset): in-flight entries are dropped."""
        self.close_queue(topic, queue_id)
        self.open_queue(topic, queue_id, committed=offset)

    def skip_to(self, topic: ids.TopicName, queue_id: ids.QueueId, offset: ids.QueueOffset) -> None:
        """Treat every offset below ``offset`` as done (retention deleted those messages)."""
        queue = self._queue(topic, queue_id)
        for stale in [o for o in queue.in_flight if o < offset]:
            del queue.in_flight[stale]
            queue.due.discard(stale)
            self._outstanding -= 1
        for stale in [o for o in queue.held if o < offset]:
            del queue.held[stale]
            self._outstanding -= 1
        if queue.order is not None:
            queue.order.drop_below(offset)
        if queue.restored is not None:
            queue.restored = queue.restored.above(offset) or None
        queue.window.advance_to(offset)
        queue.cursor = max(queue.cursor, offset)

    def committed_offset(self, topic: ids.TopicName, queue_id: ids.QueueId) -> ids.QueueOffset:
        """The lowest offset not yet done: the consumer offset to store."""
        return ids.QueueOffset(self._queue(topic, queue_id).window.committed)

    def scan_offset(self, topic: ids.TopicName, queue_id: ids.QueueId) -> ids.QueueOffset:
        """The next offset never looked at: where the scanner reads new messages."""
        return ids.QueueOffset(self._queue(topic, queue_id).cursor)

    def scan_budget(self, topic: ids.TopicName, queue_id: ids.QueueId) -> int:
        """How many new offsets may be scanned now without hitting a bound (≥ 0)."""
        queue = self._queue(topic, queue_id)
        span_left = queue.window.committed + self._settings.pop_span_max - queue.cursor
        return max(0, min(self.capacity(), span_left))

    def capacity(self) -> int:
        """How many more messages may be in flight or held for this group (≥ 0)."""
        return max(0, self._settings.inflight_messages_max - self._outstanding)

    @property
    def outstanding(self) -> int:
        """In-flight plus held messages of the group."""
        return self._outstanding

    def open_queues(self) -> list[QueueKey]:
        """Every tracked (topic, queue id), sorted (the admin API's consumer lag)."""
        return sorted(self._queues)

    def in_flight_count(self, topic: ids.TopicName, queue_id: ids.QueueId) -> int:
        """Messages of one queue delivered and neither acked nor dead-lettered (0 if untracked).

        Due-for-redelivery messages count until they are redelivered or dead-lettered; FIFO
        messages held back (never delivered) do not.
        """
        queue = self._queues.get((topic, queue_id))
        return 0 if queue is None else len(queue.in_flight)

    def in_flight(
        self, topic: ids.TopicName, queue_id: ids.QueueId, offset: ids.QueueOffset
    ) -> delivery.InFlight | None:
        """The current delivery record of ``offset``, or ``None`` if it is not in flight."""
        queue = self._queues.get((topic, queue_id))
        return None if queue is None else queue.in_flight.get(offset)

    # -- scanning and delivery -------------------------------------------------------------

    def skip(self, topic: ids.TopicName, queue_id: ids.QueueId, offset: ids.QueueOffset) -> None:
        """Mark the message at the cursor done without delivering it (the filter rejected it).

        Raises:
            TooManyRequestsError: the cursor is ``pop_span_max`` ahead of ``committed``.
        """
        queue = self._queue(topic, queue_id)
        self._advance_cursor(queue, offset, needs_slot=False)
        queue.window.mark(offset)

    def reserve(
        self,
        topic: ids.TopicName,
        queue_id: ids.QueueId,
        offset: ids.QueueOffset,
        *,
        invisible_ms: int,
        message_group: str | None = None,
        attempt: int = 1,
    ) -> delivery.InFlight | None:
        """Deliver the message at the cursor, or a FIFO-held one that became ready.

        Args:
            offset: ``scan_offset()`` (a new message) or an offset from ``fifo_ready()``.
            invisible_ms: how long the message stays invisible, in ms (> 0).
            message_group: its FIFO message group (used only by orderly groups).
            attempt: the delivery attempt of a new message: its stored reconsume times + 1
                (a ``%RETRY%`` copy carries its attempts), 1 for a first delivery.

        Returns:
            the delivery record (``attempt``), or ``None`` when an orderly group holds the
            message back behind an earlier message of its group (it shows up in
            ``fifo_ready()`` once that one is done).

        Raises:
            TooManyRequestsError: a new message would exceed ``inflight_messages_max`` or
                ``pop_span_max``.
        """
        assert invisible_ms > 0, f"invisible_ms must be > 0, got {invisible_ms}"
        assert attempt >= 1, f"attempt must be >= 1, got {attempt}"
        queue = self._queue(topic, queue_id)
        if offset in queue.held:
            assert queue.order is not None
            if not queue.order.is_ready(offset):
                return None
            group = queue.held.pop(offset)
            queue.order.deliver_held(offset)
            return self._start(queue, offset, 1, group, invisible_ms)
        self._advance_cursor(queue, offset, needs_slot=True)
        self._outstanding += 1
        if queue.order is None or message_group is None:
            return self._start(queue, offset, attempt, None, invisible_ms)
        deliver = queue.order.may_deliver_new(message_group)
        queue.order.add(offset, message_group, delivered=deliver)
        if not deliver:
            queue.held[offset] = message_group
            return None
        return self._start(queue, offset, attempt, message_group, invisible_ms)

    def adopt_restored(
        self, topic: ids.TopicName, queue_id: ids.QueueId, offset: ids.QueueOffset
    ) -> bool:
        """Take over what the journal restored for the offset at the cursor, if anything.

        A restored delivery goes back in flight with its attempt, handle version, message
        group and (wall-clock) deadline, without being delivered now; a restored done offset
        is marked done. Call it before filtering the message at ``scan_offset()``.

        Returns:
            whether the offset was restored (the cursor then moved past it).

        Raises:
            TooManyRequestsError: as ``reserve`` for a restored delivery.
        """
        queue = self._queue(topic, queue_id)
        restored = queue.restored
        if restored is None:
            return False
        checkpoint = restored.checkpoints.pop(offset, None)
        if checkpoint is None:
            if not restored.is_done(offset):
                return False
            self._advance_cursor(queue, offset, needs_slot=False)
            queue.window.mark(offset)
            return True
        self._advance_cursor(queue, offset, needs_slot=True)
        self._outstanding += 1
        group = checkpoint.message_group if queue.order is not None else None
        if queue.order is not None and group is not None:
            queue.order.add(offset, group, delivered=True)
        left_ms = checkpoint.deadline_ms - self._clock.now_ms()
        self._track(
            queue,
            delivery.InFlight(
                topic=topic,
                queue_id=queue_id,
                queue_offset=offset,
                attempt=checkpoint.attempt,
                handle_version=checkpoint.handle_version,
                popped_at_ms=ids.TimestampMs(checkpoint.deadline_ms - checkpoint.invisible_ms),
                invisible_ms=checkpoint.invisible_ms,
                deadline_ms=self._clock.monotonic_ms() + left_ms,
                message_group=group,
            ),
        )
        return True

    def journal_records(self) -> list[pop_journal.Record]:
        """The live state as journal records (compaction): per tracked queue, every delivery
        in flight, the done offsets between committed and the cursor as ranges, and what is
        restored and not yet adopted. FIFO-held messages are not recorded (scanned again)."""
        records: list[pop_journal.Record] = []
        for (topic, queue_id), queue in sorted(self._queues.items()):
            records += [
                delivery.checkpoint_of(self.group, entry)
                for _, entry in sorted(queue.in_flight.items())
            ]
            start = None
            for offset in range(queue.window.committed, queue.cursor + 1):
                done = offset < queue.cursor and queue.window.is_done(offset)
                if done and start is None:
                    start = offset
                elif not done and start is not None:
                    at = ids.QueueOffset(start)
                    records.append(pop_journal.Ack(self.group, topic, queue_id, at, offset - start))
                    start = None
            if queue.restored is not None:
                key = (self.group, topic, queue_id)
                records += delivery.restored_records(key, queue.restored.above(queue.cursor))
        return records

    def fifo_ready(
        self, topic: ids.TopicName, queue_id: ids.QueueId
    ) -> list[tuple[ids.QueueOffset, str]]:
        """Held messages (orderly groups) that may now be delivered, in offset order."""
        order = self._queue(topic, queue_id).order
        if order is None:
            return []
        return [(ids.QueueOffset(offset), group) for offset, group in order.ready()]

    def collect_due(
        self, topic: ids.TopicName | None = None, queue_id: ids.QueueId | None = None
    ) -> list[delivery.Due]:
        """In-flight messages whose deadline is at or before now, in offset order per queue.

        A due message stays in flight (its current handle still acks it, and FIFO keeps its
        group blocked) until ``redeliver`` or ``settle_dead_letter``; one a caller is
        ``reviving`` is not collected again.

        Args:
            topic: only this topic's queues (all when ``None``).
            queue_id: only this queue of ``topic`` (all when ``None``).
        """
        now = self._clock.monotonic_ms()
        result: list[delivery.Due] = []
        for (q_topic, q_id), queue in sorted(self._queues.items()):
            if (topic is not None and q_topic != topic) or (
                queue_id is not None and q_id != queue_id
            ):
                continue
            self._expire(queue, now)
            for offset in sorted(queue.due.difference(queue.reviving)):
                attempt = queue.in_flight[offset].attempt + 1
                result.append(
                    delivery.Due(
                        topic=q_topic,
                        queue_id=q_id,
                        queue_offset=ids.QueueOffset(offset),
                        next_attempt=attempt,
                        to_dlq=attempt > self.max_delivery_attempts,
                    )
                )
        return result

    def redeliver(
        self,
        topic: ids.TopicName,
        queue_id: ids.QueueId,
        offset: ids.QueueOffset,
        *,
        invisible_ms: int,
    ) -> delivery.InFlight:
        """Deliver a due message again with attempt + 1 and a new handle version.

        ``offset`` must come from ``collect_due`` with ``to_dlq`` false (programmer error
        otherwise).
        """
        assert invisible_ms > 0, f"invisible_ms must be > 0, got {invisible_ms}"
        queue = self._queue(topic, queue_id)
        assert offset in queue.due, f"offset {offset} is not due for redelivery"
        previous = queue.in_flight[offset]
        attempt = previous.attempt + 1
        assert attempt <= self.max_delivery_attempts, f"offset {offset} belongs in the DLQ"
        queue.due.discard(offset)
        return self._start(queue, offset, attempt, previous.message_group, invisible_ms)

    def settle_dead_letter(
        self, topic: ids.TopicName, queue_id: ids.QueueId, offset: ids.QueueOffset
    ) -> None:
        """Mark a due message done after the caller forwarded it to ``%DLQ%<group>``."""
        queue = self._queue(topic, queue_id)
        assert offset in queue.due, f"offset {offset} is not due"
        self._finish(queue, offset)

    @contextlib.contextmanager
    def reviving(
        self, topic: ids.TopicName, queue_id: ids.QueueId, offset: ids.QueueOffset
    ) -> Iterator[bool]:
        """Claim a due delivery while its retry copy or dead letter is written (the write
        awaits: a SYNC_MASTER waits for its slave; the revive loop and the receives collect
        the same expiries, so unclaimed, one expiry could be copied twice and delivered twice
        at one attempt). Yields whether the caller holds the claim (``False``: no longer due,
        or another caller revives it: write nothing). A block that ends normally settles the
        delivery unless an ack, a ChangeInvisibleDuration or a reset replaced it meanwhile;
        one that raises only ends the claim (it stays due for the next pass)."""
        queue = self._queues.get((topic, queue_id))
        if queue is None or offset not in queue.due or offset in queue.reviving:
            yield False
            return
        version = queue.reviving[offset] = queue.in_flight[offset].handle_version
        try:
            yield True
        finally:
            del queue.reviving[offset]
        entry = queue.in_flight.get(offset)
        current = self._queues.get((topic, queue_id)) is queue
        if current and entry is not None and entry.handle_version == version:
            self._finish(queue, offset)

    # -- client acknowledgements -------------------------------------------------------------

    def ack(
        self,
        topic: ids.TopicName,
        queue_id: ids.QueueId,
        offset: ids.QueueOffset,
        handle_version: int,
    ) -> delivery.AckOutcome:
        """Mark a delivered message done if ``handle_version`` is its current one.

        An ack is accepted while the message is due but not yet redelivered (it avoids a
        duplicate). ``committed_offset`` advances when the acked offset closes a gap.
        """
        queue, outcome = self._match(topic, queue_id, offset, handle_version)
        if queue is not None:
            self._finish(queue, offset)
        return outcome

    def change_invisible(
        self,
        topic: ids.TopicName,
        queue_id: ids.QueueId,
        offset: ids.QueueOffset,
        handle_version: int,
        invisible_ms: int,
    ) -> delivery.ChangeResult:
        """Make a delivered message invisible for ``invisible_ms`` from now, with a new handle.

        The attempt number is unchanged; if the message expires again, its redelivery counts
        as the next attempt (a nack = a failed attempt). The old handle becomes STALE.
        """
        assert invisible_ms > 0, f"invisible_ms must be > 0, got {invisible_ms}"
        queue, outcome = self._match(topic, queue_id, offset, handle_version)
        if queue is None:
            return delivery.ChangeResult(outcome)
        previous = queue.in_flight[offset]
        queue.due.discard(offset)
        renewed = self._start(queue, offset, previous.attempt, previous.message_group, invisible_ms)
        return delivery.ChangeResult(delivery.AckOutcome.OK, renewed)

    # -- internals ---------------------------------------------------------------------------

    def _queue(self, topic: ids.TopicName, queue_id: ids.QueueId) -> _Queue:
        queue = self._queues.get((topic, queue_id))
        assert queue is not None, f"queue {topic}/{queue_id} is not open for {self.group}"
        return queue

    def _match(
        self, topic: ids.TopicName, queue_id: ids.QueueId, offset: int, handle_version: int
    ) -> tuple[_Queue | None, delivery.AckOutcome]:
        queue = self._queues.get((topic, queue_id))
        entry = None if queue is None else queue.in_flight.get(offset)
        if queue is None or entry is None:
            return None, delivery.AckOutcome.UNKNOWN
        if entry.handle_version != handle_version:
            return None, delivery.AckOutcome.STALE
        return queue, delivery.AckOutcome.OK

    def _advance_cursor(self, queue: _Queue, offset: int, *, needs_slot: bool) -> None:
        assert offset == queue.cursor, (
            f"{queue.topic}/{queue.queue_id}: offset {offset} is not the scan offset {queue.cursor}"
        )
        if queue.cursor - queue.window.committed >= self._settings.pop_span_max:
            raise errors.TooManyRequestsError(
                f"group {self.group}: {queue.topic}/{queue.queue_id} is "
                f"{self._settings.pop_span_max} messages past its committed offset "
                f"{queue.window.committed} (pop_span_max); ack or wait for redelivery"
            )
        if needs_slot and self._outstanding >= self._settings.inflight_messages_max:
            raise errors.TooManyRequestsError(
                f"group {self.group} has {self._outstanding} messages in flight "
                "(inflight_messages_max); ack some first"
            )
        queue.cursor += 1

    def _start(
        self, queue: _Queue, offset: int, attempt: int, group: str | None, invisible_ms: int
    ) -> delivery.InFlight:
        version = self._next_version
        self._next_version += 1
        entry = delivery.InFlight(
            topic=queue.topic,
            queue_id=queue.queue_id,
            queue_offset=ids.QueueOffset(offset),
            attempt=attempt,
            handle_version=version,
            popped_at_ms=self._clock.now_ms(),
            invisible_ms=invisible_ms,
            deadline_ms=self._clock.monotonic_ms() + invisible_ms,
            message_group=group,
        )
        if self._journal is not None:
            self._journal.checkpoint(self.group, entry)
        self._track(queue, entry)
        return entry

    def _track(self, queue: _Queue, entry: delivery.InFlight) -> None:
        offset = entry.queue_offset
        queue.in_flight[offset] = entry
        heapq.heappush(queue.heap, (entry.deadline_ms, entry.handle_version, offset))
        if len(queue.heap) > 2 * len(queue.in_flight) + _HEAP_SLACK:
            queue.heap = [
                (e.deadline_ms, e.handle_version, o)
                for o, e in queue.in_flight.items()
                if o not in queue.due
            ]
            heapq.heapify(queue.heap)

    def _finish(self, queue: _Queue, offset: int) -> None:
        entry = queue.in_flight.pop(offset)
        if self._journal is not None:
            self._journal.done(self.group, queue.topic, queue.queue_id, offset)
        queue.due.discard(offset)
        self._outstanding -= 1
        queue.window.mark(offset)
        if queue.order is not None and entry.message_group is not None:
            queue.order.release(offset)

    def _expire(self, queue: _Queue, now: int) -> None:
        heap = queue.heap
        while heap and heap[0][0] <= now:
            _deadline, version, offset = heapq.heappop(heap)
            entry = queue.in_flight.get(offset)
            if entry is not None and entry.handle_version == version:
                queue.due.add(offset)
