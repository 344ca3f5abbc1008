"""The POP journal: record codec, torn tails and bad CRCs, replay, and a GroupPopState restored
from it (attempts keep counting, the last handle still acks, done offsets stay done)."""

from __future__ import annotations

import dataclasses
import pathlib
import zlib

from hypothesis import given
from hypothesis import strategies as st

from ariane.broker import settings as broker_settings
from ariane.broker.pop import delivery
from ariane.broker.pop import group_state as pop
from ariane.broker.pop import journal as pop_journal
from ariane.broker.pop import journal_file as pop_journal_file
from ariane.common import clock, ids

G = ids.GroupName("g")
T = ids.TopicName("orders")
Q0 = ids.QueueId(0)
INVISIBLE_MS = 30_000

names = st.text(min_size=0, max_size=40)
u32 = st.integers(0, 2**32 - 1)
u64 = st.integers(0, 2**64 - 1)
checkpoints = st.builds(
    pop_journal.Checkpoint,
    names.map(ids.GroupName),
    names.map(ids.TopicName),
    u32.map(ids.QueueId),
    u64.map(ids.QueueOffset),
    attempt=st.integers(1, 0xFFFF),
    handle_version=u64,
    deadline_ms=u64,
    invisible_ms=u32,
    message_group=st.none() | names,
)
acks = st.builds(
    pop_journal.Ack,
    names.map(ids.GroupName),
    names.map(ids.TopicName),
    u32.map(ids.QueueId),
    u64.map(ids.QueueOffset),
    st.integers(1, 2**32 - 1),
)
forgets = st.builds(pop_journal.Forget, names.map(ids.GroupName), names.map(ids.TopicName), u32)
records = st.lists(checkpoints | acks | forgets, max_size=20)


def _cp(offset: int, attempt: int, version: int, deadline_ms: int) -> pop_journal.Checkpoint:
    return pop_journal.Checkpoint(
        G,
        T,
        Q0,
        ids.QueueOffset(offset),
        attempt=attempt,
        handle_version=version,
        deadline_ms=deadline_ms,
        invisible_ms=INVISIBLE_MS,
        message_group=None,
    )


@given(records)
def test_records_round_trip(written: list[pop_journal.Record]) -> None:
    """Any sequence of records decodes to itself and covers every byte."""
    data = pop_journal.encode_all(written)
    decoded = pop_journal.decode(data)
    assert decoded.records == written
    assert (decoded.valid_bytes, decoded.problem) == (len(data), None)


@given(records.filter(bool), st.data())
def test_a_torn_tail_keeps_every_whole_record_before_it(
    written: list[pop_journal.Record], data: st.DataObject
) -> None:
    """Cutting the journal inside its last record keeps exactly the records before it."""
    encoded = pop_journal.encode_all(written)
    last = len(pop_journal.encode(written[-1]))
    cut = data.draw(st.integers(len(encoded) - last + 1, len(encoded) - 1))
    decoded = pop_journal.decode(encoded[:cut])
    assert decoded.records == written[:-1]
    assert decoded.valid_bytes == len(encoded) - last and decoded.problem is not None


def test_a_flipped_byte_fails_the_crc_and_ends_the_valid_prefix() -> None:
    """A record whose body changed is refused with everything after it; the CRC is zlib's."""
    first, second, third = (
        _cp(0, 1, 7, 100),
        _cp(1, 2, 8, 200),
        pop_journal.Ack(G, T, Q0, ids.QueueOffset(0)),
    )
    data = bytearray(pop_journal.encode_all([first, second, third]))
    header = pop_journal.HEADER.size
    length, crc = pop_journal.HEADER.unpack_from(data, 0)
    assert crc == zlib.crc32(data[header : header + length])
    start = len(pop_journal.encode(first))
    data[start + header + 5] ^= 0x40
    decoded = pop_journal.decode(bytes(data))
    assert decoded.records == [first] and decoded.valid_bytes == start
    assert decoded.problem is not None and "CRC" in decoded.problem


def test_replay_keeps_the_latest_checkpoint_and_lets_acks_and_forgets_win() -> None:
    """The last checkpoint of an offset wins; an ack makes it done; a forget voids the queue."""
    other = ids.QueueId(1)
    folded = pop_journal.replay(
        [
            _cp(0, 1, 10, 100),
            _cp(0, 2, 11, 200),
            _cp(1, 1, 12, 300),
            pop_journal.Ack(G, T, Q0, ids.QueueOffset(1)),
            pop_journal.Ack(G, T, Q0, ids.QueueOffset(5), 3),
            dataclass_replace_queue(_cp(4, 1, 13, 400), other),
            pop_journal.Forget(G, T, other),
        ]
    )
    assert list(folded) == [(G, T, Q0)]
    restored = folded[(G, T, Q0)]
    assert {o: (c.attempt, c.handle_version) for o, c in restored.checkpoints.items()} == {
        0: (2, 11)
    }
    assert restored.done == [(1, 2), (5, 8)]
    assert restored.is_done(6) and not restored.is_done(4)
    assert restored.above(6).done == [(6, 8)] and not restored.above(6).checkpoints


def dataclass_replace_queue(
    checkpoint: pop_journal.Checkpoint, queue_id: ids.QueueId
) -> pop_journal.Checkpoint:
    return dataclasses.replace(checkpoint, queue_id=queue_id)


def _state(time: clock.ManualClock, sink: delivery.JournalSink | None = None) -> pop.GroupPopState:
    return pop.GroupPopState(
        G,
        time=time,
        pop_settings=broker_settings.PopSettings(),
        max_delivery_attempts=3,
        first_handle_version=100,
        journal=sink,
    )


class _Recorder:
    """A ``JournalSink`` keeping records in memory, as the PopService buffers them."""

    def __init__(self) -> None:
        self.records: list[pop_journal.Record] = []

    def checkpoint(self, group: ids.GroupName, entry: delivery.InFlight) -> None:
        self.records.append(delivery.checkpoint_of(group, entry))

    def done(
        self, group: ids.GroupName, topic: ids.TopicName, queue_id: ids.QueueId, offset: int
    ) -> None:
        self.records.append(pop_journal.Ack(group, topic, queue_id, ids.QueueOffset(offset)))

    def forget(self, group: ids.GroupName, topic: ids.TopicName, queue_id: int) -> None:
        self.records.append(pop_journal.Forget(group, topic, queue_id))


def test_a_restored_state_keeps_attempts_handles_and_done_offsets() -> None:
    """Deliveries journaled before a restart come back with their attempt and handle version,
    are redelivered with attempt + 1 after their wall-clock deadline, and acked offsets stay
    done; new handle versions start above the restored ones."""
    time = clock.ManualClock()
    sink = _Recorder()
    before = _state(time, sink)
    before.open_queue(T, Q0, committed=ids.QueueOffset(0))
    first = before.reserve(T, Q0, ids.QueueOffset(0), invisible_ms=INVISIBLE_MS)
    second = before.reserve(T, Q0, ids.QueueOffset(1), invisible_ms=INVISIBLE_MS)
    assert first is not None and second is not None
    assert before.ack(T, Q0, ids.QueueOffset(1), second.handle_version) is delivery.AckOutcome.OK
    time.advance_ms(INVISIBLE_MS)
    (due,) = before.collect_due()
    again = before.redeliver(T, Q0, due.queue_offset, invisible_ms=INVISIBLE_MS)
    assert again.attempt == 2
    data = pop_journal.encode_all(sink.records)

    time.advance_ms(5_000)  # the restart; the new process's monotonic clock is unrelated
    after = _state(clock.ManualClock(start_ms=time.now_ms()))
    restored = pop_journal.replay(pop_journal.decode(data).records)[(G, T, Q0)]
    after.open_queue(T, Q0, committed=ids.QueueOffset(0), restored=restored)
    assert after.adopt_restored(T, Q0, ids.QueueOffset(0))
    assert after.adopt_restored(T, Q0, ids.QueueOffset(1))
    assert not after.adopt_restored(T, Q0, ids.QueueOffset(2))
    assert after.committed_offset(T, Q0) == 0 and after.scan_offset(T, Q0) == 2
    held = after.in_flight(T, Q0, ids.QueueOffset(0))
    assert held is not None and (held.attempt, held.handle_version) == (2, again.handle_version)
    assert after.collect_due() == []  # 25 s of its invisible time are left
    fresh = after.reserve(T, Q0, ids.QueueOffset(2), invisible_ms=INVISIBLE_MS)
    assert fresh is not None and fresh.handle_version > again.handle_version


def test_the_restored_deadline_passes_and_the_next_attempt_is_counted(
    tmp_path: pathlib.Path,
) -> None:
    """Through the journal file: a delivery at attempt 2 before the restart is due after its
    deadline and is redelivered as attempt 3 (the max); a torn tail was cut at reopening."""
    time = clock.ManualClock()
    sink = _Recorder()
    before = _state(time, sink)
    before.open_queue(T, Q0, committed=ids.QueueOffset(0))
    assert before.reserve(T, Q0, ids.QueueOffset(0), invisible_ms=INVISIBLE_MS) is not None
    time.advance_ms(INVISIBLE_MS)
    assert [d.next_attempt for d in before.collect_due()] == [2]
    before.redeliver(T, Q0, ids.QueueOffset(0), invisible_ms=INVISIBLE_MS)
    journal, _ = pop_journal_file.open_journal(tmp_path)
    journal.append(pop_journal.encode_all(sink.records))
    journal.append(b"\x00\x00\x00\x30torn")
    journal.close()

    reopened, replayed = pop_journal_file.open_journal(tmp_path)
    assert reopened.size_bytes == len(pop_journal.encode_all(sink.records))
    reopened.close()
    time.advance_ms(INVISIBLE_MS)
    after = _state(clock.ManualClock(start_ms=time.now_ms()))
    restored = pop_journal.replay(replayed)[(G, T, Q0)]
    after.open_queue(T, Q0, committed=ids.QueueOffset(0), restored=restored)
    assert after.adopt_restored(T, Q0, ids.QueueOffset(0))
    (due,) = after.collect_due()
    assert (due.next_attempt, due.to_dlq) == (3, False)
    assert after.redeliver(T, Q0, due.queue_offset, invisible_ms=INVISIBLE_MS).attempt == 3


def test_compaction_records_replay_to_the_live_state() -> None:
    """``journal_records`` (what compaction writes) replays to the deliveries in flight and
    the done offsets above committed, as ranges."""
    time = clock.ManualClock()
    state = _state(time)
    state.open_queue(T, Q0, committed=ids.QueueOffset(0))
    taken = [state.reserve(T, Q0, ids.QueueOffset(o), invisible_ms=INVISIBLE_MS) for o in (0, 1)]
    state.skip(T, Q0, ids.QueueOffset(2))
    last = state.reserve(T, Q0, ids.QueueOffset(3), invisible_ms=INVISIBLE_MS)
    assert taken[1] is not None and last is not None
    state.ack(T, Q0, ids.QueueOffset(1), taken[1].handle_version)
    restored = pop_journal.replay(state.journal_records())[(G, T, Q0)]
    assert sorted(restored.checkpoints) == [0, 3] and restored.done == [(1, 3)]
    assert restored.checkpoints[3].handle_version == last.handle_version
