"""POP bookkeeping: invisible time, handles, redelivery, DLQ, committed offset, FIFO, bounds."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from ariane.broker import settings as broker_settings
from ariane.broker.pop import delivery, done_window, fifo, receipt
from ariane.broker.pop import group_state as pop
from ariane.common import clock, errors, ids

T = ids.TopicName("orders")
Q0 = ids.QueueId(0)
INVISIBLE_MS = 30_000


def off(n: int) -> ids.QueueOffset:
    return ids.QueueOffset(n)


def _state(
    time: clock.ManualClock,
    *,
    attempts: int = 17,
    orderly: bool = False,
    inflight_max: int = 1000,
    span_max: int = 1000,
    committed: int = 0,
) -> pop.GroupPopState:
    state = pop.GroupPopState(
        ids.GroupName("g"),
        time=time,
        pop_settings=broker_settings.PopSettings(
            inflight_messages_max=inflight_max, pop_span_max=span_max
        ),
        max_delivery_attempts=attempts,
        orderly=orderly,
        first_handle_version=100,
    )
    state.open_queue(T, Q0, committed=off(committed))
    return state


def _take(state: pop.GroupPopState, offset: int, group: str | None = None) -> delivery.InFlight:
    entry = state.reserve(T, Q0, off(offset), invisible_ms=INVISIBLE_MS, message_group=group)
    assert entry is not None
    return entry


def test_a_reserved_message_is_acked_once_and_then_unknown() -> None:
    """First delivery is attempt 1; an OK ack advances the committed offset; a second is UNKNOWN."""
    time = clock.ManualClock()
    state = _state(time)
    entry = _take(state, 0)
    assert (entry.attempt, entry.queue_offset, entry.handle_version) == (1, 0, 100)
    assert entry.popped_at_ms == time.now_ms() and entry.deadline_ms == INVISIBLE_MS
    assert state.committed_offset(T, Q0) == 0 and state.scan_offset(T, Q0) == 1
    assert state.ack(T, Q0, off(0), entry.handle_version) is delivery.AckOutcome.OK
    assert state.committed_offset(T, Q0) == 1
    assert state.ack(T, Q0, off(0), entry.handle_version) is delivery.AckOutcome.UNKNOWN
    assert state.outstanding == 0


def test_the_receipt_handle_carries_the_delivery_and_acks_after_decoding() -> None:
    """A handle built from InFlight round-trips and its decoded version acks the message."""
    state = _state(clock.ManualClock())
    entry = _take(state, 0)
    text = receipt.encode(
        entry.receipt_handle(
            broker_name=ids.BrokerName("broker-a"), commit_log_offset=ids.CommitLogOffset(4096)
        )
    )
    handle = receipt.decode(text)
    assert (handle.topic, handle.queue_id, handle.queue_offset) == (T, Q0, 0)
    assert (handle.delivery_attempt, handle.invisible_ms) == (1, INVISIBLE_MS)
    assert handle.commit_log_offset == 4096 and handle.broker_name == "broker-a"
    outcome = state.ack(handle.topic, handle.queue_id, handle.queue_offset, handle.handle_version)
    assert outcome is delivery.AckOutcome.OK


def test_acks_of_unknown_queues_offsets_and_versions() -> None:
    """Never-delivered offsets and unknown queues are UNKNOWN; a wrong version is STALE."""
    state = _state(clock.ManualClock())
    entry = _take(state, 0)
    assert state.ack(T, Q0, off(5), entry.handle_version) is delivery.AckOutcome.UNKNOWN
    assert state.ack(T, ids.QueueId(9), off(0), entry.handle_version) is delivery.AckOutcome.UNKNOWN
    assert state.ack(T, Q0, off(0), entry.handle_version + 1) is delivery.AckOutcome.STALE
    assert state.in_flight(T, Q0, off(0)) == entry


def test_change_invisible_issues_a_new_handle_and_the_old_one_goes_stale() -> None:
    """After ChangeInvisibleDuration the old version is STALE, the new one acks, attempt kept."""
    time = clock.ManualClock()
    state = _state(time)
    first = _take(state, 0)
    time.advance_ms(1_000)
    changed = state.change_invisible(T, Q0, off(0), first.handle_version, 5_000)
    assert changed.outcome is delivery.AckOutcome.OK and changed.in_flight is not None
    renewed = changed.in_flight
    assert renewed.handle_version != first.handle_version
    assert (renewed.attempt, renewed.deadline_ms, renewed.invisible_ms) == (1, 6_000, 5_000)
    stale = state.change_invisible(T, Q0, off(0), first.handle_version, 5_000)
    assert stale == delivery.ChangeResult(delivery.AckOutcome.STALE)
    assert state.ack(T, Q0, off(0), first.handle_version) is delivery.AckOutcome.STALE
    assert state.ack(T, Q0, off(0), renewed.handle_version) is delivery.AckOutcome.OK
    gone = state.change_invisible(T, Q0, off(0), renewed.handle_version, 5_000)
    assert gone.outcome is delivery.AckOutcome.UNKNOWN


def test_expiry_happens_exactly_at_the_deadline() -> None:
    """One ms before the deadline nothing is due; at the deadline the message is due."""
    time = clock.ManualClock()
    state = _state(time)
    _take(state, 0)
    time.advance_ms(INVISIBLE_MS - 1)
    assert state.collect_due() == []
    time.advance_ms(1)
    assert state.collect_due() == [delivery.Due(T, Q0, off(0), next_attempt=2, to_dlq=False)]
    assert state.collect_due(T, Q0) == state.collect_due()
    assert state.collect_due(ids.TopicName("other")) == []


def test_a_changed_deadline_replaces_the_old_one_for_expiry() -> None:
    """After extending the invisible time the original deadline no longer makes it due."""
    time = clock.ManualClock()
    state = _state(time)
    entry = _take(state, 0)
    state.change_invisible(T, Q0, off(0), entry.handle_version, 60_000)
    time.advance_ms(INVISIBLE_MS)
    assert state.collect_due() == []
    time.advance_ms(60_000 - INVISIBLE_MS)
    assert [d.queue_offset for d in state.collect_due()] == [0]


def test_redelivery_increments_the_attempt_and_invalidates_the_old_handle() -> None:
    """A due message acks with its old handle until redelivered; after that only the new one."""
    time = clock.ManualClock()
    state = _state(time)
    first = _take(state, 0)
    second_msg = _take(state, 1)
    time.advance_ms(INVISIBLE_MS)
    assert len(state.collect_due()) == 2
    assert state.ack(T, Q0, off(1), second_msg.handle_version) is delivery.AckOutcome.OK  # late ack
    assert [d.queue_offset for d in state.collect_due()] == [0]
    again = state.redeliver(T, Q0, off(0), invisible_ms=INVISIBLE_MS)
    assert again.attempt == 2 and again.handle_version != first.handle_version
    assert state.collect_due() == []
    assert state.ack(T, Q0, off(0), first.handle_version) is delivery.AckOutcome.STALE
    assert state.ack(T, Q0, off(0), again.handle_version) is delivery.AckOutcome.OK
    assert state.committed_offset(T, Q0) == 2


def test_the_message_goes_to_the_dlq_after_max_delivery_attempts() -> None:
    """With 3 attempts: deliveries 1, 2, 3, then the due entry says to_dlq; settling commits."""
    time = clock.ManualClock()
    state = _state(time, attempts=3)
    _take(state, 0)
    attempts = [1]
    for _ in range(2):
        time.advance_ms(INVISIBLE_MS)
        (due,) = state.collect_due()
        assert not due.to_dlq
        attempts.append(state.redeliver(T, Q0, off(0), invisible_ms=INVISIBLE_MS).attempt)
    assert attempts == [1, 2, 3]
    time.advance_ms(INVISIBLE_MS)
    assert state.collect_due() == [delivery.Due(T, Q0, off(0), next_attempt=4, to_dlq=True)]
    with pytest.raises(AssertionError, match="DLQ"):
        state.redeliver(T, Q0, off(0), invisible_ms=INVISIBLE_MS)
    state.settle_dead_letter(T, Q0, off(0))
    assert state.committed_offset(T, Q0) == 1 and state.outstanding == 0
    assert state.collect_due() == []


def test_a_nack_counts_as_a_failed_attempt_on_redelivery() -> None:
    """ChangeInvisibleDuration (nack) then expiry: the redelivery is the next attempt."""
    time = clock.ManualClock()
    state = _state(time)
    entry = _take(state, 0)
    state.change_invisible(T, Q0, off(0), entry.handle_version, 1_000)
    time.advance_ms(1_000)
    assert state.collect_due()[0].next_attempt == 2


def test_committed_offset_moves_only_over_a_contiguous_done_prefix() -> None:
    """Acks out of order leave gaps; the committed offset waits for the lowest one."""
    state = _state(clock.ManualClock(), committed=10)
    entries = {n: _take(state, n) for n in range(10, 15)}
    committed = []
    for n in (11, 13, 10, 12, 14):
        assert state.ack(T, Q0, off(n), entries[n].handle_version) is delivery.AckOutcome.OK
        committed.append(state.committed_offset(T, Q0))
    assert committed == [10, 10, 12, 14, 15]


def test_filtered_messages_are_skipped_and_count_as_done() -> None:
    """skip() passes the cursor without a delivery and lets the committed offset advance."""
    state = _state(clock.ManualClock())
    entry = _take(state, 0)
    state.skip(T, Q0, off(1))
    state.skip(T, Q0, off(2))
    assert state.committed_offset(T, Q0) == 0 and state.scan_offset(T, Q0) == 3
    state.ack(T, Q0, off(0), entry.handle_version)
    assert state.committed_offset(T, Q0) == 3
    with pytest.raises(AssertionError, match="scan offset"):
        state.skip(T, Q0, off(7))


def test_inflight_bound_answers_too_many_requests() -> None:
    """At inflight_messages_max a new reservation fails; an ack frees a slot."""
    state = _state(clock.ManualClock(), inflight_max=2)
    first = _take(state, 0)
    _take(state, 1)
    assert state.capacity() == 0 and state.scan_budget(T, Q0) == 0
    with pytest.raises(errors.TooManyRequestsError, match="inflight_messages_max"):
        state.reserve(T, Q0, off(2), invisible_ms=INVISIBLE_MS)
    assert state.scan_offset(T, Q0) == 2  # the failed call did not move the cursor
    state.ack(T, Q0, off(0), first.handle_version)
    assert _take(state, 2).queue_offset == 2


def test_span_bound_stops_the_scanner_behind_a_slow_message() -> None:
    """The cursor may run at most pop_span_max past the committed offset, even via skip."""
    state = _state(clock.ManualClock(), span_max=3)
    slow = _take(state, 0)
    state.skip(T, Q0, off(1))
    state.skip(T, Q0, off(2))
    assert state.scan_budget(T, Q0) == 0
    with pytest.raises(errors.TooManyRequestsError, match="pop_span_max"):
        state.skip(T, Q0, off(3))
    state.ack(T, Q0, off(0), slow.handle_version)
    assert state.scan_budget(T, Q0) == 3


def test_restart_redelivers_everything_above_the_committed_offset() -> None:
    """A fresh state opened at the stored committed offset delivers those messages again."""
    time = clock.ManualClock()
    before = _state(time)
    entries = [_take(before, n) for n in range(3)]
    before.ack(T, Q0, off(0), entries[0].handle_version)
    before.ack(T, Q0, off(2), entries[2].handle_version)
    stored = before.committed_offset(T, Q0)
    assert stored == 1
    after = _state(time, committed=stored)
    after_first = _take(after, 1)
    assert after_first.attempt == 1
    assert _take(after, 2).queue_offset == 2  # acked before the restart, delivered again


def test_handle_versions_are_unique_and_random_by_default() -> None:
    """Each delivery or change gets a fresh version; two states start at different versions."""
    state = _state(clock.ManualClock())
    a = _take(state, 0)
    b = _take(state, 1)
    c = state.change_invisible(T, Q0, off(0), a.handle_version, 1).in_flight
    assert c is not None
    assert len({a.handle_version, b.handle_version, c.handle_version}) == 3
    starts = set()
    for _ in range(3):
        fresh = pop.GroupPopState(
            ids.GroupName("g"),
            time=clock.ManualClock(),
            pop_settings=broker_settings.PopSettings(),
            max_delivery_attempts=17,
        )
        fresh.open_queue(T, Q0, committed=off(0))
        entry = fresh.reserve(T, Q0, off(0), invisible_ms=1)
        assert entry is not None
        starts.add(entry.handle_version)
    assert len(starts) == 3


def test_skip_to_and_reset_drop_in_flight_entries() -> None:
    """Retention skip_to forgets older in-flight messages; reset_queue restarts the queue."""
    state = _state(clock.ManualClock())
    entries = [_take(state, n) for n in range(4)]
    state.skip_to(T, Q0, off(2))
    assert state.committed_offset(T, Q0) == 2 and state.outstanding == 2
    assert state.ack(T, Q0, off(1), entries[1].handle_version) is delivery.AckOutcome.UNKNOWN
    assert state.ack(T, Q0, off(2), entries[2].handle_version) is delivery.AckOutcome.OK
    state.skip_to(T, Q0, off(10))
    assert state.scan_offset(T, Q0) == 10 and state.outstanding == 0
    state.reset_queue(T, Q0, off(5))
    assert (state.committed_offset(T, Q0), state.scan_offset(T, Q0)) == (5, 5)
    state.close_queue(T, Q0)
    assert not state.is_open(T, Q0)


def test_fifo_holds_later_messages_of_a_group_until_the_earlier_one_is_acked() -> None:
    """Group A's second message waits for its first; group B flows independently."""
    time = clock.ManualClock()
    state = _state(time, orderly=True)
    a0 = _take(state, 0, "A")
    b1 = _take(state, 1, "B")
    assert state.reserve(T, Q0, off(2), invisible_ms=INVISIBLE_MS, message_group="A") is None
    assert state.reserve(T, Q0, off(3), invisible_ms=INVISIBLE_MS, message_group="A") is None
    unordered = _take(state, 4, None)
    assert state.fifo_ready(T, Q0) == []
    assert state.reserve(T, Q0, off(2), invisible_ms=INVISIBLE_MS) is None  # still blocked
    state.ack(T, Q0, off(0), a0.handle_version)
    assert state.fifo_ready(T, Q0) == [(2, "A")]
    a2 = _take(state, 2)
    assert a2.message_group == "A" and state.fifo_ready(T, Q0) == []
    state.ack(T, Q0, off(1), b1.handle_version)
    state.ack(T, Q0, off(4), unordered.handle_version)
    assert state.fifo_ready(T, Q0) == []  # offset 3 still waits behind 2
    assert state.committed_offset(T, Q0) == 2


def test_fifo_keeps_a_group_blocked_while_its_message_waits_for_redelivery() -> None:
    """An expired head stays in flight: the next message of its group is not released."""
    time = clock.ManualClock()
    state = _state(time, orderly=True, attempts=2)
    _take(state, 0, "A")
    assert state.reserve(T, Q0, off(1), invisible_ms=INVISIBLE_MS, message_group="A") is None
    time.advance_ms(INVISIBLE_MS)
    assert [d.queue_offset for d in state.collect_due()] == [0]
    assert state.fifo_ready(T, Q0) == []
    again = state.redeliver(T, Q0, off(0), invisible_ms=INVISIBLE_MS)
    assert again.attempt == 2 and state.fifo_ready(T, Q0) == []
    time.advance_ms(INVISIBLE_MS)
    assert state.collect_due()[0].to_dlq
    state.settle_dead_letter(T, Q0, off(0))
    assert state.fifo_ready(T, Q0) == [(1, "A")]  # skipped to the DLQ: order moves on
    assert _take(state, 1).attempt == 1


def test_fifo_order_alone_tracks_heads_and_ready_offsets() -> None:
    """FifoOrder: only a group's head is deliverable; releasing it readies the next one."""
    order = fifo.FifoOrder()
    assert order.may_deliver_new("A") and order.may_deliver_new(None)
    order.add(0, "A", delivered=True)
    order.add(1, "A", delivered=False)
    order.add(2, "B", delivered=False)  # held although its group was free: ready at once
    assert not order.may_deliver_new("A")
    assert order.ready() == [(2, "B")]
    assert order.release(0) == 1
    assert order.ready() == [(1, "A"), (2, "B")]
    order.deliver_held(1)
    order.drop_below(2)
    assert len(order) == 1 and order.ready() == [(2, "B")] and order.group_of(2) == "B"
    order.clear()
    assert len(order) == 0


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 300), max_size=200), st.integers(0, 5))
def test_done_window_matches_a_set_model(marks: list[int], start: int) -> None:
    """The bitmap's committed offset is always the lowest offset not marked done."""
    window = done_window.DoneWindow(start)
    done: set[int] = set()
    for offset in marks:
        if offset < window.committed or offset in done:
            continue
        window.mark(offset + start)
        done.add(offset + start)
        expected = start
        while expected in done:
            expected += 1
        assert window.committed == expected
        assert all(window.is_done(o) for o in done)
    assert not window.is_done(window.committed)


def test_done_window_compacts_over_long_runs() -> None:
    """A long run of marks is compacted away once the committed offset passes it."""
    window = done_window.DoneWindow(0)
    for offset in range(1, 100_000):
        window.mark(offset)
    assert window.committed == 0
    window.mark(0)
    assert window.committed == 100_000
    assert len(window._bits) <= 1  # the 12.5 kB below the committed offset were dropped
    window.mark(100_002)
    window.advance_to(100_001)
    assert window.committed == 100_001 and not window.is_done(100_001)
    window.mark(100_001)
    assert window.committed == 100_003


class PopMachine(RuleBasedStateMachine):
    """Random receive/ack/nack/expire/DLQ sequences against a simple model of the queue."""

    def __init__(self) -> None:
        super().__init__()
        self.time = clock.ManualClock()
        self.state = _state(self.time, attempts=3, orderly=True, inflight_max=6, span_max=12)
        self.groups = ["A", "B", None]
        self.done: set[int] = set()
        self.handles: dict[int, int] = {}
        self.old_handles: list[tuple[int, int]] = []
        self.group_of: dict[int, str | None] = {}

    @rule(group=st.sampled_from(["A", "B", None]))
    def receive_new(self, group: str | None) -> None:
        offset = self.state.scan_offset(T, Q0)
        if self.state.scan_budget(T, Q0) == 0:
            with pytest.raises(errors.TooManyRequestsError):
                self.state.reserve(T, Q0, offset, invisible_ms=100, message_group=group)
            return
        entry = self.state.reserve(T, Q0, offset, invisible_ms=100, message_group=group)
        self.group_of[offset] = group
        if entry is not None:
            self.handles[offset] = entry.handle_version

    @rule()
    def receive_ready(self) -> None:
        for offset, _group in self.state.fifo_ready(T, Q0):
            entry = self.state.reserve(T, Q0, offset, invisible_ms=100)
            assert entry is not None and entry.attempt == 1
            self.handles[offset] = entry.handle_version

    @rule(pick=st.integers(0, 20))
    def ack(self, pick: int) -> None:
        if not self.handles:
            return
        offset = sorted(self.handles)[pick % len(self.handles)]
        version = self.handles.pop(offset)
        assert self.state.ack(T, Q0, off(offset), version) is delivery.AckOutcome.OK
        self.done.add(offset)
        self.old_handles.append((offset, version))

    @rule(pick=st.integers(0, 20), delay=st.integers(1, 200))
    def nack(self, pick: int, delay: int) -> None:
        if not self.handles:
            return
        offset = sorted(self.handles)[pick % len(self.handles)]
        result = self.state.change_invisible(T, Q0, off(offset), self.handles[offset], delay)
        assert result.in_flight is not None
        self.old_handles.append((offset, self.handles[offset]))
        self.handles[offset] = result.in_flight.handle_version

    @rule(ms=st.integers(0, 150))
    def tick_and_redeliver(self, ms: int) -> None:
        self.time.advance_ms(ms)
        for due in self.state.collect_due():
            assert due.next_attempt <= 4
            if due.to_dlq:
                self.state.settle_dead_letter(T, Q0, due.queue_offset)
                self.handles.pop(due.queue_offset)
                self.done.add(due.queue_offset)
            else:
                entry = self.state.redeliver(T, Q0, due.queue_offset, invisible_ms=100)
                self.old_handles.append((due.queue_offset, self.handles[due.queue_offset]))
                self.handles[due.queue_offset] = entry.handle_version

    @rule()
    def old_handles_never_ack(self) -> None:
        for offset, version in self.old_handles[-5:]:
            outcome = self.state.ack(T, Q0, off(offset), version)
            assert outcome in (delivery.AckOutcome.STALE, delivery.AckOutcome.UNKNOWN)

    @invariant()
    def committed_is_lowest_not_done(self) -> None:
        expected = 0
        while expected in self.done:
            expected += 1
        assert self.state.committed_offset(T, Q0) == min(expected, self.state.scan_offset(T, Q0))

    @invariant()
    def one_in_flight_message_per_group(self) -> None:
        groups = [self.state.in_flight(T, Q0, off(o)) for o in self.handles]
        named = [e.message_group for e in groups if e is not None and e.message_group]
        assert len(named) == len(set(named))
        for offset in self.handles:
            entry = self.state.in_flight(T, Q0, off(offset))
            assert entry is not None
            assert entry.attempt <= 3

    @invariant()
    def a_group_message_flies_only_after_its_predecessors_are_done(self) -> None:
        for offset in self.handles:
            group = self.group_of[offset]
            if group is not None:
                earlier = [p for p, g in self.group_of.items() if g == group and p < offset]
                assert all(p in self.done for p in earlier)

    @invariant()
    def outstanding_is_bounded(self) -> None:
        assert self.state.outstanding <= 6


PopMachine.TestCase.settings = settings(max_examples=60, stateful_step_count=40, deadline=None)
TestPopMachine = PopMachine.TestCase
