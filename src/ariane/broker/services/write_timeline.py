"""``WriteTimelineService``: when the CommitLog reached which offset, sampled once a second.

A slave reports the CommitLog offset it holds, not a time; this loop keeps a bounded history of
``(time, CommitLog end)`` samples so that ``/metrics`` can say how old the oldest byte a slave
has not acknowledged is (``ariane_ha_slave_lag_seconds``) without touching the append path.
RocketMQ's ``HAConnectionRuntimeInfo`` has the byte ``diff`` only; Kafka's follower lag in time
(``replica.lag.time.max.ms``) is the idea mirrored here.

Invariants: at most ``SAMPLES_MAX`` samples, oldest first, offsets non-decreasing (a CommitLog
that went backwards, a demoted master cut to the new master's epoch, starts the history anew);
``lag_seconds`` never says more than the truth: a byte written after the newest sample counts as
0 s old, and one older than the history counts as old as the history.
"""

from __future__ import annotations

import asyncio
import bisect
import collections
from collections.abc import Callable

from ariane.common import clock

SAMPLE_INTERVAL_MS = 1_000
"""Time between two samples, ms: the resolution of ``lag_seconds``."""

SAMPLES_MAX = 900
"""Samples kept (15 minutes at one a second; about 100 KiB): longer lags read as 15 minutes,
which is far past any alert threshold."""


class WriteTimelineService:
    """A bounded history of the CommitLog's end offset over time.

    Args:
        end_offset: returns the CommitLog's end offset now, bytes.
        time: the clock (ms since the epoch).
    """

    def __init__(self, end_offset: Callable[[], int], time: clock.Clock) -> None:
        self._end_offset = end_offset
        self._clock = time
        self._times_ms: collections.deque[int] = collections.deque(maxlen=SAMPLES_MAX)
        self._offsets: collections.deque[int] = collections.deque(maxlen=SAMPLES_MAX)

    def sample(self) -> None:
        """Record the end offset now (the loop calls it every ``SAMPLE_INTERVAL_MS``)."""
        offset = self._end_offset()
        if self._offsets and offset < self._offsets[-1]:
            self._times_ms.clear()
            self._offsets.clear()
        self._times_ms.append(self._clock.now_ms())
        self._offsets.append(offset)

    def lag_seconds(self, acked_offset: int) -> float:
        """Seconds since the byte at ``acked_offset`` (the oldest one not acked) was written,
        rounded down to the sampling; 0 when nothing past it is older than the newest sample.
        """
        first_later = bisect.bisect_right(self._offsets, acked_offset)
        if first_later >= len(self._offsets):
            return 0.0
        return max(0, self._clock.now_ms() - self._times_ms[first_later]) / 1000

    async def run(self) -> None:
        """Sample every ``SAMPLE_INTERVAL_MS`` until cancelled (the server's task group)."""
        while True:
            self.sample()
            await asyncio.sleep(SAMPLE_INTERVAL_MS / 1000)
