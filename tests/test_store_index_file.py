"""IndexService answers query-by-key correctly across collisions, files, restarts and crashes."""

from __future__ import annotations

import dataclasses
import pathlib
import tempfile

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ariane.common import clock, ids
from ariane.store import index_codec, index_file, index_service

BASE_MS = 1_700_000_000_000
WIDE = {"begin_ms": 0, "end_ms": 2**62}


def _service(
    directory: pathlib.Path, *, slots: int = 4, capacity: int = 16, results: int = 64
) -> index_service.IndexService:
    geometry = index_file.IndexSettings(
        hash_slot_count=slots, index_count_max=capacity, query_results_max=results
    )
    return index_service.IndexService(
        directory, geometry, clock=clock.ManualClock(start_ms=BASE_MS)
    )


def _file_count(service: index_service.IndexService) -> int:
    return len(service.file_paths)  # a call, so mypy does not narrow the length between asserts


def _off(value: int) -> ids.CommitLogOffset:
    return ids.CommitLogOffset(value)


def _key_in_slot(slot: int, slots: int, *, skip: int = 0) -> str:
    """The ``skip``-th key of the form ``t#k<n>`` whose hash falls in ``slot``."""
    found = 0
    for n in range(10_000):
        key = f"t#k{n}"
        if index_codec.key_hash(key) % slots == slot:
            if found == skip:
                return key
            found += 1
    raise AssertionError("no key found")


def _patch(path: pathlib.Path, position: int, data: bytes) -> None:
    with path.open("r+b") as file:
        file.seek(position)
        file.write(data)


def test_query_returns_offsets_newest_first_and_respects_max_count(tmp_path: pathlib.Path) -> None:
    """Offsets come back newest first, limited by max_count and by query_results_max."""
    service = _service(tmp_path, results=3)
    for n in range(5):
        service.put(["t#order-1", f"t#uniq-{n}"], _off(100 * n), BASE_MS + n)
    assert service.query("t#order-1", max_count=2, **WIDE) == [400, 300]
    assert service.query("t#order-1", max_count=1000, **WIDE) == [400, 300, 200]
    assert service.query("t#uniq-2", max_count=10, **WIDE) == [200]
    assert service.query("t#absent", max_count=10, **WIDE) == []
    assert service.query("t#order-1", max_count=0, **WIDE) == []
    assert service.max_commit_log_offset == 400
    service.close()


def test_colliding_keys_share_a_slot_without_mixing_results(tmp_path: pathlib.Path) -> None:
    """With one slot every key chains together, yet each query returns only its key's hash."""
    service = _service(tmp_path, slots=1)
    keys = ["t#a", "t#b", "t#c"]
    for n in range(9):
        service.put([keys[n % 3]], _off(n * 10), BASE_MS)
    assert service.query("t#a", max_count=10, **WIDE) == [60, 30, 0]
    assert service.query("t#b", max_count=10, **WIDE) == [70, 40, 10]
    # "Aa" and "BB" have the same Java hash: the index cannot tell them apart, callers verify.
    service.put(["t#Aa"], _off(100), BASE_MS)
    service.put(["t#BB"], _off(110), BASE_MS)
    assert service.query("t#Aa", max_count=10, **WIDE) == [110, 100]
    service.close()


def test_time_range_filters_by_store_second(tmp_path: pathlib.Path) -> None:
    """Entries outside the time range are skipped; an entry matches if its store second overlaps."""
    service = _service(tmp_path)
    for offset, delta_ms in ((0, 0), (10, 1_500), (20, 5_000), (30, 10_000)):
        service.put(["t#k"], _off(offset), BASE_MS + delta_ms)

    def between(begin: int, end: int) -> list[ids.CommitLogOffset]:
        return service.query("t#k", max_count=10, begin_ms=BASE_MS + begin, end_ms=BASE_MS + end)

    assert between(0, 10_000) == [30, 20, 10, 0]
    assert between(1_200, 1_600) == [10]  # stored at +1.5 s; RocketMQ would miss it
    assert between(2_000, 4_999) == []
    assert between(5_000, 5_000) == [20]
    assert between(10_000, 99_000) == [30]
    assert between(-5_000, -1) == []
    assert between(3_000, 2_000) == []  # an empty range
    service.close()


def test_full_files_roll_over_and_queries_span_them(tmp_path: pathlib.Path) -> None:
    """A full file rolls to a new one with a later name; a query walks all files newest first."""
    service = _service(tmp_path, capacity=4)  # 3 entries per file
    for n in range(10):
        service.put(["t#k"], _off(n), BASE_MS + n * 1000)
    paths = service.file_paths
    assert len(paths) == 4
    names = [p.name for p in paths]
    assert names == sorted(set(names)) and all(len(n) == 17 and n.isdigit() for n in names)
    assert names[0].startswith("20231114")  # BASE_MS in UTC, yyyyMMddHHmmssSSS
    assert service.query("t#k", max_count=64, **WIDE) == list(range(9, -1, -1))
    window = service.query("t#k", max_count=64, begin_ms=BASE_MS + 2_000, end_ms=BASE_MS + 6_000)
    assert window == [6, 5, 4, 3, 2]
    service.put(["t#x", "t#y", "t#z"], _off(10), BASE_MS + 10_000)  # keys split across files
    assert [service.query(k, max_count=5, **WIDE) for k in ("t#x", "t#y", "t#z")] == [[10]] * 3
    service.close()


def test_reopen_after_close_keeps_everything(tmp_path: pathlib.Path) -> None:
    """Closing and reopening gives the same answers, and new entries go on in the same file."""
    service = _service(tmp_path)
    for n in range(5):
        service.put([f"t#k{n % 2}"], _off(n * 100), BASE_MS + n)
    before = [service.query(f"t#k{n}", max_count=10, **WIDE) for n in range(2)]
    service.close()
    service.close()  # idempotent
    reopened = _service(tmp_path)
    assert [reopened.query(f"t#k{n}", max_count=10, **WIDE) for n in range(2)] == before
    assert reopened.max_commit_log_offset == 400
    reopened.put(["t#k0"], _off(500), BASE_MS + 5)
    assert reopened.query("t#k0", max_count=10, **WIDE) == [500, 400, 200, 0]
    assert _file_count(reopened) == 1
    reopened.close()


def test_refeeding_after_recovery_never_indexes_twice(tmp_path: pathlib.Path) -> None:
    """Re-put messages are ignored below the indexed end; at the end only missing keys are added."""
    service = _service(tmp_path)
    for n in range(4):
        service.put(["t#k", f"t#u{n}"], _off(n * 10), BASE_MS)
    service.put(["t#a"], _off(40), BASE_MS)  # a crash here lost the message's other key
    service.close()
    service = _service(tmp_path)
    for n in range(4):
        service.put(["t#k", f"t#u{n}"], _off(n * 10), BASE_MS)
    service.put(["t#a", "t#b"], _off(40), BASE_MS)
    assert service.query("t#k", max_count=10, **WIDE) == [30, 20, 10, 0]
    assert service.query("t#a", max_count=10, **WIDE) == [40]
    assert service.query("t#b", max_count=10, **WIDE) == [40]
    service.put(["t#k", "t#k", ""], _off(50), BASE_MS)  # duplicate and empty keys
    assert service.query("t#k", max_count=10, **WIDE) == [50, 30, 20, 10, 0]
    service.close()


def test_crash_between_slot_and_header_write_is_repaired(tmp_path: pathlib.Path) -> None:
    """An entry linked into its slot but never counted is unlinked on reopen; chains survive."""
    slots = 2
    x_key, y_key = _key_in_slot(0, slots), _key_in_slot(1, slots)
    service = _service(tmp_path, slots=slots)
    service.put([x_key], _off(100), BASE_MS)
    service.put([y_key], _off(200), BASE_MS)
    path = service.file_paths[0]
    service.close()
    # Simulate a crash in put([x_key], 300): entry 3 and slot 0 written, header still says 3.
    orphan = index_codec.IndexEntry(index_codec.key_hash(x_key), 300, 0, 1)
    _patch(path, index_codec.entry_position(slots, 3), index_codec.encode_entry(orphan))
    _patch(path, index_codec.slot_position(0), (3).to_bytes(4, "big"))

    service = _service(tmp_path, slots=slots)
    assert service.max_commit_log_offset == 200
    assert service.query(x_key, max_count=10, **WIDE) == [100]
    service.put([_key_in_slot(1, slots, skip=1)], _off(250), BASE_MS)  # reuses entry 3
    assert service.query(x_key, max_count=10, **WIDE) == [100]
    service.put([x_key], _off(300), BASE_MS)  # the dispatcher re-feeds the lost message
    assert service.query(x_key, max_count=10, **WIDE) == [300, 100]
    assert service.query(y_key, max_count=10, **WIDE) == [200]
    service.close()


def test_half_written_entry_is_invisible(tmp_path: pathlib.Path) -> None:
    """Bytes of an entry torn mid-write, never linked, change no answer and are overwritten."""
    service = _service(tmp_path, slots=1)
    service.put(["t#a"], _off(100), BASE_MS)
    path = service.file_paths[0]
    service.close()
    _patch(path, index_codec.entry_position(1, 2), b"\xff" * 9)
    service = _service(tmp_path, slots=1)
    assert service.query("t#a", max_count=10, **WIDE) == [100]
    service.put(["t#a"], _off(200), BASE_MS)
    assert service.query("t#a", max_count=10, **WIDE) == [200, 100]
    service.close()


@pytest.mark.timeout(30)
@pytest.mark.parametrize("bad_prev", [2, 3, 7, -5])
def test_corrupt_links_end_the_walk(tmp_path: pathlib.Path, bad_prev: int) -> None:
    """A prev link pointing at itself, forward or below zero cuts the chain instead of looping."""
    service = _service(tmp_path, slots=1)
    for n in range(4):
        service.put(["t#a"], _off(n * 10), BASE_MS)
    path = service.file_paths[0]
    service.close()
    _patch(path, index_codec.entry_position(1, 2) + 16, bad_prev.to_bytes(4, "big", signed=True))
    service = _service(tmp_path, slots=1)
    assert service.query("t#a", max_count=10, **WIDE) == [30, 20, 10]
    service.close()


def test_corrupt_offsets_are_never_returned(tmp_path: pathlib.Path) -> None:
    """An entry whose offset lies outside the file's range is not returned and cuts the chain."""
    service = _service(tmp_path, slots=1)
    for n in range(1, 4):
        service.put(["t#a"], _off(n * 10), BASE_MS)
    path = service.file_paths[0]
    service.close()
    _patch(path, index_codec.entry_position(1, 2) + 4, (10**12).to_bytes(8, "big"))
    service = _service(tmp_path, slots=1)
    assert service.query("t#a", max_count=10, **WIDE) == [30]
    service.close()


@pytest.mark.timeout(120)
@settings(max_examples=60, deadline=None)
@given(
    region=st.binary(min_size=4 * 3 + 20 * 6, max_size=4 * 3 + 20 * 6),
    index_count=st.integers(min_value=-3, max_value=9),
    keys=st.lists(st.sampled_from(["t#a", "t#b", "t#c", "t#Aa", "t#BB"]), max_size=4),
    cut=st.integers(min_value=900, max_value=2100),
)
def test_random_garbage_never_yields_offsets_outside_the_file(
    region: bytes, index_count: int, keys: list[str], cut: int
) -> None:
    """Whatever bytes a crash leaves, queries and truncation end; offsets stay in range."""
    with tempfile.TemporaryDirectory() as raw:
        directory = pathlib.Path(raw)
        service = _service(directory, slots=3, capacity=6)
        service.put(["t#a"], _off(1000), BASE_MS)
        path = service.file_paths[0]
        service.close()
        header = index_codec.IndexHeader(BASE_MS, BASE_MS + 9_000, 1000, 2000, 1, index_count)
        _patch(path, 0, index_codec.encode_header(header) + region)
        service = _service(directory, slots=3, capacity=6)
        for key in ["t#a", "t#b", "t#c", "t#Aa"]:
            for offset in service.query(key, max_count=64, **WIDE):
                assert 1000 <= offset <= 2000
        service.truncate_after(_off(cut))
        for key in ["t#a", "t#b", "t#c", "t#Aa"]:
            for offset in service.query(key, max_count=64, **WIDE):
                assert 1000 <= offset < cut
        for n, key in enumerate(keys):
            service.put([key], _off(3000 + n), BASE_MS + 10_000)
        for key in keys:
            assert service.query(key, max_count=64, **WIDE)[0] >= 3000
        service.close()


def test_truncate_after_removes_entries_and_files_beyond_the_end(tmp_path: pathlib.Path) -> None:
    """Entries at or past the recovered end vanish, whole files beyond it are deleted."""
    service = _service(tmp_path, slots=2, capacity=4)  # 3 entries per file
    for n in range(10):
        service.put([f"t#k{n % 3}"], _off(n * 10), BASE_MS + n * 1000)
    assert _file_count(service) == 4
    service.truncate_after(_off(45))  # keeps offsets 0..40: files 1-2 full-ish
    assert _file_count(service) == 2
    assert service.max_commit_log_offset == 40
    assert service.query("t#k0", max_count=10, **WIDE) == [30, 0]
    assert service.query("t#k1", max_count=10, **WIDE) == [40, 10]
    assert service.query("t#k2", max_count=10, **WIDE) == [20]
    service.put(["t#k2"], _off(45), BASE_MS + 4_500)  # the log continues from its end
    service.put(["t#k0"], _off(60), BASE_MS + 6_000)
    assert service.query("t#k2", max_count=10, **WIDE) == [45, 20]
    assert service.query("t#k0", max_count=10, **WIDE) == [60, 30, 0]
    service.truncate_after(_off(1_000))  # nothing beyond: nothing changes
    assert service.query("t#k0", max_count=10, **WIDE) == [60, 30, 0]
    service.truncate_after(_off(0))
    assert service.file_paths == ()
    assert service.flush() is None  # nothing indexed any more
    service.close()


def test_truncate_survives_reopen(tmp_path: pathlib.Path) -> None:
    """A truncation is on disk: after reopening, the removed entries stay gone."""
    service = _service(tmp_path, slots=1)
    for n in range(6):
        service.put(["t#a", f"t#u{n}"], _off(n * 10), BASE_MS + n * 1000)
    service.truncate_after(_off(30))
    service.close()
    service = _service(tmp_path, slots=1)
    assert service.query("t#a", max_count=10, **WIDE) == [20, 10, 0]
    assert service.query("t#u4", max_count=10, **WIDE) == []
    assert service.max_commit_log_offset == 20
    service.close()


def test_delete_files_before_keeps_the_newest(tmp_path: pathlib.Path) -> None:
    """Retention deletes the oldest files wholly below the offset, never the newest one."""
    service = _service(tmp_path, capacity=3)  # 2 entries per file
    for n in range(7):
        service.put(["t#k"], _off(n * 10), BASE_MS + n)
    assert _file_count(service) == 4
    assert service.delete_files_before(_off(10)) == 0  # the first file ends at offset 10
    assert service.delete_files_before(_off(11)) == 1
    assert service.query("t#k", max_count=10, **WIDE) == [60, 50, 40, 30, 20]
    assert service.delete_files_before(_off(10**9)) == 2
    assert _file_count(service) == 1
    assert service.query("t#k", max_count=10, **WIDE) == [60]
    service.close()


def test_settings_bounds_and_geometry_changes_are_refused(tmp_path: pathlib.Path) -> None:
    """Out-of-range settings raise ValueError; a file made with other settings raises."""
    with pytest.raises(ValueError, match="hash_slot_count"):
        index_file.IndexSettings(hash_slot_count=0)
    with pytest.raises(ValueError, match="index_count_max"):
        index_file.IndexSettings(index_count_max=1)
    with pytest.raises(ValueError, match="exceeds"):
        index_file.IndexSettings(hash_slot_count=100_000_000, index_count_max=100_000_000)
    assert index_file.IndexSettings().file_size_bytes == 420_000_040
    service = _service(tmp_path, slots=4)
    service.put(["t#a"], _off(1), BASE_MS)
    service.close()
    with pytest.raises(index_file.IndexFileError, match="changed"):
        _service(tmp_path, slots=5)


def test_leftover_temporary_files_are_removed(tmp_path: pathlib.Path) -> None:
    """A file half-created before a crash (hidden temp name) is removed at open, others ignored."""
    (tmp_path / ".20240101000000000.tmp").write_bytes(b"partial")
    (tmp_path / "README").write_text("not an index file")
    service = _service(tmp_path)
    assert service.file_paths == ()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["README"]
    service.put(["t#a"], _off(1), BASE_MS)
    assert service.flush() == 1
    service.close()


KEYS = ["t#a", "t#b", "t#c", "t#Aa", "t#BB", "t#中文", "t#😀"]


@dataclasses.dataclass
class _Model:
    entries: list[tuple[int, int]] = dataclasses.field(default_factory=list)

    def put(self, keys: list[str], offset: int) -> None:
        if self.entries and offset < self.entries[-1][1]:
            return
        for key_hash in dict.fromkeys(index_codec.key_hash(k) for k in keys):
            if (key_hash, offset) not in self.entries:
                self.entries.append((key_hash, offset))

    def query(self, key: str) -> list[int]:
        wanted = index_codec.key_hash(key)
        return [offset for key_hash, offset in reversed(self.entries) if key_hash == wanted]


OPERATION: st.SearchStrategy[tuple[str, list[str], int]] = st.one_of(
    st.tuples(st.just("put"), st.lists(st.sampled_from(KEYS), max_size=3), st.integers(0, 3)),
    st.tuples(st.just("reopen"), st.just([]), st.just(0)),
    st.tuples(st.just("truncate"), st.just([]), st.integers(0, 40)),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(OPERATION, max_size=30))
def test_index_matches_a_model_through_reopens_and_truncations(
    operations: list[tuple[str, list[str], int]],
) -> None:
    """Any mix of puts, reopens and truncations answers every key like an in-memory model."""
    model = _Model()
    offset = 0
    with tempfile.TemporaryDirectory() as raw:
        directory = pathlib.Path(raw)
        service = _service(directory, slots=3, capacity=5, results=1000)
        for kind, keys, number in operations:
            if kind == "put":
                offset += number  # 0 re-feeds the same offset
                service.put(keys, _off(offset), BASE_MS + offset * 100)
                model.put(keys, offset)
            elif kind == "reopen":
                service.close()
                service = _service(directory, slots=3, capacity=5, results=1000)
            else:
                end = min(number, offset + 1)
                service.truncate_after(_off(end))
                model.entries = [(h, o) for h, o in model.entries if o < end]
                offset = max(offset, end)
            for key in KEYS:
                assert service.query(key, max_count=1000, **WIDE) == model.query(key)
        service.close()


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.lists(st.sampled_from(["", "t#a", "t#b", "t#c", "t#k1", "t#k2"]), max_size=3),
            st.integers(0, 3),  # offset step (0: the same message re-fed)
            st.integers(0, 5_000),  # ms after the previous message
        ),
        max_size=40,
    )
)
def test_put_many_writes_the_same_files_as_put_one_by_one(
    messages: list[tuple[list[str], int, int]],
) -> None:
    """One ``put_many`` leaves byte-identical index files to a ``put`` per message."""
    batch: list[tuple[list[str], ids.CommitLogOffset, int]] = []
    offset, now_ms = 0, BASE_MS
    for keys, step, later_ms in messages:
        offset, now_ms = offset + step * 100, now_ms + later_ms
        batch.append((keys, _off(offset), now_ms))
    with tempfile.TemporaryDirectory() as one, tempfile.TemporaryDirectory() as many:
        single, batched = _service(pathlib.Path(one)), _service(pathlib.Path(many))
        for keys, at, stamp in batch:
            single.put(keys, at, stamp)
        batched.put_many(batch)
        single_files, batched_files = single.file_paths, batched.file_paths
        single.close()
        batched.close()
        assert len(single_files) == len(batched_files)
        for a, b in zip(single_files, batched_files, strict=True):
            assert a.read_bytes() == b.read_bytes()
