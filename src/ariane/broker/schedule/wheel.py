"""The in-memory timer wheel: which parked timer messages are due, and when.

RocketMQ 5's ``TimerWheel`` is a ring of per-second slots over a 2-day window backed by the
``TimerLog``; here the same role is a min-heap of (delivery time, timer-topic queue offset)
rebuilt from the timer log at start-up, plus a message-id index for RecallMessage. It is
bounded: at most ``capacity`` entries (the service stops reading the timer topic into it when
full, and the send path answers TOO_MANY_REQUESTS), so memory never grows with the backlog.

Invariants: an entry is in the heap and in ``_entries`` until ``take_due`` hands it out or
``cancel``/``remove`` removes it (a removed entry's heap item is skipped lazily, so the heap
holds at most twice ``capacity`` items before it is rebuilt); ``take_due(now)`` never returns an
entry whose delivery time is after ``now``. Pure: no I/O, no clock (the caller passes ``now_ms``).
"""

from __future__ import annotations

import dataclasses
import heapq


@dataclasses.dataclass(frozen=True, slots=True)
class WheelEntry:
    """A parked timer message.

    Attributes:
        delivery_ms: when it is due, ms since the epoch.
        queue_offset: its offset in the timer topic's queue (unique per entry).
        commit_log_offset: where its record starts in the CommitLog.
        size_bytes: its record size, bytes.
        message_id: its UNIQ_KEY.
    """

    delivery_ms: int
    queue_offset: int
    commit_log_offset: int
    size_bytes: int
    message_id: str


class TimerWheel:
    """Due-time order over at most ``capacity`` parked timer messages.

    Args:
        capacity: most entries held at once, a count (``timer_pending_max``).
    """

    def __init__(self, capacity: int) -> None:
        assert capacity > 0, "a wheel holds at least one entry"
        self.capacity = capacity
        self._heap: list[tuple[int, int]] = []
        self._entries: dict[int, WheelEntry] = {}
        self._by_id: dict[str, set[int]] = {}

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def full(self) -> bool:
        """Whether ``add`` would be refused."""
        return len(self._entries) >= self.capacity

    def add(self, entry: WheelEntry) -> bool:
        """Hold ``entry`` until it is due; ``False`` (nothing changed) when full or already held."""
        if self.full or entry.queue_offset in self._entries:
            return False
        self._entries[entry.queue_offset] = entry
        self._by_id.setdefault(entry.message_id, set()).add(entry.queue_offset)
        heapq.heappush(self._heap, (entry.delivery_ms, entry.queue_offset))
        return True

    def next_due_ms(self) -> int | None:
        """The earliest delivery time held, or ``None`` when empty."""
        self._drop_cancelled_head()
        return self._heap[0][0] if self._heap else None

    def take_due(self, now_ms: int, count_max: int) -> list[WheelEntry]:
        """Remove and return up to ``count_max`` entries due at ``now_ms``, earliest first."""
        taken: list[WheelEntry] = []
        while len(taken) < count_max:
            self._drop_cancelled_head()
            if not self._heap or self._heap[0][0] > now_ms:
                break
            _, offset = heapq.heappop(self._heap)
            taken.append(self._forget(offset))
        return taken

    def cancel(self, message_id: str, delivery_ms: int | None = None) -> list[WheelEntry]:
        """Remove the entries of ``message_id`` (only those due at ``delivery_ms`` when given).

        Returns:
            the removed entries (empty when none is held: delivered, recalled or unknown).
        """
        offsets = self._by_id.get(message_id, set())
        chosen = [
            o for o in offsets if delivery_ms is None or self._entries[o].delivery_ms == delivery_ms
        ]
        removed = [self._forget(o) for o in sorted(chosen)]
        self._bound_heap()
        return removed

    def remove(self, queue_offset: int) -> WheelEntry | None:
        """Remove the entry of timer-queue offset ``queue_offset`` (finished elsewhere: the
        progress a replica follows); ``None`` when it is not held."""
        if queue_offset not in self._entries:
            return None
        entry = self._forget(queue_offset)
        self._bound_heap()
        return entry

    def _bound_heap(self) -> None:
        if len(self._heap) > 2 * self.capacity:  # bound the lazily-skipped items
            self._heap = [(e.delivery_ms, e.queue_offset) for e in self._entries.values()]
            heapq.heapify(self._heap)

    def entries(self) -> list[WheelEntry]:
        """Every held entry, in queue-offset order (for compaction)."""
        return [self._entries[o] for o in sorted(self._entries)]

    def _forget(self, offset: int) -> WheelEntry:
        entry = self._entries.pop(offset)
        same_id = self._by_id[entry.message_id]
        same_id.discard(offset)
        if not same_id:
            del self._by_id[entry.message_id]
        return entry

    def _drop_cancelled_head(self) -> None:
        heap = self._heap
        while heap and heap[0][1] not in self._entries:
            heapq.heappop(heap)
