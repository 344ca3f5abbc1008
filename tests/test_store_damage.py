"""Damaged derived files of a store (key index, ConsumeQueue units) found and rebuilt from the
CommitLog: a cut-short or flipped index file, a unit with a flipped tag code or size. Stores on
real files under ``tmp_path``, damaged behind their back between a clean close and a reopen."""

from __future__ import annotations

import pathlib
import struct

from ariane.common import clock
from ariane.store import index_codec, message_store
from store_testing import Q0, TINY_INDEX, T, keys_of, read, request, tiny_settings

MESSAGES = 40
_HEADER = struct.Struct(">qqqqii")


def _open(root: pathlib.Path) -> message_store.MessageStore:
    return message_store.MessageStore.open(
        root, tiny_settings(), clock=clock.SystemClock(), index=TINY_INDEX
    )


def _filled(root: pathlib.Path) -> list[int]:
    """A closed store of ``MESSAGES`` messages with keys k0..k39; their CommitLog offsets."""
    store = _open(root)
    results = store.put_messages_sync(
        [request(body=bytes(100), keys=f"k{i}", tags=f"tag{i % 3}") for i in range(MESSAGES)]
    )
    store.close()
    return [r.commit_log_offset for r in results]


def _found(store: message_store.MessageStore, key: str) -> list[int]:
    """Offsets the index gives for ``T#key`` whose record carries the key (as the admin API)."""
    hits = store.key_index.query(f"T#{key}", max_count=100, begin_ms=0, end_ms=2**62)
    return [
        o
        for o in hits
        if (m := store.get_message(o).message) is not None and f"T#{key}" in keys_of(m)
    ]


def _newest_index_file(root: pathlib.Path) -> pathlib.Path:
    return max(p for p in (root / "index").iterdir() if p.name.isdigit())


def test_a_cut_short_index_file_is_dropped_and_its_keys_indexed_again(
    tmp_path: pathlib.Path,
) -> None:
    """Proves a newest index file cut in the middle of its entries no longer stops the store
    from opening: it is dropped and every key found again (rebuilt from the CommitLog)."""
    offsets = _filled(tmp_path)
    path = _newest_index_file(tmp_path)
    count = _HEADER.unpack_from(path.read_bytes())[5]
    cut = index_codec.entry_position(TINY_INDEX.hash_slot_count, count // 2) + 7
    with path.open("r+b") as handle:
        handle.truncate(cut)
    store = _open(tmp_path)
    try:
        for i, offset in enumerate(offsets):
            assert _found(store, f"k{i}") == [offset]
    finally:
        store.close()


def test_a_flipped_hash_in_the_newest_index_entry_is_found_and_rebuilt(
    tmp_path: pathlib.Path,
) -> None:
    """Proves a bit flip in the key hash of the newest index entry (a lookup of that key then
    misses its message; it never returns a wrong one) is found on open against the record it
    points at, and the file rebuilt so that every key is found."""
    offsets = _filled(tmp_path)
    path = _newest_index_file(tmp_path)
    count = _HEADER.unpack_from(path.read_bytes())[5]
    position = index_codec.entry_position(TINY_INDEX.hash_slot_count, count - 1) + 3
    data = bytearray(path.read_bytes())
    data[position] ^= 0x10
    path.write_bytes(bytes(data))
    store = _open(tmp_path)
    try:
        for i, offset in enumerate(offsets):
            assert _found(store, f"k{i}") == [offset]
    finally:
        store.close()


def _unit_file(root: pathlib.Path, unit: int) -> tuple[pathlib.Path, int]:
    """The ConsumeQueue file of T/0 holding ``unit`` and the unit's byte position in it."""
    entries = tiny_settings().consume_queue_file_entries
    start = unit // entries * entries * 20
    return root / "consumequeue" / T / str(Q0) / f"{start:020d}", unit % entries * 20


def _flip(path: pathlib.Path, position: int, mask: int) -> None:
    data = bytearray(path.read_bytes())
    data[position] ^= mask
    path.write_bytes(bytes(data))


def test_a_flipped_tag_code_or_size_of_a_unit_is_rebuilt_at_read_time(
    tmp_path: pathlib.Path,
) -> None:
    """Proves a unit whose tag code or size disagrees with its record is rebuilt from the
    CommitLog when a read meets it: the read serves every message at its own queue offset and
    the unit on disk is the right one again."""
    _filled(tmp_path)
    damaged = [(_unit_file(tmp_path, 17), 11, 0x01), (_unit_file(tmp_path, 23), 19, 0x04)]
    originals = {path: path.read_bytes() for (path, _), _, _ in damaged}
    for (path, at), field, mask in damaged:  # unit 17's size, unit 23's tag code
        _flip(path, at + field, mask)
    store = _open(tmp_path)
    try:
        got = read(store, 0, max_count=100, max_bytes=1 << 20)
        assert [m.queue_offset for m in got.messages] == list(range(MESSAGES))
        store.checkpoint_now()
        assert {path: path.read_bytes() for path in originals} == originals
    finally:
        store.close()
