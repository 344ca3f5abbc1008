"""A slave promoted (``ReplicationService.promote``) while its CommitLog ends inside a record (the
HA stream is cut at any byte, not at record ends) cuts that partial record before it writes as
master (RocketMQ ``AutoSwitchHAService.changeToMaster`` → ``truncateInvalidMsg``): its own messages
are then stored after whole records and survive a restart, and its new epoch starts at a record
boundary. Found by the chaos run (issue 25 item 3): a slave promoted mid-record at 975,109 (a record
of 429 bytes from 974,866) acknowledged two SYNC_MASTER messages stored after the partial one; at
the next restart of either replica recovery met the partial record, read as corrupt, and cut the
CommitLog there: both messages gone from both replicas.

Own stores: a master's CommitLog files copied byte by byte into a replica store in process.
"""

from __future__ import annotations

import pathlib

from ariane.broker.services import replication
from ariane.common import clock, ids
from ariane.store import LookupStatus, PutMessageStatus, message_store
from store_testing import abandon, read, request, tiny_settings

SEGMENT_BYTES = 4096


def _store(root: pathlib.Path) -> message_store.MessageStore:
    config = tiny_settings(commit_log_file_size_bytes=SEGMENT_BYTES)
    return message_store.MessageStore.open(root, config, clock=clock.ManualClock(start_ms=1))


def test_a_slave_promoted_inside_a_record_cuts_it_and_serves_its_own_messages(
    tmp_path: pathlib.Path,
) -> None:
    """Proves a replica holding two whole records and half of a third, once promoted, ends its
    CommitLog at the second record's end, then stores and serves a new message at queue offset
    2, still there after a SIGKILL and restart (before: the new message sat behind the partial
    record, and the restart's recovery cut the log at that record, the new message with it)."""
    master = _store(tmp_path / "master")
    replica = _store(tmp_path / "replica")
    try:
        put = [master.put_message(request(body=f"m{n}".encode() * 20)) for n in range(3)]
        assert all(p.status is PutMessageStatus.PUT_OK for p in put)
        whole_end = put[2].commit_log_offset
        partial_end = whole_end + put[2].wrote_bytes // 2
        data = (tmp_path / "master" / "commitlog" / f"{0:020d}").read_bytes()[:partial_end]
        replica.append_replicated(ids.CommitLogOffset(0), data)
        assert replica.max_commit_log_offset == partial_end

        replica.adopt_replicated_queue_offsets()  # what ReplicationService.promote does first
        assert replication.cut_partial_record(replica) == whole_end
        assert replica.max_commit_log_offset == whole_end
        mine = replica.put_message(request(body=b"written-as-master"))
        assert mine.status is PutMessageStatus.PUT_OK
        assert (mine.commit_log_offset, mine.queue_offset) == (whole_end, 2)
        wanted = [b"m0" * 20, b"m1" * 20, b"written-as-master"]
        assert [m.body for m in read(replica).messages] == wanted
        abandon(replica)  # SIGKILLed: the restart's recovery scans the whole CommitLog
        replica = _store(tmp_path / "replica")
        assert [m.body for m in read(replica).messages] == wanted
    finally:
        master.close()
        replica.close()


def test_a_slave_promoted_at_a_record_boundary_cuts_nothing(tmp_path: pathlib.Path) -> None:
    """Proves a replica whose CommitLog ends where a record ends keeps every byte when promoted
    (the cut never reaches into whole records)."""
    master = _store(tmp_path / "master")
    replica = _store(tmp_path / "replica")
    try:
        for n in range(3):
            master.put_message(request(body=f"m{n}".encode()))
        end = master.max_commit_log_offset
        data = (tmp_path / "master" / "commitlog" / f"{0:020d}").read_bytes()[:end]
        replica.append_replicated(ids.CommitLogOffset(0), data)
        replica.adopt_replicated_queue_offsets()
        assert replication.cut_partial_record(replica) is None
        assert replica.max_commit_log_offset == end
        assert len(read(replica).messages) == 3
    finally:
        master.close()
        replica.close()


def test_a_promotion_keeps_a_damaged_whole_record_and_every_record_after_it(
    tmp_path: pathlib.Path,
) -> None:
    """Proves a replica that received a damaged whole record (the master's copy had a flipped
    bit, streamed as-is) followed by sound ones and half of a last one cuts, once promoted,
    only the half record: the damaged one stays (reads answer CORRUPT) and every sound record
    after it is kept and consumable (before: its dispatch stopped at the damaged record and the
    promotion cut there, everything after it with it: chaos run, 4.56 MB lost)."""
    master = _store(tmp_path / "master")
    replica = _store(tmp_path / "replica")
    try:
        put = [master.put_message(request(body=f"m{n}".encode() * 20)) for n in range(6)]
        assert all(p.status is PutMessageStatus.PUT_OK for p in put)
        whole_end = put[5].commit_log_offset
        data = bytearray((tmp_path / "master" / "commitlog" / f"{0:020d}").read_bytes())
        data[put[1].commit_log_offset + put[1].wrote_bytes - 30] ^= 0x10  # a body bit of m1
        half = whole_end + put[5].wrote_bytes // 2
        for start in range(0, half, 500):  # the HA stream: frames at any byte
            replica.append_replicated(
                ids.CommitLogOffset(start), bytes(data[start : min(half, start + 500)])
            )
        replica.adopt_replicated_queue_offsets()
        assert replication.cut_partial_record(replica) == whole_end
        assert replica.max_commit_log_offset == whole_end
        assert replica.get_message(put[1].commit_log_offset).status is LookupStatus.CORRUPT
        for p in put[2:5]:
            assert replica.get_message(p.commit_log_offset).status is LookupStatus.FOUND
        assert replica.max_queue_offset(ids.TopicName("T"), ids.QueueId(0)) == 5
        mine = replica.put_message(request(body=b"written-as-master"))
        assert (mine.commit_log_offset, mine.queue_offset) == (whole_end, 5)
    finally:
        master.close()
        replica.close()
