"""Timed loops and their statistics: ``Timing`` of one run, ``Spread`` over runs, percentiles.

Percentiles are nearest-rank over the sorted samples, index round(p/100 x (n - 1)), as
specs/perf.md §2.1 prescribes. A ``Timing`` keeps every per-call latency of its run so that
percentiles are exact; ``summary`` reduces it to the numbers that are recorded.
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from collections.abc import Sequence

PERCENTILES = (50.0, 90.0, 99.0, 99.9)
"""The latency percentiles every summary carries."""


def percentile(sorted_samples: Sequence[float], p: float) -> float:
    """Nearest-rank percentile ``p`` (0..100) of ascending ``sorted_samples`` (NaN if empty)."""
    if not sorted_samples:
        return float("nan")
    return sorted_samples[round(p / 100 * (len(sorted_samples) - 1))]


@dataclasses.dataclass(frozen=True, slots=True)
class Timing:
    """One timed loop.

    Attributes:
        messages: messages moved (a batch of 64 counts 64).
        calls: calls made (a batch of 64 counts 1); each has one latency sample.
        bytes: bytes moved (CommitLog record bytes for the store, chunk bytes for raw I/O).
        seconds: wall time of the loop.
        latencies_ns: one wall-time sample per call, ns.
    """

    messages: int
    calls: int
    bytes: int
    seconds: float
    latencies_ns: Sequence[int]

    @property
    def messages_per_s(self) -> float:
        """Throughput, messages per second."""
        return self.messages / self.seconds

    @property
    def mb_per_s(self) -> float:
        """Throughput, decimal MB (10^6 bytes) per second."""
        return self.bytes / self.seconds / 1e6

    def latency_us(self, p: float) -> float:
        """Percentile ``p`` of the per-call latency, µs."""
        return percentile(sorted(self.latencies_ns), p) / 1000

    def summary(self) -> dict[str, float]:
        """Every recorded number of the run (latency percentiles per call, µs)."""
        ordered = sorted(self.latencies_ns)
        numbers = {
            "messages": float(self.messages),
            "calls": float(self.calls),
            "bytes": float(self.bytes),
            "seconds": round(self.seconds, 6),
            "messages_per_s": round(self.messages_per_s, 1),
            "mb_per_s": round(self.mb_per_s, 3),
            "us_per_message": round(1e6 / self.messages_per_s, 3),
        }
        for p in PERCENTILES:
            numbers[f"call_p{p:g}_us"] = round(percentile(ordered, p) / 1000, 2)
        numbers["call_max_us"] = round(ordered[-1] / 1000, 2) if ordered else float("nan")
        return numbers


class CallTimer:
    """Collects the per-call latencies of one timed loop and says when its deadline passed.

    Usage: take ``t0``/``t1`` with ``time.perf_counter_ns`` around each call, then
    ``if timer.record(t0, t1): break``; ``timing`` closes the loop. Wall time runs from the
    timer's creation to ``timing``.

    Args:
        deadline: the ``time.perf_counter()`` value after which ``record`` answers True.
    """

    def __init__(self, deadline: float) -> None:
        self.latencies_ns: list[int] = []
        self._deadline_ns = int(deadline * 1e9)
        self._started_ns = time.perf_counter_ns()

    def expired(self, now_ns: int) -> bool:
        """Whether ``now_ns`` (``time.perf_counter_ns``) is past the deadline."""
        return now_ns >= self._deadline_ns

    def record(self, t0: int, t1: int) -> bool:
        """Add one call's latency; whether the loop is past its deadline."""
        self.latencies_ns.append(t1 - t0)
        return t1 >= self._deadline_ns

    @property
    def calls(self) -> int:
        """Calls recorded so far."""
        return len(self.latencies_ns)

    def timing(self, messages: int, bytes_moved: int) -> Timing:
        """The loop's ``Timing``, its wall time ending now."""
        elapsed = (time.perf_counter_ns() - self._started_ns) / 1e9
        return Timing(messages, self.calls, bytes_moved, elapsed, self.latencies_ns)


@dataclasses.dataclass(frozen=True, slots=True)
class Spread:
    """Median and range of one figure over several runs."""

    median: float
    low: float
    high: float

    @classmethod
    def of(cls, values: Sequence[float]) -> Spread:
        """The spread of ``values`` (at least one)."""
        assert values, "a spread needs at least one value"
        return cls(statistics.median(values), min(values), max(values))

    def format(self, digits: int = 0, scale: float = 1.0) -> str:
        """``median [low-high]`` after multiplying by ``scale``; just the median for one run."""
        median, low, high = (v * scale for v in (self.median, self.low, self.high))
        if low == high:
            return f"{median:,.{digits}f}"
        return f"{median:,.{digits}f} [{low:,.{digits}f}-{high:,.{digits}f}]"

    def as_dict(self) -> dict[str, float]:
        """``{"median", "min", "max"}``."""
        return {"median": self.median, "min": self.low, "max": self.high}
