"""Segments roll, truncate and expire as RocketMQ's MappedFileQueue does, on both file layers."""

from __future__ import annotations

import dataclasses
import pathlib
import threading

import pytest

from ariane.common import clock
from ariane.store import (
    GetMessageStatus,
    LookupStatus,
    PutMessageStatus,
    file_layer,
    mapped_file,
    mapped_file_queue,
)
from store_testing import Q0, MemoryStore, T, read, record_bytes, request, tiny_settings

SIZE = 1024


def _queue(layer: file_layer.FileLayer, root: pathlib.Path) -> mapped_file_queue.MappedFileQueue:
    queue = mapped_file_queue.MappedFileQueue(root / "log", SIZE, layer)
    queue.load()
    return queue


def _five_halves(
    layer: file_layer.FileLayer, root: pathlib.Path
) -> mapped_file_queue.MappedFileQueue:
    """A log holding five 512-byte chunks (bytes 1..5) over three segments."""
    queue = _queue(layer, root)
    for i in range(5):
        _append(queue, bytes([i + 1]) * 512)
    return queue


def _append(queue: mapped_file_queue.MappedFileQueue, data: bytes) -> int:
    segment = queue.segment_for_append()
    offset = segment.start_offset + segment.wrote_position
    segment.append(data)
    return offset


@pytest.fixture(params=["os", "memory"])
def layer(request: pytest.FixtureRequest) -> file_layer.FileLayer:
    """Both file layers: the real file system and the in-memory crash model."""
    return file_layer.OsFileLayer() if request.param == "os" else file_layer.MemoryFileLayer()


def test_segments_roll_are_named_by_offset_and_found(
    layer: file_layer.FileLayer, tmp_path: pathlib.Path
) -> None:
    """Full segments roll to a new file named by its 20-digit start; find maps offsets to files."""
    queue = _five_halves(layer, tmp_path)
    names = layer.list_dir(tmp_path / "log")
    assert names == [mapped_file.file_name_of(o) for o in (0, 1024, 2048)]
    assert names[1] == "00000000000000001024"
    assert queue.max_offset == 2560
    found = queue.find(1500)
    assert found is not None and found.start_offset == 1024
    assert queue.find(5000) is None
    assert found.read(1500 - 1024, 4) == bytes([3]) * 4
    assert queue.flushed_offset == 0
    assert queue.flush() == 2560 and queue.unflushed_bytes == 0


def test_truncate_zeroes_the_tail_and_drops_later_segments(
    layer: file_layer.FileLayer, tmp_path: pathlib.Path
) -> None:
    """Truncation keeps bytes below the cut, zeroes the rest of that file, deletes later files."""
    queue = _five_halves(layer, tmp_path)
    queue.truncate_to(1100)
    assert layer.list_dir(tmp_path / "log") == [
        mapped_file.file_name_of(0),
        mapped_file.file_name_of(1024),
    ]
    assert queue.max_offset == 1100
    reopened = _queue(layer, tmp_path)
    tail = reopened.files[1]
    assert tail.read(0, 76) == bytes([3]) * 76
    assert tail.read(76, SIZE - 76) == bytes(SIZE - 76)


def test_delete_expired_stops_at_the_first_young_segment_and_keeps_the_newest(
    tmp_path: pathlib.Path,
) -> None:
    """Like deleteExpiredFileByTime: oldest first, no holes, never the last, batch bounded."""
    manual = clock.ManualClock()
    layer = file_layer.MemoryFileLayer(clock=manual)
    queue = _queue(layer, tmp_path)
    for i in range(6):
        _append(queue, bytes([i + 1]) * 1024)
        manual.advance_ms(1_000 if i != 2 else 50_000)
    infos = queue.segment_infos()
    assert [i.start_offset for i in infos] == [0, 1024, 2048, 3072, 4096, 5120]
    now = manual.now_ms()
    assert queue.delete_expired(now, 100_000) == 0
    assert queue.delete_expired(now, 40_000, batch_max=2) == 2
    assert queue.delete_expired(now, 40_000) == 1  # segment 3072 is younger: stop there
    assert queue.min_offset == 3072
    assert queue.delete_expired(now, 0, clean_immediately=True) == 2
    assert [i.start_offset for i in queue.segment_infos()] == [5120]


def test_wrong_sizes_and_gaps_are_refused(tmp_path: pathlib.Path) -> None:
    """A segment of the wrong size or a gap between segments is a StoreLayoutError."""
    layer = file_layer.MemoryFileLayer()
    log = tmp_path / "log"
    layer.write_small_file(log / mapped_file.file_name_of(0), bytes(SIZE))
    layer.write_small_file(log / mapped_file.file_name_of(2048), bytes(SIZE))
    with pytest.raises(mapped_file_queue.StoreLayoutError, match="gap"):
        _queue(layer, tmp_path)
    layer.write_small_file(log / mapped_file.file_name_of(2048), bytes(10))
    with pytest.raises(mapped_file_queue.StoreLayoutError, match="bytes"):
        _queue(layer, tmp_path)


def test_memory_layer_crash_keeps_synced_bytes_and_a_torn_prefix(tmp_path: pathlib.Path) -> None:
    """After crash() only synced bytes remain, plus the prefix the tear function keeps."""
    layer = file_layer.MemoryFileLayer()
    handle = layer.create_file(tmp_path / "f", 64)
    handle.pwrite(b"a" * 10, 0)
    handle.sync()
    handle.pwrite(b"b" * 10, 10)
    layer.crash(lambda path, low, high: 4)
    assert handle.pread(24, 0) == b"a" * 10 + b"b" * 4 + bytes(10)
    handle.pwrite(b"c" * 5, 30)
    layer.crash()
    assert handle.pread(40, 0) == b"a" * 10 + b"b" * 4 + bytes(26)
    assert layer.sync_count == 1


def test_readers_writers_and_retention_run_together() -> None:
    """Concurrent reads during appends and segment deletion never return a corrupt message."""
    mem = MemoryStore.open(tiny_settings(commit_log_file_size_bytes=4096))
    store = mem.store
    stop = threading.Event()
    problems: list[str] = []

    def reader() -> None:
        while not stop.is_set():
            low = store.min_queue_offset(T, Q0)
            got = read(store, low, max_count=32, max_bytes=1 << 20)
            if got.status is GetMessageStatus.FOUND:
                for m in got.messages:
                    if m.body != bytes([m.queue_offset % 251 + 1]) * 100:
                        problems.append(f"wrong body at {m.queue_offset}")
            one = store.get_message(store.min_commit_log_offset)
            if one.status is LookupStatus.CORRUPT:
                problems.append("corrupt read")

    threads = [threading.Thread(target=reader, name=f"reader-{i}") for i in range(2)]
    for thread in threads:
        thread.start()
    try:
        for n in range(300):
            result = store.put_message(request(body=bytes([n % 251 + 1]) * 100))
            assert result.status is PutMessageStatus.PUT_OK and result.queue_offset == n
            if n % 50 == 49:
                store.delete_expired_commit_log(mem.clock.now_ms(), 0, clean_immediately=True)
    finally:
        stop.set()
        for thread in threads:
            thread.join(30)
    assert problems == []
    assert store.stats().corrupt_read_count == 0
    store.close()


def test_a_full_write_buffer_still_closes_the_segment_with_a_blank() -> None:
    """A batch that fills the write buffer exactly, then meets the segment's end, gets its BLANK.

    The BLANK header was encoded after the buffered records, past the buffer's end when they
    filled it (``struct.error``, the whole batch answered nothing).
    """
    config = tiny_settings(message_size_bytes_max=4096, write_buffer_bytes=70_144)
    buffer_bytes = config.write_buffer_bytes
    assert buffer_bytes == config.record_size_bytes_max  # the smallest buffer allowed
    overhead = record_bytes(config, request(body=b"x")) - 1
    sizes = [4050] * 16
    sizes.append(buffer_bytes - sum(overhead + s for s in sizes) - overhead)
    assert 0 < sizes[-1] <= 4096  # 17 records fill the buffer to its last byte
    config = dataclasses.replace(config, commit_log_file_size_bytes=buffer_bytes + 64)
    mem = MemoryStore.open(config)
    bodies = [bytes([i]) * size for i, size in enumerate(sizes, start=1)] + [b"next" * 30]
    results = mem.store.put_messages_sync([request(body=body) for body in bodies])
    assert [r.status for r in results] == [PutMessageStatus.PUT_OK] * len(bodies)
    assert results[-1].commit_log_offset == config.commit_log_file_size_bytes
    got = read(mem.store, 0, max_count=100, max_bytes=1 << 20)
    assert [m.body for m in got.messages] == bodies
