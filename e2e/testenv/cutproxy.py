"""A loopback TCP proxy that a test can cut: one dialer's path to one port, partitioned alone.

``CutProxy(target)`` listens on a free ``127.0.0.1`` port and relays every connection to
``target`` (``host:port``) from an asyncio loop in its own thread. ``cut()`` closes every
relayed connection and makes the proxy close each new one at once (the dialer sees its
connection reset: a refused path, as ``e2e.chaos.network`` calls it); ``heal()`` relays again.
Only the dialers pointed at the proxy lose the target: everyone else dials it directly. The
operator's e2e tests point the operator's pod address override at one so that a master is cut
off from the operator alone, not from its clients or name servers.

Invariants: only 127.0.0.0/8 is dialled or listened on; ``stop()`` ends the thread and every
connection (bounded by ``STOP_TIMEOUT_S``).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from typing import Final

from e2e.testenv import processes

STOP_TIMEOUT_S: Final = 10.0
"""Longest wait for the proxy's thread to end, s."""
CHUNK_BYTES: Final = 64 * 1024
"""Largest read relayed at once, bytes."""


class CutProxy:
    """Relays ``127.0.0.1:<port>`` to ``target`` until cut (see the module).

    Args:
        target: ``host:port`` on 127.0.0.0/8 to relay to.
    """

    def __init__(self, target: str) -> None:
        self.target = target
        self.port = processes.free_port()
        self._cut = False
        self._writers: set[asyncio.StreamWriter] = set()
        self._loop = asyncio.new_event_loop()
        self._started = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"cut-proxy-{target}", daemon=True)

    @property
    def endpoint(self) -> str:
        """``127.0.0.1:PORT`` to dial instead of ``target``."""
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        """Listen and relay (in a thread); returns once listening."""
        self._thread.start()
        if not self._started.wait(STOP_TIMEOUT_S):
            raise TimeoutError(f"proxy to {self.target} did not start")

    def cut(self) -> None:
        """Close every relayed connection and refuse new ones until ``heal``."""
        asyncio.run_coroutine_threadsafe(self._set_cut(True), self._loop).result(STOP_TIMEOUT_S)

    def heal(self) -> None:
        """Relay new connections again."""
        asyncio.run_coroutine_threadsafe(self._set_cut(False), self._loop).result(STOP_TIMEOUT_S)

    def stop(self) -> None:
        """Close everything and end the thread."""
        if self._thread.is_alive():
            self.cut()
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(STOP_TIMEOUT_S)

    async def _set_cut(self, cut: bool) -> None:
        self._cut = cut
        if cut:
            for writer in list(self._writers):
                writer.close()
            self._writers.clear()

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(
            asyncio.start_server(self._accept, "127.0.0.1", self.port)
        )
        self._started.set()
        try:
            self._loop.run_forever()
        finally:
            server.close()
            self._loop.close()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._cut:
            writer.close()
            return
        host, port = self.target.rsplit(":", 1)
        try:
            up_reader, up_writer = await asyncio.open_connection(host, int(port))
        except OSError:
            writer.close()
            return
        self._writers.update((writer, up_writer))
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
        self._writers.difference_update((writer, up_writer))


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Copy ``reader`` into ``writer`` until either side closes; then close ``writer``."""
    with contextlib.suppress(OSError, asyncio.IncompleteReadError):
        while chunk := await reader.read(CHUNK_BYTES):
            writer.write(chunk)
            await writer.drain()
    writer.close()
