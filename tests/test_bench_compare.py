"""``bench.compare`` summarises A/B rounds into medians and Ariane/RocketMQ ratios, flags noisy
runs, and refuses bad arguments; ``bench.broker_cpu`` sets security on against off (no
benchmark is run here)."""

from __future__ import annotations

import pathlib
import subprocess

import pytest
from bench import broker_cpu, compare


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


def test_done_events_of_drivers_run_together_combine_into_one_timing() -> None:
    """Messages add up over the longest driver's clock, latencies (µs, one per call) are pooled,
    and errors add up; a push drain's empty latency list adds nothing."""
    done = [
        {"event": "done", "messages": 640, "seconds": 2.0, "errors": 1, "latencies_us": [900, 100]},
        {"event": "done", "messages": 360, "seconds": 4.0, "errors": 0, "latencies_us": [500]},
        {"event": "done", "messages": 0, "seconds": 0.0, "errors": 2, "latencies_us": []},
    ]
    timing, errors = compare.combine_done(done)
    assert timing.messages == 1000
    assert timing.messages_per_s == pytest.approx(250.0)
    assert timing.latency_us(50) == pytest.approx(500.0)
    assert timing.latency_us(99) == pytest.approx(900.0)
    assert errors == 3


def test_broker_cpu_per_message_counts_only_the_named_processes_once() -> None:
    """The broker's tree (owner + workers) is summed, other processes and repeats are not:
    (1.5 + 0.5) s over 10,000 messages is 200 µs/msg; no message gives no figure."""
    cpu_s = {0: 9.0, 100: 1.5, 101: 0.5, 200: 3.0}
    assert compare.cpu_us_per_message(cpu_s, (100, 101, 101, 102), 10_000) == pytest.approx(200.0)
    assert compare.cpu_us_per_message(cpu_s, (100,), 0) is None


def test_cpu_columns_take_medians_and_their_ratio_on_msgs_rows_only() -> None:
    """Each system's broker CPU µs/msg is the median over its runs; the ratio is Ariane's over
    RocketMQ's; a run without the figure is left out, and latency rows get no CPU columns."""
    samples = [
        _sample("java send x1 msgs/s", "ariane", 0, 900.0, broker_cpu_us_per_msg=100.0),
        _sample("java send x1 msgs/s", "ariane", 1, 800.0, broker_cpu_us_per_msg=140.0),
        _sample("java send x1 msgs/s", "rocketmq", 0, 3000.0, broker_cpu_us_per_msg=60.0),
        _sample("java send x1 msgs/s", "rocketmq", 1, 3100.0),
        _sample("java send x1 p50 ms", "ariane", 0, 1.0, broker_cpu_us_per_msg=100.0),
    ]
    send, latency = compare.summary(samples)
    assert send["ariane_cpu_us_per_msg"] == {"median": 120.0, "min": 100.0, "max": 140.0}
    assert send["rocketmq_cpu_us_per_msg"]["median"] == 60.0
    assert send["cpu_ratio"] == pytest.approx(2.0)
    assert "cpu_ratio" not in latency
    text = compare.table([send, latency])
    assert "| 120 [100-140] | 60 | 2.00 |" in text


def test_java_rows_are_a_row_group_with_bounded_sizes() -> None:
    """``--rows java`` is accepted with its message counts; a count below one batch is refused."""
    opts = compare.parse(["--rows", "java", "--java-send-messages", "5000"])
    assert opts.rows == ("java",) and opts.java_send_messages == 5000
    with pytest.raises(SystemExit):
        compare.parse(["--rows", "java", "--java-batch-messages", "10"])


def test_driver_events_are_read_past_lines_that_are_not_json(tmp_path: pathlib.Path) -> None:
    """A JVM's or client library's own stdout lines before an event do not break the reading of
    the driver's JSON lines (the classic Java driver runs inside such a JVM)."""
    lines = 'SLF4J: No providers\n{"event": "progress"}\n{"event": "ready", "n": 1}\n'
    with subprocess.Popen(["printf", lines], stdout=subprocess.PIPE, text=True) as proc:
        event = compare._read_event(proc, "ready", tmp_path / "driver.log")
    assert event == {"event": "ready", "n": 1}


def test_broker_cpu_security_rows_give_the_on_off_ratio_of_medians() -> None:
    """``--security off,on`` is parsed (unknown values refused) and the table gives each row for
    both settings, with the ratio of the broker's median µs/msg on over off on the ``on`` line."""
    opts = broker_cpu.parse(["--rows", "send1", "--security", "off,on", "--no-record"])
    assert opts.security == ("off", "on")
    with pytest.raises(SystemExit):
        broker_cpu.parse(["--security", "tls"])

    def sample(security: str, round_index: int, owner_cpu_s: float) -> broker_cpu.Sample:
        return broker_cpu.Sample(
            "send1", round_index, 1000, 2.0, owner_cpu_s, 0.1, 0.0, False, security
        )

    samples = [sample("off", 0, 0.2), sample("on", 0, 0.3), sample("off", 1, 0.4)]
    recorded = {
        "command": "x",
        "started_utc": "t",
        "settings": {
            "rows": ["send1"],
            "security": ["off", "on"],
            "flush": "F",
            "rounds": 2,
            "send_messages": 1000,
            "drain_messages": 1000,
        },
        "machine": {"git_commit": "0" * 40, "load_average_at_start": [0.0]},
    }
    page = broker_cpu.markdown(recorded, samples)
    # off: median of 300 and 500 µs = 400 µs; on: 400 µs → 1.00
    assert "| send1 | off | 300 | 100 | 400 |  |" in page
    assert "| send1 | on | 300 | 100 | 400 | 1.00 |" in page


def test_broker_cpu_leaves_out_rows_cut_short() -> None:
    """A row whose drivers counted fewer messages than asked (send errors or the deadline on a
    saturated machine: 0 messages gave 5,400,000 µs/msg) is left out of the medians and the
    ratio, the table says how many rounds it used, and each round's complete pair is listed."""

    def sample(security: str, round_index: int, messages: int, cpu_s: float) -> broker_cpu.Sample:
        return broker_cpu.Sample(
            "send1", round_index, messages, 2.0, cpu_s, 0.0, 0.0, False, security
        )

    samples = [
        sample("off", 0, 4000, 4.0),  # 1000 µs
        sample("on", 0, 0, 5.4),  # cut short: left out
        sample("off", 1, 2835, 7.9),  # cut short: left out
        sample("on", 1, 4000, 4.4),  # 1100 µs
        sample("off", 2, 4000, 4.4),  # 1100 µs
        sample("on", 2, 4000, 4.4),  # 1100 µs
    ]
    recorded = {
        "command": "x",
        "started_utc": "t",
        "settings": {
            "rows": ["send1"],
            "security": ["off", "on"],
            "flush": "F",
            "rounds": 3,
            "send_messages": 4000,
            "drain_messages": 10000,
        },
        "machine": {"git_commit": "0" * 40, "load_average_at_start": [0.0]},
    }
    page = broker_cpu.markdown(recorded, samples)
    assert "| send1 | off | 1050 | 0 | 1050 |  | 2,000 | 0.00 | 2/3 | no |" in page
    assert "| send1 | on | 1100 | 0 | 1100 | 1.05 | 2,000 | 0.00 | 2/3 | no |" in page
    assert "- send1: round 2: 1100/1100 = 1.00" in page
