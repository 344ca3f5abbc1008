"""An asyncio TCP listener that serves TLS, plaintext or both on one port, by the first byte.

``create_server(protocol_factory, host, port, server_tls)`` is ``loop.create_server`` for a
listener with a ``[tls]`` mode (``common.tls``): without TLS (``server_tls`` ``None``) it *is*
``loop.create_server``, at no cost. With TLS it accepts each connection itself, waits (up to the
handshake timeout) for its first byte, peeks it without consuming it (``MSG_PEEK``), and either
closes the connection (a TLS hello to a ``disabled`` port, a plaintext byte to an ``enforcing``
one: before a single request is read, unlike RocketMQ's bug #10110), hands the socket to
``loop.connect_accepted_socket`` with the current ``ssl`` context (the handshake happens there,
bounded by ``handshake_timeout_ms``), or hands it over as plaintext. ``protocol_factory`` sees
only decrypted bytes; the peer's certificate is ``transport.get_extra_info("peercert")``.

Bounds: at most ``PENDING_MAX`` connections are between accept and protocol at once (more are
closed at accept); refusals and failed handshakes are logged through a ``LineLimiter`` and
counted in ``Listener.refused``.

Ownership: the ``Listener`` owns the listening socket, the accept task and the pending
classifications; ``close`` ends them. Established connections belong to their protocols (as with
``asyncio.Server.close`` in Python 3.11).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Callable
from types import TracebackType

from ariane.common import log_limits, tls

_log = logging.getLogger(__name__)

PENDING_MAX = 1024
"""Most accepted connections not yet classified or handshaken at once."""

BACKLOG = 1024
"""The listening socket's accept backlog."""


class Listener:
    """A listening port that classifies each connection by ``server_tls``'s mode.

    Attributes:
        refused: connections closed by the mode (wrong first byte), a failed handshake, a
            timeout, or over ``PENDING_MAX``, a count.
        tls_accepted: connections served over TLS, a count.
        plaintext_accepted: connections served in plaintext, a count.
    """

    def __init__(
        self,
        sock: socket.socket,
        protocol_factory: Callable[[], asyncio.BaseProtocol],
        server_tls: tls.ServerTls,
    ) -> None:
        self._sock = sock
        self._factory = protocol_factory
        self._tls = server_tls
        self._pending: set[asyncio.Task[None]] = set()
        self._accepting: asyncio.Task[None] | None = None
        self._closed = asyncio.Event()
        self._limiter = log_limits.LineLimiter(key_interval_s=60.0)
        self.refused = 0
        self.tls_accepted = 0
        self.plaintext_accepted = 0

    @property
    def sockets(self) -> tuple[socket.socket, ...]:
        """The listening socket (as ``asyncio.Server.sockets``)."""
        return (self._sock,)

    def start(self) -> None:
        """Begin accepting (``create_server`` calls it)."""
        self._accepting = asyncio.get_running_loop().create_task(self._accept_loop())

    async def _accept_loop(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                conn, address = await loop.sock_accept(self._sock)
            except OSError as exc:  # EMFILE and friends: back off instead of spinning
                self._refuse(("accept", exc.errno), f"accept failed: {exc}")
                await asyncio.sleep(0.1)
                continue
            if len(self._pending) >= PENDING_MAX:
                conn.close()
                self._refuse(("pending",), f"more than {PENDING_MAX} connections in handshake")
                continue
            task = loop.create_task(self._classify(conn, address))
            self._pending.add(task)
            task.add_done_callback(self._pending.discard)

    def _refuse(self, key: tuple[object, ...], message: str) -> None:
        self.refused += 1
        if self._limiter.allow(key):
            _log.warning("%s (%s)", message, self._tls.mode.value)

    async def _first_byte(self, conn: socket.socket) -> int | None:
        """The connection's first byte, peeked; ``None`` at EOF or after the timeout."""
        loop = asyncio.get_running_loop()
        readable: asyncio.Future[None] = loop.create_future()

        def ready() -> None:
            if not readable.done():
                readable.set_result(None)

        loop.add_reader(conn.fileno(), ready)
        try:
            async with asyncio.timeout(self._tls.settings.handshake_timeout_ms / 1000):
                await readable
        except TimeoutError:
            return None
        finally:
            loop.remove_reader(conn.fileno())
        try:
            peeked = conn.recv(1, socket.MSG_PEEK)
        except OSError:
            return None
        return peeked[0] if peeked else None

    async def _classify(self, conn: socket.socket, address: object) -> None:
        peer = address[0] if isinstance(address, tuple) else str(address)
        try:
            conn.setblocking(False)
            first = await self._first_byte(conn)
            if first is None:
                conn.close()
                self._refuse(("silent", peer), f"connection from {peer} sent nothing in time")
                return
            verdict = tls.classify_first_byte(first, self._tls.mode)
            if verdict is tls.FirstByteVerdict.REFUSE:
                conn.close()
                kind = "a TLS hello" if first == tls.TLS_HANDSHAKE_RECORD else "plaintext"
                self._refuse(("mode", peer), f"closed {kind} from {peer} on this port")
                return
            loop = asyncio.get_running_loop()
            if verdict is tls.FirstByteVerdict.PLAINTEXT:
                await loop.connect_accepted_socket(self._factory, conn)
                self.plaintext_accepted += 1
                return
            await loop.connect_accepted_socket(
                self._factory,
                conn,
                ssl=self._tls.context(),
                ssl_handshake_timeout=self._tls.settings.handshake_timeout_ms / 1000,
            )
            self.tls_accepted += 1
        except (OSError, TimeoutError, ConnectionError) as exc:
            conn.close()
            self._refuse(("handshake", peer), f"TLS handshake with {peer} failed: {exc}")

    def close(self) -> None:
        """Stop accepting; connections not yet handed to a protocol are closed."""
        if self._accepting is not None:
            self._accepting.cancel()
        for task in list(self._pending):
            task.cancel()
        self._sock.close()
        self._closed.set()

    async def wait_closed(self) -> None:
        """Wait until ``close`` has run and the accept task ended."""
        await self._closed.wait()
        if self._accepting is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._accepting
        if self._pending:
            await asyncio.gather(*self._pending, return_exceptions=True)

    async def serve_forever(self) -> None:
        """Wait until closed (as ``asyncio.Server.serve_forever``); cancelling closes."""
        try:
            await self._closed.wait()
        finally:
            self.close()

    async def __aenter__(self) -> Listener:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
        await self.wait_closed()


async def create_server(
    protocol_factory: Callable[[], asyncio.BaseProtocol],
    host: str,
    port: int,
    server_tls: tls.ServerTls | None,
) -> asyncio.Server | Listener:
    """Listen on ``host:port`` (0 picks a port) with ``server_tls``'s mode.

    Returns ``loop.create_server``'s ``asyncio.Server`` when ``server_tls`` is ``None``
    (plaintext, ``disabled``), else a started ``Listener``; both have ``sockets``, ``close``,
    ``wait_closed`` and ``serve_forever``.

    Raises:
        OSError: the address cannot be bound.
    """
    loop = asyncio.get_running_loop()
    if server_tls is None:
        return await loop.create_server(protocol_factory, host, port)
    infos = await loop.getaddrinfo(
        host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(BACKLOG)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    listener = Listener(sock, protocol_factory, server_tls)
    listener.start()
    return listener


def stream_server_protocol(
    connected: Callable[[asyncio.StreamReader, asyncio.StreamWriter], object],
    *,
    limit_bytes: int = 1 << 16,
) -> Callable[[], asyncio.BaseProtocol]:
    """A protocol factory that serves ``connected(reader, writer)`` as ``asyncio.start_server``
    does (``limit_bytes`` is the reader's buffer limit)."""

    def factory() -> asyncio.BaseProtocol:
        reader = asyncio.StreamReader(limit=limit_bytes)
        return asyncio.StreamReaderProtocol(reader, connected)  # type: ignore[arg-type]

    return factory
