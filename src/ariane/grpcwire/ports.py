"""How a ``grpc.aio`` server is exposed on ``HOST:PORT`` in each ``[tls]`` mode.

* ``disabled``: ``add_insecure_port`` on the TCP address (no TLS).
* ``enforcing``: ``add_secure_port`` with ``grpcwire.tls.server_credentials`` (grpcio's C core
  does TLS and reloads rotated certificates; a plaintext client fails its handshake; no Python
  in the data path).
* ``permissive``: grpcio cannot tell TLS from plaintext on one port, so the server listens on
  two Linux abstract Unix sockets (named ``ariane-grpc-<pid>-<random>-tls`` / ``-plain``; no file
  system entry, so nothing is left behind when the process is SIGKILLed): one secure (same
  credentials), one plaintext;
  an asyncio front (``PermissiveFront``) listens on the TCP port, waits for a connection's first
  byte and, by ``common.tls.classify_first_byte`` (``0x16`` = TLS handshake record, RocketMQ's
  ``TlsModeHandler`` rule), splices the raw bytes, unchanged, to one socket or the other. The
  front never decrypts anything; grpcio terminates TLS behind it.

**The cost of ``permissive``** (a migration mode, for the time clients move to TLS): every
byte of every gRPC call crosses this process's event loop twice (client → front → grpcio and
back), one extra local hop per call, CPU for the copies (front-end workers each run their own
front, so the cost is spread like the calls), and grpcio sees a Unix-socket peer instead of the
client's address (``context.peer()`` is ``unix:``; IP-range ACL entries cannot match the real
client address in this mode). Run ``enforcing`` when every client speaks TLS.

Bounds: at most ``CONNECTIONS_MAX`` client connections spliced at once (more are closed at
accept); a connection that sends nothing for ``handshake_timeout_ms`` is closed.

Who can reach the two sockets: any process in the same network namespace that guesses the
random name, exactly as it can reach the public TCP port that serves the same two things in
this mode, so the sockets add no way in (their peer address is ``unix:`` either way).

Ownership: a ``ServedPort`` owns its front and the splices; ``stop`` ends them (after the
caller stopped the gRPC server, so calls in flight drained through the splices first); the
abstract sockets go with the server.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets

import grpc

from ariane.common import event_loop, log_limits, tls
from ariane.common.splice import Splice
from ariane.grpcwire import server as grpc_server
from ariane.grpcwire import tls as grpc_tls

_log = logging.getLogger(__name__)

CONNECTIONS_MAX = 65_536
"""Client connections a permissive front splices at once."""

SOCKET_NAME_PREFIX = "ariane-grpc-"
"""Name prefix of a permissive port's two abstract Unix sockets."""


class _Sniff(asyncio.Protocol):
    """Waits for a connection's first byte, then splices it to the TLS or plaintext socket."""

    def __init__(self, front: PermissiveFront) -> None:
        self.front = front
        self.transport: asyncio.Transport | None = None
        self.timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = event_loop.stream_transport(transport)
        if len(self.front.splices) >= 2 * CONNECTIONS_MAX:
            self.front.refuse(("busy",), f"more than {CONNECTIONS_MAX} connections")
            transport.close()
            return
        self.timer = asyncio.get_running_loop().call_later(
            self.front.first_byte_timeout_s, transport.close
        )

    def data_received(self, data: bytes) -> None:
        if not data or self.transport is None or self.transport.get_protocol() is not self:
            return
        if self.timer is not None:
            self.timer.cancel()
        self.front.splice(self.transport, data)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.timer is not None:
            self.timer.cancel()


class PermissiveFront:
    """Listens on a TCP port and splices each connection, by its first byte, to the gRPC
    server's TLS Unix socket or its plaintext one.

    Args:
        tls_path: the secure Unix socket (an abstract one starts with a NUL byte).
        plain_path: the plaintext Unix socket.
        first_byte_timeout_s: longest wait for a connection's first byte.
    """

    def __init__(self, tls_path: str, plain_path: str, *, first_byte_timeout_s: float) -> None:
        self._paths = {
            tls.FirstByteVerdict.TLS: tls_path,
            tls.FirstByteVerdict.PLAINTEXT: plain_path,
        }
        self.first_byte_timeout_s = first_byte_timeout_s
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._limiter = log_limits.LineLimiter(key_interval_s=60.0)
        self.splices: set[Splice] = set()
        self.tls_accepted = 0
        self.plaintext_accepted = 0
        self.refused = 0
        """Connections spliced as TLS / plaintext, and closed at accept or on a failure."""

    async def start(self, host: str, port: int, *, reuse_port: bool = False) -> int:
        """Listen on ``host:port`` (0 picks one; ``reuse_port`` joins a reserved port);
        returns the bound port.

        Raises:
            OSError: the address cannot be bound.
        """
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: _Sniff(self), host or None, port, reuse_port=reuse_port or None
        )
        return int(self._server.sockets[0].getsockname()[1])

    def refuse(self, key: tuple[object, ...], message: str) -> None:
        """Count a refused connection and log it (rate-limited)."""
        self.refused += 1
        if self._limiter.allow(key):
            _log.warning("permissive gRPC port: %s", message)

    def splice(self, client: asyncio.Transport, first: bytes) -> None:
        """Hand ``client`` (whose first bytes are ``first``) to the socket its first byte names."""
        verdict = tls.classify_first_byte(first[0], tls.TlsMode.PERMISSIVE)
        inbound = Splice(self.splices)
        client.set_protocol(inbound)
        inbound.connection_made(client)
        inbound.data_received(first)
        client.pause_reading()  # until the gRPC side is connected
        if verdict is tls.FirstByteVerdict.TLS:
            self.tls_accepted += 1
        else:
            self.plaintext_accepted += 1
        task = asyncio.get_running_loop().create_task(
            self._connect(client, inbound, self._paths[verdict])
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _connect(self, client: asyncio.Transport, inbound: Splice, path: str) -> None:
        loop = asyncio.get_running_loop()
        try:
            _, outbound = await loop.create_unix_connection(lambda: Splice(self.splices), path)
        except OSError as exc:
            self.refuse(("connect",), f"cannot reach the gRPC server at {path}: {exc}")
            client.close()
            return
        outbound.attach(inbound)
        inbound.attach(outbound)
        if client.is_closing():
            assert outbound.transport is not None
            outbound.transport.close()
            return
        client.resume_reading()

    def stop_accepting(self) -> None:
        """Close the listening socket (open splices keep going)."""
        if self._server is not None:
            self._server.close()

    async def close(self) -> None:
        """Stop listening and close every splice."""
        self.stop_accepting()
        for splice in list(self.splices):
            if splice.transport is not None:
                splice.transport.close()
        for task in list(self._tasks):
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()


class ServedPort:
    """A gRPC server's public port in ``server_tls``'s mode (``None``: plaintext).

    Args:
        listen: ``HOST:PORT``.
        server_tls: the process's ``ServerTls``, or ``None`` for ``disabled``.
        reuse_port: join a port reserved with ``grpc_server.reserve_port`` (front-end workers).
    """

    def __init__(
        self, listen: str, server_tls: tls.ServerTls | None, *, reuse_port: bool = False
    ) -> None:
        self._listen = listen
        self._tls = server_tls
        self._reuse_port = reuse_port
        self.front: PermissiveFront | None = None
        """The splicing front in ``permissive`` mode, once started."""

    @property
    def mode(self) -> tls.TlsMode:
        """The port's mode."""
        return tls.TlsMode.DISABLED if self._tls is None else self._tls.mode

    async def start(self, server: grpc.aio.Server) -> int:
        """Bind ``server`` for this mode, start it, then the front; returns the public port.

        Raises:
            OSError: the address cannot be bound.
        """
        if self._tls is None or self._tls.mode is not tls.TlsMode.PERMISSIVE:
            credentials = None if self._tls is None else grpc_tls.server_credentials(self._tls)
            port = grpc_server.bind(server, self._listen, credentials=credentials)
            await server.start()
            return port
        name = f"{SOCKET_NAME_PREFIX}{os.getpid()}-{secrets.token_hex(8)}"
        grpc_server.bind_unix_abstract(
            server, f"{name}-tls", grpc_tls.server_credentials(self._tls)
        )
        grpc_server.bind_unix_abstract(server, f"{name}-plain", None)
        await server.start()
        self.front = PermissiveFront(
            f"\0{name}-tls",
            f"\0{name}-plain",
            first_byte_timeout_s=self._tls.settings.handshake_timeout_ms / 1000,
        )
        host, port = grpc_server.parse_listen(self._listen)
        return await self.front.start(host, port, reuse_port=self._reuse_port)

    def stop_accepting(self) -> None:
        """Stop taking new connections on the front (before the gRPC server's graceful stop)."""
        if self.front is not None:
            self.front.stop_accepting()

    async def stop(self) -> None:
        """Close the front's splices (after the server stopped)."""
        if self.front is not None:
            await self.front.close()
