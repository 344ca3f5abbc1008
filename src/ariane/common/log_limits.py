"""A bound on log lines that clients can trigger: at most one per key per interval, few in all.

A server logs what it refuses (a malformed request, an RPC it does not implement) so an
operator can see it, but a client can repeat a refusal thousands of times a second; one line per
request would flood the log and cost more than the refusal. ``LineLimiter.allow(key)`` says
whether to write the line for ``key`` (an RPC, or an RPC kind and a client):

* a key is allowed once per ``key_interval_s`` (a very long interval means "once per key");
* at most ``lines_per_window_max`` lines are allowed per ``window_s`` over all keys, so a client
  that changes its identity each request still cannot flood the log;
* at most ``keys_max`` keys are remembered (the least recently logged is forgotten first), so
  the table is bounded whatever the clients send.

Lines not allowed are counted in ``suppressed`` (a caller may report the count). The clock is
injectable; the limiter is not thread-safe (each event loop owns its own).
"""

from __future__ import annotations

import collections
import time
from collections.abc import Callable, Hashable


class LineLimiter:
    """Decides which of many identical log lines are written.

    Args:
        key_interval_s: least time between two lines of the same key, s.
        lines_per_window_max: most lines allowed per window over all keys.
        window_s: the length of that window, s.
        keys_max: most keys remembered.
        clock: monotonic seconds (``time.monotonic``).

    Attributes:
        suppressed: how many lines ``allow`` refused since the limiter was made.
    """

    def __init__(
        self,
        *,
        key_interval_s: float,
        lines_per_window_max: int = 20,
        window_s: float = 60.0,
        keys_max: int = 4096,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        assert key_interval_s > 0 and window_s > 0, "intervals are positive"
        assert lines_per_window_max > 0 and keys_max > 0, "limits allow at least one"
        self._key_interval_s = key_interval_s
        self._lines_per_window_max = lines_per_window_max
        self._window_s = window_s
        self._keys_max = keys_max
        self._clock = clock
        self._last: collections.OrderedDict[Hashable, float] = collections.OrderedDict()
        self._window_start = clock()
        self._window_lines = 0
        self.suppressed = 0

    def __len__(self) -> int:
        """How many keys are remembered (at most ``keys_max``)."""
        return len(self._last)

    def allow(self, key: Hashable) -> bool:
        """Whether the line for ``key`` should be written now; remembers it if so."""
        now = self._clock()
        last = self._last.get(key)
        if last is not None and now - last < self._key_interval_s:
            self.suppressed += 1
            return False
        if now - self._window_start >= self._window_s:
            self._window_start, self._window_lines = now, 0
        if self._window_lines >= self._lines_per_window_max:
            self.suppressed += 1
            return False
        self._window_lines += 1
        self._last[key] = now
        self._last.move_to_end(key)
        if len(self._last) > self._keys_max:
            self._last.popitem(last=False)
        return True
