"""Forwarding of v2 calls from the access point (the name server) to a broker group's master.

Official clients send some RPCs to their access point rather than to a broker: all of them send
RecallMessage there, and the Go client (v5.1.3) sends QueryAssignment there too. The name server
owns no messages and no groups, so it passes such a call on, with the caller's v2 headers
(``metadata.forwardable``), to the master (id 0) of a broker group, as the RocketMQ proxy in
cluster mode passes calls on to brokers. Invariants: a forwarded call never outlives the caller's
deadline (``DEADLINE_RESERVE_S`` is kept back) nor ``forward_timeout_s``; transport failures
become status codes (PROXY_TIMEOUT, INTERNAL_SERVER_ERROR), never raw gRPC errors.
"""

from __future__ import annotations

import logging
from typing import Any

import grpc

from ariane.common import errors, ids, route
from ariane.grpcwire import channel_pool, metadata, pb, rpc
from ariane.grpcwire import codes as grpc_codes
from ariane.namesrv import route_info_manager as rim

_log = logging.getLogger(__name__)

Context = grpc.aio.ServicerContext[Any, Any]

DEADLINE_RESERVE_S = 0.2
"""Time kept back from the caller's deadline when forwarding, so the answer arrives in time."""


class Forwarder:
    """Passes v2 MessagingService calls on to the master of a broker group.

    Args:
        manager: the route tables (where a group's master is).
        channels: channels to brokers.
        forward_timeout_s: longest deadline given to a forwarded call.
    """

    def __init__(
        self,
        manager: rim.RouteInfoManager,
        channels: channel_pool.ChannelPool,
        *,
        forward_timeout_s: float,
    ) -> None:
        self._manager = manager
        self._channels = channels
        self._forward_timeout_s = forward_timeout_s

    async def to_master(
        self,
        broker_name: ids.BrokerName,
        method: str,
        request: pb.Message,
        response_type: type[rpc.M],
        context: Context,
        *,
        service: pb.ServiceDescriptor = pb.MESSAGING_SERVICE,
    ) -> rpc.M:
        """Call ``method`` of ``service`` (default: the v2 ``MessagingService``) on the master
        of ``broker_name`` and return its answer as is.

        Raises:
            NotFoundError: the group is unknown or has no live master.
            RequestTimeoutError: the caller's deadline leaves no time to forward.
            ProxyTimeoutError: the broker did not answer within the deadline.
            ServiceUnavailableError: the broker could not be reached.
        """
        group = self._manager.broker_group(broker_name)
        master = None if group is None else group.master()
        if master is None:
            raise errors.NotFoundError(f"broker group {broker_name!r} has no live master")
        remaining_s = context.time_remaining()
        timeout_s = self._forward_timeout_s
        if remaining_s is not None:
            timeout_s = min(timeout_s, remaining_s - DEADLINE_RESERVE_S)
        if timeout_s <= 0:
            raise errors.RequestTimeoutError(f"no time left to forward {method}")
        channel = await self._channels.get(master.client_address)
        try:
            return await rpc.unary_call(
                channel,
                service,
                method,
                request,
                response_type,
                timeout_s=timeout_s,
                metadata=metadata.forwardable(context),
            )
        except grpc.aio.AioRpcError as exc:
            _log.warning("forwarding %s to %s failed: %s", method, master.client_address, exc)
            if exc.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
                raise errors.ProxyTimeoutError(
                    f"broker {broker_name} did not answer {method} in time"
                ) from None
            raise errors.ServiceUnavailableError(
                f"broker {broker_name} could not be reached: {exc.code().name}"
            ) from None

    def readable_brokers(self, topic: ids.TopicName) -> list[ids.BrokerName]:
        """The broker groups, by name, that serve ``topic`` readable with a live master.

        Raises:
            TopicNotFoundError: no broker group serves the topic.
            ForbiddenError: no group serves it readable with a live master.
        """
        found = self._manager.pickup_topic_route(topic)
        masters = {g.broker_name for g in found.broker_groups if g.master() is not None}
        readable = sorted(
            q.broker_name
            for q in found.queue_datas
            if q.perm & route.Perm.READ and q.read_queue_nums > 0 and q.broker_name in masters
        )
        if not readable:
            raise errors.ForbiddenError(f"no live broker serves topic {topic!r} readable")
        return readable

    def assignment_broker(self, topic: ids.TopicName) -> ids.BrokerName:
        """The broker group that answers QueryAssignment for ``topic`` on a client's behalf.

        The first group, by name, that serves the topic with READ permission and has a live
        master. Any such broker will do: a broker answers QueryAssignment from the whole
        cluster's route (it asks the name servers), with the group's consume-orderly flag.

        Raises:
            TopicNotFoundError: no broker group serves the topic.
            ForbiddenError: no group serves it readable with a live master.
        """
        found = self._manager.pickup_topic_route(topic)
        masters = {g.broker_name for g in found.broker_groups if g.master() is not None}
        readable = sorted(
            q.broker_name
            for q in found.queue_datas
            if q.perm & route.Perm.READ and q.read_queue_nums > 0
        )
        for broker_name in readable:
            if broker_name in masters:
                return broker_name
        raise errors.ForbiddenError(f"no live broker serves topic {topic!r} readable")

    async def set_write_perm(self, broker_name: ids.BrokerName, *, writable: bool) -> int:
        """Wipe or add the write permission of every ordinary topic on the master of
        ``broker_name`` (its ``Admin.WipeWritePerm`` / ``AddWritePerm``); returns how many
        topics changed. The master persists the change and registers again at once, so this
        name server's routes follow it.

        Raises:
            NotFoundError: the group is unknown or has no live master.
            ProxyTimeoutError / ServiceUnavailableError: the master did not answer.
            ArianeError: the master refused (its status, e.g. FORBIDDEN).
        """
        group = self._manager.broker_group(broker_name)
        master = None if group is None else group.master()
        if master is None:
            raise errors.NotFoundError(f"broker group {broker_name!r} has no live master")
        channel = await self._channels.get(master.client_address)
        answer: pb.admin.AddWritePermResponse | pb.admin.WipeWritePermResponse
        try:
            if writable:
                answer = await rpc.unary_call(
                    channel,
                    pb.ADMIN_SERVICE,
                    "AddWritePerm",
                    pb.admin.AddWritePermRequest(),
                    pb.admin.AddWritePermResponse,
                    timeout_s=self._forward_timeout_s,
                )
            else:
                answer = await rpc.unary_call(
                    channel,
                    pb.ADMIN_SERVICE,
                    "WipeWritePerm",
                    pb.admin.WipeWritePermRequest(),
                    pb.admin.WipeWritePermResponse,
                    timeout_s=self._forward_timeout_s,
                )
        except grpc.aio.AioRpcError as exc:
            _log.warning("write perm call to %s failed: %s", master.client_address, exc)
            if exc.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
                raise errors.ProxyTimeoutError(
                    f"broker {broker_name} did not answer in time"
                ) from None
            raise errors.ServiceUnavailableError(
                f"broker {broker_name} could not be reached: {exc.code().name}"
            ) from None
        if not grpc_codes.is_success(answer.status):
            raise errors.error_for_code(grpc_codes.code_of(answer.status), answer.status.message)
        return answer.topics_changed
