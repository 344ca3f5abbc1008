"""Conversions between protobuf messages and ``ariane.common`` values (pure, no I/O).

Covers what routes and registrations need: ``Resource``, ``Address``/``Endpoints`` (with the
scheme rule of the official clients: an IPv4 literal gives IPv4, an IPv6 literal IPv6, anything
else DOMAIN_NAME with exactly one address), ``Broker``, message types, RocketMQ perm bits →
``Permission``, and a broker group's queues → the v2 ``MessageQueue`` list of a QueryRoute answer.

Queue permissions follow the queue ids: queue ``i`` is readable when ``i < read_queue_nums`` and
the READ perm bit is set, writable when ``i < write_queue_nums`` and the WRITE bit is set, so a
route lists ``max(read, write)`` queues (READ_WRITE, READ, WRITE or NONE each). The Java proxy
(``RouteActivity``) reaches the same counts but renumbers ids; keeping the real queue ids lets a
FIFO consumer's queue id mean the broker's queue id.
"""

from __future__ import annotations

import ipaddress

from ariane.common import errors, ids, message, promotion, route
from ariane.grpcwire import codes, pb

PORT_MAX = 65_535

_ACCEPTED_TYPES: dict[message.MessageType, tuple[pb.v2.MessageType, ...]] = {
    message.MessageType.NORMAL: (pb.v2.MessageType.NORMAL,),
    message.MessageType.FIFO: (pb.v2.MessageType.FIFO,),
    message.MessageType.DELAY: (pb.v2.MessageType.DELAY,),
    message.MessageType.TRANSACTION: (pb.v2.MessageType.TRANSACTION,),
    message.MessageType.PRIORITY: (pb.v2.MessageType.PRIORITY,),
    message.MessageType.LITE: (pb.v2.MessageType.LITE,),
    message.MessageType.MIXED: (
        pb.v2.MessageType.NORMAL,
        pb.v2.MessageType.FIFO,
        pb.v2.MessageType.DELAY,
        pb.v2.MessageType.TRANSACTION,
    ),
}

_TOPIC_TYPES: dict[message.MessageType, pb.topic.TopicMessageType] = {
    message.MessageType.NORMAL: pb.topic.TopicMessageType.TOPIC_MESSAGE_TYPE_NORMAL,
    message.MessageType.FIFO: pb.topic.TopicMessageType.TOPIC_MESSAGE_TYPE_FIFO,
    message.MessageType.DELAY: pb.topic.TopicMessageType.TOPIC_MESSAGE_TYPE_DELAY,
    message.MessageType.TRANSACTION: pb.topic.TopicMessageType.TOPIC_MESSAGE_TYPE_TRANSACTION,
    message.MessageType.MIXED: pb.topic.TopicMessageType.TOPIC_MESSAGE_TYPE_MIXED,
    message.MessageType.PRIORITY: pb.topic.TopicMessageType.TOPIC_MESSAGE_TYPE_PRIORITY,
    message.MessageType.LITE: pb.topic.TopicMessageType.TOPIC_MESSAGE_TYPE_LITE,
}
_TOPIC_TYPES_BACK = {v: k for k, v in _TOPIC_TYPES.items()}


def resource(name: str, namespace: str = "") -> pb.v2.Resource:
    """A ``Resource`` naming a topic or group."""
    return pb.v2.Resource(name=name, resource_namespace=namespace)


def split_host_port(text: str) -> tuple[str, int]:
    """Split ``host:port`` (``[v6]:port`` for IPv6 literals) into its parts.

    Raises:
        ValueError: if there is no port, the port is not a number in 1..65535, or the host is
            empty.
    """
    host, sep, port_text = text.rpartition(":")
    if not sep or not host or not port_text.isdigit():
        raise ValueError(f"{text!r} is not host:port")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    port = int(port_text)
    if not 1 <= port <= PORT_MAX:
        raise ValueError(f"port {port} of {text!r} is outside 1..{PORT_MAX}")
    return host, port


def join_host_port(host: str, port: int) -> str:
    """``host:port``, with brackets around an IPv6 literal."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def address_scheme(host: str) -> pb.v2.AddressScheme:
    """IPv4 or IPv6 for an IP literal, DOMAIN_NAME for anything else (as the clients decide)."""
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return pb.v2.AddressScheme.DOMAIN_NAME
    return pb.v2.AddressScheme.IPv4 if ip.version == 4 else pb.v2.AddressScheme.IPv6


def address(host: str, port: int) -> pb.v2.Address:
    """An ``Address`` message."""
    return pb.v2.Address(host=host, port=port)


def address_text(value: pb.v2.Address) -> str:
    """``host:port`` of an ``Address`` message.

    Raises:
        ValueError: if the host is empty or the port is outside 1..65535.
    """
    if not value.host or not 1 <= value.port <= PORT_MAX:
        raise ValueError(f"address {value.host!r}:{value.port} is not a usable endpoint")
    return join_host_port(value.host, value.port)


def endpoints(host_port: str) -> pb.v2.Endpoints:
    """One-address ``Endpoints`` for ``host:port``, with the scheme the clients would pick.

    Raises:
        ValueError: if ``host_port`` is not ``host:port``.
    """
    host, port = split_host_port(host_port)
    return pb.v2.Endpoints(scheme=address_scheme(host), addresses=[address(host, port)])


def first_address(value: pb.v2.Endpoints) -> str:
    """``host:port`` of the first address of ``Endpoints``.

    Raises:
        ValueError: if there is no address or it is unusable.
    """
    if not value.addresses:
        raise ValueError("endpoints carry no address")
    return address_text(value.addresses[0])


def broker(name: ids.BrokerName, broker_id: ids.BrokerId, host_port: str) -> pb.v2.Broker:
    """A ``Broker`` message for one broker at its ``host:port`` client endpoint."""
    return pb.v2.Broker(name=name, id=broker_id, endpoints=endpoints(host_port))


def accept_message_types(kind: message.MessageType) -> list[pb.v2.MessageType]:
    """The v2 message types a topic of ``kind`` accepts; never empty (MIXED → all four)."""
    return list(_ACCEPTED_TYPES[kind])


def topic_message_type(kind: message.MessageType) -> pb.topic.TopicMessageType:
    """The ``ariane.common.v1.TopicMessageType`` of a topic type."""
    return _TOPIC_TYPES[kind]


def message_type_of(value: pb.topic.TopicMessageType) -> message.MessageType:
    """The topic type a ``TopicMessageType`` names.

    Raises:
        ValueError: for TOPIC_MESSAGE_TYPE_UNSPECIFIED or an unknown number.
    """
    try:
        return _TOPIC_TYPES_BACK[value]
    except KeyError:
        raise ValueError(f"topic message type {int(value)} is not specified or unknown") from None


def permission(*, readable: bool, writable: bool) -> pb.v2.Permission:
    """The v2 ``Permission`` of a queue that is (or is not) readable and writable."""
    if readable and writable:
        return pb.v2.Permission.READ_WRITE
    if readable:
        return pb.v2.Permission.READ
    if writable:
        return pb.v2.Permission.WRITE
    return pb.v2.Permission.NONE


def message_queues(
    *,
    topic: pb.v2.Resource,
    broker: pb.v2.Broker,
    read_queue_nums: int,
    write_queue_nums: int,
    perm: int,
    kind: message.MessageType,
) -> list[pb.v2.MessageQueue]:
    """The route entries of one topic on one broker: one ``MessageQueue`` per queue id.

    Args:
        topic: echoed into every entry (namespace included).
        broker: the broker (name, id, endpoints) serving the queues.
        read_queue_nums: queues consumers read (ids ``0 .. read - 1``).
        write_queue_nums: queues producers write (ids ``0 .. write - 1``).
        perm: RocketMQ perm bits of the topic on this broker.
        kind: the topic's message type; gives ``accept_message_types``.

    Returns:
        ``max(read, write)`` entries with ids ``0 ..``, each with its own permission.
    """
    readable = route.is_readable(perm)
    writable = route.is_writeable(perm)
    accepted = accept_message_types(kind)
    return [
        pb.v2.MessageQueue(
            topic=topic,
            id=queue_id,
            permission=permission(
                readable=readable and queue_id < read_queue_nums,
                writable=writable and queue_id < write_queue_nums,
            ),
            broker=broker,
            accept_message_types=accepted,
        )
        for queue_id in range(max(read_queue_nums, write_queue_nums))
    ]


def message_queue_value(value: pb.v2.MessageQueue) -> route.MessageQueue:
    """The ``ariane.common.route.MessageQueue`` (topic, broker name, queue id) of a v2 queue."""
    return route.MessageQueue(
        topic=ids.TopicName(value.topic.name),
        broker_name=ids.BrokerName(value.broker.name),
        queue_id=ids.QueueId(value.id),
    )


def query_route_queues(
    found: pb.registry.GetTopicRouteResponse, topic: pb.v2.Resource
) -> list[pb.v2.MessageQueue]:
    """The entries of a v2 QueryRoute answer from a registry route (grpc-v2.md §6.1, §8).

    Every broker group with a master (broker id 0) contributes its queues at the master's
    advertised client endpoint; groups without a live master are left out (clients only use id
    0). Name servers and brokers both answer QueryRoute through this one function, so every
    access point answers alike.

    Raises:
        ValueError: if a queue data names an unspecified message type or a master's endpoint is
            unusable.
    """
    masters = {
        group.broker_name: member
        for group in found.broker_groups
        for member in group.members
        if member.broker_id == ids.MASTER_BROKER_ID
    }
    queues: list[pb.v2.MessageQueue] = []
    for queue_data in found.queue_datas:
        master = masters.get(queue_data.broker_name)
        if master is None:
            continue
        queues += message_queues(
            topic=topic,
            broker=broker(
                ids.BrokerName(queue_data.broker_name),
                ids.MASTER_BROKER_ID,
                address_text(master.client_endpoint),
            ),
            read_queue_nums=queue_data.read_queue_nums,
            write_queue_nums=queue_data.write_queue_nums,
            perm=queue_data.perm,
            kind=message_type_of(queue_data.message_type),
        )
    return queues


def query_route_response(
    found: pb.registry.GetTopicRouteResponse, topic: pb.v2.Resource
) -> pb.v2_service.QueryRouteResponse:
    """The whole v2 QueryRoute answer from a registry route, as every access point gives it.

    Raises:
        TopicNotFoundError: no broker group serving the topic has a master (clients only use
            broker id 0, so a route without one is no route).
    """
    queues = query_route_queues(found, topic)
    if not queues:
        raise errors.TopicNotFoundError(f"no broker group serving {topic.name!r} has a master")
    return pb.v2_service.QueryRouteResponse(status=codes.ok(), message_queues=queues)


def in_sync_report(report: promotion.InSyncReport) -> pb.registry.InSyncReport:
    """The registry's ``InSyncReport`` message of a master's in-sync set."""
    return pb.registry.InSyncReport(
        epoch=report.epoch,
        master_max_offset=report.master_max_offset,
        replicated_offset=report.replicated_offset,
        replicas=[
            pb.registry.ReplicaProgress(
                link_address=link, broker_id=broker_id, in_sync=ok, acked_offset=acked
            )
            for link, broker_id, ok, acked in report.replicas
        ],
        heard_ago_ms=report.heard_ago_ms,
    )


def in_sync_report_value(value: pb.registry.InSyncReport) -> promotion.InSyncReport:
    """A master's in-sync set from its message (unchecked: see ``namesrv.service``)."""
    replicas = tuple(
        (r.link_address, int(r.broker_id), r.in_sync, r.acked_offset) for r in value.replicas
    )
    return promotion.InSyncReport(
        value.epoch,
        value.master_max_offset,
        value.replicated_offset,
        replicas,
        value.heard_ago_ms,
    )
