"""``RetentionService``: the store's retention pass (``CleanCommitLogService``), periodically.

Mirrors RocketMQ's ``DefaultMessageStore.cleanFilesPeriodically``, scheduled every
``cleanResourceInterval`` (10 s): the store decides what to delete (``store.clean_service``:
expired segments at ``delete_when``, disk watermarks, what subscribed groups still need, per-topic
retention); this loop only says when.

Invariant: one pass per ``clean_resource_interval_ms`` at most, after the first pause; a failed
pass is not caught here, so it ends the broker's task group as it always did.
"""

from __future__ import annotations

import asyncio

from ariane.store import clean_service


class RetentionService:
    """Runs ``cleaner.run_once`` every ``interval_ms`` until cancelled.

    Args:
        cleaner: the store's retention (RocketMQ ``CleanCommitLogService``).
        interval_ms: pause before each pass, ms (``[retention] clean_resource_interval_ms``).
    """

    def __init__(self, cleaner: clean_service.CleanCommitLogService, *, interval_ms: int) -> None:
        self._cleaner = cleaner
        self._interval_ms = interval_ms

    async def run(self) -> None:
        """Sleep ``interval_ms``, then one retention pass; until cancelled."""
        while True:
            await asyncio.sleep(self._interval_ms / 1000)
            self._cleaner.run_once()
