"""The classic admin codes' headers and bodies, as ``mqadmin`` (rocketmq-tools 5.3.3) writes and
reads them: pure conversions between RocketMQ's beans and the broker's config values.

Requests:

* ``UPDATE_AND_CREATE_TOPIC`` (17) header (``CreateTopicRequestHeader``): ``topic``,
  ``readQueueNums``, ``writeQueueNums``, ``perm`` (required, as RocketMQ's ``@CFNotNull``),
  ``topicFilterType``, ``topicSysFlag``, ``order``, ``attributes``. ``attributes`` is
  RocketMQ's ``AttributeParser`` text, ``+key=value`` and ``-key`` joined by ``,``; the one
  attribute Ariane keeps is ``message.type`` (NORMAL, FIFO, DELAY, TRANSACTION, MIXED,
  PRIORITY, LITE; ``-`` switches back to NORMAL). Any other key is refused, as RocketMQ refuses
  unsupported attributes. Fields an existing topic does not name keep their value (message type and
  retention, which the header cannot carry otherwise).
* ``UPDATE_AND_CREATE_SUBSCRIPTIONGROUP`` (200) body (``SubscriptionGroupConfig`` JSON):
  ``groupName`` (required), ``consumeEnable``, ``consumeMessageOrderly``,
  ``consumeBroadcastEnable``, ``retryMaxTimes`` (deliveries = retryMaxTimes + 1) and
  ``groupRetryPolicy`` (``CUSTOMIZED`` with ``customizedRetryPolicy.next`` delays in ms, or
  ``EXPONENTIAL`` with ``exponentialRetryPolicy.initial``/``max``/``multiplier``; no policy
  object means the group's default). Ariane's own fields (allocation strategy and queues)
  keep their current value; RocketMQ-only fields (``retryQueueNums``, ``brokerId``,
  ``whichBrokerWhenConsumeSlowly`` …) are ignored.

Answers: ``TopicStatsTable``, ``ConsumeStats``, ``ResetOffsetBody`` (``Map<MessageQueue, …>``
keyed by JSON objects, remoting.md §5), ``TopicConfigAndQueueMapping``, ``ConsumerConnection``,
``GroupList``, ``KVTable`` and ``BrokerStatsData``, written by ``fastjson.dumps`` (sorted
fields, nulls omitted).

Errors: a missing or malformed field raises ``replies.HeaderError`` (INVALID_PARAMETER, 29).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any

from ariane.broker.processors import admin, admin_stats
from ariane.broker.remoting import clients, rates, replies
from ariane.broker.tables import subscriptions, topic_config, traffic_stats
from ariane.common import allocate, errors, hashing, ids, message, route
from ariane.remoting import fastjson

PERM_BITS_MAX = 15
"""Largest RocketMQ perm value (PRIORITY 8 | READ 4 | WRITE 2 | INHERIT 1)."""

MESSAGE_TYPE_ATTRIBUTE = "message.type"
"""RocketMQ's ``TopicAttributes.TOPIC_MESSAGE_TYPE_ATTRIBUTE`` key."""

VERSION_DESC = "V5_3_3"
"""``MQVersion.getVersionDesc(479)``: the RocketMQ version whose protocol Ariane answers with."""

_TYPE_NAMES = ", ".join(kind.value for kind in message.MessageType)


# -- requests -----------------------------------------------------------------------------------


def topic_config_of(
    fields: Mapping[str, str], current: topic_config.TopicConfig | None
) -> topic_config.TopicConfig:
    """The config an UPDATE_AND_CREATE_TOPIC header asks for (module docstring).

    Raises:
        HeaderError: a required field is missing, a number is malformed, ``perm`` is outside
            1..15, or ``attributes`` names an unsupported key or message type.
    """
    header = replies.Header(fields)
    name = header.text("topic")
    perm = header.integer("perm")
    if not 0 < perm <= PERM_BITS_MAX:
        raise replies.HeaderError(
            f"perm {perm} is not a sum of READ 4, WRITE 2, INHERIT 1, PRIORITY 8 (6 = read+write)"
        )
    kind = current.message_type if current is not None else message.MessageType.NORMAL
    return topic_config.TopicConfig(
        name=ids.TopicName(name),
        read_queue_nums=header.integer("readQueueNums"),
        write_queue_nums=header.integer("writeQueueNums"),
        perm=route.Perm(perm),
        message_type=_message_type(fields.get("attributes", ""), kind),
        retention_hours=(
            current.retention_hours
            if current is not None
            else topic_config.RETENTION_BROKER_DEFAULT
        ),
    )


def _message_type(attributes: str, current: message.MessageType) -> message.MessageType:
    kind = current
    for item in filter(None, (part.strip() for part in attributes.split(","))):
        sign, key, _, value = item[:1], *item[1:].partition("=")
        if sign not in "+-" or key != MESSAGE_TYPE_ATTRIBUTE:
            raise replies.HeaderError(
                f"attribute {item!r} is not supported; Ariane keeps only "
                f"+{MESSAGE_TYPE_ATTRIBUTE}=<{_TYPE_NAMES}>"
            )
        if sign == "-":
            kind = message.MessageType.NORMAL
            continue
        try:
            kind = message.MessageType(value)
        except ValueError:
            raise replies.HeaderError(
                f"{MESSAGE_TYPE_ATTRIBUTE}={value!r} is unknown; use one of {_TYPE_NAMES}"
            ) from None
    return kind


def group_name_of(body: bytes) -> tuple[str, Mapping[str, Any]]:
    """The ``groupName`` of a SubscriptionGroupConfig body and the parsed body.

    Raises:
        HeaderError: the body is no JSON object or has no ``groupName``.
    """
    try:
        raw = fastjson.loads(body) if body else None
    except fastjson.JsonError as exc:
        raise replies.HeaderError(f"body is no SubscriptionGroupConfig JSON: {exc}") from None
    if not isinstance(raw, Mapping):
        raise replies.HeaderError("body is no SubscriptionGroupConfig JSON object")
    name = raw.get("groupName")
    if not isinstance(name, str) or not name:
        raise replies.HeaderError("SubscriptionGroupConfig field 'groupName' is required")
    return name, raw


def group_config_of(
    raw: Mapping[str, Any], current: subscriptions.SubscriptionGroupConfig | None
) -> subscriptions.SubscriptionGroupConfig:
    """The whole config a SubscriptionGroupConfig body asks for (module docstring).

    Raises:
        HeaderError: a field of the wrong type.
    """
    retry_max_times = _field(raw, "retryMaxTimes", int, 16)
    return subscriptions.SubscriptionGroupConfig(
        group=ids.GroupName(_field(raw, "groupName", str, "")),
        consume_enable=_field(raw, "consumeEnable", bool, True),
        consume_orderly=_field(raw, "consumeMessageOrderly", bool, False),
        broadcast_consume_allowed=_field(raw, "consumeBroadcastEnable", bool, True),
        max_delivery_attempts=retry_max_times + 1,
        retry_policy=_retry_policy(raw.get("groupRetryPolicy")),
        allocate_strategy=(
            current.allocate_strategy if current is not None else allocate.DEFAULT_STRATEGY
        ),
        allocate_config_queues=current.allocate_config_queues if current is not None else (),
    )


def _field(raw: Mapping[str, Any], name: str, kind: type[Any], default: Any) -> Any:
    value = raw.get(name, default)
    if value is None:
        return default
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise replies.HeaderError(
            f"SubscriptionGroupConfig field {name!r} must be a {kind.__name__}"
        )
    return value


def _retry_policy(raw: object) -> subscriptions.GroupRetryPolicy | None:
    if not isinstance(raw, Mapping):
        return None
    if raw.get("type") == "EXPONENTIAL" and isinstance(raw.get("exponentialRetryPolicy"), Mapping):
        policy = raw["exponentialRetryPolicy"]
        return subscriptions.GroupRetryPolicy(
            kind=subscriptions.GroupRetryPolicyType.EXPONENTIAL,
            initial_ms=_field(policy, "initial", int, 5_000),
            max_ms=_field(policy, "max", int, 7_200_000),
            multiplier=_field(policy, "multiplier", int, 2),
        )
    customized = raw.get("customizedRetryPolicy")
    if isinstance(customized, Mapping) and isinstance(customized.get("next"), list):
        delays = customized["next"]
        if not all(isinstance(d, int) and not isinstance(d, bool) for d in delays):
            raise replies.HeaderError("customizedRetryPolicy.next must list delays in ms")
        return subscriptions.GroupRetryPolicy(delays_ms=tuple(delays))
    return None


# -- answers ------------------------------------------------------------------------------------


def topic_stats_body(
    broker: str, topic: str, stats: Sequence[admin_stats.QueueStats], put_tps: float
) -> bytes:
    """``TopicStatsTable``; ``put_tps``: messages stored in the topic per second over about
    the last minute (``TrafficStats.topic_put_tps``)."""
    table = {
        fastjson.MessageQueue(topic, broker, s.queue_id): {
            "lastUpdateTimestamp": s.last_update_ms,
            "maxOffset": s.max_offset,
            "minOffset": s.min_offset,
        }
        for s in stats
    }
    return fastjson.dumps({"offsetTable": table, "topicPutTps": put_tps})


def consume_stats_body(
    broker: str, lags: Sequence[admin_stats.QueueLag], consume_tps: float
) -> bytes:
    """``ConsumeStats``; ``consume_tps``: messages handed to the group per second over about
    the last minute, summed over the topics of ``lags`` (``TrafficStats.group_get_tps``)."""
    table = {
        fastjson.MessageQueue(q.topic, broker, q.queue_id): {
            "brokerOffset": q.broker_offset,
            "consumerOffset": q.consumer_offset,
            "lastTimestamp": q.last_timestamp_ms,
            "pullOffset": q.pull_offset,
        }
        for q in lags
    }
    return fastjson.dumps({"consumeTps": consume_tps, "offsetTable": table})


def broker_stats_body(data: traffic_stats.StatsData) -> bytes:
    """``BrokerStatsData``: ``statsMinute``, ``statsHour``, ``statsDay``, each a
    ``BrokerStatsItem`` of ``sum``, ``tps`` and ``avgpt``."""

    def item(window: traffic_stats.Snapshot) -> dict[str, object]:
        return {"avgpt": window.avgpt, "sum": window.sum, "tps": window.tps}

    return fastjson.dumps(
        {
            "statsDay": item(data.day),
            "statsHour": item(data.hour),
            "statsMinute": item(data.minute),
        }
    )


def reset_offset_body(
    broker: str, topic: str, offsets: Mapping[ids.QueueId, ids.QueueOffset]
) -> bytes:
    """``ResetOffsetBody``: the new offset of each queue."""
    table = {fastjson.MessageQueue(topic, broker, q): offsets[q] for q in sorted(offsets)}
    return fastjson.dumps({"offsetTable": table})


def topic_config_body(config: topic_config.TopicConfig) -> bytes:
    """``TopicConfigAndQueueMapping`` (no static-topic mapping: ``mappingDetail`` omitted);
    ``order`` is true for FIFO topics."""
    return fastjson.dumps(
        {
            "attributes": {MESSAGE_TYPE_ATTRIBUTE: config.message_type.value},
            "order": config.message_type is message.MessageType.FIFO,
            "perm": int(config.perm),
            "readQueueNums": config.read_queue_nums,
            "topicFilterType": "SINGLE_TAG",
            "topicName": config.name,
            "topicSysFlag": 0,
            "writeQueueNums": config.write_queue_nums,
        }
    )


def consumer_connection_body(
    found: clients.ConsumerGroup, address_of: Callable[[Hashable], str]
) -> bytes:
    """``ConsumerConnection``: the group's live clients (``clientAddr`` = their socket peer)
    and its subscriptions as ``SubscriptionData``."""
    connections = [
        {
            "clientAddr": address_of(connection),
            "clientId": client_id,
            "language": client.language,
            "version": client.version,
        }
        for client_id, connection, client in found.member_details()
    ]
    return fastjson.dumps(
        {
            "connectionSet": connections,
            "consumeFromWhere": found.consume_from_where or None,
            "consumeType": found.consume_type,
            "messageModel": found.message_model,
            "subscriptionTable": {
                topic: subscription_data(s) for topic, s in found.subscriptions.items()
            },
        }
    )


def producer_connection_body(
    details: Sequence[tuple[str, Hashable, clients.ClientVersion]],
    address_of: Callable[[Hashable], str],
) -> bytes:
    """``ProducerConnection``: the producer group's live clients (``clientAddr`` = their
    socket peer)."""
    connections = [
        {
            "clientAddr": address_of(connection),
            "clientId": client_id,
            "language": client.language,
            "version": client.version,
        }
        for client_id, connection, client in details
    ]
    return fastjson.dumps({"connectionSet": connections})


def subscription_data(sub: clients.Subscription) -> dict[str, object]:
    """A ``SubscriptionData`` bean: TAG expressions list their tags and Java hash codes."""
    tags = (
        [t.strip() for t in sub.expression.split("||") if t.strip()]
        if sub.expression_type == "TAG" and sub.expression.strip() != "*"
        else []
    )
    return {
        "classFilterMode": False,
        "codeSet": [hashing.java_string_hash(t) for t in tags],
        "expressionType": sub.expression_type,
        "subString": sub.expression,
        "subVersion": sub.sub_version,
        "tagsSet": tags,
        "topic": sub.topic,
    }


def runtime_info_body(
    stats: admin.RuntimeStats,
    *,
    master: bool,
    earliest_ms: int,
    tps: tuple[tuple[float, ...], tuple[float, ...]] | None = None,
) -> bytes:
    """``KVTable`` of ``GET_BROKER_RUNTIME_INFO``: the keys ``mqadmin clusterList`` and
    ``brokerStatus`` read that Ariane knows. Message totals count since the broker started
    (the "morning" snapshots are 0); ``tps`` (put, delivered rates per window, messages/s,
    ``rates.TpsSampler``) gives ``putTps`` and ``getTransferedTps`` (absent when ``None``);
    thread-pool, page-cache and timer keys are not sent because Ariane does not measure them
    (``clusterList`` then prints ``null`` or 0 for them). ``earliestMessageTimeStamp`` is
    absent while the store holds no message."""
    store, counters = stats.store, stats.counters
    table: dict[str, str | None] = {
        "brokerActive": str(master).lower(),
        "brokerVersionDesc": VERSION_DESC,
        "brokerVersion": "479",
        "msgPutTotalYesterdayMorning": "0",
        "msgPutTotalTodayMorning": "0",
        "msgPutTotalTodayNow": str(counters.messages_in),
        "msgGetTotalYesterdayMorning": "0",
        "msgGetTotalTodayMorning": "0",
        "msgGetTotalTodayNow": str(counters.messages_out),
        # absent while the store is empty, so clusterList shows 0 hours rather than 55 years
        "earliestMessageTimeStamp": str(earliest_ms) if earliest_ms > 0 else None,
        "commitLogDiskRatio": f"{stats.disk_used_ratio:.4f}",
        "commitLogMinOffset": str(store.min_commit_log_offset),
        "commitLogMaxOffset": str(store.max_commit_log_offset),
        "dispatchBehindBytes": str(store.dispatch_behind_bytes),
        "remainHowManyDataToFlush": f"{store.flush_behind_bytes} B",
        "putMessageTimesTotal": str(store.put_message_count),
        "putMessageSizeTotal": str(store.put_message_bytes),
        "topicCount": str(stats.topic_count),
        "subscriptionGroupCount": str(stats.group_count),
        "consumerOffsetCount": str(stats.consumer_offset_count),
        "sentToDlqTotal": str(counters.sent_to_dlq),
    }
    if tps is not None:
        table["putTps"] = rates.rocketmq_text(tps[0])
        table["getTransferedTps"] = rates.rocketmq_text(tps[1])
    return fastjson.dumps({"table": table})


def group_list_body(groups: Sequence[str]) -> bytes:
    """``GroupList``."""
    return fastjson.dumps({"groupList": sorted(set(groups))})


def names_unknown(error: errors.ArianeError) -> bool:
    """Whether ``error`` says a topic or group is unknown (the stats answers are then empty,
    as RocketMQ's are)."""
    return isinstance(error, (errors.TopicNotFoundError, errors.ConsumerGroupNotFoundError))
