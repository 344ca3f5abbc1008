"""A damaged key index rebuilt from the CommitLog at start-up (Ariane's addition).

The key index (``index_service``) is derived data: every entry can be computed again from the
CommitLog. Damage is found at start-up: a file cut short is dropped with the newer ones when
the service opens (``IndexService.damaged_from``), and the newest ``CHECK_ENTRIES`` entries of
the newest file must each point at a record inside the CommitLog that carries a key of that
hash (a bit flip in the entry area shows there); a file failing that is dropped. Either way the
keys of the CommitLog from the dropped file's first offset up to the dispatched end are indexed
again (a scan at about 40 MB/s on the development machine).

Damage elsewhere in a file is contained by the reads, not found: a walk follows only strictly
decreasing entry numbers and offsets inside the file's range (``index_file``), and every query
answer is read back from the CommitLog (CRC-checked) and its topic and key compared
(``broker.processors.admin``), so a damaged entry can make a lookup miss a message, never
return a wrong one. RocketMQ trusts its index files as they are (a wrong entry's record is
filtered by key on the client side).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from ariane.common import ids
from ariane.store import (
    commit_log,
    dispatcher,
    index_codec,
    index_service,
    record_reader,
)

_log = logging.getLogger(__name__)

CHECK_ENTRIES = 4
"""Newest entries checked against their records at start-up."""
_BATCH = 1024


def repair_on_start(
    index: index_service.IndexService, log: commit_log.CommitLog, feed: dispatcher.Dispatcher
) -> int:
    """Drop a damaged newest index file and index the CommitLog's keys again from where the
    dropped files began, up to the dispatched end.

    Returns:
        how many records were indexed again (0: nothing was damaged).

    Raises:
        OSError: if an index file cannot be deleted or written.
    """
    start = index.damaged_from
    if start is None and _newest_entries_disagree(index, log):
        start = index.drop_newest_file()
    if start is None:
        return 0
    index.damaged_from = None
    start = max(start, log.min_offset)
    end = feed.dispatched_offset
    floors = feed.topic_floors
    count = 0
    batch: list[tuple[Sequence[str], ids.CommitLogOffset, int]] = []
    for item in log.scan(start, check_crc=False):
        stored = item.result.message
        if item.offset >= end or stored is None:
            break
        if floors and item.offset < floors.get(stored.topic, -1):
            continue
        request = commit_log.dispatch_request_of(stored)
        if request.keys or request.uniq_key:
            keys = dispatcher.index_keys_of(request)
            batch.append((keys, request.commit_log_offset, request.store_timestamp_ms))
            count += 1
        if len(batch) >= _BATCH:
            index.put_many(batch)
            batch = []
    index.put_many(batch)
    _log.warning("key index rebuilt from CommitLog offset %d: %d records indexed", start, count)
    return count


def _newest_entries_disagree(index: index_service.IndexService, log: commit_log.CommitLog) -> bool:
    for entry in index.newest_entries(CHECK_ENTRIES):
        offset = entry.commit_log_offset
        if offset < log.min_offset:
            continue  # deleted by retention
        found = log.read(offset)
        if found.status is record_reader.LookupStatus.CORRUPT:
            continue  # the record is damaged, not the entry (record_repair)
        if found.message is None:
            _log.error("index entry for offset %d points at no record", offset)
            return True
        request = commit_log.dispatch_request_of(found.message)
        hashes = {index_codec.key_hash(k) for k in dispatcher.index_keys_of(request)}
        if entry.key_hash not in hashes:
            _log.error("index entry for offset %d has a hash none of its keys has", offset)
            return True
    return False
