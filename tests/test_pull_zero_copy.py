"""Classic pulls send the CommitLog's own bytes (issue 26, zero-copy pulls).

A real broker process stores messages of edge sizes (a 1-byte body, the largest body, hundreds
of properties, a batch); a classic ``PULL_MESSAGE`` frame reads them back and every record in
the body is compared byte for byte with the record at its PHYSICALOFFSET in the CommitLog's
segment files: equal except the record-CRC property Ariane keeps on disk, cut off the end with
TOTALSIZE and the PROPERTIES length lowered by its 20 bytes (what Apache RocketMQ's default
store, without ``enabledAppendPropCRC``, holds and sends). An in-process test proves the pull
path no longer re-encodes decoded messages.

Own cluster: the test reads the broker's CommitLog segment files at the pulled records'
physical offsets, so it needs a broker whose store directory and segment size it chose.
"""

from __future__ import annotations

import asyncio
import pathlib
import struct

import pytest

import ha_testing
import test_broker_remoting as classic
from ariane import dev
from ariane.common import message as message_mod
from ariane.remoting import codes, command, message_codec, transport
from ariane.store import message_codec as store_codec

RQ = codes.RequestCode
RC = codes.ResponseCode
TOPIC = "zero-copy"
BODY_BYTES_MAX = 262_144
"""``message_size_bytes_max`` of ``ha_testing.SMALL_STORE_TOML`` (the broker's body limit)."""
CRC_PROPERTY = b"__CRC32#\x01"
CRC_PROPERTY_BYTES = 20
IPV4_BODY_AT = 88
"""Where BODY starts in a record with IPv4 hosts (its 4-byte length sits just before)."""


def _header(queue_id: int, properties: dict[str, str], **more: str) -> dict[str, str]:
    text = message_codec.encode_properties(properties).decode()
    return classic.send_header(TOPIC, queue_id, text, **more)


def _pull(queue_id: int, offset: int) -> dict[str, str]:
    return {**classic.pull_header(queue_id, offset), "topic": TOPIC}


def _split(body: bytes) -> list[bytes]:
    records: list[bytes] = []
    p = 0
    while p < len(body):
        (total,) = struct.unpack_from(">i", body, p)
        records.append(body[p : p + total])
        p += total
    assert p == len(body)
    return records


def _as_sent(stored: bytes) -> bytes:
    """``stored`` without its trailing record-CRC property, both lengths lowered by 20 bytes
    (IPv4 hosts, V1 topic: the layout of rocketmq-reference.md)."""
    total = len(stored)
    assert stored[total - CRC_PROPERTY_BYTES :].startswith(CRC_PROPERTY)
    (body_length,) = struct.unpack_from(">i", stored, IPV4_BODY_AT - 4)
    at = IPV4_BODY_AT + body_length + 1 + stored[IPV4_BODY_AT + body_length]
    (properties_length,) = struct.unpack_from(">h", stored, at)
    assert at + 2 + properties_length == total
    return (
        struct.pack(">i", total - CRC_PROPERTY_BYTES)
        + stored[4:at]
        + struct.pack(">h", properties_length - CRC_PROPERTY_BYTES)
        + stored[at + 2 : total - CRC_PROPERTY_BYTES]
    )


async def _send_and_pull(addr: str) -> list[bytes]:
    client = transport.RemotingClient({})
    try:

        async def call(
            code: int, ext: dict[str, str], body: bytes = b""
        ) -> command.RemotingCommand:
            return await client.invoke(addr, command.request(code, ext, body), 10.0)

        empty = await call(RQ.SEND_MESSAGE_V2, _header(0, {}), b"")
        assert empty.code == RC.MESSAGE_ILLEGAL  # an empty body never reaches the CommitLog
        many = {f"user-key-{i:03d}": f"value-{i:03d}-" + "v" * 40 for i in range(300)}
        singles = [
            ({"TAGS": "t"}, b"x"),
            ({"TAGS": "t", "KEYS": "k1 k2"}, bytes(range(256)) * (BODY_BYTES_MAX // 256)),
            (many, b"many properties"),
        ]
        for properties, body in singles:
            sent = await call(RQ.SEND_MESSAGE_V2, _header(0, properties), body)
            assert sent.code == RC.SUCCESS, sent.remark
        batch = message_codec.encode_batch(
            [
                message_codec.BatchMessage(f"b{i}".encode() * i, {"UNIQ_KEY": f"U{i}"})
                for i in range(1, 6)
            ]
        )
        sent = await call(RQ.SEND_BATCH_MESSAGE, _header(1, {}, m="true"), batch)
        assert sent.code == RC.SUCCESS, sent.remark
        records: list[bytes] = []
        for queue_id, count in ((0, len(singles)), (1, 5)):
            pulled = await call(RQ.PULL_MESSAGE, _pull(queue_id, 0))
            assert pulled.code == RC.SUCCESS, pulled.remark
            assert pulled.ext_fields["nextBeginOffset"] == str(count)
            assert len(_split(pulled.body)) == count
            records += _split(pulled.body)
        return records
    finally:
        await client.close()


def test_classic_pull_sends_the_commit_log_bytes(tmp_path: pathlib.Path) -> None:
    """Every record a classic pull returns is the CommitLog's record byte for byte, bar the
    record-CRC property cut off its end (edge sizes: 1-byte and largest body, 300 properties,
    a batch)."""
    remoting_port = dev.free_port()
    with ha_testing.running_namesrv(tmp_path) as namesrv:
        broker = ha_testing.new_broker(tmp_path, "zc")
        extra = ("--remoting-listen", f"127.0.0.1:{remoting_port}")
        broker.start(tmp_path, namesrv, "ASYNC_MASTER", broker_id=0, extra=extra)
        try:
            ha_testing.create_topic(broker.endpoint, TOPIC)
            records = asyncio.run(_send_and_pull(f"127.0.0.1:{remoting_port}"))
            end = max(struct.unpack_from(">q", r, 28)[0] + len(r) + 64 for r in records)
            log = ha_testing.commit_log_bytes(broker.store, end)
        finally:
            broker.stop()
    assert len(records) == 8
    for record in records:
        (physical_offset,) = struct.unpack_from(">q", record, 28)
        (total,) = struct.unpack_from(">i", log, physical_offset)
        assert total == len(record) + CRC_PROPERTY_BYTES
        assert record == _as_sent(log[physical_offset : physical_offset + total])
    bodies = sorted(len(m.body) for m in message_codec.decode_stored(b"".join(records)))
    assert bodies == [1, 2, 4, 6, 8, 10, 15, BODY_BYTES_MAX]


def test_pull_never_re_encodes_a_decoded_message(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A classic pull answers with its records while the decoded-message encoder refuses
    every call: the body is cut from the stored bytes, not rebuilt from Python objects."""

    def refuse(_stored: object) -> bytes:
        raise AssertionError("a pull re-encoded a decoded message")

    monkeypatch.setattr(message_codec, "encode_stored", refuse)

    async def scenario(ctx: classic.Ctx) -> None:
        peer = await ctx.connect()
        properties = classic.props(TAGS="a", color="red")
        for body in (b"one", b"two"):
            sent = await peer.call(
                RQ.SEND_MESSAGE_V2, classic.send_header(properties=properties), body
            )
            assert sent.code == RC.SUCCESS, sent.remark
        pulled = await peer.call(RQ.PULL_MESSAGE, classic.pull_header(1, 0))
        assert pulled.code == RC.SUCCESS, pulled.remark
        stored = message_codec.decode_stored(pulled.body)
        assert [m.body for m in stored] == [b"one", b"two"]
        assert stored[0].properties["color"] == "red" and "__CRC32#" not in stored[0].properties
        filtered = await peer.call(RQ.PULL_MESSAGE, classic.pull_header(1, 0, subscription="b"))
        assert filtered.code == RC.PULL_RETRY_IMMEDIATELY and filtered.body in (b"", None)

    classic.run(tmp_path, scenario)


@pytest.mark.parametrize(
    ("topic", "born_ip", "store_ip", "properties"),
    [
        ("t", "127.0.0.1", "127.0.0.1", {}),
        ("long-" + "x" * 200, "127.0.0.1", "::1", {"TAGS": "a"}),
        ("t6", "fe80::1", "2001:db8::7", {f"k{i}": "v" * i for i in range(1, 60)}),
    ],
)
def test_stored_bytes_equal_the_re_encoded_record(
    topic: str, born_ip: str, store_ip: str, properties: dict[str, str]
) -> None:
    """Cutting the stored record gives the bytes the decode-and-re-encode path gave, for V1
    and V2 (over 127 bytes) topics, IPv4 and IPv6 hosts and no or many properties."""
    fields = store_codec.RecordFields(
        queue_id=3,
        flag=7,
        sys_flag=0,
        born_timestamp_ms=1_700_000_000_000,
        born_host=message_mod.HostAddress(born_ip, 40_000),
        store_host=message_mod.HostAddress(store_ip, 10_911),
        reconsume_times=2,
        prepared_transaction_offset=0,
    )
    prepared = store_codec.prepare(
        topic, b"body", properties, fields, body_bytes_max=1 << 20, properties_bytes_max=32_000
    )
    assert isinstance(prepared, store_codec.PreparedRecord)
    buffer = bytearray(prepared.total_size + 16)
    store_codec.encode_into(
        buffer, 16, prepared, fields, queue_offset=5, commit_log_offset=16, store_timestamp_ms=9
    )
    record = memoryview(buffer)[16:]
    decoded = store_codec.decode(record, record_bytes_max=1 << 21)
    assert decoded.status is store_codec.DecodeStatus.OK and decoded.message is not None
    sent = message_codec.stored_records_body([record, record])
    assert sent == message_codec.encode_stored(decoded.message) * 2
    assert len(sent) == 2 * (len(record) - CRC_PROPERTY_BYTES)
