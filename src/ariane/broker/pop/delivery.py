"""What one POP delivery is: its record, its outcomes, and how it is journaled.

``group_state.GroupPopState`` hands out these values: an ``InFlight`` per delivery (its
receipt handle comes from it), a ``Due`` per message whose invisible time ran out, an
``AckOutcome``/``ChangeResult`` per ack or visibility change. ``JournalSink`` is where it reports
what must survive a restart, and ``checkpoint_of``/``restored_records`` turn deliveries and
restored state into POP journal records (RocketMQ's CK/ACK records). Pure: no I/O, no clock.

Invariant: an ``InFlight``'s ``deadline_ms`` is monotonic time, while its journal record
carries the wall-clock deadline ``popped_at_ms + invisible_ms`` (monotonic time does not
survive a restart).
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Protocol

from ariane.broker.pop import journal as pop_journal
from ariane.broker.pop import receipt
from ariane.common import ids


class AckOutcome(enum.Enum):
    """Result of ``ack``/``change_invisible`` (status enum, not an exception).

    The receive processor answers OK for OK, and INVALID_RECEIPT_HANDLE for STALE and UNKNOWN
    (the push consumer then stops retrying the ack, grpc-v2.md §6.5).
    """

    OK = "OK"
    STALE = "STALE"
    """The message is in flight under a newer handle (redelivered, or its invisible time was
    changed)."""
    UNKNOWN = "UNKNOWN"
    """The message is not in flight: already acked, forwarded to the DLQ, reset, or never
    delivered under this group."""


@dataclasses.dataclass(frozen=True, slots=True)
class InFlight:
    """One delivery of a message that is invisible until its deadline.

    Attributes:
        topic: the message's topic.
        queue_id: its queue.
        queue_offset: its offset in the queue.
        attempt: the delivery attempt, 1 for the first delivery.
        handle_version: version to put in the receipt handle.
        popped_at_ms: wall time of this delivery (or visibility change), ms since the epoch.
        invisible_ms: the invisible duration, in ms.
        deadline_ms: monotonic time at which it becomes due for redelivery, in ms.
        message_group: the FIFO message group, or ``None``.
    """

    topic: ids.TopicName
    queue_id: ids.QueueId
    queue_offset: ids.QueueOffset
    attempt: int
    handle_version: int
    popped_at_ms: ids.TimestampMs
    invisible_ms: int
    deadline_ms: int
    message_group: str | None

    def receipt_handle(
        self, *, broker_name: ids.BrokerName, commit_log_offset: ids.CommitLogOffset
    ) -> receipt.ReceiptHandle:
        """The receipt handle of this delivery (encode it with ``receipt.encode``).

        Args:
            broker_name: this broker group's name.
            commit_log_offset: the message's CommitLog position (read with the message).
        """
        return receipt.ReceiptHandle(
            broker_name=broker_name,
            topic=self.topic,
            queue_id=self.queue_id,
            queue_offset=self.queue_offset,
            commit_log_offset=commit_log_offset,
            popped_at_ms=self.popped_at_ms,
            invisible_ms=self.invisible_ms,
            delivery_attempt=self.attempt,
            handle_version=self.handle_version,
        )


@dataclasses.dataclass(frozen=True, slots=True)
class Due:
    """An in-flight message whose invisible time ran out.

    Attributes:
        topic: the message's topic.
        queue_id: its queue.
        queue_offset: its offset.
        next_attempt: the attempt number a redelivery would carry.
        to_dlq: ``next_attempt`` exceeds ``max_delivery_attempts``: forward the message to
            ``%DLQ%<group>`` and call ``settle_dead_letter`` instead of redelivering it.
    """

    topic: ids.TopicName
    queue_id: ids.QueueId
    queue_offset: ids.QueueOffset
    next_attempt: int
    to_dlq: bool


@dataclasses.dataclass(frozen=True, slots=True)
class ChangeResult:
    """Result of ``change_invisible``: the outcome and, when OK, the new delivery record."""

    outcome: AckOutcome
    in_flight: InFlight | None = None


class JournalSink(Protocol):
    """Where a ``GroupPopState`` reports what must survive a restart (the POP journal)."""

    def checkpoint(self, group: ids.GroupName, entry: InFlight) -> None:
        """``entry`` was delivered (or its invisible time changed)."""
        ...

    def done(
        self, group: ids.GroupName, topic: ids.TopicName, queue_id: ids.QueueId, offset: int
    ) -> None:
        """A delivered message was acked or dead-lettered."""
        ...

    def forget(self, group: ids.GroupName, topic: ids.TopicName, queue_id: int) -> None:
        """Everything recorded for the queue is void (reset, closed)."""
        ...


def checkpoint_of(group: ids.GroupName, entry: InFlight) -> pop_journal.Checkpoint:
    """The journal record of one delivery (its deadline as wall-clock ms)."""
    return pop_journal.Checkpoint(
        group,
        entry.topic,
        entry.queue_id,
        entry.queue_offset,
        attempt=entry.attempt,
        handle_version=entry.handle_version,
        deadline_ms=entry.popped_at_ms + entry.invisible_ms,
        invisible_ms=entry.invisible_ms,
        message_group=entry.message_group,
    )


def restored_records(
    key: pop_journal.QueueKey, restored: pop_journal.RestoredQueue
) -> list[pop_journal.Record]:
    """``restored`` of the queue ``key`` as journal records again (compaction)."""
    group, topic, queue_id = key
    records: list[pop_journal.Record] = list(restored.checkpoints.values())
    for start, end in restored.done:
        records.append(pop_journal.Ack(group, topic, queue_id, ids.QueueOffset(start), end - start))
    return records
