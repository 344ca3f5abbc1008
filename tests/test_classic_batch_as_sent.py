"""Classic SEND_BATCH_MESSAGE: the body is walked once and stored as sent (issue 26 item 1).

In-process (``broker_harness`` + the Remoting ``SendHandler``, no sockets): a batch as the Java
client writes it is stored without the per-message decode (``decode_batch``,
``ClassicMessage``), and every stored record's BODY and PROPERTIES are the batch's own bytes
(read back from the CommitLog, byte for byte). Hostile batches (truncated, a TOTALSIZE, BODY
or PROPERTIES length that lies, a property block longer than the batch, properties that are
not UTF-8, an empty body, a DELAY message) answer their RocketMQ code and append nothing, also
when every message before the bad one was sound: a batch happens whole or not at all.
"""

from __future__ import annotations

import asyncio
import pathlib
import struct
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

import broker_harness
from ariane.broker.processors import send_classic
from ariane.broker.remoting import sending
from ariane.common import ids, message
from ariane.remoting import codes, command
from ariane.remoting import message_codec as remoting_codec
from ariane.store import message_codec as store_codec

TOPIC = "batch-as-sent"
RC = codes.ResponseCode
HOST = message.HostAddress("10.1.2.3", 5000)


def _java_properties(i: int) -> dict[str, str]:
    return {
        "TAGS": "TagA",
        "KEYS": f"key-{i}",
        "UNIQ_KEY": f"7F00000100002A9F0000{i:012X}",
        "WAIT": "true",
        **{f"user-{k}": f"value-{k}-é" for k in range(3)},
    }


def _batch(count: int, *, start: int = 0) -> list[remoting_codec.BatchMessage]:
    return [
        remoting_codec.BatchMessage(f"body-{i}".encode() * (i + 1), _java_properties(i))
        for i in range(start, start + count)
    ]


def _request(body: bytes) -> command.RemotingCommand:
    header = {"a": "G", "b": TOPIC, "c": "TBW102", "d": "4", "e": "1", "f": "0"}
    header |= {"g": "1700000000000", "h": "0", "i": "", "j": "0", "k": "false", "m": "true"}
    return command.request(codes.RequestCode.SEND_BATCH_MESSAGE, header, body)


class Broker:
    """A harness broker with its Remoting send handler."""

    def __init__(self, root: pathlib.Path) -> None:
        self.harness = broker_harness.BrokerHarness(root)
        self.harness.create_topic(TOPIC)
        processors = self.harness.processors
        self.handler = sending.SendHandler(processors.sender, processors.retry)
        self.store = self.harness.runtime.store

    def send(self, body: bytes) -> command.RemotingCommand:
        reply = asyncio.run(self.handler.handle(HOST, _request(body)))
        assert reply is not None
        return reply

    def records(self) -> list[bytes]:
        read = self.store.get_messages(
            ids.TopicName(TOPIC),
            ids.QueueId(1),
            ids.QueueOffset(0),
            max_count=1024,
            max_bytes=1 << 24,
        )
        return [bytes(r) for r in read.records]


@pytest.fixture
def broker(tmp_path: pathlib.Path) -> Iterator[Broker]:
    made = Broker(tmp_path)
    try:
        yield made
    finally:
        made.harness.close()


def _sections(record: bytes) -> tuple[bytes, bytes]:
    """BODY and PROPERTIES (record-CRC property cut) of a stored record with IPv4 hosts and a
    V1 topic (the layout of rocketmq-reference.md)."""
    (body_length,) = struct.unpack_from(">i", record, 84)
    body = record[88 : 88 + body_length]
    at = 88 + body_length + 1 + record[88 + body_length]
    (properties_length,) = struct.unpack_from(">h", record, at)
    properties = record[at + 2 : at + 2 + properties_length]
    assert properties.endswith(b"\x02") and b"__CRC32#\x01" in properties[-20:]
    return body, properties[:-20]


def test_a_java_batch_is_stored_as_sent_without_a_per_message_decode(
    broker: Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch of 64 messages as the Java client writes them is stored while the per-message
    decoders refuse every call, and each stored record holds the batch's body and properties
    bytes exactly (CommitLog read back), in order, with consecutive queue offsets."""

    def refuse(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("a batch message went through a per-message object")

    monkeypatch.setattr(remoting_codec, "decode_batch", refuse)
    monkeypatch.setattr(send_classic, "ClassicMessage", refuse)
    sent = _batch(64)
    reply = broker.send(remoting_codec.encode_batch(sent))
    assert reply.code == RC.SUCCESS, reply.remark
    assert reply.ext_fields["queueOffset"] == "0"
    assert len(reply.ext_fields["msgId"].split(",")) == 64
    records = broker.records()
    assert len(records) == 64
    for m, record in zip(sent, records, strict=True):
        body, properties = _sections(record)
        assert body == m.body
        assert properties == remoting_codec.encode_properties(m.properties)
    offsets = [struct.unpack_from(">q", r, 20)[0] for r in records]
    assert offsets == list(range(64))


def test_a_batch_that_is_not_as_sent_takes_the_general_path(broker: Broker) -> None:
    """Messages without UNIQ_KEY or with an empty-valued property are stored too: the broker
    adds the id / drops the empty item, as RocketMQ's reader does."""
    plain = remoting_codec.BatchMessage(b"no id", {"TAGS": "t"})
    raw = b"TAGS\x01t\x02EMPTY\x01\x02UNIQ_KEY\x01ID2\x02"
    body = remoting_codec.encode_batch([plain])
    body += struct.pack(">iiiii", 20 + 5 + 2 + len(raw), 0, 0, 0, 5) + b"empty"
    body += struct.pack(">h", len(raw)) + raw
    reply = broker.send(body)
    assert reply.code == RC.SUCCESS, reply.remark
    stored = [
        store_codec.decode(memoryview(r), record_bytes_max=1 << 21).message
        for r in broker.records()
    ]
    assert [m.body if m else None for m in stored] == [b"no id", b"empty"]
    assert stored[0] is not None and stored[0].properties["UNIQ_KEY"]
    assert stored[1] is not None and "EMPTY" not in stored[1].properties


def _hostile() -> dict[str, bytes]:
    good = remoting_codec.encode_batch(_batch(3))
    last = remoting_codec.encode_batch(_batch(1, start=3))
    (size,) = struct.unpack_from(">i", last, 0)
    body_length = len(_batch(1, start=3)[0].body)
    props_at = 20 + body_length
    delayed = remoting_codec.BatchMessage(b"later", {**_java_properties(9), "DELAY": "3"})
    empty = remoting_codec.BatchMessage(b"", _java_properties(8))
    return {
        "truncated record": good + last[: len(last) - 7],
        "truncated header": good + last[:11],
        "TOTALSIZE lies": good + struct.pack(">i", size + 5) + last[4:],
        "BODY length lies": good + last[:16] + struct.pack(">i", body_length + 4000) + last[20:],
        "negative BODY length": good + last[:16] + struct.pack(">i", -1) + last[20:],
        "property block too long": (
            good + last[:props_at] + struct.pack(">h", 32_000) + last[props_at + 2 :]
        ),
        "property length negative": (
            good + last[:props_at] + struct.pack(">h", -2) + last[props_at + 2 :]
        ),
        "properties not UTF-8": good.replace(b"TagA", b"Tag\xff", 1),
        "empty body": good + remoting_codec.encode_batch([empty]),
        "DELAY in a batch": good + remoting_codec.encode_batch([delayed]),
    }


HOSTILE = _hostile()
EXPECTED_CODE = {name: RC.MESSAGE_ILLEGAL for name in HOSTILE}
EXPECTED_CODE["DELAY in a batch"] = RC.INVALID_PARAMETER  # Ariane's refusal of such a batch


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_hostile_batch_answers_its_code_and_appends_nothing(broker: Broker, name: str) -> None:
    """A batch whose last message is malformed or refused (after three sound ones) answers
    MESSAGE_ILLEGAL (a DELAY message: INVALID_PARAMETER, the refusal of a batch holding one)
    and the CommitLog
    and the queue stay as they were."""
    before = broker.store.max_commit_log_offset
    reply = broker.send(HOSTILE[name])
    assert reply.code == EXPECTED_CODE[name], (reply.code, reply.remark)
    assert broker.store.max_commit_log_offset == before
    assert broker.store.max_queue_offset(ids.TopicName(TOPIC), ids.QueueId(1)) == 0
    assert broker.records() == []


_RAW_PROPERTIES = st.lists(
    st.sampled_from(["a", "b", "\x01", "\x02", "", "é", "UNIQ_KEY", "DELAY", "x\x01", "1"]),
    max_size=14,
).map(lambda parts: "".join(parts).encode())


@given(_RAW_PROPERTIES)
def test_the_as_sent_check_keeps_only_strings_that_are_their_own_encoding(raw: bytes) -> None:
    """A batch message's properties string is taken as sent only when it is exactly the
    encoding of what the Remoting reader parses from it, holds a UNIQ_KEY and no DELAY: the
    stored bytes then read back as the properties the general path would have stored."""
    found = send_classic._stored_as_sent(raw)
    parsed = remoting_codec.decode_properties(raw)
    if found is not None:
        assert found == parsed
        assert store_codec.properties_to_bytes(found) == raw
        assert found["UNIQ_KEY"] and "DELAY" not in found
    elif store_codec.properties_to_bytes(parsed) == raw and parsed.get("UNIQ_KEY"):
        assert "DELAY" in parsed
