"""Byte layout of RocketMQ's IndexFile, as pure encode/decode functions (no I/O, no clock).

An index file is a hash map on disk from a key (``topic#KEY`` or ``topic#UNIQ_KEY``) to the
commit-log offsets of the messages that carry it (RocketMQ ``IndexFile``/``IndexHeader``). All
integers are big-endian, as Java's ``ByteBuffer`` writes them::

    position                 size     field
    0                        8        begin_timestamp_ms  store time of the first entry (ms)
    8                        8        end_timestamp_ms    store time of the last entry (ms)
    16                       8        begin_phy_offset    commit-log offset of the first entry
    24                       8        end_phy_offset      commit-log offset of the last entry
    32                       4        hash_slot_count     slots in use
    36                       4        index_count         next entry number; starts at 1
    40                       4 * S    slot[s]             newest entry number whose
                                                          key_hash % S == s; 0 = empty
    40 + 4*S                 20 * N   entry[i], i < N     entry 0 is never written
      + 20*i + 0             4          key_hash          abs(Java String.hashCode(key))
      + 20*i + 4             8          commit_log_offset start of the message's record
      + 20*i + 12            4          time_diff_s       (store time - begin) // 1000 s
      + 20*i + 16            4          prev_index        older entry in the same slot; 0 = end

``S`` is the hash slot count and ``N`` the entry capacity (``index_count_max``); the file is
``40 + 4*S + 20*N`` bytes (420,000,040 with RocketMQ's defaults). Entry numbers start at 1 so
that 0 can mean "no entry" in a slot or a ``prev_index``; a file therefore holds ``N - 1``
entries. Invariants the writer keeps and the reader checks (a crash may break them): every
chain strictly decreases (``prev_index < i``), and entries are written in increasing
commit-log offset order.
"""

from __future__ import annotations

import array
import dataclasses
import mmap
import struct
import sys

from ariane.common import hashing

HEADER_SIZE_BYTES = 40
"""Size of the file header, in bytes."""

SLOT_SIZE_BYTES = 4
"""Size of one hash slot, in bytes."""

ENTRY_SIZE_BYTES = 20
"""Size of one index entry, in bytes."""

NO_ENTRY = 0
"""The entry number meaning "none": an empty slot or the end of a chain (RocketMQ
``invalidIndex``)."""

INT32_MAX = 2**31 - 1
"""Largest value of a Java ``int``; time diffs are clamped to it."""

_HEADER = struct.Struct(">qqqqii")
_SLOT = struct.Struct(">i")
_ENTRY = struct.Struct(">iqii")


Buffer = bytes | bytearray | memoryview | mmap.mmap
"""Anything ``struct.unpack_from`` reads: file contents or a mapping of the file."""

WritableBuffer = bytearray | memoryview | mmap.mmap
"""Anything ``struct.pack_into`` writes into."""


@dataclasses.dataclass(frozen=True, slots=True)
class IndexHeader:
    """The 40-byte header of an index file (RocketMQ ``IndexHeader``).

    Attributes:
        begin_timestamp_ms: store time of the first entry, ms since the epoch.
        end_timestamp_ms: store time of the last entry, ms since the epoch.
        begin_phy_offset: commit-log offset of the first entry.
        end_phy_offset: commit-log offset of the last entry.
        hash_slot_count: number of slots in use.
        index_count: the next entry number to write; 1 for an empty file.
    """

    begin_timestamp_ms: int
    end_timestamp_ms: int
    begin_phy_offset: int
    end_phy_offset: int
    hash_slot_count: int
    index_count: int


@dataclasses.dataclass(frozen=True, slots=True)
class IndexEntry:
    """One 20-byte index entry.

    Attributes:
        key_hash: ``key_hash(key)`` of the indexed key, in ``[0, 2**31 - 1]``.
        commit_log_offset: commit-log offset of the message's record.
        time_diff_s: seconds between the file's begin timestamp and the store time.
        prev_index: the previous entry number in the same slot's chain, or ``NO_ENTRY``.
    """

    key_hash: int
    commit_log_offset: int
    time_diff_s: int
    prev_index: int


def file_size_bytes(hash_slot_count: int, index_count_max: int) -> int:
    """Full size of an index file with ``hash_slot_count`` slots and ``index_count_max`` entries."""
    return (
        HEADER_SIZE_BYTES + hash_slot_count * SLOT_SIZE_BYTES + index_count_max * ENTRY_SIZE_BYTES
    )


def slot_position(slot: int) -> int:
    """Byte position of slot number ``slot`` (``0 <= slot < hash_slot_count``)."""
    return HEADER_SIZE_BYTES + slot * SLOT_SIZE_BYTES


def entry_position(hash_slot_count: int, index: int) -> int:
    """Byte position of entry number ``index`` in a file with ``hash_slot_count`` slots."""
    return HEADER_SIZE_BYTES + hash_slot_count * SLOT_SIZE_BYTES + index * ENTRY_SIZE_BYTES


def key_hash(key: str) -> int:
    """The non-negative hash RocketMQ indexes a key under (``IndexFile.indexKeyHashMethod``).

    It is ``abs(String.hashCode)``, except that ``Integer.MIN_VALUE`` (whose absolute value
    overflows in Java) maps to 0.
    """
    value = abs(hashing.java_string_hash(key))
    return 0 if value > INT32_MAX else value


def time_diff_s(store_timestamp_ms: int, begin_timestamp_ms: int) -> int:
    """Whole seconds from ``begin_timestamp_ms`` to ``store_timestamp_ms``, clamped to an int32.

    A store time before the begin time (the clock went back) gives 0, as in RocketMQ.
    """
    diff_s = (store_timestamp_ms - begin_timestamp_ms) // 1000
    return min(max(diff_s, 0), INT32_MAX)


def encode_header(header: IndexHeader) -> bytes:
    """The 40 bytes of ``header``.

    Raises:
        struct.error: if a field does not fit its width.
    """
    return _HEADER.pack(
        header.begin_timestamp_ms,
        header.end_timestamp_ms,
        header.begin_phy_offset,
        header.end_phy_offset,
        header.hash_slot_count,
        header.index_count,
    )


def decode_header(buffer: Buffer) -> IndexHeader:
    """The header at the start of ``buffer`` (not validated: a crash may leave any values).

    Raises:
        struct.error: if ``buffer`` is shorter than ``HEADER_SIZE_BYTES``.
    """
    return IndexHeader(*_HEADER.unpack_from(buffer, 0))


def encode_entry(entry: IndexEntry) -> bytes:
    """The 20 bytes of ``entry``.

    Raises:
        struct.error: if a field does not fit its width.
    """
    return _ENTRY.pack(entry.key_hash, entry.commit_log_offset, entry.time_diff_s, entry.prev_index)


def decode_entry(buffer: Buffer, position: int) -> IndexEntry:
    """The entry at byte ``position`` of ``buffer`` (not validated).

    Raises:
        struct.error: if fewer than ``ENTRY_SIZE_BYTES`` bytes follow ``position``.
    """
    return IndexEntry(*_ENTRY.unpack_from(buffer, position))


def write_header(buffer: WritableBuffer, header: IndexHeader) -> None:
    """Write ``header`` at the start of ``buffer``."""
    buffer[0:HEADER_SIZE_BYTES] = encode_header(header)


def write_entry(buffer: WritableBuffer, position: int, entry: IndexEntry) -> None:
    """Write ``entry`` at byte ``position`` of ``buffer``."""
    buffer[position : position + ENTRY_SIZE_BYTES] = encode_entry(entry)


def write_entry_fields(
    buffer: WritableBuffer,
    position: int,
    key_hash: int,
    commit_log_offset: int,
    time_diff_s: int,
    prev_index: int,
) -> None:
    """``write_entry`` from the fields themselves (the per-key append path builds no object).

    Raises:
        struct.error: if a field does not fit its width.
    """
    _ENTRY.pack_into(buffer, position, key_hash, commit_log_offset, time_diff_s, prev_index)


def write_header_fields(
    buffer: WritableBuffer,
    begin_timestamp_ms: int,
    end_timestamp_ms: int,
    begin_phy_offset: int,
    end_phy_offset: int,
    hash_slot_count: int,
    index_count: int,
) -> None:
    """``write_header`` from the fields themselves, in ``IndexHeader`` order.

    Raises:
        struct.error: if a field does not fit its width.
    """
    _HEADER.pack_into(
        buffer,
        0,
        begin_timestamp_ms,
        end_timestamp_ms,
        begin_phy_offset,
        end_phy_offset,
        hash_slot_count,
        index_count,
    )


def read_slot(buffer: Buffer, slot: int) -> int:
    """The entry number stored in slot number ``slot`` (not validated)."""
    value: int = _SLOT.unpack_from(buffer, slot_position(slot))[0]
    return value


def write_slot(buffer: WritableBuffer, slot: int, index: int) -> None:
    """Store entry number ``index`` in slot number ``slot``."""
    _SLOT.pack_into(buffer, slot_position(slot), index)


def slot_values(buffer: Buffer, hash_slot_count: int) -> array.array[int]:
    """All ``hash_slot_count`` slot values in slot order, as a compact array (for crash repair)."""
    values = array.array("i")
    assert values.itemsize == SLOT_SIZE_BYTES
    with (
        memoryview(buffer) as view,
        view[HEADER_SIZE_BYTES : slot_position(hash_slot_count)] as region,
    ):
        values.frombytes(region)
    if sys.byteorder == "little":
        values.byteswap()
    return values
