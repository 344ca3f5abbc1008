"""Settings of scheduled delivery: the classic delay levels and the timer (``ScheduleSettings``).

One frozen dataclass, a docstring per field naming the RocketMQ setting it mirrors; every count,
size and interval is bounded and ``__post_init__`` refuses values outside the bounds with
``ValueError`` (once, at load time). ``message_delay_level`` keeps RocketMQ's text form
(``"1s 5s 10s … 2h"``); ``delay_levels_ms`` is its parsed value.
"""

from __future__ import annotations

import dataclasses

from ariane.common import limits

DEFAULT_MESSAGE_DELAY_LEVEL = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
"""RocketMQ's ``messageDelayLevel`` default (18 levels)."""

DELAY_LEVELS_MAX = 64
"""Most delay levels a configuration may define, a count (one schedule queue each)."""

_UNIT_MS = {"ms": 1, "s": 1_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def parse_delay_levels(text: str) -> tuple[int, ...]:
    """The delays of a ``messageDelayLevel`` text, in ms.

    Args:
        text: space-separated durations with a unit each: ``ms``, ``s``, ``m``, ``h`` or ``d``
            (RocketMQ's ``ScheduleMessageService.parseDelayLevel``).

    Raises:
        ValueError: an empty list, more than ``DELAY_LEVELS_MAX`` levels, a word that is not a
            positive number with a known unit.
    """
    words = text.split()
    if not 1 <= len(words) <= DELAY_LEVELS_MAX:
        raise ValueError(f"message_delay_level needs 1..{DELAY_LEVELS_MAX} levels, got {text!r}")
    delays: list[int] = []
    for word in words:
        unit = "ms" if word.endswith("ms") else word[-1:]
        number = word[: -len(unit)]
        if unit not in _UNIT_MS or not number.isdigit() or int(number) <= 0:
            raise ValueError(f"delay level {word!r} is not a positive number with ms/s/m/h/d")
        delays.append(int(number) * _UNIT_MS[unit])
    return tuple(delays)


@dataclasses.dataclass(frozen=True, slots=True)
class ScheduleSettings:
    """Delay levels (RocketMQ ``ScheduleMessageService``) and timer messages (RocketMQ 5
    ``TimerMessageStore``)."""

    message_delay_level: str = DEFAULT_MESSAGE_DELAY_LEVEL
    """The delay of each level, level 1 first (RocketMQ ``messageDelayLevel``); one queue of
    ``SCHEDULE_TOPIC_XXXX`` per level."""

    timer_delay_ms_max: int = 24 * 3_600_000
    """Latest delivery time accepted, ms after the send; later answers ILLEGAL_DELIVERY_TIME
    (the proxy's ``maxDelayTimeMills`` = 1 day, which the documentation states; the broker's
    ``timerMaxDelaySec`` is 3 days)."""

    timer_precision_ms: int = 1_000
    """A delivery time closer than this is stored for delivery at once, ms (RocketMQ
    ``timerPrecisionMs`` = 1000)."""

    tick_ms: int = 100
    """Longest sleep of the delivery loop between scans, ms: the added lateness of a due
    message is at most this plus the time to store it."""

    timer_pending_max: int = 200_000
    """Most timer messages held in the in-memory wheel, a count; above it a DELAY send answers
    TOO_MANY_REQUESTS (RocketMQ's ``timerCongestNumEachSlot`` flow control) and the timer topic
    is read into the wheel as entries leave it. At most 500 000, so the timer log of a full
    wheel (about 75 bytes an entry) stays readable."""

    deliver_batch_max: int = 256
    """Most due messages written to their topics in one store batch, a count."""

    timer_log_bytes_max: int = 32 * 1024 * 1024
    """Size at which the timer log (``<store>/timer/timerlog``) is rewritten with only the live
    entries, bytes; at most 48 MiB, so a log compacted of a full wheel still reads back under the
    64 MiB metadata-file limit."""

    delay_levels_ms: tuple[int, ...] = dataclasses.field(init=False, default=())
    """``message_delay_level`` parsed, ms (derived, not set)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "delay_levels_ms", parse_delay_levels(self.message_delay_level))
        limits.check_range("timer_delay_ms_max", self.timer_delay_ms_max, 1_000, 7 * 86_400_000)
        limits.check_range("timer_precision_ms", self.timer_precision_ms, 1, 60_000)
        limits.check_range("tick_ms", self.tick_ms, 10, 1_000)
        limits.check_range("timer_pending_max", self.timer_pending_max, 1, 500_000)
        limits.check_range("deliver_batch_max", self.deliver_batch_max, 1, 4_096)
        limits.check_range(
            "timer_log_bytes_max", self.timer_log_bytes_max, 64 * 1024, 48 * 1024 * 1024
        )
