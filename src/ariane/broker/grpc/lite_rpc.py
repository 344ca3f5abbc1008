"""Lite topics on the v2 wire (RocketMQ 5.5, RIP-83): ``SyncLiteSubscription``, a lite
consumer's receive filter, and the Telemetry command that tells a consumer to drop a lite topic.

``sync_lite_subscription`` checks the request as the proxy's ``LiteSubscriptionActivity``: the
group and topic names, the topic must exist here and be a LITE parent (ILLEGAL_TOPIC
otherwise: a lite subscription binds to a LITE topic), every lite topic name must pass the name
rules (ILLEGAL_LITE_TOPIC), the action must be one of the four; it then applies the action to
the client's set (``tables.lite_topics``: LITE_SUBSCRIPTION_QUOTA_EXCEEDED beyond the quota).
``offset_option`` is accepted and not honoured: a subscription reads from when it is made.

``receive_filter`` is what a LITE_PUSH_CONSUMER's or LITE_SIMPLE_CONSUMER's ReceiveMessage on
its bind topic filters with, whatever expression it sent: the group's live view of its lite
subscriptions there (``filters.LiteFilter``). ``unsubscribe_command`` is the
``NotifyUnsubscribeLiteCommand`` the expiry loop pushes on a subscriber's Telemetry stream.
"""

from __future__ import annotations

from ariane.broker import filters
from ariane.broker.tables import lite_topics, topic_config
from ariane.common import errors, ids, message, topics
from ariane.grpcwire import codes, pb

_ACTIONS = {
    pb.v2.LiteSubscriptionAction.PARTIAL_ADD: lite_topics.SyncAction.PARTIAL_ADD,
    pb.v2.LiteSubscriptionAction.PARTIAL_REMOVE: lite_topics.SyncAction.PARTIAL_REMOVE,
    pb.v2.LiteSubscriptionAction.COMPLETE_ADD: lite_topics.SyncAction.COMPLETE_ADD,
    pb.v2.LiteSubscriptionAction.COMPLETE_REMOVE: lite_topics.SyncAction.COMPLETE_REMOVE,
}
"""v2 ``LiteSubscriptionAction`` → the table's action."""


def sync_lite_subscription(
    table: lite_topics.LiteTopicTable,
    topic_table: topic_config.TopicConfigManager,
    client_id: ids.ClientId,
    request: pb.v2_service.SyncLiteSubscriptionRequest,
) -> pb.v2_service.SyncLiteSubscriptionResponse:
    """Apply one SyncLiteSubscription of ``client_id`` (module docstring).

    Raises:
        IllegalConsumerGroupError, IllegalTopicError, TopicNotFoundError,
        IllegalLiteTopicError, BadRequestError (an unknown action),
        LiteSubscriptionQuotaExceededError: nothing changed.
    """
    group = topics.validate_group(request.group.name)
    parent = bind_topic(topic_table, request.topic.name)
    action = _ACTIONS.get(request.action)
    if action is None:
        raise errors.BadRequestError(f"lite subscription action {request.action} is unknown")
    table.sync(client_id, group, parent, action, request.lite_topic_set)
    return pb.v2_service.SyncLiteSubscriptionResponse(status=codes.ok())


def bind_topic(topic_table: topic_config.TopicConfigManager, name: str) -> ids.TopicName:
    """The LITE parent a lite consumer binds to.

    Raises:
        IllegalTopicError: a bad name, or the topic is not a LITE topic. TopicNotFoundError: no
            such topic here.
    """
    topic = topic_table.require(topics.validate_topic(name))
    if topic.message_type is not message.MessageType.LITE:
        raise errors.IllegalTopicError(
            f"topic {topic.name!r} is a {topic.message_type.value} topic; lite subscriptions "
            "bind to a LITE topic (ariane admin topic create NAME --type LITE)"
        )
    return topic.name


def receive_filter(
    table: lite_topics.LiteTopicTable, group: ids.GroupName, topic: ids.TopicName
) -> filters.LiteFilter:
    """The filter of a lite consumer's receive on its bind topic: the group's live view."""
    view = table.view(group, topic)
    return filters.LiteFilter(names=view.names, hashes=view.hashes)


def unsubscribe_command(lite_topic: str) -> pb.v2_service.TelemetryCommand:
    """The Telemetry command telling a consumer to drop ``lite_topic`` from its set."""
    return pb.v2_service.TelemetryCommand(
        notify_unsubscribe_lite_command=pb.v2_service.NotifyUnsubscribeLiteCommand(
            lite_topic=lite_topic
        )
    )
