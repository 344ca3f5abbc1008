"""The IndexFile byte layout round-trips and the key hash matches Java's String.hashCode."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ariane.common import hashing
from ariane.store import index_codec

INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
INT32 = st.integers(min_value=-(2**31), max_value=2**31 - 1)


@settings(max_examples=150, deadline=None)
@given(INT64, INT64, INT64, INT64, INT32, INT32)
def test_header_round_trips(
    begin_ms: int, end_ms: int, begin_phy: int, end_phy: int, slots: int, count: int
) -> None:
    """Any header encodes to 40 bytes and decodes back to itself, also inside a larger buffer."""
    header = index_codec.IndexHeader(begin_ms, end_ms, begin_phy, end_phy, slots, count)
    raw = index_codec.encode_header(header)
    assert len(raw) == index_codec.HEADER_SIZE_BYTES
    assert index_codec.decode_header(raw) == header
    buffer = bytearray(100)
    index_codec.write_header(buffer, header)
    assert index_codec.decode_header(buffer) == header


@settings(max_examples=150, deadline=None)
@given(INT32, INT64, INT32, INT32, st.integers(min_value=0, max_value=60))
def test_entry_round_trips_at_any_position(
    key_hash: int, offset: int, diff_s: int, prev: int, position: int
) -> None:
    """Any entry encodes to 20 bytes and decodes back from the position it was written at."""
    entry = index_codec.IndexEntry(key_hash, offset, diff_s, prev)
    raw = index_codec.encode_entry(entry)
    assert len(raw) == index_codec.ENTRY_SIZE_BYTES
    buffer = bytearray(100)
    index_codec.write_entry(buffer, position, entry)
    assert index_codec.decode_entry(buffer, position) == entry
    assert bytes(buffer[position : position + 20]) == raw


def test_layout_is_big_endian_and_matches_rocketmq_positions() -> None:
    """Fields sit at RocketMQ's byte positions in Java (big-endian) order."""
    header = index_codec.IndexHeader(1, 2, 3, 4, 5, 6)
    raw = index_codec.encode_header(header)
    assert struct.unpack(">q", raw[16:24]) == (3,)
    assert struct.unpack(">i", raw[36:40]) == (6,)
    raw_entry = index_codec.encode_entry(index_codec.IndexEntry(7, 8, 9, 10))
    assert raw_entry == struct.pack(">iqii", 7, 8, 9, 10)
    assert index_codec.slot_position(0) == 40
    assert index_codec.entry_position(hash_slot_count=3, index=2) == 40 + 12 + 40


def test_default_file_size_is_rocketmqs() -> None:
    """5,000,000 slots and 20,000,000 entries make RocketMQ's 420,000,040-byte file."""
    assert index_codec.file_size_bytes(5_000_000, 20_000_000) == 420_000_040


def test_slots_read_back_individually_and_in_bulk() -> None:
    """Slot values written one by one read back singly and as one array, in slot order."""
    buffer = bytearray(index_codec.file_size_bytes(5, 2))
    for slot, value in enumerate([3, 0, 2**31 - 1, -1, 7]):
        index_codec.write_slot(buffer, slot, value)
    assert index_codec.read_slot(buffer, 2) == 2**31 - 1
    assert list(index_codec.slot_values(buffer, 5)) == [3, 0, 2**31 - 1, -1, 7]


@pytest.mark.parametrize(
    ("text", "java_hash"),
    [
        ("", 0),
        ("hello", 99162322),
        ("Hello World", -862545276),
        ("Aa", 2112),
        ("BB", 2112),
        ("polygenelubricants", -(2**31)),
        ("é", 233),
        ("中文", 646394),
        ("😀", 1772899),  # U+1F600 = surrogates D83D DE00, not ord() = 128512
        ("\ud800", 55296),  # a lone surrogate hashes as its code unit
    ],
)
def test_java_string_hash_vectors(text: str, java_hash: int) -> None:
    """``java_string_hash`` gives the values Java's String.hashCode gives, UTF-16 units included."""
    assert hashing.java_string_hash(text) == java_hash


def test_key_hash_is_absolute_and_maps_min_value_to_zero() -> None:
    """The index hash is abs(hashCode), and Integer.MIN_VALUE (no positive twin) becomes 0."""
    assert index_codec.key_hash("Hello World") == 862545276
    assert index_codec.key_hash("polygenelubricants") == 0
    assert index_codec.key_hash("Aa") == index_codec.key_hash("BB")


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=40))
def test_java_string_hash_is_a_signed_int32_polynomial(text: str) -> None:
    """For any text the hash is an int32 equal to the base-31 polynomial over UTF-16 units."""
    data = text.encode("utf-16-be", "surrogatepass")
    units = [int.from_bytes(data[i : i + 2], "big") for i in range(0, len(data), 2)]
    expected = sum(u * pow(31, len(units) - 1 - i, 2**32) for i, u in enumerate(units)) % 2**32
    value = hashing.java_string_hash(text)
    assert -(2**31) <= value < 2**31
    assert value % 2**32 == expected
    assert 0 <= index_codec.key_hash(text) <= index_codec.INT32_MAX


def test_time_diff_is_whole_seconds_clamped() -> None:
    """Time diffs truncate to seconds, are 0 when the clock went back, and cap at int32 max."""
    assert index_codec.time_diff_s(10_999, 9_000) == 1
    assert index_codec.time_diff_s(5_000, 9_000) == 0
    assert index_codec.time_diff_s(2**62, 0) == index_codec.INT32_MAX


def test_short_buffers_are_refused() -> None:
    """Decoding from a buffer too short for a header or entry raises struct.error."""
    with pytest.raises(struct.error):
        index_codec.decode_header(b"\x00" * 39)
    with pytest.raises(struct.error):
        index_codec.decode_entry(b"\x00" * 30, 11)


def _reference_java_hash(text: str) -> int:
    data = text.encode("utf-16-be", "surrogatepass")
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + int.from_bytes(data[i : i + 2], "big")) % 2**32
    return h - 2**32 if h >= 2**31 else h


@settings(max_examples=100, deadline=None)
@given(
    st.one_of(
        st.text(max_size=60),
        st.text(alphabet=st.characters(max_codepoint=127), max_size=60),
        st.text(min_size=hashing.FAST_HASH_UNITS_MAX - 2, max_size=hashing.FAST_HASH_UNITS_MAX + 2),
    )
)
def test_java_string_hash_matches_the_per_unit_loop(text: str) -> None:
    """The summed-powers hash equals Java's per-UTF-16-unit loop, for ASCII, BMP+ and long text."""
    assert hashing.java_string_hash(text) == _reference_java_hash(text)


@settings(max_examples=100, deadline=None)
@given(
    st.integers(0, index_codec.INT32_MAX),
    st.integers(0, 2**63 - 1),
    st.integers(0, index_codec.INT32_MAX),
    st.integers(0, index_codec.INT32_MAX),
    st.tuples(*[st.integers(0, 2**62)] * 4),
)
def test_field_writers_match_the_object_encoders(
    key_hash: int, offset: int, diff_s: int, prev: int, longs: tuple[int, int, int, int]
) -> None:
    """``write_entry_fields``/``write_header_fields`` write what ``encode_entry``/``_header`` do."""
    entry = index_codec.IndexEntry(key_hash, offset, diff_s, prev)
    buffer = bytearray(64)
    index_codec.write_entry_fields(buffer, 7, key_hash, offset, diff_s, prev)
    assert bytes(buffer[7 : 7 + index_codec.ENTRY_SIZE_BYTES]) == index_codec.encode_entry(entry)
    header = index_codec.IndexHeader(*longs, diff_s, prev)
    index_codec.write_header_fields(buffer, *longs, diff_s, prev)
    assert bytes(buffer[: index_codec.HEADER_SIZE_BYTES]) == index_codec.encode_header(header)
