"""``python -m bench.compare``: the same workloads against Ariane and Apache RocketMQ 5.3.3.

Both systems are driven by the official ``rocketmq-python-client`` 5.1.2
(``bench/official_client_driver.py``, one process per producer or consumer), 1 KiB bodies:

* ``send xN``: N producer processes, one thread each, synchronous ``Producer.send`` (one
  message per SendMessage call); msgs/s over the span all N share (they start together on a
  "go" line), p50/p99 of the per-send latency of all N;
* ``simple drain``: one process, 8 threads of ``SimpleConsumer.receive(32)`` + one ack per
  message, reading what the send rows wrote (a fresh group, from the first offset);
* ``push drain``: one ``PushConsumer`` process (8 consumption threads), clock from the first
  listener call to the last;
* before the timed rows, ``--warmup-messages`` untimed sends (8 threads) warm the JVM's JIT
  and both systems' routes, channels and files;
* ``cold start``: from launching the name server to the topic being routable (``ready``), and
  to the first send acknowledged by a fresh official-client process (``first ack``);
* ``RSS``: resident memory (``VmRSS`` of ``/proc/<pid>/status``) of the broker process (for
  RocketMQ the JVM holding broker + LOCAL-mode proxy) and of broker + name server, idle (after
  start and the first-ack probe) and the maximum sampled every 0.2 s during the load rows.

Order (specs/perf.md §2.1): for each flush mode (ASYNC_FLUSH, then SYNC_FLUSH with the send rows
only), ``--rounds`` rounds, each starting a fresh Ariane cluster (``ariane.dev.dev_cluster``)
and then a fresh RocketMQ peer (``bench.peers.rocketmq.peer``): A/B/A/B. Before each timed run
the quiet-machine gate waits up to ``--quiet-wait-s`` for < 0.25 busy cores; each run records
``ext_cores`` (busy cores minus this process tree: bench, brokers, drivers). The table gives the
median [min-max] over rounds and the ratio Ariane/RocketMQ of the medians. Results:
``bench/results/compare-<UTC stamp>.json``, ``.md`` (table + command) and ``.png`` (ratios).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import datetime
import json
import os
import pathlib
import secrets
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

from ariane import dev
from bench import client_bench, machine, measure, process_cpu, report
from bench.peers.rocketmq import peer

SYSTEMS = ("ariane", "rocketmq")
FLUSH_MODES = ("ASYNC_FLUSH", "SYNC_FLUSH")
QUIET_BUSY_CORES_MAX = 0.25
"""The quiet-machine threshold of perf.md §2.1, busy cores."""
RUN_TIMEOUT_S = 240.0
"""Longest one driver run may take before it is abandoned."""
RSS_SAMPLE_INTERVAL_S = 0.2
"""How often the RSS sampler reads /proc during load rows."""
DRAIN_THREADS = 8
"""Threads of the SimpleConsumer driver and consumption threads of the PushConsumer."""
BODY_BYTES = 1024
"""Message body size, bytes."""
RESULTS_NAME = "compare"


@dataclasses.dataclass(frozen=True, slots=True)
class Options:
    """One ``bench.compare`` invocation.

    Attributes:
        rounds: A/B rounds per flush mode (each starts both systems afresh).
        send1_messages: messages of the one-producer send row.
        producers: producer processes of the many-producer send row.
        send_n_messages_per_process: messages each of those producers sends.
        drain_messages: messages each drain row reads (at most what the send rows wrote).
        warmup_messages: messages sent untimed before the timed rows (after idle RSS).
        flush_modes: which flush modes run (SYNC_FLUSH runs only the send rows).
        quiet_wait_s: longest wait for a quiet machine before each run, seconds.
        record: write the results files.
        results_dir: where they go.
        command: the command line, as recorded.
    """

    rounds: int
    send1_messages: int
    producers: int
    send_n_messages_per_process: int
    drain_messages: int
    warmup_messages: int
    flush_modes: tuple[str, ...]
    quiet_wait_s: float
    record: bool
    results_dir: pathlib.Path
    command: str


@dataclasses.dataclass(frozen=True, slots=True)
class Cluster:
    """One running system: where the official client connects and which processes to watch."""

    system: str
    endpoints: str
    topic: str
    launched: float
    ready_s: float
    broker_pid: int
    namesrv_pid: int


# -- the two systems -------------------------------------------------------------------------


def _child_with(words: Sequence[str]) -> int:
    """The pid of the one descendant whose command line holds every word of ``words``."""
    for pid in process_cpu.descendants(os.getpid()):
        try:
            cmdline = pathlib.Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        text = [part.decode(errors="replace") for part in cmdline]
        if all(any(word in part for part in text) for word in words):
            return pid
    raise RuntimeError(f"no child process with {words} in its command line")


@contextlib.contextmanager
def ariane_cluster(base: pathlib.Path, flush: str, tag: str) -> Iterator[Cluster]:
    """A fresh ``ariane dev`` cluster with an 8-queue topic; its data is removed afterwards."""
    data_dir = base / f"ariane-{tag}"
    launched = time.monotonic()
    try:
        with dev.dev_cluster(data_dir, namesrv_port=0, flush_disk_type=flush) as endpoints:
            topic = f"compare-{tag}"
            asyncio.run(client_bench.create_topic(endpoints.namesrv, topic))
            ready = time.monotonic() - launched
            yield Cluster(
                "ariane",
                endpoints.namesrv,
                topic,
                launched,
                ready,
                _child_with(["ariane", "broker", "--store-dir"]),
                _child_with(["ariane", "namesrv"]),
            )
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)


@contextlib.contextmanager
def rocketmq_cluster(flush: str, tag: str) -> Iterator[Cluster]:
    """A fresh RocketMQ 5.3.3 name server + broker/proxy with its 8-queue ``BenchTopic``."""
    launched = time.monotonic()
    with peer.rocketmq_peer(peer.FlushMode(flush)) as endpoints:
        ready = time.monotonic() - launched
        yield Cluster(
            "rocketmq",
            endpoints.grpc,
            endpoints.topic,
            launched,
            ready,
            _child_with([peer.PROXY_MAIN]),
            _child_with([peer.NAMESRV_MAIN]),
        )


def start(
    system: str, base: pathlib.Path, flush: str, tag: str
) -> contextlib.AbstractContextManager[Cluster]:
    """The context manager that runs ``system``."""
    if system == "ariane":
        return ariane_cluster(base, flush, tag)
    return rocketmq_cluster(flush, tag)


# -- resident memory -------------------------------------------------------------------------


def rss_bytes(pid: int) -> int:
    """``VmRSS`` of a live process, bytes (0 if it is gone)."""
    try:
        for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


class RssSampler:
    """Samples the RSS of a broker and a name server in a thread; keeps the maxima.

    Args:
        cluster: whose processes to watch.
    """

    def __init__(self, cluster: Cluster) -> None:
        self._pids = (cluster.broker_pid, cluster.namesrv_pid)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self.broker_max = 0
        self.total_max = 0

    def _sample(self) -> None:
        while True:
            broker, namesrv = (rss_bytes(pid) for pid in self._pids)
            self.broker_max = max(self.broker_max, broker)
            self.total_max = max(self.total_max, broker + namesrv)
            if self._stop.wait(RSS_SAMPLE_INTERVAL_S):
                return

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


# -- the official client's driver --------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class DriverResult:
    """What one or more driver processes reported together."""

    timing: measure.Timing
    load: machine.RunLoad
    errors: int


def _spawn_driver(args: Sequence[str], log: pathlib.Path) -> subprocess.Popen[str]:
    with log.open("ab") as log_file:
        return subprocess.Popen(
            [sys.executable, str(client_bench.DRIVER), *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log_file,
            text=True,
        )


def _read_event(proc: subprocess.Popen[str], wanted: str, log: pathlib.Path) -> dict[str, Any]:
    assert proc.stdout is not None
    while line := proc.stdout.readline():
        event: dict[str, Any] = json.loads(line)
        if event["event"] == wanted:
            return event
    raise RuntimeError(f"the official client's driver exited before {wanted!r}; see {log}")


def run_drivers(commands: Sequence[Sequence[str]], disk: str | None) -> DriverResult:
    """Start one driver per command, let them go together, and combine their reports.

    Throughput is all messages over the longest driver's clock; latencies are pooled.

    Raises:
        RuntimeError: a driver exited before it finished (its stderr is in the log named).
    """
    log = pathlib.Path(tempfile.gettempdir()) / "ariane-bench-compare-driver.log"
    procs = [_spawn_driver(c, log) for c in commands]
    meter = process_cpu.TreeLoadMeter(disk)

    def kill_all() -> None:
        for proc in procs:
            proc.kill()  # our own children, by their handles

    killer = threading.Timer(RUN_TIMEOUT_S, kill_all)
    killer.start()
    try:
        for proc in procs:
            _read_event(proc, "ready", log)
        meter.start()
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        done = [_read_event(proc, "done", log) for proc in procs]
        load = meter.stop()
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.close()
        for proc in procs:
            proc.wait(timeout=60)
    finally:
        killer.cancel()
        for proc in procs:
            if proc.poll() is None:
                proc.kill()  # our own child, by its handle
                proc.wait()
    latencies = [us * 1000 for event in done for us in event["latencies_us"]]
    messages = sum(int(event["messages"]) for event in done)
    seconds = max(float(event["seconds"]) for event in done)
    timing = measure.Timing(messages, len(latencies), messages * BODY_BYTES, seconds, latencies)
    return DriverResult(timing, load, sum(int(event["errors"]) for event in done))


def driver_args(kind: str, cluster: Cluster, count: int, threads: int, group: str) -> list[str]:
    """One driver's command line (``kind`` is produce, consume or push)."""
    args = [kind, "--endpoints", cluster.endpoints, "--topic", cluster.topic]
    args += ["--count", str(count), "--threads", str(threads), "--wait-go"]
    args += ["--deadline-s", str(RUN_TIMEOUT_S - 30), "--body-bytes", str(BODY_BYTES)]
    return args if kind == "produce" else [*args, "--group", group]


def first_ack_s(cluster: Cluster) -> float:
    """Seconds from the cluster's launch to one send acknowledged by a fresh driver process."""
    proc = _spawn_driver(
        driver_args("produce", cluster, 1, 1, ""),
        pathlib.Path(tempfile.gettempdir()) / "ariane-bench-compare-driver.log",
    )
    assert proc.stdin is not None
    try:
        proc.stdin.write("go\n")
        proc.stdin.flush()
        event = _read_event(proc, "done", pathlib.Path("driver log"))
        acked = time.monotonic()
        proc.stdin.close()
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()  # our own child, by its handle
            proc.wait()
    if event["messages"] != 1:
        raise RuntimeError(f"{cluster.system}: the first send was not acknowledged")
    return acked - cluster.launched


# -- one cluster's workloads -------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class Sample:
    """One figure of one run.

    Attributes:
        metric: the row's name, e.g. ``send x8 msgs/s``.
        flush: the broker's flush mode.
        system: ``ariane`` or ``rocketmq``.
        round_index: the round, from 0.
        value: the figure, in the unit the metric names.
        details: gate, outside load and errors of the run that gave it.
    """

    metric: str
    flush: str
    system: str
    round_index: int
    value: float
    details: dict[str, Any]


def _details(gate: machine.GateResult, result: DriverResult) -> dict[str, Any]:
    return {
        "quiet": gate.quiet,
        "gate_busy_cores": round(gate.busy_cores, 2),
        "ext_cores": round(result.load.ext_cores, 2),
        "own_cores": round(result.load.own_cores, 2),
        "load_1m": round(result.load.load_1m, 2),
        "errors": result.errors,
        "messages": result.timing.messages,
        "seconds": round(result.timing.seconds, 3),
    }


def _timed_rows(
    name: str, commands: Sequence[Sequence[str]], latencies: bool, opts: Options, disk: str | None
) -> list[tuple[str, float, dict[str, Any]]]:
    gate = machine.wait_for_quiet(QUIET_BUSY_CORES_MAX, opts.quiet_wait_s)
    result = run_drivers(commands, disk)
    details = _details(gate, result)
    rows = [(f"{name} msgs/s", result.timing.messages_per_s, details)]
    if latencies:
        rows.append((f"{name} p50 ms", result.timing.latency_us(50) / 1e3, details))
        rows.append((f"{name} p99 ms", result.timing.latency_us(99) / 1e3, details))
    return rows


def workloads(
    cluster: Cluster, flush: str, opts: Options, disk: str | None, token: str
) -> list[tuple[str, float, dict[str, Any]]]:
    """Every row on one running cluster: cold start, RSS, sends, and (ASYNC) the drains."""
    rows: list[tuple[str, float, dict[str, Any]]] = [
        ("cold start: ready s", cluster.ready_s, {}),
        ("cold start: first ack s", first_ack_s(cluster), {}),
    ]
    rows.append(("RSS idle broker MiB", rss_bytes(cluster.broker_pid) / 2**20, {}))
    idle_total = rss_bytes(cluster.broker_pid) + rss_bytes(cluster.namesrv_pid)
    rows.append(("RSS idle broker+namesrv MiB", idle_total / 2**20, {}))
    if opts.warmup_messages:  # untimed: warms the JVM's JIT and both systems' routes and files
        warmup = driver_args("produce", cluster, opts.warmup_messages, opts.producers, "")
        run_drivers([warmup], disk)
    one = [driver_args("produce", cluster, opts.send1_messages, 1, "")]
    rows += _timed_rows("send x1", one, True, opts, disk)
    many = [
        driver_args("produce", cluster, opts.send_n_messages_per_process, 1, "")
        for _ in range(opts.producers)
    ]
    with RssSampler(cluster) as sampler:
        rows += _timed_rows(f"send x{opts.producers}", many, True, opts, disk)
        if flush == "ASYNC_FLUSH":
            written = opts.warmup_messages + opts.send1_messages
            written += opts.producers * opts.send_n_messages_per_process
            count = min(opts.drain_messages, written)
            for kind, name in (("consume", "simple drain"), ("push", "push drain")):
                group = f"compare-{kind}-{token}"
                command = [driver_args(kind, cluster, count, DRAIN_THREADS, group)]
                rows += _timed_rows(name, command, False, opts, disk)
    rows.append(("RSS under load broker MiB", sampler.broker_max / 2**20, {}))
    rows.append(("RSS under load broker+namesrv MiB", sampler.total_max / 2**20, {}))
    return rows


def run_all(opts: Options, base: pathlib.Path, log: Any) -> list[Sample]:
    """Every flush mode, every round, Ariane then RocketMQ (A/B/A/B)."""
    disk = machine.disk_of(base)
    samples: list[Sample] = []
    for flush in opts.flush_modes:
        for round_index in range(opts.rounds):
            for system in SYSTEMS:
                token = f"{flush[:1].lower()}{round_index}-{secrets.token_hex(3)}"
                log(f"{flush} round {round_index + 1}/{opts.rounds}: {system} starting")
                with start(system, base, flush, token) as cluster:
                    rows = workloads(cluster, flush, opts, disk, token)
                for metric, value, details in rows:
                    samples.append(Sample(metric, flush, system, round_index, value, details))
                    log(f"  {system} {flush} {metric}: {value:,.2f} {details}")
    return samples


# -- summary, table, plot ----------------------------------------------------------------------


def summary(samples: Sequence[Sample]) -> list[dict[str, Any]]:
    """One row per (flush, metric): median [min, max] per system and the ratio of medians."""
    groups: dict[tuple[str, str], dict[str, list[Sample]]] = {}
    for sample in samples:
        by_system = groups.setdefault((sample.flush, sample.metric), {})
        by_system.setdefault(sample.system, []).append(sample)
    rows: list[dict[str, Any]] = []
    for (flush, metric), by_system in groups.items():
        row: dict[str, Any] = {"flush": flush, "metric": metric}
        for system in SYSTEMS:
            mine = by_system.get(system, [])
            spread = measure.Spread.of([s.value for s in mine]) if mine else None
            row[system] = spread.as_dict() if spread else None
            row[f"{system}_ext_cores_max"] = max(
                (float(s.details.get("ext_cores", 0.0)) for s in mine), default=0.0
            )
            row[f"{system}_unquiet_runs"] = sum(not s.details.get("quiet", True) for s in mine)
            row[f"{system}_errors"] = sum(int(s.details.get("errors", 0)) for s in mine)
        ariane, rocketmq = row["ariane"], row["rocketmq"]
        comparable = ariane is not None and rocketmq is not None and rocketmq["median"] > 0
        row["ratio"] = ariane["median"] / rocketmq["median"] if comparable else None
        rows.append(row)
    return rows


def _cell(spread: dict[str, float] | None, metric: str) -> str:
    if spread is None:
        return "not measured"
    digits = 0 if "msgs/s" in metric or "MiB" in metric else 2
    return measure.Spread(spread["median"], spread["min"], spread["max"]).format(digits)


def table(rows: Sequence[dict[str, Any]]) -> str:
    """The Markdown table of ``summary`` rows."""
    headers = ["flush", "row", "Ariane", "RocketMQ 5.3.3", "Ariane/RocketMQ", "notes"]
    cells = []
    for row in rows:
        notes = []
        for system in SYSTEMS:
            ext, unquiet = row[f"{system}_ext_cores_max"], row[f"{system}_unquiet_runs"]
            if ext > QUIET_BUSY_CORES_MAX or unquiet:
                notes.append(f"{system}: ext cores max {ext:.2f}, {unquiet} run(s) not quiet")
            if row[f"{system}_errors"]:
                notes.append(f"{system}: {row[f'{system}_errors']} failed calls")
        ratio = f"{row['ratio']:.2f}" if row["ratio"] is not None else "-"
        metric = row["metric"]
        cells.append(
            [
                row["flush"],
                metric,
                _cell(row["ariane"], metric),
                _cell(row["rocketmq"], metric),
                ratio,
                "; ".join(notes),
            ]
        )
    return report.markdown_table(headers, cells)


def plot(rows: Sequence[dict[str, Any]], path: pathlib.Path) -> None:
    """A horizontal bar chart of the ratios Ariane/RocketMQ (log scale), written to ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    shown = [r for r in rows if r["ratio"] is not None]
    labels = [f"{r['metric']} ({r['flush'].split('_')[0].lower()})" for r in shown]
    ratios = [r["ratio"] for r in shown]
    figure, axes = pyplot.subplots(figsize=(9, 0.35 * len(shown) + 1.5))
    better = [(v >= 1) == ("msgs/s" in r["metric"]) for r, v in zip(shown, ratios, strict=True)]
    axes.barh(labels, ratios, color=["tab:blue" if b else "tab:orange" for b in better])
    axes.axvline(1.0, color="black", linewidth=1)
    axes.set_xscale("log")
    axes.invert_yaxis()
    axes.set_xlabel(
        "Ariane / RocketMQ 5.3.3, median of rounds, log scale "
        "(blue: Ariane better; msgs/s higher is better, ms/s/MiB lower)"
    )
    axes.set_title("Official Python client 5.1.2, 1 KiB, this 2-core VM")
    for index, value in enumerate(ratios):
        axes.text(value, index, f" {value:.2f}", va="center", fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    pyplot.close(figure)


def markdown(recorded: dict[str, Any]) -> str:
    """The Markdown page of one invocation: command, conditions, table, what is missing."""
    info = recorded["machine"]
    return "\n".join(
        [
            "# Ariane vs Apache RocketMQ 5.3.3, official Python client",
            "",
            "Written by `python -m bench.compare` (`bench/compare.py`; its docstring defines every",
            "row). Command:",
            "",
            "```",
            recorded["command"],
            "```",
            "",
            f"- {recorded['started_utc']} to {recorded['finished_utc']}; settings "
            f"`{json.dumps(recorded['settings'])}`.",
            f"- Machine: {info['cpu_count']} x {info['cpu_model']}, Python {info['python']}, "
            f"calibration sum(range(1000)) {info['calibration_sum_range_1000_us']} µs, load "
            f"average at start {[round(x, 2) for x in info['load_average_at_start']]}, "
            f"commit {str(info['git_commit'])[:12]}.",
            "- Cells: median [min-max] over the rounds (A/B/A/B, fresh clusters each round). "
            "Ratio = Ariane median / RocketMQ median: higher is better for msgs/s, lower is "
            "better for ms, s and MiB.",
            "- Notes flag rows where a run's outside load (`ext_cores`) exceeded 0.25 cores or "
            "the quiet gate (< 0.25 busy cores, perf.md §2.1) ran out of patience.",
            "",
            table(recorded["summary"]),
            "",
            "Not measured by this benchmark (issue 4 item 2): " + recorded["not_measured"],
            "",
        ]
    )


NOT_MEASURED = (
    "send → receive end-to-end latency at a fixed rate (needs a paced producer and timestamps "
    "carried in the body; not built yet); recovery time after SIGKILL with 1 GiB in the commit "
    "log (filling 1 GiB at these rates takes minutes per run and per system); Ariane's batching "
    "client rows next to the perf.md limits (see `ariane bench produce`, "
    "bench/results/client-*.md, which measures them without a RocketMQ column)."
)


def parse(argv: Sequence[str] | None) -> Options:
    """The command line as ``Options``."""
    parser = argparse.ArgumentParser(
        prog="python -m bench.compare",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--rounds", type=int, default=2, choices=range(1, 6))
    parser.add_argument("--send1-messages", type=int, default=4000)
    parser.add_argument("--producers", type=int, default=8, choices=range(1, 17))
    parser.add_argument("--send-n-messages-per-process", type=int, default=2000)
    parser.add_argument("--drain-messages", type=int, default=20000)
    parser.add_argument("--warmup-messages", type=int, default=2000)
    parser.add_argument("--flush", choices=["async", "sync", "both"], default="both")
    parser.add_argument("--quiet-wait-s", type=float, default=30.0)
    parser.add_argument("--no-record", action="store_true")
    parser.add_argument("--results-dir", type=pathlib.Path, default=report.RESULTS_DIR)
    args = parser.parse_args(argv)
    modes = {"async": FLUSH_MODES[:1], "sync": FLUSH_MODES[1:], "both": FLUSH_MODES}
    for name in ("send1_messages", "send_n_messages_per_process", "drain_messages"):
        if not 1 <= getattr(args, name) <= 200_000:
            parser.error(f"--{name.replace('_', '-')} must be 1..200000")
    return Options(
        rounds=args.rounds,
        send1_messages=args.send1_messages,
        producers=args.producers,
        send_n_messages_per_process=args.send_n_messages_per_process,
        drain_messages=args.drain_messages,
        warmup_messages=max(args.warmup_messages, 0),
        flush_modes=modes[args.flush],
        quiet_wait_s=min(max(args.quiet_wait_s, 1.0), 120.0),
        record=not args.no_record,
        results_dir=args.results_dir,
        command=report.command_line("bench.compare"),
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the comparison, print the table, record JSON, Markdown and PNG.

    ``--replot <json>`` only redraws the PNG next to a recorded JSON file.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["--replot"] and len(args) == 2:
        recorded_path = pathlib.Path(args[1])
        plot(json.loads(recorded_path.read_text())["summary"], recorded_path.with_suffix(".png"))
        return 0
    opts = parse(argv)
    started = datetime.datetime.now(datetime.UTC)
    base = pathlib.Path(tempfile.mkdtemp(prefix=".bench-compare-", dir=client_bench.REPO))

    def log(text: str) -> None:
        print(f"{time.strftime('%H:%M:%S')} {text}", file=sys.stderr, flush=True)

    try:
        info = machine.machine_info(base, client_bench.REPO)
        samples = run_all(opts, base, log)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    finished = datetime.datetime.now(datetime.UTC)
    settings = dataclasses.asdict(opts)
    for name in ("command", "record", "results_dir"):
        settings.pop(name)
    recorded: dict[str, Any] = {
        "command": opts.command,
        "started_utc": started.isoformat(timespec="seconds"),
        "finished_utc": finished.isoformat(timespec="seconds"),
        "settings": settings,
        "machine": info,
        "samples": [dataclasses.asdict(s) for s in samples],
        "summary": summary(samples),
        "not_measured": NOT_MEASURED,
    }
    page = markdown(recorded)
    print(page)
    if opts.record:
        stamp = started.strftime("%Y-%m-%dT%H%M%SZ")
        json_path, md_path = report.write_results(
            RESULTS_NAME, stamp, recorded, page, opts.results_dir
        )
        png_path = json_path.with_suffix(".png")
        plot(recorded["summary"], png_path)
        log(f"recorded {json_path}, {md_path} and {png_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
