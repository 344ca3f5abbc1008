"""The CommitLog record codec round-trips every legal message and never misreads bad bytes."""

from __future__ import annotations

import ipaddress
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ariane.common import ids, message
from ariane.remoting import message_codec as remoting_codec
from ariane.store import message_codec as codec

RECORD_MAX = 64 * 1024
_TEXT = st.characters(codec="utf-8", exclude_characters="\x01\x02")
hosts = st.builds(
    message.HostAddress,
    st.one_of(st.ip_addresses(v=4), st.ip_addresses(v=6)).map(str),
    st.integers(0, 65535),
)
topics = st.one_of(
    st.text(alphabet="abcXYZ019_-%", min_size=1, max_size=20),
    st.text(alphabet="ab", min_size=128, max_size=300),  # V2 topics (2-byte length)
)
property_maps = st.dictionaries(
    st.text(_TEXT, min_size=1, max_size=12), st.text(_TEXT, max_size=30), max_size=6
)


@st.composite
def records(draw: st.DrawFn) -> tuple[str, bytes, dict[str, str], codec.RecordFields, int, int]:
    fields = codec.RecordFields(
        queue_id=draw(st.integers(0, 2**31 - 1)),
        flag=draw(st.integers(-(2**31), 2**31 - 1)),
        sys_flag=draw(st.sampled_from([0, 0x1, 0x2, 0x4, 0x8, 0xC, 0x80])),
        born_timestamp_ms=draw(st.integers(0, 2**62)),
        born_host=draw(hosts),
        store_host=draw(hosts),
        reconsume_times=draw(st.integers(0, 2**31 - 1)),
        prepared_transaction_offset=draw(st.integers(0, 2**62)),
    )
    return (
        draw(topics),
        draw(st.binary(min_size=1, max_size=600)),
        draw(property_maps),
        fields,
        draw(st.integers(0, 2**62)),
        draw(st.integers(0, 2**62)),
    )


def _encode(
    topic: str,
    body: bytes,
    properties: dict[str, str],
    fields: codec.RecordFields,
    queue_offset: int = 7,
    commit_log_offset: int = 1234,
) -> bytes:
    prepared = codec.prepare(
        topic, body, properties, fields, body_bytes_max=4096, properties_bytes_max=32767
    )
    assert isinstance(prepared, codec.PreparedRecord)
    buffer = bytearray(prepared.total_size + 16)
    end = codec.encode_into(
        buffer,
        0,
        prepared,
        fields,
        queue_offset=queue_offset,
        commit_log_offset=commit_log_offset,
        store_timestamp_ms=1_700_000_000_123,
    )
    assert end == prepared.total_size
    return bytes(buffer[:end])


SIMPLE_FIELDS = codec.RecordFields(
    queue_id=3,
    flag=0,
    sys_flag=0,
    born_timestamp_ms=1,
    born_host=message.HostAddress("10.1.2.3", 40000),
    store_host=message.HostAddress("127.0.0.1", 10911),
    reconsume_times=0,
    prepared_transaction_offset=0,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records())
def test_every_legal_record_round_trips(
    drawn: tuple[str, bytes, dict[str, str], codec.RecordFields, int, int],
) -> None:
    """Encode then decode gives back every field, for IPv4/IPv6 hosts and V1/V2 topics."""
    topic, body, properties, fields, queue_offset, offset = drawn
    data = _encode(topic, body, properties, fields, queue_offset, offset)
    result = codec.decode(memoryview(data), record_bytes_max=RECORD_MAX)
    assert result.status is codec.DecodeStatus.OK, result.reason
    stored = result.message
    assert stored is not None
    assert (stored.topic, stored.body, dict(stored.properties)) == (topic, body, properties)
    assert stored.message.flag == fields.flag
    assert (stored.queue_id, stored.queue_offset, stored.commit_log_offset) == (
        fields.queue_id,
        queue_offset,
        offset,
    )
    for got, sent in ((stored.born_host, fields.born_host), (stored.store_host, fields.store_host)):
        assert ipaddress.ip_address(got.ip) == ipaddress.ip_address(sent.ip)
        assert got.port == sent.port
    assert stored.store_timestamp_ms == 1_700_000_000_123
    assert stored.born_timestamp_ms == fields.born_timestamp_ms
    assert stored.reconsume_times == fields.reconsume_times
    assert stored.prepared_transaction_offset == fields.prepared_transaction_offset
    assert int(stored.sys_flag) & ~0x30 == fields.sys_flag
    assert bool(stored.sys_flag & message.SysFlag.BORNHOST_V6) == (":" in fields.born_host.ip)
    assert stored.store_size_bytes == len(data)
    magic = struct.unpack_from(">i", data, 4)[0]
    assert magic == (codec.MAGIC_CODE_V2 if len(topic.encode()) > 127 else codec.MAGIC_CODE_V1)


def test_ipv4_layout_matches_rocketmq_offsets() -> None:
    """With IPv4 hosts the body length sits at byte 84, as in RocketMQ's MessageExtEncoder."""
    data = _encode("T", b"hello", {"TAGS": "a"}, SIMPLE_FIELDS)
    assert struct.unpack_from(">i", data, codec.BODY_LENGTH_POSITION_V4)[0] == 5
    assert data[88:93] == b"hello"
    assert struct.unpack_from(">i", data, 0)[0] == len(data)
    assert struct.unpack_from(">q", data, 28)[0] == 1234  # PHYSICALOFFSET
    assert data.endswith(b"\x02") and b"__CRC32#\x01" in data


def test_illegal_messages_are_refused_before_encoding() -> None:
    """Empty or oversize bodies, big properties, separators and bad hosts are refused."""

    def problem(topic: str = "T", body: bytes = b"x", **props: str) -> object:
        return codec.prepare(
            topic, body, props, SIMPLE_FIELDS, body_bytes_max=10, properties_bytes_max=40
        )

    assert problem(body=b"") is codec.PrepareProblem.BODY_EMPTY
    assert problem(body=b"x" * 11) is codec.PrepareProblem.BODY_TOO_LARGE
    assert problem(K="v" * 40) is codec.PrepareProblem.PROPERTIES_TOO_LARGE
    assert problem(K="a\x01b") is codec.PrepareProblem.PROPERTY_ILLEGAL
    assert problem(topic="") is codec.PrepareProblem.TOPIC_ILLEGAL
    bad_host = SIMPLE_FIELDS._replace(born_host=message.HostAddress("not-an-ip", 1))
    assert (
        codec.prepare("T", b"x", {}, bad_host, body_bytes_max=10, properties_bytes_max=40)
        is codec.PrepareProblem.HOST_ILLEGAL
    )


_RAW_PROPERTIES = st.lists(
    st.sampled_from(["a", "b", "\x01", "\x02", "", "é", "UNIQ_KEY", "x\x01"]), max_size=12
).map(lambda parts: "".join(parts).encode())


@given(_RAW_PROPERTIES)
def test_properties_as_sent_are_stored_as_sent_only_when_they_are_their_encoding(
    raw: bytes,
) -> None:
    """A properties string a classic client sent is reused as the stored one exactly when it
    equals the encoding of what it parses to (by the store's and the Remoting codec's parser),
    so reusing it never stores bytes that read back as other properties."""
    for parsed in (codec.bytes_to_properties(raw), remoting_codec.decode_properties(raw)):
        assert parsed is not None
        assert codec.is_encoding_of(raw, parsed) == (codec.properties_to_bytes(parsed) == raw)


@given(property_maps)
def test_the_encoding_of_properties_is_recognised(props: dict[str, str]) -> None:
    """``is_encoding_of`` accepts the encoding of any legal properties (non-empty values)."""
    legal = {k: v for k, v in props.items() if v}
    encoded = codec.properties_to_bytes(legal)
    assert encoded is not None and codec.is_encoding_of(encoded, legal)


def test_every_cut_of_a_record_is_corrupt_or_end() -> None:
    """A record truncated at any byte decodes as CORRUPT (END only while the prefix is zeros)."""
    data = _encode("Topic", b"payload" * 5, {"KEYS": "k1 k2", "TAGS": "t"}, SIMPLE_FIELDS)
    for cut in range(len(data)):
        result = codec.decode(memoryview(data[:cut]), record_bytes_max=RECORD_MAX)
        zeros = not any(data[:cut])
        expected = codec.DecodeStatus.END if zeros else codec.DecodeStatus.CORRUPT
        assert result.status is expected, cut


def test_torn_record_with_zero_tail_is_corrupt_at_every_cut() -> None:
    """A record whose tail was never written (zeros past a cut) is CORRUPT, never a message."""
    data = _encode("Topic", b"payload" * 5, {"KEYS": "k1", "TAGS": "t"}, SIMPLE_FIELDS)
    for cut in range(8, len(data)):
        torn = data[:cut] + bytes(len(data) - cut + 64)
        result = codec.decode(memoryview(torn), record_bytes_max=RECORD_MAX)
        assert result.status is codec.DecodeStatus.CORRUPT, cut


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_any_flipped_byte_is_detected(data: st.DataObject) -> None:
    """Changing any byte of a record makes it CORRUPT (the record CRC covers every byte)."""
    raw = bytearray(_encode("Flip", b"some body bytes", {"TAGS": "x", "a": "b"}, SIMPLE_FIELDS))
    position = data.draw(st.integers(0, len(raw) - 1))
    raw[position] ^= data.draw(st.integers(1, 255))
    result = codec.decode(memoryview(bytes(raw) + bytes(64)), record_bytes_max=RECORD_MAX)
    assert result.status is not codec.DecodeStatus.OK


def test_bad_magic_bad_crc_and_oversize_lengths_are_corrupt() -> None:
    """Wrong magic, a wrong body CRC and length fields beyond the record are each CORRUPT."""
    good = _encode("T", b"body", {}, SIMPLE_FIELDS)
    cases = {
        "magic": good[:4] + struct.pack(">i", 12345) + good[8:],
        "size": struct.pack(">i", RECORD_MAX + 1) + good[4:],
        "small": struct.pack(">i", 10) + good[4:],
        "body_len": good[:84] + struct.pack(">i", 10_000) + good[88:],
        "neg_body": good[:84] + struct.pack(">i", -5) + good[88:],
        "crc": good[:8] + struct.pack(">i", 1) + good[12:],
    }
    for name, raw in cases.items():
        result = codec.decode(memoryview(raw), record_bytes_max=RECORD_MAX)
        assert result.status is codec.DecodeStatus.CORRUPT, name
    unchecked = codec.decode(memoryview(cases["crc"]), record_bytes_max=RECORD_MAX, check_crc=False)
    assert unchecked.status is codec.DecodeStatus.OK


def test_a_damaged_read_keeps_the_structure_of_a_record_whose_properties_flipped() -> None:
    """Proves ``decode(damaged=True)`` reads a record whose properties are no longer UTF-8 (a
    flipped high bit) for its placement (topic, queue, size; no properties), where a plain or
    unchecked decode calls it CORRUPT; its reason then names the record CRC, not the body's."""
    good = _encode("T", b"body", {"TAGS": "x"}, SIMPLE_FIELDS)
    at = good.index(b"TAGS")
    raw = good[:at] + bytes([good[at] ^ 0x80]) + good[at + 1 :]
    plain = codec.decode(memoryview(raw), record_bytes_max=RECORD_MAX)
    assert (plain.status, plain.reason) == (codec.DecodeStatus.CORRUPT, "record CRC mismatch")
    unchecked = codec.decode(memoryview(raw), record_bytes_max=RECORD_MAX, check_crc=False)
    assert unchecked.status is codec.DecodeStatus.CORRUPT
    damaged = codec.decode(memoryview(raw), record_bytes_max=RECORD_MAX, damaged=True)
    assert damaged.status is codec.DecodeStatus.OK and damaged.message is not None
    assert (damaged.message.topic, damaged.message.message.properties) == ("T", {})
    assert damaged.size == len(good)
    body = good.index(b"body")
    flipped_body = good[:body] + b"X" + good[body + 1 :]
    reason = codec.decode(memoryview(flipped_body), record_bytes_max=RECORD_MAX).reason
    assert reason == codec.BODY_CRC_MISMATCH


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300))
def test_random_bytes_never_raise_and_never_decode_to_a_checked_message(raw: bytes) -> None:
    """Garbage is END, BLANK or CORRUPT; decode never raises."""
    result = codec.decode(memoryview(raw), record_bytes_max=RECORD_MAX)
    assert result.status is not codec.DecodeStatus.OK


def test_blank_and_end() -> None:
    """The BLANK header reports the bytes to skip; zeros are END."""
    buffer = bytearray(64)
    assert codec.encode_blank(buffer, 0, 64) == 8
    blank = codec.decode(memoryview(buffer), record_bytes_max=RECORD_MAX)
    assert (blank.status, blank.size) == (codec.DecodeStatus.BLANK, 64)
    zero = codec.decode(memoryview(bytes(64)), record_bytes_max=RECORD_MAX)
    assert zero.status is codec.DecodeStatus.END
    assert codec.decode(memoryview(b""), record_bytes_max=RECORD_MAX).status is (
        codec.DecodeStatus.END
    )


def test_store_timestamp_peek_matches_full_decode() -> None:
    """The header-only STORETIMESTAMP read agrees with the full decode (IPv4 and IPv6 born host)."""
    for host in ("10.0.0.1", "fe80::1"):
        fields = codec.RecordFields(
            1, 0, 0, 5, message.HostAddress(host, 1), message.LOOPBACK, 0, 0
        )
        data = _encode("T", b"b", {}, fields)
        assert codec.peek_store_timestamp(memoryview(data)) == 1_700_000_000_123
    assert codec.peek_store_timestamp(memoryview(bytes(100))) is None


@pytest.mark.parametrize(
    ("tag", "java_hash"),
    [("", 0), ("TagA", 2598919), ("hello world", 1794106052), ("polygenelubricants", -(2**31))],
)
def test_tag_hash_is_java_string_hash_code(tag: str, java_hash: int) -> None:
    """Tag codes equal Java's String.hashCode, including negative overflow."""
    assert codec.tag_hash_code(tag) == java_hash


def test_tag_hash_uses_utf16_code_units() -> None:
    """Non-BMP characters hash as their two UTF-16 surrogates, as Java does."""
    high, low = 0xD83D, 0xDE00  # U+1F600
    assert codec.tag_hash_code("\U0001f600") == ((31 * high + low) & 0xFFFFFFFF)


def test_offset_message_id_round_trips_ipv4_and_ipv6() -> None:
    """The offset msgId is 32 upper-case hex chars for IPv4 (56 for IPv6) and decodes back."""
    v4 = message.HostAddress("192.168.0.7", 10911)
    msg_id = codec.create_offset_message_id(v4, 0x1_0000_0042)
    assert msg_id == "C0A8000700002A9F0000000100000042"
    assert codec.decode_offset_message_id(msg_id) == (v4, ids.CommitLogOffset(0x1_0000_0042))
    v6 = message.HostAddress("2001:db8::1", 8081)
    msg_id6 = codec.create_offset_message_id(v6, 5)
    assert len(msg_id6) == 56 and msg_id6 == msg_id6.upper()
    assert codec.decode_offset_message_id(msg_id6) == (v6, ids.CommitLogOffset(5))
    assert codec.decode_offset_message_id("XYZ") is None
    assert codec.decode_offset_message_id("G" * 32) is None


def test_properties_string_matches_rocketmq_encoding() -> None:
    """Properties are name\\x01value\\x02 each; items without a separator are skipped on decode."""
    assert codec.properties_to_bytes({"a": "1", "KEYS": "x y"}) == b"a\x011\x02KEYS\x01x y\x02"
    assert codec.bytes_to_properties(b"a\x011\x02junk\x02b\x01\x02") == {"a": "1", "b": ""}
    assert codec.bytes_to_properties(b"\xff\x01x") is None


def _reference_record(
    topic: str,
    body: bytes,
    properties: dict[str, str],
    fields: codec.RecordFields,
    queue_offset: int,
    commit_log_offset: int,
    store_timestamp_ms: int,
) -> bytes:
    # RocketMQ's layout field by field (CommitLog.DefaultAppendMessageCallback), one pack each.
    def host(address: message.HostAddress) -> bytes:
        return ipaddress.ip_address(address.ip).packed + struct.pack(">i", address.port)

    born_v6, store_v6 = ":" in fields.born_host.ip, ":" in fields.store_host.ip
    sys_flag = fields.sys_flag | (0x10 if born_v6 else 0) | (0x20 if store_v6 else 0)
    topic_bytes = topic.encode()
    props = "".join(f"{k}\x01{v}\x02" for k, v in properties.items()).encode()
    v2 = len(topic_bytes) > 127
    after_size = b"".join(
        [
            struct.pack(">i", codec.MAGIC_CODE_V2 if v2 else codec.MAGIC_CODE_V1),
            struct.pack(">i", codec.body_crc(body)),
            struct.pack(">i", fields.queue_id),
            struct.pack(">i", fields.flag),
            struct.pack(">q", queue_offset),
            struct.pack(">q", commit_log_offset),
            struct.pack(">i", sys_flag),
            struct.pack(">q", fields.born_timestamp_ms),
            host(fields.born_host),
            struct.pack(">q", store_timestamp_ms),
            host(fields.store_host),
            struct.pack(">i", fields.reconsume_times),
            struct.pack(">q", fields.prepared_transaction_offset),
            struct.pack(">i", len(body)) + body,
            struct.pack(">h" if v2 else ">b", len(topic_bytes)) + topic_bytes,
            struct.pack(">h", len(props) + codec.CRC_PROPERTY_BYTES) + props,
        ]
    )
    head = struct.pack(">i", 4 + len(after_size) + codec.CRC_PROPERTY_BYTES) + after_size
    crc = codec.body_crc(head)
    return head + b"__CRC32#\x01" + b"%010d" % crc + b"\x02"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records())
def test_encoder_writes_rocketmq_bytes_field_by_field(
    drawn: tuple[str, bytes, dict[str, str], codec.RecordFields, int, int],
) -> None:
    """``encode_into`` writes exactly the bytes of a field-by-field RocketMQ encoding."""
    topic, body, properties, fields, queue_offset, offset = drawn
    expected = _reference_record(
        topic, body, properties, fields, queue_offset, offset, 1_700_000_000_123
    )
    assert _encode(topic, body, properties, fields, queue_offset, offset) == expected
