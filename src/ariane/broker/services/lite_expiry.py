"""TTL expiry of idle lite topics (RocketMQ 5.5, RIP-83; ``tables.lite_topics``).

Every ``expiry_interval_ms`` one pass looks at up to ``expiry_scan_max`` lite topics (the next
pass goes on from there, so the whole table is covered every ``len / expiry_scan_max``
passes: bounded work per pass whatever the number of lite topics). A lite topic with no send
for ``ttl_ms`` expires unless a group subscribing it still has some of its messages to consume:
the group's committed offset on the parent queue is at or below the lite topic's latest
message, or the group has not read that queue since start (counted as lag: never expire what
someone subscribed and may not have read). An expired lite topic is forgotten with every
subscription to it, and each client that subscribed it is sent a
``NotifyUnsubscribeLiteCommand`` on its Telemetry stream (``notify``; a client without a stream
gets nothing, and its next complete sync no longer finds the lite topic in the broker's set).
Its messages stay in the parent's queues until retention deletes the CommitLog segments.

Invariant: a pass never removes a lite topic whose latest message a subscribing group has not
consumed. Time is the injected clock's monotonic time (the table's ``last_active_ms`` is too).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from ariane.broker.pop import service as pop_service_mod
from ariane.broker.tables import lite_settings, lite_topics
from ariane.common import clock, ids

_log = logging.getLogger(__name__)

Lagging = Callable[[ids.GroupName, ids.TopicName, int, int], bool]
"""``(group, parent, queue id, latest offset) -> whether the group has not consumed it``."""

Notify = Callable[[ids.ClientId, str], bool]
"""Push ``NotifyUnsubscribeLiteCommand(lite topic)`` to a client; whether it was queued."""


def pop_lag(pop_service: pop_service_mod.PopService) -> Lagging:
    """The lag rule over the broker's POP states (module docstring)."""

    def lagging(group: ids.GroupName, parent: ids.TopicName, queue_id: int, last: int) -> bool:
        if last < 0:
            return False
        state = pop_service.existing_state(group)
        queue = ids.QueueId(queue_id)
        if state is None or not state.is_open(parent, queue):
            return True
        return state.committed_offset(parent, queue) <= last

    return lagging


class LiteExpiryService:
    """The expiry loop (module docstring).

    Args:
        table: the broker's lite topics.
        settings: TTL, pass interval and pass size.
        lagging: whether a group still has a lite topic's latest message to consume.
        notify: pushes the unsubscribe command to a client.
        time: the clock (monotonic ms, as the table's).
    """

    def __init__(
        self,
        *,
        table: lite_topics.LiteTopicTable,
        settings: lite_settings.LiteSettings,
        lagging: Lagging,
        notify: Notify,
        time: clock.Clock,
    ) -> None:
        self._table = table
        self._settings = settings
        self._lagging = lagging
        self._notify = notify
        self._clock = time

    def run_once(self) -> int:
        """One pass; returns how many lite topics expired."""
        settings = self._settings
        now_ms = self._clock.monotonic_ms()
        candidates = self._table.expiry_candidates(
            now_ms, settings.ttl_ms, settings.expiry_scan_max
        )
        expired = 0
        for parent, name, record in candidates:
            groups = self._table.subscribing_groups(parent, name)
            if any(self._lagging(g, parent, record.queue_id, record.last_offset) for g in groups):
                continue
            for client_id, _ in self._table.remove(parent, name):
                self._notify(client_id, name)
            expired += 1
        if expired:
            _log.info("%d idle lite topics expired (%d left)", expired, len(self._table))
        return expired

    async def run(self) -> None:
        """Pass every ``expiry_interval_ms`` until cancelled."""
        while True:
            await asyncio.sleep(self._settings.expiry_interval_ms / 1000)
            self.run_once()
