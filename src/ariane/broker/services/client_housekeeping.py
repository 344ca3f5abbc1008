"""``ClientHousekeepingService``: silent gRPC clients expire, and so do orderly queue locks.

Mirrors RocketMQ's ``ClientHousekeepingService`` (``scanExceptionChannel`` every 10 s): a client
that has sent no heartbeat, Telemetry message or call for ``channel_expired_ms`` is dropped from
the client registry, and the registry's removal listeners drop its consumer-group memberships,
lite subscriptions and queue locks; expired queue locks (``lock_expiry_ms``) are purged in the
same pass. The classic protocol's connections expire in the Remoting adapter
(``remoting.membership``), which owns them.

Invariant: a pass removes only clients silent for longer than ``channel_expired_ms`` (the
registry decides, on the injected clock); one log line per expired client.
"""

from __future__ import annotations

import asyncio
import logging

from ariane.broker import settings as broker_settings
from ariane.broker.tables import clients, queue_locks

_log = logging.getLogger(__name__)


class ClientHousekeepingService:
    """Expires silent clients and stale queue locks every ``expiry_scan_interval_ms``.

    Args:
        registry: the live gRPC client sessions.
        locks: the orderly consumers' queue locks (``None``: none to purge).
        limits: ``[core.consumers]``: ``expiry_scan_interval_ms`` (pause between passes, ms)
            and ``channel_expired_ms`` (silence after which a client expires, ms).
    """

    def __init__(
        self,
        registry: clients.ClientRegistry,
        locks: queue_locks.RebalanceLockManager | None,
        limits: broker_settings.ConsumerSettings,
    ) -> None:
        self._registry = registry
        self._locks = locks
        self._limits = limits

    def run_once(self) -> None:
        """One pass: expire the silent clients (logged), purge the expired locks."""
        for client_id in self._registry.expire():
            _log.info(
                "client %s expired after %d ms of silence",
                client_id,
                self._limits.channel_expired_ms,
            )
        if self._locks is not None:
            self._locks.purge_expired()

    async def run(self) -> None:
        """Sleep ``expiry_scan_interval_ms``, then one pass; until cancelled."""
        while True:
            await asyncio.sleep(self._limits.expiry_scan_interval_ms / 1000)
            self.run_once()
