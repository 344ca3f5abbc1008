"""Checks of what came out of the broker against what went in: exactly once, and in order.

Pure functions over event lists, so the checks themselves are unit-tested.
Ordering is checked per plane (message group) on the consumers' receive timestamps: a FIFO
group's next message is only delivered after the previous one was acked, so on one machine the
receive times of one plane's flights must follow its departure order.
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Iterable

EXAMPLES_MAX = 5
"""How many offending ids or planes a report lists."""


@dataclasses.dataclass(frozen=True, slots=True)
class Received:
    """One delivery seen by a consumer.

    Attributes:
        flight_id: the ``id`` in the body.
        tailnum: the message group.
        seq: the ``seq`` in the body.
        received_ns: the consumer's ``time.time_ns()`` when it got the message.
    """

    flight_id: int
    tailnum: str
    seq: int
    received_ns: int


@dataclasses.dataclass(frozen=True, slots=True)
class Report:
    """The verdict.

    Attributes:
        expected: how many flights were sent.
        delivered: how many deliveries were seen (duplicates included).
        missing: flights never delivered (up to ``EXAMPLES_MAX`` ids) and their count.
        duplicated: flights delivered more than once (examples) and their count.
        out_of_order_planes: planes whose deliveries broke departure order (examples), count.
    """

    expected: int
    delivered: int
    missing_count: int
    missing: tuple[int, ...]
    duplicated_count: int
    duplicated: tuple[int, ...]
    out_of_order_count: int
    out_of_order_planes: tuple[str, ...]

    @property
    def ok(self) -> bool:
        """Exactly once and in order."""
        return not (self.missing_count or self.duplicated_count or self.out_of_order_count)


def verify(expected_ids: Iterable[int], received: Iterable[Received]) -> Report:
    """Compare deliveries with the sent flights.

    Args:
        expected_ids: ids of every flight sent (acknowledged by the broker).
        received: every delivery, in any order.

    Returns:
        A ``Report``; ``report.ok`` when every flight arrived exactly once and each plane's
        flights arrived in departure order.
    """
    expected = set(expected_ids)
    counts = collections.Counter[int]()
    per_plane: dict[str, list[Received]] = collections.defaultdict(list)
    total = 0
    for event in received:
        total += 1
        counts[event.flight_id] += 1
        per_plane[event.tailnum].append(event)
    missing = sorted(expected - counts.keys())
    duplicated = sorted(fid for fid, n in counts.items() if n > 1)
    disordered = sorted(
        tail
        for tail, events in per_plane.items()
        if [e.seq for e in sorted(events, key=lambda e: e.received_ns)]
        != sorted(e.seq for e in events)
    )
    return Report(
        expected=len(expected),
        delivered=total,
        missing_count=len(missing),
        missing=tuple(missing[:EXAMPLES_MAX]),
        duplicated_count=len(duplicated),
        duplicated=tuple(duplicated[:EXAMPLES_MAX]),
        out_of_order_count=len(disordered),
        out_of_order_planes=tuple(disordered[:EXAMPLES_MAX]),
    )
