"""Queue allocation strategies: which queues of a topic one member of a consumer group gets.

Pure functions over a queue list and a member (client id) list, mirroring RocketMQ's
``AllocateMessageQueueStrategy`` implementations so that a broker allocating on a client's
behalf (RocketMQ's ``QueryAssignmentProcessor``) and a client allocating for itself (the classic
``RebalanceImpl``) agree queue for queue:

* ``AVG`` (``AllocateMessageQueueAveragely``, the default): contiguous blocks; the first
  ``len(queues) % len(members)`` members get one queue more.
* ``AVG_BY_CIRCLE`` (``AllocateMessageQueueAveragelyByCircle``): round robin, queue ``i`` to
  member ``i % len(members)``.
* ``CONSISTENT_HASH`` (``AllocateMessageQueueConsistentHash``): a ring of
  ``CONSISTENT_HASH_VIRTUAL_NODES`` (10) virtual nodes per member keyed ``"<clientId>-<i>"``, each
  queue routed by the key ``"MessageQueue [topic=T, brokerName=B, queueId=Q]"`` (Java's
  ``MessageQueue.toString``) to the first virtual node at or after its hash, wrapping round;
  the hash is the first 4 bytes of the key's MD5, big-endian, unsigned (RocketMQ's ``MD5Hash``).
  A virtual node whose hash collides replaces the earlier one, as ``TreeMap.put`` does.
* ``CONFIG`` (``AllocateMessageQueueByConfig``): a fixed list of queues, whoever asks; here
  restricted to the queues that exist (RocketMQ returns the list unchecked).

Invariants: ``allocate`` sorts the queues (topic, broker name, queue id: ``MessageQueue``'s
order, RocketMQ's ``compareTo``) and the member ids (by code point; RocketMQ compares UTF-16 code
units, which agree on the ASCII that client ids and names are made of) before allocating, so the
answer does not depend on the order the caller found them in; for every strategy but CONFIG each
queue goes to exactly one member; a member not in the list gets nothing.
"""

from __future__ import annotations

import bisect
import enum
import hashlib
from collections.abc import Collection, Sequence
from typing import TypeVar

from ariane.common import route

Q = TypeVar("Q")

CONSISTENT_HASH_VIRTUAL_NODES = 10
"""Virtual nodes per member on the hash ring (``AllocateMessageQueueConsistentHash()``'s 10)."""


class AllocateStrategy(enum.Enum):
    """The strategies, named as RocketMQ's ``getName()`` returns them."""

    AVG = "AVG"
    AVG_BY_CIRCLE = "AVG_BY_CIRCLE"
    CONSISTENT_HASH = "CONSISTENT_HASH"
    CONFIG = "CONFIG"


DEFAULT_STRATEGY = AllocateStrategy.AVG
"""RocketMQ's default (``DefaultMQPushConsumer.allocateMessageQueueStrategy``)."""


def allocate(
    strategy: AllocateStrategy,
    queues: Collection[route.MessageQueue],
    members: Collection[str],
    member: str,
    *,
    config_queues: Collection[route.MessageQueue] = (),
) -> list[route.MessageQueue]:
    """The queues ``member`` gets under ``strategy``, in queue order.

    Args:
        strategy: which RocketMQ strategy to follow.
        queues: every queue to share (duplicates ignored).
        members: every member's client id (duplicates ignored).
        member: the client id asking.
        config_queues: CONFIG's fixed list (ignored by the other strategies).

    Returns:
        The member's queues, sorted; empty when ``member`` is not in ``members`` or there is
        no queue.
    """
    queue_list = sorted(set(queues))
    member_list = sorted(set(members))
    if not queue_list or member not in member_list:
        return []
    if strategy is AllocateStrategy.AVG:
        return averagely(queue_list, member_list, member)
    if strategy is AllocateStrategy.AVG_BY_CIRCLE:
        return averagely_by_circle(queue_list, member_list, member)
    if strategy is AllocateStrategy.CONSISTENT_HASH:
        return consistent_hash(queue_list, member_list, member)
    return by_config(queue_list, config_queues)


def averagely(queues: Sequence[Q], members: Sequence[str], member: str) -> list[Q]:
    """``AllocateMessageQueueAveragely`` over already sorted, duplicate-free lists.

    With 10 queues and 4 members the shares are 3, 3, 2, 2 queues (RocketMQ's own test).
    """
    if member not in members or not queues:
        return []
    index = members.index(member)
    count, size = len(queues), len(members)
    mod = count % size
    if count <= size:
        average = 1
    else:
        average = count // size + 1 if mod > 0 and index < mod else count // size
    start = index * average if mod > 0 and index < mod else index * average + mod
    span = min(average, count - start)
    return [queues[(start + i) % count] for i in range(span)]


def averagely_by_circle(queues: Sequence[Q], members: Sequence[str], member: str) -> list[Q]:
    """``AllocateMessageQueueAveragelyByCircle``: queue ``i`` goes to member ``i % n``.

    With 10 queues and 4 members the first member gets queues 0, 4, 8 (RocketMQ's own test).
    """
    if member not in members:
        return []
    index = members.index(member)
    return [q for i, q in enumerate(queues) if i % len(members) == index]


def ring_hash(key: str) -> int:
    """RocketMQ ``ConsistentHashRouter.MD5Hash``: the first 4 MD5 bytes of the UTF-8 key,
    big-endian, as an unsigned number in ``0 .. 2**32 - 1``."""
    return int.from_bytes(hashlib.md5(key.encode(), usedforsecurity=False).digest()[:4], "big")


def queue_key(queue: route.MessageQueue) -> str:
    """Java's ``MessageQueue.toString()``, the key a queue is hashed by."""
    return (
        f"MessageQueue [topic={queue.topic}, brokerName={queue.broker_name}, "
        f"queueId={queue.queue_id}]"
    )


def consistent_hash(
    queues: Sequence[route.MessageQueue],
    members: Sequence[str],
    member: str,
    *,
    virtual_nodes: int = CONSISTENT_HASH_VIRTUAL_NODES,
) -> list[route.MessageQueue]:
    """``AllocateMessageQueueConsistentHash``: each queue to the member owning the first
    virtual node at or after the queue's hash on the ring (wrapping round)."""
    assert virtual_nodes >= 1, "a ring needs at least one virtual node per member"
    if member not in members:
        return []
    ring: dict[int, str] = {}
    for node in members:  # in list order: a later colliding node replaces an earlier one
        for replica in range(virtual_nodes):
            ring[ring_hash(f"{node}-{replica}")] = node
    points = sorted(ring)
    mine = []
    for queue in queues:
        at = bisect.bisect_left(points, ring_hash(queue_key(queue)))
        if ring[points[at % len(points)]] == member:
            mine.append(queue)
    return mine


def by_config(
    queues: Sequence[route.MessageQueue], configured: Collection[route.MessageQueue]
) -> list[route.MessageQueue]:
    """``AllocateMessageQueueByConfig``: the configured queues that exist, in queue order."""
    wanted = set(configured)
    return [q for q in queues if q in wanted]
