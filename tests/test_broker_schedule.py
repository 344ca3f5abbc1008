"""Delay levels and timer messages: the timer-log codec, the wheel and ``ScheduleService``'s
due-time logic over a real store with a manual clock (RocketMQ ``ScheduleMessageService`` and
``TimerMessageStore``)."""

from __future__ import annotations

import asyncio
import json
import pathlib
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ariane.broker.schedule import service as schedule_service
from ariane.broker.schedule import settings as schedule_settings
from ariane.broker.schedule import timer_codec, timer_log, wheel
from ariane.common import clock, errors, ids, message, topics
from ariane.store import commit_log, message_store
from store_testing import read, request, tiny_settings

P = message.Property
K = timer_codec.Kind

records = st.builds(
    timer_codec.TimerRecord,
    kind=st.sampled_from(list(K)),
    delivery_ms=st.integers(0, 2**62),
    queue_offset=st.integers(0, 2**62),
    commit_log_offset=st.integers(0, 2**62),
    size_bytes=st.integers(0, 2**32 - 1),
    message_id=st.text(max_size=60).filter(lambda t: len(t.encode()) <= 255),
)


@given(st.lists(records, max_size=20))
def test_timer_records_round_trip(written: list[timer_codec.TimerRecord]) -> None:
    """Any sequence of records decodes back to itself, using every byte."""
    data = b"".join(timer_codec.encode(r) for r in written)
    assert timer_codec.decode_all(data) == (written, len(data))


@given(st.lists(records, min_size=1, max_size=8), st.data())
def test_a_torn_or_corrupt_tail_keeps_the_whole_records_before_it(
    written: list[timer_codec.TimerRecord], data: st.DataObject
) -> None:
    """Cut anywhere, or a flipped byte in the last record: the records before it, nothing else."""
    encoded = [timer_codec.encode(r) for r in written]
    whole = b"".join(encoded)
    cut = data.draw(st.integers(0, len(whole) - 1))
    got, valid = timer_codec.decode_all(whole[:cut])
    assert got == written[: len(got)] and valid <= cut
    assert valid == sum(len(e) for e in encoded[: len(got)])
    flip_at = len(whole) - data.draw(st.integers(1, len(encoded[-1])))
    bad = bytearray(whole)
    bad[flip_at] ^= 0xFF
    got, valid = timer_codec.decode_all(bytes(bad))
    assert got == written[:-1] and valid == len(whole) - len(encoded[-1])


def test_the_timer_log_truncates_a_torn_tail_and_appends_after_it(tmp_path: pathlib.Path) -> None:
    """A half-written record at the end is cut at open; the next append follows the good ones."""
    log, _ = timer_log.TimerLog.open(tmp_path)
    first = timer_codec.TimerRecord(K.ENQUEUED, 5, 0, 10, 20, "a")
    log.append([first])
    log.close()
    path = tmp_path / timer_log.DIR_NAME / timer_log.FILE_NAME
    path.write_bytes(path.read_bytes() + timer_codec.encode(first)[:17])
    log, replayed = timer_log.TimerLog.open(tmp_path)
    assert replayed == [first]
    second = timer_codec.TimerRecord(K.DELIVERED, 5, 0, 10, 20, "a")
    log.append([second])
    log.close()
    assert timer_log.TimerLog.open(tmp_path)[1] == [first, second]


def test_the_wheel_hands_out_only_due_entries_earliest_first_and_cancels_by_id() -> None:
    """take_due never returns an entry due after now; cancel removes by message id (and time)."""
    w = wheel.TimerWheel(3)
    for offset, due in enumerate((300, 100, 200)):
        assert w.add(wheel.WheelEntry(due, offset, offset * 10, 10, f"m{offset}"))
    assert w.full and not w.add(wheel.WheelEntry(50, 9, 90, 10, "x"))
    assert w.take_due(99, 10) == []
    assert [e.message_id for e in w.take_due(200, 10)] == ["m1", "m2"]
    assert w.cancel("m0", 301) == [] and w.next_due_ms() == 300
    assert [e.queue_offset for e in w.cancel("m0", 300)] == [0]
    assert len(w) == 0 and w.next_due_ms() is None


def test_delay_levels_parse_like_rocketmq_and_bad_ones_are_refused() -> None:
    """The default text gives the 18 classic levels; a word without a unit is refused."""
    s = schedule_settings.ScheduleSettings()
    assert len(s.delay_levels_ms) == 18 and s.delay_levels_ms[:3] == (1_000, 5_000, 10_000)
    assert s.delay_levels_ms[-1] == 7_200_000
    assert schedule_settings.ScheduleSettings(message_delay_level="500ms 2s").delay_levels_ms == (
        500,
        2_000,
    )
    with pytest.raises(ValueError, match="delay level"):
        schedule_settings.ScheduleSettings(message_delay_level="1s 5")


# -- ScheduleService over a real store with a manual clock ------------------------------------


class Harness:
    """A real store under ``root`` and a ScheduleService on a manual clock."""

    def __init__(self, root: pathlib.Path, manual: clock.ManualClock, **settings: int) -> None:
        self.root = root
        self.clock = manual
        self.settings = schedule_settings.ScheduleSettings(**settings)  # type: ignore[arg-type]
        self.notified: list[str] = []
        self.store = message_store.MessageStore.open(
            root, tiny_settings(commit_log_file_size_bytes=1 << 20), clock=manual
        )
        self.service = self.open_service()

    def open_service(self) -> schedule_service.ScheduleService:
        return schedule_service.ScheduleService.open(
            self.root,
            store=self.store,
            settings=self.settings,
            time=self.clock,
            notify=self.notified.extend,
        )

    def put(self, parked: commit_log.AppendRequest) -> None:
        [result] = self.store.put_messages_sync([parked])
        assert result.status.is_stored

    def send_timer(self, message_id: str, delivery_ms: int, queue_id: int = 2) -> None:
        incoming = request("Real", message_id.encode(), queue_id=queue_id, UNIQ_KEY=message_id)
        self.put(self.service.park(incoming, delivery_ms=delivery_ms))

    def delivered(self, topic: str = "Real", queue_id: int = 2) -> list[message.StoredMessage]:
        got = read(self.store, topic=topic, queue_id=queue_id)
        return list(got.messages)

    def round(self) -> int:
        return asyncio.run(self.service.run_once())

    def close(self) -> None:
        self.service.close()
        self.store.close()


@pytest.fixture
def harness(tmp_path: pathlib.Path) -> Iterator[Harness]:
    h = Harness(tmp_path, clock.ManualClock(start_ms=1_700_000_000_000))
    yield h
    h.close()


def test_a_timer_message_is_written_to_its_topic_when_due_never_before(harness: Harness) -> None:
    """Parked in rmq_sys_wheel_timer, it reaches Real/2 with its id only once its time came."""
    due = harness.clock.now_ms() + 5_000
    harness.send_timer("ID-1", due)
    assert harness.round() == 0 and harness.delivered() == []
    harness.clock.advance_ms(4_999)
    assert harness.round() == 0 and harness.delivered() == []
    harness.clock.advance_ms(1)
    assert harness.round() == 1
    [got] = harness.delivered()
    assert message.message_id_of(got) == "ID-1" and got.body == b"ID-1"
    assert got.store_timestamp_ms >= due and got.properties[P.TIMER_DELIVER_MS] == str(due)
    assert harness.notified == ["Real"]
    assert harness.round() == 0 and len(harness.delivered()) == 1  # once


def test_schedules_survive_a_restart_and_a_recalled_message_stays_cancelled(
    harness: Harness,
) -> None:
    """Three parked, one recalled, service reopened from the timer log: the other two arrive."""
    now = harness.clock.now_ms()
    for i in range(3):
        harness.send_timer(f"ID-{i}", now + 10_000 + i)
    harness.service.recall("ID-1", now + 10_001)
    with pytest.raises(errors.NotFoundError):
        harness.service.recall("ID-1", now + 10_001)
    harness.service.close()
    harness.service = harness.open_service()
    assert harness.service.stats().timer_pending == 2
    harness.clock.advance_ms(20_000)
    assert harness.round() == 2
    assert [message.message_id_of(m) for m in harness.delivered()] == ["ID-0", "ID-2"]
    harness.service.close()
    harness.service = harness.open_service()  # delivered ones are not delivered again
    assert harness.service.stats().timer_pending == 0 and harness.round() == 0


def test_messages_parked_but_not_yet_in_the_log_are_read_from_the_timer_topic(
    harness: Harness,
) -> None:
    """A crash after the store write but before the ENQUEUED record loses no schedule."""
    due = harness.clock.now_ms() + 3_000
    harness.send_timer("ID-9", due)  # stored, the loop has not read it yet
    (harness.root / timer_log.DIR_NAME / timer_log.FILE_NAME).write_bytes(b"")
    harness.service = harness.open_service()
    assert harness.service.stats().timer_pending == 1
    harness.clock.advance_ms(3_000)
    assert harness.round() == 1


def test_delivery_time_beyond_the_maximum_is_refused_and_a_full_wheel_answers_busy(
    tmp_path: pathlib.Path,
) -> None:
    """More than timer_delay_ms_max ahead: ILLEGAL_DELIVERY_TIME; wheel full: TOO_MANY_REQUESTS."""
    h = Harness(tmp_path, clock.ManualClock(), timer_delay_ms_max=60_000, timer_pending_max=1)
    try:
        now = h.clock.now_ms()
        with pytest.raises(errors.IllegalDeliveryTimeError):
            h.service.park(request("Real"), delivery_ms=now + 60_001)
        with pytest.raises(errors.IllegalDeliveryTimeError):
            h.service.park(request("Real"), delivery_ms=None)
        h.send_timer("ID-1", now + 60_000)
        h.round()
        with pytest.raises(errors.TooManyRequestsError):
            h.service.park(request("Real"), delivery_ms=now + 5_000)
        soon = h.service.park(request("Real"), delivery_ms=now + 10)  # within precision
        assert soon.message.topic == "Real"
    finally:
        h.close()


def test_delay_level_messages_wait_their_level_and_progress_is_persisted(
    harness: Harness,
) -> None:
    """Level 2 (5 s) in SCHEDULE_TOPIC_XXXX queue 1: due after 5 s, offset in delayOffset.json."""
    parked = harness.service.park_level(request("Real", b"lvl", queue_id=2, UNIQ_KEY="L1"), 2)
    assert parked.message.topic == topics.SCHEDULE_TOPIC and parked.queue_id == ids.QueueId(1)
    harness.put(parked)
    harness.clock.advance_ms(4_999)
    assert harness.round() == 0
    harness.clock.advance_ms(1)
    assert harness.round() == 1
    [got] = harness.delivered()
    assert message.message_id_of(got) == "L1" and P.DELAY_TIME_LEVEL not in got.properties
    saved = json.loads((harness.root / "config" / "delayOffset.json").read_text())
    assert saved["offsetTable"] == {"2": 1} and saved["progressOffset"] == 1
    harness.service.close()
    harness.service = harness.open_service()
    harness.clock.advance_ms(10_000)
    assert harness.round() == 0 and len(harness.delivered()) == 1
