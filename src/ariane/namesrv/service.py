"""Thin gRPC servicers of the name server: ``ariane.namesrv.v1.Registry`` and v2 ``QueryRoute``.

``RegistryService`` turns registry messages into ``route_info_manager`` calls and back. A master
refused for a stale epoch (``route_info_manager.StaleEpochError``) gets a PRECONDITION_FAILED
status in a full response carrying ``group_epoch``, the group's current master (client and HA
addresses) and the slave id to rejoin as, so the broker can fence itself and rejoin as a slave
without parsing the message. With an inner credential configured
(``inner_auth``), RegisterBroker, BrokerHeartbeat and UnregisterBroker without a valid signature
answer UNAUTHORIZED and change nothing; the lookups stay open.
``MessagingService`` offers the v2 RPCs an access point answers (grpc-v2.md §6.1, §6.9, §8):

* ``QueryRoute``: each broker group's master (id 0) at its advertised endpoint, one
  ``MessageQueue`` per queue id with its permission, ``accept_message_types`` from the topic's
  type (never empty). Unknown topic → TOPIC_NOT_FOUND; illegal name → ILLEGAL_TOPIC.
* ``SyncLiteSubscription`` (RocketMQ 5.5; the official clients send it to their access point):
  forwarded to the master of every broker group serving the LITE parent readable;
* ``RecallMessage``: forwarded to the master of the broker group named in the recall handle,
  with the caller's v2 headers and a bounded deadline (``forward``).
* ``QueryAssignment``: forwarded the same way to a broker group serving the topic (the Go
  client sends it to its access point; issue 11 item 6).

All require ``x-mq-client-id`` (CLIENT_ID_REQUIRED otherwise). Every other v2 RPC is answered
NOT_IMPLEMENTED by ``ariane.grpcwire.guard.service_handler``, which also turns any error into a
status. No logic lives here beyond translation; the tables are in ``route_info_manager``.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

import grpc

from ariane.common import errors, ids, promotion, topics
from ariane.grpcwire import codes, convert, metadata, pb, recall
from ariane.namesrv import forward, inner_auth
from ariane.namesrv import route_info_manager as rim

_log = logging.getLogger(__name__)

Context = grpc.aio.ServicerContext[Any, Any]


def registration_of(request: pb.registry.RegisterBrokerRequest) -> rim.BrokerRegistration:
    """The ``BrokerRegistration`` a RegisterBroker request carries.

    Raises:
        BadRequestError: for an unusable client endpoint or an unspecified topic type.
    """
    try:
        client_address = convert.address_text(request.client_endpoint)
        configs = tuple(
            rim.RegisteredTopic(
                topic=ids.TopicName(c.topic),
                read_queue_nums=c.read_queue_nums,
                write_queue_nums=c.write_queue_nums,
                perm=c.perm,
                message_type=convert.message_type_of(c.message_type),
            )
            for c in request.topic_configs
        )
    except ValueError as exc:
        raise errors.BadRequestError(str(exc)) from None
    return rim.BrokerRegistration(
        cluster=ids.ClusterName(request.cluster_name),
        broker_name=ids.BrokerName(request.broker_name),
        broker_id=ids.BrokerId(request.broker_id),
        client_address=client_address,
        ha_address=request.ha_address,
        data_version=request.data_version,
        topic_configs=configs,
        remoting_address=request.remoting_address,
        epoch=request.epoch,
        lease_ms=request.lease_ms,
        in_sync_report=in_sync_report_of(request),
        ha_link_address=link_address_of(request),
    )


LINK_ADDRESS_CHARS_MAX = 300
"""Longest HA link address kept (``[IPv6]:port`` fits many times over)."""


def link_address_of(
    request: pb.registry.RegisterBrokerRequest | pb.registry.BrokerHeartbeatRequest,
) -> str:
    """A slave's ``ha_link_address``.

    Raises:
        BadRequestError: longer than ``LINK_ADDRESS_CHARS_MAX``.
    """
    if len(request.ha_link_address) > LINK_ADDRESS_CHARS_MAX:
        raise errors.BadRequestError("ha_link_address is too long")
    return request.ha_link_address


def in_sync_report_of(
    request: pb.registry.RegisterBrokerRequest | pb.registry.BrokerHeartbeatRequest,
) -> promotion.InSyncReport | None:
    """A master's in-sync report (``None`` when the request carries none).

    Raises:
        BadRequestError: more than ``promotion.REPLICAS_MAX`` replicas, an address longer
            than ``LINK_ADDRESS_CHARS_MAX`` or a negative offset.
    """
    if not request.HasField("in_sync_report"):
        return None
    report = convert.in_sync_report_value(request.in_sync_report)
    if len(report.replicas) > promotion.REPLICAS_MAX:
        raise errors.BadRequestError(f"more than {promotion.REPLICAS_MAX} replicas reported")
    too_long = any(len(r[0]) > LINK_ADDRESS_CHARS_MAX for r in report.replicas)
    offsets = [report.master_max_offset, report.replicated_offset]
    offsets += [r[3] for r in report.replicas]
    if too_long or min(offsets) < 0:
        raise errors.BadRequestError("an in-sync report with a long address or negative offset")
    return dataclasses.replace(report, heard_ago_ms=0)


def address_message(host_port: str) -> pb.v2.Address:
    """The ``Address`` message of a stored ``host:port``."""
    host, port = convert.split_host_port(host_port)
    return convert.address(host, port)


def group_message(group: rim.BrokerGroup) -> pb.registry.BrokerGroup:
    """The registry's ``BrokerGroup`` message of a group."""
    message = pb.registry.BrokerGroup(
        cluster_name=group.cluster,
        broker_name=group.broker_name,
        members=[
            pb.registry.BrokerMember(
                broker_id=m.broker_id,
                client_endpoint=address_message(m.client_address),
                ha_address=m.ha_address,
                data_version=m.data_version,
                last_update_timestamp_ms=m.last_update_ms,
                remoting_address=m.remoting_address,
                epoch=m.epoch,
                lease_ms=m.lease_ms,
                heard_ago_ms=m.heard_ago_ms,
                ha_link_address=m.ha_link_address,
            )
            for m in group.members
        ],
    )
    report = group.in_sync_report
    if report is not None:
        message.in_sync_report.CopyFrom(convert.in_sync_report(report))
    return message


class RegistryService:
    """``ariane.namesrv.v1.Registry`` over a ``RouteInfoManager``.

    Args:
        manager: the route tables.
        auth: checks the inner credential of the calls that change the tables; ``None``: they
            are open (no credential configured).
    """

    def __init__(
        self, manager: rim.RouteInfoManager, auth: inner_auth.InnerAuthenticator | None = None
    ) -> None:
        self._manager = manager
        self._auth = auth

    def _denial(self, context: Context, rpc: str) -> pb.v2.Status | None:
        """UNAUTHORIZED when the call lacks a valid inner-credential signature, else ``None``."""
        if self._auth is None:
            return None
        reason = self._auth.refusal(metadata.headers(context), peer=context.peer(), rpc=rpc)
        return None if reason is None else codes.status(errors.Code.UNAUTHORIZED, reason)

    async def register_broker(
        self, request: pb.registry.RegisterBrokerRequest, context: Context
    ) -> pb.registry.RegisterBrokerResponse:
        """RegisterBroker; answers the group's master endpoints when there is a master,
        PRECONDITION_FAILED with the group's epoch and master to a stale master, and
        UNAUTHORIZED (tables untouched) without the inner credential's signature."""
        denial = self._denial(context, "RegisterBroker")
        if denial is not None:
            return pb.registry.RegisterBrokerResponse(status=denial)
        registration = registration_of(request)
        try:
            group = self._manager.register_broker(registration)
        except rim.StaleEpochError as exc:
            _log.warning("refused %s/0: %s", registration.broker_name, exc)
            refused = pb.registry.RegisterBrokerResponse(
                status=codes.from_error(exc),
                group_epoch=exc.group_epoch,
                rejoin_broker_id=exc.rejoin_broker_id,
            )
            if exc.master is not None:
                refused.master_client_endpoint.CopyFrom(address_message(exc.master.client_address))
                refused.master_ha_address = exc.master.ha_address
            return refused
        _log.debug(
            "registered %s/%s at %s with %d topics",
            registration.broker_name,
            registration.broker_id,
            registration.client_address,
            len(registration.topic_configs),
        )
        response = pb.registry.RegisterBrokerResponse(
            status=codes.ok(), group_epoch=self._manager.group_epoch(registration.broker_name)
        )
        master = group.master()
        if master is not None:
            response.master_client_endpoint.CopyFrom(address_message(master.client_address))
            response.master_ha_address = master.ha_address
        return response

    async def unregister_broker(
        self, request: pb.registry.UnregisterBrokerRequest, context: Context
    ) -> pb.registry.UnregisterBrokerResponse:
        """UnregisterBroker; NOT_FOUND when the broker is not registered, UNAUTHORIZED
        (nothing removed) without the inner credential's signature."""
        denial = self._denial(context, "UnregisterBroker")
        if denial is not None:
            return pb.registry.UnregisterBrokerResponse(status=denial)
        removed = self._manager.unregister_broker(
            cluster=ids.ClusterName(request.cluster_name),
            broker_name=ids.BrokerName(request.broker_name),
            broker_id=ids.BrokerId(request.broker_id),
            epoch=request.epoch,
        )
        if not removed:
            raise errors.NotFoundError(
                f"broker {request.broker_name}/{request.broker_id} is not registered"
            )
        _log.info("unregistered %s/%s", request.broker_name, request.broker_id)
        return pb.registry.UnregisterBrokerResponse(status=codes.ok())

    async def broker_heartbeat(
        self, request: pb.registry.BrokerHeartbeatRequest, context: Context
    ) -> pb.registry.BrokerHeartbeatResponse:
        """BrokerHeartbeat; NOT_FOUND when the broker must register first, PRECONDITION_FAILED
        with the group's epoch and master when a master's epoch is stale, UNAUTHORIZED
        (nothing renewed) without the inner credential's signature."""
        denial = self._denial(context, "BrokerHeartbeat")
        if denial is not None:
            return pb.registry.BrokerHeartbeatResponse(status=denial)
        name = ids.BrokerName(request.broker_name)
        try:
            required = self._manager.heartbeat(
                cluster=ids.ClusterName(request.cluster_name),
                broker_name=name,
                broker_id=ids.BrokerId(request.broker_id),
                data_version=request.data_version,
                epoch=request.epoch,
                in_sync_report=in_sync_report_of(request),
                ha_link_address=link_address_of(request),
            )
        except rim.StaleEpochError as exc:
            refused = pb.registry.BrokerHeartbeatResponse(
                status=codes.from_error(exc),
                group_epoch=exc.group_epoch,
                rejoin_broker_id=exc.rejoin_broker_id,
            )
            if exc.master is not None:
                refused.master_client_endpoint.CopyFrom(address_message(exc.master.client_address))
                refused.master_ha_address = exc.master.ha_address
            return refused
        return pb.registry.BrokerHeartbeatResponse(
            status=codes.ok(),
            registration_required=required,
            group_epoch=self._manager.group_epoch(name),
        )

    async def get_cluster_info(
        self, request: pb.registry.GetClusterInfoRequest, context: Context
    ) -> pb.registry.GetClusterInfoResponse:
        """GetClusterInfo: every broker group, sorted by cluster then name."""
        groups = [group_message(g) for g in self._manager.cluster_info()]
        return pb.registry.GetClusterInfoResponse(status=codes.ok(), broker_groups=groups)

    async def get_topic_route(
        self, request: pb.registry.GetTopicRouteRequest, context: Context
    ) -> pb.registry.GetTopicRouteResponse:
        """GetTopicRoute: TOPIC_NOT_FOUND when no broker group serves the topic."""
        topic = topics.validate_topic(request.topic, allow_system=True)
        return route_message(self._manager.pickup_topic_route(topic))


def route_message(found: rim.TopicRoute) -> pb.registry.GetTopicRouteResponse:
    """The registry's answer (status OK) for a topic route."""
    return pb.registry.GetTopicRouteResponse(
        status=codes.ok(),
        queue_datas=[
            pb.registry.QueueData(
                broker_name=q.broker_name,
                read_queue_nums=q.read_queue_nums,
                write_queue_nums=q.write_queue_nums,
                perm=q.perm,
                message_type=convert.topic_message_type(q.message_type),
            )
            for q in found.queue_datas
        ],
        broker_groups=[group_message(g) for g in found.broker_groups],
    )


class MessagingService:
    """The access-point part of ``apache.rocketmq.v2.MessagingService``.

    Args:
        manager: the route tables.
        forwarder: passes RecallMessage and QueryAssignment on to brokers.
    """

    def __init__(self, manager: rim.RouteInfoManager, forwarder: forward.Forwarder) -> None:
        self._manager = manager
        self._forwarder = forwarder

    async def query_route(
        self, request: pb.v2_service.QueryRouteRequest, context: Context
    ) -> pb.v2_service.QueryRouteResponse:
        """QueryRoute (grpc-v2.md §6.1)."""
        metadata.require_client_id(context)
        topic = topics.validate_topic(request.topic.name)
        found = route_message(self._manager.pickup_topic_route(topic))
        return convert.query_route_response(found, request.topic)

    async def recall_message(
        self, request: pb.v2_service.RecallMessageRequest, context: Context
    ) -> pb.v2_service.RecallMessageResponse:
        """RecallMessage, forwarded to the broker group named in the handle (§6.9)."""
        metadata.require_client_id(context)
        topic = topics.validate_topic(request.topic.name)
        handle = recall.decode(request.recall_handle)
        if handle.topic != topic:
            raise errors.BadRequestError(
                f"the recall handle is for topic {handle.topic!r}, not {topic!r}"
            )
        return await self._forwarder.to_master(
            handle.broker_name,
            "RecallMessage",
            request,
            pb.v2_service.RecallMessageResponse,
            context,
        )

    async def sync_lite_subscription(
        self, request: pb.v2_service.SyncLiteSubscriptionRequest, context: Context
    ) -> pb.v2_service.SyncLiteSubscriptionResponse:
        """SyncLiteSubscription (RocketMQ 5.5), forwarded to every broker group serving the
        LITE parent readable: each filters its own queues by the subscriptions it holds. The
        first refusal is the answer (a quota or a name is refused alike by all)."""
        metadata.require_client_id(context)
        topic = topics.validate_topic(request.topic.name)
        topics.validate_group(request.group.name)
        answer = pb.v2_service.SyncLiteSubscriptionResponse(status=codes.ok())
        for broker_name in self._forwarder.readable_brokers(topic):
            got = await self._forwarder.to_master(
                broker_name,
                "SyncLiteSubscription",
                request,
                pb.v2_service.SyncLiteSubscriptionResponse,
                context,
            )
            if not codes.is_success(got.status) and codes.is_success(answer.status):
                answer = got
        return answer

    async def query_assignment(
        self, request: pb.v2_service.QueryAssignmentRequest, context: Context
    ) -> pb.v2_service.QueryAssignmentResponse:
        """QueryAssignment (§6.6), forwarded to a broker serving the topic.

        The official Go client (v5.1.3) asks its access point, not a broker, for assignments;
        a broker answers from the whole cluster's route, so one serving the topic is enough
        (``forward.Forwarder.assignment_broker``).
        """
        metadata.require_client_id(context)
        topic = topics.validate_topic(request.topic.name)
        topics.validate_group(request.group.name)
        return await self._forwarder.to_master(
            self._forwarder.assignment_broker(topic),
            "QueryAssignment",
            request,
            pb.v2_service.QueryAssignmentResponse,
            context,
        )
