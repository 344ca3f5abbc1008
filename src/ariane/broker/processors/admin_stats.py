"""What the admin processor reports about queues: consumer progress rows, per-queue offsets
and store times (RocketMQ ``OffsetWrapper``, ``TopicOffset``, ``getMessageStoreTimeStamp``).

Pure reads of the store given to each function; ``processors.admin.AdminProcessor`` answers
``consumer_lag`` and ``topic_stats`` with these values. A store time is 0 when the message is
no longer readable (retention deleted it, or the queue is empty), as RocketMQ answers.
"""

from __future__ import annotations

import dataclasses

from ariane.broker.tables import topic_config
from ariane.common import ids
from ariane.store import message_store, record_reader


@dataclasses.dataclass(frozen=True, slots=True)
class QueueLag:
    """One queue of a ``consumer_lag`` answer (RocketMQ ``OffsetWrapper``).

    Attributes:
        topic: the queue's topic.
        queue_id: the queue.
        broker_offset: the queue's max offset (next offset written).
        consumer_offset: the group's committed (or resume) offset.
        lag: messages not yet consumed (never negative).
        inflight: messages received and not yet acked or expired.
        pull_offset: the first offset never delivered to the group (RocketMQ
            ``pullOffset``; the consumer offset when nothing is in flight).
        last_timestamp_ms: store time of the last consumed message (at ``consumer_offset``
            - 1), 0 when there is none or it is no longer readable.
    """

    topic: ids.TopicName
    queue_id: ids.QueueId
    broker_offset: int
    consumer_offset: int
    lag: int
    inflight: int
    pull_offset: int = 0
    last_timestamp_ms: int = 0


@dataclasses.dataclass(frozen=True, slots=True)
class QueueStats:
    """One queue of a ``topic_stats`` answer (RocketMQ ``TopicOffset``).

    Attributes:
        queue_id: the queue.
        min_offset: its first readable offset.
        max_offset: its next offset to be written.
        last_update_ms: store time of its last message, 0 when it is empty.
    """

    queue_id: ids.QueueId
    min_offset: int
    max_offset: int
    last_update_ms: int


def queue_stats(
    store: message_store.MessageStore, config: topic_config.TopicConfig
) -> list[QueueStats]:
    """Every queue of ``config`` (``max(read, write)`` of them): offsets and last store time."""
    stats = []
    for q in range(max(config.read_queue_nums, config.write_queue_nums)):
        queue_id = ids.QueueId(q)
        top = store.max_queue_offset(config.name, queue_id)
        stats.append(
            QueueStats(
                queue_id=queue_id,
                min_offset=store.min_queue_offset(config.name, queue_id),
                max_offset=top,
                last_update_ms=store_time_ms(store, config.name, queue_id, top - 1),
            )
        )
    return stats


def store_time_ms(
    store: message_store.MessageStore, topic: ids.TopicName, queue_id: ids.QueueId, offset: int
) -> int:
    """Store time of the message at queue ``offset`` in ms; 0 when ``offset`` is negative or no
    readable message is there (RocketMQ ``getMessageStoreTimeStamp``)."""
    if offset < 0:
        return 0
    found = store.get_messages(topic, queue_id, ids.QueueOffset(offset), max_count=1, max_bytes=1)
    if not found.messages or found.messages[0].queue_offset != offset:
        return 0
    return found.messages[0].store_timestamp_ms


def earliest_store_time_ms(store: message_store.MessageStore) -> int:
    """Store time of the oldest message in the CommitLog in ms, 0 when it is empty or
    unreadable (RocketMQ ``getEarliestMessageTime``)."""
    oldest = store.get_message(store.min_commit_log_offset)
    if oldest.status is not record_reader.LookupStatus.FOUND or oldest.message is None:
        return 0
    return oldest.message.store_timestamp_ms
