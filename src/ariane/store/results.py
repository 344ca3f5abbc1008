"""What reads and stats of the ``MessageStore`` answer: status enums and result values.

Expected outcomes of a read are ``GetMessageStatus`` values in a ``GetMessageResult`` (RocketMQ
``GetMessageResult``), never exceptions; ``out_of_range`` is RocketMQ's choice of status and
next offset for a read that has nothing to scan. Pure values: no I/O, no locks.
"""

from __future__ import annotations

import dataclasses
import enum

from ariane.common import ids
from ariane.common import message as message_mod


class GetMessageStatus(enum.Enum):
    """Outcome of reading a queue (RocketMQ ``GetMessageStatus``)."""

    FOUND = "FOUND"
    NO_MATCHED_MESSAGE = "NO_MATCHED_MESSAGE"
    """Units were scanned but the filter matched none."""
    MESSAGE_WAS_REMOVING = "MESSAGE_WAS_REMOVING"
    """Units point at CommitLog data already deleted (or unreadable)."""
    OFFSET_FOUND_NULL = "OFFSET_FOUND_NULL"
    """The offset is in range but its ConsumeQueue file is gone."""
    OFFSET_OVERFLOW_BADLY = "OFFSET_OVERFLOW_BADLY"
    """The offset is past the queue's max offset."""
    OFFSET_OVERFLOW_ONE = "OFFSET_OVERFLOW_ONE"
    """The offset equals the max offset: nothing new yet."""
    OFFSET_TOO_SMALL = "OFFSET_TOO_SMALL"
    """The offset is below the queue's min offset (deleted by retention)."""
    NO_MATCHED_LOGIC_QUEUE = "NO_MATCHED_LOGIC_QUEUE"
    """The (topic, queue id) has never been written."""
    NO_MESSAGE_IN_QUEUE = "NO_MESSAGE_IN_QUEUE"
    """The queue exists but is empty."""
    RECORD_CORRUPTED = "RECORD_CORRUPTED"
    """The record at ``next_begin_offset`` (the offset asked for) fails its checks and awaits
    its repair from a slave (``store.record_repair``); ask again later (Ariane's addition:
    RocketMQ skips it)."""


@dataclasses.dataclass(frozen=True, slots=True)
class GetMessageResult:
    """Messages read from one queue (RocketMQ ``GetMessageResult``).

    Attributes:
        status: the outcome.
        messages: the messages, in queue-offset order.
        next_begin_offset: where the next read should start.
        min_offset: the queue's min offset at read time.
        max_offset: the queue's max offset (next to be written) at read time.
        total_bytes: sum of the returned record sizes.
        records: the stored bytes of each message, same order (``LookupResult.record``:
            what a classic pull sends, RocketMQ ``getMessageBufferList``).
    """

    status: GetMessageStatus
    messages: tuple[message_mod.StoredMessage, ...]
    next_begin_offset: ids.QueueOffset
    min_offset: ids.QueueOffset
    max_offset: ids.QueueOffset
    total_bytes: int = 0
    records: tuple[memoryview, ...] = ()


@dataclasses.dataclass(frozen=True, slots=True)
class StoreStats:
    """A snapshot for metrics (``rocketmq_storage_*``); offsets in CommitLog bytes."""

    min_commit_log_offset: int
    max_commit_log_offset: int
    flushed_commit_log_offset: int
    dispatched_commit_log_offset: int
    flush_behind_bytes: int
    dispatch_behind_bytes: int
    commit_log_segment_count: int
    consume_queue_count: int
    put_message_count: int
    put_message_failure_count: int
    put_message_bytes: int
    get_message_count: int
    corrupt_read_count: int
    flush_count: int
    recovery_clean: bool
    recovery_scanned_records: int
    disk_full: bool
    forced_deleted_segment_count: int = 0
    """CommitLog segments deleted by retention runs that were forced (disk above the
    clean-forcibly watermark), since start."""
    forced_deleted_bytes: int = 0
    """Bytes of those segments."""
    unconsumed_deleted_message_count: int = 0
    """Messages a subscribed consumer group had not consumed, deleted by retention since start
    (by age, or forced with ``force_delete_unconsumed``)."""
    repaired_record_count: int = 0
    """Damaged CommitLog records rewritten with a slave's copy since start (``record_repair``)."""
    repair_unavailable_count: int = 0
    """Damaged CommitLog records found with no slave to ask for them, since start."""
    index_write_failure_count: int = 0
    """Messages stored without key-index entries because the index write failed (``ENOSPC``
    when no IndexFile fits), since start; they are not found by a query by key."""


def out_of_range(
    queue_offset: int, low: int, high: int
) -> tuple[GetMessageStatus, ids.QueueOffset] | None:
    """RocketMQ's status and next offset for a read that finds nothing to scan, or ``None``
    when ``queue_offset`` is inside ``[low, high)``."""
    if high == 0:
        return GetMessageStatus.NO_MESSAGE_IN_QUEUE, ids.QueueOffset(0)
    if queue_offset < low:
        return GetMessageStatus.OFFSET_TOO_SMALL, ids.QueueOffset(low)
    if queue_offset == high:
        return GetMessageStatus.OFFSET_OVERFLOW_ONE, ids.QueueOffset(queue_offset)
    if queue_offset > high:
        return GetMessageStatus.OFFSET_OVERFLOW_BADLY, ids.QueueOffset(low if low == 0 else high)
    return None


STORE_COUNTERS = (
    "put_message_count",
    "put_message_failure_count",
    "put_message_bytes",
    "get_message_count",
    "corrupt_read_count",
    "repaired_record_count",
    "repair_unavailable_count",
    "forced_deleted_segment_count",
    "forced_deleted_bytes",
    "unconsumed_deleted_message_count",
)
"""The ``StoreStats`` fields that are running counters (the store keeps them in one dict)."""
