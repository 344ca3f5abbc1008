"""Queue locks of orderly consumers (RocketMQ ``RebalanceLockManager``, ``lockBatchMQ``).

An orderly (FIFO) consumer of the classic protocol locks each queue it was allotted on the
queue's master before consuming it, so a queue is consumed by one client of a group at a time
even while two clients' views of the allocation disagree (``LOCK_BATCH_MQ`` /
``UNLOCK_BATCH_MQ``, ``ConsumeMessageOrderlyService``). Rules, as RocketMQ's:

* a lock belongs to one client id of one group and lives ``expiry_ms`` (60 s,
  ``rocketmq.broker.rebalance.lockMaxLiveTime``) from when it was last taken or renewed; it is
  expired only when *more* than ``expiry_ms`` passed (``now - last > expiry``), so at exactly
  60 s it still holds;
* locking a queue the client already holds renews it; a queue held by another client is not
  granted until that lock expired, then the new client takes it over;
* only the holder unlocks; an unlock by anyone else changes nothing;
* batch lock and unlock answer the set of queues they granted or released;
* all locks of a client go when the client goes (``release_client``: NotifyClientTermination,
  expiry, channel close; the consumer registry calls it) — RocketMQ leaves them to expire.

Invariants: ``_holders`` and ``_by_client`` describe the same locks; at most ``locks_max``
locks exist (expired ones are purged before a new lock is refused). Protocol-neutral; the clock
is injected.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from ariane.common import clock, ids, route

LOCK_EXPIRY_MS = 60_000
"""Life of a lock since it was taken or renewed (``lockMaxLiveTime`` = 60 s)."""

LOCKS_MAX = 1_000_000
"""Most locks held at once over all groups."""

_Key = tuple[ids.GroupName, route.MessageQueue]


@dataclasses.dataclass(slots=True)
class _Lock:
    client_id: ids.ClientId
    last_update_ms: int


class RebalanceLockManager:
    """The queue lock table of one broker.

    Args:
        time: the clock (monotonic ms) locks age by.
        expiry_ms: life of a lock since it was last taken or renewed.
        locks_max: most locks held at once.
    """

    def __init__(
        self, *, time: clock.Clock, expiry_ms: int = LOCK_EXPIRY_MS, locks_max: int = LOCKS_MAX
    ) -> None:
        assert expiry_ms > 0 and locks_max > 0, "a lock table needs a life and a bound"
        self._clock = time
        self._expiry_ms = expiry_ms
        self._locks_max = locks_max
        self._holders: dict[_Key, _Lock] = {}
        self._by_client: dict[ids.ClientId, set[_Key]] = {}

    def __len__(self) -> int:
        return len(self._holders)

    def holder(self, group: ids.GroupName, queue: route.MessageQueue) -> ids.ClientId | None:
        """The client holding an unexpired lock on ``queue`` for ``group``, or ``None``."""
        lock = self._holders.get((group, queue))
        if lock is None or self._expired(lock, self._clock.monotonic_ms()):
            return None
        return lock.client_id

    def is_locked(
        self, group: ids.GroupName, queue: route.MessageQueue, client_id: ids.ClientId
    ) -> bool:
        """Whether ``client_id`` holds an unexpired lock on ``queue`` (RocketMQ ``isLocked``)."""
        return self.holder(group, queue) == client_id

    def lock_batch(
        self,
        group: ids.GroupName,
        queues: Iterable[route.MessageQueue],
        client_id: ids.ClientId,
    ) -> set[route.MessageQueue]:
        """Lock or renew each queue for ``client_id`` (RocketMQ ``tryLockBatch``).

        Returns:
            The queues ``client_id`` holds afterwards among ``queues``: those it held (renewed),
            those that were free or whose lock had expired (taken). A queue held by another
            client's live lock, or beyond ``locks_max``, is not in it.
        """
        now_ms = self._clock.monotonic_ms()
        granted: set[route.MessageQueue] = set()
        for queue in queues:
            if self._take(group, queue, client_id, now_ms):
                granted.add(queue)
        return granted

    def unlock_batch(
        self,
        group: ids.GroupName,
        queues: Iterable[route.MessageQueue],
        client_id: ids.ClientId,
    ) -> set[route.MessageQueue]:
        """Release the queues ``client_id`` holds (RocketMQ ``unlockBatch``); a lock of another
        client stays. Returns the queues released."""
        released: set[route.MessageQueue] = set()
        for queue in queues:
            key = (group, queue)
            lock = self._holders.get(key)
            if lock is not None and lock.client_id == client_id:
                self._drop(key, lock)
                released.add(queue)
        return released

    def release_client(self, client_id: ids.ClientId, group: ids.GroupName | None = None) -> int:
        """Drop every lock of ``client_id`` (of ``group`` only, when given); returns how many."""
        keys = [k for k in self._by_client.get(client_id, ()) if group is None or k[0] == group]
        for key in keys:
            self._drop(key, self._holders[key])
        return len(keys)

    def purge_expired(self) -> int:
        """Drop expired locks (they grant nothing already; this frees their room)."""
        now_ms = self._clock.monotonic_ms()
        stale = [(k, lock) for k, lock in self._holders.items() if self._expired(lock, now_ms)]
        for key, lock in stale:
            self._drop(key, lock)
        return len(stale)

    def _take(
        self,
        group: ids.GroupName,
        queue: route.MessageQueue,
        client_id: ids.ClientId,
        now_ms: int,
    ) -> bool:
        key = (group, queue)
        lock = self._holders.get(key)
        if lock is not None and lock.client_id == client_id:
            lock.last_update_ms = now_ms  # renewal, expired or not: nobody took it meanwhile
            return True
        if lock is not None and not self._expired(lock, now_ms):
            return False
        if lock is not None:
            self._drop(key, lock)  # an expired lock of another client: taken over
        elif len(self._holders) >= self._locks_max and not self.purge_expired():
            return False
        self._holders[key] = _Lock(client_id, now_ms)
        self._by_client.setdefault(client_id, set()).add(key)
        return True

    def _drop(self, key: _Key, lock: _Lock) -> None:
        del self._holders[key]
        keys = self._by_client[lock.client_id]
        keys.discard(key)
        if not keys:
            del self._by_client[lock.client_id]

    def _expired(self, lock: _Lock, now_ms: int) -> bool:
        return now_ms - lock.last_update_ms > self._expiry_ms
