"""The 18 classic delay levels (RocketMQ ``messageDelayLevel``) and delivery-time helpers.

Level n (1-based) waits ``DELAY_LEVELS_MS[n-1]``; levels above 18 are clamped to 18 and levels
below 1 mean "no delay", as in RocketMQ's ScheduleMessageService. Arbitrary delivery times
(5.x timer messages) are bounded by ``TIMER_DELAY_MS_MAX`` (3 days, ``timerMaxDelaySec``).
"""

from __future__ import annotations

from ariane.common import errors

DELAY_LEVELS_MS: tuple[int, ...] = (
    1_000,
    5_000,
    10_000,
    30_000,
    60_000,
    120_000,
    180_000,
    240_000,
    300_000,
    360_000,
    420_000,
    480_000,
    540_000,
    600_000,
    1_200_000,
    1_800_000,
    3_600_000,
    7_200_000,
)
"""``1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h`` in ms."""

DELAY_LEVEL_MAX = len(DELAY_LEVELS_MS)
TIMER_DELAY_MS_MAX = 3 * 24 * 3600 * 1000
"""Longest allowed delay of a timer message (``timerMaxDelaySec`` = 259200 s)."""


def clamp_level(level: int) -> int:
    """Clamp a requested delay level to 0 (no delay) .. 18, as RocketMQ does."""
    return max(0, min(level, DELAY_LEVEL_MAX))


def delay_ms_of_level(level: int) -> int:
    """Delay in ms of a level after clamping; 0 for level <= 0."""
    clamped = clamp_level(level)
    return 0 if clamped == 0 else DELAY_LEVELS_MS[clamped - 1]


def check_delivery_timestamp(*, delivery_ms: int, now_ms: int) -> int:
    """Validate an absolute delivery time of a timer message.

    Args:
        delivery_ms: requested delivery time, ms since the epoch.
        now_ms: current time, ms since the epoch.

    Returns:
        the delay in ms from now (0 if the time has already passed).

    Raises:
        IllegalDeliveryTimeError: if the delivery time is more than 3 days ahead.
    """
    delay_ms = delivery_ms - now_ms
    if delay_ms > TIMER_DELAY_MS_MAX:
        raise errors.IllegalDeliveryTimeError(
            f"delivery time is {delay_ms} ms ahead; the limit is {TIMER_DELAY_MS_MAX} ms (3 days)"
        )
    return max(0, delay_ms)
