"""Recovery keeps every durable message, cuts torn or corrupt tails, and skips scans when clean."""

from __future__ import annotations

import pathlib
import random

import pytest

from ariane.common import clock, limits
from ariane.store import (
    LookupStatus,
    PutMessageResult,
    PutMessageStatus,
    checkpoint,
    file_layer,
    high_water,
    mapped_file,
    mapped_file_queue,
    message_store,
    settings,
)
from store_testing import Q0, ROOT, MemoryStore, T, abandon, read, request, tiny_settings


def _segment_path(offset: int, store: message_store.MessageStore) -> pathlib.Path:
    size = store.settings.commit_log_file_size_bytes
    return ROOT / "commitlog" / mapped_file.file_name_of(offset - offset % size)


def _corrupt_body(mem: MemoryStore, result: PutMessageResult) -> None:
    """Flip one byte in the body of a stored record, behind the store's back."""
    size = mem.config.commit_log_file_size_bytes
    position = result.commit_log_offset % size + 88  # first body byte (IPv4 hosts)
    path = _segment_path(result.commit_log_offset, mem.store)
    old = mem.layer.read_durable(path, position, 1)
    mem.layer.overwrite(path, position, bytes([old[0] ^ 0xFF]))


def _fill(mem: MemoryStore, count: int, *, start: int = 0) -> list[PutMessageResult]:
    results = mem.store.put_messages_sync(
        [request(body=bytes([65 + (i % 26)]) * 150, keys=f"k{i}") for i in range(start, count)]
    )
    assert all(r.status is PutMessageStatus.PUT_OK for r in results)
    return results


def _crash_scenario(
    check_crc: bool, *, slave: bool = False
) -> tuple[MemoryStore, list[PutMessageResult]]:
    mem = MemoryStore.open(tiny_settings(check_crc_on_recover=check_crc, repair_from_master=slave))
    results = _fill(mem, 10)
    mem.store.commit_log.flush()
    mem.store.checkpoint_now()
    results += _fill(mem, 15, start=10)
    abandon(mem.store)  # process dies: the page cache keeps every written byte
    _corrupt_body(mem, results[11])
    mem.reopen()
    return mem, results


def test_a_slaves_unclean_recovery_keeps_a_corrupt_body_with_sound_records_after() -> None:
    """On a slave's store the CRC scan finds the corrupt record and, sound records following it,
    keeps it as damaged with every record after it (its master may hold the same damaged
    bytes: a cut there lost the rest at a promotion); reads of it answer CORRUPT and appends go
    after the last record. A master does the same: ``test_store_recovery_damaged``."""
    mem, results = _crash_scenario(check_crc=True, slave=True)
    store = mem.store
    report = store.recovery_report
    end = results[-1].commit_log_offset + results[-1].wrote_bytes
    assert not report.clean and report.valid_end_offset == end
    assert report.damaged_offsets == (results[11].commit_log_offset,)
    assert store.max_commit_log_offset == end
    assert store.get_message(results[11].commit_log_offset).status is LookupStatus.CORRUPT
    for r in results[:11] + results[12:]:
        assert store.get_message(r.commit_log_offset).status is LookupStatus.FOUND
    assert store.max_queue_offset(T, Q0) == 15
    got = read(store, 0, max_count=100, max_bytes=1 << 20)
    assert [m.commit_log_offset for m in got.messages] == [
        r.commit_log_offset for r in results[:11]
    ]
    new = store.put_message(request(body=b"after"))
    assert (new.commit_log_offset, new.queue_offset) == (end, 15)


def test_without_the_crc_check_the_garbage_stays_and_appends_land_after_it() -> None:
    """Same crash (on a slave's store) with check_crc_on_recover off: the corrupt record is kept
    (only reads catch it).

    This is the control for the test above: it shows the CRC check is what finds the damage.
    """
    mem, results = _crash_scenario(check_crc=False, slave=True)
    store = mem.store
    end = results[-1].commit_log_offset + results[-1].wrote_bytes
    assert store.recovery_report.valid_end_offset == end
    assert store.get_message(results[11].commit_log_offset).status is LookupStatus.CORRUPT
    new = store.put_message(request(body=b"after"))
    assert new.commit_log_offset == end and new.queue_offset == 15
    got = read(store, 0, max_count=100, max_bytes=1 << 20)
    assert results[11].commit_log_offset not in {m.commit_log_offset for m in got.messages}
    assert store.stats().corrupt_read_count >= 1


def test_clean_restart_reads_no_records() -> None:
    """After close(), open trusts the checkpoint and rescans nothing: a bad body older than the
    newest three segments (the only ones CRC-checked on a clean start) goes unseen.

    The same files opened as after a crash without a checkpoint are fully scanned: a master
    keeps the damaged record (sound ones follow it), and so does a slave's store.
    """
    mem = MemoryStore.open()
    results = _fill(mem, 40)
    assert len(mem.store.commit_log_segments()) >= 3
    mem.store.close()
    _corrupt_body(mem, results[2])
    store = mem.reopen()
    assert store.recovery_report.clean
    assert store.recovery_report.scanned_records == 0
    assert store.stats().recovery_scanned_records == 0
    assert store.max_commit_log_offset == results[-1].commit_log_offset + results[-1].wrote_bytes
    assert store.get_message(results[2].commit_log_offset).status is LookupStatus.CORRUPT
    assert store.get_message(results[30].commit_log_offset).status is LookupStatus.FOUND
    assert store.max_queue_offset(T, Q0) == 40
    store.close()
    checkpoint.create_abort_marker(mem.layer, ROOT / "abort")
    mem.layer.remove(ROOT / "checkpoint")
    scanned = mem.reopen()
    assert not scanned.recovery_report.clean
    assert scanned.recovery_report.scanned_records == 40
    assert scanned.recovery_report.damaged_offsets == (results[2].commit_log_offset,)
    assert scanned.max_queue_offset(T, Q0) == 40
    abandon(scanned)
    mem.layer.remove(ROOT / "checkpoint")
    slave = mem.reopen(tiny_settings(repair_from_master=True))
    assert slave.recovery_report.valid_end_offset == scanned.max_commit_log_offset
    assert slave.recovery_report.damaged_offsets == (results[2].commit_log_offset,)
    assert slave.max_queue_offset(T, Q0) == 40


def test_power_loss_keeps_flushed_messages_and_cuts_a_torn_record() -> None:
    """Unsynced bytes vanish except a torn prefix; recovery ends at the last whole record."""
    mem = MemoryStore.open()
    durable = _fill(mem, 8)
    mem.store.commit_log.flush()
    mem.store.checkpoint_now()
    lost = _fill(mem, 12, start=8)
    torn_keep = lost[1].commit_log_offset - lost[0].commit_log_offset + 40
    mem.crash(tear=lambda path, low, high: torn_keep if "commitlog" in str(path) else 0)
    store = mem.reopen()
    assert store.max_commit_log_offset == lost[1].commit_log_offset
    for r in [*durable, lost[0]]:
        assert store.get_message(r.commit_log_offset).status is LookupStatus.FOUND
    assert store.get_message(lost[1].commit_log_offset).status is LookupStatus.NOT_FOUND
    assert store.max_queue_offset(T, Q0) == 9
    assert store.put_message(request()).queue_offset == 9


def test_consume_queues_and_key_index_are_rebuilt_from_the_checkpoint() -> None:
    """Units and index entries lost with unsynced ConsumeQueue and index files are re-dispatched
    from the CommitLog: every key is found again, at its message."""
    mem = MemoryStore.open()
    first = _fill(mem, 5)
    mem.store.commit_log.flush()
    mem.store.checkpoint_now()
    second = _fill(mem, 20, start=5)
    mem.store.commit_log.flush()  # CommitLog durable; ConsumeQueue, index, checkpoint not
    mem.crash()
    store = mem.reopen()
    assert store.recovery_report.redispatched_records == 15
    for i, result in enumerate(first + second):
        assert mem.query_key(f"T#k{i}") == [result.commit_log_offset]
    got = read(store, 0, max_count=100, max_bytes=1 << 20)
    assert [m.commit_log_offset for m in got.messages] == [
        r.commit_log_offset for r in first + second
    ]
    assert [m.queue_offset for m in got.messages] == list(range(20))


def test_checkpoint_survives_a_torn_slot() -> None:
    """A torn checkpoint write spoils one slot; the other (older) slot is still read."""
    mem = MemoryStore.open()
    file = checkpoint.CheckpointFile(mem.layer, ROOT / "cp-test")
    file.write(checkpoint.Checkpoint(flushed_commit_log_offset=100))
    file.write(checkpoint.Checkpoint(flushed_commit_log_offset=200))
    assert file.load() == checkpoint.Checkpoint(flushed_commit_log_offset=200)
    mem.layer.overwrite(ROOT / "cp-test", checkpoint.SLOT_POSITIONS[0] + 20, b"\xff")
    reread = checkpoint.CheckpointFile(mem.layer, ROOT / "cp-test")
    assert reread.load() == checkpoint.Checkpoint(flushed_commit_log_offset=100)
    mem.layer.overwrite(ROOT / "cp-test", checkpoint.SLOT_POSITIONS[1] + 20, b"\xff")
    assert checkpoint.CheckpointFile(mem.layer, ROOT / "cp-test").load() is None


def test_data_past_a_clean_checkpoint_forces_a_scan() -> None:
    """If bytes follow the checkpointed end after a 'clean' stop, recovery rescans instead."""
    mem = MemoryStore.open()
    _fill(mem, 5)
    mem.store.close()
    stale = checkpoint.CheckpointFile(mem.layer, ROOT / "checkpoint")
    saved = stale.load()
    assert saved is not None
    stale.write(
        checkpoint.Checkpoint(flushed_commit_log_offset=300, dispatched_commit_log_offset=300)
    )
    store = mem.reopen()
    assert not store.recovery_report.clean
    assert store.max_commit_log_offset == saved.flushed_commit_log_offset
    assert store.max_queue_offset(T, Q0) == 5


def test_recovery_scan_is_bounded_by_max_recovery_files() -> None:
    """Without a checkpoint, only the newest max_recovery_commit_log_files segments are scanned."""
    mem = MemoryStore.open(tiny_settings(max_recovery_commit_log_files=2))
    _fill(mem, 60)
    abandon(mem.store)
    mem.layer.remove(ROOT / "checkpoint")
    store = mem.reopen()
    segments = store.commit_log_segments()
    assert store.recovery_report.scan_start_offset == segments[-2].start_offset
    assert store.max_queue_offset(T, Q0) == 60


def test_reput_service_rebuilds_consume_queues_behind_the_checkpoint() -> None:
    """With ConsumeQueues gone and a dispatched offset of 0, open re-dispatches every record."""
    mem = MemoryStore.open()
    results = _fill(mem, 30)
    end = mem.store.max_commit_log_offset
    mem.store.close()
    for path in [p for p in mem.layer.files if "consumequeue" in str(p)]:
        mem.layer.remove(path)
    file = checkpoint.CheckpointFile(mem.layer, ROOT / "checkpoint")
    assert file.load() is not None  # continue its sequence so the new slot wins
    file.write(checkpoint.Checkpoint(flushed_commit_log_offset=end, dispatched_commit_log_offset=0))
    store = mem.reopen()
    assert store.recovery_report.clean
    assert store.stats().dispatch_behind_bytes == 0
    got = read(store, 0, max_count=100, max_bytes=1 << 20)
    assert [m.commit_log_offset for m in got.messages] == [r.commit_log_offset for r in results]
    store._reput.start()
    store._reput.stop()


MIB = 1024 * 1024


def _big_record_settings() -> settings.StoreSettings:
    """Production record limits (4 MiB bodies, 8 MiB write buffer) on 16 MiB segments."""
    return tiny_settings(
        commit_log_file_size_bytes=16 * MIB,
        message_size_bytes_max=limits.MESSAGE_SIZE_BYTES_MAX,
        write_buffer_bytes=8 * MIB,
        flush_disk_type=settings.FlushDiskType.SYNC_FLUSH,
    )


def test_records_longer_than_the_scan_window_survive_an_unclean_restart() -> None:
    """Issue 9 item 1: 1 small, two 2 MiB, 100 small acknowledged messages all survive a kill.

    The second 2 MiB record starts where the first one's read window ends, which made the
    1 MiB scan window judge it truncated and cut the log (and every later message) there.
    """
    mem = MemoryStore.open(_big_record_settings())
    rng = random.Random(9)
    bodies = [b"first", rng.randbytes(2 * MIB), rng.randbytes(2 * MIB)]
    bodies += [f"small-{i}".encode() for i in range(100)]
    results = [mem.store.put_message(request(body=body)) for body in bodies]
    assert [r.status for r in results] == [PutMessageStatus.PUT_OK] * len(results)
    end = results[-1].commit_log_offset + results[-1].wrote_bytes
    assert mem.store.commit_log.flushed_offset == end
    abandon(mem.store)  # SIGKILL: every acknowledged (synced) byte is on disk
    store = mem.reopen()
    assert not store.recovery_report.clean
    assert store.recovery_report.stop_reason == ""
    assert store.max_commit_log_offset == end
    assert store.max_queue_offset(T, Q0) == len(bodies)
    got = read(store, 0, max_count=len(bodies), max_bytes=16 * MIB)
    assert [m.body for m in got.messages] == bodies


class _CountingHandle:
    """A file handle that counts the bytes read through it."""

    def __init__(self, handle: file_layer.RandomAccessFile, layer: _CountingLayer) -> None:
        self._handle = handle
        self._layer = layer

    def pwrite(self, data: bytes | bytearray | memoryview, position: int) -> None:
        self._handle.pwrite(data, position)

    def pread(self, size: int, position: int) -> bytes:
        data = self._handle.pread(size, position)
        self._layer.read_bytes += len(data)
        return data

    def sync(self) -> None:
        self._handle.sync()

    def close(self) -> None:
        self._handle.close()


class _CountingLayer(file_layer.OsFileLayer):
    """The real file layer, counting every byte read (the cost recovery pays)."""

    def __init__(self) -> None:
        self.read_bytes = 0

    def open_file(self, path: pathlib.Path) -> file_layer.RandomAccessFile:
        return _CountingHandle(super().open_file(path), self)

    def create_file(self, path: pathlib.Path, size_bytes: int) -> file_layer.RandomAccessFile:
        return _CountingHandle(super().create_file(path, size_bytes), self)


def test_recovery_reads_in_proportion_to_the_data_not_the_1_gib_segment(
    tmp_path: pathlib.Path,
) -> None:
    """Issue 9 item 5: an unclean restart of a few MiB in a 1 GiB segment reads a few MiB.

    The torn tail is zeroed only up to the CommitLog's high-water mark, not to the end of the
    preallocated segment (which cost reading the whole 1 GiB).
    """
    # The flush timeout is generous: this test is about what recovery reads, and the first
    # fsyncs into a fresh 1 GiB segment can take seconds on a loaded machine.
    config = settings.StoreSettings(
        flush_disk_type=settings.FlushDiskType.SYNC_FLUSH, sync_flush_timeout_ms=60_000
    )
    layer = _CountingLayer()
    store = message_store.MessageStore.open(
        tmp_path, config, clock=clock.SystemClock(), layer=layer
    )
    results = store.put_messages_sync([request(body=bytes([i]) * 100_000) for i in range(40)])
    assert [r.status for r in results] == [PutMessageStatus.PUT_OK] * len(results)
    end = results[-1].commit_log_offset + results[-1].wrote_bytes
    abandon(store)
    store.commit_log.log.close()
    _tear_last_record(tmp_path / "commitlog" / mapped_file.file_name_of(0), results[-1])
    layer.read_bytes = 0
    store = message_store.MessageStore.open(
        tmp_path, config, clock=clock.SystemClock(), layer=layer
    )
    try:
        assert store.max_commit_log_offset == results[-1].commit_log_offset < end
        assert layer.read_bytes < end + high_water.HIGH_WATER_STEP_BYTES + 2 * MIB
        assert layer.read_bytes < config.commit_log_file_size_bytes // 16
    finally:
        store.close()


def _tear_last_record(path: pathlib.Path, last: PutMessageResult) -> None:
    """Zero the second half of the last record, as a write torn by the crash leaves it."""
    with path.open("r+b") as file:
        file.seek(last.commit_log_offset + last.wrote_bytes // 2)
        file.write(bytes(last.wrote_bytes - last.wrote_bytes // 2))


def test_recovery_cuts_the_key_index_with_the_commit_log() -> None:
    """After recovery cuts a corrupt tail (a damaged last record, no sound one after it), key
    queries answer exactly the live messages: the keys of cut records find nothing, and
    messages written at the reused offsets are found."""
    mem = MemoryStore.open(tiny_settings(repair_from_master=True))
    old = mem.store.put_messages_sync([request(keys=f"old{i}") for i in range(10)])
    abandon(mem.store)  # the process dies; the page cache (index entries included) survives
    _corrupt_body(mem, old[9])
    store = mem.reopen()
    assert store.max_commit_log_offset == old[9].commit_log_offset
    assert store.key_index.max_commit_log_offset == old[8].commit_log_offset
    new = store.put_messages_sync([request(keys=f"new{i}") for i in range(3)])
    assert new[0].commit_log_offset == old[9].commit_log_offset  # offsets are reused
    for i in range(9):
        assert mem.query_key(f"T#old{i}") == [old[i].commit_log_offset]
    for i in range(9, 10):
        assert store.key_index.query(f"T#old{i}", max_count=10, begin_ms=0, end_ms=2**62) == []
    for i in range(3):
        assert mem.query_key(f"T#new{i}") == [new[i].commit_log_offset]


def test_a_clean_start_finds_a_bit_flip_in_the_newest_segments_and_only_a_slave_cuts() -> None:
    """Proves a bit flip in the newest three segments is found on a clean start: a slave's
    store (``repair_from_master``) cuts there for its master to refill, a master's keeps every
    record and answers
    CORRUPT for the damaged one, never its bytes: a queue read stops before it
    (RECORD_CORRUPTED at its offset when nothing precedes it), so a consumer never skips it;
    without a slave to ask, the record is counted once as unrepairable."""
    mem = MemoryStore.open()
    results = _fill(mem, 40)
    mem.store.close()
    _corrupt_body(mem, results[-5])
    master = mem.reopen()
    assert master.max_commit_log_offset == results[-1].commit_log_offset + results[-1].wrote_bytes
    assert master.get_message(results[-5].commit_log_offset).status is LookupStatus.CORRUPT
    got = read(master, 30)
    assert [m.queue_offset for m in got.messages] == [*range(30, 35)]
    assert got.next_begin_offset == 35
    stuck = read(master, 35)
    assert (stuck.status, stuck.messages, stuck.next_begin_offset) == (
        message_store.GetMessageStatus.RECORD_CORRUPTED,
        (),
        35,
    )
    stats = master.stats()
    assert (stats.repair_unavailable_count, stats.repaired_record_count) == (1, 0)
    master.close()
    slave = mem.reopen(tiny_settings(repair_from_master=True))
    assert not slave.recovery_report.clean
    assert slave.max_commit_log_offset == results[-5].commit_log_offset
    assert slave.max_queue_offset(T, Q0) == 35
    slave.close()


def test_a_truncated_newest_segment_is_padded_on_a_slave_and_refused_on_a_master(
    tmp_path: pathlib.Path,
) -> None:
    """Proves a newest CommitLog segment cut short mid-record stops a master's store from
    opening (StoreLayoutError, as RocketMQ) while a slave's pads it, rescans and keeps every
    record before the cut."""
    config = tiny_settings()
    store = message_store.MessageStore.open(tmp_path, config, clock=clock.SystemClock())
    results = store.put_messages_sync([request(body=bytes(150)) for _ in range(20)])
    store.close()
    victim = results[-3]
    size = config.commit_log_file_size_bytes
    segment = (
        tmp_path / "commitlog" / mapped_file.file_name_of(victim.commit_log_offset // size * size)
    )
    assert segment == max(p for p in (tmp_path / "commitlog").iterdir() if p.name.isdigit())
    with segment.open("r+b") as handle:
        handle.truncate(victim.commit_log_offset % size + 40)
    with pytest.raises(mapped_file_queue.StoreLayoutError, match="bytes"):
        message_store.MessageStore.open(tmp_path, config, clock=clock.SystemClock())
    slave_config = tiny_settings(repair_from_master=True)
    slave = message_store.MessageStore.open(tmp_path, slave_config, clock=clock.SystemClock())
    try:
        assert segment.stat().st_size == size
        assert slave.max_commit_log_offset == victim.commit_log_offset
        assert slave.max_queue_offset(T, Q0) == 17
        assert all(m.body == bytes(150) for m in read(slave, 0).messages)
    finally:
        slave.close()
