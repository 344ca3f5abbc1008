"""Topic routes as the broker answers them: from the name servers, or locally as a fallback.

A broker answers QueryRoute "the same as the name server" (grpc-v2.md §8, local mode): it asks
its name servers (``Registry.GetTopicRoute``) in order and converts the answer with
``grpcwire.convert.query_route_queues``, the one code path every access point shares. When no
name server answers, it answers with its own queues at its own endpoint, so a client pointed at
a broker keeps working while the name servers are down.

Transport: the endpoints answered are the brokers' advertised ``host:port`` with no scheme.
Every port of a process has the same ``[tls]`` mode (one ``ServerTls`` per process), and a
cluster's processes share it, so a caller that reached this access point over TLS dials the
brokers of the route over TLS too, and a plaintext caller plaintext (``permissive`` serves
both): the route's endpoints match the caller's transport. The certificates' SANs must name
every advertised host.
"""

from __future__ import annotations

import logging

import grpc

from ariane.broker import runtime as runtime_mod
from ariane.common import errors, ids, topics
from ariane.grpcwire import channel_pool, codes, convert, pb, registry_client

_log = logging.getLogger(__name__)

ROUTE_TIMEOUT_S = 3.0
"""Deadline of one GetTopicRoute call to a name server."""


class RouteLookup:
    """Find topic routes for QueryRoute and QueryAssignment.

    Args:
        runtime: the broker's state (its own topics and endpoint, for the fallback).
        channels: the pool of channels to name servers.
    """

    def __init__(
        self, runtime: runtime_mod.BrokerRuntime, channels: channel_pool.ChannelPool
    ) -> None:
        self._runtime = runtime
        self._channels = channels

    async def topic_route(self, topic: ids.TopicName) -> pb.registry.GetTopicRouteResponse:
        """The registry route of ``topic``.

        Raises:
            TopicNotFoundError: no name server knows it and this broker does not have it.
        """
        for addr in self._runtime.settings.namesrv_addrs:
            try:
                channel = await self._channels.get(addr)
                found = await registry_client.RegistryClient(
                    channel, timeout_s=ROUTE_TIMEOUT_S
                ).get_topic_route(topic)
            except grpc.aio.AioRpcError as exc:
                _log.warning("name server %s did not answer GetTopicRoute: %s", addr, exc.code())
                continue
            if codes.is_success(found.status):
                return found
            if codes.code_of(found.status) != errors.Code.TOPIC_NOT_FOUND:
                codes.raise_for_status(found.status)
        return self.local_route(topic)

    def local_route(self, topic: ids.TopicName) -> pb.registry.GetTopicRouteResponse:
        """This broker's own route of ``topic`` (the fallback).

        Raises:
            TopicNotFoundError: this broker does not have the topic.
        """
        config = self._runtime.topics.require(topics.validate_topic(topic, allow_system=True))
        settings = self._runtime.settings
        host, port = convert.split_host_port(self._runtime.client_endpoint)
        return pb.registry.GetTopicRouteResponse(
            status=codes.ok(),
            queue_datas=[
                pb.registry.QueueData(
                    broker_name=settings.broker_name,
                    read_queue_nums=config.read_queue_nums,
                    write_queue_nums=config.write_queue_nums,
                    perm=int(config.perm),
                    message_type=convert.topic_message_type(config.message_type),
                )
            ],
            broker_groups=[
                pb.registry.BrokerGroup(
                    cluster_name=settings.cluster,
                    broker_name=settings.broker_name,
                    members=[
                        pb.registry.BrokerMember(
                            broker_id=self._runtime.broker_id,  # live: promotions move it
                            client_endpoint=convert.address(host, port),
                        )
                    ],
                )
            ],
        )
