"""Topic configs a promoted slave rebuilds for the messages it holds (issue 25).

The gap: the HA stream carries CommitLog bytes, which a slave dispatches to its own
ConsumeQueues, while topic configs come by the periodic metadata sync
(``slave_sync.SlaveSyncService``, RocketMQ ``SlaveSynchronize``, every ~10 s). A topic
created on the master within one sync round before the master died had its messages on the
slave but no config: once promoted, the broker did not register it and clients got "failed to
fetch topic route" for messages it held. RocketMQ has the same gap and does nothing about it at
promotion.

The choice: at promotion, before it registers as the master, the broker creates a config for
every topic that has ConsumeQueues and no config (``adopt``), each logged as a warning. The
other way, journaling topic configs into the replicated CommitLog as system records that precede
a topic's first message and that every slave's dispatch applies, would be exact, but it puts a
new record kind into the CommitLog (which RocketMQ's tools read as messages of a system topic)
and a step into every slave's dispatch, for a window of one sync round. The rebuilt config:

* queues: the highest queue id holding a message, plus one (read = write), so every stored
  message stays reachable; queues that never got a message are not invented;
* message type: each queue's newest message's ``__MESSAGE_TYPE`` (every v2 send writes it), else
  FIFO for a ``__SHARDINGKEY``, else NORMAL; queues that disagree give MIXED;
* permission READ|WRITE, the broker's retention.
What a rebuilt config loses (a custom permission or retention, a read/write split, empty
queues) is restored with ``UpdateTopic``.

Deleted topics stay deleted: the metadata sync drops the config of a topic its master deleted
but keeps the slave's ConsumeQueues, so each applied round records the master's CommitLog end
read before its listing (``BrokerRuntime.metadata_synced_offset``); a topic whose messages all
lie below it was missing from a listing taken after they were written, so the master deleted it,
and it is skipped (logged). Before any round was applied (a slave just restarted) that floor is
0 and every such topic is adopted: keeping messages wins over forgetting a deletion. Not seen
here: DELAY, timer and transactional messages of a young topic still parked in system topics
(``REAL_TOPIC``); their topic gets a ConsumeQueue only when they are delivered. System topics
are never adopted: they are the store's own (schedule, half/op, timer, schedule progress, POP
journal) and live in no topic table; those a master does list reach the slave by the sync.
"""

from __future__ import annotations

import logging

from ariane.broker import runtime as runtime_mod
from ariane.broker.tables import topic_config
from ariane.common import errors, ids, message, topics
from ariane.store import consume_queue, message_store

_log = logging.getLogger(__name__)

P = message.Property


def adopt(runtime: runtime_mod.BrokerRuntime) -> list[topic_config.TopicConfig]:
    """Create a config for every topic with ConsumeQueues and none (see the module docstring).

    Args:
        runtime: the broker being promoted (its store, topic table and
            ``metadata_synced_offset``).

    Returns:
        the configs created, sorted by name (a topic the table refuses is logged and skipped;
        the promotion goes on).
    """
    store = runtime.store
    floor = runtime.metadata_synced_offset
    by_topic: dict[str, list[consume_queue.ConsumeQueue]] = {}
    for queue in store.consume_queues.queues():
        if topics.is_system_topic(queue.topic):  # the store's own (schedule, half, POP journal)
            continue
        if runtime.topics.get(queue.topic) is None and queue.max_queue_offset > 0:
            by_topic.setdefault(queue.topic, []).append(queue)
    adopted = []
    for name, queues in sorted(by_topic.items()):
        newest = [_newest(store, q) for q in queues]
        if max(offset for offset, _ in newest) < floor:
            _log.info(
                "topic %s: no config and no message since the last metadata sync: deleted "
                "on the old master, not adopted",
                name,
            )
            continue
        config = topic_config.TopicConfig(
            name=ids.TopicName(name),
            read_queue_nums=max(q.queue_id for q in queues) + 1,
            write_queue_nums=max(q.queue_id for q in queues) + 1,
            message_type=_one_type({kind for _, kind in newest}),
        )
        try:
            stored = runtime.topics.create_or_update(config)
        except (errors.ArianeError, OSError) as exc:
            _log.error("topic %s holds messages but its config cannot be rebuilt: %s", name, exc)
            continue
        adopted.append(stored)
        _log.warning(
            "promotion: topic %s had messages but no config (younger than the last metadata "
            "sync); created it with %d queues, type %s; check it and UpdateTopic if the old "
            "master's config differed",
            name,
            stored.write_queue_nums,
            stored.message_type.value,
        )
    return adopted


def _newest(
    store: message_store.MessageStore, queue: consume_queue.ConsumeQueue
) -> tuple[int, message.MessageType | None]:
    """The CommitLog offset of the queue's newest unit and its message's type (``None`` when
    unreadable)."""
    unit = queue.unit_at(ids.QueueOffset(queue.max_queue_offset - 1))
    if unit is None or unit.is_filler:
        return -1, None
    found = store.get_message(unit.commit_log_offset, unit.size_bytes).message
    if found is None:
        return unit.commit_log_offset, None
    props = found.message.properties
    try:
        return unit.commit_log_offset, message.MessageType(props[P.MESSAGE_TYPE])
    except (KeyError, ValueError):
        fifo = P.SHARDING_KEY in props
        return unit.commit_log_offset, message.MessageType.FIFO if fifo else None


def _one_type(kinds: set[message.MessageType | None]) -> message.MessageType:
    known = {kind for kind in kinds if kind is not None}
    if len(known) > 1:
        return message.MessageType.MIXED
    return known.pop() if known else message.MessageType.NORMAL
