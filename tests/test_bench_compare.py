"""``bench.compare`` summarises A/B rounds into medians and Ariane/RocketMQ ratios, flags noisy
runs, and refuses bad arguments (no benchmark is run here)."""

from __future__ import annotations

import pathlib

import pytest
from bench import compare


def _sample(
    metric: str, system: str, round_index: int, value: float, **details: object
) -> compare.Sample:
    return compare.Sample(metric, "ASYNC_FLUSH", system, round_index, value, dict(details))


def test_summary_takes_the_ratio_of_medians() -> None:
    """The ratio is Ariane's median over RocketMQ's, each median over that system's rounds."""
    samples = [
        _sample("send x1 msgs/s", "ariane", 0, 100.0, quiet=True, ext_cores=0.1),
        _sample("send x1 msgs/s", "rocketmq", 0, 400.0, quiet=True, ext_cores=0.1),
        _sample("send x1 msgs/s", "ariane", 1, 300.0, quiet=True, ext_cores=0.1),
        _sample("send x1 msgs/s", "rocketmq", 1, 600.0, quiet=True, ext_cores=0.1),
    ]
    (row,) = compare.summary(samples)
    assert row["ariane"] == {"median": 200.0, "min": 100.0, "max": 300.0}
    assert row["rocketmq"]["median"] == 500.0
    assert row["ratio"] == pytest.approx(0.4)
    assert "200 [100-300]" in compare.table([row])


def test_table_flags_noisy_runs_errors_and_missing_systems() -> None:
    """A run above the outside-load limit, failed calls and a missing system are all shown."""
    samples = [
        _sample("simple drain msgs/s", "ariane", 0, 10.0, quiet=False, ext_cores=0.9),
        _sample("simple drain msgs/s", "rocketmq", 0, 20.0, quiet=True, ext_cores=0.0, errors=3),
        _sample("RSS idle broker MiB", "ariane", 0, 60.0),
    ]
    rows = compare.summary(samples)
    text = compare.table(rows)
    assert "ariane: ext cores max 0.90, 1 run(s) not quiet" in text
    assert "rocketmq: 3 failed calls" in text
    assert rows[1]["ratio"] is None
    assert "not measured" in text


def test_plot_writes_a_png(tmp_path: pathlib.Path) -> None:
    """The plot of the ratios is a PNG file."""
    samples = [_sample("send x1 msgs/s", s, 0, v) for s, v in (("ariane", 1.0), ("rocketmq", 2.0))]
    path = tmp_path / "ratios.png"
    compare.plot(compare.summary(samples), path)
    assert path.read_bytes().startswith(b"\x89PNG")


def test_bad_sizes_are_refused() -> None:
    """Message counts outside 1..200000 stop the command before anything starts."""
    with pytest.raises(SystemExit):
        compare.parse(["--drain-messages", "0"])
