"""Typed RPCs from the calling side: one unary call, one bounded server stream.

What a client, a broker or the access point uses to call another server (the serving side is
``grpcwire.guard``; channels come from ``grpcwire.channel_pool``). ``unary_call`` makes one
typed unary call on a ``grpc.aio`` channel, ``stream_call`` one bounded server-streaming call
(ReceiveMessage). Both take the service descriptor and the RPC name as in the proto, so no
generated stub (untyped to mypy) is needed. Invariants: every call has a deadline
(``timeout_s``); a stream is read to at most ``responses_max`` responses, then cancelled;
gRPC-level failures are raised as ``grpc.aio.AioRpcError``, never turned into statuses here
(the callers decide).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

import grpc
from google.protobuf import descriptor, message

M = TypeVar("M", bound=message.Message)
"""A generated message: a typed call takes ``type[rpc.M]`` and answers an ``rpc.M``."""


def method_path(service: descriptor.ServiceDescriptor, rpc: str) -> str:
    """The HTTP/2 path of an RPC: ``/<package>.<Service>/<Rpc>``.

    Raises:
        KeyError: if the service has no RPC named ``rpc``.
    """
    return f"/{service.full_name}/{service.methods_by_name[rpc].name}"


def _serialize(request: message.Message) -> bytes:
    return request.SerializeToString()


async def unary_call(
    channel: grpc.aio.Channel,
    service: descriptor.ServiceDescriptor,
    rpc: str,
    request: message.Message,
    response_type: type[M],
    *,
    timeout_s: float,
    metadata: Sequence[tuple[str, str]] = (),
) -> M:
    """Make one unary call and return its typed response.

    Args:
        channel: an open ``grpc.aio`` channel to the server.
        service: the service descriptor, e.g. ``pb.REGISTRY_SERVICE``.
        rpc: the RPC name as in the proto, e.g. ``"RegisterBroker"``.
        request: the request message.
        response_type: the response class, e.g. ``pb.registry.RegisterBrokerResponse``.
        timeout_s: the call's deadline, in seconds from now.
        metadata: extra request headers.

    Raises:
        grpc.aio.AioRpcError: if the call fails at the gRPC level (unreachable, deadline).
    """
    callable_ = channel.unary_unary(
        method_path(service, rpc),
        request_serializer=_serialize,
        response_deserializer=response_type.FromString,
    )
    return await callable_(request, timeout=timeout_s, metadata=tuple(metadata))


async def stream_call(
    channel: grpc.aio.Channel,
    service: descriptor.ServiceDescriptor,
    rpc: str,
    request: message.Message,
    response_type: type[M],
    *,
    timeout_s: float,
    responses_max: int,
    metadata: Sequence[tuple[str, str]] = (),
) -> list[M]:
    """Make one server-streaming call and return every response, in order.

    Args:
        channel: an open ``grpc.aio`` channel to the server.
        service: the service descriptor, e.g. ``pb.MESSAGING_SERVICE``.
        rpc: the RPC name as in the proto, e.g. ``"ReceiveMessage"``.
        request: the request message.
        response_type: the class of each streamed response.
        timeout_s: the whole call's deadline, in seconds from now.
        responses_max: most responses read; the call is cancelled when the server sends more.
        metadata: extra request headers.

    Raises:
        grpc.aio.AioRpcError: if the call fails at the gRPC level (unreachable, deadline).
        ValueError: if the server streams more than ``responses_max`` responses.
    """
    callable_ = channel.unary_stream(
        method_path(service, rpc),
        request_serializer=_serialize,
        response_deserializer=response_type.FromString,
    )
    call = callable_(request, timeout=timeout_s, metadata=tuple(metadata))
    responses: list[M] = []
    async for response in call:
        if len(responses) >= responses_max:
            call.cancel()
            raise ValueError(f"{rpc} streamed more than {responses_max} responses")
        responses.append(response)
    return responses
