"""The chaos checker, in the style of OpenMessaging Chaos: a pure function of the history.

The history is what the clients saw, never what the brokers say: every send attempt (its message
id, message group, sequence number in that group, whether the broker acknowledged it, when) and
every delivery (message id, when). From it:

* ``lost``: acknowledged sends never delivered (the number that must be 0 with SYNC_MASTER +
  SYNC_FLUSH); ``lost_ids`` lists the first ``LOST_IDS_SHOWN``;
* ``duplicated``: deliveries beyond the first of a message (redeliveries after a failover or an
  expired invisible time; at-least-once allows them, the number is reported);
* ``unacked_delivered``: sends that failed or timed out at the client yet were delivered (the
  broker stored them; not an error, the client could not know);
* ``order_violations``: per message group, a first delivery whose sequence number is below one
  already delivered (one producer sends each group in order, so storage order is send order);
* unavailability: the longest and the total time without an acknowledged send while the
  producers were trying (gaps shorter than ``UNAVAILABLE_GAP_MS_MIN`` count as available).

Invariant: no I/O, no clock; the same history gives the same report.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Sequence

LOST_IDS_SHOWN = 20
"""Most lost message ids the report lists (the count is always whole)."""

UNAVAILABLE_GAP_MS_MIN = 1_000
"""A gap between acknowledged sends shorter than this is normal latency, not unavailability, ms."""


@dataclasses.dataclass(frozen=True, slots=True)
class Send:
    """One send attempt as the producer saw it."""

    message_id: str
    group: str
    seq: int
    acked: bool
    at_ms: int
    """Monotonic time the attempt ended, ms."""


@dataclasses.dataclass(frozen=True, slots=True)
class Delivery:
    """One delivery of a message to a consumer."""

    message_id: str
    at_ms: int


@dataclasses.dataclass(frozen=True, slots=True)
class Report:
    """What the checker found (JSON-ready with ``dataclasses.asdict``)."""

    sends: int
    acked: int
    failed_sends: int
    delivered_unique: int
    lost: int
    duplicated: int
    unacked_delivered: int
    order_violations: int
    unavailable_longest_ms: int
    unavailable_total_ms: int
    lost_ids: tuple[str, ...]


def check(sends: Sequence[Send], deliveries: Sequence[Delivery]) -> Report:
    """Check a history (see the module for each figure).

    Args:
        sends: every send attempt, in any order.
        deliveries: every delivery, in the order the consumers saw them (per group order is
            judged on first deliveries sorted by ``at_ms``, ties kept in the given order).
    """
    by_id = {s.message_id: s for s in sends}
    acked = {s.message_id for s in sends if s.acked}
    first: dict[str, Delivery] = {}
    duplicated = 0
    for delivery in deliveries:
        if delivery.message_id in first:
            duplicated += 1
        else:
            first[delivery.message_id] = delivery
    lost = sorted(acked - first.keys())
    unacked_delivered = sum(1 for m in first if m in by_id and not by_id[m].acked)
    longest, total = _unavailability(sends)
    return Report(
        sends=len(sends),
        acked=len(acked),
        failed_sends=len(sends) - len(acked),
        delivered_unique=len(first),
        lost=len(lost),
        duplicated=duplicated,
        unacked_delivered=unacked_delivered,
        order_violations=_order_violations(by_id, list(first.values())),
        unavailable_longest_ms=longest,
        unavailable_total_ms=total,
        lost_ids=tuple(lost[:LOST_IDS_SHOWN]),
    )


def _order_violations(by_id: dict[str, Send], firsts: list[Delivery]) -> int:
    highest: dict[str, int] = {}
    violations = 0
    for delivery in sorted(firsts, key=lambda d: d.at_ms):
        send = by_id.get(delivery.message_id)
        if send is None:
            continue
        if send.seq < highest.get(send.group, -1):
            violations += 1
        highest[send.group] = max(highest.get(send.group, -1), send.seq)
    return violations


def _unavailability(sends: Sequence[Send]) -> tuple[int, int]:
    """(longest, total) ms between consecutive acknowledged sends, counting gaps >= the floor;
    the span from the first attempt to the first ack and from the last ack to the last attempt
    counts too."""
    if not sends:
        return 0, 0
    start = min(s.at_ms for s in sends)
    end = max(s.at_ms for s in sends)
    marks = [start, *sorted(s.at_ms for s in sends if s.acked), end]
    gaps = [b - a for a, b in itertools.pairwise(marks) if b - a >= UNAVAILABLE_GAP_MS_MIN]
    return max(gaps, default=0), sum(gaps)
