"""Schedule progress in the CommitLog: what a delivery batch finished, replicated with it.

Why: a slave replicates the CommitLog byte for byte, and nothing else of the schedule. If the
progress lived only in local files (``delayOffset.json``, the timer log), a promoted slave
would deliver again everything its old master had delivered (RocketMQ's ``SlaveSynchronize``
copies ``delayOffset.json`` and the timer checkpoint every few seconds, which still repeats
what was delivered within the last period). So the progress travels in the CommitLog, in order
with the deliveries it records:

* every delivery batch is one store append of ``[progress record, *delivered messages]``: the
  record (system topic ``rmq_sys_schedule_progress``, queue 0, body ``progress_codec``) lists
  the batch's origins (level and schedule-queue offset, or timer-queue offset) with the
  delivery key of each message, and the messages follow it contiguously (one append holds the
  put lock, so nothing interleaves; a segment end only inserts a BLANK);
* a RecallMessage appends a record of RECALLED origins (nothing follows it).

A broker derives its schedule progress from these records (``written_after``): an origin is
finished when its record is in the CommitLog and, for a delivery, the delivered message
follows the record. A replica cut at any byte (a SIGKILLed master's slave) holds a prefix of
the batch: exactly the deliveries it holds are finished, the rest are still parked and will be
delivered by whoever is master next. This is exact, where RocketMQ's periodic copy is not.

Pure helpers over the store's read API; the state they feed is ``service.ScheduleService``'s.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterator

from ariane.broker.schedule import progress_codec
from ariane.common import ids, message, topics
from ariane.store import commit_log, message_store, record_reader

_log = logging.getLogger(__name__)

QUEUE = ids.QueueId(0)
"""The one queue of ``rmq_sys_schedule_progress``."""
RECORDS_PER_READ_MAX = 64
"""Most progress records read from the queue at once, a count."""

P = message.Property
Kind = progress_codec.Kind


def record_request(origins: list[progress_codec.Origin], now_ms: int) -> commit_log.AppendRequest:
    """The append request of the progress record listing ``origins`` (``progress_codec``)."""
    return commit_log.AppendRequest(
        message=message.Message(topics.SCHEDULE_PROGRESS_TOPIC, progress_codec.encode(origins)),
        queue_id=QUEUE,
        born_timestamp_ms=ids.TimestampMs(now_ms),
    )


def parked_key(parked: message.StoredMessage, restored: commit_log.AppendRequest) -> int:
    """The delivery key of the message ``restored`` from ``parked`` will be written as."""
    return progress_codec.delivery_key(
        restored.message.topic,
        restored.queue_id,
        parked.properties.get(P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX, ""),
        parked.born_timestamp_ms,
        parked.body_crc,
    )


def _written_key(stored: message.StoredMessage) -> int:
    return progress_codec.delivery_key(
        stored.topic,
        stored.queue_id,
        stored.properties.get(P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX, ""),
        stored.born_timestamp_ms,
        stored.body_crc,
    )


@dataclasses.dataclass(frozen=True, slots=True)
class Followed:
    """What one progress record finished, as far as this CommitLog shows.

    Attributes:
        origins: the record's origins, in order.
        present: per origin, whether it is finished here (RECALLED: always; a delivery: its
            message follows the record).
        complete: the whole batch is here (a message not of the batch, or every listed one,
            follows); when ``False`` the CommitLog ends inside the batch (a replica still
            receiving it, or one cut there).
    """

    origins: list[progress_codec.Origin]
    present: list[bool]
    complete: bool


def written_after(store: message_store.MessageStore, record: message.StoredMessage) -> Followed:
    """Which origins of the progress ``record`` are finished in ``store``'s CommitLog.

    Reads at most one record per listed delivery after ``record``, matching them in order by
    delivery key (a batch's records are the listed ones that were written, in list order).
    A body that does not decode is logged and counts as a complete record of nothing.
    """
    try:
        origins = progress_codec.decode(record.body)
    except ValueError as exc:
        _log.error("schedule progress record at %d ignored: %s", record.commit_log_offset, exc)
        return Followed([], [], True)
    present = [o.kind is Kind.RECALLED for o in origins]
    wanted = [(i, o.key) for i, o in enumerate(origins) if o.kind is not Kind.RECALLED]
    position, complete = 0, not wanted
    start = record.commit_log_offset + record.store_size_bytes
    for stored in _records_from(store, start, len(wanted)):
        key = _written_key(stored)
        match = next((j for j in range(position, len(wanted)) if wanted[j][1] == key), None)
        if match is None:  # a record of something else: the batch ended before it
            complete = True
            break
        present[wanted[match][0]] = True
        position = match + 1
        if position == len(wanted):
            complete = True
            break
    return Followed(origins, present, complete)


def _records_from(
    store: message_store.MessageStore, offset: int, count_max: int
) -> Iterator[message.StoredMessage]:
    """Up to ``count_max`` message records from ``offset`` on, stepping over a segment's
    closing BLANK; stops at the end of the CommitLog or at a record it cannot read."""
    segment_bytes = store.settings.commit_log_file_size_bytes
    while count_max > 0 and offset < store.max_commit_log_offset:
        found = store.get_message(ids.CommitLogOffset(offset))
        if found.status is record_reader.LookupStatus.NOT_FOUND and offset % segment_bytes:
            offset = (offset // segment_bytes + 1) * segment_bytes  # the BLANK ending a segment
            continue
        if found.message is None:
            return
        yield found.message
        offset += found.message.store_size_bytes
        count_max -= 1
