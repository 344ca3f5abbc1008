"""The chaos checker, in the style of OpenMessaging Chaos: a pure function of the history.

The history is what the clients saw, never what the brokers say: every send attempt (its message
id, message group, sequence number in that group, its outcome, when it was invoked and when it
ended) and every delivery (message id, when). A send's outcome is Jepsen's: ``ok`` (the broker
acknowledged it), ``fail`` (the broker definitely refused it) or ``info`` (indeterminate: a
timeout or a lost connection; it may have been stored). From it:

* ``lost``: acknowledged sends never delivered (the number that must be 0 with SYNC_MASTER +
  SYNC_FLUSH); ``lost_ids`` lists the first ``LOST_IDS_SHOWN``;
* ``duplicated``: deliveries beyond the first of a message (redeliveries after a failover or an
  expired invisible time; at-least-once allows them, the number is reported);
* ``unacked_delivered``: sends that failed or timed out at the client yet were delivered (the
  broker stored them; not an error for an ``info``, the client could not know);
  ``failed_delivered`` counts those among them whose outcome was a definite ``fail`` (a broker
  that stores what it reports as refused: the client's retries then duplicate);
* ``corrupt_delivered``: deliveries whose body differs from the body sent for their key (or
  whose key was never sent): what a CRC let through; must be 0 in every configuration.
  ``corrupt_ids`` lists the first ``LOST_IDS_SHOWN``. Only deliveries and sends that recorded
  a body are judged;
* ``order_violations``: per message group, a first delivery whose sequence number is below one
  already delivered (one producer sends each group in order, so storage order is send order);
  ``order_violations_by_group`` names the groups;
* unavailability: the windows without an acknowledged send while the producers were trying
  (gaps shorter than ``UNAVAILABLE_GAP_MS_MIN`` count as available): the longest, the total, how
  many, the first ``WINDOWS_SHOWN``;
* RTO (OpenChaos's recovery time): for each fault, the time from its injection to the first
  acknowledged send invoked at or after it (``None``: none was); p50, p99 and the max over the
  faults that recovered, and how many did not.

``history_lines`` renders the history as OpenChaos's history file: tab-separated lines
``<process>\tenqueue\tREQUEST\t<value>\t<shardingKey>\t<timestamp>`` (Jepsen's invoke),
``<process>\t<op>\tRESPONSE\t<SUCCESS|FAILURE|UNKNOWN>\t<value>\t<shardingKey>\t<timestamp>
\t<latency>\t<extra>\t<endToEndLatency>`` (ok / fail / info; ``extra`` names a failure's
exception; a delivery is a ``dequeue`` SUCCESS) and ``fault\t<name>\tstart|end\t<timestamp>``,
timestamps in ms since the epoch, sorted by time, so OpenChaos's ``QueueChecker`` and
``RTOChecker`` read it as their own.

Invariant: no I/O, no clock; the same history gives the same report.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Sequence

OK, FAIL, INFO = "ok", "fail", "info"
"""A send's outcome (Jepsen's names)."""

LOST_IDS_SHOWN = 20
"""Most lost message ids the report lists (the count is always whole)."""

UNAVAILABLE_GAP_MS_MIN = 1_000
"""A gap between acknowledged sends shorter than this is normal latency, not unavailability, ms."""

WINDOWS_SHOWN = 50
"""Most unavailability windows the report lists (the count is always whole)."""

_OPENCHAOS_RESULT = {OK: "SUCCESS", FAIL: "FAILURE", INFO: "UNKNOWN"}


@dataclasses.dataclass(frozen=True, slots=True)
class Send:
    """One send attempt as the producer saw it."""

    message_id: str
    group: str
    seq: int
    acked: bool
    at_ms: int
    """Monotonic time the attempt ended, ms."""
    invoked_ms: int = -1
    """Monotonic time the attempt began, ms (-1: not recorded, ``at_ms`` stands in)."""
    outcome: str = ""
    """``OK``, ``FAIL`` or ``INFO``; empty: ``OK`` when acked, else ``INFO``."""
    process: int = 0
    """The client (producer) that sent it."""
    error: str = ""
    """The failure's exception class name (empty when acknowledged)."""
    body: str | None = None
    """The body sent (``None``: not recorded)."""

    @property
    def result(self) -> str:
        """The outcome, defaulted (see ``outcome``)."""
        return self.outcome or (OK if self.acked else INFO)

    @property
    def started_ms(self) -> int:
        """When the attempt began, ms."""
        return self.invoked_ms if self.invoked_ms >= 0 else self.at_ms


@dataclasses.dataclass(frozen=True, slots=True)
class Delivery:
    """One delivery of a message to a consumer."""

    message_id: str
    at_ms: int
    process: int = 0
    """The client (consumer) that received it."""
    body: str | None = None
    """The body received (``None``: not recorded); ``message_id`` is its key."""


@dataclasses.dataclass(frozen=True, slots=True)
class FaultSpan:
    """A fault from injection to heal, ms on the history's clock."""

    name: str
    start_ms: int
    end_ms: int


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
    failed_delivered: int = 0
    order_violations_by_group: dict[str, int] = dataclasses.field(default_factory=dict)
    unavailable_windows: int = 0
    unavailable_windows_ms: tuple[tuple[int, int], ...] = ()
    """The first ``WINDOWS_SHOWN`` windows, (start, end) ms."""
    rto_ms: tuple[int | None, ...] = ()
    """Per fault, in the order given."""
    rto_p50_ms: int | None = None
    rto_p99_ms: int | None = None
    rto_max_ms: int | None = None
    rto_unrecovered: int = 0
    corrupt_delivered: int = 0
    corrupt_ids: tuple[str, ...] = ()


def check(
    sends: Sequence[Send], deliveries: Sequence[Delivery], faults: Sequence[FaultSpan] = ()
) -> Report:
    """Check a history (see the module for each figure).

    Args:
        sends: every send attempt, in any order.
        deliveries: every delivery, in the order the consumers saw them (per group order is
            judged on first deliveries sorted by ``at_ms``, ties kept in the given order).
        faults: the faults injected (for the RTO), in the order to report them.
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
    unacked = [by_id[m] for m in first if m in by_id and not by_id[m].acked]
    windows = _windows(sends)
    by_group = _order_violations(by_id, list(first.values()))
    rto = tuple(_rto(sends, f.start_ms) for f in faults)
    corrupt = _corrupt(by_id, deliveries)
    recovered = sorted(r for r in rto if r is not None)
    return Report(
        sends=len(sends),
        acked=len(acked),
        failed_sends=len(sends) - len(acked),
        delivered_unique=len(first),
        lost=len(lost),
        duplicated=duplicated,
        unacked_delivered=len(unacked),
        order_violations=sum(by_group.values()),
        unavailable_longest_ms=max((b - a for a, b in windows), default=0),
        unavailable_total_ms=sum(b - a for a, b in windows),
        lost_ids=tuple(lost[:LOST_IDS_SHOWN]),
        failed_delivered=sum(1 for s in unacked if s.result == FAIL),
        order_violations_by_group=by_group,
        unavailable_windows=len(windows),
        unavailable_windows_ms=tuple(windows[:WINDOWS_SHOWN]),
        rto_ms=rto,
        rto_p50_ms=_percentile(recovered, 50),
        rto_p99_ms=_percentile(recovered, 99),
        rto_max_ms=recovered[-1] if recovered else None,
        rto_unrecovered=len(rto) - len(recovered),
        corrupt_delivered=len(corrupt),
        corrupt_ids=tuple(corrupt[:LOST_IDS_SHOWN]),
    )


def _corrupt(by_id: dict[str, Send], deliveries: Sequence[Delivery]) -> list[str]:
    """The keys of deliveries whose body is not the one sent for that key (or no send had it)."""
    found = []
    for delivery in deliveries:
        if delivery.body is None:
            continue
        send = by_id.get(delivery.message_id)
        if send is None or (send.body is not None and send.body != delivery.body):
            found.append(delivery.message_id)
    return found


def _order_violations(by_id: dict[str, Send], firsts: list[Delivery]) -> dict[str, int]:
    highest: dict[str, int] = {}
    violations: dict[str, int] = {}
    for delivery in sorted(firsts, key=lambda d: d.at_ms):
        send = by_id.get(delivery.message_id)
        if send is None:
            continue
        if send.seq < highest.get(send.group, -1):
            violations[send.group] = violations.get(send.group, 0) + 1
        highest[send.group] = max(highest.get(send.group, -1), send.seq)
    return violations


def _windows(sends: Sequence[Send]) -> list[tuple[int, int]]:
    """(start, end) ms between consecutive acknowledged sends, gaps >= the floor; the span from
    the first attempt to the first ack and from the last ack to the last attempt counts too."""
    if not sends:
        return []
    start = min(s.at_ms for s in sends)
    end = max(s.at_ms for s in sends)
    marks = [start, *sorted(s.at_ms for s in sends if s.acked), end]
    return [(a, b) for a, b in itertools.pairwise(marks) if b - a >= UNAVAILABLE_GAP_MS_MIN]


def _rto(sends: Sequence[Send], fault_ms: int) -> int | None:
    ends = [s.at_ms for s in sends if s.acked and s.started_ms >= fault_ms]
    return min(ends) - fault_ms if ends else None


def _percentile(ordered: Sequence[int], percent: int) -> int | None:
    """Nearest-rank percentile of an ascending sequence (``None`` when empty)."""
    if not ordered:
        return None
    rank = max(1, -(-percent * len(ordered) // 100))
    return ordered[rank - 1]


def history_lines(
    sends: Sequence[Send],
    deliveries: Sequence[Delivery],
    faults: Sequence[FaultSpan],
    epoch_ms: int,
    *,
    consumer_process_base: int = 0,
) -> list[str]:
    """The history as OpenChaos's history file lines (see the module), each ending in a newline.

    Args:
        sends, deliveries, faults: the history (times in ms on the history's clock).
        epoch_ms: wall-clock ms since the epoch of the history's time 0.
        consumer_process_base: added to each delivery's process (consumers numbered after the
            producers).
    """
    timed: list[tuple[int, int, str]] = []
    for s in sends:
        started = epoch_ms + s.started_ms
        timed.append(
            (started, 0, f"{s.process}\tenqueue\tREQUEST\t{s.message_id}\t{s.group}\t{started}")
        )
        ended = epoch_ms + s.at_ms
        fields = (
            *(s.process, "enqueue", "RESPONSE", _OPENCHAOS_RESULT[s.result], s.message_id),
            *(s.group, ended, s.at_ms - s.started_ms, s.error or "null", 0),
        )
        timed.append((ended, 1, "\t".join(map(str, fields))))
    for d in deliveries:
        at = epoch_ms + d.at_ms
        process = consumer_process_base + d.process
        group = d.message_id.rpartition("-")[0]
        line = f"{process}\tdequeue\tRESPONSE\tSUCCESS\t{d.message_id}\t{group}\t{at}\t0\tnull\t0"
        timed.append((at, 1, line))
    for f in faults:
        timed.append((epoch_ms + f.start_ms, 0, f"fault\t{f.name}\tstart\t{epoch_ms + f.start_ms}"))
        timed.append((epoch_ms + f.end_ms, 2, f"fault\t{f.name}\tend\t{epoch_ms + f.end_ms}"))
    timed.sort(key=lambda x: (x[0], x[1]))
    return [line + "\n" for _, _, line in timed]
