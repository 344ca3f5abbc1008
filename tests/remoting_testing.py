"""Helpers for Remoting tests: a server on a free loopback port and raw-socket frame reading."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Mapping

from ariane.remoting import command, transport


@contextlib.asynccontextmanager
async def running_server(
    handlers: Mapping[int, transport.Handler],
    *,
    settings: transport.TransportSettings | None = None,
    on_connect: Callable[[transport.Connection], None] | None = None,
) -> AsyncIterator[tuple[transport.RemotingServer, str]]:
    """A ``RemotingServer`` on ``127.0.0.1:<free port>``; yields it and its ``host:port``."""
    server = transport.RemotingServer(handlers, settings=settings, on_connect=on_connect)
    host, port = await server.start("127.0.0.1", 0)
    try:
        yield server, f"{host}:{port}"
    finally:
        await server.close()


async def read_command(
    reader: asyncio.StreamReader, timeout_s: float = 5.0
) -> command.RemotingCommand:
    """Read one frame from a raw stream (fails the test on timeout)."""
    async with asyncio.timeout(timeout_s):
        prefix = await reader.readexactly(4)
        frame = await reader.readexactly(command.read_frame_length(prefix))
    return command.decode_frame(frame)


async def closed_by_peer(reader: asyncio.StreamReader, timeout_s: float = 5.0) -> bool:
    """Whether the peer closes the stream (EOF or reset) within ``timeout_s`` with no data."""
    try:
        async with asyncio.timeout(timeout_s):
            data = await reader.read(1)
    except ConnectionError:
        return True
    return data == b""
