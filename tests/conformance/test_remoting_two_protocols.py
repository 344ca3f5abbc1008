"""One store, two protocols: real ``ariane namesrv`` + ``ariane broker`` processes serving the
official gRPC Python client and classic Remoting frames (as the classic Java client sends them)
over the same topics, ids, keys, tags, properties and offsets.

The classic side speaks through the codec's ``RemotingClient`` with the headers Java 5.3.3
writes (``SEND_MESSAGE_V2`` letters, ``PULL_MESSAGE`` with the subscription flag); the gRPC side
is ``official_py_driver.py`` in its own process. The cluster is the session's shared one
(``shared_cluster``); the topics are this module's own.
"""

from __future__ import annotations

import asyncio

import pytest

from ariane import dev
from ariane.remoting import codes, command, fastjson, message_codec, transport
from conformance.conftest import Cluster

pytestmark = pytest.mark.slow

RQ = codes.RequestCode
TIMEOUT_S = 10.0


class TwoProtocolCluster(Cluster):
    """A ``Cluster`` that also knows the broker's classic protocol address."""

    def __init__(self, endpoints: dev.DevEndpoints) -> None:
        super().__init__(endpoints)
        self.remoting = endpoints.broker_remoting


@pytest.fixture(scope="module")
def cluster2(shared_cluster: dev.DevEndpoints) -> TwoProtocolCluster:
    """The shared name server and broker (gRPC + Remoting)."""
    return TwoProtocolCluster(shared_cluster)


async def _call(
    addr: str, code: int, ext: dict[str, str], body: bytes = b""
) -> command.RemotingCommand:
    client = transport.RemotingClient()
    try:
        return await client.invoke(addr, command.request(code, ext, body), TIMEOUT_S)
    finally:
        await client.close()


def call(addr: str, code: int, ext: dict[str, str], body: bytes = b"") -> command.RemotingCommand:
    return asyncio.run(_call(addr, code, ext, body))


def v2_send(topic: str, queue_id: int, properties: dict[str, str]) -> dict[str, str]:
    return {
        "a": "classic-producer",
        "b": topic,
        "c": "TBW102",
        "d": "4",
        "e": str(queue_id),
        "f": "0",
        "g": "1700000000000",
        "h": "0",
        "i": message_codec.encode_properties(properties).decode(),
        "j": "0",
        "k": "false",
        "m": "false",
    }


def test_classic_send_is_received_by_the_official_grpc_client(
    cluster2: TwoProtocolCluster,
) -> None:
    """The name server routes classic clients to the broker's Remoting address; a message sent
    there reaches the official gRPC client with the same id (its UNIQ_KEY), keys, tag and user
    property; the reply's offset msgId names the Remoting address (STOREHOST)."""
    cluster2.admin("topic", "create", "both-ways", "--queues", "4", "--type", "NORMAL")
    route = call(cluster2.namesrv, RQ.GET_ROUTEINFO_BY_TOPIC, {"topic": "both-ways"})
    assert route.code == codes.ResponseCode.SUCCESS, route.remark
    (broker,) = fastjson.loads(route.body)["brokerDatas"]
    assert broker["brokerAddrs"] == {"0": cluster2.remoting}  # the broker registered it
    properties = {
        "UNIQ_KEY": "7F00000100002A9F0000000000000001",
        "KEYS": "k1 k2",
        "TAGS": "TagC",
        "color": "red",
    }
    reply = call(
        cluster2.remoting, RQ.SEND_MESSAGE_V2, v2_send("both-ways", 2, properties), b"from-classic"
    )
    assert reply.code == codes.ResponseCode.SUCCESS, reply.remark
    decoded = message_codec.decode_offset_message_id(reply.ext_fields["msgId"])
    assert decoded is not None
    assert str(decoded[0]) == cluster2.remoting
    code, got = cluster2.run_driver(
        "simple-consume", "--topic", "both-ways", "--group", "grpc-side", "--count", "1"
    )
    assert code == 0
    (received,) = [e for e in got if e["event"] == "received"]
    assert received["message_id"] == properties["UNIQ_KEY"]
    assert received["body"] == "from-classic"
    assert received["keys"] == ["k1", "k2"] and received["tag"] == "TagC"
    assert received["properties"]["color"] == "red"


def test_official_grpc_send_is_pulled_over_remoting(cluster2: TwoProtocolCluster) -> None:
    """A message sent by the official gRPC client is pulled over Remoting as a stored record
    whose UNIQ_KEY is the id the gRPC client got, with its tag and keys."""
    cluster2.admin("topic", "create", "other-way", "--queues", "1", "--type", "NORMAL")
    code, sent = cluster2.run_driver(
        "produce", "--topic", "other-way", "--count", "1", "--tag", "TagG", "--keys-prefix", "g"
    )
    assert code == 0
    (receipt,) = [e for e in sent if e["event"] == "sent"]
    pulled = call(
        cluster2.remoting,
        RQ.PULL_MESSAGE,
        {
            "consumerGroup": "classic-side",
            "topic": "other-way",
            "queueId": "0",
            "queueOffset": "0",
            "maxMsgNums": "32",
            "sysFlag": "4",
            "commitOffset": "0",
            "suspendTimeoutMillis": "0",
            "subscription": "TagG",
            "subVersion": "0",
            "expressionType": "TAG",
        },
    )
    assert pulled.code == codes.ResponseCode.SUCCESS, pulled.remark
    (record,) = message_codec.decode_stored(pulled.body)
    assert record.properties["UNIQ_KEY"] == receipt["message_id"]
    assert record.properties["TAGS"] == "TagG" and record.properties["KEYS"] == "g-0"
    assert record.body == b"m-0"
