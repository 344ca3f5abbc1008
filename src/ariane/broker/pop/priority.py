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
* aging, so low priorities cannot starve: when a group has not had a *fair* pass over a topic
  for ``aging_ms`` (default 10 s), its next receive pass reads the levels round-robin from a
  rotating start instead of from the top. Under any backlog every level is therefore read at
  least once per ``aging_ms`` per group and broker (RocketMQ's ``priority.factor`` instead
  makes a share of requests random, and its default of 100 % starves low levels forever).

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
    """The queue order of one receive pass over a PRIORITY topic, with aging.

    Args:
        aging_ms: the longest a (group, topic) goes without a fair pass, ms (> 0).
    """

    def __init__(self, aging_ms: int = AGING_MS_DEFAULT) -> None:
        assert aging_ms > 0, f"aging_ms must be > 0, got {aging_ms}"
        self._aging_ms = aging_ms
        # (group, topic) -> (monotonic ms of the last fair pass, level the next one starts at)
        self._fair: collections.OrderedDict[tuple[str, str], tuple[int, int]] = (
            collections.OrderedDict()
        )

    def levels(self, group: str, topic: str, count: int, now_ms: int) -> list[ids.QueueId]:
        """Queue ids ``0 .. count - 1`` in the order this pass reads them.

        Highest first; but when the group's last fair pass over the topic is ``aging_ms`` or
        more ago (a pair seen for the first time starts its clock at ``now_ms``), a fair pass:
        round-robin from a start level that moves up by one per fair pass (0, 1, …), so a
        non-empty level leads a pass at least once every ``count * aging_ms``.
        """
        key = (group, topic)
        last_ms, start = self._fair.get(key, (now_ms, 0))
        fair = now_ms - last_ms >= self._aging_ms
        if fair:
            first = start % count
            self._fair[key] = (now_ms, first + 1)
        else:
            self._fair[key] = (last_ms, start)
        self._fair.move_to_end(key)
        while len(self._fair) > GROUPS_MAX:
            self._fair.popitem(last=False)
        if not fair:
            return [ids.QueueId(q) for q in range(count - 1, -1, -1)]
        return [ids.QueueId((first + i) % count) for i in range(count)]
