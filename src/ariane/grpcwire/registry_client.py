"""Typed calls of the name server's ``ariane.namesrv.v1.Registry`` (what brokers use).

Brokers register and heartbeat, the admin client and slaves read cluster info and routes, all
through ``RegistryClient``. Invariants: every call has the client's deadline
(``timeout_s``, RocketMQ ``registerBrokerTimeoutMills``); each call is signed anew by
``signer`` when given (a rotated inner credential signs the next call); the channel belongs to
the caller.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import grpc
from google.protobuf import message

from ariane.grpcwire import pb, rpc


class RegistryClient:
    """Typed calls of ``ariane.namesrv.v1.Registry`` on one name server (what brokers use).

    Args:
        channel: a ``grpc.aio`` channel to the name server; the caller owns and closes it.
        timeout_s: deadline of each call (RocketMQ ``registerBrokerTimeoutMills`` is 24 s).
        signer: called before each call for the metadata that signs it (the broker's inner
            credential, ``namesrv.inner_auth``); ``None``: unsigned.
    """

    def __init__(
        self,
        channel: grpc.aio.Channel,
        *,
        timeout_s: float = 24.0,
        signer: Callable[[], Sequence[tuple[str, str]]] | None = None,
    ) -> None:
        self._channel = channel
        self._timeout_s = timeout_s
        self._signer = signer

    async def _call(
        self, rpc_name: str, request: message.Message, response_type: type[rpc.M]
    ) -> rpc.M:
        return await rpc.unary_call(
            self._channel,
            pb.REGISTRY_SERVICE,
            rpc_name,
            request,
            response_type,
            timeout_s=self._timeout_s,
            metadata=() if self._signer is None else self._signer(),
        )

    async def register_broker(
        self, request: pb.registry.RegisterBrokerRequest
    ) -> pb.registry.RegisterBrokerResponse:
        """RegisterBroker: full topic config of the group plus the broker's endpoints."""
        return await self._call("RegisterBroker", request, pb.registry.RegisterBrokerResponse)

    async def unregister_broker(
        self, request: pb.registry.UnregisterBrokerRequest
    ) -> pb.registry.UnregisterBrokerResponse:
        """UnregisterBroker: remove this broker at once (clean shutdown)."""
        return await self._call("UnregisterBroker", request, pb.registry.UnregisterBrokerResponse)

    async def broker_heartbeat(
        self, request: pb.registry.BrokerHeartbeatRequest
    ) -> pb.registry.BrokerHeartbeatResponse:
        """BrokerHeartbeat: keep alive between registrations."""
        return await self._call("BrokerHeartbeat", request, pb.registry.BrokerHeartbeatResponse)

    async def get_cluster_info(self) -> pb.registry.GetClusterInfoResponse:
        """GetClusterInfo: every live broker group."""
        request = pb.registry.GetClusterInfoRequest()
        return await self._call("GetClusterInfo", request, pb.registry.GetClusterInfoResponse)

    async def get_topic_route(self, topic: str) -> pb.registry.GetTopicRouteResponse:
        """GetTopicRoute: queue data and broker groups of one topic."""
        return await self._call(
            "GetTopicRoute",
            pb.registry.GetTopicRouteRequest(topic=topic),
            pb.registry.GetTopicRouteResponse,
        )
