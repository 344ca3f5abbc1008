"""Remoting over asyncio TCP: a server dispatching frames to a handler table, and a small client.

Not pure (sockets, tasks); the codec modules below it are. Mirrors RocketMQ's
``NettyRemotingServer``/``NettyRemotingClient`` as the classic clients observe them
(remoting.md §1):

* requests on one connection run **concurrently**, each in its own task: a 20 s long poll never
  delays the next request; responses go out in completion order, matched by ``opaque``;
* a response copies the request's ``opaque`` and sets the response flag; **oneway requests are
  never answered**; an unknown code gets REQUEST_CODE_NOT_SUPPORTED, a handler exception
  SYSTEM_ERROR with a remark, more than ``in_flight_requests_max`` requests in flight on one
  connection SYSTEM_BUSY;
* a bad frame (truncated, oversize length, unknown serialize type, garbage JSON) closes that
  connection, as Java's ``NettyDecoder`` does, and nothing else;
* either side may send requests and oneways over an open connection
  (``Connection.request``/``send_oneway``: CHECK_TRANSACTION_STATE, NOTIFY_CONSUMER_IDS_CHANGED);
* close callbacks run once when a connection ends (a consumer registry drops its channels).

Ownership: the server owns its connections, each connection owns its reader task and its
in-flight handler tasks; closing the server closes all. **A request read in full takes effect
whatever becomes of its connection** (Netty runs a received request whatever becomes of its
channel; only the reply is lost): when a connection ends, its in-flight handlers still run, for
at most ``request_finish_s``, and only requests that merely wait for something to answer
(``cancel_on_close_codes``: long polls) are cancelled at once. A Go producer's oneway sends
come without the oneway flag and right before it closes its connection, and the oneway offset
commit of a client shutting down too. Bytes delivered before a connection failed count
as well: ``FrameStreamProtocol`` reads them out of the socket before it ends the stream (asyncio
would drop them when a reply finds the peer reset; not over TLS, where they are ciphertext).

TLS (``[tls]``, ``common.tls``): ``RemotingServer.start`` takes the process's ``ServerTls`` and
listens through ``common.tls_listener`` (the first byte picks TLS or plaintext by the mode; an
``enforcing`` port closes a plaintext connection before reading a frame, unlike RocketMQ's bug
#10110); ``RemotingClient`` takes an ``ssl.SSLContext`` and dials TLS with it. Handlers see
decrypted frames either way.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import logging
import ssl
from collections.abc import Awaitable, Callable, Mapping

from ariane.common import tls, tls_listener
from ariane.remoting import codes
from ariane.remoting import command as cmd_mod

_log = logging.getLogger(__name__)

Handler = Callable[
    ["Connection", cmd_mod.RemotingCommand], Awaitable[cmd_mod.RemotingCommand | None]
]
"""A request handler: the response, or ``None`` to send nothing (a oneway's result is ignored)."""

CloseCallback = Callable[["Connection"], None]
"""Called once, synchronously, when a connection has closed."""

STREAM_LIMIT_BYTES = 2**16
"""Read-buffer limit of a Remoting connection's stream (asyncio's default)."""


UNREAD_INPUT_BYTES_MAX = 2 * cmd_mod.FRAME_BYTES_MAX
"""Most bytes taken from a failed socket's receive queue (more than a kernel buffer holds)."""


class FrameStreamProtocol(asyncio.StreamReaderProtocol):
    """A stream protocol that keeps what the peer sent before the connection failed.

    asyncio drops a socket's unread input when the connection fails: a write that finds the
    peer gone (reset) closes the transport before the bytes already in the socket's receive
    queue are read, and a reset seen by a read makes the stream raise before its buffered bytes.
    Netty hands a channel every byte the kernel delivered before the exception. So a failure
    here reads the receive queue out (non-blocking, at most ``UNREAD_INPUT_BYTES_MAX``) and ends
    the stream after it, as if the peer had closed: whole frames are still handled, a frame cut
    short reads as truncated. The case it exists for: a Go producer sends its last oneways and
    shuts down while the broker's reply to an earlier request is on its way (the client's
    kernel resets the connection on that reply).

    Args:
        reader: the stream the bytes go to.
        on_connect: as ``asyncio.start_server``'s callback (``None`` for a client).
    """

    def __init__(
        self,
        reader: asyncio.StreamReader,
        on_connect: Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
        | None = None,
    ) -> None:
        super().__init__(reader, on_connect, loop=asyncio.get_running_loop())
        self.reader = reader
        """The stream the connection's bytes go to."""
        self._socket_transport: asyncio.BaseTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """Remember ``transport`` (its socket is read out if the connection fails)."""
        self._socket_transport = transport
        super().connection_made(transport)

    def connection_lost(self, exc: Exception | None) -> None:
        """End the stream; after a failure, first feed it the socket's unread input."""
        if exc is not None and self._socket_transport is not None:
            unread = unread_input(self._socket_transport)
            if unread:
                self.reader.feed_data(unread)
            _log.debug("connection failed (%s); %d unread bytes kept", exc, len(unread))
        super().connection_lost(None)


def unread_input(transport: asyncio.BaseTransport) -> bytes:
    """The bytes waiting in ``transport``'s socket receive queue (at most
    ``UNREAD_INPUT_BYTES_MAX``), read without blocking; empty if there is no socket or it has
    nothing more (end of stream, reset after the data, or an error). Empty over TLS too: the
    socket then holds ciphertext, which only the (failed) TLS layer could decrypt."""
    sock = transport.get_extra_info("socket")
    if sock is None or transport.get_extra_info("ssl_object") is not None:
        return b""
    chunks: list[bytes] = []
    total = 0
    try:
        with sock.dup() as copy:  # the same open socket; asyncio's wrapper has no recv
            copy.setblocking(False)
            while total < UNREAD_INPUT_BYTES_MAX:
                chunk = copy.recv(min(STREAM_LIMIT_BYTES, UNREAD_INPUT_BYTES_MAX - total))
                if not chunk:
                    break
                chunks.append(chunk)
                total += len(chunk)
    except OSError:  # BlockingIOError: nothing more now; ECONNRESET: after the data
        pass
    return b"".join(chunks)


def stream_protocol(
    on_connect: Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
    | None = None,
) -> FrameStreamProtocol:
    """A ``FrameStreamProtocol`` on a fresh reader (what ``asyncio.start_server`` and
    ``open_connection`` build, with that protocol); ``on_connect`` as ``start_server``'s."""
    reader = asyncio.StreamReader(limit=STREAM_LIMIT_BYTES, loop=asyncio.get_running_loop())
    return FrameStreamProtocol(reader, on_connect)


@dataclasses.dataclass(frozen=True, slots=True)
class TransportSettings:
    """Bounds of a Remoting endpoint (server or client side)."""

    in_flight_requests_max: int = 1024
    """Requests handled at once per connection; above, SYSTEM_BUSY (RocketMQ's flow control).
    Long polls count: Java push consumers hold one per queue, 32 queues is common."""

    connections_max: int = 4096
    """Open connections a server accepts; further ones are closed at once."""

    idle_timeout_s: float = 120.0
    """A connection with nothing to read for this long is closed (Java
    ``serverChannelMaxIdleTimeSeconds``; clients heartbeat every 30 s)."""

    pending_requests_max: int = 1024
    """Requests this side sent on one connection and still awaits answers for."""

    request_finish_s: float = 5.0
    """How long requests in flight when their connection ends may still run before they are
    cancelled, s (their reply is lost, their effect is expected: a send is stored)."""

    cancel_on_close_codes: frozenset[int] = frozenset()
    """Request codes cancelled at once when their connection ends: requests with no effect
    that wait for something to answer (the broker's long-polling pulls)."""

    def __post_init__(self) -> None:
        assert self.in_flight_requests_max >= 1 and self.connections_max >= 1
        assert self.idle_timeout_s > 0 and self.pending_requests_max >= 1
        assert self.request_finish_s >= 0


class TransportError(Exception):
    """A request sent over Remoting got no response.

    ``TransportError`` ├── ``ConnectionClosedError`` (the connection ended or never opened)
    └── ``RequestTimeoutError`` (no response within the timeout; also a ``TimeoutError``).
    """


class ConnectionClosedError(TransportError):
    """The connection closed before the response came, or could not be opened."""


class RequestTimeoutError(TransportError, TimeoutError):
    """No response within the timeout."""


class Connection:
    """One TCP connection speaking Remoting, on either side.

    Attributes:
        remote_address: the peer as ``ip:port`` (what RocketMQ calls the channel's address).
        attributes: free per-connection state for handlers (e.g. the client id it announced).
    """

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        handlers: Mapping[int, Handler],
        settings: TransportSettings,
        *,
        initial_bytes: bytes = b"",
    ) -> None:
        self._reader = reader
        self._writer = writer
        self._handlers = handlers
        self._settings = settings
        self._buffered = initial_bytes
        self._write_lock = asyncio.Lock()
        self._opaque = itertools.count(1)
        self._pending: dict[int, asyncio.Future[cmd_mod.RemotingCommand]] = {}
        self._in_flight: set[asyncio.Task[None]] = set()
        self._cancel_on_close: set[asyncio.Task[None]] = set()
        self._close_callbacks: list[CloseCallback] = []
        self._closed = asyncio.Event()
        self.attributes: dict[str, object] = {}
        peer = writer.get_extra_info("peername")
        self.remote_address = _format_address(peer)

    @property
    def closed(self) -> bool:
        """Whether the connection has ended."""
        return self._closed.is_set()

    def add_close_callback(self, callback: CloseCallback) -> None:
        """Run ``callback(self)`` once when the connection closes (at once if it already has)."""
        if self.closed:
            callback(self)
        else:
            self._close_callbacks.append(callback)

    async def wait_closed(self) -> None:
        """Return once the connection has closed."""
        await self._closed.wait()

    async def send_oneway(self, command: cmd_mod.RemotingCommand) -> None:
        """Send ``command`` as a oneway request (a fresh opaque, the oneway flag).

        Raises:
            ConnectionClosedError: the connection has closed.
        """
        flag = (command.flag | cmd_mod.ONEWAY_FLAG) & ~cmd_mod.RESPONSE_FLAG
        await self._send(dataclasses.replace(command, opaque=next(self._opaque), flag=flag))

    async def request(
        self, command: cmd_mod.RemotingCommand, timeout_s: float
    ) -> cmd_mod.RemotingCommand:
        """Send ``command`` as a request and wait for its response.

        Args:
            command: the request; its opaque and flag are replaced.
            timeout_s: seconds to wait for the response.

        Raises:
            RequestTimeoutError: no response within ``timeout_s``.
            ConnectionClosedError: the connection closed first, or too many requests of this
                side are pending on it.
        """
        if len(self._pending) >= self._settings.pending_requests_max:
            raise ConnectionClosedError(f"{len(self._pending)} requests pending on the connection")
        opaque = next(self._opaque) & 0x7FFFFFFF
        future: asyncio.Future[cmd_mod.RemotingCommand] = asyncio.get_running_loop().create_future()
        self._pending[opaque] = future
        try:
            await self._send(dataclasses.replace(command, opaque=opaque, flag=0))
            async with asyncio.timeout(timeout_s):
                return await future
        except TimeoutError as exc:
            raise RequestTimeoutError(
                f"no response to code {command.code} in {timeout_s} s"
            ) from exc
        finally:
            self._pending.pop(opaque, None)

    async def close(self) -> None:
        """Close the connection: fail its pending requests, let its in-flight handlers finish
        (at most ``request_finish_s``; ``cancel_on_close_codes`` are cancelled at once)."""
        self._writer.close()
        await self._finish()

    async def serve(self) -> None:
        """Read frames until the peer closes, a bad frame arrives or the idle timeout passes."""
        try:
            while True:
                command = await self._read_command()
                if command is None:
                    break
                self._dispatch(command)
        except cmd_mod.FrameError as exc:
            _log.warning("closing Remoting connection %s: bad frame: %s", self.remote_address, exc)
        except TimeoutError:
            _log.info("closing idle Remoting connection %s", self.remote_address)
        except (ConnectionError, OSError) as exc:
            _log.debug("Remoting connection %s failed: %s", self.remote_address, exc)
        finally:
            self._writer.close()
            await self._finish()

    async def _read_exactly(self, n: int) -> bytes:
        if self._buffered:
            head, self._buffered = self._buffered[:n], self._buffered[n:]
            if len(head) == n:
                return head
            return head + await self._reader.readexactly(n - len(head))
        return await self._reader.readexactly(n)

    async def _read_command(self) -> cmd_mod.RemotingCommand | None:
        try:
            async with asyncio.timeout(self._settings.idle_timeout_s):
                prefix = await self._read_exactly(cmd_mod.LENGTH_PREFIX_BYTES)
        except asyncio.IncompleteReadError as exc:
            if exc.partial or self._buffered:
                raise cmd_mod.FrameError("connection closed inside a length prefix") from exc
            return None
        length = cmd_mod.read_frame_length(prefix)
        try:
            frame = await self._read_exactly(length)
        except asyncio.IncompleteReadError as exc:
            raise cmd_mod.FrameError(f"frame truncated at {len(exc.partial)} of {length}") from exc
        return cmd_mod.decode_frame(frame)

    def _dispatch(self, command: cmd_mod.RemotingCommand) -> None:
        if command.is_response:
            future = self._pending.get(command.opaque)
            if future is not None and not future.done():
                future.set_result(command)
            else:
                _log.debug(
                    "response %d without a request on %s", command.opaque, self.remote_address
                )
            return
        if len(self._in_flight) >= self._settings.in_flight_requests_max:
            if not command.is_oneway:
                remark = f"{len(self._in_flight)} requests in flight on this connection"
                busy = cmd_mod.response(command, codes.ResponseCode.SYSTEM_BUSY, remark=remark)
                self._spawn(self._send_quietly(busy), cancel_on_close=True)
            return
        cancel = command.code in self._settings.cancel_on_close_codes
        self._spawn(self._handle(command), cancel_on_close=cancel)

    def _spawn(self, coroutine: Awaitable[None], *, cancel_on_close: bool = False) -> None:
        task = asyncio.ensure_future(coroutine)
        self._in_flight.add(task)
        task.add_done_callback(self._in_flight.discard)
        if cancel_on_close:
            self._cancel_on_close.add(task)
            task.add_done_callback(self._cancel_on_close.discard)

    async def _handle(self, request: cmd_mod.RemotingCommand) -> None:
        handler = self._handlers.get(request.code)
        if handler is None:
            reply: cmd_mod.RemotingCommand | None = cmd_mod.response(
                request,
                codes.ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                remark=f" request type {request.code} not supported",
            )
        else:
            try:
                reply = await handler(self, request)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                _log.exception("handler of code %d failed on %s", request.code, self.remote_address)
                reply = cmd_mod.response(
                    request, codes.ResponseCode.SYSTEM_ERROR, remark=f"{type(exc).__name__}: {exc}"
                )
        if reply is None or request.is_oneway:
            return
        flag = (reply.flag | cmd_mod.RESPONSE_FLAG) & ~cmd_mod.ONEWAY_FLAG
        await self._send_quietly(dataclasses.replace(reply, opaque=request.opaque, flag=flag))

    async def _send_quietly(self, reply: cmd_mod.RemotingCommand) -> None:
        # A response that cannot be encoded (too large) becomes SYSTEM_ERROR; a closed
        # connection drops it: the peer is gone.
        try:
            await self._send(reply)
        except cmd_mod.FrameError as exc:
            _log.error("response to %d cannot be encoded: %s", reply.opaque, exc)
            error = cmd_mod.RemotingCommand(
                code=codes.ResponseCode.SYSTEM_ERROR,
                opaque=reply.opaque,
                flag=cmd_mod.RESPONSE_FLAG,
                remark=f"response cannot be encoded: {exc}",
            )
            with contextlib.suppress(ConnectionClosedError):
                await self._send(error)
        except ConnectionClosedError:
            pass

    async def _send(self, command: cmd_mod.RemotingCommand) -> None:
        frame = cmd_mod.encode(command)
        if self.closed or self._writer.is_closing():
            raise ConnectionClosedError(f"connection to {self.remote_address} is closed")
        try:
            async with self._write_lock:
                self._writer.write(frame)
                await self._writer.drain()
        except (ConnectionError, OSError) as exc:
            raise ConnectionClosedError(f"connection to {self.remote_address}: {exc}") from exc

    async def _finish(self) -> None:
        if self._closed.is_set():
            return
        self._closed.set()
        for future in self._pending.values():
            if not future.done():
                future.set_exception(ConnectionClosedError(f"{self.remote_address} closed"))
        current = asyncio.current_task()
        tasks = [t for t in self._in_flight if t is not current]
        finishing = [t for t in tasks if t not in self._cancel_on_close]
        for task in tasks:
            if task in self._cancel_on_close:
                task.cancel()
        if finishing:  # requests read in full take effect though their peer is gone
            _, late = await asyncio.wait(finishing, timeout=self._settings.request_finish_s)
            for task in late:
                task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for callback in self._close_callbacks:
            try:
                callback(self)
            except Exception:
                _log.exception("close callback of %s failed", self.remote_address)
        self._close_callbacks.clear()
        with contextlib.suppress(ConnectionError, OSError):
            await self._writer.wait_closed()


async def _open_connection(
    host: str, port: int, ssl_context: ssl.SSLContext | None = None
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """``asyncio.open_connection`` with a ``FrameStreamProtocol`` (TLS with ``ssl_context``,
    the server's certificate checked against ``host``)."""
    loop = asyncio.get_running_loop()
    transport, protocol = await loop.create_connection(
        stream_protocol,
        host,
        port,
        ssl=ssl_context,
        server_hostname=host if ssl_context is not None else None,
    )
    return protocol.reader, asyncio.StreamWriter(transport, protocol, protocol.reader, loop)


def _format_address(peer: object) -> str:
    if isinstance(peer, tuple) and len(peer) >= 2:
        return f"{peer[0]}:{peer[1]}"
    return str(peer or "")


class RemotingServer:
    """Serves Remoting on a TCP port, or on connections handed over by a protocol sniffer.

    Args:
        handlers: request code → handler; a code absent here gets REQUEST_CODE_NOT_SUPPORTED.
        settings: the bounds.
        on_connect: called with each new connection before its first frame is read (register
            close callbacks there).
    """

    def __init__(
        self,
        handlers: Mapping[int, Handler],
        *,
        settings: TransportSettings | None = None,
        on_connect: Callable[[Connection], None] | None = None,
    ) -> None:
        self._handlers = dict(handlers)
        self._settings = settings or TransportSettings()
        self._on_connect = on_connect
        self._connections: set[Connection] = set()
        self._server: asyncio.Server | tls_listener.Listener | None = None

    @property
    def connections(self) -> frozenset[Connection]:
        """The open connections."""
        return frozenset(self._connections)

    async def start(
        self, host: str, port: int, server_tls: tls.ServerTls | None = None
    ) -> tuple[str, int]:
        """Listen on ``host:port`` (port 0 picks one) and return the bound address.

        With ``server_tls`` (the process's ``[tls]``, permissive or enforcing) the port is a
        ``tls_listener.Listener``: a connection's first byte picks TLS or plaintext by the mode
        (RocketMQ ``TlsModeHandler``), and under ``enforcing`` a plaintext connection is closed
        before any frame is read. ``None``: plaintext, ``loop.create_server`` as before.

        Raises:
            OSError: the address cannot be bound.
        """
        self._server = await tls_listener.create_server(
            lambda: stream_protocol(self._accept), host, port, server_tls
        )
        sockname = self._server.sockets[0].getsockname()
        return str(sockname[0]), int(sockname[1])

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await self.serve_connection(reader, writer)

    async def serve_connection(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        *,
        initial_bytes: bytes = b"",
    ) -> None:
        """Serve one accepted connection until it ends.

        Args:
            reader: the connection's reader.
            writer: the connection's writer.
            initial_bytes: bytes a sniffer already read from ``reader`` (they come first).
        """
        if len(self._connections) >= self._settings.connections_max:
            _log.warning("refusing a Remoting connection: %d open", len(self._connections))
            writer.close()
            return
        connection = Connection(
            reader, writer, self._handlers, self._settings, initial_bytes=initial_bytes
        )
        self._connections.add(connection)
        try:
            if self._on_connect is not None:
                self._on_connect(connection)
            await connection.serve()
        finally:
            self._connections.discard(connection)

    async def close(self) -> None:
        """Stop listening and close every connection."""
        if self._server is not None:
            self._server.close()
        await asyncio.gather(*(c.close() for c in list(self._connections)))
        if self._server is not None:
            await self._server.wait_closed()


class RemotingClient:
    """Sends requests to Remoting servers over one connection per address (as Java shares a
    channel per ``host:port``).

    Args:
        handlers: handlers for requests the servers send (e.g. CHECK_TRANSACTION_STATE);
            absent codes get REQUEST_CODE_NOT_SUPPORTED.
        settings: the bounds.
        connect_timeout_s: seconds to wait for a TCP connection (and its TLS handshake).
        ssl_context: dial every address over TLS with this client context (``common.tls.
            client_context``: verifies the server, presents a client certificate when it has
            one); ``None``: plaintext. RocketMQ's ``NettyClientConfig.useTLS``, except that the
            server's certificate is always verified (its clients trust all by default).
    """

    def __init__(
        self,
        handlers: Mapping[int, Handler] | None = None,
        *,
        settings: TransportSettings | None = None,
        connect_timeout_s: float = 3.0,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self._ssl_context = ssl_context
        self._handlers = dict(handlers or {})
        self._settings = settings or TransportSettings()
        self._connect_timeout_s = connect_timeout_s
        self._connections: dict[str, Connection] = {}
        self._readers: set[asyncio.Task[None]] = set()
        self._lock = asyncio.Lock()

    async def connection(self, addr: str) -> Connection:
        """The open connection to ``addr`` (``host:port``), opened if needed.

        Raises:
            ConnectionClosedError: it cannot be opened within the connect timeout.
        """
        async with self._lock:
            existing = self._connections.get(addr)
            if existing is not None and not existing.closed:
                return existing
            host, _, port = addr.rpartition(":")
            try:
                async with asyncio.timeout(self._connect_timeout_s):
                    reader, writer = await _open_connection(
                        host.strip("[]"), int(port), self._ssl_context
                    )
            except (OSError, TimeoutError, ValueError) as exc:
                raise ConnectionClosedError(f"cannot connect to {addr}: {exc}") from exc
            connection = Connection(reader, writer, self._handlers, self._settings)
            self._connections[addr] = connection
            task = asyncio.ensure_future(connection.serve())
            self._readers.add(task)
            task.add_done_callback(self._readers.discard)
            return connection

    async def invoke(
        self, addr: str, command: cmd_mod.RemotingCommand, timeout_s: float
    ) -> cmd_mod.RemotingCommand:
        """Send a request to ``addr`` and return its response (``invokeSync``).

        Raises:
            RequestTimeoutError: no response within ``timeout_s``.
            ConnectionClosedError: no connection, or it closed before the response.
        """
        connection = await self.connection(addr)
        return await connection.request(command, timeout_s)

    async def invoke_oneway(self, addr: str, command: cmd_mod.RemotingCommand) -> None:
        """Send a oneway request to ``addr`` (``invokeOneway``).

        Raises:
            ConnectionClosedError: no connection.
        """
        connection = await self.connection(addr)
        await connection.send_oneway(command)

    async def close(self) -> None:
        """Close every connection."""
        connections = list(self._connections.values())
        self._connections.clear()
        await asyncio.gather(*(c.close() for c in connections))
        await asyncio.gather(*list(self._readers), return_exceptions=True)
