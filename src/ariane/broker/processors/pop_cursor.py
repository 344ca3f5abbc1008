"""The scan cursor of a POP group on one queue, and the move of shared ``%RETRY%`` copies.

Two pieces of the consume path (``consume.ConsumeProcessor``) that read a queue from a
group's scan cursor:

* ``read_at_cursor``: up to a budget of messages from the cursor, moving the cursor over a
  retention gap (OFFSET_TOO_SMALL / OFFSET_FOUND_NULL) or back from beyond the queue's end
  (OFFSET_OVERFLOW_BADLY), as RocketMQ's ``PopMessageProcessor`` corrects its start offset;
* ``SharedRetryMover``: copies a concurrent group still has in the shared ``%RETRY%<group>``
  (stored before per-topic POP retry topics, or by a classic send-back) are written to the
  per-topic retry topic of their ``RETRY_TOPIC`` (RocketMQ 5's
  ``retrieveMessageFromPopRetryTopicV1`` plays the same upgrade role).

Invariants: a copy is stored in its per-topic retry topic before the shared one is marked done
(a crash in between duplicates it, never loses it); one pass moves at most
``SHARED_RETRY_MOVES_MAX`` copies; time and offsets come from the caller's group state.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from ariane.broker.pop import group_state as pop
from ariane.broker.pop import service as pop_service_mod
from ariane.broker.processors import retry
from ariane.broker.tables import subscriptions, topic_config
from ariane.common import ids, message, topics
from ariane.store import message_store, queue_read
from ariane.store import results as store_results

_log = logging.getLogger(__name__)
P = message.Property
GMS = message_store.GetMessageStatus

SHARED_RETRY_MOVES_MAX = 64
"""Most copies of the shared ``%RETRY%<group>`` one receive pass moves to per-topic retry
topics, a count (bounds the extra work of a receive; the rest move on later passes)."""


def read_at_cursor(
    store: message_store.MessageStore,
    state: pop.GroupPopState,
    topic: ids.TopicName,
    queue_id: ids.QueueId,
    budget: int,
    prefilter: queue_read.TagFilter | None,
    *,
    max_bytes: int,
) -> tuple[ids.QueueOffset, store_results.GetMessageResult] | None:
    """Up to ``budget`` messages (at most ``max_bytes`` bytes) from the group's scan cursor of
    a queue, with the cursor offset; ``None`` when there is nothing to scan there now (no
    budget, or the cursor was moved over a retention gap or back from beyond the queue's
    end)."""
    if budget <= 0:
        return None
    start = state.scan_offset(topic, queue_id)
    result = store.get_messages(
        topic, queue_id, start, max_count=budget, max_bytes=max_bytes, tag_filter=prefilter
    )
    if result.status is GMS.OFFSET_TOO_SMALL or result.status is GMS.OFFSET_FOUND_NULL:
        state.skip_to(topic, queue_id, result.next_begin_offset)
        return None
    if result.status is GMS.OFFSET_OVERFLOW_BADLY:
        _log.warning(
            "%s/%d: offset %d beyond max %d; restarting the group there",
            topic,
            queue_id,
            start,
            result.max_offset,
        )
        state.reset_queue(topic, queue_id, result.max_offset)
        return None
    return start, result


class SharedRetryMover:
    """Moves a concurrent group's copies out of the shared ``%RETRY%<group>``.

    Args:
        pop_service: opens and commits the group's cursor on the shared topic.
        store: where the shared copies are read.
        topic_table: finds the shared topic.
        retrier: writes each copy to its per-topic retry topic (``move_to_pop_retry``).
        max_bytes: most bytes one read returns (the receive's ``message_bytes_max``).
    """

    def __init__(
        self,
        *,
        pop_service: pop_service_mod.PopService,
        store: message_store.MessageStore,
        topic_table: topic_config.TopicConfigManager,
        retrier: retry.RetryProcessor,
        max_bytes: int,
    ) -> None:
        self._pop = pop_service
        self._store = store
        self._topics = topic_table
        self._retry = retrier
        self._max_bytes = max_bytes

    def shared_topic(
        self, group: subscriptions.SubscriptionGroupConfig
    ) -> topic_config.TopicConfig | None:
        """The group's readable shared ``%RETRY%<group>``, or ``None`` (none, or an orderly
        group: those have no retry topic)."""
        shared = self._topics.get(topics.retry_topic(group.group))
        if group.consume_orderly or shared is None or not shared.readable:
            return None
        return shared

    async def move(
        self,
        state: pop.GroupPopState,
        group: subscriptions.SubscriptionGroupConfig,
        redeliver_due: Callable[[ids.TopicName], Awaitable[None]],
    ) -> None:
        """Move up to ``SHARED_RETRY_MOVES_MAX`` copies of the shared topic to the per-topic
        retry topics of their ``RETRY_TOPIC`` and mark them done there.

        ``redeliver_due(shared_topic)`` first handles shared-topic deliveries restored in flight
        from before a restart (they expire, then become per-topic copies). A copy without
        ``RETRY_TOPIC`` (written there by a producer) names no topic to deliver it under and is
        skipped with a warning.
        """
        shared = self.shared_topic(group)
        if shared is None:
            return
        queue_id = ids.QueueId(0)
        self._pop.open_queue(state, shared.name, queue_id)
        await redeliver_due(shared.name)
        budget = min(SHARED_RETRY_MOVES_MAX, state.scan_budget(shared.name, queue_id))
        read = read_at_cursor(
            self._store, state, shared.name, queue_id, budget, None, max_bytes=self._max_bytes
        )
        if read is not None:
            start, result = read
            found = {m.queue_offset: m for m in result.messages}
            for offset in range(start, result.next_begin_offset):
                queue_offset = ids.QueueOffset(offset)
                if state.adopt_restored(shared.name, queue_id, queue_offset):
                    continue
                stored = found.get(queue_offset)
                if stored is not None and P.RETRY_TOPIC in stored.properties:
                    await self._retry.move_to_pop_retry(group.group, stored)
                elif stored is not None:
                    _log.warning("%s/%d: no RETRY_TOPIC; skipped", shared.name, offset)
                state.skip(shared.name, queue_id, queue_offset)
        self._pop.commit(state, shared.name, queue_id)
