"""The Remoting codec byte for byte: frames, both header encodings, JSON bodies, message encodings.

Expected bytes come from remoting.md's examples (what Java 5.3.3 sends, e.g. the 105 request
below), from RocketMQ's layouts (``RocketMQSerializable``, ``MessageDecoder``) and from frames
captured from the official classic Java client 5.3.3 (``JAVA_*`` below: ``ClassicDriver`` of
tests/conformance/classic, now classic_java, run against a recording socket server, 2026-11-24).
"""

from __future__ import annotations

import contextlib
import dataclasses
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ariane.common import ids
from ariane.common import message as message_mod
from ariane.remoting import codes, command, fastjson, message_codec

SPEC_105 = (
    b'{"code":105,"extFields":{"topic":"T"},"flag":0,"language":"JAVA","opaque":3,'
    b'"serializeTypeCurrentRPC":"JSON","version":479}'
)


# DefaultMQAdminExt.examineTopicRouteInfo("TopicTest"), default (JSON) serialization.
JAVA_105_JSON = (
    b"\x00\x00\x00\x87\x00\x00\x00\x83"
    b'{"code":105,"extFields":{"topic":"TopicTest"},"flag":0,"language":"JAVA","opaque":0,'
    b'"serializeTypeCurrentRPC":"JSON","version":479}'
)
# The same call with -Drocketmq.serialize.type=ROCKETMQ.
JAVA_105_ROCKETMQ = (
    b"\x00\x00\x00-\x01\x00\x00)\x00i\x00\x01\xdf\x00\x00\x00\x00\x00\x00\x00\x00"
    b"\x00\x00\x00\x00\x00\x00\x00\x14\x00\x05topic\x00\x00\x00\tTopicTest"
)
# DefaultMQAdminExt.createAndUpdateKvConfig("ORDER_TOPIC_CONFIG", "K", "V"): extFields in Java
# HashMap order, not sorted.
JAVA_100_JSON = (
    b"\x00\x00\x00\xaa\x00\x00\x00\xa6"
    b'{"code":100,"extFields":{"namespace":"ORDER_TOPIC_CONFIG","value":"V","key":"K"},'
    b'"flag":0,"language":"JAVA","opaque":0,"serializeTypeCurrentRPC":"JSON","version":479}'
)


@pytest.mark.parametrize(
    ("frame", "kind"),
    [(JAVA_105_JSON, codes.SerializeType.JSON), (JAVA_105_ROCKETMQ, codes.SerializeType.ROCKETMQ)],
)
def test_frames_captured_from_java_decode_and_re_encode_byte_for_byte(
    frame: bytes, kind: codes.SerializeType
) -> None:
    """The Java 5.3.3 client's GET_ROUTEINFO_BY_TOPIC frames, in both header encodings, decode
    to the request it sent, and encoding that request again gives the same bytes."""
    got = command.decode(frame)
    assert (got.code, got.language, got.version, got.opaque, got.flag) == (
        105,
        codes.LanguageCode.JAVA,
        479,
        0,
        0,
    )
    assert (got.remark, got.ext_fields, got.body, got.serialize_type) == (
        None,
        {"topic": "TopicTest"},
        b"",
        kind,
    )
    assert command.encode(got, kind) == frame


def test_java_extfields_in_hashmap_order_decode() -> None:
    """A Java frame whose extFields are in HashMap order decodes; Ariane writes them sorted,
    which Java reads the same (a JSON object's order carries no meaning)."""
    got = command.decode(JAVA_100_JSON)
    assert got.code == codes.RequestCode.PUT_KV_CONFIG
    assert got.ext_fields == {"namespace": "ORDER_TOPIC_CONFIG", "key": "K", "value": "V"}
    assert command.decode(command.encode(got)) == got


def test_json_header_is_written_as_fastjson_writes_it() -> None:
    """A GET_ROUTEINFO_BY_TOPIC request encodes to the spec's fastjson header, with the
    length prefix and header-info word (type 0, header length) before it."""
    frame = command.encode(command.request(105, {"topic": "T"}, opaque=3))
    assert frame == struct.pack(">ii", 4 + len(SPEC_105), len(SPEC_105)) + SPEC_105


def test_a_response_sets_flag_and_keeps_remark_and_strings() -> None:
    """A response has flag 1, the request's opaque, the remark, and ext values as strings."""
    req = command.request(14, {"queueId": "0"}, opaque=9)
    resp = command.response(req, codes.ResponseCode.QUERY_NOT_FOUND, remark="none")
    frame = command.encode(resp)
    header = frame[8:]
    assert header == (
        b'{"code":22,"flag":1,"language":"JAVA","opaque":9,"remark":"none",'
        b'"serializeTypeCurrentRPC":"JSON","version":479}'
    )


def test_go_client_header_decodes() -> None:
    """The Go client's header (language GO, version 317, empty remark) decodes, and a
    language this enum lacks reads as OTHER instead of failing."""
    header = (
        b'{"code":34,"language":"GO","version":317,"opaque":12,"flag":0,"remark":"",'
        b'"extFields":{"a":"1"}}'
    )
    got = command.decode_frame(struct.pack(">i", len(header)) + header + b"BODY")
    assert (got.code, got.language, got.version, got.opaque) == (34, codes.LanguageCode.GO, 317, 12)
    assert (got.remark, got.ext_fields, got.body) == ("", {"a": "1"}, b"BODY")
    odd = b'{"code":34,"language":"COBOL"}'
    assert command.decode_frame(struct.pack(">i", len(odd)) + odd).language is (
        codes.LanguageCode.OTHER
    )


def test_binary_header_layout() -> None:
    """The ROCKETMQ header: code, language, version, opaque, flag, remark, extFields, as
    ``RocketMQSerializable`` lays them out; a zero-length remark decodes as None."""
    cmd = command.RemotingCommand(
        code=310,
        language=codes.LanguageCode.JAVA,
        version=479,
        opaque=7,
        flag=2,
        remark="r",
        ext_fields={"b": "T"},
        body=b"xy",
    )
    frame = command.encode(cmd, codes.SerializeType.ROCKETMQ)
    header = (
        struct.pack(">hBhii", 310, 0, 479, 7, 2)
        + struct.pack(">i", 1)
        + b"r"
        + struct.pack(">i", 2 + 1 + 4 + 1)
        + struct.pack(">h", 1)
        + b"b"
        + struct.pack(">i", 1)
        + b"T"
    )
    assert (
        frame == struct.pack(">ii", 4 + len(header) + 2, (1 << 24) | len(header)) + header + b"xy"
    )
    assert command.decode(frame) == dataclasses.replace(
        cmd, serialize_type=codes.SerializeType.ROCKETMQ
    )
    no_remark = command.encode(command.request(10), codes.SerializeType.ROCKETMQ)
    assert command.decode(no_remark).remark is None


_text = st.text(st.characters(exclude_categories=["Cs"]), max_size=20)
_commands = st.builds(
    command.RemotingCommand,
    code=st.integers(-(2**15), 2**15 - 1),
    language=st.sampled_from(codes.LanguageCode),
    version=st.integers(-(2**15), 2**15 - 1),
    opaque=st.integers(-(2**31), 2**31 - 1),
    flag=st.integers(0, 3),
    remark=st.none() | _text.filter(bool),
    ext_fields=st.dictionaries(_text, _text, max_size=5),
    body=st.binary(max_size=64),
)


@given(_commands, st.sampled_from(codes.SerializeType))
def test_commands_round_trip_in_both_header_encodings(
    cmd: command.RemotingCommand, kind: codes.SerializeType
) -> None:
    """``decode(encode(c))`` is ``c`` (with the encoding noted) for JSON and ROCKETMQ headers."""
    got = command.decode(command.encode(cmd, kind))
    assert got == dataclasses.replace(cmd, serialize_type=kind)


@given(st.binary(max_size=200))
def test_arbitrary_bytes_decode_or_raise_frame_error(data: bytes) -> None:
    """Any bytes after a length prefix either decode or raise ``FrameError``, nothing else."""
    with contextlib.suppress(command.FrameError):
        command.decode_frame(data)


@given(st.binary(max_size=60))
def test_arbitrary_json_like_headers_decode_or_raise_frame_error(tail: bytes) -> None:
    """Headers that start like JSON but go astray raise ``FrameError`` only."""
    header = b'{"code":' + tail
    with contextlib.suppress(command.FrameError):
        command.decode_frame(struct.pack(">i", len(header)) + header)


@pytest.mark.parametrize(
    "frame",
    [
        b"",
        b"\x00\x00",
        struct.pack(">i", 100) + b"{}",
        struct.pack(">i", (2 << 24) | 2) + b"{}",
        struct.pack(">i", 9) + b"{not json",
        struct.pack(">i", 2) + b"[]",
        struct.pack(">i", 12) + b'{"code":"x"}',
        struct.pack(">i", 18) + b'{"extFields":[1]}}',
        struct.pack(">i", 25) + b'{"extFields":{"a":[1]}}  ',
        struct.pack(">i", 15) + b'{"opaque":1e400',
        struct.pack(">i", (1 << 24) | 3) + b"\x00\x01\x00",
        struct.pack(">i", (1 << 24) | 21) + struct.pack(">hBhiiii", 1, 0, 1, 1, 0, 0, 5),
    ],
)
def test_malformed_frames_raise_frame_error(frame: bytes) -> None:
    """Truncated frames, header lengths past the frame, unknown serialize types, garbage or
    mistyped JSON and binary headers that do not add up all raise ``FrameError``."""
    with pytest.raises(command.FrameError):
        command.decode_frame(frame)


def test_invalid_utf8_in_a_header_decodes_as_java_decodes_it() -> None:
    """Bad UTF-8 in a ROCKETMQ header's remark, ext key and value, and in a JSON header,
    decodes with U+FFFD (Java's ``new String(bytes, UTF_8)``) rather than failing the frame,
    so the server can answer the request."""
    ext = struct.pack(">h", 3) + b"k\xc3x" + struct.pack(">i", 2) + b"\xffv"
    binary = (
        struct.pack(">hBhii", 10, 0, 479, 5, 0)
        + struct.pack(">i", 2)
        + b"r\xfe"
        + struct.pack(">i", len(ext))
        + ext
    )
    decoded = command.decode_frame(struct.pack(">i", (1 << 24) | len(binary)) + binary)
    assert (decoded.code, decoded.opaque, decoded.remark) == (10, 5, "r\ufffd")
    assert decoded.ext_fields == {"k\ufffdx": "\ufffdv"}
    header = b'{"code":17,"extFields":{"AccessKey":"ro\xffot"},"opaque":6}'
    decoded = command.decode_frame(struct.pack(">i", len(header)) + header)
    assert (decoded.code, decoded.opaque) == (17, 6)
    assert decoded.ext_fields == {"AccessKey": "ro\ufffdot"}


def test_frame_length_limits() -> None:
    """A length prefix above ``FRAME_BYTES_MAX - 4`` or below 4 is refused, and ``encode``
    refuses a frame above the limit."""
    assert command.read_frame_length(struct.pack(">i", command.FRAME_BYTES_MAX - 4)) == (
        command.FRAME_BYTES_MAX - 4
    )
    for bad in (command.FRAME_BYTES_MAX - 3, 3, -1):
        with pytest.raises(command.FrameError):
            command.read_frame_length(struct.pack(">i", bad))
    with pytest.raises(command.FrameError):
        command.encode(command.request(10, body=b"x" * command.FRAME_BYTES_MAX))
    with pytest.raises(command.FrameError):
        command.encode(command.request(10, {"n": 1}))  # type: ignore[dict-item]


def test_topic_route_json_is_compact_sorted_and_drops_nulls() -> None:
    """A TopicRouteData-shaped dict is written compact with sorted keys and no nulls."""
    route = {
        "queueDatas": [{"writeQueueNums": 4, "brokerName": "b", "perm": 6}],
        "orderTopicConf": None,
        "brokerDatas": [{"brokerAddrs": {0: "10.0.0.5:10911"}, "brokerName": "b"}],
    }
    assert fastjson.dumps(route) == (
        b'{"brokerDatas":[{"brokerAddrs":{"0":"10.0.0.5:10911"},"brokerName":"b"}],'
        b'"queueDatas":[{"brokerName":"b","perm":6,"writeQueueNums":4}]}'
    )


def test_message_queue_keys_are_json_objects() -> None:
    """``Map<MessageQueue, …>`` keys are written as objects (what mqadmin parses) and read
    back; bare keys as Java's name server writes them read as text."""
    mq = fastjson.MessageQueue(topic="T", broker_name="b", queue_id=1)
    stats = {"offsetTable": {mq: {"maxOffset": 5, "minOffset": 0}}, "topicPutTps": 0.0}
    data = fastjson.dumps(stats)
    assert data == (
        b'{"offsetTable":{{"brokerName":"b","queueId":1,"topic":"T"}:'
        b'{"maxOffset":5,"minOffset":0}},"topicPutTps":0.0}'
    )
    assert fastjson.loads(data) == stats
    assert fastjson.loads(b'{"brokerAddrs":{0:"a:1"}}') == {"brokerAddrs": {"0": "a:1"}}
    for bad in (b'{{"x":1}:2}', b"{", b"[1,]", b'{"a":1} x', b"[" * 100 + b"]" * 100):
        with pytest.raises(fastjson.JsonError):
            fastjson.loads(bad)


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | _text,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(_text, inner.filter(lambda v: v is not None), max_size=4)
        | st.dictionaries(
            st.builds(fastjson.MessageQueue, _text, _text, st.integers(0, 64)),
            inner.filter(lambda v: v is not None),
            max_size=3,
        )
    ),
    max_leaves=12,
)


@given(_json_values)
def test_fastjson_round_trips(value: object) -> None:
    """``loads(dumps(v)) == v`` for nested dicts (string or MessageQueue keys), lists, scalars."""
    assert fastjson.loads(fastjson.dumps(value)) == value


def test_properties_string_as_java_reads_it() -> None:
    """Properties are ``name\\x01value\\x02``; Java's reader skips empty names and values, and
    the encoder never writes them."""
    assert message_codec.encode_properties({"KEYS": "a b", "TAGS": "t", "E": ""}) == (
        b"KEYS\x01a b\x02TAGS\x01t\x02"
    )
    assert message_codec.decode_properties(b"a\x011\x02junk\x02b\x01\x02\x01x\x02c\x012") == {
        "a": "1",
        "c": "2",
    }
    with pytest.raises(message_codec.MessageCodecError):
        message_codec.encode_properties({"a": "x\x02y"})
    with pytest.raises(message_codec.MessageCodecError):
        message_codec.decode_properties(b"\xff\x01x")


def test_batch_body_layout() -> None:
    """A batch body is, per message, TOTALSIZE, MAGIC 0, BODYCRC 0, FLAG, body, properties
    (``MessageDecoder.encodeMessage``), and decodes back."""
    messages = [
        message_codec.BatchMessage(b"hi", {"TAGS": "a"}, flag=1),
        message_codec.BatchMessage(b"", {}, flag=0),
    ]
    body = message_codec.encode_batch(messages)
    props = b"TAGS\x01a\x02"
    first = struct.pack(">iiiii", 20 + 2 + 2 + len(props), 0, 0, 1, 2) + b"hi"
    first += struct.pack(">h", len(props)) + props
    second = struct.pack(">iiiii", 22, 0, 0, 0, 0) + struct.pack(">h", 0)
    assert body == first + second
    assert message_codec.decode_batch(body) == messages


@given(
    st.lists(
        st.builds(
            message_codec.BatchMessage,
            st.binary(max_size=40),
            st.dictionaries(
                _text.filter(lambda t: t and "\x01" not in t and "\x02" not in t),
                _text.filter(lambda t: t and "\x01" not in t and "\x02" not in t),
                max_size=4,
            ),
            st.integers(-(2**31), 2**31 - 1),
        ),
        max_size=5,
    )
)
def test_batches_round_trip(messages: list[message_codec.BatchMessage]) -> None:
    """``decode_batch(encode_batch(ms)) == ms``."""
    assert message_codec.decode_batch(message_codec.encode_batch(messages)) == messages


@given(st.binary(max_size=120))
def test_bad_batch_bodies_raise_message_codec_error(data: bytes) -> None:
    """Arbitrary bytes decode as a batch or raise ``MessageCodecError``, nothing else."""
    with contextlib.suppress(message_codec.MessageCodecError):
        message_codec.decode_batch(data)


def _stored(topic: str = "TopicA", body: bytes = b"hello") -> message_mod.StoredMessage:
    return message_mod.StoredMessage(
        message=message_mod.Message(
            topic=ids.TopicName(topic),
            body=body,
            properties={"TAGS": "t", "UNIQ_KEY": "U1"},
            flag=3,
        ),
        queue_id=ids.QueueId(2),
        queue_offset=ids.QueueOffset(41),
        commit_log_offset=ids.CommitLogOffset(0x1234),
        store_size_bytes=0,
        sys_flag=message_mod.SysFlag.NONE,
        born_timestamp_ms=ids.TimestampMs(1_700_000_000_000),
        born_host=message_mod.HostAddress("10.0.0.9", 50000),
        store_timestamp_ms=ids.TimestampMs(1_700_000_000_123),
        store_host=message_mod.HostAddress("10.0.0.5", 10911),
        reconsume_times=1,
        prepared_transaction_offset=ids.CommitLogOffset(0),
        body_crc=0,
    )


def test_stored_record_is_rocketmq_v1_layout_without_the_crc_property() -> None:
    """A pull-body record has V1 magic, 91 fixed bytes with IPv4 hosts, the fields at
    RocketMQ's offsets, and no ``__CRC32#`` property; it decodes back to the message."""
    stored = _stored()
    record = message_codec.encode_stored(stored)
    props = b"TAGS\x01t\x02UNIQ_KEY\x01U1\x02"
    assert len(record) == 91 + len(b"hello") + len(b"TopicA") + len(props)
    total, magic, _crc, queue_id, flag, queue_offset, physical, sys_flag = struct.unpack_from(
        ">iiiiiqqi", record
    )
    assert (total, magic, queue_id, flag) == (len(record), -626843481, 2, 3)
    assert (queue_offset, physical, sys_flag) == (41, 0x1234, 0)
    assert record[48:56] == bytes([10, 0, 0, 9]) + struct.pack(">i", 50000)
    assert struct.unpack_from(">i", record, 84)[0] == 5 and record[88:93] == b"hello"
    assert record[93] == 6 and record[94:100] == b"TopicA"
    assert record[100:102] == struct.pack(">h", len(props)) and record[102:] == props
    (back,) = message_codec.decode_stored(record + b"")
    assert back.message == stored.message and back.commit_log_offset == 0x1234
    assert back.store_host == stored.store_host and back.reconsume_times == 1
    assert len(message_codec.decode_stored(record + record)) == 2


def test_stored_records_that_do_not_decode_raise() -> None:
    """A truncated or bad-magic record raises ``MessageCodecError``."""
    record = message_codec.encode_stored(_stored())
    for bad in (record[:-3], b"\x00\x00\x00\x60" + b"\xff" * 92):
        with pytest.raises(message_codec.MessageCodecError):
            message_codec.decode_stored(bad)


def test_offset_message_id_is_32_upper_case_hex() -> None:
    """The offset msgId is IPv4, port and CommitLog offset as 32 upper-case hex characters,
    and decodes back to them (``MessageDecoder.createMessageId``/``decodeMessageId``)."""
    host = message_mod.HostAddress("10.0.0.5", 10911)
    msg_id = message_codec.create_offset_message_id(host, 0x1234)
    assert msg_id == "0A000005" + "00002A9F" + "0000000000001234"
    assert message_codec.decode_offset_message_id(msg_id) == (host, 0x1234)
