"""``rates.TpsSampler``: RocketMQ's 10 s / 1 min / 10 min rates from the broker's totals."""

from __future__ import annotations

import pytest

from ariane.broker.remoting import rates


class _Clock:
    def __init__(self) -> None:
        self.now_s = 0.0

    def __call__(self) -> float:
        return self.now_s


def test_rates_per_window_from_the_totals() -> None:
    """100 msgs/s in and 10 out for the last 10 s after 50 s of nothing gives 100/10 over
    10 s and the 60 s of history averaged over 1 and 10 min (the time the broker has)."""
    clock, totals = _Clock(), [0, 0]
    sampler = rates.TpsSampler(lambda: (totals[0], totals[1]), clock)
    for second in range(61):
        clock.now_s = float(second)
        if second > 50:
            totals[0] += 100
            totals[1] += 10
        sampler.sample()
    puts, gets = sampler.rates()
    assert puts == pytest.approx((100.0, 1000 / 60, 1000 / 60))
    assert gets == pytest.approx((10.0, 100 / 60, 100 / 60))
    assert rates.rocketmq_text(puts) == "100.0000 16.6667 16.6667"


def test_a_fresh_sampler_answers_zero_and_the_ring_is_bounded() -> None:
    """With one sample the rates are 0 (no time has passed); the ring never holds more than
    ``SAMPLES_MAX`` samples, so the 10-minute rate forgets what is older."""
    clock, totals = _Clock(), [0, 0]
    sampler = rates.TpsSampler(lambda: (totals[0], totals[1]), clock)
    assert sampler.rates() == ((0.0, 0.0, 0.0), (0.0, 0.0, 0.0))
    totals[0] = 10_000  # an old burst, then 2000 quiet seconds
    for second in range(1, 2001):
        clock.now_s = float(second)
        sampler.sample()
    assert len(sampler._ring) <= rates.SAMPLES_MAX
    assert sampler.rates()[0] == (0.0, 0.0, 0.0)


def test_broker_stats_over_a_minute_an_hour_and_a_day_stay_bounded() -> None:
    """BROKER_PUT_NUMS/BROKER_GET_NUMS (315): after 2 hours at 1 msg/s in and 2 out, sampled
    every 10 s, the minute window sums about 60 and the hour about 3600 at 1 msg/s, the day
    window everything since start; the coarse rings keep 7 and 25 samples at most."""
    clock, totals = _Clock(), [0, 0]
    sampler = rates.TpsSampler(lambda: (totals[0], totals[1]), clock)
    for step in range(721):  # 2 h in 10 s steps
        clock.now_s = step * 10.0
        totals[0], totals[1] = step * 10, step * 20
        sampler.sample()
    puts, gets = sampler.stats()
    assert puts.minute.sum == 60 and puts.minute.tps == pytest.approx(1.0)
    assert puts.hour.tps == pytest.approx(1.0) and 3000 <= puts.hour.sum <= 3600
    assert (puts.day.sum, gets.day.sum) == (7200, 14400)
    assert gets.minute.tps == pytest.approx(2.0) and puts.day.avgpt == 0.0
    assert [len(ring) for ring in sampler._coarse] == [7, 3]
