"""QueryAssignment's v2 adapter and the consumer registry's view of a settings report.

``query_assignment`` turns a route's readable queues into ``route.MessageQueue`` values, asks
``processors.assignment.AssignmentProcessor`` for the caller's share, and answers with the
route's own queue entries (endpoints, permission, accepted types), queue id -1 where the share
is a whole broker (POP) (grpc-v2.md §6.6). ``subscription`` converts a settings report's
``SubscriptionEntry``. Kept apart from ``messaging`` so that adapter stays one readable module.
"""

from __future__ import annotations

from ariane.broker.processors import assignment
from ariane.broker.tables import consumers, subscriptions
from ariane.common import errors, ids, route
from ariane.grpcwire import codes, convert, pb

_READABLE = (pb.v2.Permission.READ, pb.v2.Permission.READ_WRITE)


def query_assignment(
    assigner: assignment.AssignmentProcessor,
    group: subscriptions.SubscriptionGroupConfig,
    topic: ids.TopicName,
    client_id: ids.ClientId,
    found: pb.registry.GetTopicRouteResponse,
    wire_topic: pb.v2.Resource,
) -> pb.v2_service.QueryAssignmentResponse:
    """The caller's assignments of ``topic`` for ``group`` over the route ``found``.

    Raises:
        ForbiddenError: the topic has no readable queue.
        TooManyRequestsError: the caller could not join the group (a registry bound).
    """
    readable = {
        route.MessageQueue(topic, ids.BrokerName(q.broker.name), ids.QueueId(q.id)): q
        for q in convert.query_route_queues(found, wire_topic)
        if q.permission in _READABLE
    }
    if not readable:
        raise errors.ForbiddenError(f"topic {topic!r} has no readable queue")
    assigned = assigner.assign(group, topic, client_id, readable.keys())
    assignments = []
    for queue in assigned.queues:
        wire = pb.v2.MessageQueue()
        wire.CopyFrom(readable[queue])
        if assigned.whole_broker:
            wire.id = -1  # POP reads any queue of the broker
        assignments.append(pb.v2.Assignment(message_queue=wire))
    return pb.v2_service.QueryAssignmentResponse(status=codes.ok(), assignments=assignments)


def subscription(entry: pb.v2.SubscriptionEntry) -> consumers.Subscription:
    """A settings report's subscription entry as the consumer registry keeps it."""
    kind = (
        consumers.ExpressionType.SQL92
        if entry.expression.type == pb.v2.FilterType.SQL
        else consumers.ExpressionType.TAG
    )
    return consumers.Subscription(
        ids.TopicName(entry.topic.name), kind, entry.expression.expression or "*"
    )
