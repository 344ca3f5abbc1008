"""The broker's classic admin codes (``broker.remoting.admin``), the ones ``mqadmin`` sends.

Each test runs a ``RemotingService`` over an in-process broker (``test_broker_remoting.run``:
real store, manual clock, real sockets on 127.0.0.1) and sends the frames mqadmin 5.3.3 sends,
then checks the answer as mqadmin parses it (fastjson bodies, ``MessageQueue`` object keys) and
the broker's tables. Every handler also gets a request with a missing field.
"""

from __future__ import annotations

import json
import pathlib

from ariane.broker.tables import topic_config
from ariane.common import ids, message
from ariane.remoting import codes, fastjson
from test_broker_remoting import TOPIC, Ctx, pull_header, run, send_header, until

RQ = codes.RequestCode
RC = codes.ResponseCode
MQ = fastjson.MessageQueue
BROKER = "broker-a"


def topic_header(topic: str, **more: str) -> dict[str, str]:
    """An UPDATE_AND_CREATE_TOPIC header as mqadmin updateTopic writes it."""
    header = {
        "topic": topic,
        "defaultTopic": "TBW102",
        "readQueueNums": "3",
        "writeQueueNums": "2",
        "perm": "6",
        "topicFilterType": "SINGLE_TAG",
        "topicSysFlag": "0",
        "order": "false",
    }
    header.update(more)
    return header


def heartbeat_body(client_id: str, group: str) -> bytes:
    return fastjson.dumps(
        {
            "clientID": client_id,
            "consumerDataSet": [
                {
                    "groupName": group,
                    "consumeType": "CONSUME_PASSIVELY",
                    "messageModel": "CLUSTERING",
                    "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET",
                    "subscriptionDataSet": [
                        {"topic": TOPIC, "subString": "a || b", "expressionType": "TAG"}
                    ],
                }
            ],
        }
    )


def test_update_topic_persists_registers_and_reads_back_through_351(
    tmp_path: pathlib.Path,
) -> None:
    """17 creates a topic with the header's queues, perm and message.type, writes topics.json
    and sets route_changed (so the broker re-registers); a second 17 without attributes keeps
    the type; 351 answers the config as TopicConfig JSON; bad headers answer 29, an unknown
    topic in 351 answers 17."""

    async def scenario(ctx: Ctx) -> None:
        peer, runtime = await ctx.connect(), ctx.h.runtime
        runtime.route_changed.clear()
        reply = await peer.call(
            RQ.UPDATE_AND_CREATE_TOPIC, topic_header("made", attributes="+message.type=FIFO")
        )
        assert reply.code == RC.SUCCESS, reply.remark
        assert runtime.route_changed.is_set()
        stored = runtime.topics.get("made")
        assert stored == topic_config.TopicConfig(
            ids.TopicName("made"), 3, 2, message_type=message.MessageType.FIFO
        )
        on_disk = json.loads(runtime.topics.path.read_text())
        assert "made" in json.dumps(on_disk) and "FIFO" in json.dumps(on_disk)
        again = await peer.call(RQ.UPDATE_AND_CREATE_TOPIC, topic_header("made", perm="4"))
        assert again.code == RC.SUCCESS, again.remark
        read = await peer.call(RQ.GET_TOPIC_CONFIG, {"topic": "made"})
        assert read.code == RC.SUCCESS, read.remark
        assert fastjson.loads(read.body) == {
            "attributes": {"message.type": "FIFO"},
            "order": True,
            "perm": 4,
            "readQueueNums": 3,
            "topicFilterType": "SINGLE_TAG",
            "topicName": "made",
            "topicSysFlag": 0,
            "writeQueueNums": 2,
        }
        no_perm = {k: v for k, v in topic_header("x").items() if k != "perm"}
        for bad in (
            no_perm,
            topic_header("x", attributes="+cleanup.policy=COMPACTION"),
            topic_header("x", attributes="+message.type=SPECIAL"),
            topic_header("x", readQueueNums="many"),
            topic_header("bad topic!"),
        ):
            answer = await peer.call(RQ.UPDATE_AND_CREATE_TOPIC, bad)
            assert answer.code == RC.INVALID_PARAMETER, (bad, answer.code, answer.remark)
        assert runtime.topics.get("x") is None
        assert (await peer.call(RQ.GET_TOPIC_CONFIG, {"topic": "nope"})).code == 17
        assert (await peer.call(RQ.GET_TOPIC_CONFIG, {})).code == RC.INVALID_PARAMETER

    run(tmp_path, scenario)


def test_update_subscription_group_from_its_config_body(tmp_path: pathlib.Path) -> None:
    """200 stores the SubscriptionGroupConfig mqadmin updateSubGroup sends (orderly, retry
    max times + 1 deliveries, broadcast off, a customized retry policy) in the group table;
    a body that is no JSON, has no groupName or a mistyped field answers 29."""

    async def scenario(ctx: Ctx) -> None:
        peer, groups = await ctx.connect(), ctx.h.runtime.groups
        body = {
            "groupName": "sub-g",
            "consumeEnable": True,
            "consumeBroadcastEnable": False,
            "consumeMessageOrderly": True,
            "retryQueueNums": 1,
            "retryMaxTimes": 3,
            "groupRetryPolicy": {
                "type": "CUSTOMIZED",
                "customizedRetryPolicy": {"next": [1000, 2000]},
            },
            "brokerId": 0,
        }
        reply = await peer.call(RQ.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=fastjson.dumps(body))
        assert reply.code == RC.SUCCESS, reply.remark
        stored = groups.get("sub-g")
        assert stored is not None
        assert (stored.consume_orderly, stored.max_delivery_attempts) == (True, 4)
        assert stored.broadcast_consume_allowed is False
        assert stored.retry_policy is not None and stored.retry_policy.delays_ms == (1000, 2000)
        assert "sub-g" in groups.path.read_text()
        for bad in (
            b"{not json",
            fastjson.dumps({"consumeEnable": True}),
            fastjson.dumps({"groupName": "sub-h", "retryMaxTimes": "3"}),
            b"",
        ):
            answer = await peer.call(RQ.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=bad)
            assert answer.code == RC.INVALID_PARAMETER, (bad, answer.code)
        assert groups.get("sub-h") is None

    run(tmp_path, scenario)


def test_topic_stats_and_consume_stats_key_queues_by_message_queue_objects(
    tmp_path: pathlib.Path,
) -> None:
    """202 answers every queue's min/max offset, last store time and the topic's live put
    rate; 208 the group's broker,
    consumer and pull offsets and last consumed store time, under MessageQueue object keys;
    an unknown group answers an empty table, an unknown topic in 202 answers 17, a header
    without topic or group answers 29."""

    async def scenario(ctx: Ctx) -> None:
        peer, h = await ctx.connect(), ctx.h
        stored_ms = h.clock.now_ms()
        for body in (b"1", b"2"):
            assert (await peer.call(RQ.SEND_MESSAGE_V2, send_header(queue_id=1), body)).code == 0
        stats = await peer.call(RQ.GET_TOPIC_STATS_INFO, {"topic": TOPIC})
        assert stats.code == RC.SUCCESS, stats.remark
        table = fastjson.loads(stats.body)
        assert table["topicPutTps"] > 0  # 2 messages over at most 10 s
        assert table["offsetTable"][MQ(TOPIC, BROKER, 1)] == {
            "lastUpdateTimestamp": stored_ms,
            "maxOffset": 2,
            "minOffset": 0,
        }
        assert table["offsetTable"][MQ(TOPIC, BROKER, 0)]["lastUpdateTimestamp"] == 0
        assert len(table["offsetTable"]) == 4

        where = {"consumerGroup": "g-progress", "topic": TOPIC, "queueId": "1"}
        await peer.oneway(RQ.UPDATE_CONSUMER_OFFSET, {**where, "commitOffset": "1"})

        async def progress() -> dict[object, dict[str, int]]:
            reply = await peer.call(RQ.GET_CONSUME_STATS, {"consumerGroup": "g-progress"})
            assert reply.code == RC.SUCCESS, reply.remark
            found: dict[object, dict[str, int]] = fastjson.loads(reply.body)["offsetTable"]
            return found

        offsets = await until(progress, lambda t: MQ(TOPIC, BROKER, 1) in t)
        assert offsets[MQ(TOPIC, BROKER, 1)] == {
            "brokerOffset": 2,
            "consumerOffset": 1,
            "lastTimestamp": stored_ms,
            "pullOffset": 1,
        }
        unknown = await peer.call(RQ.GET_CONSUME_STATS, {"consumerGroup": "never-seen"})
        assert (unknown.code, fastjson.loads(unknown.body)["offsetTable"]) == (0, {})
        no_topic = await peer.call(
            RQ.GET_CONSUME_STATS, {"consumerGroup": "g-progress", "topic": "nope"}
        )
        assert fastjson.loads(no_topic.body)["offsetTable"] == {}
        assert (await peer.call(RQ.GET_TOPIC_STATS_INFO, {"topic": "nope"})).code == 17
        assert (await peer.call(RQ.GET_TOPIC_STATS_INFO, {})).code == RC.INVALID_PARAMETER
        assert (await peer.call(RQ.GET_CONSUME_STATS, {"topic": TOPIC})).code == 29

    run(tmp_path, scenario)


def test_consumer_connections_and_topic_consumers(tmp_path: pathlib.Path) -> None:
    """203 lists a heartbeating group's client (id, language, version, address), model,
    consumeFromWhere and TAG subscription with Java tag hash codes; an offline group answers
    CONSUMER_NOT_ONLINE (206); 300 names the groups subscribing to or holding offsets on the
    topic; missing headers answer 29."""

    async def scenario(ctx: Ctx) -> None:
        peer = await ctx.connect()
        beat = await peer.call(RQ.HEART_BEAT, body=heartbeat_body("10.0.0.9@c1", "online-g"))
        assert beat.code == RC.SUCCESS, beat.remark
        reply = await peer.call(RQ.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": "online-g"})
        assert reply.code == RC.SUCCESS, reply.remark
        body = fastjson.loads(reply.body)
        (connection,) = body["connectionSet"]
        assert connection["clientId"] == "10.0.0.9@c1"
        assert (connection["language"], connection["version"]) == ("JAVA", 479)
        assert connection["clientAddr"].startswith("127.0.0.1:")
        assert (body["messageModel"], body["consumeType"]) == ("CLUSTERING", "CONSUME_PASSIVELY")
        assert body["consumeFromWhere"] == "CONSUME_FROM_FIRST_OFFSET"
        sub = body["subscriptionTable"][TOPIC]
        assert (sub["tagsSet"], sub["codeSet"], sub["subString"]) == (
            ["a", "b"],
            [97, 98],
            "a || b",
        )
        offline = await peer.call(RQ.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": "gone"})
        assert offline.code == RC.CONSUMER_NOT_ONLINE
        assert (await peer.call(RQ.GET_CONSUMER_CONNECTION_LIST, {})).code == 29

        where = {"consumerGroup": "offsets-g", "topic": TOPIC, "queueId": "0"}
        await peer.oneway(RQ.UPDATE_CONSUMER_OFFSET, {**where, "commitOffset": "0"})
        consumers = await until(
            lambda: peer.call(RQ.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": TOPIC}),
            lambda r: "offsets-g" in fastjson.loads(r.body)["groupList"],
        )
        assert fastjson.loads(consumers.body) == {"groupList": ["offsets-g", "online-g"]}
        assert (await peer.call(RQ.QUERY_TOPIC_CONSUME_BY_WHO, {})).code == 29

    run(tmp_path, scenario)


def test_runtime_info_reports_store_and_traffic(tmp_path: pathlib.Path) -> None:
    """28 answers a KVTable with the keys mqadmin clusterList parses as numbers (message
    totals, earliest store time, disk ratio) and the version it prints; no earliest store time
    while the store is empty; it needs no header, and extra header fields are ignored."""

    async def scenario(ctx: Ctx) -> None:
        peer, h = await ctx.connect(), ctx.h
        empty = fastjson.loads((await peer.call(RQ.GET_BROKER_RUNTIME_INFO)).body)["table"]
        assert "earliestMessageTimeStamp" not in empty and empty["msgPutTotalTodayNow"] == "0"
        first_ms = h.clock.now_ms()
        assert (await peer.call(RQ.SEND_MESSAGE_V2, send_header(queue_id=0), b"x")).code == 0
        reply = await peer.call(RQ.GET_BROKER_RUNTIME_INFO, {"ignored": "yes"})
        assert reply.code == RC.SUCCESS, reply.remark
        table = fastjson.loads(reply.body)["table"]
        assert table["brokerVersionDesc"] == "V5_3_3" and table["brokerActive"] == "true"
        assert table["earliestMessageTimeStamp"] == str(first_ms)
        assert int(table["putMessageTimesTotal"]) == 1
        for key in ("msgPutTotalTodayNow", "msgGetTotalTodayNow", "msgPutTotalTodayMorning"):
            assert int(table[key]) >= 0
        assert 0.0 <= float(table["commitLogDiskRatio"]) <= 1.0
        assert int(table["topicCount"]) >= 1

    run(tmp_path, scenario)


def test_reset_offset_by_time_moves_the_group_on_every_queue(tmp_path: pathlib.Path) -> None:
    """222 (server-side reset) moves a group to the latest offsets for a negative timestamp
    and to the earliest for 0, with no consumer online, answers ResetOffsetBody and commits
    the offsets; with ``queueId`` (mqadmin ``-q``) only that queue moves, to ``offset``
    clamped to the queue's range or by timestamp; a queue the topic lacks, a missing group and
    an unknown topic are refused."""

    async def scenario(ctx: Ctx) -> None:
        peer, h = await ctx.connect(), ctx.h
        for body in (b"1", b"2", b"3"):
            assert (await peer.call(RQ.SEND_MESSAGE_V2, send_header(queue_id=2), body)).code == 0
        header = {"topic": TOPIC, "group": "reset-g", "timestamp": "-1", "isForce": "true"}
        reply = await peer.call(RQ.INVOKE_BROKER_TO_RESET_OFFSET, header)
        assert reply.code == RC.SUCCESS, reply.remark
        table = fastjson.loads(reply.body)["offsetTable"]
        assert table == {MQ(TOPIC, BROKER, q): (3 if q == 2 else 0) for q in range(4)}
        assert h.processors.puller.get_offset("reset-g", TOPIC, 2) == 3  # type: ignore[arg-type]
        earliest = await peer.call(RQ.INVOKE_BROKER_TO_RESET_OFFSET, {**header, "timestamp": "0"})
        assert fastjson.loads(earliest.body)["offsetTable"][MQ(TOPIC, BROKER, 2)] == 0
        assert h.processors.puller.get_offset("reset-g", TOPIC, 2) == 0  # type: ignore[arg-type]
        one_queue = {**header, "queueId": "2", "offset": "2"}  # mqadmin resetOffsetByTime -q
        reply = await peer.call(RQ.INVOKE_BROKER_TO_RESET_OFFSET, one_queue)
        assert fastjson.loads(reply.body)["offsetTable"] == {MQ(TOPIC, BROKER, 2): 2}
        assert h.processors.puller.get_offset("reset-g", TOPIC, 2) == 2  # type: ignore[arg-type]
        clamped = await peer.call(RQ.INVOKE_BROKER_TO_RESET_OFFSET, {**one_queue, "offset": "99"})
        assert fastjson.loads(clamped.body)["offsetTable"] == {MQ(TOPIC, BROKER, 2): 3}
        by_time = {**header, "queueId": "2", "timestamp": "0"}
        reply = await peer.call(RQ.INVOKE_BROKER_TO_RESET_OFFSET, by_time)
        assert fastjson.loads(reply.body)["offsetTable"] == {MQ(TOPIC, BROKER, 2): 0}
        no_queue = await peer.call(RQ.INVOKE_BROKER_TO_RESET_OFFSET, {**header, "queueId": "9"})
        assert no_queue.code == RC.INVALID_PARAMETER
        no_group = {k: v for k, v in header.items() if k != "group"}
        assert (await peer.call(RQ.INVOKE_BROKER_TO_RESET_OFFSET, no_group)).code == 29
        unknown = await peer.call(RQ.INVOKE_BROKER_TO_RESET_OFFSET, {**header, "topic": "nope"})
        assert unknown.code == RC.TOPIC_NOT_EXIST

    run(tmp_path, scenario)


def test_view_broker_stats_data_answers_live_topic_group_and_broker_items(
    tmp_path: pathlib.Path,
) -> None:
    """315 answers RocketMQ's BrokerStatsData for TOPIC_PUT_NUMS/SIZE (2 messages, 3 bytes, in
    one send each), GROUP_GET_NUMS (a pull of both, avgpt 2 per pull) and BROKER_PUT_NUMS under
    the cluster name, with a non-zero minute tps; 208 then shows the group's consume tps; an
    item never counted, an unknown name or another cluster answer SYSTEM_ERROR "The stats <..>
    <..> not exist"; a header without statsKey answers 29; deleting the topic (215) forgets
    its items."""

    async def scenario(ctx: Ctx) -> None:
        peer, cluster = await ctx.connect(), ctx.h.runtime.settings.cluster

        async def view(name: str, key: str) -> dict[str, dict[str, float]]:
            reply = await peer.call(RQ.VIEW_BROKER_STATS_DATA, {"statsName": name, "statsKey": key})
            assert reply.code == RC.SUCCESS, reply.remark
            found: dict[str, dict[str, float]] = fastjson.loads(reply.body)
            return found

        for body in (b"1", b"22"):
            assert (await peer.call(RQ.SEND_MESSAGE_V2, send_header(queue_id=2), body)).code == 0
        pulled = await peer.call(RQ.PULL_MESSAGE, pull_header(2, 0, group="stats-g"))
        assert pulled.code == RC.SUCCESS, pulled.remark

        puts = await view("TOPIC_PUT_NUMS", TOPIC)
        assert set(puts) == {"statsMinute", "statsHour", "statsDay"}
        for window in puts.values():
            assert (window["sum"], window["avgpt"]) == (2, 1.0) and window["tps"] > 0
        assert (await view("TOPIC_PUT_SIZE", TOPIC))["statsDay"]["sum"] == 3
        gets = (await view("GROUP_GET_NUMS", f"{TOPIC}@stats-g"))["statsMinute"]
        assert (gets["sum"], gets["avgpt"]) == (2, 2.0) and gets["tps"] > 0
        broker = (await view("BROKER_PUT_NUMS", cluster))["statsDay"]
        assert broker["sum"] == 2 and broker["avgpt"] == 0.0
        progress = await peer.call(
            RQ.GET_CONSUME_STATS, {"consumerGroup": "stats-g", "topic": TOPIC}
        )
        assert fastjson.loads(progress.body)["consumeTps"] > 0

        for name, key in (
            ("GROUP_GET_NUMS", f"{TOPIC}@never-g"),
            ("NO_SUCH_STATS", TOPIC),
            ("BROKER_PUT_NUMS", "OtherCluster"),
        ):
            reply = await peer.call(RQ.VIEW_BROKER_STATS_DATA, {"statsName": name, "statsKey": key})
            assert (reply.code, reply.remark) == (
                RC.SYSTEM_ERROR,
                f"The stats <{name}> <{key}> not exist",
            )
        missing = await peer.call(RQ.VIEW_BROKER_STATS_DATA, {"statsName": "TOPIC_PUT_NUMS"})
        assert missing.code == RC.INVALID_PARAMETER

        deleted = await peer.call(RQ.DELETE_TOPIC_IN_BROKER, {"topic": TOPIC})
        assert deleted.code == RC.SUCCESS, deleted.remark
        for name, key in (("TOPIC_PUT_NUMS", TOPIC), ("GROUP_GET_NUMS", f"{TOPIC}@stats-g")):
            gone = await peer.call(RQ.VIEW_BROKER_STATS_DATA, {"statsName": name, "statsKey": key})
            assert gone.code == RC.SYSTEM_ERROR  # forgotten with the topic

    run(tmp_path, scenario)
