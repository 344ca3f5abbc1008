"""Broker-initiated oneway requests to classic clients, sent by one owned loop.

``NOTIFY_CONSUMER_IDS_CHANGED`` (40) and ``CHECK_TRANSACTION_STATE`` (39) are decided in
synchronous code (a connection's close callback, the transaction check pass); they are queued
here and ``Outbox.run`` sends them. Invariants: the queue holds at most ``pushes_max`` requests
(``push`` answers False when full, never grows); a closed connection's pushes are dropped; one
failed send never stops the loop.
"""

from __future__ import annotations

import asyncio
import logging

from ariane.remoting import command, transport

_log = logging.getLogger(__name__)

PUSHES_MAX = 10_000
"""Most oneway requests waiting to be sent."""


class Outbox:
    """A bounded queue of (connection, oneway request) and the loop that sends them.

    Args:
        pushes_max: the queue bound.
    """

    def __init__(self, pushes_max: int = PUSHES_MAX) -> None:
        self._queue: asyncio.Queue[tuple[transport.Connection, command.RemotingCommand]] = (
            asyncio.Queue(maxsize=pushes_max)
        )

    def push(self, connection: transport.Connection, request: command.RemotingCommand) -> bool:
        """Queue ``request`` for ``connection``; False when the queue is full or it closed."""
        if connection.closed:
            return False
        try:
            self._queue.put_nowait((connection, request))
        except asyncio.QueueFull:
            _log.warning("outbox full: dropping request %d to %s", request.code, connection)
            return False
        return True

    async def run(self) -> None:
        """Send queued requests until cancelled."""
        while True:
            connection, request = await self._queue.get()
            try:
                await connection.send_oneway(request)
            except transport.TransportError as exc:
                _log.debug("push %d to %s failed: %s", request.code, connection.remote_address, exc)
