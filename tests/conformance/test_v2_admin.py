"""The upstream ``apache.rocketmq.v2.Admin`` service (RIP-2's proxy admin), called the way a tool
would: a plain grpcio stub from the generated code (``pb.v2_admin_grpc.AdminStub``) on the broker,
against real ``ariane`` processes; the messages and the consumer come from the official Python
client (``official_py_driver.py``).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from typing import Any, TypeVar

import grpc
import pytest

from ariane.common import errors
from ariane.grpcwire import pb
from conformance.conftest import Cluster, DriverProcess

pytestmark = pytest.mark.slow

R = TypeVar("R")

DEADLINE_S = 20.0
"""Longest wait for the broker to see a consumer."""


def _call(cluster: Cluster, rpc: str, request: Any, *, at: str = "") -> Any:
    """One unary call of ``rpc`` through the generated Admin stub on ``at`` (the broker when
    empty)."""

    async def call() -> Any:
        async with grpc.aio.insecure_channel(at or cluster.broker) as channel:
            stub = pb.v2_admin_grpc.AdminStub(channel)
            return await getattr(stub, rpc)(request, timeout=10)

    return asyncio.run(call())


def _res(name: str) -> pb.v2.Resource:
    return pb.v2.Resource(name=name)


def _until(probe: Callable[[], R], done: Callable[[R], bool]) -> R:
    deadline = time.monotonic() + DEADLINE_S
    got = probe()
    while not done(got) and time.monotonic() < deadline:
        time.sleep(0.2)
        got = probe()
    return got


def test_v2_admin_topic_status_route_accumulation_and_messages(cluster: Cluster) -> None:
    """DescribeTopicStatus, GetTopicRoute, DescribeGroupAccumulation, QueryTimeSpan,
    QueryMessage and ResetGroupOffset answer what the official client sent and consumed: the
    group's backlog is the messages sent after it consumed, with its last consume time; a
    reset to before the first send makes every message a backlog again; unknown topics and a
    query without a key answer their codes."""
    topic, group = "v2a-orders", "v2a-billing"
    cluster.admin("topic", "create", topic, "--queues", "2", "--type", "NORMAL")
    before = int(time.time())
    code, _ = cluster.run_driver("produce", "--topic", topic, "--count", "4", "--keys-prefix", "k")
    assert code == 0
    code, got = cluster.run_driver(
        "simple-consume", "--topic", topic, "--group", group, "--count", "4"
    )
    assert code == 0 and sum(1 for e in got if e["event"] == "acked") == 4, got
    code, _ = cluster.run_driver("produce", "--topic", topic, "--count", "2", "--prefix", "late")
    assert code == 0

    status = _call(
        cluster, "DescribeTopicStatus", pb.v2_admin.DescribeTopicStatusRequest(topic=_res(topic))
    )
    assert (status.status.code, status.topic_message_type) == (pb.v2.Code.OK, pb.v2.NORMAL)
    missing = _call(
        cluster,
        "DescribeTopicStatus",
        pb.v2_admin.DescribeTopicStatusRequest(topic=_res("v2a-none")),
    )
    assert missing.status.code == errors.Code.TOPIC_NOT_FOUND
    route = _call(cluster, "GetTopicRoute", pb.v2_admin.GetTopicRouteRequest(topic=_res(topic)))
    data = json.loads(route.topic_route_data)
    assert data["queueDatas"][0]["readQueueNums"] == 2, data
    assert data["brokerDatas"][0]["brokerAddrs"] == {"0": cluster.broker}, data

    def accumulation() -> Any:
        return _call(
            cluster,
            "DescribeGroupAccumulation",
            pb.v2_admin.DescribeGroupAccumulationRequest(group=_res(group), topics=[_res(topic)]),
        )

    backlog = accumulation()
    assert backlog.status.code == pb.v2.Code.OK, backlog
    whole = backlog.accumulation
    assert (whole.accumulation, whole.ready_messages, whole.inflight_messages) == (2, 2, 0)
    assert whole.last_consume_timestamp // 1000 >= before - 1, whole
    assert whole.deliver_delay_time.seconds >= 0
    assert backlog.topic_accumulation[topic].accumulation == 2

    spans = _call(
        cluster,
        "QueryTimeSpan",
        pb.v2_admin.QueryTimeSpanRequest(group=_res(group), topics=[_res(topic)]),
    ).queue_time_span_list
    assert sorted(s.message_queue.id for s in spans) == [0, 1]
    assert all(s.min_timestamp // 1000 >= before - 1 for s in spans if s.max_timestamp), spans
    assert any(s.max_timestamp >= s.consume_timestamp > 0 for s in spans), spans

    found = _call(
        cluster,
        "QueryMessage",
        pb.v2_admin.ListMessageRequest(topic=_res(topic), message_key="k-2"),
    )
    assert found.status.code == pb.v2.Code.OK, found
    assert [m.body for m in found.messages] == [b"m-2"]
    assert list(found.messages[0].system_properties.keys) == ["k-2"]
    no_key = _call(cluster, "QueryMessage", pb.v2_admin.ListMessageRequest(topic=_res(topic)))
    assert no_key.status.code == pb.v2.Code.BAD_REQUEST

    reset = pb.v2_admin.ResetGroupOffsetRequest(group=_res(group), topic=_res(topic))
    reset.reset_timestamp.seconds = before - 5
    assert _call(cluster, "ResetGroupOffset", reset).status.code == pb.v2.Code.OK
    assert accumulation().accumulation.accumulation == 6


def test_v2_admin_sees_live_consumers_and_runtime(cluster: Cluster) -> None:
    """While an official push consumer runs, ListConsumerConnection, ListSubscription and
    DescribeSubscription show its client and subscription and GetProxyRuntimeStats counts it;
    ChangeLogLevel answers its remark."""
    topic, group = "v2a-live", "v2a-watchers"
    cluster.admin("topic", "create", topic, "--queues", "1", "--type", "NORMAL")
    watcher = DriverProcess(
        cluster, "push-watch", "--topic", topic, "--group", group, "--deadline-s", "60"
    )
    try:
        client_id = watcher.wait_for("started")["client_id"]
        request = pb.v2_admin.ListConsumerConnectionRequest(group=_res(group))
        connections = _until(
            lambda: _call(cluster, "ListConsumerConnection", request),
            lambda answer: len(answer.client_info) > 0,
        )
        assert [c.client_id for c in connections.client_info] == [client_id], connections
        assert connections.client_info[0].message_model == pb.v2_admin.CLUSTERING

        listed = _call(
            cluster, "ListSubscription", pb.v2_admin.ListSubscriptionRequest(group=_res(group))
        )
        ((info),) = listed.subscription_info
        assert (info.group.name, info.topic.name, info.online) == (group, topic, True)
        assert info.expression.expression == "*"
        described = _call(
            cluster,
            "DescribeSubscription",
            pb.v2_admin.DescribeSubscriptionRequest(topic=_res(topic)),
        )
        assert [c.client_info.client_id for c in described.client_subscription_info] == [client_id]
        stats = _call(cluster, "GetProxyRuntimeStats", pb.v2_admin.GetProxyRuntimeStatsRequest())
        assert stats.status.code == pb.v2.Code.OK and stats.proxy_name == "broker-a", stats
        assert stats.consumers >= 1 and stats.connections >= stats.consumers
    finally:
        watcher.close()

    level = _call(
        cluster,
        "ChangeLogLevel",
        pb.v2_admin.ChangeLogLevelRequest(level=pb.v2_admin.ChangeLogLevelRequest.INFO),
    )
    assert level.remark == "log level changed to INFO"


def test_v2_admin_through_the_name_server(cluster: Cluster) -> None:
    """Called on the access point (the name server), the v2 Admin RPCs are answered by the
    broker masters: the route is the cluster's, the group's backlog and connections are the
    broker's, a reset and a message query reach the broker serving the topic."""
    topic, group = "v2a-ns", "v2a-ns-g"
    cluster.admin("topic", "create", topic, "--queues", "1", "--type", "NORMAL")
    before = int(time.time())
    code, _ = cluster.run_driver("produce", "--topic", topic, "--count", "3", "--keys-prefix", "n")
    assert code == 0
    code, got = cluster.run_driver(
        "simple-consume", "--topic", topic, "--group", group, "--count", "3"
    )
    assert code == 0 and sum(1 for e in got if e["event"] == "acked") == 3, got

    def ns(rpc: str, request: Any) -> Any:
        return _call(cluster, rpc, request, at=cluster.namesrv)

    route = ns("GetTopicRoute", pb.v2_admin.GetTopicRouteRequest(topic=_res(topic)))
    data = json.loads(route.topic_route_data)
    assert [b["brokerAddrs"] for b in data["brokerDatas"]] == [{"0": cluster.broker}], data
    assert (
        ns("GetTopicRoute", pb.v2_admin.GetTopicRouteRequest(topic=_res("v2a-none"))).status.code
        == errors.Code.TOPIC_NOT_FOUND
    )
    status = ns("DescribeTopicStatus", pb.v2_admin.DescribeTopicStatusRequest(topic=_res(topic)))
    assert status.topic_message_type == pb.v2.NORMAL, status
    accumulation = pb.v2_admin.DescribeGroupAccumulationRequest(group=_res(group))
    caught_up = ns("DescribeGroupAccumulation", accumulation)
    assert caught_up.status.code == pb.v2.Code.OK, caught_up
    assert caught_up.accumulation.accumulation == 0
    assert caught_up.accumulation.last_consume_timestamp // 1000 >= before - 1
    found = ns("QueryMessage", pb.v2_admin.ListMessageRequest(topic=_res(topic), message_key="n-1"))
    assert [m.body for m in found.messages] == [b"m-1"], found
    reset = pb.v2_admin.ResetGroupOffsetRequest(group=_res(group), topic=_res(topic))
    reset.reset_timestamp.seconds = before - 5
    assert ns("ResetGroupOffset", reset).status.code == pb.v2.Code.OK
    assert ns("DescribeGroupAccumulation", accumulation).accumulation.accumulation == 3
    stats = ns("GetProxyRuntimeStats", pb.v2_admin.GetProxyRuntimeStatsRequest())
    assert (stats.status.code, stats.proxy_name) == (pb.v2.Code.OK, "namesrv"), stats


def test_v2_admin_pushes_client_commands_on_the_telemetry_stream(cluster: Cluster) -> None:
    """PrintThreadStackTrace and VerifyMessage push their command on the client's open Telemetry
    stream (a raw stream of a producer here, reading what the broker pushes) and answer OK;
    VerifyMessage of an unknown id is MESSAGE_NOT_FOUND; once the stream ended both answer
    NOT_FOUND."""
    topic, client_id = "v2a-cmd", "v2a-raw-client"
    cluster.admin("topic", "create", topic, "--queues", "1", "--type", "NORMAL")
    code, sent = cluster.run_driver("produce", "--topic", topic, "--count", "1")
    assert code == 0
    message_id = next(e["message_id"] for e in sent if e["event"] == "sent")
    stack = pb.v2_admin.PrintThreadStackTraceRequest(client_id=client_id)
    verify = pb.v2_admin.VerifyMessageRequest(
        client_id=client_id, topic=_res(topic), message_id=message_id
    )

    async def scenario() -> list[Any]:
        async with grpc.aio.insecure_channel(cluster.broker) as channel:
            admin = pb.v2_admin_grpc.AdminStub(channel)
            stream = pb.v2_service_grpc.MessagingServiceStub(channel).Telemetry(
                metadata=(("x-mq-client-id", client_id),), timeout=30
            )
            settings = pb.v2.Settings(
                client_type=pb.v2.ClientType.PRODUCER,
                publishing=pb.v2.Publishing(topics=[_res(topic)]),
            )
            await stream.write(pb.v2_service.TelemetryCommand(settings=settings))
            assert (await stream.read()).status.code == pb.v2.Code.OK
            answers = [
                await admin.PrintThreadStackTrace(stack, timeout=10),
                await admin.VerifyMessage(verify, timeout=10),
            ]
            assert [a.status.code for a in answers] == [pb.v2.Code.OK] * 2, answers
            pushed = [await stream.read(), await stream.read()]
            unknown = pb.v2_admin.VerifyMessageRequest(
                client_id=client_id, topic=_res(topic), message_id="0" * 32
            )
            answers.append(await admin.VerifyMessage(unknown, timeout=10))
            await stream.done_writing()
            return [*answers, *pushed]

    printed, verified, unknown, first, second = asyncio.run(scenario())
    assert [printed.status.code, verified.status.code] == [pb.v2.Code.OK, pb.v2.Code.OK]
    assert unknown.status.code == errors.Code.MESSAGE_NOT_FOUND
    assert first.WhichOneof("command") == "print_thread_stack_trace_command", first
    assert first.print_thread_stack_trace_command.nonce
    assert second.WhichOneof("command") == "verify_message_command", second
    assert second.verify_message_command.message.system_properties.message_id == message_id
    gone = _until(
        lambda: _call(cluster, "PrintThreadStackTrace", stack),
        lambda answer: answer.status.code != pb.v2.Code.OK,
    )
    assert gone.status.code == errors.Code.NOT_FOUND, gone
    assert _call(cluster, "VerifyMessage", verify).status.code == errors.Code.NOT_FOUND


def test_v2_admin_consumer_running_info_through_the_name_server(cluster: Cluster) -> None:
    """GetConsumerRunningInfo called on the name server answers, for an official push consumer,
    what it reported (client type, message model, its subscription) and its group's progress
    on each queue of the topic; an unknown client, or the client under another group, is
    NOT_FOUND; a request without a group or client id is BAD_REQUEST."""
    topic, group = "v2a-running", "v2a-runners"
    cluster.admin("topic", "create", topic, "--queues", "2", "--type", "NORMAL")
    code, _ = cluster.run_driver("produce", "--topic", topic, "--count", "2")
    assert code == 0
    watcher = DriverProcess(
        cluster, "push-watch", "--topic", topic, "--group", group, "--deadline-s", "60"
    )
    try:
        client_id = watcher.wait_for("started")["client_id"]
        watcher.wait_for("consumed")
        watcher.wait_for("consumed")
        request = pb.v2_admin.GetConsumerRunningInfoRequest(group=_res(group), client_id=client_id)

        def ns(rpc: str, request: Any) -> Any:
            return _call(cluster, rpc, request, at=cluster.namesrv)

        answer = _until(
            lambda: ns("GetConsumerRunningInfo", request),
            lambda got: (
                got.status.code == pb.v2.Code.OK
                and sum(
                    q.process_queue_info.commit_offset
                    for q in got.consumer_running_info.message_queue_table
                )
                == 2
            ),
        )
        assert answer.status.code == pb.v2.Code.OK, answer
        info = answer.consumer_running_info
        assert info.properties["clientType"] == "PUSH_CONSUMER", info
        assert info.properties["messageModel"] == "CLUSTERING", info
        assert info.properties["PROP_CONSUME_TYPE"] == "CONSUME_PASSIVELY", info
        assert list(info.subscriptions) == [topic], info
        assert info.subscriptions[topic].expression == "*"
        queues = sorted(
            (q.message_queue.topic.name, q.message_queue.id, q.message_queue.broker.name)
            for q in info.message_queue_table
        )
        assert queues == [(topic, 0, "broker-a"), (topic, 1, "broker-a")], info
        assert sum(q.process_queue_info.commit_offset for q in info.message_queue_table) == 2
        assert max(q.process_queue_info.last_consume_timestamp for q in info.message_queue_table)

        unknown = pb.v2_admin.GetConsumerRunningInfoRequest(group=_res(group), client_id="nobody")
        assert ns("GetConsumerRunningInfo", unknown).status.code == errors.Code.NOT_FOUND
        elsewhere = pb.v2_admin.GetConsumerRunningInfoRequest(
            group=_res("v2a-other"), client_id=client_id
        )
        assert _call(cluster, "GetConsumerRunningInfo", elsewhere).status.code == (
            errors.Code.NOT_FOUND
        )
        bare = pb.v2_admin.GetConsumerRunningInfoRequest(client_id=client_id)
        assert _call(cluster, "GetConsumerRunningInfo", bare).status.code == (
            errors.Code.BAD_REQUEST
        )
    finally:
        watcher.close()


def test_v2_admin_send_message_through_the_name_server(cluster: Cluster) -> None:
    """AdminSendMessage called on the name server stores the message on a master of the topic
    through the send core: an official push consumer receives it with its tag, key, body and
    user property, and the answer's message id is the stored one; a missing topic answers
    TOPIC_NOT_FOUND, a FIFO message on a NORMAL topic
    MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, a body over the limit MESSAGE_BODY_TOO_LARGE."""
    topic, group = "v2a-send", "v2a-send-g"
    cluster.admin("topic", "create", topic, "--queues", "1", "--type", "NORMAL")

    def ns(request: Any) -> Any:
        return _call(cluster, "AdminSendMessage", request, at=cluster.namesrv)

    watcher = DriverProcess(
        cluster, "push-watch", "--topic", topic, "--group", group, "--deadline-s", "60"
    )
    try:
        watcher.wait_for("started")
        request = pb.v2_admin.AdminSendMessageRequest(
            topic=_res(topic),
            tag="TagA",
            key="admin-key-1",
            body=b"from the admin",
            user_properties={"origin": "v2-admin"},
        )
        sent = ns(request)
        assert sent.status.code == pb.v2.Code.OK, sent
        assert len(sent.message_id) == 34, sent
        got = watcher.wait_for("consumed")
    finally:
        watcher.close()
    assert got["message_id"] == sent.message_id, got
    assert got["body"] == "from the admin" and got["tag"] == "TagA", got
    assert got["keys"] == ["admin-key-1"], got
    assert got["properties"]["origin"] == "v2-admin", got
    found = _call(
        cluster,
        "QueryMessage",
        pb.v2_admin.ListMessageRequest(topic=_res(topic), message_id=sent.message_id),
    )
    assert [m.body for m in found.messages] == [b"from the admin"], found

    missing = ns(pb.v2_admin.AdminSendMessageRequest(topic=_res("v2a-none"), body=b"x"))
    assert missing.status.code == errors.Code.TOPIC_NOT_FOUND, missing
    fifo = pb.v2_admin.AdminSendMessageRequest(
        topic=_res(topic),
        body=b"x",
        system_properties=pb.v2.SystemProperties(message_type=pb.v2.FIFO, message_group="g"),
    )
    assert ns(fifo).status.code == errors.Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE
    huge = pb.v2_admin.AdminSendMessageRequest(topic=_res(topic), body=b"x" * (5 * 1024 * 1024))
    assert ns(huge).status.code == errors.Code.MESSAGE_BODY_TOO_LARGE
