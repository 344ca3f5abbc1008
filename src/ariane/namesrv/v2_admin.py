"""``NamesrvV2Admin``: the upstream ``apache.rocketmq.v2.Admin`` on the access point (the name
server), answered by the broker groups' masters.

A tool written for RocketMQ 5's proxy admin dials the proxy, which reaches every broker; in
Ariane that access point is the name server, so it forwards each call with the caller's headers
(``forward.Forwarder.to_master``), and every broker checks the caller's permissions as for a
call made to it directly (the name server itself checks nothing, as for the other forwarded
RPCs):

* topic RPCs go to the masters of the groups serving the topic: ``DescribeTopicStatus`` to the
  first, ``ResetGroupOffset``, ``DeleteSubscription`` and ``QueryMessage`` to all of them (the
  proxy's RIP-2 fan-out); ``GetTopicRoute`` is answered from the name server's own route, the
  whole cluster's;
* group and client RPCs (subscriptions, connections, accumulation, time spans, runtime stats)
  go to every live master and the answers are merged; a master that does not know the group
  (CONSUMER_GROUP_NOT_FOUND) adds nothing; when no master answers OK, the first refusal is the
  answer;
* ``AdminSendMessage`` goes to one master serving the topic, taken in turn (a client's send
  picks one writable queue the same way); a topic no broker serves is TOPIC_NOT_FOUND here;
* ``GetConsumerRunningInfo`` goes to every live master: each answers what the client reported to
  it; the answers are merged (properties of the first, subscriptions and queue rows of all);
  NOT_FOUND when no master knows the client in the group;
* ``ChangeLogLevel`` changes one process's log level, so it is called on that broker, not here;
  it and the client-telemetry RPCs (``PrintThreadStackTrace``, ``VerifyMessage``) are not served
  here.

Invariants: at most ``FAN_OUT_MAX`` masters are called per request, all at once, each within the
forwarder's deadline; merged answers keep ``ANSWER_ROWS_MAX`` rows at most.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import grpc

from ariane.common import errors, ids
from ariane.grpcwire import codes, pb
from ariane.namesrv import forward
from ariane.namesrv import route_info_manager as rim

Context = grpc.aio.ServicerContext[Any, Any]
M = TypeVar("M", bound=pb.Message)

FAN_OUT_MAX = 64
"""Most broker group masters one request is forwarded to."""
ANSWER_ROWS_MAX = 10_000
"""Most rows of a merged answer."""

_Accumulation = pb.v2_admin.DescribeGroupAccumulationResponse.GroupAccumulation


def _concatenated(field: str) -> Callable[[Any, Any], None]:
    """A merge appending a part's repeated ``field`` to the answer's, up to ``ANSWER_ROWS_MAX``
    rows in all."""

    def merge(into: Any, part: Any) -> None:
        rows = getattr(into, field)
        rows.extend(getattr(part, field)[: max(0, ANSWER_ROWS_MAX - len(rows))])

    return merge


def _merge_accumulation(into: _Accumulation, part: _Accumulation) -> None:
    into.inflight_messages += part.inflight_messages
    into.ready_messages += part.ready_messages
    into.accumulation += part.accumulation
    into.last_consume_timestamp = max(into.last_consume_timestamp, part.last_consume_timestamp)
    if part.deliver_delay_time.ToMilliseconds() > into.deliver_delay_time.ToMilliseconds():
        into.deliver_delay_time.CopyFrom(part.deliver_delay_time)


class NamesrvV2Admin:
    """The v2 Admin RPCs of the access point, forwarded to broker masters.

    Args:
        manager: the route tables (topic routes, broker groups and their masters).
        forwarder: passes a call on to a group's master with the caller's headers.
    """

    def __init__(self, manager: rim.RouteInfoManager, forwarder: forward.Forwarder) -> None:
        self._manager = manager
        self._forwarder = forwarder
        self._sends = 0

    # -- fan-out ------------------------------------------------------------------------------

    def _all_masters(self) -> list[ids.BrokerName]:
        groups = self._manager.cluster_info()
        return [g.broker_name for g in groups if g.master() is not None][:FAN_OUT_MAX]

    def _topic_masters(self, topic: str) -> list[ids.BrokerName]:
        if not topic:
            raise errors.BadRequestError("topic is required (a Resource with a name)")
        found = self._manager.pickup_topic_route(ids.TopicName(topic))
        names = [g.broker_name for g in found.broker_groups if g.master() is not None]
        if not names:
            raise errors.ServiceUnavailableError(f"no broker serving {topic!r} has a live master")
        return names[:FAN_OUT_MAX]

    async def _each(
        self,
        brokers: Sequence[ids.BrokerName],
        method: str,
        request: Any,
        response_type: type[M],
        context: Context,
    ) -> tuple[list[M], M | None]:
        """The OK answers of ``brokers`` and the first refusal (``None``: none); a broker
        that does not know the group is neither."""
        calls = [
            self._forwarder.to_master(
                b, method, request, response_type, context, service=pb.V2_ADMIN_SERVICE
            )
            for b in brokers
        ]
        answers = await asyncio.gather(*calls, return_exceptions=True)
        good: list[M] = []
        refusal: M | None = None
        for answer in answers:
            if isinstance(answer, errors.ArianeError):
                answer = response_type(status=codes.from_error(answer))
            elif isinstance(answer, BaseException):
                raise answer
            status: pb.v2.Status = getattr(answer, "status")  # noqa: B009 (M has no .status)
            code = codes.code_of(status)
            if codes.is_success(status):
                good.append(answer)
            elif code != errors.Code.CONSUMER_GROUP_NOT_FOUND and refusal is None:
                refusal = answer
        return good, refusal

    async def _merged(
        self,
        brokers: Sequence[ids.BrokerName],
        method: str,
        request: Any,
        response_type: type[M],
        context: Context,
        merge: Callable[[M, M], None],
    ) -> M:
        good, refusal = await self._each(brokers, method, request, response_type, context)
        if not good:
            if refusal is not None:
                return refusal
            return response_type(status=codes.ok(f"no broker answered {method}"))
        result = response_type(status=codes.ok())
        for answer in good:
            merge(result, answer)
        return result

    # -- topic RPCs -----------------------------------------------------------------------------

    async def describe_topic_status(
        self, request: pb.v2_admin.DescribeTopicStatusRequest, context: Context
    ) -> pb.v2_admin.DescribeTopicStatusResponse:
        """DescribeTopicStatus: the first master serving the topic answers."""
        broker = self._topic_masters(request.topic.name)[0]
        return await self._forwarder.to_master(
            broker,
            "DescribeTopicStatus",
            request,
            pb.v2_admin.DescribeTopicStatusResponse,
            context,
            service=pb.V2_ADMIN_SERVICE,
        )

    async def get_topic_route(
        self, request: pb.v2_admin.GetTopicRouteRequest, context: Context
    ) -> pb.v2_admin.GetTopicRouteResponse:
        """GetTopicRoute: the cluster's route of the topic as ``TopicRouteData`` JSON."""
        if not request.topic.name:
            raise errors.BadRequestError("topic is required (a Resource with a name)")
        found = self._manager.pickup_topic_route(ids.TopicName(request.topic.name))
        data = {
            "brokerDatas": [
                {
                    "cluster": g.cluster,
                    "brokerName": g.broker_name,
                    "brokerAddrs": {str(m.broker_id): m.client_address for m in g.members},
                }
                for g in found.broker_groups
            ],
            "queueDatas": [
                {
                    "brokerName": q.broker_name,
                    "readQueueNums": q.read_queue_nums,
                    "writeQueueNums": q.write_queue_nums,
                    "perm": q.perm,
                    "topicSysFlag": 0,
                }
                for q in found.queue_datas
            ],
        }
        return pb.v2_admin.GetTopicRouteResponse(
            status=codes.ok(), topic_route_data=json.dumps(data, sort_keys=True)
        )

    async def reset_group_offset(
        self, request: pb.v2_admin.ResetGroupOffsetRequest, context: Context
    ) -> pb.v2_admin.ResetGroupOffsetResponse:
        """ResetGroupOffset on every master serving the topic; the first refusal wins."""
        brokers = self._topic_masters(request.topic.name)
        good, refusal = await self._each(
            brokers, "ResetGroupOffset", request, pb.v2_admin.ResetGroupOffsetResponse, context
        )
        if refusal is not None:
            return refusal
        return pb.v2_admin.ResetGroupOffsetResponse(
            status=codes.ok(f"reset on {len(good)} broker groups")
        )

    async def delete_subscription(
        self, request: pb.v2_admin.DeleteSubscriptionRequest, context: Context
    ) -> pb.v2_admin.DeleteSubscriptionResponse:
        """DeleteSubscription on every master serving the topic; the first refusal wins."""
        brokers = self._topic_masters(request.topic.name)
        good, refusal = await self._each(
            brokers, "DeleteSubscription", request, pb.v2_admin.DeleteSubscriptionResponse, context
        )
        if refusal is not None and not good:
            return refusal
        return pb.v2_admin.DeleteSubscriptionResponse(
            status=codes.ok(f"deleted on {len(good)} broker groups")
        )

    async def query_message(
        self, request: pb.v2_admin.ListMessageRequest, context: Context
    ) -> pb.v2_admin.ListMessageResponse:
        """QueryMessage on every master serving the topic, answers concatenated (at most
        ``max_message_nums`` when given)."""
        brokers = self._topic_masters(request.topic.name)
        wanted = request.max_message_nums if request.max_message_nums > 0 else ANSWER_ROWS_MAX

        def merge(into: pb.v2_admin.ListMessageResponse, part: Any) -> None:
            into.messages.extend(part.messages[: max(0, wanted - len(into.messages))])

        return await self._merged(
            brokers, "QueryMessage", request, pb.v2_admin.ListMessageResponse, context, merge
        )

    async def admin_send_message(
        self, request: pb.v2_admin.AdminSendMessageRequest, context: Context
    ) -> pb.v2_admin.AdminSendMessageResponse:
        """AdminSendMessage on one master serving the topic, the masters taken in turn."""
        brokers = self._topic_masters(request.topic.name)
        self._sends = (self._sends + 1) % FAN_OUT_MAX
        return await self._forwarder.to_master(
            brokers[self._sends % len(brokers)],
            "AdminSendMessage",
            request,
            pb.v2_admin.AdminSendMessageResponse,
            context,
            service=pb.V2_ADMIN_SERVICE,
        )

    # -- group and client RPCs ------------------------------------------------------------------

    async def get_consumer_running_info(
        self, request: pb.v2_admin.GetConsumerRunningInfoRequest, context: Context
    ) -> pb.v2_admin.GetConsumerRunningInfoResponse:
        """GetConsumerRunningInfo of every master knowing the client, merged."""

        def merge(into: pb.v2_admin.GetConsumerRunningInfoResponse, part: Any) -> None:
            mine, theirs = into.consumer_running_info, part.consumer_running_info
            for key, value in theirs.properties.items():
                mine.properties.setdefault(key, value)
            for topic, expression in theirs.subscriptions.items():
                if topic not in mine.subscriptions:
                    mine.subscriptions[topic].CopyFrom(expression)
            rows = mine.message_queue_table
            rows.extend(theirs.message_queue_table[: max(0, ANSWER_ROWS_MAX - len(rows))])
            for topic, status in theirs.consume_status_table.items():
                mine.consume_status_table[topic].CopyFrom(status)

        return await self._merged(
            self._all_masters(),
            "GetConsumerRunningInfo",
            request,
            pb.v2_admin.GetConsumerRunningInfoResponse,
            context,
            merge,
        )

    async def list_subscription(
        self, request: pb.v2_admin.ListSubscriptionRequest, context: Context
    ) -> pb.v2_admin.ListSubscriptionResponse:
        """ListSubscription of every master, concatenated."""

        return await self._merged(
            self._all_masters(),
            "ListSubscription",
            request,
            pb.v2_admin.ListSubscriptionResponse,
            context,
            _concatenated("subscription_info"),
        )

    async def describe_subscription(
        self, request: pb.v2_admin.DescribeSubscriptionRequest, context: Context
    ) -> pb.v2_admin.DescribeSubscriptionResponse:
        """DescribeSubscription of every master, concatenated."""

        return await self._merged(
            self._all_masters(),
            "DescribeSubscription",
            request,
            pb.v2_admin.DescribeSubscriptionResponse,
            context,
            _concatenated("client_subscription_info"),
        )

    async def list_consumer_connection(
        self, request: pb.v2_admin.ListConsumerConnectionRequest, context: Context
    ) -> pb.v2_admin.ListConsumerConnectionResponse:
        """ListConsumerConnection of every master, one row per client id."""

        def merge(into: pb.v2_admin.ListConsumerConnectionResponse, part: Any) -> None:
            seen = {c.client_id for c in into.client_info}
            fresh = [c for c in part.client_info if c.client_id not in seen]
            into.client_info.extend(fresh[: max(0, ANSWER_ROWS_MAX - len(into.client_info))])

        return await self._merged(
            self._all_masters(),
            "ListConsumerConnection",
            request,
            pb.v2_admin.ListConsumerConnectionResponse,
            context,
            merge,
        )

    async def describe_group_accumulation(
        self, request: pb.v2_admin.DescribeGroupAccumulationRequest, context: Context
    ) -> pb.v2_admin.DescribeGroupAccumulationResponse:
        """DescribeGroupAccumulation of every master, summed (last consume time and delay:
        the largest)."""

        def merge(into: pb.v2_admin.DescribeGroupAccumulationResponse, part: Any) -> None:
            _merge_accumulation(into.accumulation, part.accumulation)
            for topic, value in part.topic_accumulation.items():
                _merge_accumulation(into.topic_accumulation[topic], value)

        return await self._merged(
            self._all_masters(),
            "DescribeGroupAccumulation",
            request,
            pb.v2_admin.DescribeGroupAccumulationResponse,
            context,
            merge,
        )

    async def query_time_span(
        self, request: pb.v2_admin.QueryTimeSpanRequest, context: Context
    ) -> pb.v2_admin.QueryTimeSpanResponse:
        """QueryTimeSpan of every master, concatenated."""

        return await self._merged(
            self._all_masters(),
            "QueryTimeSpan",
            request,
            pb.v2_admin.QueryTimeSpanResponse,
            context,
            _concatenated("queue_time_span_list"),
        )

    async def get_proxy_runtime_stats(
        self, request: pb.v2_admin.GetProxyRuntimeStatsRequest, context: Context
    ) -> pb.v2_admin.GetProxyRuntimeStatsResponse:
        """GetProxyRuntimeStats: the masters' client counts summed, named ``namesrv``."""

        def merge(into: pb.v2_admin.GetProxyRuntimeStatsResponse, part: Any) -> None:
            into.version = part.version
            into.connections += part.connections
            into.producers += part.producers
            into.consumers += part.consumers

        answer = await self._merged(
            self._all_masters(),
            "GetProxyRuntimeStats",
            request,
            pb.v2_admin.GetProxyRuntimeStatsResponse,
            context,
            merge,
        )
        answer.proxy_name = "namesrv"
        return answer
