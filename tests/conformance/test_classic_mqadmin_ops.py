"""The official ``mqadmin`` 5.3.3 (``rocketmq-tools``, unmodified) runs an operator's daily
change commands against a real ``ariane namesrv`` + ``ariane broker`` pair: ``deleteTopic``,
``deleteSubGroup``, ``wipeWritePerm``/``addWritePerm``, ``getBrokerConfig``/
``updateBrokerConfig``.

Each mqadmin run is a JVM of a few seconds, so each test batches the commands of one concern
against the module's one cluster, and asserts on what mqadmin printed as a user reads it
(mqadmin exits 0 even when a command failed).

Own cluster: the commands change the broker for everyone (write permission wiped, live config
updated, topics and groups deleted), so no other module may share it.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterator

import pytest

from ariane import dev
from ariane.remoting import codes, command, fastjson, transport
from conformance import classic_java_client
from conformance.classic_java_client import ClassicJava
from conformance.test_official_classic import _config, _mqadmin, _until

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def java(ends: dev.DevEndpoints, tmp_path_factory: pytest.TempPathFactory) -> ClassicJava:
    """The classic Java tools, fetched and compiled (cached by a stamp)."""
    logs = tmp_path_factory.mktemp("mqadmin-ops-logs")
    return ClassicJava(classic_java_client.build(), ends.namesrv_remoting, logs)


@pytest.fixture(scope="module")
def ends(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dev.DevEndpoints]:
    """A name server and a broker serving Remoting, shared by this module's tests."""
    with dev.dev_cluster(tmp_path_factory.mktemp("mqadmin-ops"), namesrv_port=0) as found:
        yield found


def _make_topic(java: ClassicJava, ends: dev.DevEndpoints, topic: str) -> None:
    _mqadmin(java, ends, "updateTopic", "-c", "DefaultCluster", "-t", topic, "-r", "2", "-w", "2")
    _until(
        lambda: java.mqadmin("topicRoute", "-t", topic),
        lambda text: '"readQueueNums":2' in text,
    )


def test_mqadmin_deletes_topics_and_groups(ends: dev.DevEndpoints, java: ClassicJava) -> None:
    """deleteTopic -c removes a topic that holds a message from the broker (topics.json) and
    the name server (topicList, topicRoute); deleteSubGroup -c removes a group, and its
    ``%RETRY%``/``%DLQ%`` topics, which do not exist, without an exception."""
    _make_topic(java, ends, "mq-gone")
    out = _mqadmin(java, ends, "sendMessage", "-t", "mq-gone", "-p", "bye")
    assert "SEND_OK" in out, out

    out = _mqadmin(java, ends, "deleteTopic", "-c", "DefaultCluster", "-t", "mq-gone")
    assert "delete topic [mq-gone] from cluster [DefaultCluster] success." in out, out
    assert "delete topic [mq-gone] from NameServer success." in out, out
    assert "mq-gone" not in json.loads(_config(ends, "topics.json"))["topics"]
    assert "mq-gone" not in _mqadmin(java, ends, "topicList").split()
    route = java.mqadmin("topicRoute", "-t", "mq-gone")
    assert "No topic route info" in route, route

    out = _mqadmin(java, ends, "updateSubGroup", "-c", "DefaultCluster", "-g", "mq-gone-g")
    assert "success" in out, out
    assert "mq-gone-g" in json.loads(_config(ends, "subscriptionGroup.json"))["groups"]
    out = _mqadmin(java, ends, "deleteSubGroup", "-c", "DefaultCluster", "-g", "mq-gone-g")
    assert (
        f"delete subscription group [mq-gone-g] from broker [{ends.broker_remoting}] in "
        "cluster [DefaultCluster] success." in out
    ), out
    assert "mq-gone-g" not in json.loads(_config(ends, "subscriptionGroup.json"))["groups"]


def _changed(out: str, verb: str, namesrv: str) -> int:
    """The topic count of mqadmin's "<verb> write perm of broker[broker-a] ... OK, N" line
    (-1 when absent)."""
    line = rf"{verb} write perm of broker\[broker-a\] in name server\[{re.escape(namesrv)}\] OK, "
    found = re.search(line + r"(\d+)", out)
    return int(found.group(1)) if found else -1


def test_mqadmin_wipes_and_adds_write_permission(ends: dev.DevEndpoints, java: ClassicJava) -> None:
    """wipeWritePerm -b broker-a, sent to the name server, makes the broker's topics read-only
    (the route shows perm 4, the broker persists it, a send is refused) and reports how many
    topics changed; addWritePerm -b broker-a gives write back (perm 6, a send succeeds)."""
    _make_topic(java, ends, "mq-perm")
    ns = ends.namesrv_remoting
    out = _mqadmin(java, ends, "wipeWritePerm", "-b", "broker-a")
    assert _changed(out, "wipe", ns) >= 1, out
    route = _until(
        lambda: _mqadmin(java, ends, "topicRoute", "-t", "mq-perm"),
        lambda text: '"perm":4' in text,
    )
    assert '"perm":4' in route, route
    assert json.loads(_config(ends, "topics.json"))["topics"]["mq-perm"]["perm"] == 4
    refused = java.on(ns).mqadmin("sendMessage", "-t", "mq-perm", "-p", "x")
    assert "SEND_OK" not in refused, refused

    out = _mqadmin(java, ends, "addWritePerm", "-b", "broker-a")
    assert _changed(out, "add", ns) >= 1, out
    route = _until(
        lambda: _mqadmin(java, ends, "topicRoute", "-t", "mq-perm"),
        lambda text: '"perm":6' in text,
    )
    assert '"perm":6' in route, route
    assert "SEND_OK" in _mqadmin(java, ends, "sendMessage", "-t", "mq-perm", "-p", "y")


def _properties(out: str) -> dict[str, str]:
    """The ``key  =  value`` lines getBrokerConfig printed."""
    pairs = (line.split("=", 1) for line in out.splitlines() if "=  " in line)
    return {key.strip(): value.strip() for key, value in pairs}


def test_mqadmin_reads_and_changes_the_broker_config(
    ends: dev.DevEndpoints, java: ClassicJava
) -> None:
    """getBrokerConfig -b shows the running broker's settings under RocketMQ's names;
    updateBrokerConfig refuses a key that cannot change live by name (CODE: 16) and changes
    a live one (autoCreateTopicEnable), which getBrokerConfig then shows."""
    addr = ends.broker_remoting
    values = _properties(_mqadmin(java, ends, "getBrokerConfig", "-b", addr))
    assert (values["brokerName"], values["brokerClusterName"]) == ("broker-a", "DefaultCluster")
    assert (values["brokerId"], values["listenPort"]) == ("0", addr.rpartition(":")[2])
    assert values["autoCreateTopicEnable"] == "false", values

    update = ("updateBrokerConfig", "-b", addr, "-k")
    refused = java.mqadmin(*update, "brokerName", "-v", "x")
    assert "CODE: 16" in refused and "cannot change brokerName" in refused, refused
    out = _mqadmin(java, ends, *update, "autoCreateTopicEnable", "-v", "true")
    assert f"update broker config success, {addr}" in out, out
    values = _properties(_mqadmin(java, ends, "getBrokerConfig", "-b", addr))
    assert (values["autoCreateTopicEnable"], values["brokerName"]) == ("true", "broker-a")


def test_mqadmin_lists_producer_connections(ends: dev.DevEndpoints, java: ClassicJava) -> None:
    """producerConnection -g -t lists a classic producer heartbeating to the broker (its client
    id, address, language and version V5_3_3) while it is connected; for a group without an
    online producer it prints RocketMQ's refusal naming the group."""
    _make_topic(java, ends, "mq-prod")
    args = ("producerConnection", "-g", "mq-pg", "-t", "mq-prod")

    async def online() -> str:
        client = transport.RemotingClient()
        try:
            peer = await client.connection(ends.broker_remoting)
            beat = await peer.request(
                command.request(codes.RequestCode.HEART_BEAT, body=_producer_heartbeat()), 10.0
            )
            assert beat.code == codes.ResponseCode.SUCCESS, beat.remark
            out = await asyncio.to_thread(java.mqadmin, *args)
            return out
        finally:
            await client.close()

    out = asyncio.run(online())
    rows = [line.split() for line in out.splitlines() if "10.0.0.7@mq-producer" in line]
    assert len(rows) == 1 and rows[0][2].startswith("127.0.0.1:"), out
    assert rows[0][:2] + rows[0][3:] == ["0001", "10.0.0.7@mq-producer", "JAVA", "V5_3_3"], out
    gone = java.mqadmin(*args[:2], "mq-nobody", *args[3:])
    assert "the producer group[mq-nobody] not exist" in gone, gone


def _producer_heartbeat() -> bytes:
    """A classic producer's HEART_BEAT body (``HeartbeatData``) for group ``mq-pg``."""
    return fastjson.dumps(
        {
            "clientID": "10.0.0.7@mq-producer",
            "producerDataSet": [{"groupName": "mq-pg"}],
            "consumerDataSet": [],
        }
    )


def test_mqadmin_broker_status_shows_live_tps(ends: dev.DevEndpoints, java: ClassicJava) -> None:
    """After a send, brokerStatus shows putTps (RocketMQ's 10 s, 1 min and 10 min rates) with a
    1-minute rate above 0, and getTransferedTps in the same form."""
    _make_topic(java, ends, "mq-tps")
    assert "SEND_OK" in _mqadmin(java, ends, "sendMessage", "-t", "mq-tps", "-p", "rate")
    out = _mqadmin(java, ends, "brokerStatus", "-b", ends.broker_remoting)
    found = re.search(r"putTps\s*:\s*([\d.]+) ([\d.]+) ([\d.]+)", out)
    assert found is not None and float(found.group(2)) > 0, out
    assert re.search(r"getTransferedTps\s*:\s*[\d.]+ [\d.]+ [\d.]+", out), out


def test_mqadmin_finds_and_prints_messages(ends: dev.DevEndpoints, java: ClassicJava) -> None:
    """A message mqadmin sendMessage stored is found by queryMsgByUniqueKey (its unique key),
    and printed with its body by printMsg and consumeMessage (pulls from every queue)."""
    _make_topic(java, ends, "mq-print")
    out = _mqadmin(java, ends, "sendMessage", "-t", "mq-print", "-p", "hello-print", "-k", "pk")
    ((_, queue, status, msg_id),) = [
        line.split() for line in out.splitlines() if line.split()[:1] == ["broker-a"]
    ]
    assert status == "SEND_OK", out
    out = _mqadmin(java, ends, "queryMsgByUniqueKey", "-t", "mq-print", "-i", msg_id)
    assert re.search(r"Topic:\s+mq-print", out) and re.search(r"Keys:\s+\[pk\]", out), out
    assert re.search(rf"Queue ID:\s+{queue}\b", out), out
    out = _mqadmin(java, ends, "printMsg", "-t", "mq-print", "-d", "true")
    assert re.search(rf"MSGID: {msg_id} .* BODY: hello-print", out), out
    out = _mqadmin(java, ends, "consumeMessage", "-t", "mq-print")
    assert "Consume ok" in out and "hello-print" in out, out


def _consumer_heartbeat(group: str, topic: str) -> bytes:
    """A classic push consumer's HEART_BEAT body (``HeartbeatData``): ``group`` subscribes
    to ``topic`` with ``*``."""
    subscription = {
        "topic": topic,
        "subString": "*",
        "tagsSet": [],
        "codeSet": [],
        "subVersion": 1,
        "expressionType": "TAG",
        "classFilterMode": False,
    }
    consumer = {
        "groupName": group,
        "consumeType": "CONSUME_PASSIVELY",
        "messageModel": "CLUSTERING",
        "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
        "unitMode": False,
        "subscriptionDataSet": [subscription],
    }
    return fastjson.dumps(
        {"clientID": "10.0.0.8@mq-consumer", "producerDataSet": [], "consumerDataSet": [consumer]}
    )


def test_mqadmin_lists_consumer_connections(ends: dev.DevEndpoints, java: ClassicJava) -> None:
    """consumerConnection -g lists a classic consumer heartbeating to the broker (client id,
    address, language, version V5_3_3), its subscription and its consume type, model and
    start; once its connection closed, CONSUMER_NOT_ONLINE (206) naming the group."""
    _make_topic(java, ends, "mq-cc")

    async def online() -> str:
        client = transport.RemotingClient()
        try:
            peer = await client.connection(ends.broker_remoting)
            body = _consumer_heartbeat("mq-cc-g", "mq-cc")
            beat = await peer.request(command.request(codes.RequestCode.HEART_BEAT, body=body), 10)
            assert beat.code == codes.ResponseCode.SUCCESS, beat.remark
            return await asyncio.to_thread(java.mqadmin, "consumerConnection", "-g", "mq-cc-g")
        finally:
            await client.close()

    out = asyncio.run(online())
    assert "Exception" not in out, out
    (row,) = [line.split() for line in out.splitlines() if "10.0.0.8@mq-consumer" in line]
    assert row[1].startswith("127.0.0.1:") and row[::2] == ["10.0.0.8@mq-consumer", "JAVA"], out
    assert row[3] == "V5_3_3", out
    assert ["mq-cc", "*"] in [line.split() for line in out.splitlines()], out
    for line in (
        "ConsumeType: CONSUME_PASSIVELY",
        "MessageModel: CLUSTERING",
        "ConsumeFromWhere: CONSUME_FROM_LAST_OFFSET",
    ):
        assert line in out, out
    gone = _until(
        lambda: java.mqadmin("consumerConnection", "-g", "mq-cc-g"),
        lambda text: "CODE: 206" in text,
    )
    assert "CODE: 206" in gone and "the consumer group[mq-cc-g] not online" in gone, gone


def _runtime_totals(java: ClassicJava, ends: dev.DevEndpoints) -> dict[str, str]:
    """brokerStatus's ``key : value`` lines."""
    out = _mqadmin(java, ends, "brokerStatus", "-b", ends.broker_remoting)
    pairs = (line.split(":", 1) for line in out.splitlines() if ":" in line)
    return {key.strip(): value.strip() for key, value in pairs}


def test_mqadmin_stats_all_shows_live_tps_and_totals(
    ends: dev.DevEndpoints, java: ClassicJava
) -> None:
    """After a classic producer sent 6 messages and a push consumer consumed them, statsAll
    shows the topic and group with a non-zero InTPS and OutTPS and 6 messages in and out
    (RocketMQ's TOPIC_PUT_NUMS and GROUP_GET_NUMS, VIEW_BROKER_STATS_DATA 315), the broker's
    TopicStatsTable (202, as mqadmin's library parses it) a non-zero topicPutTps,
    consumerProgress a non-zero Consume TPS, and brokerStatus 6 more messages put and got, at
    non-zero rates."""
    _make_topic(java, ends, "mq-stats")
    before = _runtime_totals(java, ends)
    # the consumer starts first, so the rates are read soon after the sends
    consumer = java.start("consume", "--group", "mq-stats-g", "--topic", "mq-stats", "--count", "6")
    sent = java.run("send", "--topic", "mq-stats", "--count", "6")
    assert len([e for e in sent.events if e.get("status") == "SEND_OK"]) == 6, sent
    got = java.outcome(consumer)
    assert (got.code, len(got.events[-1]["bodies"])) == (0, 6), got

    # rates cover about the last minute: read them first, each JVM takes seconds
    out = _mqadmin(java, ends, "statsAll", "-t", "mq-stats")
    (row,) = [line.split() for line in out.splitlines() if line.split()[:1] == ["mq-stats"]]
    topic, group, accumulation, in_tps, out_tps, in_total, out_total = row
    assert (topic, group, accumulation, in_total, out_total) == (
        "mq-stats",
        "mq-stats-g",
        "0",
        "6",
        "6",
    ), out
    assert float(in_tps) > 0 and float(out_tps) > 0, out
    args = ("--broker", ends.broker_remoting, "--topic", "mq-stats")
    (stats,) = java.run("topic-stats", *args).events
    assert stats["topicPutTps"] > 0 and stats["queues"] == 2, stats
    out = _mqadmin(java, ends, "consumerProgress", "-g", "mq-stats-g")
    found = re.search(r"Consume TPS: ([\d.]+)", out)
    assert found is not None and float(found.group(1)) > 0, out

    after = _runtime_totals(java, ends)
    for key in ("msgPutTotalTodayNow", "msgGetTotalTodayNow"):
        assert int(after[key]) - int(before[key]) == 6, (key, before, after)
    for key in ("putTps", "getTransferedTps"):  # "10 s, 1 min, 10 min": the 10 min rate
        assert float(after[key].split()[2]) > 0, after


def test_mqadmin_resets_one_queue_of_a_group(ends: dev.DevEndpoints, java: ClassicJava) -> None:
    """resetOffsetByTime -b BROKER -q 0 -o 1 moves only queue 0 of a group that consumed 3
    messages there back to offset 1 (consumerProgress: consumer offset 1, diff 2), and leaves
    queue 1 where it was."""
    _make_topic(java, ends, "mq-reset")
    for queue in ("0", "1"):
        args = ("--topic", "mq-reset", "--count", "3", "--mode", "selector", "--queue", queue)
        sent = java.run("send", *args)
        assert [e["queue_id"] for e in sent.events if e["event"] == "sent"] == [int(queue)] * 3
    got = java.attempt("consume", "--group", "mq-reset-g", "--topic", "mq-reset", "--count", "6")
    assert got.code == 0, got

    def progress() -> dict[int, tuple[int, int]]:
        out = _mqadmin(java, ends, "consumerProgress", "-g", "mq-reset-g")
        rows = [line.split() for line in out.splitlines() if line.split()[:1] == ["mq-reset"]]
        return {int(r[2]): (int(r[3]), int(r[4])) for r in rows}

    assert progress() == {0: (3, 3), 1: (3, 3)}
    out = _mqadmin(
        java,
        ends,
        "resetOffsetByTime",
        "-g",
        "mq-reset-g",
        "-t",
        "mq-reset",
        "-b",
        ends.broker_remoting,
        "-q",
        "0",
        "-o",
        "1",
        "-s",
        "now",
    )
    assert "reset consumer offset to 1" in out, out
    assert progress() == {0: (3, 1), 1: (3, 3)}
