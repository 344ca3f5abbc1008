"""Priority messages (RocketMQ 5.4, RIP-80): which queue a priority goes to, and the order
in which a POP receive reads a PRIORITY topic's queues.

The layout is RocketMQ's (specs/priority.md): a message of priority ``p`` (an int ≥ 0) is
stored in queue ``min(p, write_queue_nums - 1)`` of its PRIORITY topic, so the topic's write
queue count is its number of levels and every value at or above the top level shares the top
queue (the client javadoc's "regarded as highest priority if exceeds N"). A receive reads the
queues from the highest id down (RocketMQ's default ``priorityOrderAsc=true``: a larger value
is served first), so a batch fills from the top non-empty queue; within one level messages
come in store order.

Beyond RocketMQ:

* a retried message keeps its priority: its retry copy goes to the queue of the same level in
  the group's retry topic of the PRIORITY topic (created with as many queues), and a receive
  reads, per level from the top down, that level's retry queue and then the topic's queue —
  RocketMQ puts every retry in one queue read last (apache/rocketmq#10350);
* aging, so low priorities cannot starve: once a group's receive passes over a topic have
  skipped its lower levels (each filled its batch before reading its last level) for
  ``aging_ms`` in a row (default 10 s), its next pass is *fair*: it reads the levels
  round-robin from a start level that moves up one level per fair pass. A level that holds
  messages therefore leads a pass at least once every ``levels`` x (``aging_ms`` + one pass)
  per group and broker, while a backlog the group drains to its last level never triggers
  one (RocketMQ's ``priority.factor`` instead makes a share of requests start at a random
  queue, and its default of 100 % starves low levels forever).

Invariants: ``queue_of`` is in ``0 .. write_queue_nums - 1``; ``PriorityOrder`` holds at most
``GROUPS_MAX`` (group, topic) entries (least recently used dropped first); time comes from the
caller (monotonic ms).
"""

from __future__ import annotations

import collections

from ariane.common import errors, ids

AGING_MS_DEFAULT = 10_000
"""Longest a group goes without a fair (round-robin) pass over a PRIORITY topic, ms."""

GROUPS_MAX = 4096
"""Most (group, topic) pairs whose last fair pass is remembered (LRU beyond)."""


def check_priority(priority: int | None) -> int:
    """The priority of a PRIORITY message, validated as RocketMQ's client does.

    Raises:
        BadRequestError: it is unset or negative (RocketMQ: ``checkArgument(priority >= 0)``).
    """
    if priority is None:
        raise errors.BadRequestError("a PRIORITY message needs its priority system property")
    if priority < 0:
        raise errors.BadRequestError(f"priority {priority} is negative; it must be 0 or more")
    return priority


def queue_of(priority: int, write_queue_nums: int) -> ids.QueueId:
    """The queue of ``priority`` in a topic of ``write_queue_nums`` queues:
    ``min(priority, write_queue_nums - 1)`` (RocketMQ ``SendMessageProcessor``)."""
    return ids.QueueId(max(0, min(priority, write_queue_nums - 1)))


class PriorityOrder:
    """The queue order of the receive passes over a PRIORITY topic, with aging.

    Args:
        aging_ms: the longest a (group, topic)'s passes skip lower levels before a fair pass,
            ms (> 0).
    """

    def __init__(self, aging_ms: int = AGING_MS_DEFAULT) -> None:
        assert aging_ms > 0, f"aging_ms must be > 0, got {aging_ms}"
        self._aging_ms = aging_ms
        # (group, topic) -> (monotonic ms since when every pass skipped lower levels, or None;
        # the level the next fair pass starts at)
        self._state: collections.OrderedDict[tuple[str, str], tuple[int | None, int]] = (
            collections.OrderedDict()
        )

    def levels(self, group: str, topic: str, count: int, now_ms: int) -> list[ids.QueueId]:
        """Queue ids ``0 .. count - 1`` in the order this pass reads them.

        Highest first; but once the group's passes over the topic have skipped lower levels
        (``passed``) for ``aging_ms`` in a row, one fair pass: round-robin from a start level
        that moves up by one per fair pass (0, 1, …), so a non-empty level leads a pass at
        least once every ``count`` fair passes. A fair pass restarts the clock.
        """
        key = (group, topic)
        skipping_since, start = self._state.get(key, (None, 0))
        fair = skipping_since is not None and now_ms - skipping_since >= self._aging_ms
        if fair:
            first = start % count
            self._put(key, (None, first + 1))
            return [ids.QueueId((first + i) % count) for i in range(count)]
        self._put(key, (skipping_since, start))
        return [ids.QueueId(q) for q in range(count - 1, -1, -1)]

    def passed(self, group: str, topic: str, *, skipped: bool, now_ms: int) -> None:
        """Record a pass: ``skipped`` when it filled its batch before reading its last level
        (lower levels may wait); a pass that read every level stops the aging clock."""
        key = (group, topic)
        skipping_since, start = self._state.get(key, (None, 0))
        if not skipped:
            skipping_since = None
        elif skipping_since is None:
            skipping_since = now_ms
        self._put(key, (skipping_since, start))

    def _put(self, key: tuple[str, str], value: tuple[int | None, int]) -> None:
        self._state[key] = value
        self._state.move_to_end(key)
        while len(self._state) > GROUPS_MAX:
            self._state.popitem(last=False)
