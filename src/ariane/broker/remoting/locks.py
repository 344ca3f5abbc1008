"""Queue locks of orderly classic consumers: ``LOCK_BATCH_MQ`` (41), ``UNLOCK_BATCH_MQ`` (42).

The wire adapter over the broker's one lock table, ``tables.queue_locks.RebalanceLockManager``
(RocketMQ ``RebalanceLockManager``), which gRPC clients lock in too: a ``MessageOrderly`` push
consumer locks each queue it was allocated before consuming it and re-locks every 20 s; a lock
is granted when the queue is free, already held by the same client, or held by a client that
has not re-locked for more than 60 s (``rebalanceLockMaxLiveTime``); only the holder unlocks.
A classic consumer's locks also go when it leaves its group (``clients.ClassicClientTable``).

Bodies (JSON): ``{"consumerGroup","clientId","onlyThisBroker","mqSet":[{"brokerName",
"queueId","topic"}]}``; 41 answers ``{"lockOKMQSet":[...]}`` (in request order); 42 may be
oneway. Used from the broker's one event loop only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ariane.broker.remoting import replies
from ariane.broker.tables import queue_locks
from ariane.common import errors, ids, route
from ariane.remoting import command, fastjson

MQ = fastjson.MessageQueue


class LockHandler:
    """Serves 41 and 42 over the broker's lock table.

    Args:
        locks: the lock table (``BrokerServer.queue_locks``).
    """

    def __init__(self, locks: queue_locks.RebalanceLockManager) -> None:
        self._locks = locks

    async def lock(self, request: command.RemotingCommand) -> command.RemotingCommand:
        """41: lock what can be locked; answer the locked queues."""
        try:
            group, client_id, queues = _lock_body(request.body)
        except errors.ArianeError as exc:
            return replies.error(request, exc)
        granted = self._locks.lock_batch(group, [_route(q) for q in queues], client_id)
        answer = [q for q in queues if _route(q) in granted]
        return replies.ok(request, body=fastjson.dumps({"lockOKMQSet": answer}))

    async def unlock(self, request: command.RemotingCommand) -> command.RemotingCommand | None:
        """42: release the client's locks (no answer when oneway)."""
        try:
            group, client_id, queues = _lock_body(request.body)
            self._locks.unlock_batch(group, [_route(q) for q in queues], client_id)
            response = replies.ok(request)
        except errors.ArianeError as exc:
            response = replies.error(request, exc)
        return None if request.is_oneway else response


def _lock_body(body: bytes) -> tuple[ids.GroupName, ids.ClientId, list[MQ]]:
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
    queues = [_queue(q) for q in (raw if isinstance(raw, list) else [])]
    return ids.GroupName(group), ids.ClientId(client_id), queues


def _route(queue: MQ) -> route.MessageQueue:
    return route.MessageQueue(
        topic=ids.TopicName(queue.topic),
        broker_name=ids.BrokerName(queue.broker_name),
        queue_id=ids.QueueId(queue.queue_id),
    )


def _queue(raw: Any) -> MQ:
    if isinstance(raw, MQ):
        return raw
    if isinstance(raw, Mapping):
        topic, broker, queue_id = raw.get("topic"), raw.get("brokerName"), raw.get("queueId")
        if isinstance(topic, str) and isinstance(broker, str) and isinstance(queue_id, int):
            return MQ(topic=topic, broker_name=broker, queue_id=queue_id)
    raise errors.BadRequestError(f"mqSet entry {str(raw)[:80]!r} is no MessageQueue")
