"""The official classic Java client (``rocketmq-client`` + ``rocketmq-tools`` 5.3.3, the Remoting
protocol) reads routes, the cluster list, the topic list and KV config from ``ariane namesrv``.

The driver (``classic/ClassicDriver.java``, run by ``classic_driver.py``) uses mqadmin's
``DefaultMQAdminExt`` against the name server of a real ``ariane namesrv`` + ``ariane broker``
pair, on the name server's one port (shared with gRPC). Until brokers serve Remoting, the real
broker registers no Remoting address and classic clients must not see it; a second broker group
is registered over gRPC with a Remoting address, as a Remoting-serving broker will register.
"""

from __future__ import annotations

import asyncio
import pathlib

import grpc
import pytest

from ariane.grpcwire import pb
from conformance import classic_driver
from conformance.conftest import Cluster

pytestmark = pytest.mark.slow

CLASSIC_REMOTING = "127.0.0.1:10911"


@pytest.fixture(scope="module")
def java(tmp_path_factory: pytest.TempPathFactory) -> classic_driver.ClassicJava:
    """The classic Java driver, fetched and compiled (cached by a stamp)."""
    return classic_driver.build(pathlib.Path(tmp_path_factory.mktemp("classic-logs")))


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


def test_mqadmin_reads_routes_cluster_and_topics(
    cluster: Cluster, java: classic_driver.ClassicJava
) -> None:
    """examineTopicRouteInfo gets the Remoting broker under id 0 with its queues (and selects
    it), a topic no broker has is TOPIC_NOT_EXIST (17), examineBrokerClusterInfo lists every
    broker serving Remoting (the dev cluster's own broker serves both protocols), and
    fetchAllTopicList lists every topic."""
    # Created first: ``ariane admin`` creates a topic on every registered broker group.
    cluster.admin("topic", "create", "grpc-only", "--queues", "2", "--type", "NORMAL")
    _register_classic_broker(cluster.namesrv, "classic-route")

    code, events, stderr = java.run("route", "--topic", "classic-route", namesrv=cluster.namesrv)
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

    code, events, stderr = java.run("route", "--topic", "no-such-topic", namesrv=cluster.namesrv)
    assert (code, events[-1]["code"]) == (4, 17), stderr

    code, events, stderr = java.run("cluster", namesrv=cluster.namesrv)
    assert code == 0, stderr
    (info,) = events
    assert info["clusterAddrTable"]["ClassicCluster"] == ["broker-classic"]
    assert "broker-classic" in info["brokerAddrTable"]
    assert len(info["brokerAddrTable"]) == 2  # and the dev cluster's broker

    code, events, stderr = java.run("topics", namesrv=cluster.namesrv)
    assert code == 0, stderr
    assert {"classic-route", "grpc-only"} <= set(events[0]["topicList"])


def test_mqadmin_kv_config_round_trip(cluster: Cluster, java: classic_driver.ClassicJava) -> None:
    """createAndUpdateKvConfig, getKVConfig, getKVListByNamespace and deleteKvConfig work; a
    deleted key reads as QUERY_NOT_FOUND (22)."""
    code, events, stderr = java.run(
        "kv", "--key", "orders", "--value", "broker-classic:4", namesrv=cluster.namesrv
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
