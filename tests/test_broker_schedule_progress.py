"""Schedule progress in the CommitLog (``broker.schedule.progress``): the progress record codec,
and a replica of a master's CommitLog cut at any record boundary of its delivery batches, then
promoted, delivering each parked message exactly once over a real store with a manual clock."""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import pathlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ariane.broker.schedule import progress_codec
from ariane.broker.schedule import service as schedule_service
from ariane.broker.schedule import settings as schedule_settings
from ariane.common import clock, ids, message, topics
from ariane.store import commit_log, message_codec, message_store
from store_testing import read, request, tiny_settings

P = message.Property
OK = message_codec.DecodeStatus.OK
SEGMENT_BYTES = 2048
"""Tiny CommitLog segments: delivery batches cross segment ends (a BLANK inside a batch)."""

origins = st.builds(
    progress_codec.Origin,
    kind=st.sampled_from(list(progress_codec.Kind)),
    level=st.integers(0, progress_codec.LEVEL_MAX),
    queue_offset=st.integers(0, 2**62),
    key=st.integers(0, 2**64 - 1),
)


@given(st.lists(origins, min_size=1, max_size=40))
def test_progress_records_round_trip(written: list[progress_codec.Origin]) -> None:
    """Any list of origins decodes back to itself."""
    assert progress_codec.decode(progress_codec.encode(written)) == written


@given(st.lists(origins, min_size=1, max_size=5), st.data())
def test_a_cut_or_foreign_body_is_refused(
    written: list[progress_codec.Origin], data: st.DataObject
) -> None:
    """A body cut short, lengthened or with another magic is a ValueError, never origins."""
    body = progress_codec.encode(written)
    cut = data.draw(st.integers(0, len(body) - 1))
    for bad in (body[:cut], body + b"\x00", b"XXXX" + body[4:]):
        with pytest.raises(ValueError):
            progress_codec.decode(bad)


class Gate:
    """The store's replication gate: refuses writes while ``slave``; acks at once."""

    def __init__(self) -> None:
        self.slave = True

    def refusal(self) -> commit_log.PutMessageStatus | None:
        return commit_log.PutMessageStatus.SERVICE_NOT_AVAILABLE if self.slave else None

    def replicated(self, end_offset: int) -> concurrent.futures.Future[commit_log.PutMessageStatus]:
        done = concurrent.futures.Future[commit_log.PutMessageStatus]()
        done.set_result(commit_log.PutMessageStatus.PUT_OK)
        return done


def _store(root: pathlib.Path, manual: clock.ManualClock) -> message_store.MessageStore:
    config = tiny_settings(commit_log_file_size_bytes=SEGMENT_BYTES, message_size_bytes_max=1024)
    return message_store.MessageStore.open(root, config, clock=manual)


def _service(
    root: pathlib.Path, store: message_store.MessageStore, manual: clock.ManualClock
) -> schedule_service.ScheduleService:
    return schedule_service.ScheduleService.open(
        root,
        store=store,
        settings=schedule_settings.ScheduleSettings(message_delay_level="1s 5s 10s"),
        time=manual,
        notify=lambda _: None,
    )


def _round(service: schedule_service.ScheduleService) -> int:
    return asyncio.run(service.run_once())


def _delivered(store: message_store.MessageStore) -> collections.Counter[str]:
    got = read(store, topic="Real", queue_id=2, max_count=1000).messages
    return collections.Counter(message.message_id_of(m) for m in got)


def _replicate(
    master: message_store.MessageStore, replica: message_store.MessageStore, end: int
) -> None:
    """Copy the master's CommitLog bytes up to ``end`` into the replica, segment by segment
    (what the HA stream does)."""
    position = replica.max_commit_log_offset
    while position < end:
        segment_end = (position // SEGMENT_BYTES + 1) * SEGMENT_BYTES
        upto = min(end, segment_end)
        name = master.root / "commitlog" / f"{position // SEGMENT_BYTES * SEGMENT_BYTES:020d}"
        with name.open("rb") as segment:
            segment.seek(position % SEGMENT_BYTES)
            data = segment.read(upto - position)
        position = replica.append_replicated(ids.CommitLogOffset(position), data)


class Master:
    """A master store and schedule service that parked and delivered a known set of keys."""

    def __init__(self, root: pathlib.Path, manual: clock.ManualClock) -> None:
        self.store = _store(root, manual)
        self.service = _service(root, self.store, manual)
        now = manual.now_ms()
        self.keys: list[str] = []
        for i in range(4):  # two delivered before the cut, two (one recalled) still parked
            self._park(
                self.service.park(
                    self._request(f"T{i}"), delivery_ms=now + 2_000 + 60_000 * (i // 2)
                )
            )
            self._park(self.service.park_level(self._request(f"L{i}"), 1 if i < 2 else 3))
        manual.advance_ms(2_000)
        assert _round(self.service) == 4  # one timer batch, one level batch
        self.service.recall("T3", now + 62_000)  # a RECALLED record
        self.end = self.store.max_commit_log_offset

    def _request(self, key: str) -> commit_log.AppendRequest:
        self.keys.append(key)
        return request("Real", key.encode() * 20, queue_id=2, UNIQ_KEY=key)

    def _park(self, parked: commit_log.AppendRequest) -> None:
        [result] = self.store.put_messages_sync([parked])
        assert result.status.is_stored

    def boundaries(self) -> list[int]:
        """Every record boundary from the first delivery batch (its progress record) on."""
        items = list(self.store.commit_log.scan(0, check_crc=False))
        starts = [i.offset for i in items if i.result.status is OK]
        first = next(
            i.offset
            for i in items
            if i.result.message is not None
            and i.result.message.topic in (topics.SCHEDULE_PROGRESS_TOPIC, "Real")
        )
        return [s for s in starts if s >= first] + [self.end]

    def close(self) -> None:
        self.service.close()
        self.store.close()


def test_a_replica_cut_at_any_boundary_delivers_each_parked_message_exactly_once(
    tmp_path: pathlib.Path,
) -> None:
    """For every cut of the master's delivery batches (and the recall record after them), a
    slave following the cut log delivers nothing, and once writable delivers exactly what its
    log does not hold delivered: every key once (the recalled one not, once its record is in)."""
    manual = clock.ManualClock(start_ms=1_700_000_000_000)
    master = Master(tmp_path / "master", manual)
    first_record_end = master.boundaries()[1]
    try:
        for cut in master.boundaries():
            root = tmp_path / f"replica-{cut}"
            replica = _store(root, manual)
            gate = Gate()
            replica.replication = gate
            service = _service(root, replica, manual)
            _replicate(master.store, replica, min(cut, first_record_end))
            assert _round(service) == 0  # a slave never delivers
            _replicate(master.store, replica, cut)
            assert _round(service) == 0
            held = _delivered(replica)
            replica.adopt_replicated_queue_offsets()  # promoted (ReplicationService.promote)
            gate.slave = False
            manual.advance_ms(120_000)
            while _round(service):
                pass
            got = _delivered(replica)
            wanted = set(master.keys) - ({"T3"} if cut == master.end else set())
            assert set(got) == wanted, f"cut at {cut}: {sorted(got)}"
            assert all(n == 1 for n in got.values()), f"cut at {cut}: {got} (held {held})"
            service.close()
            replica.close()
    finally:
        master.close()


def test_a_truncated_replica_derives_its_progress_again(tmp_path: pathlib.Path) -> None:
    """A slave that followed a delivery batch, then had it cut away by a new master's
    TRUNCATE, delivers those messages once it is promoted (nothing of them is lost)."""
    manual = clock.ManualClock(start_ms=1_700_000_000_000)
    master = Master(tmp_path / "master", manual)
    root = tmp_path / "replica"
    replica = _store(root, manual)
    gate = Gate()
    replica.replication = gate
    service = _service(root, replica, manual)
    try:
        _replicate(master.store, replica, master.end)
        assert _round(service) == 0 and service.stats().timer_pending == 1
        first_record = master.boundaries()[0]
        replica.truncate_replica(ids.CommitLogOffset(first_record))
        service.replica_truncated(first_record)
        replica.adopt_replicated_queue_offsets()
        gate.slave = False
        manual.advance_ms(120_000)
        while _round(service):
            pass
        got = _delivered(replica)
        assert set(got) == set(master.keys) and all(n == 1 for n in got.values()), got
    finally:
        service.close()
        replica.close()
        master.close()


def test_a_crash_before_the_local_files_are_written_delivers_nothing_twice(
    tmp_path: pathlib.Path,
) -> None:
    """A master whose timer log and delayOffset.json lost a delivery round (killed between the
    batch and its local records) follows its own progress record at the next start: the
    round's timer and level messages are not delivered again (exactly once on one broker)."""
    manual = clock.ManualClock(start_ms=1_700_000_000_000)
    store = _store(tmp_path, manual)
    service = _service(tmp_path, store, manual)
    parked = [
        service.park(
            request("Real", b"t" * 40, queue_id=2, UNIQ_KEY="T"),
            delivery_ms=manual.now_ms() + 2_000,
        ),
        service.park_level(request("Real", b"l" * 40, queue_id=2, UNIQ_KEY="L"), 1),
    ]
    assert all(r.status.is_stored for r in store.put_messages_sync(parked))
    assert _round(service) == 0
    timer_log_path = tmp_path / "timer" / "timerlog"
    offsets_path = tmp_path / "config" / "delayOffset.json"
    before = (
        timer_log_path.read_bytes(),
        offsets_path.read_bytes() if offsets_path.exists() else b"",
    )
    manual.advance_ms(2_000)
    assert _round(service) == 2
    service.close()
    timer_log_path.write_bytes(before[0])  # the local records of the round are lost
    if before[1]:
        offsets_path.write_bytes(before[1])
    else:
        offsets_path.unlink()
    service = _service(tmp_path, store, manual)
    try:
        manual.advance_ms(60_000)
        assert _round(service) == 0 and _round(service) == 0
        assert _delivered(store) == {"T": 1, "L": 1}
    finally:
        service.close()
        store.close()
