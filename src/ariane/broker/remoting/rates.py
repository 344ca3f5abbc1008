"""Live messages-per-second figures of the whole broker, for ``mqadmin brokerStatus``,
``clusterList`` and ``statsAll``.

RocketMQ's ``GET_BROKER_RUNTIME_INFO`` answers ``putTps`` and ``getTransferedTps`` as three
rates, "10 s, 1 min, 10 min" (``"%.4f %.4f %.4f"``, messages per second; ``clusterList``
prints the first as InTPS/OutTPS), from its ``StatsItem`` snapshots; ``VIEW_BROKER_STATS_DATA``
(315) answers ``BROKER_PUT_NUMS`` and ``BROKER_GET_NUMS`` (key: the cluster name) over about
the last minute, hour and day (``traffic_stats.StatsData``). ``TpsSampler`` derives both from
the totals the broker already counts and ``/metrics`` exports (``runtime.Counters.messages_in``,
stored messages, and ``messages_out``, messages handed to consumers): ``sample()`` (once a
second, ``RemotingService.run``) keeps a ring of (monotonic time, in, out), and one sample per
``COARSE_RINGS`` interval in two coarser rings; a window's figure is the difference between
now and the oldest sample inside it, per second of the time between them.

Invariants: the rings hold at most ``SAMPLES_MAX`` fine samples (just over 10 minutes at one a
second), 7 ten-minute and 25 hourly ones; while the broker is younger than a window, the
figure is taken over the time it has (0 before two samples exist); counters only grow, so
figures are never negative.
"""

from __future__ import annotations

import collections
import dataclasses
import time
from collections.abc import Callable

from ariane.broker.tables import traffic_stats

SAMPLE_INTERVAL_S = 1.0
"""How often ``RemotingService.run`` samples the totals."""

WINDOWS_S = (10.0, 60.0, 600.0)
"""RocketMQ's three ``putTps`` windows: 10 s, 1 min, 10 min."""

SAMPLES_MAX = 602
"""Fine ring size: 10 minutes of one sample a second, plus the ends."""

COARSE_RINGS = ((600.0, 7), (3600.0, 25))
"""(interval s, samples) of the hour and day rings: RocketMQ's ``samplingInMinutes`` (every
10 min, 7 kept) and ``samplingInHour`` (every hour, 25 kept)."""

STATS_WINDOWS_S = (60.0, 3600.0, 86400.0)
"""The minute, hour and day windows of ``stats``."""


@dataclasses.dataclass(frozen=True, slots=True)
class _Sample:
    at_s: float
    messages_in: int
    messages_out: int


class TpsSampler:
    """Rates of the broker's message totals over RocketMQ's windows.

    Args:
        totals: returns (messages stored, messages delivered) since start.
        monotonic_s: the clock, in seconds (``time.monotonic``; tests pass their own).
    """

    def __init__(
        self,
        totals: Callable[[], tuple[int, int]],
        monotonic_s: Callable[[], float] = time.monotonic,
    ) -> None:
        self._totals = totals
        self._now_s = monotonic_s
        self._ring: collections.deque[_Sample] = collections.deque(maxlen=SAMPLES_MAX)
        self._coarse = tuple(collections.deque[_Sample](maxlen=size) for _, size in COARSE_RINGS)

    def sample(self) -> None:
        """Record the totals now (and in each coarse ring whose interval passed)."""
        messages_in, messages_out = self._totals()
        now = _Sample(self._now_s(), messages_in, messages_out)
        self._ring.append(now)
        for (interval_s, _), ring in zip(COARSE_RINGS, self._coarse, strict=True):
            if not ring or now.at_s - ring[-1].at_s >= interval_s:
                ring.append(now)

    def rates(self) -> tuple[tuple[float, ...], tuple[float, ...]]:
        """(put rates, delivered rates), each per ``WINDOWS_S`` window, messages per second,
        taking a sample first so the newest figures count."""
        self.sample()
        puts, gets = [], []
        for window_s in WINDOWS_S:
            put, got = _growth(self._ring, self._ring[-1], window_s)
            puts.append(put.tps)
            gets.append(got.tps)
        return tuple(puts), tuple(gets)

    def stats(self) -> tuple[traffic_stats.StatsData, traffic_stats.StatsData]:
        """(``BROKER_PUT_NUMS``, ``BROKER_GET_NUMS``) over ``STATS_WINDOWS_S``, taking a sample
        first; ``avgpt`` is 0.0, as RocketMQ's (those items count no calls)."""
        self.sample()
        newest = self._ring[-1]
        rings = (self._ring, *self._coarse)
        found = [
            _growth(ring, newest, window_s)
            for ring, window_s in zip(rings, STATS_WINDOWS_S, strict=True)
        ]
        puts = traffic_stats.StatsData(*(put for put, _ in found))
        gets = traffic_stats.StatsData(*(got for _, got in found))
        return puts, gets


def _growth(
    ring: collections.deque[_Sample], newest: _Sample, window_s: float
) -> tuple[traffic_stats.Snapshot, traffic_stats.Snapshot]:
    """(stored, delivered) growth from the oldest sample of ``ring`` inside ``window_s`` to
    ``newest``."""
    oldest = next((s for s in ring if newest.at_s - s.at_s <= window_s), newest)
    span_s = newest.at_s - oldest.at_s
    if span_s <= 0:
        return traffic_stats.ZERO, traffic_stats.ZERO
    put = max(0, newest.messages_in - oldest.messages_in)
    got = max(0, newest.messages_out - oldest.messages_out)
    return (
        traffic_stats.Snapshot(put, put / span_s, 0.0),
        traffic_stats.Snapshot(got, got / span_s, 0.0),
    )


def rocketmq_text(rates: tuple[float, ...]) -> str:
    """Three rates as RocketMQ prints them: ``"%.4f %.4f %.4f"``."""
    return " ".join(f"{rate:.4f}" for rate in rates)
