"""``tables.traffic_stats``: RocketMQ's per-topic and per-group stats items over bounded rings
of minute, hour and day buckets."""

from __future__ import annotations

import pytest

from ariane.broker.tables import traffic_stats

MINUTE_MS, HOUR_MS = 60_000, 3_600_000


class _Clock:
    def __init__(self) -> None:
        self.now_ms = 1_000_000_000  # a bucket boundary of every window

    def __call__(self) -> int:
        return self.now_ms


def test_windows_sum_rate_and_average_per_call() -> None:
    """Two sends (3 then 1 messages) 20 s apart show sum 4, avgpt 2 per send in every window,
        and a tps over the time the item lived, at least one bucket (RocketMQ's first snapshot is
    one sampling interval old); 70 s later the minute
        window is empty while the hour and day keep the 4."""
    clock = _Clock()
    stats = traffic_stats.TrafficStats(clock)
    stats.put("t", 3, 300)
    clock.now_ms += 20_000
    stats.put("t", 1, 100)
    clock.now_ms += 5_000
    found = stats.view("TOPIC_PUT_NUMS", "t")
    assert found is not None
    for window in (found.minute, found.hour, found.day):
        assert (window.sum, window.avgpt) == (4, 2.0)
    assert found.minute.tps == pytest.approx(4 / 25)  # lived 25 s
    assert found.hour.tps == pytest.approx(4 / 600)  # at least one 10 min bucket
    size = stats.view("TOPIC_PUT_SIZE", "t")
    assert size is not None and size.day.sum == 400
    assert stats.topic_put_tps("t") == pytest.approx(4 / 25)

    clock.now_ms += 70_000
    later = stats.view("TOPIC_PUT_NUMS", "t")
    assert later is not None
    assert later.minute == traffic_stats.ZERO
    assert (later.hour.sum, later.day.sum) == (4, 4)
    assert later.hour.tps == pytest.approx(4 / 600)


def test_a_young_item_rate_is_taken_over_one_bucket_at_least() -> None:
    """A send a moment ago reads sum 1 at once (no 10 s sampling lag, unlike RocketMQ), its
    minute tps over one 10 s bucket rather than over a few ms."""
    clock = _Clock()
    stats = traffic_stats.TrafficStats(clock)
    stats.got("g", "t", 5, 50)
    clock.now_ms += 3
    found = stats.view("GROUP_GET_NUMS", traffic_stats.stats_key("t", "g"))
    assert found is not None and found.minute.sum == 5
    assert found.minute.tps == pytest.approx(0.5)
    assert stats.group_get_tps("g", "t") == pytest.approx(0.5)
    assert stats.group_get_tps("g", "other") == 0.0


def test_the_day_window_forgets_what_is_older_than_a_day() -> None:
    """Traffic spread over 30 hours: the day window sums only the last 24 hourly buckets."""
    clock = _Clock()
    stats = traffic_stats.TrafficStats(clock)
    for _ in range(30):
        stats.sent_back("g", "t")
        clock.now_ms += HOUR_MS
    found = stats.view("SNDBCK_PUT_NUMS", "t@g")
    assert found is not None
    assert found.day.sum == 23  # the current hour is empty, 23 full ones before it
    assert found.hour.sum == 0 and found.day.avgpt == 1.0


def test_keys_are_capped_least_recently_updated_first_and_idle_ones_go() -> None:
    """A table never holds more than ``KEYS_MAX`` keys: a new key evicts the least recently
    updated one (not the one touched again); an item idle for over a day goes as soon as any
    new key arrives."""
    clock = _Clock()
    stats = traffic_stats.TrafficStats(clock)
    for n in range(traffic_stats.KEYS_MAX):
        stats.put(f"t{n}", 1, 1)
    stats.put("t0", 1, 1)  # touched again: now the newest
    stats.put("fresh", 1, 1)
    assert stats.view("TOPIC_PUT_NUMS", "t1") is None
    assert stats.view("TOPIC_PUT_NUMS", "t0") is not None
    assert len(stats._puts) == traffic_stats.KEYS_MAX

    clock.now_ms += 24 * HOUR_MS + MINUTE_MS
    stats.put("after-a-day", 1, 1)
    assert len(stats._puts) == 1


def test_deleted_topics_and_groups_are_forgotten_and_unknown_names_find_nothing() -> None:
    """forget_topic drops the topic's put item and its topic@group items; forget_group the
    group's items of every topic; a name not kept here (broker totals) finds nothing."""
    clock = _Clock()
    stats = traffic_stats.TrafficStats(clock)
    stats.put("t", 1, 1)
    stats.got("g", "t", 1, 1)
    stats.got("g", "u", 1, 1)
    stats.got("h", "u", 1, 1)
    stats.sent_back("g", "t")
    stats.forget_topic("t")
    assert stats.view("TOPIC_PUT_NUMS", "t") is None
    assert stats.view("GROUP_GET_NUMS", "t@g") is None
    assert stats.view("SNDBCK_PUT_NUMS", "t@g") is None
    stats.forget_group("g")
    assert stats.view("GROUP_GET_NUMS", "u@g") is None
    assert stats.view("GROUP_GET_NUMS", "u@h") is not None
    assert stats.view("BROKER_PUT_NUMS", "DefaultCluster") is None
    stats.put("t", 0, 0)  # nothing stored: no item
    assert stats.view("TOPIC_PUT_NUMS", "t") is None
