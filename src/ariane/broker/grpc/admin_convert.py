"""Conversions between ``ariane.admin.v1`` messages and the broker's config values (pure).

Proto3 scalars cannot say "not given", so the admin API gives zero a meaning, the same in
every conversion here:

* ``Topic`` on create: ``read_queue_nums``/``write_queue_nums`` 0 takes the other count, or the
  broker's ``default_queue_nums`` when both are 0; ``perm`` 0 means READ|WRITE (6);
  ``message_type`` UNSPECIFIED means NORMAL; ``retention_hours`` 0 or -1 means the broker's
  default (``file_reserved_hours``).
* ``Topic`` on update: every zero field (UNSPECIFIED type) keeps the current value;
  ``retention_hours`` -1 switches back to the broker default.
* ``SubscriptionGroup`` (create and update alike: it is the whole desired config):
  ``max_delivery_attempts`` 0 means the default 17; an absent ``retry_policy`` (or one with
  no strategy) means the default of the group's kind; the policy's ``max_attempts`` is ignored
  in favour of ``max_delivery_attempts``, and an exponential ``multiplier`` must be a whole
  number (RocketMQ's ``ExponentialRetryPolicy`` multiplier is an integer); an empty
  ``allocate_strategy`` means AVG.

Bad values raise the ``ArianeError`` the admin API answers with (ILLEGAL_TOPIC,
ILLEGAL_CONSUMER_GROUP); the table managers check the remaining rules.
"""

from __future__ import annotations

from ariane.broker.tables import subscriptions, topic_config
from ariane.common import allocate, errors, ids, limits, message, route
from ariane.grpcwire import convert, pb

PERM_BITS_MAX = 15
"""Largest RocketMQ perm value (READ 4 | WRITE 2 | INHERIT 1 | PRIORITY 8)."""

_TYPE_NAMES = ", ".join(kind.value for kind in message.MessageType)


def topic_message(config: topic_config.TopicConfig) -> pb.admin.Topic:
    """The admin ``Topic`` of a stored topic config (retention -1 is sent as 0)."""
    return pb.admin.Topic(
        name=config.name,
        read_queue_nums=config.read_queue_nums,
        write_queue_nums=config.write_queue_nums,
        perm=int(config.perm),
        message_type=convert.topic_message_type(config.message_type),
        retention_hours=max(0, config.retention_hours),
    )


def _message_type(
    value: pb.topic.TopicMessageType, name: str, current: message.MessageType
) -> message.MessageType:
    if value == pb.topic.TopicMessageType.TOPIC_MESSAGE_TYPE_UNSPECIFIED:
        return current
    try:
        return convert.message_type_of(value)
    except ValueError:
        raise errors.IllegalTopicError(
            f"topic {name!r}: message_type {int(value)} is unknown; use one of {_TYPE_NAMES}"
        ) from None


def _perm(value: int, name: str, current: route.Perm) -> route.Perm:
    if value == 0:
        return current
    if not 0 < value <= PERM_BITS_MAX:
        raise errors.IllegalTopicError(
            f"topic {name!r}: perm {value} is not a sum of READ 4, WRITE 2, INHERIT 1, PRIORITY 8 "
            "(6 = read and write)"
        )
    return route.Perm(value)


def _retention(value: int, name: str, current: int) -> int:
    if value == 0:
        return current
    if value < topic_config.RETENTION_BROKER_DEFAULT:
        raise errors.IllegalTopicError(
            f"topic {name!r}: retention_hours={value}; give hours >= 1, or 0 / -1 for the "
            "broker default"
        )
    return value


def new_topic_config(value: pb.admin.Topic, *, default_queue_nums: int) -> topic_config.TopicConfig:
    """The config a CreateTopic request asks for (zero fields take defaults, see the module).

    Raises:
        IllegalTopicError: unknown message type, perm outside 1..15 or retention below -1.
            The manager checks the name and the queue counts.
    """
    read = value.read_queue_nums or value.write_queue_nums or default_queue_nums
    write = value.write_queue_nums or value.read_queue_nums or default_queue_nums
    return topic_config.TopicConfig(
        name=ids.TopicName(value.name),
        read_queue_nums=read,
        write_queue_nums=write,
        perm=_perm(value.perm, value.name, route.PERM_READ_WRITE),
        message_type=_message_type(value.message_type, value.name, message.MessageType.NORMAL),
        retention_hours=_retention(
            value.retention_hours, value.name, topic_config.RETENTION_BROKER_DEFAULT
        ),
    )


def updated_topic_config(
    value: pb.admin.Topic, current: topic_config.TopicConfig
) -> topic_config.TopicConfig:
    """``current`` with the non-zero fields of an UpdateTopic request applied.

    Raises:
        IllegalTopicError: as ``new_topic_config``.
    """
    return topic_config.TopicConfig(
        name=current.name,
        read_queue_nums=value.read_queue_nums or current.read_queue_nums,
        write_queue_nums=value.write_queue_nums or current.write_queue_nums,
        perm=_perm(value.perm, current.name, current.perm),
        message_type=_message_type(value.message_type, current.name, current.message_type),
        retention_hours=_retention(value.retention_hours, current.name, current.retention_hours),
    )


def retry_policy_message(
    policy: subscriptions.GroupRetryPolicy, *, max_attempts: int
) -> pb.v2.RetryPolicy:
    """The v2 ``RetryPolicy`` of a group's backoff, with ``max_attempts`` filled in."""
    result = pb.v2.RetryPolicy(max_attempts=max_attempts)
    if policy.kind is subscriptions.GroupRetryPolicyType.EXPONENTIAL:
        backoff = result.exponential_backoff
        backoff.initial.FromMilliseconds(policy.initial_ms)
        backoff.max.FromMilliseconds(policy.max_ms)
        backoff.multiplier = float(policy.multiplier)
    else:
        for delay_ms in policy.delays_ms:
            result.customized_backoff.next.add().FromMilliseconds(delay_ms)
    return result


def retry_policy_of(value: pb.v2.RetryPolicy, group: str) -> subscriptions.GroupRetryPolicy | None:
    """The backoff a v2 ``RetryPolicy`` describes; ``None`` when it names no strategy.

    Raises:
        IllegalConsumerGroupError: an exponential multiplier that is not a whole number.
    """
    strategy = value.WhichOneof("strategy")
    if strategy == "exponential_backoff":
        backoff = value.exponential_backoff
        if not float(backoff.multiplier).is_integer():
            raise errors.IllegalConsumerGroupError(
                f"group {group!r}: exponential multiplier {backoff.multiplier} must be a whole "
                "number (e.g. 2)"
            )
        return subscriptions.GroupRetryPolicy(
            kind=subscriptions.GroupRetryPolicyType.EXPONENTIAL,
            initial_ms=backoff.initial.ToMilliseconds(),
            max_ms=backoff.max.ToMilliseconds(),
            multiplier=int(backoff.multiplier),
        )
    if strategy == "customized_backoff":
        return subscriptions.GroupRetryPolicy(
            kind=subscriptions.GroupRetryPolicyType.CUSTOMIZED,
            delays_ms=tuple(d.ToMilliseconds() for d in value.customized_backoff.next),
        )
    return None


def group_message(config: subscriptions.SubscriptionGroupConfig) -> pb.admin.SubscriptionGroup:
    """The admin ``SubscriptionGroup`` of a stored group; ``retry_policy`` only when set."""
    result = pb.admin.SubscriptionGroup(
        name=config.group,
        consume_orderly=config.consume_orderly,
        max_delivery_attempts=config.max_delivery_attempts,
        broadcast=config.broadcast_consume_allowed,
        allocate_strategy=config.allocate_strategy.value,
        allocate_config_queues=[
            pb.admin.QueueRef(topic=q.topic, broker_name=q.broker_name, queue_id=q.queue_id)
            for q in config.allocate_config_queues
        ],
    )
    if config.retry_policy is not None:
        result.retry_policy.CopyFrom(
            retry_policy_message(config.retry_policy, max_attempts=config.max_delivery_attempts)
        )
    return result


def group_config_of(
    value: pb.admin.SubscriptionGroup,
    current: subscriptions.SubscriptionGroupConfig | None,
) -> subscriptions.SubscriptionGroupConfig:
    """The whole desired config of a Create/UpdateSubscriptionGroup request.

    ``consume_enable`` is not part of the admin message and keeps its current value.

    Raises:
        IllegalConsumerGroupError: a bad retry policy multiplier or an unknown allocation
            strategy; the manager checks the name, the attempts and the delays.
    """
    policy = (
        retry_policy_of(value.retry_policy, value.name) if value.HasField("retry_policy") else None
    )
    return subscriptions.SubscriptionGroupConfig(
        group=ids.GroupName(value.name),
        consume_enable=True if current is None else current.consume_enable,
        consume_orderly=value.consume_orderly,
        broadcast_consume_allowed=value.broadcast,
        max_delivery_attempts=value.max_delivery_attempts or limits.MAX_DELIVERY_ATTEMPTS_DEFAULT,
        retry_policy=policy,
        allocate_strategy=_strategy_of(value.allocate_strategy, value.name),
        allocate_config_queues=tuple(
            route.MessageQueue(
                ids.TopicName(q.topic), ids.BrokerName(q.broker_name), ids.QueueId(q.queue_id)
            )
            for q in value.allocate_config_queues
        ),
    )


def _strategy_of(name: str, group: str) -> allocate.AllocateStrategy:
    if not name:
        return allocate.DEFAULT_STRATEGY
    try:
        return allocate.AllocateStrategy(name)
    except ValueError:
        known = ", ".join(s.value for s in allocate.AllocateStrategy)
        raise errors.IllegalConsumerGroupError(
            f"group {group!r}: allocate_strategy {name!r} is not one of {known}"
        ) from None


def stored_message(
    stored: message.StoredMessage, broker_name: ids.BrokerName
) -> pb.admin.StoredMessage:
    """The admin ``StoredMessage`` of a message read from the CommitLog (RocketMQ MessageExt)."""
    result = pb.admin.StoredMessage(
        topic=stored.topic,
        queue_id=stored.queue_id,
        queue_offset=stored.queue_offset,
        commit_log_offset=stored.commit_log_offset,
        keys=list(stored.message.keys),
        properties=dict(stored.properties),
        body=stored.body,
        born_timestamp_ms=stored.born_timestamp_ms,
        store_timestamp_ms=stored.store_timestamp_ms,
        reconsume_times=stored.reconsume_times,
        message_id=stored.message.uniq_key or "",
        born_host=str(stored.born_host),
        store_host=str(stored.store_host),
        broker_name=broker_name,
    )
    tag = stored.message.tags
    if tag is not None:
        result.tag = tag
    return result
