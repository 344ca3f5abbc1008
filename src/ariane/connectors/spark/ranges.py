"""Offset maps and the ranges Spark partitions read (pure: no pyspark, no I/O).

An offset map is the JSON shape the streaming checkpoint holds,
``{"<topic>": {"<broker>:<queue>": next}}``: per queue the next offset to read, every lower
offset read (end-exclusive, as Kafka's and RocketMQ's consumer offsets). A ``QueueRange`` is
``[start, end)`` of one queue; ``split`` cuts ranges into Spark partitions and ``cap`` applies
``maxOffsetsPerTrigger`` with Kafka's proportional rule. ``offsets_behind_latest`` gives a
micro-batch's lag per queue from its streaming progress (Kafka's ``*OffsetsBehindLatest``).

Invariants: ranges are never empty and never overlap; ``split`` and ``cap`` are pure
functions of their arguments (the same plan after a restart), and their output covers exactly
the offsets of their input (``cap``: a prefix of each queue's backlog).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from typing import Any

OffsetMap = dict[str, dict[str, int]]
"""``{"<topic>": {"<broker>:<queue>": next}}``."""


@dataclasses.dataclass(frozen=True, slots=True, order=True)
class QueueRange:
    """Offsets ``[start, end)`` of one queue.

    Attributes:
        topic: the topic.
        broker_name: the broker group.
        queue_id: the queue id.
        start: the first offset read.
        end: the first offset not read (``end > start``).
    """

    topic: str
    broker_name: str
    queue_id: int
    start: int
    end: int

    def __post_init__(self) -> None:
        assert 0 <= self.start < self.end, f"empty or negative range {self}"


def queue_key(broker_name: str, queue_id: int) -> str:
    """The key of a queue inside its topic's offset map, ``<broker>:<queue>``."""
    return f"{broker_name}:{queue_id}"


def parse_key(key: str) -> tuple[str, int]:
    """``(broker, queue)`` of a ``<broker>:<queue>`` key (broker names may hold colons)."""
    broker, _, queue = key.rpartition(":")
    return broker, int(queue)


def between(start: OffsetMap, end: OffsetMap) -> list[QueueRange]:
    """The non-empty ranges from ``start`` to ``end``, sorted; a queue missing from ``start``
    (found after the stream began) starts at 0."""
    out: list[QueueRange] = []
    for topic, queues in end.items():
        for key, stop in queues.items():
            begin = start.get(topic, {}).get(key, 0)
            if stop > begin:
                broker, queue = parse_key(key)
                out.append(QueueRange(topic, broker, queue, begin, stop))
    return sorted(out)


def split(
    ranges: Sequence[QueueRange], *, min_partitions: int | None, max_records: int | None
) -> list[QueueRange]:
    """Cut ranges into at most ``max_records`` offsets each, then halve the biggest until
    there are ``min_partitions`` (Kafka's ``minPartitions``/``maxRecordsPerPartition``)."""
    out: list[QueueRange] = []
    for found in ranges:
        step = max_records or (found.end - found.start)
        for begin in range(found.start, found.end, step):
            out.append(dataclasses.replace(found, start=begin, end=min(begin + step, found.end)))
    while min_partitions is not None and len(out) < min_partitions:
        biggest = max(out, key=lambda r: (r.end - r.start, r), default=None)
        if biggest is None or biggest.end - biggest.start < 2:
            break
        middle = biggest.start + (biggest.end - biggest.start) // 2
        out.remove(biggest)
        out += [
            dataclasses.replace(biggest, end=middle),
            dataclasses.replace(biggest, start=middle),
        ]
    return sorted(out)


def backlog(start: OffsetMap, end: OffsetMap) -> int:
    """Offsets between ``start`` and ``end``, over all queues."""
    return sum(r.end - r.start for r in between(start, end))


def cap(start: OffsetMap, end: OffsetMap, rows_max: int) -> OffsetMap:
    """``end`` moved back so at most ``rows_max`` offsets lie past ``start``: each queue gets
    ``rows_max * its backlog // total`` (rounded down), the remainder goes to queues in sorted
    order (Kafka's ``maxOffsetsPerTrigger`` rule)."""
    ranges = between(start, end)
    total = sum(r.end - r.start for r in ranges)
    if total <= rows_max:
        return _copy(end)
    shares = [rows_max * (r.end - r.start) // total for r in ranges]
    spare = rows_max - sum(shares)
    for i, found in enumerate(ranges):
        extra = min(spare, found.end - found.start - shares[i])
        shares[i] += extra
        spare -= extra
    out = _copy(end)
    for found, share in zip(ranges, shares, strict=True):
        out[found.topic][queue_key(found.broker_name, found.queue_id)] = found.start + share
    return out


def _copy(offsets: Mapping[str, Mapping[str, int]]) -> OffsetMap:
    return {topic: dict(queues) for topic, queues in offsets.items()}


def behind_latest(end: OffsetMap, latest: OffsetMap) -> OffsetMap:
    """Per queue of ``latest``, the offsets from ``end`` (absent: 0) to it, never negative:
    how far a query that has read up to ``end`` is behind."""
    return {
        topic: {key: max(0, stop - end.get(topic, {}).get(key, 0)) for key, stop in queues.items()}
        for topic, queues in latest.items()
    }


@dataclasses.dataclass(frozen=True, slots=True)
class QueryLag:
    """How far a micro-batch of a ``rocketmq`` stream was behind the latest offsets (what
    Kafka's source reports as its ``metrics``).

    Attributes:
        per_queue: ``{"<topic>": {"<broker>:<queue>": offsets}}`` from the batch's end to the
            latest offset seen when it was planned.
        min_offsets_behind_latest / max_offsets_behind_latest / avg_offsets_behind_latest:
            Kafka's ``minOffsetsBehindLatest``/``maxOffsetsBehindLatest``/
            ``avgOffsetsBehindLatest`` over the queues (0 when there are none).
    """

    per_queue: OffsetMap
    min_offsets_behind_latest: int
    max_offsets_behind_latest: int
    avg_offsets_behind_latest: float

    def metrics(self) -> dict[str, str]:
        """The three numbers under Kafka's metric names, as strings (``SourceProgress.metrics``
        is a ``Map[String, String]``)."""
        return {
            "minOffsetsBehindLatest": str(self.min_offsets_behind_latest),
            "maxOffsetsBehindLatest": str(self.max_offsets_behind_latest),
            "avgOffsetsBehindLatest": str(self.avg_offsets_behind_latest),
        }


def offsets_behind_latest(source_progress: Mapping[str, Any]) -> QueryLag:
    """The lag of a micro-batch from one source entry of a streaming progress
    (``query.lastProgress["sources"][i]``, or an item of ``recentProgress``, or a
    ``StreamingQueryListener`` event's ``progress.sources[i]`` as JSON): its ``latestOffset``
    (what ``reportLatestOffset`` returned when the batch was planned) minus its ``endOffset``.

    PySpark's Python data sources cannot fill ``SourceProgress.metrics`` (Spark's
    ``PythonMicroBatchStream`` does not implement ``ReportsSourceMetrics``), so Kafka's
    ``min/max/avgOffsetsBehindLatest`` are computed here from the offsets Spark does report.

    Raises:
        ValueError: the entry has no ``latestOffset`` or ``endOffset`` (not a ``rocketmq``
            source, or a progress before its first batch).
    """
    found: list[OffsetMap] = []
    for name in ("endOffset", "latestOffset"):
        value = source_progress.get(name)
        if isinstance(value, str):
            value = json.loads(value)
        if not isinstance(value, dict):
            raise ValueError(f"progress source has no {name}: {source_progress!r}")
        found.append(value)
    per_queue = behind_latest(found[0], found[1])
    counts = [n for queues in per_queue.values() for n in queues.values()]
    return QueryLag(
        per_queue=per_queue,
        min_offsets_behind_latest=min(counts, default=0),
        max_offsets_behind_latest=max(counts, default=0),
        avg_offsets_behind_latest=sum(counts) / len(counts) if counts else 0.0,
    )
