"""Queue locks of orderly classic consumers: ``LOCK_BATCH_MQ`` (41), ``UNLOCK_BATCH_MQ`` (42).

Mirrors RocketMQ's ``RebalanceLockManager``: a ``MessageOrderly`` push consumer locks each
queue it was allocated before consuming it and re-locks every 20 s; a lock is granted when the
queue is free, already held by the same client, or held by a client that has not re-locked for
``lock_expiry_ms`` (RocketMQ ``rebalanceLockMaxLiveTime``, 60 s), and refreshed on every grant;
only the holder unlocks. A consumer whose lock expired (SIGKILLed, partitioned) loses its queues
to the others after that time.

Bodies (JSON): ``{"consumerGroup","clientId","onlyThisBroker","mqSet":[{"brokerName",
"queueId","topic"}]}``; 41 answers ``{"lockOKMQSet":[...]}``; 42 may be oneway.
Invariants: at most ``locks_max`` locks are held (a lock beyond it is not granted, the client
retries at its next rebalance); used from the broker's one event loop only.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable, Mapping
from typing import Any

from ariane.broker.remoting import replies
from ariane.common import clock, errors
from ariane.remoting import command, fastjson

_log = logging.getLogger(__name__)

MQ = fastjson.MessageQueue

LOCK_EXPIRY_MS = 60_000
"""A lock not refreshed for this long is free, ms (RocketMQ ``rebalanceLockMaxLiveTime``)."""

LOCKS_MAX = 100_000
"""Most queue locks held at once."""


@dataclasses.dataclass(slots=True)
class _Lock:
    client_id: str
    refreshed_ms: int


class QueueLocks:
    """Which client of a group holds which queue.

    Args:
        time: the clock (expiry).
        lock_expiry_ms: how long an unrefreshed lock holds, ms.
        locks_max: the table bound.
    """

    def __init__(
        self,
        *,
        time: clock.Clock,
        lock_expiry_ms: int = LOCK_EXPIRY_MS,
        locks_max: int = LOCKS_MAX,
    ) -> None:
        self._clock = time
        self._expiry_ms = lock_expiry_ms
        self._locks_max = locks_max
        self._locks: dict[tuple[str, MQ], _Lock] = {}

    def try_lock(self, group: str, client_id: str, queues: Iterable[MQ]) -> list[MQ]:
        """Lock (or refresh) each queue that is free, ours or expired; returns those locked."""
        now_ms = self._clock.now_ms()
        granted: list[MQ] = []
        for queue in queues:
            held = self._locks.get((group, queue))
            if held is None:
                if len(self._locks) >= self._locks_max:
                    self._drop_expired(now_ms)
                if len(self._locks) >= self._locks_max:
                    continue
                self._locks[(group, queue)] = _Lock(client_id, now_ms)
            elif held.client_id == client_id or now_ms - held.refreshed_ms > self._expiry_ms:
                if held.client_id != client_id:
                    _log.info(
                        "lock of %s/%s moves from %s to %s", group, queue, held.client_id, client_id
                    )
                held.client_id, held.refreshed_ms = client_id, now_ms
            else:
                continue
            granted.append(queue)
        return granted

    def unlock(self, group: str, client_id: str, queues: Iterable[MQ]) -> None:
        """Release the queues ``client_id`` holds (others' locks are left alone)."""
        for queue in queues:
            held = self._locks.get((group, queue))
            if held is not None and held.client_id == client_id:
                del self._locks[(group, queue)]

    def _drop_expired(self, now_ms: int) -> None:
        for key in [k for k, v in self._locks.items() if now_ms - v.refreshed_ms > self._expiry_ms]:
            del self._locks[key]


class LockHandler:
    """Serves 41 and 42 over ``QueueLocks``.

    Args:
        locks: the lock table.
    """

    def __init__(self, locks: QueueLocks) -> None:
        self._locks = locks

    async def lock(self, request: command.RemotingCommand) -> command.RemotingCommand:
        """41: lock what can be locked; answer the locked queues."""
        try:
            group, client_id, queues = _lock_body(request.body)
        except errors.ArianeError as exc:
            return replies.error(request, exc)
        granted = self._locks.try_lock(group, client_id, queues)
        return replies.ok(request, body=fastjson.dumps({"lockOKMQSet": granted}))

    async def unlock(self, request: command.RemotingCommand) -> command.RemotingCommand | None:
        """42: release the client's locks (no answer when oneway)."""
        try:
            group, client_id, queues = _lock_body(request.body)
            self._locks.unlock(group, client_id, queues)
            response = replies.ok(request)
        except errors.ArianeError as exc:
            response = replies.error(request, exc)
        return None if request.is_oneway else response


def _lock_body(body: bytes) -> tuple[str, str, list[MQ]]:
    try:
        data = fastjson.loads(body)
    except fastjson.JsonError as exc:
        raise errors.BadRequestError(f"lock body is no JSON: {exc}") from None
    if not isinstance(data, Mapping):
        raise errors.BadRequestError("lock body is no JSON object")
    group, client_id = data.get("consumerGroup"), data.get("clientId")
    if not isinstance(group, str) or not group or not isinstance(client_id, str) or not client_id:
        raise errors.BadRequestError("lock body needs consumerGroup and clientId")
    raw = data.get("mqSet")
    return group, client_id, [_queue(q) for q in (raw if isinstance(raw, list) else [])]


def _queue(raw: Any) -> MQ:
    if isinstance(raw, MQ):
        return raw
    if isinstance(raw, Mapping):
        topic, broker, queue_id = raw.get("topic"), raw.get("brokerName"), raw.get("queueId")
        if isinstance(topic, str) and isinstance(broker, str) and isinstance(queue_id, int):
            return MQ(topic=topic, broker_name=broker, queue_id=queue_id)
    raise errors.BadRequestError(f"mqSet entry {str(raw)[:80]!r} is no MessageQueue")
