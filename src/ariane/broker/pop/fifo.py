"""FIFO delivery order of one queue for an orderly consumer group (RocketMQ 5 FIFO messages).

Rule: within a queue, a message of message group G may be delivered only when every earlier
message of G in that queue is done (acked, or forwarded to the DLQ). So while a message of G is
in flight — including while it waits for redelivery after its invisible time ran out — no later
message of G is delivered; messages of other groups are not held up.

``FifoOrder`` is the per-queue policy object that ``broker.pop`` owns for orderly groups. It
tracks, per message group, the *outstanding* offsets (seen by the scanner and not yet done) in
offset order. Invariants:

* only the head (lowest offset) of a group can be in flight;
* every other outstanding offset of a group is *held*: seen, not delivered;
* a held head is *ready*: deliverable now (``ready()`` lists those).

Messages without a message group have no order to keep and are not tracked. Pure, no I/O.
"""

from __future__ import annotations

import collections


class FifoOrder:
    """Outstanding offsets of each message group in one queue."""

    def __init__(self) -> None:
        self._groups: dict[str, collections.deque[int]] = {}
        self._group_of: dict[int, str] = {}
        self._ready: set[int] = set()

    def __len__(self) -> int:
        """Number of outstanding (in-flight or held) tracked offsets."""
        return len(self._group_of)

    def may_deliver_new(self, group: str | None) -> bool:
        """Whether a newly scanned message of ``group`` may be delivered right away.

        True for messages without a group and for groups with nothing outstanding.
        """
        return group is None or group not in self._groups

    def add(self, offset: int, group: str, *, delivered: bool) -> None:
        """Track a newly scanned offset of ``group``: in flight (``delivered``) or held.

        Offsets must be added in increasing order (the scanner's order).
        """
        queue = self._groups.setdefault(group, collections.deque())
        assert not queue or queue[-1] < offset, f"offset {offset} added out of order"
        assert not delivered or not queue, f"offset {offset} delivered behind its group"
        queue.append(offset)
        self._group_of[offset] = group
        if not delivered and len(queue) == 1:
            self._ready.add(offset)

    def is_ready(self, offset: int) -> bool:
        """Whether the held ``offset`` heads its group and may be delivered now."""
        return offset in self._ready

    def deliver_held(self, offset: int) -> None:
        """Record that a ready held offset is now in flight."""
        assert offset in self._ready, f"offset {offset} is not ready for delivery"
        self._ready.discard(offset)

    def release(self, offset: int) -> int | None:
        """Record that ``offset`` (its group's head) is done; its group's next offset is ready.

        Returns:
            the offset that became ready, or ``None`` if the group has nothing more.
        """
        group = self._group_of.pop(offset)
        queue = self._groups[group]
        assert queue[0] == offset, f"offset {offset} released before {queue[0]} of its group"
        queue.popleft()
        self._ready.discard(offset)
        if not queue:
            del self._groups[group]
            return None
        self._ready.add(queue[0])
        return queue[0]

    def drop_below(self, offset: int) -> None:
        """Forget every offset below ``offset`` (they are done, e.g. deleted by retention)."""
        for group in list(self._groups):
            queue = self._groups[group]
            dropped = False
            while queue and queue[0] < offset:
                head = queue.popleft()
                del self._group_of[head]
                self._ready.discard(head)
                dropped = True
            if not queue:
                del self._groups[group]
            elif dropped:
                self._ready.add(queue[0])

    def ready(self) -> list[tuple[int, str]]:
        """Held offsets that may be delivered now, with their group, in offset order."""
        return sorted((offset, self._group_of[offset]) for offset in self._ready)

    def group_of(self, offset: int) -> str | None:
        """The message group of a tracked offset, or ``None``."""
        return self._group_of.get(offset)

    def clear(self) -> None:
        """Forget everything (queue reset)."""
        self._groups.clear()
        self._group_of.clear()
        self._ready.clear()
