"""A fixed-bucket histogram of plain ints, cheap enough for a hot path.

``Histogram.observe`` costs one ``bisect`` and two additions; nothing is cumulated, sorted or
allocated per observation. The metrics collector reads ``bucket_counts``/``sum`` at scrape time
and turns them into Prometheus' cumulative ``le`` buckets, so the process that counts never
imports prometheus_client (RocketMQ records the same values into OpenTelemetry histograms with
explicit bucket views: ``BrokerMetricsManager``, ``RemotingMetricsManager``).

Invariants: ``bounds`` are strictly increasing; ``bucket_counts`` has ``len(bounds) + 1``
entries, entry ``i`` counting values ``bounds[i-1] < v <= bounds[i]`` (Prometheus' ``le``) and
the last one the values above every bound; counts and the count only grow.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Sequence

RPC_LATENCY_BOUNDS_MS: tuple[float, ...] = (1, 3, 5, 7, 10, 100, 1000, 2000, 3000)
"""``rocketmq_rpc_latency`` bucket bounds, ms (RocketMQ ``RemotingMetricsManager``)."""

MESSAGE_SIZE_BOUNDS_BYTES: tuple[float, ...] = (
    1024,
    4 * 1024,
    512 * 1024,
    1024 * 1024,
    2 * 1024 * 1024,
    4 * 1024 * 1024,
)
"""``rocketmq_message_size`` bucket bounds, bytes: 1K/4K/512K/1M/2M/4M (RocketMQ
``BrokerMetricsManager``)."""


class Histogram:
    """Counts of observed values per bucket, plus their sum.

    Args:
        bounds: the buckets' upper bounds, strictly increasing (the ``+Inf`` bucket is
            implicit).

    Raises:
        ValueError: ``bounds`` is empty or not strictly increasing.
    """

    __slots__ = ("bounds", "bucket_counts", "sum")

    def __init__(self, bounds: Sequence[float]) -> None:
        if not bounds or any(a >= b for a, b in itertools.pairwise(bounds)):
            raise ValueError(f"bounds must be non-empty and increasing, not {bounds!r}")
        self.bounds = tuple(bounds)
        self.bucket_counts = [0] * (len(bounds) + 1)
        self.sum: float = 0

    def observe(self, value: float) -> None:
        """Count one value (in the unit of ``bounds``)."""
        self.bucket_counts[bisect.bisect_left(self.bounds, value)] += 1
        self.sum += value

    @property
    def count(self) -> int:
        """How many values were observed."""
        return sum(self.bucket_counts)

    def cumulative(self) -> list[tuple[float, int]]:
        """``(upper bound, values <= it)`` per bucket, ending with ``(inf, count)``."""
        found: list[tuple[float, int]] = []
        total = 0
        for bound, n in zip((*self.bounds, float("inf")), self.bucket_counts, strict=True):
            total += n
            found.append((bound, total))
        return found
