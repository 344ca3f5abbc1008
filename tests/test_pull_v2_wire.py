"""v2 PullMessage answers with what the CommitLog holds (issue 26, zero-copy pulls).

A real broker process stores messages sent over gRPC (tag, keys, user properties, a 1-byte and
the largest body) and over Remoting (a single message and a batch, properties as the Java
client writes them); a raw ``PullMessage`` call (no deserializer: the bytes as they came off
the wire) reads them back, and every message response is compared with the CommitLog's
segment files: its body is the stored body byte for byte (it ends the response), and the whole
response parses as exactly the ``PullMessageResponse`` the conversion
(``grpcwire.messages.outgoing_into``) builds from the record decoded off the segment file.
(A v2 message is a protobuf ``Message``, not the record: the broker fills it from the message
its store read decoded; writing it straight from the record's bytes was measured and is not
cheaper, ``bench/pull_v2.py``.)

Own cluster: the test reads the broker's CommitLog segment files, so it needs a broker whose
store directory and segment size it chose.
"""

from __future__ import annotations

import asyncio
import pathlib
from typing import Any

import grpc

import ha_testing
from ariane import client, dev
from ariane.common import message as message_mod
from ariane.grpcwire import messages, pb, rpc
from ariane.remoting import codes, command, message_codec, transport
from ariane.store import message_codec as store_codec

TOPIC = "v2-wire"
BODY_BYTES_MAX = 262_144
"""``message_size_bytes_max`` of ``ha_testing.SMALL_STORE_TOML``."""
RECORD_BYTES_MAX = 1 << 21


def _expected(
    stored: message_mod.StoredMessage, namespace: str
) -> pb.v2_service.PullMessageResponse:
    """What the decode-and-convert path answers for ``stored`` (the reference)."""
    response = pb.v2_service.PullMessageResponse()
    delivery = message_mod.Delivery("", 0, stored.reconsume_times + 1)
    messages.outgoing_into(response.message, stored, delivery, namespace)
    return response


def _records(log: bytes) -> dict[tuple[int, int], tuple[int, message_mod.StoredMessage]]:
    """Every record of a CommitLog's bytes by (queue id, queue offset) of ``TOPIC``: its
    PHYSICALOFFSET and decoded message."""
    found: dict[tuple[int, int], tuple[int, message_mod.StoredMessage]] = {}
    view, p = memoryview(log), 0
    while True:
        decoded = store_codec.decode(view[p:], record_bytes_max=RECORD_BYTES_MAX)
        if decoded.status is not store_codec.DecodeStatus.OK:
            return found
        stored = decoded.message
        assert stored is not None
        if stored.topic == TOPIC:
            found[(stored.queue_id, stored.queue_offset)] = (p, stored)
        p += decoded.size


async def _send(namesrv: str, remoting: str) -> None:
    async with client.Producer(namesrv) as producer:
        await producer.send(TOPIC, b"x", tag="t1", keys=("k1", "k2"), properties={"a": "1"})
        big = bytes(range(256)) * (BODY_BYTES_MAX // 256)
        await producer.send(TOPIC, big, properties={f"p{i}": "v" * i for i in range(40)})
    peer = transport.RemotingClient({})
    try:
        text = message_codec.encode_properties(
            {"TAGS": "c", "KEYS": "ck", "UNIQ_KEY": "7F0000010000ABCD0000000000000001", "u": "é"}
        ).decode()
        header = {"a": "G", "b": TOPIC, "c": "TBW102", "d": "4", "e": "0", "f": "0"}
        header |= {"g": "1700000000123", "h": "0", "i": text, "j": "0", "k": "false"}
        single = command.request(codes.RequestCode.SEND_MESSAGE_V2, header, b"classic")
        sent = await peer.invoke(remoting, single, 10.0)
        assert sent.code == codes.ResponseCode.SUCCESS, sent.remark
        batch = message_codec.encode_batch(
            [
                message_codec.BatchMessage(f"b{i}".encode() * i, {"UNIQ_KEY": f"U{i}", "x": "y"})
                for i in range(1, 4)
            ]
        )
        code = codes.RequestCode.SEND_BATCH_MESSAGE
        sent = await peer.invoke(
            remoting, command.request(code, {**header, "m": "true"}, batch), 10
        )
        assert sent.code == codes.ResponseCode.SUCCESS, sent.remark
    finally:
        await peer.close()


async def _pull_raw(endpoint: str, queue_id: int, namespace: str) -> list[bytes]:
    """Every response of one PullMessage of ``queue_id`` from 0, as the bytes received."""
    request = pb.v2_service.PullMessageRequest(
        group=pb.v2.Resource(resource_namespace=namespace),
        message_queue=pb.v2.MessageQueue(topic=pb.v2.Resource(name=TOPIC), id=queue_id),
        offset=0,
        batch_size=64,
        filter_expression=pb.v2.FilterExpression(type=pb.v2.FilterType.TAG, expression="*"),
    )
    async with grpc.aio.insecure_channel(endpoint) as channel:
        call: Any = channel.unary_stream(
            rpc.method_path(pb.MESSAGING_SERVICE, "PullMessage"),
            request_serializer=lambda m: m.SerializeToString(),
        )
        return [bytes(r) async for r in call(request, timeout=20, metadata=ha_testing.CLIENT)]


def test_v2_pull_sends_messages_written_from_the_commit_log_bytes(tmp_path: pathlib.Path) -> None:
    """Every message a v2 PullMessage streams carries the CommitLog's body byte for byte and
    parses as the message the decode-and-convert path builds from the stored record (v2 and
    classic sends, a batch, 1-byte and largest bodies, with and without a namespace)."""
    remoting_port = dev.free_port()
    with ha_testing.running_namesrv(tmp_path) as namesrv:
        broker = ha_testing.new_broker(tmp_path, "wire")
        extra = ("--remoting-listen", f"127.0.0.1:{remoting_port}")
        broker.start(tmp_path, namesrv, "ASYNC_MASTER", broker_id=0, extra=extra)
        try:
            ha_testing.create_topic(broker.endpoint, TOPIC)
            asyncio.run(_send(namesrv, f"127.0.0.1:{remoting_port}"))
            pulled = {
                (q, ns): asyncio.run(_pull_raw(broker.endpoint, q, ns))
                for q in range(2)
                for ns in ("", "ns1")
            }
            log = ha_testing.commit_log_bytes(broker.store, 1 << 20)
        finally:
            broker.stop()
    stored = _records(log)
    assert len(stored) == 6
    compared = 0
    for (queue_id, namespace), responses in pulled.items():
        parsed = [pb.v2_service.PullMessageResponse.FromString(r) for r in responses]
        assert parsed[0].WhichOneof("content") == "status", parsed[0]
        assert parsed[-1].WhichOneof("content") == "next_offset", parsed
        for raw, response in zip(responses[1:-1], parsed[1:-1], strict=True):
            system = response.message.system_properties
            physical, message = stored[(queue_id, system.queue_offset)]
            assert response == _expected(message, namespace)
            assert raw.endswith(message.body)
            assert message.body in log[physical : physical + message.store_size_bytes]
            compared += 1
        assert parsed[-1].next_offset == len(parsed) - 2
    assert compared == 2 * len(stored)
