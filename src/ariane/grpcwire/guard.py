"""The status guard: serve a gRPC service from its protobuf descriptor, never crashing.

Serving: ``service_handler(service, implementation)`` builds the ``grpc.GenericRpcHandler`` of
one service for a ``grpc.aio`` server; ``guarded_methods`` gives the same guarded calls to the
relay of a broker with front-end workers (``grpcwire.relay``), so both paths answer alike.
RPC ``QueryRoute`` is served by the coroutine ``implementation.query_route(request, context)``;
a server-streaming RPC by an async generator of the same name; a client-streaming one receives
the request iterator. Every RPC whose response
has a ``status`` field (all of ``MessagingService``, ``Registry`` and ``ariane.admin.v1.Admin``)
is guarded so that a client always gets a status, never a gRPC error:

* an RPC the implementation lacks answers NOT_IMPLEMENTED (50100);
* an ``ArianeError`` raised by the implementation answers its own code and message;
* any other exception is logged and answers INTERNAL_ERROR (50000);
* a unary response whose status was left unset (code 0) is a bug: it answers INTERNAL_ERROR;
* a request body that does not parse as the RPC's message ends the call with gRPC
  INVALID_ARGUMENT and a one-line warning (at most one per RPC per
  ``MALFORMED_LOG_INTERVAL_S``), never grpc's ERROR traceback and INTERNAL/UNKNOWN: the
  deserializer returns a ``MalformedRequest`` instead of raising, and the guard aborts;
* with a ``Gate`` (authentication on), the gate decides before the implementation runs: a
  unary or server-streaming call by its request, a client-streaming call when it opens
  (authentication) and then each request as it is read; a refusal is answered with the gate's
  status (UNAUTHORIZED, FORBIDDEN), and ends a request stream;
* a refusal (NOT_IMPLEMENTED, UNSUPPORTED …, ``REFUSAL_CODES``) is logged once per RPC, code
  and client (``x-mq-client-id``, else the peer), with a bounded table and a cap on lines per
  minute (``common.log_limits``).

Both limits hold per process: the broker's own gRPC server, the store owner behind front-end
workers (``grpcwire.relay`` calls the same guard) and the name server all use this guard.

Every guarded call is timed where it is answered (``rpc_latency.RpcLatency``, RocketMQ's
``rocketmq_rpc_latency`` with ``request_code`` = the snake-case RPC name and ``response_code``
= the answered v2 code): a unary or server-streaming call once, from its start to its last
response; a call with a request stream once per response, from the read of the request it
answers (SendStream answers each request in order). Calls ended by ``context.abort`` are not
timed (they have no v2 code). Behind front-end workers the owner's guard times the call, so the
histogram shows the owner's handling time, without the worker's gRPC hop.

``context.abort`` still ends a call with a gRPC status when an implementation wants that (the
Java proxy uses gRPC INVALID_ARGUMENT for malformed telemetry settings).

The calling side (``rpc``, ``registry_client``, ``channel_pool``) imports nothing of this
module (``.importlinter``).
"""

from __future__ import annotations

import dataclasses
import logging
import re
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any, NoReturn, Protocol

import grpc
from google.protobuf import descriptor, message

from ariane.common import errors, log_limits
from ariane.grpcwire import codes, metadata, pb, rpc_latency

_log = logging.getLogger(__name__)

STATUS_FIELD = "status"

MALFORMED_LOG_INTERVAL_S = 60.0
"""Least time between two warnings about malformed requests to the same RPC, s."""

REFUSAL_CODES: frozenset[int] = frozenset(
    {
        errors.Code.NOT_IMPLEMENTED,
        errors.Code.UNSUPPORTED,
        errors.Code.VERSION_UNSUPPORTED,
        errors.Code.VERIFY_FIFO_MESSAGE_UNSUPPORTED,
    }
)
"""Status codes that mean "this server does not do that": logged once per RPC and client."""

CLIENT_CHARS_LOGGED_MAX = 128
"""Longest client id written to a refusal line (and kept in the table), characters."""

REFUSAL_LOG_INTERVAL_S = 24 * 3600.0
"""Least time between two lines about the same refusal (RPC, code, client), s."""


class _GuardLogs:
    """The log-line limits of one service's guarded RPCs (made by ``guarded_methods``)."""

    __slots__ = ("malformed", "refusals")

    def __init__(self) -> None:
        self.malformed = log_limits.LineLimiter(key_interval_s=MALFORMED_LOG_INTERVAL_S)
        self.refusals = log_limits.LineLimiter(key_interval_s=REFUSAL_LOG_INTERVAL_S)


class _RequestRead:
    """When a call's latest request was read (``timer`` seconds): the start of its answer."""

    __slots__ = ("at_s", "timer")

    def __init__(self, timer: Callable[[], float]) -> None:
        self.timer = timer
        self.at_s = timer()

    def mark(self) -> None:
        self.at_s = self.timer()


@dataclasses.dataclass(frozen=True, slots=True)
class MalformedRequest:
    """What a guarded deserializer returns for bytes that do not parse (instead of raising).

    Attributes:
        reason: protobuf's error text.
        size_bytes: the length of the body.
    """

    reason: str
    size_bytes: int


_CAMEL_BOUNDARY = re.compile(r"(?<!^)(?=[A-Z])")


def snake_case(rpc: str) -> str:
    """The implementation method name of an RPC: ``QueryRoute`` → ``query_route``."""
    return _CAMEL_BOUNDARY.sub("_", rpc).lower()


class CallContext(Protocol):
    """What handlers may use of a call's context: a ``grpc.aio.ServicerContext`` when the
    broker's own gRPC server runs them, a ``relay.RelayContext`` when a front-end worker
    forwarded the call to the store-owning process."""

    def invocation_metadata(self) -> Iterable[tuple[str, str | bytes]] | None:
        """The request headers as ``(key, value)`` pairs."""
        ...

    def peer(self) -> str:
        """The client's address, ``ipv4:127.0.0.1:53312``."""
        ...

    def time_remaining(self) -> float | None:
        """Seconds until the client's deadline, or ``None`` without one."""
        ...

    async def abort(self, code: grpc.StatusCode, details: str = "") -> NoReturn:
        """End the call with a gRPC status (raises ``grpc.aio.AbortError``)."""
        ...


class Gate(Protocol):
    """Decides whether a call may reach the implementation (``broker.grpc.auth_gate``)."""

    def check(
        self, rpc: str, request: Any | None, context: CallContext
    ) -> errors.ArianeError | None:
        """``None`` to let the call through, else the error to answer with.

        Args:
            rpc: ``package.Service/Method`` (``apache.rocketmq.v2.MessagingService/SendMessage``).
            request: the request message; ``None`` when a client-streaming call opens.
            context: the call's context.
        """
        ...


@dataclasses.dataclass(frozen=True, slots=True)
class GuardedMethod:
    """One RPC of a service with its implementation wrapped by the status guard.

    Attributes:
        path: the HTTP/2 path, ``/apache.rocketmq.v2.MessagingService/SendMessage``.
        client_streaming: the client sends a stream of requests (``call`` gets an async
            iterator of requests).
        server_streaming: the server answers with a stream (``call`` is an async generator).
        deserialize: request bytes → request message (raises ``DecodeError``).
        serialize: response message → bytes.
        call: ``call(request_or_requests, context)``: a coroutine returning the response, or
            an async generator of responses when ``server_streaming``.
    """

    path: str
    client_streaming: bool
    server_streaming: bool
    deserialize: Callable[[bytes], Any]
    serialize: Callable[[Any], bytes]
    call: Callable[[Any, Any], Any]


def guarded_methods(
    service: descriptor.ServiceDescriptor,
    implementation: object,
    *,
    latency: rpc_latency.RpcLatency | None = None,
    gate: Gate | None = None,
) -> list[GuardedMethod]:
    """Every RPC of ``service`` served from ``implementation``, behind the status guard.

    Args:
        service: the service descriptor, e.g. ``pb.MESSAGING_SERVICE``.
        implementation: an object with a snake-case coroutine (or async generator, for
            server-streaming RPCs) per RPC it serves; missing ones answer NOT_IMPLEMENTED.
        latency: where the calls are timed (a private table when ``None``).
        gate: what decides each call before the implementation (``None``: nothing does).
    """
    logs = _GuardLogs()
    timed = rpc_latency.RpcLatency() if latency is None else latency
    return [
        _guarded(method, getattr(implementation, snake_case(method.name), None), logs, timed, gate)
        for method in service.methods
    ]


def service_handler(
    service: descriptor.ServiceDescriptor,
    implementation: object,
    *,
    latency: rpc_latency.RpcLatency | None = None,
    gate: Gate | None = None,
) -> grpc.GenericRpcHandler:
    """A generic handler serving every RPC of ``service`` from ``implementation``.

    Args:
        service: the service descriptor, e.g. ``pb.MESSAGING_SERVICE``.
        implementation: as for ``guarded_methods``.
        latency: as for ``guarded_methods``.
        gate: as for ``guarded_methods``.
    """
    handlers: dict[str, grpc.RpcMethodHandler[Any, Any]] = {}
    for method in guarded_methods(service, implementation, latency=latency, gate=gate):
        factory = HANDLER_FACTORIES[(method.client_streaming, method.server_streaming)]
        handlers[method.path.rpartition("/")[2]] = factory(
            method.call,
            request_deserializer=method.deserialize,
            response_serializer=method.serialize,
        )
    return grpc.method_handlers_generic_handler(service.full_name, handlers)


HANDLER_FACTORIES: dict[tuple[bool, bool], Any] = {
    (False, False): grpc.unary_unary_rpc_method_handler,
    (True, False): grpc.stream_unary_rpc_method_handler,
    (False, True): grpc.unary_stream_rpc_method_handler,
    (True, True): grpc.stream_stream_rpc_method_handler,
}
"""``(client_streaming, server_streaming)`` → the grpc handler factory of that shape."""


def _failure(response_class: type[message.Message], status: pb.v2.Status) -> message.Message:
    if STATUS_FIELD not in response_class.DESCRIPTOR.fields_by_name:
        raise errors.UnsupportedError(status.message)  # answered as a gRPC error by grpc
    return response_class(**{STATUS_FIELD: status})


def _status_for(exc: Exception, rpc: str) -> pb.v2.Status:
    if isinstance(exc, errors.ArianeError):
        return codes.from_error(exc)
    _log.exception("%s failed with an unexpected error", rpc)
    return codes.internal_error(f"{rpc} failed: {type(exc).__name__}")


def _deserializer(request_class: Any) -> Callable[[bytes], Any]:
    """A request deserializer that never raises: bytes that do not parse become a
    ``MalformedRequest``, which the guard answers INVALID_ARGUMENT."""

    def deserialize(data: bytes) -> Any:
        try:
            return request_class.FromString(data)
        except message.DecodeError as exc:
            return MalformedRequest(str(exc), len(data))

    return deserialize


def _guarded(
    method: descriptor.MethodDescriptor,
    behavior: Any,
    logs: _GuardLogs,
    latency: rpc_latency.RpcLatency,
    gate: Gate | None,
) -> GuardedMethod:
    request_class = pb.message_class(method.input_type)
    response_class = pb.message_class(method.output_type)
    rpc = method.full_name
    request_code = snake_case(method.name)
    has_status = STATUS_FIELD in response_class.DESCRIPTOR.fields_by_name
    client_streaming = method.client_streaming
    checked = _Checked(f"{method.containing_service.full_name}/{method.name}", rpc, logs, gate)

    def refused(request: Any, context: CallContext) -> Any:
        return checked.refusal(response_class, None if client_streaming else request, context)

    async def answer(request: Any, context: CallContext) -> Any:
        if behavior is None:
            return _refused(response_class, codes.not_implemented(method.name), rpc, context, logs)
        try:
            response = await behavior(request, context)
            if has_status:
                assert response.status.code != 0, f"{rpc} answered without a status code"
                _note_refusal(response.status, rpc, context, logs)
            return response
        except grpc.aio.AbortError:
            raise
        except Exception as exc:  # a client must get a status, never a crash
            return _refused(response_class, _status_for(exc, rpc), rpc, context, logs)

    async def unary_response(request: Any, context: CallContext) -> Any:
        started = _RequestRead(latency.timer)
        request = await _checked_request(request, client_streaming, context, checked, started)
        response = refused(request, context)
        if response is None:
            response = await answer(request, context)
        code = response.status.code if has_status else errors.Code.OK
        latency.observe(request_code, code, started.at_s)
        return response

    async def stream_response(request: Any, context: CallContext) -> AsyncIterator[Any]:
        started = _RequestRead(latency.timer)
        request = await _checked_request(request, client_streaming, context, checked, started)
        refusal = refused(request, context)
        if refusal is not None:
            latency.observe(request_code, refusal.status.code, started.at_s)
            yield refusal
            return
        code = int(errors.Code.OK)
        async for response in _responses(behavior, request, context, response_class, checked):
            if has_status and response.HasField(STATUS_FIELD):
                code = response.status.code
            if client_streaming:  # one answer per request read: time each
                latency.observe(request_code, code, started.at_s)
            yield response
        if not client_streaming:
            latency.observe(request_code, code, started.at_s)

    return GuardedMethod(
        path=f"/{method.containing_service.full_name}/{method.name}",
        client_streaming=client_streaming,
        server_streaming=method.server_streaming,
        deserialize=_deserializer(request_class),
        serialize=response_class.SerializeToString,
        call=stream_response if method.server_streaming else unary_response,
    )


@dataclasses.dataclass(frozen=True, slots=True)
class _Checked:
    """What request checks need of one guarded RPC: its path (``package.Service/Method``),
    full name, log limits and gate."""

    path: str
    rpc: str
    logs: _GuardLogs
    gate: Gate | None

    def refusal(
        self, response_class: type[message.Message], request: Any, context: CallContext
    ) -> Any:
        """The gate's refusal of a call (``request`` = ``None``: a request stream opens), or
        ``None`` (no gate, or it let the call through)."""
        if self.gate is None:
            return None
        error = self.gate.check(self.path, request, context)
        if error is None:
            return None
        return _refused(response_class, codes.from_error(error), self.rpc, context, self.logs)


async def _responses(
    behavior: Any,
    request: Any,
    context: CallContext,
    response_class: type[message.Message],
    checked: _Checked,
) -> AsyncIterator[Any]:
    """The responses of a server-streaming call, ending with a refusal status on failure."""
    rpc, logs = checked.rpc, checked.logs
    if behavior is None:
        name = checked.path.rpartition("/")[2]
        yield _refused(response_class, codes.not_implemented(name), rpc, context, logs)
        return
    try:
        async for response in behavior(request, context):
            yield response
    except grpc.aio.AbortError:
        raise
    except Exception as exc:  # a client must get a status, never a crash
        yield _refused(response_class, _status_for(exc, rpc), rpc, context, logs)


async def _checked_request(
    request: Any,
    client_streaming: bool,
    context: CallContext,
    checked: _Checked,
    request_read: _RequestRead,
) -> Any:
    """The request, or for a client stream an iterator that checks each and marks
    ``request_read`` when it hands one on; aborts on a malformed one with INVALID_ARGUMENT."""
    if client_streaming:
        return _checked_stream(request, context, checked, request_read)
    if isinstance(request, MalformedRequest):
        await _abort_malformed(request, context, checked.rpc, checked.logs)
    return request


async def _checked_stream(
    requests: AsyncIterator[Any],
    context: CallContext,
    checked: _Checked,
    request_read: _RequestRead,
) -> AsyncIterator[Any]:
    """The requests of a client stream; a request the gate refuses raises its error, which
    ends the call with that status (the guard answers the implementation's exception)."""
    async for request in requests:
        if isinstance(request, MalformedRequest):
            await _abort_malformed(request, context, checked.rpc, checked.logs)
        if checked.gate is not None:
            error = checked.gate.check(checked.path, request, context)
            if error is not None:
                raise error
        request_read.mark()
        yield request


async def _abort_malformed(
    request: MalformedRequest, context: CallContext, rpc: str, logs: _GuardLogs
) -> NoReturn:
    if logs.malformed.allow(rpc):
        _log.warning(
            "%s: refused a malformed request of %d bytes from %s (%s); INVALID_ARGUMENT "
            "(one line per RPC per %.0f s; %d such lines suppressed so far)",
            rpc,
            request.size_bytes,
            context.peer(),
            request.reason,
            MALFORMED_LOG_INTERVAL_S,
            logs.malformed.suppressed,
        )
    await context.abort(
        grpc.StatusCode.INVALID_ARGUMENT, f"request body is not a valid {rpc} request"
    )


def _refused(
    response_class: type[message.Message],
    status: pb.v2.Status,
    rpc: str,
    context: CallContext,
    logs: _GuardLogs,
) -> message.Message:
    _note_refusal(status, rpc, context, logs)
    return _failure(response_class, status)


def _client_of(context: CallContext) -> str:
    """The caller's ``x-mq-client-id`` (at most CLIENT_CHARS_LOGGED_MAX chars), else its peer."""
    for key, value in context.invocation_metadata() or ():
        if key.lower() == metadata.CLIENT_ID and isinstance(value, str) and value:
            return value[:CLIENT_CHARS_LOGGED_MAX]
    return context.peer()


def _note_refusal(status: pb.v2.Status, rpc: str, context: CallContext, logs: _GuardLogs) -> None:
    """Log a NOT_IMPLEMENTED/UNSUPPORTED answer once per (RPC, code, client)."""
    code = int(status.code)
    if code not in REFUSAL_CODES:
        return
    client = _client_of(context)
    if logs.refusals.allow((rpc, code, client)):
        _log.warning(
            "%s refused for client %r: %s %s (logged once per RPC, code and client)",
            rpc,
            client,
            errors.Code(code).name,
            status.message,
        )
