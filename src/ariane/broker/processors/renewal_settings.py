"""Settings of server-side invisible-time renewal and of ``attempt_id`` re-receives.

One frozen dataclass, included in ``settings.BrokerSettings`` as ``renewal`` (TOML table
``[renewal]``). The renewal defaults are the RocketMQ 5 proxy's (``ProxyConfig``:
``renewSchedulePeriodMillis``, ``renewAheadTimeMillis``, ``renewMaxTimeMillis``,
``invisibleTimeMillisWhenClear``, and ``RenewStrategyPolicy``'s 1m 3m 5m 10m 30m 1h); every
value has a bound, refused with ``ValueError`` at load time.
"""

from __future__ import annotations

import dataclasses

from ariane.common import limits

RENEW_DELAYS_MS_DEFAULT = (60_000, 180_000, 300_000, 600_000, 1_800_000, 3_600_000)
"""The proxy's ``RenewStrategyPolicy``: the invisible time of renewal n (1-based) is entry
n-1, the last one repeating, in ms."""


@dataclasses.dataclass(frozen=True, slots=True)
class RenewalSettings:
    """How a push consumer's received messages stay invisible while its listener runs
    (proxy ``DefaultReceiptHandleManager``), and how retried receives are recognised."""

    renew_period_ms: int = 5_000
    """Pause between two scans of the tracked receipt handles, ms
    (``renewSchedulePeriodMillis`` = 5 s)."""

    renew_ahead_ms: int = 10_000
    """A handle is renewed once its message would become visible within this time, ms
    (``renewAheadTimeMillis`` = 10 s)."""

    renew_max_ms: int = 3 * 3_600_000
    """Time after the receive past which a message is no longer renewed: it is made visible
    again after the group's retry backoff (a failed attempt), ms (``renewMaxTimeMillis`` =
    3 h)."""

    renew_delays_ms: tuple[int, ...] = RENEW_DELAYS_MS_DEFAULT
    """Invisible time each renewal sets, ms; entry n-1 for renewal n, the last repeating
    (``RenewStrategyPolicy``)."""

    clear_invisible_ms: int = 1_000
    """Invisible time set on the messages of a consumer that went away (terminated, its
    Telemetry stream closed, expired), so another consumer gets them soon, ms
    (``invisibleTimeMillisWhenClear`` = 1 s)."""

    handles_max: int = 200_000
    """Most receipt handles tracked for renewal at once, a count; a message received beyond
    it is not renewed (it keeps its invisible time) and a warning says so."""

    attempt_ids_max: int = 4_096
    """Most receive ``attempt_id`` answers remembered at once, a count (each keeps at most 32
    positions and handles, no bodies); the oldest is forgotten first (a retry of it then
    receives anew)."""

    def __post_init__(self) -> None:
        limits.check_range("renew_period_ms", self.renew_period_ms, 10, 60_000)
        limits.check_range("renew_ahead_ms", self.renew_ahead_ms, 0, 3_600_000)
        limits.check_range("renew_max_ms", self.renew_max_ms, 1_000, 24 * 3_600_000)
        if not 1 <= len(self.renew_delays_ms) <= 64:
            raise ValueError("renew_delays_ms needs 1..64 delays")
        for delay_ms in self.renew_delays_ms:
            limits.check_range("renew_delays_ms", delay_ms, 1_000, limits.INVISIBLE_DURATION_MS_MAX)
        limits.check_range("clear_invisible_ms", self.clear_invisible_ms, 1, 3_600_000)
        limits.check_range("handles_max", self.handles_max, 1, 10_000_000)
        limits.check_range("attempt_ids_max", self.attempt_ids_max, 1, 1_000_000)

    def renew_delay_ms(self, renewals: int) -> int:
        """Invisible time of the next renewal after ``renewals`` earlier ones, ms."""
        return self.renew_delays_ms[min(max(0, renewals), len(self.renew_delays_ms) - 1)]
