"""Unclean recovery keeps a master's damaged CommitLog record (a bit flip inside the log) with
every record after it, for repair from a slave, and cuts only a torn tail; bytes past a cut are
zeroed, so no later recovery reads old records back."""

from __future__ import annotations

import pathlib

from ariane.common import ids
from ariane.store import (
    LookupStatus,
    PutMessageResult,
    PutMessageStatus,
    mapped_file,
    message_store,
)
from store_testing import Q0, ROOT, MemoryStore, T, abandon, read, request, tiny_settings

COUNT = 30
"""Records written: about 13 per 2 KiB segment, so three segments."""


def _segment_path(offset: int, store: message_store.MessageStore) -> pathlib.Path:
    size = store.settings.commit_log_file_size_bytes
    return ROOT / "commitlog" / mapped_file.file_name_of(offset - offset % size)


def _flip_body(mem: MemoryStore, result: PutMessageResult) -> None:
    """Flip one bit in the body of a stored record, behind the store's back."""
    size = mem.config.commit_log_file_size_bytes
    position = result.commit_log_offset % size + 88 + 7  # a body byte (IPv4 hosts)
    path = _segment_path(result.commit_log_offset, mem.store)
    old = mem.layer.read_durable(path, position, 1)
    mem.layer.overwrite(path, position, bytes([old[0] ^ 0x10]))


def _fill(mem: MemoryStore, count: int, *, start: int = 0) -> list[PutMessageResult]:
    results = mem.store.put_messages_sync(
        [request(body=bytes([65 + (i % 26)]) * 100, keys=f"k{i}") for i in range(start, count)]
    )
    assert all(r.status is PutMessageStatus.PUT_OK for r in results)
    return results


def _end(results: list[PutMessageResult]) -> int:
    return results[-1].commit_log_offset + results[-1].wrote_bytes


def _record_bytes(mem: MemoryStore, result: PutMessageResult) -> bytes:
    size = mem.config.commit_log_file_size_bytes
    path = _segment_path(result.commit_log_offset, mem.store)
    return mem.layer.read_durable(path, result.commit_log_offset % size, result.wrote_bytes)


def test_a_bit_flip_inside_the_log_keeps_the_record_and_all_after_it_for_repair() -> None:
    """Proves a master's unclean recovery keeps a body-flipped record in the middle of the log
    and every acknowledged record after it (RocketMQ would cut there): the damaged one is
    reported, answers CORRUPT, stops its queue's reads, and once a slave's copy is applied the
    queue delivers every message once, in order."""
    mem = MemoryStore.open()
    results = _fill(mem, COUNT)
    mem.store.commit_log.flush()
    mem.store.checkpoint_now()
    sound = _record_bytes(mem, results[12])
    abandon(mem.store)  # the process dies: no clean-shutdown marker
    mem.layer.remove(ROOT / "checkpoint")  # and no checkpoint: the whole log is rescanned
    _flip_body(mem, results[12])
    store = mem.reopen()
    report = store.recovery_report
    assert not report.clean
    assert store.max_commit_log_offset == _end(results)
    assert report.valid_end_offset == _end(results)
    assert report.damaged_offsets == (results[12].commit_log_offset,)
    assert store.get_message(results[12].commit_log_offset).status is LookupStatus.CORRUPT
    for r in results[:12] + results[13:]:
        assert store.get_message(r.commit_log_offset).status is LookupStatus.FOUND
    assert store.max_queue_offset(T, Q0) == COUNT
    before = read(store, 0)
    assert [m.queue_offset for m in before.messages] == [*range(12)]
    stuck = read(store, 12)
    assert (stuck.status, stuck.messages, stuck.next_begin_offset) == (
        message_store.GetMessageStatus.RECORD_CORRUPTED,
        (),
        12,
    )
    assert [m.queue_offset for m in read(store, 13).messages] == [*range(13, COUNT)]
    _repair(store, results[12].commit_log_offset, sound)
    got = read(store, 0)
    assert [m.queue_offset for m in got.messages] == [*range(COUNT)]
    assert store.put_message(request(body=b"after")).queue_offset == COUNT


def test_a_flipped_last_record_below_the_flushed_offset_is_kept() -> None:
    """Proves a damaged record with no record after it is kept when the checkpoint says it was
    flushed (only a flip, never a torn write, changes synced bytes)."""
    mem = MemoryStore.open()
    results = _fill(mem, COUNT)
    mem.store.commit_log.flush()
    mem.store.checkpoint_now()
    abandon(mem.store)
    _flip_body(mem, results[-1])
    store = mem.reopen()
    assert store.max_commit_log_offset == _end(results)
    assert store.recovery_report.damaged_offsets == (results[-1].commit_log_offset,)
    assert store.get_message(results[-1].commit_log_offset).status is LookupStatus.CORRUPT
    assert store.put_message(request(body=b"after")).commit_log_offset == _end(results)


def test_a_damaged_tail_past_the_flushed_offset_is_cut_as_torn() -> None:
    """Proves damaged records past the checkpoint's flushed offset with no sound record after
    them are a torn tail and cut, as before: nothing written later can vouch for them."""
    mem = MemoryStore.open()
    results = _fill(mem, 20)
    mem.store.commit_log.flush()
    mem.store.checkpoint_now()
    results += _fill(mem, 24, start=20)
    abandon(mem.store)
    _flip_body(mem, results[22])
    _flip_body(mem, results[23])
    store = mem.reopen()
    assert store.max_commit_log_offset == results[22].commit_log_offset
    assert store.recovery_report.damaged_offsets == ()
    assert "torn tail" in store.recovery_report.stop_reason
    assert store.max_queue_offset(T, Q0) == 22
    assert store.put_message(request(body=b"after")).queue_offset == 22


def _flip_topic(mem: MemoryStore, result: PutMessageResult) -> None:
    """Flip one bit of the topic of a stored record (written by ``_fill``: 100-byte body)."""
    size = mem.config.commit_log_file_size_bytes
    position = result.commit_log_offset % size + 88 + 100 + 1  # TOPIC's first byte
    path = _segment_path(result.commit_log_offset, mem.store)
    old = mem.layer.read_durable(path, position, 1)
    assert old == b"T"
    mem.layer.overwrite(path, position, bytes([old[0] ^ 0x01]))


def _repair(store: message_store.MessageStore, offset: int, sound: bytes) -> None:
    """Play an in-sync slave: a read meets the damaged record and asks for it; answer."""
    asked: list[int] = []

    def fetch(at: int) -> bool:
        asked.append(at)
        return True

    store.repairs.fetcher = fetch
    assert store.get_message(ids.CommitLogOffset(offset)).status is LookupStatus.CORRUPT
    assert asked == [offset]
    assert store.repairs.apply(offset, sound)


def test_a_damaged_topic_is_kept_and_its_unit_placed_in_its_queues_gap() -> None:
    """Proves a record whose topic bit flipped (its header untrustworthy: record CRC fails),
    met where everything is dispatched again (no checkpoint), is kept with every record after
    it and gets the unit its queue's later records leave a gap for: its queue stops at it until
    it is repaired, then delivers every message in order."""
    mem = MemoryStore.open()
    results = _fill(mem, COUNT)
    mem.store.commit_log.flush()
    sound = _record_bytes(mem, results[12])
    abandon(mem.store)
    mem.layer.remove(ROOT / "checkpoint")
    _flip_topic(mem, results[12])
    store = mem.reopen()
    assert store.recovery_report.damaged_offsets == (results[12].commit_log_offset,)
    assert store.max_commit_log_offset == _end(results)
    assert store.max_queue_offset(T, Q0) == COUNT
    assert read(store, 12).status is message_store.GetMessageStatus.RECORD_CORRUPTED
    _repair(store, results[12].commit_log_offset, sound)
    assert [m.queue_offset for m in read(store, 0).messages] == [*range(COUNT)]


def test_a_damaged_topic_of_a_queues_last_record_is_placed_at_its_queue_end() -> None:
    """Proves a topic-flipped record that is the last of its queue (no gap after it), followed
    by another queue's record, is kept and placed at the end of the queue whose id and next
    offset it claims, and the other queue's record is kept too."""
    mem = MemoryStore.open()
    results = _fill(mem, 20)
    other = mem.store.put_message(request(body=b"other", queue_id=1))
    mem.store.commit_log.flush()
    sound = _record_bytes(mem, results[19])
    abandon(mem.store)
    mem.layer.remove(ROOT / "checkpoint")
    _flip_topic(mem, results[19])
    store = mem.reopen()
    assert store.recovery_report.damaged_offsets == (results[19].commit_log_offset,)
    assert store.max_commit_log_offset == other.commit_log_offset + other.wrote_bytes
    assert [m.body for m in read(store, 0, queue_id=1).messages] == [b"other"]
    assert store.max_queue_offset(T, Q0) == 20
    _repair(store, results[19].commit_log_offset, sound)
    assert [m.queue_offset for m in read(store, 0).messages] == [*range(20)]
    assert store.put_message(request(body=b"after")).queue_offset == 20


def test_a_slave_keeps_a_damaged_record_and_the_sound_ones_after_it() -> None:
    """Proves a slave's store (``repair_from_master``) keeps a whole damaged record followed by
    sound ones across an unclean recovery, as a master does (before: it cut there, and when the
    master's own copy was the damaged one, a promotion then lost every record after it)."""
    mem = MemoryStore.open(tiny_settings(repair_from_master=True))
    results = _fill(mem, COUNT)
    abandon(mem.store)
    _flip_body(mem, results[12])
    store = mem.reopen()
    assert store.max_commit_log_offset == _end(results)
    assert store.recovery_report.damaged_offsets == (results[12].commit_log_offset,)
    assert store.get_message(results[12].commit_log_offset).status is LookupStatus.CORRUPT
    for r in results[:12] + results[13:]:
        assert store.get_message(r.commit_log_offset).status is LookupStatus.FOUND
    assert store.max_queue_offset(T, Q0) == COUNT


def test_bytes_past_a_cut_are_zeroed_so_no_old_record_comes_back() -> None:
    """Proves a cut (a replica's diverged tail) zeroes the old records past it: when a record
    then written at the cut is damaged before the next unclean stop, the old records that sat
    after it are not read back as records that vouch for it (it is cut as a torn tail)."""
    mem = MemoryStore.open()
    old = _fill(mem, COUNT)
    mem.store.commit_log.flush()
    mem.store.checkpoint_now()
    mem.store.truncate_replica(old[12].commit_log_offset)
    new = _fill(mem, 13, start=12)  # the same size as old[12]: old[13] would line up after it
    assert (new[0].commit_log_offset, new[0].wrote_bytes) == (
        old[12].commit_log_offset,
        old[12].wrote_bytes,
    )
    abandon(mem.store)
    _flip_body(mem, new[0])
    store = mem.reopen()
    assert store.max_commit_log_offset == old[12].commit_log_offset
    for r in old[13:]:
        assert store.get_message(r.commit_log_offset).status is LookupStatus.NOT_FOUND
    assert store.max_queue_offset(T, Q0) == 12
