"""``MasterLease``: how long a master may still acknowledge writes (DESIGN.md §7, fencing).

Outside Kubernetes the name servers are the quorum: a master in a group with slaves accepts a
write only while it holds a lease, and the lease is renewed by the broker's registrations and
heartbeats (``broker.services.registration``). A renewal a majority of the configured name
servers answered OK extends the lease to ``sent_ms + lease_ms``, where ``sent_ms`` is the
broker's monotonic time when it SENT that renewal. Every name server that answered counts the
broker as heard from when it RECEIVED it, later than ``sent_ms``; a promotion waits until no
name server of a majority heard the master within ``lease_ms`` (``client.failover``). So the
master's view of its lease always ends first: nobody is promoted while the old master may still
acknowledge, and a master paused (SIGSTOP, a long GC-like stall, a VM freeze) finds its lease
expired the moment it resumes, because the monotonic clock kept running.

Invariants:

* ``held()`` is False until the first renewal: a (re)started master acknowledges nothing before
  a majority of name servers heard it at its epoch (a stale master restarted after a failover
  learns the newer epoch from that first answer instead).
* The lease only moves forward (``extend`` keeps the later end) until ``revoke``.
* Pure: the clock is injected (monotonic ms), no I/O.

RocketMQ has no master lease: in its controller mode a stale master keeps acknowledging until
the controller's ``BrokerHeartbeat`` answer tells it (or never, while it cannot reach the
controller); Ariane bounds that window by ``lease_ms``.
"""

from __future__ import annotations

import time
from collections.abc import Callable


def monotonic_ms() -> int:
    """The process's monotonic clock in ms (keeps running while the process is stopped)."""
    return time.monotonic_ns() // 1_000_000


class MasterLease:
    """The write lease of one master.

    Args:
        lease_ms: how long one renewal is good for, ms (> 0).
        clock: monotonic time in ms (``monotonic_ms``; a fake in tests).
    """

    def __init__(self, *, lease_ms: int, clock: Callable[[], int] = monotonic_ms) -> None:
        assert lease_ms > 0, "a lease lasts some time"
        self.lease_ms = lease_ms
        self._clock = clock
        self._until_ms: int | None = None

    def now_ms(self) -> int:
        """The lease's clock, ms: take it just before sending a renewal."""
        return self._clock()

    def held(self) -> bool:
        """Whether writes may be acknowledged now."""
        return self._until_ms is not None and self._clock() < self._until_ms

    def remaining_ms(self) -> int:
        """Time left on the lease, ms (0 when not held)."""
        if self._until_ms is None:
            return 0
        return max(0, self._until_ms - self._clock())

    def extend(self, sent_ms: int) -> None:
        """A majority answered a renewal sent at ``sent_ms``: hold until ``sent_ms + lease_ms``
        (never earlier than an end already granted)."""
        until_ms = sent_ms + self.lease_ms
        if self._until_ms is None or until_ms > self._until_ms:
            self._until_ms = until_ms

    def revoke(self) -> None:
        """Give the lease up at once (a newer epoch exists, or the broker is no master)."""
        self._until_ms = None
