"""Calls of ``apache.rocketmq.v2.MessagingService`` for the producer and consumer clients.

One ``Transport`` per client instance holds what every call shares: a bounded pool of channels
keyed by ``host:port`` (plaintext, or TLS with ``tls``: the CA file that verifies the servers
and an optional client certificate; every name server and broker of a cluster serves the same
transport, so one setting covers both), the client's identity (the ``x-mq-client-id`` header
every v2 call must carry, grpc-v2.md §4, shaped like the official clients'
``host@pid@index@base36(ns)``), the default deadline, and the mapping of gRPC-level failures
to Ariane's error tree:

    ArianeError
    ├── RequestTimeoutError            the call's deadline passed (DEADLINE_EXCEEDED)
    ├── ServiceUnavailableError
    │   ├── NameServerUnreachableError no name server answered at the gRPC level
    │   └── BrokerUnreachableError     a broker (or one name server) did not answer
    └── PartialFailureError            some entries of a multi-entry call failed (send, ack)

Status codes inside answers are not looked at here: producer and consumer turn them into the
same classes with ``ariane.grpcwire.codes.raise_for_status``.

``SendStreamCall`` is one open ``ariane.ingest.v1.Ingest/SendStream`` (Ariane's own streaming
send): it has no deadline of its own, since it lives as long as its producer; the producer's
``send_stream.StreamSender`` puts a deadline on every request it writes.

Invariants: at most ``channels_max`` channels are open; every unary or server-streaming call has
a deadline; a streamed answer is read up to a bound.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import socket
import time
from collections.abc import Sequence
from typing import Any

import grpc

from ariane.client import credentials as credentials_mod
from ariane.common import errors, ids
from ariane.grpcwire import channel_pool, codes, convert, metadata, pb, rpc
from ariane.grpcwire import tls as grpc_tls

DEFAULT_TIMEOUT_S = 10.0
"""Deadline of each call, in seconds (the official clients use 3 s; ours carry bigger batches)."""

TIMEOUT_S_MIN = 0.1
TIMEOUT_S_MAX = 600.0
"""Bounds of any per-call deadline, seconds."""

ENDPOINTS_MAX = 64
"""Most name-server endpoints one client takes."""

CLIENT_LANGUAGE = "PYTHON"
CLIENT_PROTOCOL = "GRPC_V2"
CLIENT_VERSION = "ariane-0.1.0"
"""What the client reports in ``x-mq-language`` / ``x-mq-protocol`` / ``x-mq-client-version``."""

_BASE36 = "0123456789abcdefghijklmnopqrstuvwxyz"
_instances = itertools.count()


class NameServerUnreachableError(errors.ServiceUnavailableError):
    """No name server of the list answered (wrong address, not running, network)."""


class BrokerUnreachableError(errors.ServiceUnavailableError):
    """A broker (or name server) did not answer at the gRPC level."""


class PartialFailureError(errors.ArianeError):
    """Some entries of a multi-entry call (SendMessage, AckMessage) failed and others did not.

    The server answered MULTIPLE_RESULTS; the subclasses say which entries failed and why.
    """

    code = errors.Code.MULTIPLE_RESULTS


def parse_endpoints(text: str | Sequence[str]) -> tuple[str, ...]:
    """Name-server endpoints from ``"h1:9876;h2:9876"`` (RocketMQ's separator; commas work too)
    or a sequence of ``host:port``; duplicates dropped, order kept.

    Raises:
        ValueError: no endpoint, more than ``ENDPOINTS_MAX``, or one that is not ``host:port``
            with a port in 1..65535.
    """
    parts = [text] if isinstance(text, str) else list(text)
    found = [p.strip() for part in parts for p in part.replace(",", ";").split(";") if p.strip()]
    if not found:
        raise ValueError("no name-server endpoint given; pass HOST:PORT, e.g. 127.0.0.1:9876")
    if len(found) > ENDPOINTS_MAX:
        raise ValueError(f"at most {ENDPOINTS_MAX} name-server endpoints, not {len(found)}")
    for endpoint in found:
        convert.split_host_port(endpoint)
    return tuple(dict.fromkeys(found))


def check_timeout_s(name: str, value: float) -> None:
    """Refuse a deadline outside ``TIMEOUT_S_MIN..TIMEOUT_S_MAX``.

    Raises:
        ValueError: naming the setting.
    """
    if not TIMEOUT_S_MIN <= value <= TIMEOUT_S_MAX:
        raise ValueError(f"{name} must be {TIMEOUT_S_MIN}..{TIMEOUT_S_MAX} seconds, not {value}")


def _base36(value: int) -> str:
    digits = []
    while value:
        value, rest = divmod(value, 36)
        digits.append(_BASE36[rest])
    return "".join(reversed(digits)) or "0"


def new_client_id() -> ids.ClientId:
    """A client id unique to this client instance: ``host@pid@index@base36(time_ns)``."""
    host = socket.gethostname() or "localhost"
    return ids.ClientId(f"{host}@{os.getpid()}@{next(_instances)}@{_base36(time.time_ns())}")


def grpc_failure(exc: grpc.aio.AioRpcError) -> str:
    """The gRPC status of a failed call on one line."""
    return " ".join(f"{exc.code().name} {exc.details() or ''}".split())


class Transport:
    """Typed v2 calls to name servers and brokers, with the client's headers and deadlines.

    Use one per client instance, from one event loop; ``close()`` closes its channels.

    Args:
        timeout_s: default deadline of each call, seconds.
        channels_max: most channels kept open (least recently used closed first).
        client_id: the ``x-mq-client-id`` to send; a fresh one when ``None``.
        credentials: what every call is signed with (``None``: unsigned calls).
        tls: TLS options (``None``: plaintext).

    Raises:
        ValueError: for a timeout outside 0.1..600 s or a bad ``channels_max``, or TLS files
            that are not PEM.
        OSError: TLS files that cannot be read.
    """

    def __init__(
        self,
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        channels_max: int = 64,
        client_id: ids.ClientId | None = None,
        credentials: credentials_mod.Credentials | None = None,
        tls: grpc_tls.ClientTls | None = None,
    ) -> None:
        check_timeout_s("timeout_s", timeout_s)
        self._credentials = credentials
        self._timeout_s = timeout_s
        self._channels = channel_pool.ChannelPool(
            channels_max=channels_max, credentials=None if tls is None else tls.credentials()
        )
        self._client_id = client_id or new_client_id()
        self._headers: tuple[tuple[str, str], ...] = (
            (metadata.CLIENT_ID, self._client_id),
            (metadata.LANGUAGE, CLIENT_LANGUAGE),
            (metadata.PROTOCOL, CLIENT_PROTOCOL),
            (metadata.CLIENT_VERSION, CLIENT_VERSION),
        )

    @property
    def client_id(self) -> ids.ClientId:
        """The ``x-mq-client-id`` this transport sends on every call."""
        return self._client_id

    def headers(self) -> tuple[tuple[str, str], ...]:
        """The headers of a call made now: identity, plus the signature with credentials."""
        if self._credentials is None:
            return self._headers
        return self._headers + self._credentials.headers()

    async def unary(
        self,
        endpoint: str,
        rpc_name: str,
        request: Any,
        response_type: type[rpc.M],
        *,
        timeout_s: float | None = None,
    ) -> rpc.M:
        """One unary MessagingService call to ``endpoint`` (``host:port``).

        Raises:
            RequestTimeoutError: the deadline passed.
            BrokerUnreachableError: any other gRPC-level failure.
        """
        channel = await self._channels.get(endpoint)
        try:
            return await rpc.unary_call(
                channel,
                pb.MESSAGING_SERVICE,
                rpc_name,
                request,
                response_type,
                timeout_s=timeout_s or self._timeout_s,
                metadata=self.headers(),
            )
        except grpc.aio.AioRpcError as exc:
            raise _call_error(endpoint, rpc_name, exc) from None

    async def stream(
        self,
        endpoint: str,
        rpc_name: str,
        request: Any,
        response_type: type[rpc.M],
        *,
        timeout_s: float,
        responses_max: int,
    ) -> list[rpc.M]:
        """One server-streaming MessagingService call, read whole (at most ``responses_max``).

        Raises:
            RequestTimeoutError: the deadline passed.
            BrokerUnreachableError: any other gRPC-level failure.
            ArianeError: the server streamed more than ``responses_max`` responses.
        """
        channel = await self._channels.get(endpoint)
        try:
            return await rpc.stream_call(
                channel,
                pb.MESSAGING_SERVICE,
                rpc_name,
                request,
                response_type,
                timeout_s=timeout_s,
                responses_max=responses_max,
                metadata=self.headers(),
            )
        except grpc.aio.AioRpcError as exc:
            raise _call_error(endpoint, rpc_name, exc) from None
        except ValueError as exc:
            raise errors.ArianeError(f"{endpoint} broke the protocol: {exc}") from None

    async def open_send_stream(self, endpoint: str) -> SendStreamCall:
        """Open ``ariane.ingest.v1.Ingest/SendStream`` to the broker at ``endpoint``.

        The call is made lazily by gRPC: an unreachable broker shows as the first ``write`` or
        ``read`` failing with ``BrokerUnreachableError``.
        """
        channel = await self._channels.get(endpoint)
        multicallable = channel.stream_stream(
            rpc.method_path(pb.INGEST_SERVICE, SEND_STREAM_RPC),
            request_serializer=_serialize,
            response_deserializer=pb.v2_service.SendMessageResponse.FromString,
        )
        return SendStreamCall(endpoint, multicallable(metadata=self.headers()))

    async def close(self) -> None:
        """Close every channel."""
        await self._channels.close()


SEND_STREAM_RPC = "SendStream"
"""The RPC of ``ariane.ingest.v1.Ingest`` that streams SendMessage requests."""


def _serialize(request: Any) -> bytes:
    return bytes(request.SerializeToString())


class SendStreamCall:
    """One open ``Ingest/SendStream`` call: typed writes and reads, gRPC failures mapped.

    Use it from one task for writes and one for reads (gRPC's rule for a bidi call).

    Args:
        endpoint: the broker's ``host:port`` (for messages).
        call: the ``grpc.aio`` bidi call.
    """

    def __init__(self, endpoint: str, call: grpc.aio.StreamStreamCall[Any, Any]) -> None:
        self._endpoint = endpoint
        self._call = call

    async def write(self, request: pb.v2_service.SendMessageRequest) -> None:
        """Write one request.

        Raises:
            BrokerUnreachableError: the call has failed or ended.
        """
        try:
            await self._call.write(request)
        except (grpc.aio.AioRpcError, grpc.aio.UsageError, asyncio.InvalidStateError) as exc:
            raise self._broken(exc) from None

    async def read(self) -> pb.v2_service.SendMessageResponse:
        """The next response, in request order.

        Raises:
            BrokerUnreachableError: the call failed, or the broker ended it.
        """
        try:
            response = await self._call.read()
        except (grpc.aio.AioRpcError, grpc.aio.UsageError, asyncio.InvalidStateError) as exc:
            raise self._broken(exc) from None
        if response is grpc.aio.EOF:
            raise BrokerUnreachableError(f"{self._endpoint} ended {SEND_STREAM_RPC}")
        assert isinstance(response, pb.v2_service.SendMessageResponse)
        return response

    async def done_writing(self) -> None:
        """Half-close: the broker answers what it has and then ends the call."""
        try:
            await self._call.done_writing()
        except (grpc.aio.AioRpcError, grpc.aio.UsageError, asyncio.InvalidStateError) as exc:
            raise self._broken(exc) from None

    def cancel(self) -> None:
        """Abandon the call (idempotent)."""
        self._call.cancel()

    def _broken(self, exc: BaseException) -> errors.ArianeError:
        if isinstance(exc, grpc.aio.AioRpcError):
            return _call_error(self._endpoint, SEND_STREAM_RPC, exc)
        return BrokerUnreachableError(
            f"{self._endpoint} {SEND_STREAM_RPC} is no longer usable: {exc or type(exc).__name__}"
        )


def entry_errors(
    endpoint: str, status: pb.v2.Status, entry_statuses: Sequence[pb.v2.Status], count: int
) -> list[errors.ArianeError | None]:
    """The outcome of each entry of a multi-entry answer (SendMessage, AckMessage).

    Args:
        endpoint: who answered (for messages).
        status: the answer's top-level status.
        entry_statuses: the status of each entry, in request order.
        count: how many entries the request had.

    Returns:
        ``None`` for each entry that succeeded, else its error (``ariane.common.errors`` class of
        its code). An answer without one entry per request entry is a refusal of the whole
        request: every entry gets the top-level status's error.
    """
    if len(entry_statuses) != count:
        whole = errors.ArianeError(
            f"{endpoint} answered {len(entry_statuses)} entries for {count}: response is illegal"
        )
        try:
            codes.raise_for_status(status)
        except errors.ArianeError as exc:
            whole = exc
        return [whole] * count
    out: list[errors.ArianeError | None] = []
    for entry in entry_statuses:
        code = codes.code_of(entry)
        out.append(
            None
            if code == errors.Code.OK
            else errors.error_for_code(code or errors.Code.INTERNAL_ERROR, entry.message)
        )
    return out


def _call_error(endpoint: str, rpc_name: str, exc: grpc.aio.AioRpcError) -> errors.ArianeError:
    text = f"{endpoint} did not answer {rpc_name}: {grpc_failure(exc)}"
    if exc.code() is grpc.StatusCode.DEADLINE_EXCEEDED:
        return errors.RequestTimeoutError(text)
    return BrokerUnreachableError(text)
