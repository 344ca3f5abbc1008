"""The clock seam: everything that reads time takes a ``Clock`` so tests can inject one.

Invariant: ``monotonic_ms`` never goes backwards; ``now_ms`` is wall time and may jump.
"""

from __future__ import annotations

import time
from typing import Protocol

from ariane.common import ids


class Clock(Protocol):
    """Source of wall and monotonic time, in milliseconds."""

    def now_ms(self) -> ids.TimestampMs:
        """Wall-clock time in ms since the Unix epoch (store and born timestamps)."""
        ...

    def monotonic_ms(self) -> int:
        """Monotonic time in ms (deadlines, intervals); never goes backwards."""
        ...


class SystemClock:
    """The real clock of this process."""

    def now_ms(self) -> ids.TimestampMs:
        """Wall-clock time in ms since the Unix epoch."""
        return ids.TimestampMs(time.time_ns() // 1_000_000)

    def monotonic_ms(self) -> int:
        """``time.monotonic_ns`` in ms."""
        return time.monotonic_ns() // 1_000_000


class ManualClock:
    """A clock that moves only when told to; for tests of expiry, scans and deadlines.

    Args:
        start_ms: initial wall time in ms since the epoch; the monotonic time starts at 0.
    """

    def __init__(self, *, start_ms: int = 1_700_000_000_000) -> None:
        self._wall_ms = start_ms
        self._monotonic_ms = 0

    def now_ms(self) -> ids.TimestampMs:
        """The current manual wall time in ms."""
        return ids.TimestampMs(self._wall_ms)

    def monotonic_ms(self) -> int:
        """The current manual monotonic time in ms."""
        return self._monotonic_ms

    def advance_ms(self, delta_ms: int) -> None:
        """Move both clocks forward by ``delta_ms`` (must be >= 0).

        Raises:
            ValueError: if ``delta_ms`` is negative (monotonic time never goes back).
        """
        if delta_ms < 0:
            raise ValueError(f"a clock cannot go backwards (delta_ms={delta_ms})")
        self._wall_ms += delta_ms
        self._monotonic_ms += delta_ms
