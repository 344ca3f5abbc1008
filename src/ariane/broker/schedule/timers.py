"""``TimerState``: the timer messages one broker holds parked, and their file.

It owns the bounded ``wheel.TimerWheel``, the timer log (``timer_log``), the cursor (the next
``rmq_sys_wheel_timer`` queue offset to read into the wheel) and the offsets at or past the
cursor that a followed progress record finished already (``done_ahead``: a replica may follow
its master's progress beyond what its own wheel has read; those are skipped when read). The
log records every step (ENQUEUED, then DELIVERED or RECALLED); replaying it at start-up
rebuilds the wheel, the cursor and ``done_ahead``.

Invariants: ``done_ahead`` holds only offsets at or past the cursor (``enqueue`` drops each one
it reads past); an offset finished once is never put back into the wheel by ``finish`` or
``enqueue``; compaction keeps the cursor, the live entries and ``done_ahead``, nothing else.
"""

from __future__ import annotations

import logging
import pathlib

from ariane.broker.schedule import timer_codec, timer_log, wheel
from ariane.common import ids, message, topics
from ariane.store import message_store

_log = logging.getLogger(__name__)

K = timer_codec.Kind
P = message.Property

QUEUE = ids.QueueId(0)
"""The one queue of ``rmq_sys_wheel_timer``."""


class TimerState:
    """The parked timer messages of one broker (RocketMQ 5 ``TimerWheel`` + ``TimerLog``).

    Args:
        root: the store root (``timer/timerlog`` under it).
        capacity: most entries in the wheel, a count (``timer_pending_max``).

    Raises:
        OSError: the timer log cannot be opened.
    """

    def __init__(self, root: pathlib.Path, capacity: int) -> None:
        self.wheel = wheel.TimerWheel(capacity)
        self.done_ahead: set[int] = set()
        self.log, records = timer_log.TimerLog.open(root)
        self.cursor = self._replay(records)

    def _replay(self, records: list[timer_codec.TimerRecord]) -> ids.QueueOffset:
        live: dict[int, timer_codec.TimerRecord] = {}
        finished_unread: set[int] = set()
        cursor = 0
        for record in records:
            if record.kind is K.CURSOR:
                cursor = max(cursor, record.queue_offset)
            elif record.kind is K.ENQUEUED:
                live[record.queue_offset] = record
                cursor = max(cursor, record.queue_offset + 1)
            elif live.pop(record.queue_offset, None) is None:
                finished_unread.add(record.queue_offset)
        for offset in sorted(live):
            r = live[offset]
            entry = wheel.WheelEntry(
                r.delivery_ms, offset, r.commit_log_offset, r.size_bytes, r.message_id
            )
            if not self.wheel.add(entry):  # a smaller wheel than before: read the rest again
                cursor = offset
                break
        self.done_ahead = {o for o in finished_unread if o >= cursor}
        return ids.QueueOffset(cursor)

    def enqueue(
        self, store: message_store.MessageStore, *, batch_max: int, read_bytes_max: int
    ) -> int:
        """Read the timer topic from the cursor into the wheel while it has room, skipping
        what ``done_ahead`` holds. Mirrors RocketMQ's ``TimerEnqueueGetService``.

        Returns:
            how many entries were added.
        """
        added: list[timer_codec.TimerRecord] = []
        while not self.wheel.full:
            room = self.wheel.capacity - len(self.wheel)
            result = store.get_messages(
                topics.TIMER_TOPIC,
                QUEUE,
                self.cursor,
                max_count=min(room, batch_max),
                max_bytes=read_bytes_max,
            )
            for stored in result.messages:
                if stored.queue_offset in self.done_ahead:
                    self.done_ahead.discard(stored.queue_offset)
                    continue
                entry = _wheel_entry(stored)
                if entry is not None and self.wheel.add(entry):
                    added.append(record(K.ENQUEUED, entry))
            if result.next_begin_offset <= self.cursor:
                break
            self.cursor = result.next_begin_offset
            if not result.messages:
                break
        if added:
            self.log.append(added)
        return len(added)

    def finish(self, queue_offset: int, kind: timer_codec.Kind) -> timer_codec.TimerRecord | None:
        """Mark the timer message at ``queue_offset`` DELIVERED or RECALLED elsewhere (a
        followed progress record); the record to log, ``None`` if it was finished before."""
        entry = self.wheel.remove(queue_offset)
        if entry is not None:
            return record(kind, entry)
        if queue_offset < self.cursor or queue_offset in self.done_ahead:
            return None
        if len(self.done_ahead) >= self.wheel.capacity:
            _log.warning(
                "schedule: %d timer messages finished ahead of the cursor %d (a master with "
                "a larger wheel)",
                len(self.done_ahead),
                self.cursor,
            )
        self.done_ahead.add(queue_offset)
        return timer_codec.TimerRecord(kind, 0, queue_offset)

    def compact(self) -> None:
        """Rewrite the log with the cursor, the live entries and ``done_ahead`` only."""
        records = [timer_codec.TimerRecord(K.CURSOR, 0, self.cursor)]
        records += [record(K.ENQUEUED, e) for e in self.wheel.entries()]
        records += [timer_codec.TimerRecord(K.DELIVERED, 0, o) for o in sorted(self.done_ahead)]
        self.log.rewrite(records)
        _log.info("timer log compacted to %d bytes", self.log.size_bytes)

    def reset(self, cursor: ids.QueueOffset) -> None:
        """Forget every entry and read the timer topic again from ``cursor``.

        Raises:
            OSError: the log cannot be rewritten (the old one stays).
        """
        self.log.rewrite([timer_codec.TimerRecord(K.CURSOR, 0, cursor)])
        self.wheel = wheel.TimerWheel(self.wheel.capacity)
        self.done_ahead = set()
        self.cursor = cursor


def _wheel_entry(stored: message.StoredMessage) -> wheel.WheelEntry | None:
    raw = stored.properties.get(P.TIMER_DELIVER_MS, "")
    if not raw.isdigit():
        _log.error("timer message at %d has no TIMER_DELIVER_MS", stored.commit_log_offset)
        return None
    return wheel.WheelEntry(
        delivery_ms=int(raw),
        queue_offset=stored.queue_offset,
        commit_log_offset=stored.commit_log_offset,
        size_bytes=stored.store_size_bytes,
        message_id=message.message_id_of(stored),
    )


def record(kind: timer_codec.Kind, entry: wheel.WheelEntry) -> timer_codec.TimerRecord:
    """The timer-log record saying ``kind`` of ``entry``."""
    return timer_codec.TimerRecord(
        kind,
        entry.delivery_ms,
        entry.queue_offset,
        entry.commit_log_offset,
        entry.size_bytes,
        entry.message_id,
    )
