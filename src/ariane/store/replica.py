"""A slave's writes to its CommitLog: bytes from the master, and the cut of a diverged tail.

A slave stores what its master streams byte-identical at its own max offset (RocketMQ
``DefaultMessageStore.appendToCommitLog``), and when it follows a new master whose epoch
history says its tail diverged it cuts the CommitLog there (RocketMQ ``truncateDirtyFiles``).
``MessageStore.append_replicated``/``truncate_replica`` call these under the store's put lock,
then run the reput service (which dispatches the records the bytes complete) or a checkpoint.

Invariants: replica bytes are only appended at the current max offset and never cross a segment
end; the high-water mark covers them before they are written (as for the store's own appends,
so recovery can zero a cut tail); a truncation cuts the ConsumeQueues and the key index at the
same offset and moves the dispatched offset back to it, so nothing indexes bytes past the cut.
"""

from __future__ import annotations

import logging

from ariane.common import ids
from ariane.store import commit_log, consume_queue, dispatcher, index_service

_log = logging.getLogger(__name__)


def append(
    log: commit_log.CommitLog, offset: ids.CommitLogOffset, data: bytes | memoryview
) -> None:
    """Write replica bytes at ``offset``; the caller holds the put lock.

    Raises:
        ValueError: ``offset`` is not the CommitLog's max offset (the stream skipped or
            repeated bytes), or ``data`` crosses a segment end.
        OSError: the write failed.
    """
    if offset != log.max_offset:
        raise ValueError(f"replica bytes at {offset}, expected {log.max_offset}")
    if not data:
        return
    segment = log.log.segment_for_append()
    if segment.wrote_position + len(data) > segment.size_bytes:
        raise ValueError(f"replica bytes at {offset} cross a segment end")
    log.high_water.cover(offset + len(data))
    segment.append(data)


def truncate(
    offset: ids.CommitLogOffset,
    *,
    log: commit_log.CommitLog,
    queues: consume_queue.ConsumeQueueStore,
    index: index_service.IndexService | None,
    dispatch: dispatcher.Dispatcher,
) -> bool:
    """Cut the CommitLog, the ConsumeQueues and the key index at ``offset``; the caller holds
    the put lock (and checkpoints afterwards).

    Returns:
        whether anything was cut (``offset`` below the max offset).

    Raises:
        OSError: zeroing or deleting failed.
    """
    if offset >= log.max_offset:
        return False
    _log.warning("truncating CommitLog from %d to %d", log.max_offset, offset)
    log.log.truncate_to(offset, zero_end_offset=log.high_water.load())
    queues.truncate_from_commit_log_offset(offset, zero_tail=True)
    if index is not None:
        index.truncate_after(offset)
    dispatch.dispatched_offset = ids.CommitLogOffset(min(dispatch.dispatched_offset, offset))
    log.set_queue_offset_table(queues.next_offset_table())
    return True
