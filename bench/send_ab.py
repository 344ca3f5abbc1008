"""``python -m bench.send_ab``: this checkout's broker against an older commit's, same machine.

``bench.compare`` ratios against RocketMQ move with the machine: a CPU three times slower (the
``sum(range(1000))`` calibration read 8.8 µs on 2026-11-23 and 26-28 µs on 2026-11-28) costs
the Python broker more than RocketMQ's JIT-compiled one and its fsync-bound latency, so a ratio
recorded on one day is no baseline for another's. The question "did the code regress?" needs
both codes on the same machine at the same time; this benchmark answers it (perf.md §2.1:
interleaved A/B rounds, a quiet gate before each run).

It checks ``--baseline`` (a commit; default the 2026-11-23 baseline of issue 10's condition,
``bench/results/compare-2026-11-23T000908Z.md``) out into a temporary git worktree, builds its
venv there (``make .venv/.installed``: PyPI), then per flush mode runs ``--rounds`` rounds of
baseline, current, baseline, current… Each run is ``bench/send_ab_child.py`` under the tree's
own interpreter and ``PYTHONPATH``: a fresh ``ariane dev`` cluster of that tree, an untimed
warm-up, then ``--messages`` sends by one official-client producer process, one synchronous
send at a time (the ``send x1`` row of ``bench.compare``). Recorded per run: msgs/s and the
broker's CPU per message (owner process, its busiest threads, front-end workers; utime + stime
from ``/proc``). The table gives the median over rounds and current/baseline.

Results: ``bench/results/send_ab-<UTC stamp>.json`` and ``.md`` (unless ``--no-record``).
The worktree is removed at the end.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from typing import Any

import bench
from ariane.benchmark import machine, report

BASELINE = "f8fd1c787c22"
"""The commit ``bench/results/compare-2026-11-23T000908Z.md`` measured."""
FLUSH_MODES = ("SYNC_FLUSH", "ASYNC_FLUSH")
CHILD = pathlib.Path(__file__).resolve().with_name("send_ab_child.py")
RUN_TIMEOUT_S = 600.0
"""Longest a single run may take (cluster start, warm-up, timed sends, stop)."""
BUILD_TIMEOUT_S = 1200.0
"""Longest the baseline's venv build may take."""
QUIET_BUSY_CORES_MAX = 0.25
QUIET_WAIT_S = 30.0
RESULTS_NAME = "send_ab"


@dataclasses.dataclass(frozen=True, slots=True)
class Run:
    """One timed run of one tree."""

    tree: str
    flush: str
    round_index: int
    messages: int
    seconds: float
    owner_cpu_s: float
    owner_threads_cpu_s: list[float]
    workers_cpu_s: float
    gate_busy_cores: float

    @property
    def rate(self) -> float:
        """Messages per second."""
        return self.messages / max(self.seconds, 1e-9)

    def per_message_us(self, cpu_s: float) -> float:
        """``cpu_s`` per message, µs."""
        return cpu_s / max(self.messages, 1) * 1e6


def build_baseline(commit: str, where: pathlib.Path) -> pathlib.Path:
    """Check ``commit`` out at ``where`` (a detached worktree) and build its venv there.

    Raises:
        subprocess.CalledProcessError: git or make failed (their output is shown).
    """
    subprocess.run(
        ["git", "-C", str(bench.REPO), "worktree", "add", "--detach", str(where), commit],
        check=True,
    )
    subprocess.run(["make", ".venv/.installed"], cwd=where, check=True, timeout=BUILD_TIMEOUT_S)
    return where


def run_once(tree: pathlib.Path, label: str, flush: str, round_index: int, opts: Options) -> Run:
    """One child run of ``tree``'s broker; raises ``RuntimeError`` with its output if it fails."""
    gate = machine.wait_for_quiet(QUIET_BUSY_CORES_MAX, QUIET_WAIT_S)
    env = {**os.environ, "PYTHONPATH": str(tree)}
    args = [str(tree / ".venv" / "bin" / "python"), str(CHILD), flush]
    args += [str(opts.messages), str(opts.warmup_messages)]
    done = subprocess.run(
        args, cwd=tree, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"{label} run failed ({done.returncode}): {done.stderr[-3000:]}")
    got = json.loads(lines[-1])
    result = Run(
        tree=label,
        flush=flush,
        round_index=round_index,
        messages=int(got["messages"]),
        seconds=float(got["seconds"]),
        owner_cpu_s=float(got["owner_cpu_s"]),
        owner_threads_cpu_s=[float(v) for v in got["owner_threads_cpu_s"]],
        workers_cpu_s=float(got["workers_cpu_s"]),
        gate_busy_cores=gate.busy_cores,
    )
    threads = ", ".join(f"{result.per_message_us(v):.0f}" for v in result.owner_threads_cpu_s[:3])
    print(
        f"{flush} round {round_index} {label}: {result.rate:.0f} msgs/s, owner "
        f"{result.per_message_us(result.owner_cpu_s):.0f} µs/msg (threads {threads}), workers "
        f"{result.per_message_us(result.workers_cpu_s):.0f} µs/msg",
        file=sys.stderr,
        flush=True,
    )
    return result


def _rate(run: Run) -> float:
    return run.rate


def _owner_us(run: Run) -> float:
    return run.per_message_us(run.owner_cpu_s)


def _workers_us(run: Run) -> float:
    return run.per_message_us(run.workers_cpu_s)


def markdown(recorded: dict[str, Any], runs: Sequence[Run]) -> str:
    """Per flush mode and figure: the median of each tree over the rounds and current/baseline."""
    rows: list[list[str]] = []
    figures: tuple[tuple[str, Callable[[Run], float]], ...] = (
        ("send x1 msgs/s", _rate),
        ("owner CPU µs/msg", _owner_us),
        ("workers CPU µs/msg", _workers_us),
    )
    for flush in recorded["settings"]["flush_modes"]:
        for name, figure in figures:
            base = [figure(r) for r in runs if r.flush == flush and r.tree == "baseline"]
            mine = [figure(r) for r in runs if r.flush == flush and r.tree == "current"]
            if not base or not mine:
                continue
            b, m = statistics.median(base), statistics.median(mine)
            spread = f"{min(mine):,.0f}-{max(mine):,.0f} vs {min(base):,.0f}-{max(base):,.0f}"
            rows.append([flush, name, f"{b:,.0f}", f"{m:,.0f}", f"{m / max(b, 1e-9):.2f}", spread])
    headers = ["flush", "figure", "baseline", "current", "current/baseline", "range cur vs base"]
    info = recorded["machine"]
    return "\n".join(
        [
            "# This checkout's broker against an older commit's, same machine, interleaved",
            "",
            f"Written by `bench/send_ab.py`. Command: `{recorded['command']}`",
            "",
            f"- {recorded['started_utc']} to {recorded['ended_utc']}; baseline "
            f"{recorded['settings']['baseline']}, current {info['git_commit'][:12]}; "
            f"{recorded['settings']['rounds']} rounds of baseline, current per flush mode.",
            f"- Machine: calibration sum(range(1000)) {recorded['calibration_us']:.2f} µs, load "
            f"average at start {info['load_average_at_start']}.",
            "- Rows: one official Python client producer, one synchronous send at a time "
            f"({recorded['settings']['messages']} messages after "
            f"{recorded['settings']['warmup_messages']} untimed), a fresh `ariane dev` "
            "cluster per run; CPU = utime + stime over the timed span. Cells: medians.",
            "",
            report.markdown_table(headers, rows),
        ]
    )


@dataclasses.dataclass(frozen=True, slots=True)
class Options:
    """The command line."""

    baseline: str
    flush_modes: tuple[str, ...]
    rounds: int
    messages: int
    warmup_messages: int
    record: bool
    command: str


def parse(argv: Sequence[str] | None) -> Options:
    """The command line as ``Options``."""
    parser = argparse.ArgumentParser(
        prog="python -m bench.send_ab",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--baseline", default=BASELINE, help="commit to compare against")
    parser.add_argument("--flush", default=",".join(FLUSH_MODES), help="comma list")
    parser.add_argument("--rounds", type=int, default=3, choices=range(1, 8))
    parser.add_argument("--messages", type=int, default=4000)
    parser.add_argument("--warmup-messages", type=int, default=1000)
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args(argv)
    modes = tuple(m for m in args.flush.split(",") if m)
    if not modes or not set(modes) <= set(FLUSH_MODES):
        parser.error(f"--flush takes a comma list of {', '.join(FLUSH_MODES)}")
    for name in ("messages", "warmup_messages"):
        if not 1 <= getattr(args, name) <= 100_000:
            parser.error(f"--{name.replace('_', '-')} must be 1..100000")
    return Options(
        baseline=args.baseline,
        flush_modes=modes,
        rounds=args.rounds,
        messages=args.messages,
        warmup_messages=args.warmup_messages,
        record=not args.no_record,
        command=report.command_line("bench.send_ab"),
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Build the baseline, run the interleaved rounds, print and record the table."""
    opts = parse(argv)
    started = datetime.datetime.now(datetime.UTC)
    scratch = pathlib.Path(tempfile.mkdtemp(prefix=".bench-send-ab-", dir=bench.REPO))
    worktree = scratch / "baseline"
    runs: list[Run] = []
    try:
        info = machine.machine_info(scratch, bench.REPO)
        calibration = machine.calibration_us()
        build_baseline(opts.baseline, worktree)
        for flush in opts.flush_modes:
            for round_index in range(opts.rounds):
                for label, tree in (("baseline", worktree), ("current", bench.REPO)):
                    runs.append(run_once(tree, label, flush, round_index, opts))
    finally:
        if worktree.exists():
            subprocess.run(
                ["git", "-C", str(bench.REPO), "worktree", "remove", "--force", str(worktree)],
                check=False,
            )
        shutil.rmtree(scratch, ignore_errors=True)
    settings = dataclasses.asdict(opts)
    for name in ("command", "record"):
        settings.pop(name)
    recorded: dict[str, Any] = {
        "command": opts.command,
        "started_utc": started.isoformat(timespec="seconds"),
        "ended_utc": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "settings": settings,
        "machine": info,
        "calibration_us": calibration,
        "runs": [dataclasses.asdict(r) for r in runs],
    }
    page = markdown(recorded, runs)
    print(page)
    if opts.record:
        stamp = started.strftime("%Y-%m-%dT%H%M%SZ")
        paths = report.write_results(RESULTS_NAME, stamp, recorded, page, bench.RESULTS_DIR)
        print(f"recorded {paths[0]} and {paths[1]}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
