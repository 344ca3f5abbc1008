"""One TCP port for both protocols: Remoting served here, everything else forwarded to gRPC.

RocketMQ users expect a name server at 9876 for classic (Remoting) clients, and Ariane's gRPC
clients already use that port. The first byte a client sends tells them apart: a Remoting frame
starts with its 4-byte big-endian length, whose high byte is 0 for every frame up to
``FRAME_BYTES_MAX`` (16 MiB); an HTTP/2 client starts with the preface ``PRI * HTTP/2.0``
(``P``), a TLS client with a handshake record (0x16). So a connection whose first byte is 0 is
handed to a ``transport.RemotingServer``; any other is spliced, bytes unchanged, to the gRPC
server listening on an internal address (a Unix socket or a loopback port).

The splice (``common.splice``, shared with the broker's permissive gRPC front) is two
``asyncio.Protocol``s writing into each other's transport, with flow control (a peer that does
not read pauses reading from the other side), half-closes passed on, and either side's close
closing both. It adds one local hop to every gRPC call; the name server
measures it (README, "Classic (Remoting) clients").

TLS (``start``'s ``server_tls``, the name server's ``[tls]``): the listener is a
``common.tls_listener.Listener``, which decides TLS or plaintext by the mode from the very first
byte (0x16) and terminates TLS here; the sniffer above then sees decrypted bytes and tells
Remoting from HTTP/2 as without TLS. The splice to gRPC stays plaintext on the private Unix
socket (or loopback port), so a gRPC client's TLS (ALPN ``h2``) ends at this front, and one
certificate, re-read on change, serves both protocols.

Ownership: the front owns its listening socket, the splices and the Remoting connection tasks;
``close`` ends them all.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Coroutine
from typing import Any

from ariane.common import event_loop, tls, tls_listener
from ariane.common.splice import Splice
from ariane.remoting import transport

_log = logging.getLogger(__name__)

SNIFF_TIMEOUT_S = 30.0
"""A connection that sends nothing for this long is closed before it is classified."""


class _Sniff(asyncio.Protocol):
    """Waits for a connection's first bytes, then hands it to Remoting or to the splice."""

    def __init__(self, front: SharedPortFront) -> None:
        self.front = front
        self.transport: asyncio.Transport | None = None
        self.timer: asyncio.TimerHandle | None = None
        self.decided = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = event_loop.stream_transport(transport)
        self.timer = asyncio.get_running_loop().call_later(SNIFF_TIMEOUT_S, transport.close)

    def data_received(self, data: bytes) -> None:
        if self.decided or not data or self.transport is None:
            return
        self.decided = True
        if self.timer is not None:
            self.timer.cancel()
        if data[0] == 0:
            self.front.hand_to_remoting(self.transport, data)
        else:
            self.front.hand_to_grpc(self.transport, data)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.timer is not None:
            self.timer.cancel()


class SharedPortFront:
    """Listens on one port; serves Remoting itself and splices other connections to gRPC.

    Args:
        remoting: the server that gets Remoting connections.
        grpc_unix_path: the gRPC server's Unix socket, or
        grpc_address: its ``(host, port)`` (exactly one of the two).
    """

    def __init__(
        self,
        remoting: transport.RemotingServer,
        *,
        grpc_unix_path: str = "",
        grpc_address: tuple[str, int] | None = None,
    ) -> None:
        assert bool(grpc_unix_path) != (grpc_address is not None), "one gRPC target"
        self._remoting = remoting
        self._grpc_unix_path = grpc_unix_path
        self._grpc_address = grpc_address
        self._server: asyncio.Server | tls_listener.Listener | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.splices: set[Splice] = set()

    async def start(
        self, host: str, port: int, server_tls: tls.ServerTls | None = None
    ) -> tuple[str, int]:
        """Listen on ``host:port`` (port 0 picks one) with the process's TLS (``None``:
        plaintext); returns the bound address.

        Raises:
            OSError: the address cannot be bound.
        """
        self._server = await tls_listener.create_server(
            lambda: _Sniff(self), host, port, server_tls
        )
        sockname = self._server.sockets[0].getsockname()
        return str(sockname[0]), int(sockname[1])

    def hand_to_remoting(self, client: asyncio.Transport, first: bytes) -> None:
        """Serve ``client`` as a Remoting connection, ``first`` being its first bytes."""
        protocol = transport.stream_protocol()
        reader = protocol.reader
        client.set_protocol(protocol)
        protocol.connection_made(client)
        reader.feed_data(first)
        writer = asyncio.StreamWriter(client, protocol, reader, asyncio.get_running_loop())
        self._own(self._remoting.serve_connection(reader, writer))

    def hand_to_grpc(self, client: asyncio.Transport, first: bytes) -> None:
        """Splice ``client`` to the gRPC server, ``first`` being its first bytes."""
        inbound = Splice(self.splices)
        client.set_protocol(inbound)
        inbound.connection_made(client)
        inbound.data_received(first)
        client.pause_reading()  # until the gRPC side is connected
        self._own(self._connect_grpc(client, inbound))

    async def _connect_grpc(self, client: asyncio.Transport, inbound: Splice) -> None:
        loop = asyncio.get_running_loop()
        try:
            if self._grpc_unix_path:
                _, outbound = await loop.create_unix_connection(
                    lambda: Splice(self.splices), self._grpc_unix_path
                )
            else:
                assert self._grpc_address is not None
                host, port = self._grpc_address
                _, outbound = await loop.create_connection(lambda: Splice(self.splices), host, port)
        except OSError as exc:
            _log.warning("cannot reach the internal gRPC server: %s", exc)
            client.close()
            return
        outbound.attach(inbound)  # what gRPC sent already (its SETTINGS) goes out first
        inbound.attach(outbound)
        if client.is_closing():
            assert outbound.transport is not None
            outbound.transport.close()
            return
        client.resume_reading()

    def _own(self, coroutine: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def close(self) -> None:
        """Stop listening, close every splice and Remoting connection."""
        if self._server is not None:
            self._server.close()
        for splice in list(self.splices):
            if splice.transport is not None:
                splice.transport.close()
        await self._remoting.close()
        for task in list(self._tasks):
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()
