"""Wall-clock jumps for one chaos broker: loaded by Python at start-up (``sitecustomize``) when
``e2e/chaos/clockshim`` is first on that broker's ``PYTHONPATH`` (``e2e.chaos.clock`` puts it
there), it offsets ``time.time_ns`` and ``time.time`` by the integer milliseconds written in the
file ``ARIANE_CHAOS_CLOCK_FILE`` (re-read at most every ``RECHECK_NS``; a missing or unreadable
file counts as 0).

Why not libfaketime: Debian's 0.9.10 fails Python's ``time.sleep`` (``clock_nanosleep`` answers
EINVAL) unless it also fakes the monotonic clocks, and faking those moves asyncio's clock too (a
backwards jump freezes every timer), which is not what a wall-clock step (NTP, an operator's
``date -s``) does. Every wall-clock read of Ariane goes through ``time.time_ns``
(``common.clock.SystemClock``), so offsetting it is the jump the broker sees; the monotonic
clocks and the kernel's are untouched.

Invariant: without ``ARIANE_CHAOS_CLOCK_FILE`` in the environment nothing is patched.
"""

from __future__ import annotations

import os
import time

RECHECK_NS = 100_000_000
"""Least time between two reads of the offset file, ns."""


def _install(path: str) -> None:
    real_time_ns = time.time_ns
    state = {"offset_ns": 0, "checked_ns": -RECHECK_NS}

    def offset_ns() -> int:
        now = time.monotonic_ns()
        if now - state["checked_ns"] >= RECHECK_NS:
            state["checked_ns"] = now
            try:
                with open(path, encoding="ascii") as file:
                    state["offset_ns"] = int(file.read().strip() or 0) * 1_000_000
            except (OSError, ValueError):
                state["offset_ns"] = 0
        return state["offset_ns"]

    def time_ns() -> int:
        return real_time_ns() + offset_ns()

    def time_s() -> float:
        return time_ns() / 1e9

    time.time_ns = time_ns
    time.time = time_s


if os.environ.get("ARIANE_CHAOS_CLOCK_FILE"):
    _install(os.environ["ARIANE_CHAOS_CLOCK_FILE"])
