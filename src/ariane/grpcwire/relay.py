"""The relay between front-end workers and the store owner: both ends, over one Unix socket.

A broker with front-end workers runs N worker processes that serve the clients' gRPC
connections (sharing the port with ``SO_REUSEPORT``) and one process that owns the store. The
expensive part of a gRPC-Python call (HTTP/2, the call object, ~0.5 ms of CPU, specs/perf.md
§2.4) then runs in the workers, on all cores, while the owner runs only the handlers. The
split mirrors RocketMQ 5's Proxy in cluster mode (stateless gRPC front ends, the broker behind
them), with the proxies on the broker's host and a Unix socket instead of the remoting
protocol.

* ``RelayForwarder`` (worker side) is a ``grpc.GenericRpcHandler`` source: every RPC of the
  given services is taken as raw bytes (no protobuf parsing in the worker) and forwarded as an
  OPEN frame with the call's headers, peer and deadline; responses come back as MESSAGE frames,
  the end as END (an owner-side ``context.abort`` becomes the same gRPC status here).
* ``RelayServer`` (owner side) accepts worker connections and runs each forwarded call through
  ``guard.GuardedMethod`` (the same guard the in-process gRPC server uses) with a
  ``RelayContext`` that answers ``invocation_metadata``/``peer``/``time_remaining``/``abort``
  from the OPEN frame.
* Both ends cork their writes: frames produced in one event-loop turn leave in one ``write``
  (the batch handoff: a burst of SendMessage calls costs the owner one read and one write).

Invariants: every forwarded call gets exactly one END unless the client cancelled it; a call
whose worker connection is lost is cancelled on the owner and answered UNAVAILABLE on the
worker; at most ``calls_max`` calls per connection are open (more are answered
RESOURCE_EXHAUSTED); each call buffers at most ``CALL_FRAMES_MAX`` undelivered frames.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterable, Sequence
from typing import Any, NoReturn

import grpc
from google.protobuf import descriptor

from ariane.common import event_loop
from ariane.grpcwire import guard, relay_codec

_log = logging.getLogger(__name__)

CALL_FRAMES_MAX = 4096
"""Most frames one call may have queued and not yet consumed (requests on the owner, responses
on the worker); a call that falls this far behind is ended with RESOURCE_EXHAUSTED."""

OWNER_GONE = "the broker's store process went away; retry (the broker is restarting)"
"""Details of the UNAVAILABLE answer when the relay connection to the owner is lost."""

_END_OF_REQUESTS = object()
_STATUS_BY_VALUE = {status.value[0]: status for status in grpc.StatusCode}


class RelayAbort(grpc.aio.AbortError):
    """Raised by ``RelayContext.abort``: the owner ends the call with this gRPC status."""

    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(details)
        self.code = code
        self.details = details


def _end_frame(call_id: int, code: grpc.StatusCode, details: str = "") -> relay_codec.Frame:
    return relay_codec.Frame(
        relay_codec.FrameKind.END, call_id, relay_codec.end_payload(code.value[0], details)
    )


class _CorkedWriter:
    """Collects frames written in one event-loop turn and writes them with one syscall."""

    def __init__(self, transport: asyncio.WriteTransport) -> None:
        self._transport = transport
        self._pending: list[bytes] = []
        self._loop = asyncio.get_running_loop()

    def write(self, frame: bytes) -> None:
        if not self._pending:
            self._loop.call_soon(self._flush)
        self._pending.append(frame)

    def _flush(self) -> None:
        pending, self._pending = self._pending, []
        if not self._transport.is_closing():
            self._transport.write(b"".join(pending))


class _FramedConnection(asyncio.Protocol):
    """What both ends of the relay share: frame decoding, corked writes, flow control.

    ``data_received`` hands each whole frame to ``frame_received``; a malformed stream is
    logged and the connection aborted (it cannot be resynchronised). Writers that may produce
    a lot await ``wait_writable`` (the transport's buffer is below its high mark again).
    """

    def __init__(self) -> None:
        self._decoder = relay_codec.FrameDecoder()
        self._writable = asyncio.Event()
        self._writable.set()
        self._writer: _CorkedWriter | None = None
        self._transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = event_loop.stream_transport(transport)
        self._writer = _CorkedWriter(self._transport)

    def pause_writing(self) -> None:
        self._writable.clear()

    def resume_writing(self) -> None:
        self._writable.set()

    async def wait_writable(self) -> None:
        """Return once the transport accepts writes without growing its buffer further."""
        if not self._writable.is_set():
            await self._writable.wait()

    def other_end(self) -> str:
        """How log lines name the process at the other end of the socket."""
        raise NotImplementedError

    def data_received(self, data: bytes) -> None:
        try:
            for frame in self._decoder.feed(data):
                self.frame_received(frame)
        except relay_codec.FrameError as exc:
            _log.error("dropping the relay connection to %s: %s", self.other_end(), exc)
            assert self._transport is not None
            self._transport.abort()

    def frame_received(self, frame: relay_codec.Frame) -> None:
        """Handle one frame (raises ``FrameError`` for one this end never accepts)."""
        raise NotImplementedError

    def send(self, frame: bytes) -> None:
        """Queue one encoded frame (dropped once the connection was closed here)."""
        if self._writer is not None:
            self._writer.write(frame)

    def close(self) -> None:
        """Close the connection; the other end sees it end."""
        self._writer = None
        if self._transport is not None:
            self._transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self._writable.set()  # nobody may stay parked on a dead connection


# -- owner side ---------------------------------------------------------------------------------


@dataclasses.dataclass(slots=True)
class RelayContext:
    """The ``guard.CallContext`` of a forwarded call, answered from its OPEN frame.

    Attributes:
        call: the decoded OPEN frame.
        deadline_s: the call's deadline on the owner's loop clock, or ``None``.
    """

    call: relay_codec.OpenCall
    deadline_s: float | None

    def invocation_metadata(self) -> Iterable[tuple[str, str | bytes]]:
        """The client's text headers, as the worker received them."""
        return self.call.headers

    def peer(self) -> str:
        """The client's address as the worker's gRPC server reported it."""
        return self.call.peer

    def time_remaining(self) -> float | None:
        """Seconds until the client's deadline (at least 0), or ``None`` without one."""
        if self.deadline_s is None:
            return None
        return max(0.0, self.deadline_s - asyncio.get_running_loop().time())

    async def abort(self, code: grpc.StatusCode, details: str = "") -> NoReturn:
        """End the call with a gRPC status, as ``grpc.aio.ServicerContext.abort`` does.

        Raises:
            RelayAbort: always.
        """
        raise RelayAbort(code, details)


class _OwnerCall:
    """One forwarded call on the owner: its task and, when client-streaming, its requests."""

    __slots__ = ("requests", "task")

    def __init__(self, client_streaming: bool) -> None:
        self.requests: asyncio.Queue[object] | None = (
            asyncio.Queue(CALL_FRAMES_MAX) if client_streaming else None
        )
        self.task: asyncio.Task[None] | None = None


class _OwnerConnection(_FramedConnection):
    """One worker's connection on the owner."""

    def __init__(self, server: RelayServer) -> None:
        super().__init__()
        self._server = server
        self._calls: dict[int, _OwnerCall] = {}
        self.worker_pid = 0
        self.worker_index = -1
        self.calls_opened = 0
        """Calls this worker connection opened (for the broker's metrics)."""

    def other_end(self) -> str:
        return f"worker pid {self.worker_pid}"

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        for call in list(self._calls.values()):
            if call.task is not None:
                call.task.cancel()
        self._calls.clear()
        self._server.connection_closed(self)

    def frame_received(self, frame: relay_codec.Frame) -> None:
        kind = frame.kind
        if kind is relay_codec.FrameKind.OPEN:
            self._open(frame.call_id, relay_codec.decode_open(frame.payload))
        elif kind is relay_codec.FrameKind.MESSAGE:
            self._request(frame.call_id, frame.payload)
        elif kind is relay_codec.FrameKind.HALF_CLOSE:
            self._request(frame.call_id, _END_OF_REQUESTS)
        elif kind is relay_codec.FrameKind.CANCEL:
            call = self._calls.pop(frame.call_id, None)
            if call is not None and call.task is not None:
                call.task.cancel()
        elif kind is relay_codec.FrameKind.HELLO:
            self.worker_pid, self.worker_index = relay_codec.decode_hello(frame.payload)
            self._server.hello(self.worker_pid, self.worker_index)
        else:
            raise relay_codec.FrameError(f"a worker sent a {kind.name} frame")

    def _end(self, call_id: int, code: grpc.StatusCode, details: str) -> None:
        self.send(relay_codec.encode_end(call_id, code.value[0], details))

    def _open(self, call_id: int, opened: relay_codec.OpenCall) -> None:
        self.calls_opened += 1
        method = self._server.method(opened.path)
        if method is None:
            self._end(call_id, grpc.StatusCode.UNIMPLEMENTED, f"unknown method {opened.path}")
            return
        if len(self._calls) >= self._server.calls_max or call_id in self._calls:
            self._end(call_id, grpc.StatusCode.RESOURCE_EXHAUSTED, "too many calls in flight")
            return
        call = _OwnerCall(method.client_streaming)
        self._calls[call_id] = call
        if call.requests is not None:
            if opened.message is not None:
                call.requests.put_nowait(opened.message)
            if opened.half_closed:
                call.requests.put_nowait(_END_OF_REQUESTS)
        loop = asyncio.get_running_loop()
        deadline_s = (
            None
            if opened.deadline_us == relay_codec.NO_DEADLINE
            else loop.time() + opened.deadline_us / 1e6
        )
        context = RelayContext(opened, deadline_s)
        call.task = loop.create_task(self._run(call_id, call, method, context))

    def _request(self, call_id: int, item: object) -> None:
        call = self._calls.get(call_id)
        if call is None or call.requests is None:
            return  # the call already ended (or takes no stream): late frames are dropped
        try:
            call.requests.put_nowait(item)
        except asyncio.QueueFull:
            self._calls.pop(call_id, None)
            if call.task is not None:
                call.task.cancel()
            self._end(call_id, grpc.StatusCode.RESOURCE_EXHAUSTED, "request stream too far ahead")

    async def _requests(self, call: _OwnerCall, method: guard.GuardedMethod) -> AsyncIterator[Any]:
        assert call.requests is not None
        while True:
            item = await call.requests.get()
            if item is _END_OF_REQUESTS:
                return
            assert isinstance(item, bytes)
            yield method.deserialize(item)

    async def _run(
        self, call_id: int, call: _OwnerCall, method: guard.GuardedMethod, context: RelayContext
    ) -> None:
        try:
            if call.requests is not None:
                request: Any = self._requests(call, method)
            else:
                assert context.call.message is not None, "a unary OPEN carries its request"
                request = method.deserialize(context.call.message)
            if method.server_streaming:
                async for response in method.call(request, context):
                    await self.wait_writable()
                    self.send(relay_codec.encode_message(call_id, method.serialize(response)))
            else:
                response = await method.call(request, context)
                self.send(relay_codec.encode_message(call_id, method.serialize(response)))
            self._end(call_id, grpc.StatusCode.OK, "")
        except RelayAbort as abort:
            self._end(call_id, abort.code, abort.details)
        except asyncio.CancelledError:
            return  # the worker cancelled the call or went away: nobody waits for an END
        except Exception as exc:  # one bad call must not take the connection down
            _log.exception("%s failed on the store owner", method.path)
            self._end(call_id, grpc.StatusCode.INTERNAL, f"{type(exc).__name__}: {exc}")
        finally:
            if self._calls.get(call_id) is call:
                del self._calls[call_id]


class RelayServer:
    """The owner's end: accepts worker connections on a Unix socket and runs their calls.

    Args:
        methods: the guarded RPCs served (``guard.guarded_methods`` of each service).
        calls_max: most calls open at once per worker connection.
    """

    def __init__(self, methods: Sequence[guard.GuardedMethod], *, calls_max: int) -> None:
        if not 1 <= calls_max <= 1_000_000:
            raise ValueError(f"calls_max must be 1..1000000, not {calls_max}")
        self._methods = {m.path: m for m in methods}
        self.calls_max = calls_max
        self._server: asyncio.AbstractServer | None = None
        self._connections: set[_OwnerConnection] = set()
        self._hello: dict[int, int] = {}
        self._changed = asyncio.Event()

    def method(self, path: str) -> guard.GuardedMethod | None:
        """The guarded RPC served at ``path``, or ``None``."""
        return self._methods.get(path)

    async def start(self, socket_path: str) -> None:
        """Listen on the Unix socket ``socket_path`` (which must not exist).

        Raises:
            OSError: if the socket cannot be created.
        """
        loop = asyncio.get_running_loop()
        self._server = await loop.create_unix_server(self._connection, socket_path)

    def _connection(self) -> _OwnerConnection:
        connection = _OwnerConnection(self)
        self._connections.add(connection)
        return connection

    def hello(self, pid: int, index: int) -> None:
        """A worker announced itself (its gRPC server is listening)."""
        _log.info("front-end worker %d (pid %d) is serving", index, pid)
        self._hello[pid] = index
        self._changed.set()

    def connection_closed(self, connection: _OwnerConnection) -> None:
        """A worker's connection ended (the worker stopped or died)."""
        self._connections.discard(connection)
        self._hello.pop(connection.worker_pid, None)
        self._changed.set()

    def calls_by_worker(self) -> dict[int, int]:
        """Worker index -> calls its current connection opened (restarts at 0 with it)."""
        return {c.worker_index: c.calls_opened for c in self._connections if c.worker_index >= 0}

    def serving_pids(self) -> set[int]:
        """PIDs of the workers connected and serving."""
        return set(self._hello)

    async def wait_changed(self) -> None:
        """Wait until a worker says hello or its connection ends."""
        await self._changed.wait()
        self._changed.clear()

    async def close(self) -> None:
        """Stop accepting, cancel calls in flight and close every connection."""
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        for connection in list(self._connections):
            connection.close()


# -- worker side --------------------------------------------------------------------------------


class _WorkerCall:
    """One call forwarded by a worker: the frames the owner sent back, in order."""

    __slots__ = ("frames",)

    def __init__(self) -> None:
        self.frames: asyncio.Queue[relay_codec.Frame] = asyncio.Queue(CALL_FRAMES_MAX)


class _WorkerConnection(_FramedConnection):
    """A worker's connection to the owner."""

    def __init__(self, lost: asyncio.Event) -> None:
        super().__init__()
        self.calls: dict[int, _WorkerCall] = {}
        self._lost = lost

    def other_end(self) -> str:
        return "the store owner"

    def frame_received(self, frame: relay_codec.Frame) -> None:
        if frame.kind not in (relay_codec.FrameKind.MESSAGE, relay_codec.FrameKind.END):
            raise relay_codec.FrameError(f"the owner sent a {frame.kind.name} frame")
        call = self.calls.get(frame.call_id)
        if call is None:
            return  # cancelled here already
        if frame.kind is relay_codec.FrameKind.END:
            del self.calls[frame.call_id]
        try:
            call.frames.put_nowait(frame)
        except asyncio.QueueFull:  # the client reads too slowly: end the call here and there
            self.calls.pop(frame.call_id, None)
            call.frames.get_nowait()
            call.frames.put_nowait(_end_frame(frame.call_id, grpc.StatusCode.RESOURCE_EXHAUSTED))
            self.send(relay_codec.encode_cancel(frame.call_id))

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        for call_id, call in list(self.calls.items()):
            with contextlib.suppress(asyncio.QueueEmpty):
                if call.frames.full():
                    call.frames.get_nowait()
            call.frames.put_nowait(_end_frame(call_id, grpc.StatusCode.UNAVAILABLE, OWNER_GONE))
        self.calls.clear()
        self._lost.set()


class RelayForwarder:
    """The worker's end: forwards every call of some services to the owner over one socket.

    Made by ``connect``; ``handlers`` gives the generic handlers to add to the worker's
    ``grpc.aio`` server; ``lost`` is set when the owner's socket closes (the worker must stop).
    """

    def __init__(self, connection: _WorkerConnection, lost: asyncio.Event) -> None:
        self._connection = connection
        self.lost = lost
        self._ids = itertools.count(1)

    @classmethod
    async def connect(cls, socket_path: str) -> RelayForwarder:
        """Connect to the owner's relay socket.

        Raises:
            OSError: if the socket cannot be reached.
        """
        lost = asyncio.Event()
        loop = asyncio.get_running_loop()
        _, connection = await loop.create_unix_connection(
            lambda: _WorkerConnection(lost), socket_path
        )
        return cls(connection, lost)

    def hello(self, pid: int, worker_index: int) -> None:
        """Tell the owner this worker is serving."""
        self._connection.send(relay_codec.encode_hello(pid, worker_index))

    def close(self) -> None:
        """Close the connection (calls still open are answered UNAVAILABLE)."""
        self._connection.close()

    def handlers(
        self, services: Sequence[descriptor.ServiceDescriptor]
    ) -> list[grpc.GenericRpcHandler]:
        """One generic handler per service, forwarding each of its RPCs as raw bytes."""
        result = []
        for service in services:
            handlers: dict[str, grpc.RpcMethodHandler[Any, Any]] = {}
            for method in service.methods:
                path = f"/{service.full_name}/{method.name}"
                shape = (method.client_streaming, method.server_streaming)
                behavior = self._behavior(path, shape)
                handlers[method.name] = guard.HANDLER_FACTORIES[shape](behavior)
            result.append(grpc.method_handlers_generic_handler(service.full_name, handlers))
        return result

    def _behavior(self, path: str, shape: tuple[bool, bool]) -> Callable[..., Any]:
        client_streaming, server_streaming = shape
        if server_streaming:

            async def stream(request: Any, context: guard.CallContext) -> AsyncIterator[bytes]:
                forwarded = self._forward(path, client_streaming, request, context)
                async with contextlib.aclosing(forwarded) as payloads:
                    async for payload in payloads:
                        yield payload

            return stream

        async def unary(request: Any, context: guard.CallContext) -> bytes:
            response: bytes | None = None
            forwarded = self._forward(path, client_streaming, request, context)
            async with contextlib.aclosing(forwarded) as payloads:
                async for payload in payloads:
                    response = payload
            if response is None:
                await context.abort(grpc.StatusCode.INTERNAL, f"{path} ended without a response")
            return response

        return unary

    async def _forward(
        self, path: str, client_streaming: bool, request: Any, context: guard.CallContext
    ) -> AsyncGenerator[bytes, None]:
        connection = self._connection
        if self.lost.is_set():
            await context.abort(grpc.StatusCode.UNAVAILABLE, OWNER_GONE)
        await connection.wait_writable()
        call_id = next(self._ids)
        call = _WorkerCall()
        connection.calls[call_id] = call
        pump: asyncio.Task[None] | None = None
        ended = False
        try:
            connection.send(self._open_frame(call_id, path, client_streaming, request, context))
            if client_streaming:
                pump = asyncio.get_running_loop().create_task(self._pump(call_id, request))
            while True:
                frame = await call.frames.get()
                if frame.kind is relay_codec.FrameKind.END:
                    ended = True
                    break
                yield frame.payload
        finally:
            if pump is not None:
                pump.cancel()
            if not ended and connection.calls.pop(call_id, None) is not None:
                connection.send(relay_codec.encode_cancel(call_id))
        code, details = relay_codec.decode_end(frame.payload)
        if code != 0:
            await context.abort(_STATUS_BY_VALUE[code], details)

    def _open_frame(
        self,
        call_id: int,
        path: str,
        client_streaming: bool,
        request: Any,
        context: guard.CallContext,
    ) -> bytes:
        remaining_s = context.time_remaining()
        headers = tuple(
            (key, value)
            for key, value in context.invocation_metadata() or ()
            if isinstance(value, str)
        )
        opened = relay_codec.OpenCall(
            path=path,
            peer=context.peer(),
            headers=headers,
            deadline_us=(
                relay_codec.NO_DEADLINE if remaining_s is None else max(0, int(remaining_s * 1e6))
            ),
            message=None if client_streaming else bytes(request),
            half_closed=not client_streaming,
        )
        return relay_codec.encode_open(call_id, opened)

    async def _pump(self, call_id: int, requests: AsyncIterator[bytes]) -> None:
        connection = self._connection
        async for request in requests:
            if call_id not in connection.calls:
                return
            await connection.wait_writable()
            connection.send(relay_codec.encode_message(call_id, bytes(request)))
        if call_id in connection.calls:
            connection.send(relay_codec.encode_half_close(call_id))
