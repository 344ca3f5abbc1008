"""The official classic Java client (``rocketmq-client`` + ``rocketmq-tools`` 5.3.3, the Remoting
protocol) reads routes, the cluster list, the topic list and KV config from ``ariane namesrv``.

The driver (``classic_java/``, run by ``classic_java_client.py``) uses mqadmin's
``DefaultMQAdminExt`` against the name server of a real ``ariane namesrv`` + ``ariane broker``
pair, on the name server's one port (shared with gRPC). Until brokers serve Remoting, the real
broker registers no Remoting address and classic clients must not see it; a second broker group
is registered over gRPC with a Remoting address, as a Remoting-serving broker will register.

The ``mqadmin`` tests run the official ``MQAdminStartup`` main class (``classic_java_client.
ClassicJava.mqadmin``) against a cluster of their own (no fake broker registered), whose
broker serves Remoting, and assert on what mqadmin prints, as a user reads it: mqadmin exits 0
even when a command failed, so no output may carry an exception.

Own cluster: it registers a second broker group with the name server and writes KV config, which
other modules' route and cluster answers must not see.
"""

from __future__ import annotations

import asyncio
import json
import pathlib
import re
import time
from collections.abc import Callable, Iterator
from typing import Any

import grpc
import pytest

from ariane import dev
from ariane.grpcwire import pb
from conformance import classic_java_client
from conformance.classic_java_client import ClassicJava
from conformance.conftest import Cluster

pytestmark = pytest.mark.slow

CLASSIC_REMOTING = "127.0.0.1:10911"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A name server and a broker of this module's own (not the shared one: Own cluster)."""
    with dev.dev_cluster(tmp_path_factory.mktemp("cluster"), namesrv_port=0) as ends:
        yield Cluster(ends)


@pytest.fixture(scope="module")
def java(tmp_path_factory: pytest.TempPathFactory) -> ClassicJava:
    """The classic Java driver, fetched and compiled (cached by a stamp); each test binds it to
    its cluster's name server (``on``)."""
    return ClassicJava(classic_java_client.build(), "", tmp_path_factory.mktemp("classic-logs"))


def _admin(java: ClassicJava, namesrv: str, *args: str) -> tuple[int, list[dict[str, Any]], str]:
    """Run an admin scenario of the driver against ``namesrv``: (exit code, events, stderr)."""
    got = java.on(namesrv).attempt(*args)
    return got.code, got.events, got.stderr


def _register_classic_broker(namesrv: str, topic: str) -> None:
    async def register() -> None:
        request = pb.registry.RegisterBrokerRequest(
            cluster_name="ClassicCluster",
            broker_name="broker-classic",
            broker_id=0,
            client_endpoint=pb.v2.Address(host="127.0.0.1", port=18081),
            data_version=1,
            topic_configs=[
                pb.topic.TopicConfig(
                    topic=topic,
                    read_queue_nums=4,
                    write_queue_nums=4,
                    perm=6,
                    message_type=pb.topic.TopicMessageType.TOPIC_MESSAGE_TYPE_NORMAL,
                )
            ],
            remoting_address=CLASSIC_REMOTING,
        )
        async with grpc.aio.insecure_channel(namesrv) as channel:
            answer = await pb.registry_grpc.RegistryStub(channel).RegisterBroker(
                request, timeout=10
            )
            assert answer.status.code == 20000, answer

    asyncio.run(register())


def test_mqadmin_reads_routes_cluster_and_topics(cluster: Cluster, java: ClassicJava) -> None:
    """examineTopicRouteInfo gets the Remoting broker under id 0 with its queues (and selects
    it), a topic no broker has is TOPIC_NOT_EXIST (17), examineBrokerClusterInfo lists every
    broker serving Remoting (the dev cluster's own broker serves both protocols), and
    fetchAllTopicList lists every topic."""
    # Created first: ``ariane admin`` creates a topic on every registered broker group.
    cluster.admin("topic", "create", "grpc-only", "--queues", "2", "--type", "NORMAL")
    _register_classic_broker(cluster.namesrv, "classic-route")

    code, events, stderr = _admin(java, cluster.namesrv, "route", "--topic", "classic-route")
    assert code == 0, stderr
    (route,) = events
    assert route["brokerDatas"] == [
        {
            "brokerName": "broker-classic",
            "cluster": "ClassicCluster",
            "brokerAddrs": {"0": CLASSIC_REMOTING},
            "selectedAddr": CLASSIC_REMOTING,
        }
    ]
    assert route["queueDatas"] == [
        {"brokerName": "broker-classic", "readQueueNums": 4, "writeQueueNums": 4, "perm": 6}
    ]

    code, events, stderr = _admin(java, cluster.namesrv, "route", "--topic", "no-such-topic")
    assert (code, events[-1]["code"]) == (4, 17), stderr

    code, events, stderr = _admin(java, cluster.namesrv, "cluster")
    assert code == 0, stderr
    (info,) = events
    assert info["clusterAddrTable"]["ClassicCluster"] == ["broker-classic"]
    assert "broker-classic" in info["brokerAddrTable"]
    assert len(info["brokerAddrTable"]) == 2  # and the dev cluster's broker

    code, events, stderr = _admin(java, cluster.namesrv, "topics")
    assert code == 0, stderr
    assert {"classic-route", "grpc-only"} <= set(events[0]["topicList"])


def test_mqadmin_kv_config_round_trip(cluster: Cluster, java: ClassicJava) -> None:
    """createAndUpdateKvConfig, getKVConfig, getKVListByNamespace and deleteKvConfig work; a
    deleted key reads as QUERY_NOT_FOUND (22)."""
    code, events, stderr = _admin(
        java, cluster.namesrv, "kv", "--key", "orders", "--value", "broker-classic:4"
    )
    assert code == 0, stderr
    assert events == [
        {
            "event": "kv",
            "value": "broker-classic:4",
            "table": {"orders": "broker-classic:4"},
            "afterDelete": "error 22",
        }
    ]


MQADMIN_DEADLINE_S = 30.0
"""Longest wait for mqadmin to show a change (registration, a committed offset)."""


@pytest.fixture(scope="module")
def remoting_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dev.DevEndpoints]:
    """A name server and a broker serving Remoting, for the mqadmin tests only."""
    with dev.dev_cluster(tmp_path_factory.mktemp("mqadmin-cluster"), namesrv_port=0) as ends:
        yield ends


def _mqadmin(java: ClassicJava, ends: dev.DevEndpoints, *args: str) -> str:
    """What ``mqadmin ARGS`` printed; fails the test if it printed an exception."""
    out = java.on(ends.namesrv_remoting).mqadmin(*args)
    assert "Exception" not in out, f"mqadmin {args}:\n{out}"
    return out


def _until(probe: Callable[[], str], done: Callable[[str], bool]) -> str:
    """``probe()`` again until ``done`` holds or ``MQADMIN_DEADLINE_S`` passes (each probe is
    a JVM run of a few seconds, so no pause is needed); returns the last output."""
    deadline = time.monotonic() + MQADMIN_DEADLINE_S
    out = probe()
    while not done(out) and time.monotonic() < deadline:
        out = probe()
    return out


def _config(ends: dev.DevEndpoints, name: str) -> str:
    return (pathlib.Path(ends.data_dir) / "store" / "config" / name).read_text()


def test_mqadmin_updates_topics_and_groups_and_reads_the_cluster(
    remoting_cluster: dev.DevEndpoints, java: ClassicJava
) -> None:
    """mqadmin updateTopic and updateSubGroup (-c DefaultCluster) report success for the
    broker's Remoting address, the topic and group are persisted and the topic's route shows
    its queues; topicList lists it; clusterList and brokerStatus show the broker's runtime
    info (version V5_3_3, message totals) without an exception."""
    ends = remoting_cluster
    out = _mqadmin(java, ends, "updateTopic", "-c", "DefaultCluster", "-t", "mq-made")
    assert f"create topic to {ends.broker_remoting} success." in out, out
    out = _mqadmin(
        java, ends, "updateTopic", "-c", "DefaultCluster", "-t", "mq-made", "-r", "3", "-w", "3"
    )
    assert "readQueueNums=3, writeQueueNums=3, perm=RW-" in out, out
    route = _until(
        lambda: _mqadmin(java, ends, "topicRoute", "-t", "mq-made"),
        lambda text: '"readQueueNums":3' in text,
    )
    assert '"readQueueNums":3' in route and '"writeQueueNums":3' in route, route
    assert ends.broker_remoting in route, route
    topic = json.loads(_config(ends, "topics.json"))["topics"]["mq-made"]
    assert (topic["read_queue_nums"], topic["write_queue_nums"]) == (3, 3)

    out = _mqadmin(
        java, ends, "updateSubGroup", "-c", "DefaultCluster", "-g", "mq-made-g", "-r", "3"
    )
    assert f"create subscription group to {ends.broker_remoting} success." in out, out
    group = json.loads(_config(ends, "subscriptionGroup.json"))["groups"]["mq-made-g"]
    assert group["max_delivery_attempts"] == 4 and group["broadcast_consume_allowed"] is False

    assert "mq-made" in _mqadmin(java, ends, "topicList").split()
    out = _mqadmin(java, ends, "clusterList", "-c", "DefaultCluster")
    (row,) = [line.split() for line in out.splitlines() if ends.broker_remoting in line]
    assert row[:5] == ["DefaultCluster", "broker-a", "0", ends.broker_remoting, "V5_3_3"], out
    assert row[-1] == "true", out  # #ACTIVATED
    out = _mqadmin(java, ends, "brokerStatus", "-c", "DefaultCluster")
    assert re.search(r"brokerVersionDesc\s+:\s+V5_3_3", out), out
    assert re.search(r"msgPutTotalTodayNow\s+:\s+\d+", out), out


def _rows(out: str, first: str) -> list[list[str]]:
    return [line.split() for line in out.splitlines() if line.split()[:1] == [first]]


def test_mqadmin_reads_messages_stats_and_consumer_progress(
    remoting_cluster: dev.DevEndpoints, java: ClassicJava
) -> None:
    """After mqadmin sendMessage, topicStatus shows the message's queue and max offset,
    queryMsgByKey and queryMsgById find it; after an official push consumer consumed it,
    consumerProgress shows the group caught up and topicList -c names the group; after
    resetOffsetByTime to 0 it shows the message unconsumed again."""
    ends = remoting_cluster
    _mqadmin(
        java, ends, "updateTopic", "-c", "DefaultCluster", "-t", "mq-read", "-r", "2", "-w", "2"
    )
    _until(
        lambda: _mqadmin(java, ends, "topicRoute", "-t", "mq-read"),
        lambda text: '"readQueueNums":2' in text,
    )
    out = _mqadmin(java, ends, "sendMessage", "-t", "mq-read", "-p", "hello", "-k", "key-7")
    ((broker, queue, status, msg_id),) = _rows(out, "broker-a")
    assert (broker, status) == ("broker-a", "SEND_OK"), out

    out = _mqadmin(java, ends, "topicStatus", "-t", "mq-read")
    stats = {int(r[1]): (int(r[2]), int(r[3])) for r in _rows(out, "broker-a")}
    assert stats == {q: (0, 1 if q == int(queue) else 0) for q in range(2)}, out
    # mqadmin 5.3.3 merges only the brokers' offset tables (DefaultMQAdminExtImpl
    # .examineTopicStats): its total rate is always 0.0; the broker's is checked in
    # test_classic_mqadmin_ops (topic-stats)
    assert "Topic Put TPS: 0.0" in out, out
    assert msg_id in _mqadmin(java, ends, "queryMsgByKey", "-t", "mq-read", "-k", "key-7")
    out = _mqadmin(java, ends, "queryMsgById", "-t", "mq-read", "-i", msg_id)
    assert re.search(r"Keys:\s+\[key-7\]", out) and re.search(r"Topic:\s+mq-read", out), out

    code, events, stderr = _admin(
        java, ends.namesrv_remoting, "consume", "--group", "mq-read-g", "--topic", "mq-read"
    )
    assert (code, events[-1]) == (0, {"event": "consumed", "bodies": ["hello"]}), stderr

    def progress() -> str:
        return _mqadmin(java, ends, "consumerProgress", "-g", "mq-read-g")

    out = _until(progress, lambda text: "Consume Diff Total: 0" in text)
    rows = {int(r[2]): (int(r[3]), int(r[4])) for r in _rows(out, "mq-read")}
    assert rows == {q: (1, 1) if q == int(queue) else (0, 0) for q in range(2)}, out
    assert "Consume Diff Total: 0" in out, out
    listed = _mqadmin(java, ends, "topicList", "-c").splitlines()
    assert ["DefaultCluster", "mq-read", "mq-read-g"] in [row.split() for row in listed]

    out = _mqadmin(java, ends, "resetOffsetByTime", "-g", "mq-read-g", "-t", "mq-read", "-s", "0")
    assert {(r[1], r[2]) for r in _rows(out, "broker-a")} == {("0", "0"), ("1", "0")}, out
    assert "Consume Diff Total: 1" in progress()


def test_mqadmin_consumer_progress_of_a_grpc_pop_group(
    remoting_cluster: dev.DevEndpoints, java: ClassicJava
) -> None:
    """consumerProgress of a group that consumed with the official Python gRPC client (POP)
    shows its real broker and consumer offsets, a diff of 0 and the last consumed message's
    store time, not -1 or N/A (the RocketMQ dashboard's NOT_CONSUME_YET for POP groups)."""
    ends = remoting_cluster
    grpc_cluster = Cluster(ends)
    grpc_cluster.admin("topic", "create", "mq-pop", "--queues", "1", "--type", "NORMAL")
    before_ms = int(time.time() * 1000)
    code, sent = grpc_cluster.run_driver("produce", "--topic", "mq-pop", "--count", "3")
    assert code == 0 and len([e for e in sent if e["event"] == "sent"]) == 3, sent
    code, got = grpc_cluster.run_driver(
        "simple-consume", "--topic", "mq-pop", "--group", "mq-pop-g", "--count", "3"
    )
    assert code == 0 and sum(1 for e in got if e["event"] == "acked") == 3, got

    out = _until(
        lambda: _mqadmin(java, ends, "consumerProgress", "-g", "mq-pop-g"),
        lambda text: "Consume Diff Total: 0" in text and "mq-pop " in text,
    )
    (row,) = _rows(out, "mq-pop")
    assert row[1:5] == ["broker-a", "0", "3", "3"], out  # broker, queue, offsets
    assert "Consume Diff Total: 0" in out and "N/A" not in row, out
    last = time.strptime(" ".join(row[-2:]), "%Y-%m-%d %H:%M:%S")
    assert time.mktime(last) >= before_ms // 1000 - 1, out
