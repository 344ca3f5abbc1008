"""A replica's reput meets a whole damaged record whose header fields can no longer be trusted (a
bit flipped in its TOPIC or QUEUEID, so its record CRC fails), streamed verbatim from a master
whose own copy is the damaged one: the reput dispatches every record after it, the damaged one
gets the unit its master gave it when the queues tell which one that is (else its possible
places are reserved, so no queue offset is ever given twice), reads of it answer CORRUPT, and a
promotion serves the later records at the master's queue offsets and continues each queue after
them. Before: the reput stopped at such a record (its claimed queue was not where it could be
placed), the records after it were never dispatched, and a promotion kept them undispatched
and gave their queue offsets to new messages (issue 25's residual).

Recovery follows the same rule (``store.record_scan``): a master's unclean recovery meeting a
damaged record it cannot place keeps it, reserving its possible queue offsets (before: the valid
data ended there).

Own stores: a master's CommitLog bytes, damaged, streamed to a replica store in process in
frames that end at any byte, as the HA stream does (and an in-memory store for recovery).
"""

from __future__ import annotations

import logging
import pathlib

import pytest

import store_testing
from ariane.broker.services import replication
from ariane.common import clock, ids
from ariane.store import (
    LookupStatus,
    PutMessageResult,
    PutMessageStatus,
    mapped_file,
    message_store,
)
from store_testing import read, request, tiny_settings

SEGMENT_BYTES = 64 * 1024
"""One segment holds every record of a test: frames never cross a segment end."""
FRAME_BYTES = 500
"""HA frame size: frames end inside records."""
FIXED_BYTES = 88
"""The fixed part of a record with IPv4 hosts: BODY starts there."""
QUEUE_ID_LOW_BYTE = 15
"""The low byte of QUEUEID (TOTALSIZE 4, MAGICCODE 4, BODYCRC 4, QUEUEID 4, big-endian)."""


def _store(root: pathlib.Path) -> message_store.MessageStore:
    config = tiny_settings(commit_log_file_size_bytes=SEGMENT_BYTES, message_size_bytes_max=4096)
    return message_store.MessageStore.open(root, config, clock=clock.ManualClock(start_ms=1))


def _put(store: message_store.MessageStore, body: bytes, queue_id: int = 0) -> PutMessageResult:
    result = store.put_message(request(body=body, queue_id=queue_id))
    assert result.status is PutMessageStatus.PUT_OK
    return result


def _flip_topic(data: bytearray, result: PutMessageResult, body_bytes: int) -> None:
    """Flip a bit of TOPIC's first byte (V1 layout: a 1-byte topic length after BODY): T → U."""
    at = result.commit_log_offset + FIXED_BYTES + body_bytes + 1
    assert data[at : at + 1] == b"T"
    data[at] ^= 0x01


def _stream(replica: message_store.MessageStore, data: bytearray, start: int, end: int) -> None:
    """Append ``data[start:end]`` as the HA stream does, in frames ending at any byte."""
    for at in range(start, end, FRAME_BYTES):
        replica.append_replicated(
            ids.CommitLogOffset(at), bytes(data[at : min(end, at + FRAME_BYTES)])
        )


def _master_bytes(root: pathlib.Path, end: int) -> bytearray:
    return bytearray((root / "commitlog" / f"{0:020d}").read_bytes()[:end])


def _bodies(
    store: message_store.MessageStore, offset: int, queue_id: int = 0
) -> list[tuple[int, bytes]]:
    return [(m.queue_offset, m.body) for m in read(store, offset, queue_id=queue_id).messages]


def test_a_replica_dispatches_past_a_topic_flipped_record_and_a_promotion_keeps_offsets(
    tmp_path: pathlib.Path,
) -> None:
    """Proves a replica receiving ten records of one queue, the fifth with a flipped TOPIC bit,
    dispatches all ten (the damaged one at its master's queue offset 4, read as CORRUPT) and,
    once promoted, serves the five after it at queue offsets 5-9 and stores its own next
    message at 10 (before: the reput stopped at 4 and the promotion gave 4 to the new one)."""
    master = _store(tmp_path / "master")
    replica = _store(tmp_path / "replica")
    try:
        put = [_put(master, f"m{n}".encode() * 20) for n in range(10)]
        data = _master_bytes(tmp_path / "master", master.max_commit_log_offset)
        _flip_topic(data, put[4], 40)
        _stream(replica, data, 0, len(data))

        assert replica.dispatcher.dispatched_offset == len(data)
        assert replica.max_queue_offset(ids.TopicName("T"), ids.QueueId(0)) == 10
        assert replica.get_message(put[4].commit_log_offset).status is LookupStatus.CORRUPT
        stuck = read(replica, 4)
        assert stuck.status is message_store.GetMessageStatus.RECORD_CORRUPTED
        wanted = [(n, f"m{n}".encode() * 20) for n in range(5, 10)]
        assert _bodies(replica, 5) == wanted

        replica.adopt_replicated_queue_offsets()
        assert replication.cut_partial_record(replica) is None
        mine = replica.put_message(request(body=b"written-as-master"))
        assert (mine.status, mine.queue_offset) == (PutMessageStatus.PUT_OK, 10)
        assert _bodies(replica, 5) == [*wanted, (10, b"written-as-master")]
    finally:
        master.close()
        replica.close()


def test_a_topic_flipped_last_record_of_its_queue_keeps_its_offset_across_a_promotion(
    tmp_path: pathlib.Path,
) -> None:
    """Proves a replica whose damaged record (TOPIC flipped) is its queue's last, followed by
    another queue's record, dispatches both, and once promoted gives its next message in the
    damaged record's queue the offset after it (before: the reput stopped, the other queue's
    record was never dispatched, and the new message reused the damaged record's offset)."""
    master = _store(tmp_path / "master")
    replica = _store(tmp_path / "replica")
    try:
        put = [_put(master, f"a{n}".encode() * 20) for n in range(6)]
        other = _put(master, b"b0" * 20, queue_id=1)
        data = _master_bytes(tmp_path / "master", master.max_commit_log_offset)
        _flip_topic(data, put[5], 40)
        _stream(replica, data, 0, len(data))

        assert _bodies(replica, 0, queue_id=1) == [(0, b"b0" * 20)]
        assert replica.max_queue_offset(ids.TopicName("T"), ids.QueueId(0)) == 6
        assert other.queue_offset == 0
        replica.adopt_replicated_queue_offsets()
        assert replication.cut_partial_record(replica) is None
        mine = replica.put_message(request(body=b"written-as-master"))
        assert mine.queue_offset == 6
    finally:
        master.close()
        replica.close()


def test_a_queue_id_flip_with_several_possible_queues_reserves_them_until_later_records_tell(
    tmp_path: pathlib.Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Proves a record whose QUEUEID flipped (0 → 2) when queues 0, 1 and 3 all await the queue
    offset it claims is passed by the reput at once (its possible slots reserved), and the
    records that follow give each queue its master's offsets: queue 0's next record at 3 shows
    the damaged record was its 2 (read as CORRUPT), queues 1 and 3 take their own 2; a promotion
    then continues every queue after its master's last offset; the reput's expected waits at a
    partial record are not logged as errors."""
    master = _store(tmp_path / "master")
    replica = _store(tmp_path / "replica")
    try:
        for n in range(2):
            for queue_id in (0, 1, 3):
                _put(master, f"q{queue_id}-{n}".encode() * 10, queue_id)
        damaged = _put(master, b"q0-2" * 10, 0)
        vouch = master.put_message(request(topic="U", body=b"other topic"))
        first_end = master.max_commit_log_offset
        later = [_put(master, f"q{q}-{n}".encode() * 10, q) for q, n in [(1, 2), (3, 2), (0, 3)]]
        data = _master_bytes(tmp_path / "master", master.max_commit_log_offset)
        at = damaged.commit_log_offset + QUEUE_ID_LOW_BYTE
        assert data[at] == 0
        data[at] ^= 0x02

        with caplog.at_level(logging.INFO, logger="ariane.store"):
            _stream(replica, data, 0, first_end)
        assert replica.dispatcher.dispatched_offset == first_end
        assert vouch.status is PutMessageStatus.PUT_OK
        assert _bodies(replica, 0, queue_id=0) == [(0, b"q0-0" * 10), (1, b"q0-1" * 10)]
        assert not [
            r for r in caplog.records if r.levelno >= logging.ERROR and "reput" in r.message
        ]

        _stream(replica, data, first_end, len(data))
        assert replica.dispatcher.dispatched_offset == len(data)
        for queue_id in (1, 3):
            got = _bodies(replica, 0, queue_id=queue_id)
            assert got == [(n, f"q{queue_id}-{n}".encode() * 10) for n in range(3)]
        assert read(replica, 2).status is message_store.GetMessageStatus.RECORD_CORRUPTED
        assert _bodies(replica, 3) == [(3, b"q0-3" * 10)]
        assert [r.queue_offset for r in later] == [2, 2, 3]

        replica.adopt_replicated_queue_offsets()
        assert replication.cut_partial_record(replica) is None
        next_offsets = [
            replica.put_message(request(body=b"new", queue_id=q)).queue_offset for q in (0, 1, 3)
        ]
        assert next_offsets == [4, 3, 3]
    finally:
        master.close()
        replica.close()


def test_a_topic_flipped_to_non_utf8_is_still_a_whole_record_the_reput_passes(
    tmp_path: pathlib.Path,
) -> None:
    """Proves a record whose TOPIC's high bit flipped (no longer UTF-8) is still read as a
    whole damaged record, not a torn one: the replica dispatches past it at its master's
    queue offset (before: read as torn, the reput stopped there for good)."""
    master = _store(tmp_path / "master")
    replica = _store(tmp_path / "replica")
    try:
        put = [_put(master, f"m{n}".encode() * 20) for n in range(6)]
        data = _master_bytes(tmp_path / "master", master.max_commit_log_offset)
        at = put[2].commit_log_offset + FIXED_BYTES + 40 + 1
        assert data[at : at + 1] == b"T"
        data[at] ^= 0x80
        _stream(replica, data, 0, len(data))
        assert replica.max_queue_offset(ids.TopicName("T"), ids.QueueId(0)) == 6
        assert read(replica, 2).status is message_store.GetMessageStatus.RECORD_CORRUPTED
        assert _bodies(replica, 3) == [(n, f"m{n}".encode() * 20) for n in range(3, 6)]
    finally:
        master.close()
        replica.close()


def test_recovery_keeps_an_unplaceable_damaged_record_and_reserves_its_possible_offsets() -> None:
    """Proves a master's unclean recovery (no checkpoint: everything dispatched again) meeting
    a QUEUEID-flipped record that three queues could hold keeps it and every record after it,
    reserving the offset in each of them, so new messages never take the damaged record's
    queue offset (before: the valid data ended there, cutting the records after it)."""
    mem = store_testing.MemoryStore.open()
    store = mem.store
    for n in range(2):
        for queue_id in (0, 1, 3):
            _put(store, f"q{queue_id}-{n}".encode() * 10, queue_id)
    damaged = _put(store, b"q0-2" * 10, 0)
    other = store.put_message(request(topic="U", body=b"other topic"))
    end = other.commit_log_offset + other.wrote_bytes
    store.commit_log.flush()
    store_testing.abandon(store)
    mem.layer.remove(store_testing.ROOT / "checkpoint")
    size = mem.config.commit_log_file_size_bytes
    path = (
        store_testing.ROOT
        / "commitlog"
        / mapped_file.file_name_of(damaged.commit_log_offset - damaged.commit_log_offset % size)
    )
    position = damaged.commit_log_offset % size + QUEUE_ID_LOW_BYTE
    assert mem.layer.read_durable(path, position, 1) == b"\x00"
    mem.layer.overwrite(path, position, b"\x02")

    store = mem.reopen()
    assert store.max_commit_log_offset == end
    assert store.recovery_report.damaged_offsets == (damaged.commit_log_offset,)
    assert [m.body for m in read(store, 0, topic="U").messages] == [b"other topic"]
    assert store.get_message(damaged.commit_log_offset).status is LookupStatus.CORRUPT
    for queue_id in (0, 1, 3):
        assert store.put_message(request(body=b"new", queue_id=queue_id)).queue_offset == 3


def test_frames_ending_inside_records_are_normal_catch_up_not_errors(
    tmp_path: pathlib.Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Proves a replica fed sound records in frames that end inside records logs its reput's
    waits at DEBUG, once per offset, never as an error (before: an ERROR "reput stopped at
    ... truncated" for every such frame: 172 lines in a chaos run's slave log)."""
    master = _store(tmp_path / "master")
    replica = _store(tmp_path / "replica")
    try:
        for n in range(10):
            _put(master, f"m{n}".encode() * 20)
        data = _master_bytes(tmp_path / "master", master.max_commit_log_offset)
        with caplog.at_level(logging.DEBUG, logger="ariane.store.dispatcher"):
            for at in range(0, len(data), 50):  # several frames inside each record
                chunk = bytes(data[at : min(len(data), at + 50)])
                replica.append_replicated(ids.CommitLogOffset(at), chunk)
        assert replica.max_queue_offset(ids.TopicName("T"), ids.QueueId(0)) == 10
        waits = [r for r in caplog.records if r.name == "ariane.store.dispatcher"]
        assert waits and all(r.levelno == logging.DEBUG for r in waits)
        offsets = [r.args[0] for r in waits if isinstance(r.args, tuple)]
        assert len(set(offsets)) == len(offsets) == len(waits)  # once per offset
    finally:
        master.close()
        replica.close()


def test_a_record_whose_size_or_magic_flipped_stops_the_reput_with_one_error(
    tmp_path: pathlib.Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Proves a record that is no longer whole (its MAGICCODE flipped) inside the replicated
    data stops the reput there (its extent is unknown: nothing after it can be placed) with
    one ERROR however many frames arrive after it (before: one per frame)."""
    master = _store(tmp_path / "master")
    replica = _store(tmp_path / "replica")
    try:
        put = [_put(master, f"m{n}".encode() * 20) for n in range(10)]
        data = _master_bytes(tmp_path / "master", master.max_commit_log_offset)
        data[put[3].commit_log_offset + 5] ^= 0x04  # MAGICCODE
        with caplog.at_level(logging.DEBUG, logger="ariane.store.dispatcher"):
            _stream(replica, data, 0, len(data))
        assert replica.dispatcher.dispatched_offset == put[3].commit_log_offset
        errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
        assert [r.getMessage().split(":")[0] for r in errors] == [
            f"reput stopped at {put[3].commit_log_offset}"
        ]
    finally:
        master.close()
        replica.close()
