"""Reading one queue: ConsumeQueue units from a queue offset, turned into stored messages.

``MessageStore.get_messages`` answers with ``read`` (RocketMQ ``DefaultMessageStore.getMessage``,
each message with its stored record bytes as RocketMQ's ``SelectMappedBufferResult``):
an offset outside the queue's range gets RocketMQ's status and next offset without a scan;
otherwise units are scanned from the offset, fillers and units the tag filter rejects are
skipped, and each remaining unit's record is read by its CommitLog offset and checked against
the unit (``check_unit``: ``queue_repair.UnitChecker``, which rebuilds a damaged unit).

``first_unconsumed`` is the retention policy's question: where the oldest message some consumer
still needs is stored (``MessageStore.unconsumed_from``).

Invariants: at most ``get_message_scan_units_max`` units are scanned and at most ``max_count``
messages returned; at least one message is returned when any is found, even one larger than
``max_bytes``; a record that fails its checks is never returned (the reader counts and logs
it) and never skipped: the read stops before it (``next_begin_offset`` is its queue offset;
RECORD_CORRUPTED when nothing precedes it), so a consumer asks for it again until it is
repaired; otherwise ``next_begin_offset`` is past every unit looked at. RocketMQ skips such a
record (``getMessage`` moves past it): its consumer never gets that message.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from ariane.common import ids
from ariane.common import message as message_mod
from ariane.store import consume_queue, record_reader, results, settings

TagFilter = Callable[[int], bool]
"""``tag_hash -> bool``: whether a ConsumeQueue unit's tag code matches a subscription."""

GetMessage = Callable[[ids.CommitLogOffset, int], record_reader.LookupResult]
"""``(commit_log_offset, size_bytes) -> LookupResult``: ``MessageStore.get_message``."""

CheckUnit = Callable[[consume_queue.CqUnit, record_reader.LookupResult], record_reader.LookupResult]
"""``(unit, what its read found) -> what the read may use``: FOUND (the unit's own record),
NOT_FOUND (deleted by retention) or CORRUPT (stop here)."""

_ZERO = ids.QueueOffset(0)


def read(
    queue: consume_queue.ConsumeQueue | None,
    queue_offset: ids.QueueOffset,
    *,
    max_count: int,
    max_bytes: int,
    tag_filter: TagFilter | None,
    get_message: GetMessage,
    config: settings.StoreSettings,
    check_unit: CheckUnit | None = None,
) -> results.GetMessageResult:
    """Up to ``max_count`` messages (and about ``max_bytes``) of ``queue`` from ``queue_offset``.

    Args:
        queue: the ConsumeQueue, ``None`` if the queue was never written
            (NO_MATCHED_LOGIC_QUEUE).
        queue_offset: where to start.
        max_count: messages at most (already capped by ``get_message_count_max``), > 0.
        max_bytes: about this many record bytes at most, > 0.
        tag_filter: skips units whose tag code it rejects; ``None`` keeps every unit.
        get_message: reads one record by CommitLog offset, CRC-checked.
        config: ``get_message_scan_units_max`` and ``consume_queue_file_entries``.
        check_unit: checks each record read against its unit; ``None``: trusted as read.
    """
    if queue is None:
        return results.GetMessageResult(
            results.GetMessageStatus.NO_MATCHED_LOGIC_QUEUE, (), _ZERO, _ZERO, _ZERO
        )
    low, high = queue.min_queue_offset, queue.max_queue_offset
    early = results.out_of_range(queue_offset, low, high)
    if early is not None:
        return results.GetMessageResult(early[0], (), early[1], low, high)
    messages: list[message_mod.StoredMessage] = []
    records: list[memoryview] = []
    total = removed = 0
    next_offset = queue_offset
    scanned_any = corrupt = False
    for unit in queue.iter_units(queue_offset, config.get_message_scan_units_max):
        scanned_any = True
        if len(messages) >= max_count or (messages and total + unit.size_bytes > max_bytes):
            break
        if unit.is_filler or (tag_filter is not None and not tag_filter(unit.tag_hash)):
            next_offset = ids.QueueOffset(unit.queue_offset + 1)
            continue
        found = get_message(unit.commit_log_offset, unit.size_bytes)
        if check_unit is not None:
            found = check_unit(unit, found)
        if found.status is record_reader.LookupStatus.CORRUPT:
            corrupt = True
            break  # never skipped: the next read starts at it again
        next_offset = ids.QueueOffset(unit.queue_offset + 1)
        if found.status is record_reader.LookupStatus.FOUND and found.message is not None:
            assert found.record is not None, "a FOUND record carries its stored bytes"
            messages.append(found.message)
            records.append(found.record)
            total += found.message.store_size_bytes
        else:
            removed += 1
    if not scanned_any:  # the unit's file is gone: RocketMQ moves on to the next file's start
        entries = config.consume_queue_file_entries
        roll = ids.QueueOffset(queue_offset + entries - queue_offset % entries)
        return results.GetMessageResult(
            results.GetMessageStatus.OFFSET_FOUND_NULL, (), roll, low, high
        )
    status = _status(found_any=bool(messages), corrupt=corrupt, removed=removed > 0)
    return results.GetMessageResult(
        status, tuple(messages), next_offset, low, high, total, tuple(records)
    )


def _status(*, found_any: bool, corrupt: bool, removed: bool) -> results.GetMessageStatus:
    """The status of a read that scanned some units (RocketMQ ``GetMessageStatus``)."""
    if found_any:
        return results.GetMessageStatus.FOUND
    if corrupt:
        return results.GetMessageStatus.RECORD_CORRUPTED
    if removed:
        return results.GetMessageStatus.MESSAGE_WAS_REMOVING
    return results.GetMessageStatus.NO_MATCHED_MESSAGE


def first_unconsumed(
    queues: consume_queue.ConsumeQueueStore,
    consumed: Mapping[tuple[ids.TopicName, ids.QueueId], ids.QueueOffset],
    *,
    scan_units_max: int,
    fillers_only: ids.CommitLogOffset,
) -> ids.CommitLogOffset | None:
    """The lowest CommitLog offset of a message at or above its queue's ``consumed`` offset.

    Args:
        queues: the store's ConsumeQueues.
        consumed: per queue, the lowest queue offset some consumer has not consumed (queues
            not named count as consumed; offsets below a queue's min count as its min).
        scan_units_max: units scanned per queue at most.
        fillers_only: the answer for a queue whose next ``scan_units_max`` units are only
            fillers (the CommitLog's min offset: kept whole, never guessed).

    Returns:
        the smallest such offset, ``None`` if no queue holds an unconsumed message.
    """
    lowest: ids.CommitLogOffset | None = None
    for (topic, queue_id), queue_offset in consumed.items():
        queue = queues.get(topic, queue_id)
        if queue is None or max(queue_offset, queue.min_queue_offset) >= queue.max_queue_offset:
            continue
        start = ids.QueueOffset(max(queue_offset, queue.min_queue_offset))
        found = next(
            (
                u.commit_log_offset
                for u in queue.iter_units(start, scan_units_max)
                if not u.is_filler
            ),
            fillers_only,
        )
        if lowest is None or found < lowest:
            lowest = found
    return lowest
