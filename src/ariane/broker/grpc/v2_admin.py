"""``V2AdminService``: the upstream ``apache.rocketmq.v2.Admin`` API (RIP-2's proxy admin), served
by every broker.

RocketMQ serves this service on its proxy (``ProxyAdminGrpcService``, 5.5's RIP-2): the proxy
answers client-side RPCs (subscriptions, connections, runtime stats, log level) from its own
gRPC channels and reaches brokers over Remoting for the rest. Ariane's brokers are the gRPC
access points, so each broker answers every RPC from its own tables: what its clients report
(``ConsumerRegistry``, ``ClientRegistry``) and what it stores (``processors.admin``).

Status codes follow the proxy: a missing topic or group is BAD_REQUEST, a query without
``message_id`` or ``message_key`` is BAD_REQUEST; where the proxy answers INTERNAL_ERROR
for a store refusal, Ariane answers the refusal's own code (TOPIC_NOT_FOUND,
CONSUMER_GROUP_NOT_FOUND, MESSAGE_NOT_FOUND …) through the status guard (``grpcwire.guard``).

``PrintThreadStackTrace`` and ``VerifyMessage`` push their command on the client's Telemetry
stream and answer OK at once, as the proxy does (the client's reply comes back on that stream;
NOT_FOUND when the client has no stream here).

``GetConsumerRunningInfo`` is built from what the client reported here, without asking it:
RocketMQ's proxy relays the broker's ``GET_CONSUMER_RUNNING_INFO`` to a gRPC client only as a
``PrintThreadStackTraceCommand`` (``GrpcClientChannel``; the reply fills ``jstack`` alone, and
without ``jstackEnable`` nothing answers until the broker's CONSUME_MSG_TIMEOUT), and the
official clients ignore that command. Ariane answers at once: the client's type and message
model (``properties``), its subscriptions, and per readable queue of each subscribed topic
here the group's progress (``ProcessQueueInfo``: committed offset, messages in flight, last
consume time; POP lets any member take any queue, so every readable queue is listed); NOT_FOUND
when the client is not a live member of the group here (RocketMQ: SYSTEM_ERROR "not online").

``AdminSendMessage`` builds one v2 ``Message`` from the request (topic, body, user and system
properties; ``tag`` and ``key`` override theirs; a message id, born time and host are made when
absent) and sends it through ``SendProcessor.send``, the core of a client's ``SendMessage``:
the same checks, quotas and message-type rules answer the same codes (TOPIC_NOT_FOUND,
MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, MESSAGE_BODY_TOO_LARGE …); the answer carries the
message id.

Authorization: ``security.requests.GRPC_RULES`` maps each RPC to the permission of the Remoting
code it stands for (reads need Get on the group/topic, changes Update, ``AdminSendMessage`` Pub
on the topic as ``SEND_MESSAGE``, ``ChangeLogLevel`` and ``GetProxyRuntimeStats`` the cluster);
a Super user passes all.

Invariants: no admin rule lives here (``processors.admin`` holds them, as for
``ariane.admin.v1.Admin``); every answer is bounded by the broker's tables and
``ANSWER_ROWS_MAX``.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Iterable, Iterator
from typing import Any

import grpc

from ariane.broker import runtime
from ariane.broker.grpc import messaging, producer_streams
from ariane.broker.processors import admin, admin_stats, send
from ariane.broker.tables import clients, consumers
from ariane.common import errors, ids, message, message_id
from ariane.grpcwire import codes, convert, messages, pb

Context = grpc.aio.ServicerContext[Any, Any]

ANSWER_ROWS_MAX = 10_000
"""Most subscription, connection or queue rows one answer carries."""

_LEVELS = {
    pb.v2_admin.ChangeLogLevelRequest.TRACE: logging.DEBUG,  # Python has no TRACE
    pb.v2_admin.ChangeLogLevelRequest.DEBUG: logging.DEBUG,
    pb.v2_admin.ChangeLogLevelRequest.INFO: logging.INFO,
    pb.v2_admin.ChangeLogLevelRequest.WARN: logging.WARNING,
    pb.v2_admin.ChangeLogLevelRequest.ERROR: logging.ERROR,
}

_MODELS = {
    consumers.MessageModel.CLUSTERING: pb.v2_admin.MessageModel.CLUSTERING,
    consumers.MessageModel.BROADCASTING: pb.v2_admin.MessageModel.BROADCASTING,
}

_EXPRESSIONS = {
    consumers.ExpressionType.TAG: pb.v2.FilterType.TAG,
    consumers.ExpressionType.SQL92: pb.v2.FilterType.SQL,
}

_CONSUMER_TYPES = frozenset(
    {
        "PUSH_CONSUMER",
        "SIMPLE_CONSUMER",
        "PULL_CONSUMER",
        "LITE_PUSH_CONSUMER",
        "LITE_SIMPLE_CONSUMER",
    }
)

_log = logging.getLogger(__name__)


def _name(value: pb.v2.Resource, what: str) -> str:
    if not value.name:
        raise errors.BadRequestError(f"{what} is required (a Resource with a name)")
    return value.name


def _timestamp_ms(value: Any) -> int:
    return int(value.seconds) * 1000 + int(value.nanos) // 1_000_000


class V2AdminService:
    """The ``apache.rocketmq.v2.Admin`` RPCs of one broker.

    Args:
        broker: the runtime (name, cluster, store, topic table).
        processor: the admin processor (lag, resets, message queries, group deletes).
        client_registry: the broker's client sessions (connections, client types).
        consumer_registry: the live consumer groups and their subscriptions.
        streams: the open Telemetry streams (``None``: the client commands answer NOT_FOUND).
        sender: the send path (``None``: AdminSendMessage answers UNSUPPORTED).
    """

    def __init__(
        self,
        broker: runtime.BrokerRuntime,
        processor: admin.AdminProcessor,
        client_registry: clients.ClientRegistry,
        consumer_registry: consumers.ConsumerRegistry,
        streams: producer_streams.ProducerStreams | None = None,
        sender: send.SendProcessor | None = None,
    ) -> None:
        self._streams = streams
        self._sender = sender
        self._ids = message_id.MessageIdFactory()
        self._rt = broker
        self._admin = processor
        self._clients = client_registry
        self._consumers = consumer_registry

    # -- process --------------------------------------------------------------------------------

    async def change_log_level(
        self, request: pb.v2_admin.ChangeLogLevelRequest, context: Context
    ) -> pb.v2_admin.ChangeLogLevelResponse:
        """ChangeLogLevel: the root logger's level (TRACE is DEBUG); the remark says which."""
        level = _LEVELS.get(request.level)
        if level is None:
            return pb.v2_admin.ChangeLogLevelResponse(
                remark=f"unknown level {int(request.level)}; log level unchanged"
            )
        logging.getLogger().setLevel(level)
        _log.warning("admin: log level changed to %s", logging.getLevelName(level))
        return pb.v2_admin.ChangeLogLevelResponse(
            remark=f"log level changed to {logging.getLevelName(level)}"
        )

    async def get_proxy_runtime_stats(
        self, request: pb.v2_admin.GetProxyRuntimeStatsRequest, context: Context
    ) -> pb.v2_admin.GetProxyRuntimeStatsResponse:
        """GetProxyRuntimeStats: this broker's name, Ariane's version and its client sessions
        (producers, consumers); in/out TPS are not measured here (0)."""
        from ariane import __version__

        sessions = self._clients.sessions()
        return pb.v2_admin.GetProxyRuntimeStatsResponse(
            status=codes.ok(),
            proxy_name=self._rt.broker_name,
            version=f"ariane-{__version__}",
            connections=len(sessions),
            producers=sum(1 for s in sessions if s.client_type == "PRODUCER"),
            consumers=sum(1 for s in sessions if s.client_type in _CONSUMER_TYPES),
        )

    # -- topics ---------------------------------------------------------------------------------

    async def describe_topic_status(
        self, request: pb.v2_admin.DescribeTopicStatusRequest, context: Context
    ) -> pb.v2_admin.DescribeTopicStatusResponse:
        """DescribeTopicStatus: the topic's message type (TOPIC_NOT_FOUND when absent)."""
        config = self._admin.existing_topic(_name(request.topic, "topic"))
        return pb.v2_admin.DescribeTopicStatusResponse(
            status=codes.ok(),
            topic_message_type=convert.accept_message_types(config.message_type)[0],
            description=f"{config.read_queue_nums} read / {config.write_queue_nums} write "
            f"queues, perm {int(config.perm)}, on {self._rt.broker_name}",
        )

    async def get_topic_route(
        self, request: pb.v2_admin.GetTopicRouteRequest, context: Context
    ) -> pb.v2_admin.GetTopicRouteResponse:
        """GetTopicRoute: this broker's part of the route as RocketMQ ``TopicRouteData`` JSON
        (``brokerDatas``, ``queueDatas``; TOPIC_NOT_FOUND when absent)."""
        config = self._admin.existing_topic(_name(request.topic, "topic"))
        queues = config.queue_data(self._rt.broker_name)
        route_data = {
            "brokerDatas": [
                {
                    "cluster": self._rt.settings.cluster,
                    "brokerName": self._rt.broker_name,
                    "brokerAddrs": {str(self._rt.broker_id): self._rt.client_endpoint},
                }
            ],
            "queueDatas": [
                {
                    "brokerName": queues.broker_name,
                    "readQueueNums": queues.read_queue_nums,
                    "writeQueueNums": queues.write_queue_nums,
                    "perm": queues.perm,
                    "topicSysFlag": queues.topic_sys_flag,
                }
            ],
        }
        return pb.v2_admin.GetTopicRouteResponse(
            status=codes.ok(), topic_route_data=json.dumps(route_data, sort_keys=True)
        )

    # -- subscriptions and connections ----------------------------------------------------------

    def _members(
        self, group: str, topic: str
    ) -> Iterator[tuple[ids.GroupName, consumers.ConsumerMember, consumers.Subscription]]:
        """Every (group, member, subscription) of the live groups, filtered by name ("": all)."""
        rows = 0
        for name in self._consumers.groups():
            if group and name != group:
                continue
            for member in self._consumers.members(name):
                for sub in member.subscriptions:
                    if topic and sub.topic != topic:
                        continue
                    rows += 1
                    if rows > ANSWER_ROWS_MAX:
                        return
                    yield name, member, sub

    def _subscription_info(
        self, group: str, member: consumers.ConsumerMember, sub: consumers.Subscription
    ) -> pb.v2_admin.SubscriptionInfo:
        info = pb.v2_admin.SubscriptionInfo(
            group=convert.resource(group),
            topic=convert.resource(sub.topic),
            expression=pb.v2.FilterExpression(
                type=_EXPRESSIONS[sub.expression_type], expression=sub.expression
            ),
            online=True,
            message_model=_MODELS[member.message_model],
        )
        info.last_update_timestamp.CopyFrom(messages.timestamp(int(time.time() * 1000)))
        return info

    def _client_info(self, member: consumers.ConsumerMember) -> pb.v2_admin.ClientInfo:
        return pb.v2_admin.ClientInfo(
            client_id=member.client_id, message_model=_MODELS[member.message_model]
        )

    async def list_subscription(
        self, request: pb.v2_admin.ListSubscriptionRequest, context: Context
    ) -> pb.v2_admin.ListSubscriptionResponse:
        """ListSubscription: the live subscriptions of this broker's consumers, one per
        (group, topic, expression), filtered by the optional group and topic."""
        seen: dict[tuple[str, str, str], pb.v2_admin.SubscriptionInfo] = {}
        for group, member, sub in self._members(request.group.name, request.topic.name):
            key = (group, sub.topic, sub.expression)
            if key not in seen:
                seen[key] = self._subscription_info(group, member, sub)
        return pb.v2_admin.ListSubscriptionResponse(
            status=codes.ok(), subscription_info=[seen[k] for k in sorted(seen)]
        )

    async def describe_subscription(
        self, request: pb.v2_admin.DescribeSubscriptionRequest, context: Context
    ) -> pb.v2_admin.DescribeSubscriptionResponse:
        """DescribeSubscription: per live consumer client, what it subscribes to."""
        rows = [
            pb.v2_admin.DescribeSubscriptionResponse.ClientSubscriptionInfo(
                client_info=self._client_info(member),
                subscription_info=self._subscription_info(group, member, sub),
            )
            for group, member, sub in self._members(request.group.name, request.topic.name)
        ]
        return pb.v2_admin.DescribeSubscriptionResponse(
            status=codes.ok(), client_subscription_info=rows
        )

    async def delete_subscription(
        self, request: pb.v2_admin.DeleteSubscriptionRequest, context: Context
    ) -> pb.v2_admin.DeleteSubscriptionResponse:
        """DeleteSubscription: delete the group here, its offsets and POP state (the proxy's
        ``deleteSubscriptionGroup`` on every broker of the topic; topic and group required)."""
        _name(request.topic, "topic")
        group = self._admin.delete_group(_name(request.group, "group"))
        return pb.v2_admin.DeleteSubscriptionResponse(
            status=codes.ok(f"group {group} deleted on {self._rt.broker_name}")
        )

    async def list_consumer_connection(
        self, request: pb.v2_admin.ListConsumerConnectionRequest, context: Context
    ) -> pb.v2_admin.ListConsumerConnectionResponse:
        """ListConsumerConnection: the group's live clients (of the topic when given)."""
        group = _name(request.group, "group")
        topic = request.topic.name
        members = [
            m
            for m in self._consumers.members(ids.GroupName(group))
            if not topic or m.subscribes(topic)
        ]
        return pb.v2_admin.ListConsumerConnectionResponse(
            status=codes.ok(),
            client_info=[self._client_info(m) for m in members[:ANSWER_ROWS_MAX]],
        )

    # -- progress -------------------------------------------------------------------------------

    def _lags(self, group: str, wanted: Iterable[pb.v2.Resource]) -> list[admin_stats.QueueLag]:
        names = [t.name for t in wanted if t.name]
        if not names:
            return self._admin.consumer_lag(group, None)[:ANSWER_ROWS_MAX]
        return [q for name in names for q in self._admin.consumer_lag(group, name)][
            :ANSWER_ROWS_MAX
        ]

    def _accumulation(
        self, lags: list[admin_stats.QueueLag], now_ms: int
    ) -> pb.v2_admin.DescribeGroupAccumulationResponse.GroupAccumulation:
        total = sum(q.lag for q in lags)
        inflight = sum(q.inflight for q in lags)
        oldest = min(
            (
                admin_stats.store_time_ms(self._rt.store, q.topic, q.queue_id, q.consumer_offset)
                for q in lags
                if q.lag > 0
            ),
            default=0,
        )
        result = pb.v2_admin.DescribeGroupAccumulationResponse.GroupAccumulation(
            inflight_messages=inflight,
            ready_messages=max(0, total - inflight),
            accumulation=total,
            last_consume_timestamp=max((q.last_timestamp_ms for q in lags), default=0),
        )
        result.deliver_delay_time.CopyFrom(messages.duration(now_ms - oldest if oldest else 0))
        return result

    async def describe_group_accumulation(
        self, request: pb.v2_admin.DescribeGroupAccumulationRequest, context: Context
    ) -> pb.v2_admin.DescribeGroupAccumulationResponse:
        """DescribeGroupAccumulation: the group's backlog (``GET_CONSUME_STATS`` summed): the
        messages not yet consumed, those in flight, those ready, the store time of the last
        consumed message and how long the oldest unconsumed one has waited; per topic too.
        Lite topics are not served (UNSUPPORTED)."""
        if request.HasField("lite_topic"):
            raise errors.UnsupportedError("lite topics are not served by this broker")
        group = _name(request.group, "group")
        lags = self._lags(group, request.topics)
        now_ms = int(time.time() * 1000)
        by_topic: dict[str, list[admin_stats.QueueLag]] = {}
        for q in lags:
            by_topic.setdefault(q.topic, []).append(q)
        return pb.v2_admin.DescribeGroupAccumulationResponse(
            status=codes.ok(),
            accumulation=self._accumulation(lags, now_ms),
            topic_accumulation={t: self._accumulation(qs, now_ms) for t, qs in by_topic.items()},
        )

    async def query_time_span(
        self, request: pb.v2_admin.QueryTimeSpanRequest, context: Context
    ) -> pb.v2_admin.QueryTimeSpanResponse:
        """QueryTimeSpan: per queue the store times of its first and last messages and of the
        group's last consumed one (RocketMQ ``QueueTimeSpan``); ``delay_time_ms`` is the
        last message's minus the last consumed one's (0 when caught up)."""
        group = _name(request.group, "group")
        rows = []
        store = self._rt.store
        for q in self._lags(group, request.topics):
            min_offset = store.min_queue_offset(q.topic, q.queue_id)
            newest = admin_stats.store_time_ms(store, q.topic, q.queue_id, q.broker_offset - 1)
            consumed = q.last_timestamp_ms
            rows.append(
                pb.v2_admin.QueryTimeSpanResponse.QueueTimeSpan(
                    message_queue=pb.v2.MessageQueue(
                        topic=convert.resource(q.topic),
                        id=q.queue_id,
                        broker=pb.v2.Broker(name=self._rt.broker_name),
                    ),
                    min_timestamp=admin_stats.store_time_ms(store, q.topic, q.queue_id, min_offset),
                    max_timestamp=newest,
                    consume_timestamp=consumed,
                    delay_time_ms=max(0, newest - consumed) if q.lag > 0 else 0,
                )
            )
        return pb.v2_admin.QueryTimeSpanResponse(status=codes.ok(), queue_time_span_list=rows)

    async def reset_group_offset(
        self, request: pb.v2_admin.ResetGroupOffsetRequest, context: Context
    ) -> pb.v2_admin.ResetGroupOffsetResponse:
        """ResetGroupOffset: move the group on every readable queue of the topic to the first
        message stored at or after ``reset_timestamp`` (``INVOKE_BROKER_TO_RESET_OFFSET``)."""
        group = _name(request.group, "group")
        topic = _name(request.topic, "topic")
        when_ms = _timestamp_ms(request.reset_timestamp)
        _, offsets = self._admin.reset_offset(
            group, topic, admin.ResetTarget.TIMESTAMP, timestamp_ms=when_ms
        )
        return pb.v2_admin.ResetGroupOffsetResponse(
            status=codes.ok(f"group {group} reset on {len(offsets)} queues of {topic}")
        )

    # -- messages -------------------------------------------------------------------------------

    async def query_message(
        self, request: pb.v2_admin.ListMessageRequest, context: Context
    ) -> pb.v2_admin.ListMessageResponse:
        """QueryMessage: by ``message_id`` (client or offset id) or ``message_key`` in the
        topic (BAD_REQUEST for another search key, MESSAGE_NOT_FOUND for none)."""
        topic = _name(request.topic, "topic")
        key = request.WhichOneof("search_key")
        if key == "message_id":
            found = self._admin.messages_by_id(request.message_id, topic)
        elif key == "message_key":
            found = self._admin.messages_by_key(
                topic,
                request.message_key,
                max_messages=max(0, request.max_message_nums),
                window_ms=(
                    _timestamp_ms(request.begin_timestamp),
                    _timestamp_ms(request.end_timestamp),
                ),
            )
        else:
            raise errors.BadRequestError("one of message_id or message_key is required")
        delivery = message.Delivery(receipt_handle="", invisible_ms=0, attempt=1)
        return pb.v2_admin.ListMessageResponse(
            status=codes.ok(), messages=[messages.outgoing(m, delivery) for m in found]
        )

    # -- client commands ------------------------------------------------------------------------

    def _push(self, client_id: str, command: pb.v2_service.TelemetryCommand) -> None:
        if self._streams is None or not self._streams.push(ids.ClientId(client_id), command):
            raise errors.NotFoundError(
                f"client {client_id!r} has no open Telemetry stream on {self._rt.broker_name}"
            )

    async def print_thread_stack_trace(
        self, request: pb.v2_admin.PrintThreadStackTraceRequest, context: Context
    ) -> pb.v2_admin.PrintThreadStackTraceResponse:
        """PrintThreadStackTrace: push the command to the client (its stack trace comes back
        on its Telemetry stream); NOT_FOUND when it has no stream here."""
        command = pb.v2_service.PrintThreadStackTraceCommand(nonce=uuid.uuid4().hex)
        self._push(
            request.client_id,
            pb.v2_service.TelemetryCommand(print_thread_stack_trace_command=command),
        )
        return pb.v2_admin.PrintThreadStackTraceResponse(status=codes.ok("command sent"))

    async def verify_message(
        self, request: pb.v2_admin.VerifyMessageRequest, context: Context
    ) -> pb.v2_admin.VerifyMessageResponse:
        """VerifyMessage: push the stored message (by id in the topic) to the client for it to
        consume and report; MESSAGE_NOT_FOUND for an unknown id, NOT_FOUND for a client with
        no stream here."""
        topic = _name(request.topic, "topic")
        stored = self._admin.messages_by_id(request.message_id, topic)[0]
        delivery = message.Delivery(receipt_handle="", invisible_ms=0, attempt=1)
        command = pb.v2_service.VerifyMessageCommand(
            nonce=uuid.uuid4().hex, message=messages.outgoing(stored, delivery)
        )
        self._push(
            request.client_id, pb.v2_service.TelemetryCommand(verify_message_command=command)
        )
        return pb.v2_admin.VerifyMessageResponse(status=codes.ok("command sent"))

    async def admin_send_message(
        self, request: pb.v2_admin.AdminSendMessageRequest, context: Context
    ) -> pb.v2_admin.AdminSendMessageResponse:
        """AdminSendMessage: one message built from the request, sent as a client's
        ``SendMessage`` is (``SendProcessor.send``); the answer's ``message_id`` is the stored
        message's. A refusal answers the send core's code (TOPIC_NOT_FOUND,
        MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, MESSAGE_BODY_TOO_LARGE …)."""
        if self._sender is None:
            raise errors.UnsupportedError("AdminSendMessage is not served by this broker")
        _name(request.topic, "topic")
        built = pb.v2.Message(
            topic=request.topic, body=request.body, user_properties=request.user_properties
        )
        props = built.system_properties
        props.CopyFrom(request.system_properties)
        if request.HasField("tag"):
            props.tag = request.tag
        if request.HasField("key") and request.key not in props.keys:
            props.keys.append(request.key)
        if not props.message_id:
            props.message_id = self._ids.next_id()
        if not props.HasField("born_timestamp"):
            props.born_timestamp.CopyFrom(messages.timestamp(int(time.time() * 1000)))
        born_ip = messaging.peer_ip(context)
        props.born_host = props.born_host or born_ip
        (outcome,) = await self._sender.send([messages.incoming(built)], born_ip=born_ip)
        return pb.v2_admin.AdminSendMessageResponse(
            status=codes.status(outcome.code, outcome.text), message_id=outcome.message_id
        )

    # -- consumer running info ------------------------------------------------------------------

    async def get_consumer_running_info(
        self, request: pb.v2_admin.GetConsumerRunningInfoRequest, context: Context
    ) -> pb.v2_admin.GetConsumerRunningInfoResponse:
        """GetConsumerRunningInfo: what the client reported here and its group's progress (see
        the module docstring); NOT_FOUND when it is not a live member of the group here,
        BAD_REQUEST without a group or client id."""
        group = ids.GroupName(_name(request.group, "group"))
        if not request.client_id:
            raise errors.BadRequestError("client_id is required")
        member = self._consumers.member(group, ids.ClientId(request.client_id))
        if member is None:
            raise errors.NotFoundError(
                f"client {request.client_id!r} is not a live consumer of group {group!r} on "
                f"{self._rt.broker_name}"
            )
        info = pb.v2_admin.ConsumerRunningInfo(properties=self._running_properties(group, member))
        for sub in member.subscriptions:
            info.subscriptions[sub.topic].CopyFrom(
                pb.v2.FilterExpression(
                    type=_EXPRESSIONS[sub.expression_type], expression=sub.expression
                )
            )
            room = ANSWER_ROWS_MAX - len(info.message_queue_table)
            info.message_queue_table.extend(self._queue_items(group, sub.topic)[: max(0, room)])
        return pb.v2_admin.GetConsumerRunningInfoResponse(
            status=codes.ok(), consumer_running_info=info
        )

    def _running_properties(
        self, group: ids.GroupName, member: consumers.ConsumerMember
    ) -> dict[str, str]:
        """RocketMQ ``ConsumerRunningInfo.properties`` keys where one applies (consume type,
        orderly), plus what the client reported (type, model, last report time)."""
        session = self._clients.get(member.client_id)
        kind = session.client_type if session is not None else ""
        config = self._rt.groups.get(group)
        return {
            "clientType": kind,
            "messageModel": member.message_model.name,
            "PROP_CONSUME_TYPE": (
                "CONSUME_PASSIVELY" if kind.endswith("PUSH_CONSUMER") else "CONSUME_ACTIVELY"
            ),
            "PROP_CONSUMEORDERLY": str(config is not None and config.consume_orderly).lower(),
            "lastSeenTimestamp": str(member.last_seen_ms),
            "brokerName": self._rt.broker_name,
        }

    def _queue_items(self, group: str, topic: str) -> list[pb.v2_admin.MessageQueueItem]:
        """The group's progress on each readable queue of ``topic`` here (none when the
        topic or the group's state is not here)."""
        try:
            lags = self._admin.consumer_lag(group, topic)
        except (errors.ConsumerGroupNotFoundError, errors.TopicNotFoundError):
            return []
        return [
            pb.v2_admin.MessageQueueItem(
                message_queue=pb.v2.MessageQueue(
                    topic=convert.resource(q.topic),
                    id=q.queue_id,
                    broker=pb.v2.Broker(name=self._rt.broker_name),
                ),
                process_queue_info=pb.v2_admin.ProcessQueueInfo(
                    commit_offset=q.consumer_offset,
                    cached_msg_min_offset=q.consumer_offset if q.inflight else 0,
                    cached_msg_max_offset=max(q.pull_offset - 1, 0) if q.inflight else 0,
                    cached_msg_count=q.inflight,
                    last_consume_timestamp=q.last_timestamp_ms,
                ),
            )
            for q in lags
        ]


__all__ = ["ANSWER_ROWS_MAX", "V2AdminService"]
