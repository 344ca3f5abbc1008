"""The official classic Java client (``rocketmq-client`` 5.3.3, Remoting, unmodified) reads every
message from a slave after its master is SIGKILLed, with real ``ariane namesrv`` and ``ariane
broker`` processes (an ASYNC_MASTER and a SLAVE, both with ``--slave-read-enable``).

The client runs the classic driver's ``send`` and ``push`` scenarios (``classic_java_client``) in
their own JVMs.
RocketMQ's name server drops a broker the moment its Remoting channel closes
(``BrokerHousekeepingService.onChannelDestroy``); Ariane's brokers register over gRPC and are
dropped after 120 s of silence, so the test unregisters the killed master itself, as that
channel close would, instead of waiting.

Own cluster: it SIGKILLs the master of an ASYNC_MASTER + SLAVE pair started with --slave-read-
enable.
"""

from __future__ import annotations

import asyncio
import pathlib
from typing import Any

import grpc
import pytest

import ha_testing
from ariane import dev
from ariane.broker.remoting import replies
from ariane.grpcwire import pb, registry_client
from ariane.remoting import codes, command, fastjson, transport
from conformance import classic_java_client
from conformance.classic_java_client import ClassicJava

pytestmark = pytest.mark.slow

TOPIC = "slave-read"
MESSAGES = 20
QUEUES = 2  # ha_testing.create_topic
SEND_HEADER = {
    "producerGroup": "p",
    "topic": TOPIC,
    "defaultTopic": "TBW102",
    "defaultTopicQueueNums": "4",
    "queueId": "0",
    "sysFlag": "0",
    "bornTimestamp": "1700000000000",
    "flag": "0",
    "properties": "",
    "reconsumeTimes": "0",
    "unitMode": "false",
    "batch": "false",
}
"""A complete SEND_MESSAGE (10) header, as the Go client writes it."""


def _run(java: ClassicJava, scenario: str, *args: str) -> list[dict[str, Any]]:
    """Run a driver scenario to its end; its JSON events (fails on a non-zero exit)."""
    outcome = java.run(scenario, *args)
    assert outcome.code == 0, outcome.events
    return outcome.events


async def _remoting(address: str, code: int, ext: dict[str, str]) -> command.RemotingCommand:
    client = transport.RemotingClient({})
    try:
        return await client.invoke(address, command.request(code, ext, b"x"), 10)
    finally:
        await client.close()


def _slave_max_offsets(address: str) -> int:
    """Sum of the topic's queue max offsets on the slave, through Remoting (0 if unknown)."""
    total = 0
    for queue in range(QUEUES):
        ext = {"topic": TOPIC, "queueId": str(queue)}
        reply = asyncio.run(_remoting(address, codes.RequestCode.GET_MAX_OFFSET, ext))
        if reply.code != codes.ResponseCode.SUCCESS:
            return 0
        total += int(reply.ext_fields["offset"])
    return total


def _route_addresses(namesrv: str) -> dict[str, str]:
    """The topic's classic route as the name server answers it: broker id -> Remoting address."""
    ext = {"topic": TOPIC}
    route = asyncio.run(_remoting(namesrv, codes.RequestCode.GET_ROUTEINFO_BY_TOPIC, ext))
    assert route.code == codes.ResponseCode.SUCCESS, route.remark
    (group,) = fastjson.loads(route.body)["brokerDatas"]
    return {str(k): v for k, v in group["brokerAddrs"].items()}


async def _unregister(namesrv: str, broker_id: int) -> None:
    async with grpc.aio.insecure_channel(namesrv) as channel:
        registry = registry_client.RegistryClient(channel, timeout_s=10)
        request = pb.registry.UnregisterBrokerRequest(
            cluster_name="DefaultCluster",
            broker_name="ha-group",
            broker_id=broker_id,
            epoch=1,  # the master's (its first run): an older epoch would keep its entry
        )
        await registry.unregister_broker(request)


def test_push_consumer_reads_every_message_from_the_slave_after_the_master_is_killed(
    tmp_path: pathlib.Path,
) -> None:
    """The classic route lists the master (id 0) and the slave (id 1); N messages sent through
    the master are all consumed by a classic push consumer from the slave once the master is
    SIGKILLed; the slave refuses a send with SYSTEM_BUSY."""
    with ha_testing.running_namesrv(tmp_path) as namesrv:
        java = ClassicJava(classic_java_client.build(), namesrv, tmp_path / "java")
        master = ha_testing.new_broker(tmp_path, "master")
        slave = ha_testing.new_broker(tmp_path, "slave")
        remoting = {b.name: f"127.0.0.1:{dev.free_port()}" for b in (master, slave)}
        try:
            for broker, role, broker_id in ((master, "ASYNC_MASTER", 0), (slave, "SLAVE", 1)):
                broker.start(
                    tmp_path,
                    namesrv,
                    role,
                    broker_id=broker_id,
                    master_ha=master.ha if broker_id else "",
                    extra=("--remoting-listen", remoting[broker.name], "--slave-read-enable"),
                )
            ha_testing.create_topic(master.endpoint, TOPIC)
            sent = _run(java, "send", "--topic", TOPIC, "--count", str(MESSAGES))
            assert [e["status"] for e in sent] == ["SEND_OK"] * MESSAGES
            ha_testing.poll(
                lambda: _slave_max_offsets(remoting["slave"]) == MESSAGES, "the slave's copy"
            )
            assert _route_addresses(namesrv) == {"0": remoting["master"], "1": remoting["slave"]}
            master.kill()
            asyncio.run(_unregister(namesrv, 0))
            push = ("--topic", TOPIC, "--group", "slave-g", "--count", str(MESSAGES))
            got = _run(java, "push", *push)
            refused = asyncio.run(
                _remoting(remoting["slave"], codes.RequestCode.SEND_MESSAGE, SEND_HEADER)
            )
        finally:
            slave.stop()
            master.stop()
    received = {e["message_id"] for e in got if e["event"] == "received"}
    assert received == {e["message_id"] for e in sent}
    assert (refused.code, refused.remark) == (
        codes.ResponseCode.SYSTEM_BUSY,
        replies.REJECT_REQUEST_REMARK,
    )
