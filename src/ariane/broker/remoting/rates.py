"""Live messages-per-second figures for ``mqadmin brokerStatus`` and ``clusterList``.

RocketMQ's ``GET_BROKER_RUNTIME_INFO`` answers ``putTps`` and ``getTransferedTps`` as three
rates, "10 s, 1 min, 10 min" (``"%.4f %.4f %.4f"``, messages per second; ``clusterList``
prints the first as InTPS/OutTPS), from its ``StatsItem`` snapshots. ``TpsSampler`` derives the
same from the totals the broker already counts (``runtime.Counters.messages_in``, stored
messages, and ``messages_out``, messages handed to consumers): ``sample()`` (once a second,
``RemotingService.run``) keeps a ring of (monotonic time, in, out); a rate over a window is
the difference between now and the oldest sample inside it, divided by the time between them.

Invariants: the ring holds at most ``SAMPLES_MAX`` samples (just over 10 minutes at one a
second); while the broker is younger than a window, the rate is taken over the time it has
(0 before two samples exist); counters only grow, so rates are never negative.
"""

from __future__ import annotations

import collections
import dataclasses
import time
from collections.abc import Callable

SAMPLE_INTERVAL_S = 1.0
"""How often ``RemotingService.run`` samples the totals."""

WINDOWS_S = (10.0, 60.0, 600.0)
"""RocketMQ's three windows: 10 s, 1 min, 10 min."""

SAMPLES_MAX = 602
"""Ring size: 10 minutes of one sample a second, plus the ends."""


@dataclasses.dataclass(frozen=True, slots=True)
class _Sample:
    at_s: float
    messages_in: int
    messages_out: int


class TpsSampler:
    """Rates of the broker's message totals over RocketMQ's three windows.

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

    def sample(self) -> None:
        """Record the totals now."""
        messages_in, messages_out = self._totals()
        self._ring.append(_Sample(self._now_s(), messages_in, messages_out))

    def rates(self) -> tuple[tuple[float, ...], tuple[float, ...]]:
        """(put rates, delivered rates), each per ``WINDOWS_S`` window, messages per second,
        taking a sample first so the newest figures count."""
        self.sample()
        newest = self._ring[-1]
        puts, gets = [], []
        for window_s in WINDOWS_S:
            oldest = next((s for s in self._ring if newest.at_s - s.at_s <= window_s), newest)
            span_s = newest.at_s - oldest.at_s
            if span_s <= 0:
                puts.append(0.0)
                gets.append(0.0)
                continue
            puts.append(max(0, newest.messages_in - oldest.messages_in) / span_s)
            gets.append(max(0, newest.messages_out - oldest.messages_out) / span_s)
        return tuple(puts), tuple(gets)


def rocketmq_text(rates: tuple[float, ...]) -> str:
    """Three rates as RocketMQ prints them: ``"%.4f %.4f %.4f"``."""
    return " ".join(f"{rate:.4f}" for rate in rates)
