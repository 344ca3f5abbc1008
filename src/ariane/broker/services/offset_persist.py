"""``ConsumerOffsetPersistService``: committed consumer offsets written to disk periodically.

Mirrors the task RocketMQ's ``BrokerController`` schedules every ``flushConsumerOffsetInterval``
(5 s): ``ConsumerOffsetManager.persist()``. Offsets are committed in memory on every ack and
written here, so a crash loses at most one interval of commits (their messages are delivered
again, at-least-once); a clean stop writes them too (``BrokerRuntime.close``).

Invariant: one write per interval at most, and only when the table changed
(``BrokerRuntime.persist_offsets``: an atomic file replace); a failed write is not caught here,
so it ends the broker's task group as it always did.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable


class ConsumerOffsetPersistService:
    """Writes the consumer-offset table every ``interval_ms`` until cancelled.

    Args:
        persist: writes the table if it changed (``BrokerRuntime.persist_offsets``).
        interval_ms: the pause before each write, ms (``[core.offsets] persist_interval_ms``).
    """

    def __init__(self, persist: Callable[[], None], *, interval_ms: int) -> None:
        self._persist = persist
        self._interval_ms = interval_ms

    async def run(self) -> None:
        """Sleep ``interval_ms``, then persist; until cancelled."""
        while True:
            await asyncio.sleep(self._interval_ms / 1000)
            self._persist()
