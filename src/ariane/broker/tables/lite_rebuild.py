"""Rebuild the lite-topic table (``tables.lite_topics``) from the store, at start and when a
slave is promoted: lite topics survive a restart (clean stop or crash) and a failover.

**Where from.** Every lite message is already durable where the table needs it: in its LITE
parent's queue ``crc32(name) % queues``, with the Java hash of its lite topic in the
ConsumeQueue tag slot and the name and STORETIMESTAMP in its CommitLog record. So the table is
*derived* from the store, not kept in a file of its own: what the table says cannot disagree
with what the store holds after a crash (a metadata file written on every send would cost a
write per new lite topic and could lag the CommitLog by its last flush; one written at clean
stop only, RocketMQ-checkpoint style, would still need this replay after a crash, so the replay
is the one path, always exercised). RocketMQ 5.5 keeps its lite metadata in RocksDB
(``LiteLifecycleManager`` over the LMQ queues) and gets the same survival at the cost of a
second store. Only the lite topic records come back; subscriptions are not stored (clients
resend their complete sets every 30 s).

**How.** For each queue of each LITE parent the ConsumeQueue is read *backwards* from its end:
the first unit met of a tag hash is its lite topic's latest message, so only that unit's record
is read from the CommitLog (name, store time); later units of a hash already seen cost 20 bytes
of ConsumeQueue and no CommitLog read. The scan stops at the first unit stored within the last
``ttl_ms`` (found by a binary search over store times, RocketMQ's ``getOffsetInQueueByTime``;
a queue's store times grow with its offsets) and after ``rebuild_units_max`` units of one queue.
The work is thus bounded by ``queues x min(units within the TTL, rebuild_units_max)``
ConsumeQueue units plus one CommitLog read per lite topic and a few per queue for the search.
Measured (``bench/lite_topics.py``, "rebuild"): 10^5 lite topics over 2x10^5 messages rebuild in
about 6 s on a shared 2-core machine, ~60 us per lite topic, most of it decoding its record;
the broker serves once it is done.

What is lost, on purpose: a lite topic idle for longer than the TTL is not rebuilt (the first
expiry pass would find it idle anyway; its messages stay readable, a send recreates it, and
before the restart it stayed only while a subscriber lagged on it); two lite topics of one
queue whose names share a Java hash come back as the one with the newer latest message (the
other returns with its next send, as every lite topic did before this module); with a
``lite_topics_max`` lowered below what the store holds, the newest are kept.

Time: a record's ``last_active_ms`` is the table's monotonic time less the record's age on the
wall clock, so TTL expiry counts from the last send, not from the restart.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterable, Iterator

from ariane.broker.tables import lite_topics
from ariane.common import clock, ids, message
from ariane.store import consume_queue, message_store, record_reader

_log = logging.getLogger(__name__)

_CHUNK_UNITS = 1_024
"""ConsumeQueue units read per step of a backward scan."""


@dataclasses.dataclass(frozen=True, slots=True)
class Found:
    """A lite topic's latest message as found in the store.

    Attributes:
        parent: its LITE parent topic.
        name: the lite topic.
        queue_id: the parent queue holding it.
        queue_offset: that message's queue offset.
        store_timestamp_ms: its STORETIMESTAMP, wall clock ms since the epoch.
    """

    parent: ids.TopicName
    name: str
    queue_id: int
    queue_offset: int
    store_timestamp_ms: int


@dataclasses.dataclass(frozen=True, slots=True)
class Report:
    """What a rebuild did: lite topics put back, units and records read, lite topics left
    out by the quota."""

    restored: int
    units_read: int
    records_read: int
    over_quota: int


def _backwards(queue: consume_queue.ConsumeQueue, low: int) -> Iterator[consume_queue.CqUnit]:
    """The queue's units from its last back to queue offset ``low``."""
    end = int(queue.max_queue_offset)
    while end > low:
        start = max(low, end - _CHUNK_UNITS)
        chunk = list(queue.iter_units(ids.QueueOffset(start), end - start))
        if not chunk:
            return
        yield from reversed(chunk)
        end = start


def scan_queue(
    store: message_store.MessageStore,
    queue: consume_queue.ConsumeQueue,
    *,
    oldest_ms: int,
    units_max: int,
) -> tuple[list[Found], int, int]:
    """The latest message of each lite topic in one LITE parent queue stored at or after
    ``oldest_ms`` (wall clock, ms), reading at most ``units_max`` units (module docstring).

    Returns:
        the lite topics found (newest first), how many units and how many CommitLog records
        were read.
    """
    seen: set[int] = set()
    found: list[Found] = []
    units = records = 0
    end = int(queue.max_queue_offset)
    low = max(int(queue.min_queue_offset), end - units_max)
    if low < end:  # a binary search over store times: no unit older than the TTL is read
        low = max(low, int(queue.offset_by_time(oldest_ms, store.commit_log.store_timestamp_at)))
    for unit in _backwards(queue, low):
        units += 1
        if unit.is_filler or unit.tag_hash in seen:
            continue
        seen.add(unit.tag_hash)
        records += 1
        read = store.commit_log.read(unit.commit_log_offset, unit.size_bytes)
        if read.status is not record_reader.LookupStatus.FOUND or read.message is None:
            continue  # a damaged record: its lite topic comes back with its next send
        stored = read.message
        if stored.store_timestamp_ms < oldest_ms:
            break
        name = stored.message.properties.get(message.Property.LITE_TOPIC)
        if name is not None:
            found.append(
                Found(
                    queue.topic,
                    name,
                    int(queue.queue_id),
                    int(unit.queue_offset),
                    stored.store_timestamp_ms,
                )
            )
    return found, units, records


def _latest(
    store: message_store.MessageStore,
    parents: set[ids.TopicName],
    *,
    oldest_ms: int,
    units_max: int,
) -> tuple[list[Found], int, int]:
    """Each lite topic's latest message over the queues of ``parents``, oldest first; units
    and records read."""
    found: dict[tuple[ids.TopicName, str], Found] = {}
    units = records = 0
    for queue in store.consume_queues.queues():
        if queue.topic not in parents:
            continue
        latest, read, looked = scan_queue(store, queue, oldest_ms=oldest_ms, units_max=units_max)
        units, records = units + read, records + looked
        for one in latest:  # a lite topic is in two queues only if write queues changed
            known = found.get((one.parent, one.name))
            if known is None or one.store_timestamp_ms > known.store_timestamp_ms:
                found[(one.parent, one.name)] = one
    return sorted(found.values(), key=lambda f: f.store_timestamp_ms), units, records


def rebuild(
    table: lite_topics.LiteTopicTable,
    store: message_store.MessageStore,
    parents: Iterable[ids.TopicName],
    *,
    ttl_ms: int,
    units_max: int,
    time: clock.Clock,
) -> Report:
    """Put back into ``table`` the lite topics of ``parents`` whose latest message the store
    holds from the last ``ttl_ms`` (module docstring); known ones take a newer message. They
    are added oldest first (the table's creation order); the newest are kept when they do not
    all fit under ``lite_topics_max``.

    Args:
        table: the broker's lite topics (empty at start; a promoted slave's, possibly not).
        store: the broker's store, recovered and dispatched.
        parents: the LITE topics.
        ttl_ms: the lite topics' TTL, ms: older messages are not read.
        units_max: most ConsumeQueue units read per queue.
        time: wall time for the TTL, monotonic time for the table.
    """
    now_ms, now_monotonic_ms = int(time.now_ms()), time.monotonic_ms()
    latest, units, records = _latest(
        store, set(parents), oldest_ms=now_ms - ttl_ms, units_max=units_max
    )
    new = [f for f in latest if table.get(f.parent, f.name) is None]
    room = max(0, table.lite_topics_max - len(table))
    left_out = {(f.parent, f.name) for f in new[: max(0, len(new) - room)]}
    for one in latest:
        if (one.parent, one.name) in left_out:
            continue
        age_ms = max(0, now_ms - one.store_timestamp_ms)
        record = lite_topics.LiteTopic(
            one.queue_id, one.queue_offset, now_monotonic_ms - age_ms, one.store_timestamp_ms
        )
        table.restore(one.parent, one.name, record)
    report = Report(len(latest) - len(left_out), units, records, len(left_out))
    _log.info(
        "lite topics: %d rebuilt from the store (%d ConsumeQueue units, %d records read; "
        "%d left out by lite_topics_max)",
        report.restored,
        units,
        records,
        report.over_quota,
    )
    return report


class RoleFollower:
    """The lite table's part in a role change (``services.replication.RoleFollower``): a
    promoted slave rebuilds its table from the replicated store, so its lite topics list,
    count against the quota and expire as on the old master; a demotion keeps the table (the
    new master's sends no longer reach it; the next promotion refreshes it).

    Args:
        rebuild: rebuilds the broker's table (``BrokerRuntime.rebuild_lite_topics``).
    """

    def __init__(self, rebuild: Callable[[], Report]) -> None:
        self._rebuild = rebuild

    def become_master(self) -> Report:
        """Rebuild the table from what this broker holds now."""
        report = self._rebuild()
        _log.warning("promoted: %d lite topics rebuilt", report.restored)
        return report

    def become_slave(self) -> None:
        """Nothing: the table stays as it is."""
