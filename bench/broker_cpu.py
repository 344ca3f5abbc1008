"""``python -m bench.broker_cpu``: the broker's CPU per message under the official client.

Throughput on this shared 2-core VM moves with the neighbours' load; the CPU the broker spends
per message moves much less, so this is the figure to compare before/after a change of the hot
paths (issue 10: the receive and SYNC_FLUSH send paths). Per round it starts a fresh
``ariane dev`` cluster (``bench.compare.ariane_cluster``, the broker's default front-end
workers unless ``--workers`` is given), warms it up with untimed sends, and runs the rows of
``--rows``, each with the drivers ``bench.compare`` uses (``official_client_driver.py``):

* ``send1`` / ``send8``: 1 or 8 producer processes, one synchronous ``Producer.send`` at a time
  each (``--send-messages`` in all);
* ``simple``: one SimpleConsumer process, 8 threads of ``receive(32)`` + one ack per message,
  a fresh group reading ``--drain-messages`` from the first offset (the topic is topped up
  untimed first);
* ``push``: one PushConsumer process (8 consumption threads), a fresh group, the same count;
* ``java-send1`` / ``java-send8`` / ``java-batch64`` / ``java-push``: the rows of
  ``bench.compare --rows java`` (the official classic Java client over Remoting, one JVM per
  row, ``bench.classic_java``): one ``DefaultMQProducer`` shared by 1 or 8 threads sending
  ``--send-messages``; one thread sending ``--java-batch-messages`` in ``send(Collection)`` calls
  of 64; a ``DefaultMQPushConsumer`` (8 consumption threads, a fresh group) reading
  ``--drain-messages`` after an untimed Java top-up. Remoting is served by the store owner, so
  these rows load the owner only.

For each row it records the CPU (utime + stime from ``/proc/<pid>/stat``, from the drivers'
"go" to their "done") of the broker's own process (``owner``: the store, the POP state, the
handlers) and of its front-end worker processes (``workers``: gRPC), each divided by the
messages the drivers counted: µs per message. ``--py-spy PATH`` also samples the owner process
with py-spy during every row (``--format raw``, 100 Hz, non-blocking; the sampling costs the
owner a little CPU, so figures from such a run are marked) and prints the 25 largest self and
inclusive shares per row; with ``--flamegraphs DIR`` each sampled process's profile is also
kept there as collapsed stacks (``.txt``) and drawn as a flame graph (``.svg``,
``bench.flamegraph``), and the Markdown lists the 10 largest self-time frames of each row.
``--cprofile DIR`` runs the owner's event-loop thread under cProfile during every row instead (a
``sitecustomize`` hook put first on the children's ``PYTHONPATH``: SIGUSR1 starts it, SIGUSR2
writes ``DIR/<row>-<round>.prof``; it times with the thread's CPU clock, so time the loop spends
preempted or blocked does not count; the profiler roughly doubles the owner's CPU, so only its
call counts and shares mean something) and prints the largest own and cumulative times.

``--security off,on`` measures the cost of security on the same workload: every round runs a
plain cluster and then one started as ``ariane dev --secure`` (TLS enforcing on every port,
ACL 2.0 authentication and authorization on; ``bench.compare.ariane_cluster(secure=True)``), whose
drivers sign every call as its Super user over TLS (the official client's ``Credentials`` and
``tls_enable``); the table then gives each row for both and the ratio on/off of the broker's
µs per message (issue 21: the goal is < 1.10). The default is ``off`` alone.

Results: ``bench/results/broker_cpu-<UTC stamp>.json`` and ``.md`` (unless ``--no-record``).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import dataclasses
import datetime
import json
import os
import pathlib
import pstats
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from typing import Any

import bench
from ariane.benchmark import machine, process_cpu, report
from ariane.common import event_loop
from bench import classic_java, compare, flamegraph

JAVA_ROWS = ("java-send1", "java-send8", "java-batch64", "java-push")
"""The classic Java client's rows (``bench.compare``'s ``java`` rows)."""
ROWS = ("send1", "send8", "simple", "push", *JAVA_ROWS)
"""What ``--rows`` selects from."""
SECURITY = ("off", "on")
"""What ``--security`` selects from: a plain cluster, or ``ariane dev --secure``."""
PRODUCERS = 8
"""Producer processes of the ``send8`` row (and of the untimed top-up)."""
PY_SPY_RATE_HZ = 100
"""py-spy samples per second."""
PY_SPY_TOP = 25
"""Lines of each py-spy summary."""
FLAME_TOP = 10
"""Self-time frames per profile in the Markdown of a ``--flamegraphs`` run."""
RESULTS_NAME = "broker_cpu"
PROFILE_WRITE_TIMEOUT_S = 30.0
"""Longest wait for the owner to write its cProfile file after SIGUSR2."""
CPROFILE_HOOK = """\
import os, sys
_dir = os.environ.get("ARIANE_CPROFILE_DIR")
if _dir and "broker" in sys.argv and "--store-dir" in sys.argv:
    import cProfile, signal, time
    _state = {}
    def _start(signum, frame):
        _state["prof"] = cProfile.Profile(time.thread_time)
        _state["prof"].enable()
    def _stop(signum, frame):
        prof = _state.pop("prof", None)
        if prof is not None:
            prof.disable()
            path = os.path.join(_dir, "%d.prof" % os.getpid())
            prof.dump_stats(path + ".tmp")
            os.replace(path + ".tmp", path)
    signal.signal(signal.SIGUSR1, _start)
    signal.signal(signal.SIGUSR2, _stop)
"""
"""``sitecustomize`` of ``--cprofile``: SIGUSR1/SIGUSR2 start/stop cProfile in the broker."""


@dataclasses.dataclass(frozen=True, slots=True)
class Options:
    """The command line."""

    flush: str
    rows: tuple[str, ...]
    rounds: int
    send_messages: int
    drain_messages: int
    warmup_messages: int
    workers: int | None
    broker_role: str
    security: tuple[str, ...]
    py_spy: pathlib.Path | None
    py_spy_native: bool
    cprofile: pathlib.Path | None
    record: bool
    command: str
    render: pathlib.Path | None = None
    java_batch_messages: int = 64_000
    flamegraphs: pathlib.Path | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class Sample:
    """One row of one round: messages and the broker's CPU over the timed span."""

    row: str
    round_index: int
    messages: int
    seconds: float
    owner_cpu_s: float
    workers_cpu_s: float
    ext_cores: float
    profiled: bool
    security: str = "off"
    profiles: tuple[dict[str, Any], ...] = ()
    """With ``--flamegraphs``: per sampled process its files, sample counts and top frames."""

    @property
    def owner_us(self) -> float:
        """Owner-process CPU per message, µs."""
        return self.owner_cpu_s / max(self.messages, 1) * 1e6

    @property
    def workers_us(self) -> float:
        """Front-end workers' CPU per message, µs."""
        return self.workers_cpu_s / max(self.messages, 1) * 1e6


def _java_produce(
    cluster: compare.Cluster, count: int, threads: int, batch: int, warmup: int
) -> list[str]:
    return classic_java.produce_args(
        cluster.classic_namesrv,
        cluster.topic,
        count=count,
        threads=threads,
        batch=batch,
        body_bytes=compare.BODY_BYTES,
        warmup=warmup,
        deadline_s=compare.RUN_TIMEOUT_S - 30,
    )


def _java_commands(row: str, cluster: compare.Cluster, opts: Options, token: str) -> list[str]:
    warmup = compare.JAVA_WARMUP_MESSAGES  # untimed, in the row's JVM: the client's JIT
    if row == "java-send1":
        return _java_produce(cluster, opts.send_messages, 1, 1, warmup)
    if row == "java-send8":
        threads = compare.JAVA_PRODUCER_THREADS
        return _java_produce(cluster, opts.send_messages, threads, 1, warmup)
    if row == "java-batch64":
        return _java_produce(cluster, opts.java_batch_messages, 1, compare.JAVA_BATCH, warmup)
    assert row == "java-push", row
    return classic_java.push_args(
        cluster.classic_namesrv,
        cluster.topic,
        group=f"cpu-{row}-{token}",
        count=opts.drain_messages,
        threads=compare.DRAIN_THREADS,
        deadline_s=compare.RUN_TIMEOUT_S - 30,
    )


def _commands(row: str, cluster: compare.Cluster, opts: Options, token: str) -> list[list[str]]:
    if row in JAVA_ROWS:
        return [_java_commands(row, cluster, opts, token)]
    if row == "send1":
        return [compare.driver_args("produce", cluster, opts.send_messages, 1, "")]
    if row == "send8":
        share = -(-opts.send_messages // PRODUCERS)
        return [compare.driver_args("produce", cluster, share, 1, "") for _ in range(PRODUCERS)]
    kind = {"simple": "consume", "push": "push"}[row]
    group = f"cpu-{row}-{token}"
    threads = compare.DRAIN_THREADS
    return [compare.driver_args(kind, cluster, opts.drain_messages, threads, group)]


def _start_py_spy(
    exe: pathlib.Path, pid: int, out: pathlib.Path, native: bool = False
) -> subprocess.Popen[bytes]:
    args = [str(exe), "record", "--pid", str(pid), "--format", "raw"]
    args += ["--native"] if native else ["--nonblocking"]  # py-spy: --native pauses the process
    args += ["--rate", str(PY_SPY_RATE_HZ), "--output", str(out)]
    return subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _stop_py_spy(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGINT)  # our own child, by its handle: py-spy writes on SIGINT
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _frame_name(frame: str) -> str:
    """``func (path/to/module.py:12)`` → ``func module.py:12``."""
    return frame.split(" (")[0] + " " + frame.rsplit("/", 1)[-1].rstrip(")")


def py_spy_summary(raw: str, top: int = PY_SPY_TOP) -> str:
    """Self and inclusive shares of the frames in py-spy's ``--format raw`` (collapsed stacks:
    ``frame;frame;... count`` per line), the ``top`` largest of each, as text. Samples waiting
    in the event loop's ``select`` are counted apart (idle), not in the shares."""
    own: collections.Counter[str] = collections.Counter()
    inclusive: collections.Counter[str] = collections.Counter()
    total = idle = 0
    for line in raw.splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = [_frame_name(f) for f in stack.split(";")]
        if frames[-1].startswith("EpollSelector.select"):
            idle += count
            continue
        total += count
        own[frames[-1]] += count
        for frame in set(frames):
            inclusive[frame] += count
    lines = [f"{total} busy samples ({idle} idle in select); self:"]
    lines += [f"  {100 * n / max(total, 1):5.1f}% {f}" for f, n in own.most_common(top)]
    lines.append("inclusive:")
    lines += [f"  {100 * n / max(total, 1):5.1f}% {f}" for f, n in inclusive.most_common(top)]
    return "\n".join(lines)


def _collect_profile(directory: pathlib.Path, pid: int, name: str) -> None:
    """Stop the owner's cProfile, wait for its file, keep it as ``<name>.prof``, print it."""
    written = directory / f"{pid}.prof"
    os.kill(pid, signal.SIGUSR2)
    deadline = time.monotonic() + PROFILE_WRITE_TIMEOUT_S
    while not written.exists() and time.monotonic() < deadline:
        time.sleep(0.1)  # polling a file the broker writes, with a deadline
    if not written.exists():
        print(f"no profile from {pid} within {PROFILE_WRITE_TIMEOUT_S} s", file=sys.stderr)
        return
    kept = written.rename(directory / f"{name}.prof")
    stats = pstats.Stats(str(kept), stream=sys.stderr)
    print(f"cProfile {name} ({kept}):", file=sys.stderr)
    stats.sort_stats("tottime").print_stats(PY_SPY_TOP)
    stats.sort_stats("cumulative").print_stats(PY_SPY_TOP)


@contextlib.contextmanager
def _cprofile_hook(directory: pathlib.Path | None) -> Iterator[None]:
    """Children started inside see the ``CPROFILE_HOOK`` first on their ``PYTHONPATH``."""
    if directory is None:
        yield
        return
    directory.mkdir(parents=True, exist_ok=True)
    saved = dict(os.environ)
    with tempfile.TemporaryDirectory(prefix="broker-cpu-hook-") as hook:
        (pathlib.Path(hook) / "sitecustomize.py").write_text(CPROFILE_HOOK)
        path = os.environ.get("PYTHONPATH", "")
        os.environ["PYTHONPATH"] = f"{hook}:{path}" if path else hook
        os.environ["ARIANE_CPROFILE_DIR"] = str(directory.resolve())
        try:
            yield
        finally:
            os.environ.clear()
            os.environ.update(saved)


def _results_link(path: pathlib.Path) -> str:
    """``path`` as the Markdown in ``bench/results/`` links it: relative when it lies below."""
    try:
        return str(path.resolve().relative_to(bench.RESULTS_DIR.resolve()))
    except ValueError:
        return str(path.resolve())


def _profiles(
    spies: dict[str, tuple[pathlib.Path, subprocess.Popen[bytes]]],
    row: str,
    round_index: int,
    opts: Options,
) -> tuple[dict[str, Any], ...]:
    """Print each py-spy summary; with ``--flamegraphs`` keep its stacks, draw its SVG and
    note its ``FLAME_TOP`` self-time frames."""
    kept: list[dict[str, Any]] = []
    for name, (out, _) in spies.items():
        if not out.exists():
            continue
        raw = out.read_text()
        print(f"py-spy {row} round {round_index}, {name} ({out}):", file=sys.stderr)
        print(py_spy_summary(raw), file=sys.stderr, flush=True)
        if opts.flamegraphs is None:
            continue
        role = name.split()[0]  # "owner" or "worker": pids differ between runs
        stem = f"{row}-r{round_index}-{role}{len(kept)}"
        profile = flamegraph.parse(raw)
        opts.flamegraphs.mkdir(parents=True, exist_ok=True)
        (opts.flamegraphs / f"{stem}.txt").write_text(raw)
        title = f"Ariane broker {role}, {row}, round {round_index}, py-spy {PY_SPY_RATE_HZ} Hz"
        (opts.flamegraphs / f"{stem}.svg").write_text(flamegraph.svg(profile, title))
        top = flamegraph.self_shares(profile, FLAME_TOP)
        kept.append(
            {
                "process": name,
                "svg": _results_link(opts.flamegraphs / f"{stem}.svg"),
                "stacks": _results_link(opts.flamegraphs / f"{stem}.txt"),
                "busy_samples": profile.busy,
                "idle_samples": profile.idle,
                "self_top": [[frame, n, round(share, 4)] for frame, n, share in top],
            }
        )
    return tuple(kept)


def _run_row(
    row: str,
    cluster: compare.Cluster,
    opts: Options,
    round_index: int,
    token: str,
    security: str,
    java: compare.JavaDriver | None = None,
) -> Sample:
    workers = process_cpu.descendants(cluster.broker_pid)
    gate = machine.wait_for_quiet(compare.QUIET_BUSY_CORES_MAX, 30.0)
    spies: dict[str, tuple[pathlib.Path, subprocess.Popen[bytes]]] = {}
    if opts.py_spy is not None:
        sampled = [] if row in JAVA_ROWS else workers  # Remoting is served by the owner alone
        for name, pid in [("owner", cluster.broker_pid), *(("worker", w) for w in sampled)]:
            out = pathlib.Path(tempfile.gettempdir()) / f"broker-cpu-{row}-{round_index}-{pid}.txt"
            spies[f"{name} {pid}"] = (out, _start_py_spy(opts.py_spy, pid, out, opts.py_spy_native))
        time.sleep(0.5)  # let py-spy attach before the timed span (not a synchronisation)
    if opts.cprofile is not None:
        os.kill(cluster.broker_pid, signal.SIGUSR1)  # our own child: the hook starts cProfile
    try:
        program = java.program if java is not None and row in JAVA_ROWS else None
        result = compare.run_drivers(_commands(row, cluster, opts, token), None, program)
    finally:
        for _, spy in spies.values():
            _stop_py_spy(spy)
        if opts.cprofile is not None:
            _collect_profile(opts.cprofile, cluster.broker_pid, f"{row}-{round_index}")
    cpu = result.cpu_s_by_pid
    sample = Sample(
        row=row,
        round_index=round_index,
        messages=result.timing.messages,
        seconds=result.timing.seconds,
        owner_cpu_s=cpu.get(cluster.broker_pid, 0.0),
        workers_cpu_s=sum(cpu.get(pid, 0.0) for pid in workers),
        ext_cores=result.load.ext_cores,
        profiled=bool(spies) or opts.cprofile is not None,
        security=security,
        profiles=_profiles(spies, row, round_index, opts),
    )
    print(
        f"{row} security {security} round {round_index}: {sample.messages} msgs in "
        f"{sample.seconds:.1f} s, owner "
        f"{sample.owner_us:.0f} µs/msg, workers {sample.workers_us:.0f} µs/msg, ext_cores "
        f"{sample.ext_cores:.2f} (gate busy {gate.busy_cores:.2f})",
        file=sys.stderr,
        flush=True,
    )
    return sample


def _top_up(
    row: str, cluster: compare.Cluster, opts: Options, written: int, java: compare.JavaDriver | None
) -> int:
    """Before a drain row: send (untimed) what the topic lacks of ``--drain-messages`` plus
    ``DRAIN_SLACK_MESSAGES``; the official Python client for ``simple``/``push``, the Java
    client in batches of 64 for ``java-push``. Returns the messages now written."""
    missing = opts.drain_messages + compare.DRAIN_SLACK_MESSAGES - written
    if missing <= 0:
        return written
    if row == "java-push":
        assert java is not None
        threads, batch = compare.JAVA_PRODUCER_THREADS, compare.JAVA_BATCH
        fill = _java_produce(cluster, max(missing, threads * batch), threads, batch, 0)
        return written + compare.run_drivers([fill], None, java.program).timing.messages
    share = -(-missing // PRODUCERS)
    fill = compare.driver_args("produce", cluster, share, 1, "")
    return written + compare.run_drivers([fill] * PRODUCERS, None).timing.messages


def run_round(
    base: pathlib.Path,
    opts: Options,
    round_index: int,
    security: str = "off",
    java: compare.JavaDriver | None = None,
) -> list[Sample]:
    """One fresh cluster (secured when ``security`` is ``on``), the warm-up, then every row of
    ``opts.rows`` (``java``: the built Java driver, needed by the ``JAVA_ROWS``)."""
    token = f"{round_index}-{security}-{int(time.time())}"
    samples: list[Sample] = []
    with (
        _cprofile_hook(opts.cprofile),
        compare.ariane_cluster(
            base,
            opts.flush,
            token,
            workers=opts.workers,
            broker_role=opts.broker_role,
            secure=security == "on",
        ) as cluster,
    ):
        warmup = compare.driver_args("produce", cluster, opts.warmup_messages, PRODUCERS, "")
        written = compare.run_drivers([warmup], None).timing.messages
        for row in opts.rows:
            if row in ("simple", "push", "java-push"):
                written = _top_up(row, cluster, opts, written, java)
            sample = _run_row(row, cluster, opts, round_index, token, security, java)
            samples.append(sample)
            if row.startswith("send"):
                written += sample.messages
            elif row in JAVA_ROWS[:3]:
                written += sample.messages + compare.JAVA_WARMUP_MESSAGES
    return samples


def complete(sample: Sample, settings: dict[str, Any]) -> bool:
    """Whether a row's drivers counted every message asked (``--send-messages`` for a send
    row, ``--drain-messages`` for a drain): a row cut short by send errors or the drivers'
    deadline (a saturated machine) divides its CPU by too few messages, or by none."""
    if sample.row == "java-batch64":
        wanted = settings.get("java_batch_messages", 0)
    elif sample.row in ("send1", "send8", "java-send1", "java-send8"):
        wanted = settings["send_messages"]
    else:
        wanted = settings["drain_messages"]
    # a push drain counts N - 1: the messages inside the span from the first listener call
    return sample.messages >= int(wanted) - (1 if sample.row in ("push", "java-push") else 0)


def _broker_us(sample: Sample) -> float:
    return sample.owner_us + sample.workers_us


def _security_ratio(samples: Sequence[Sample], row: str) -> str:
    """Broker µs/msg with security on over off for ``row`` (medians), or "" without both."""
    by = {
        security: [_broker_us(s) for s in samples if (s.row, s.security) == (row, security)]
        for security in SECURITY
    }
    if not by["off"] or not by["on"]:
        return ""
    return f"{statistics.median(by['on']) / max(statistics.median(by['off']), 1e-9):.2f}"


def _paired_ratios(samples: Sequence[Sample], rows: Sequence[str]) -> list[str]:
    """Per row, the on/off ratio of each round in which both ran complete (a round's two
    clusters run minutes apart, so they share more of the neighbours' load than the rounds)."""
    lines = []
    for row in rows:
        pairs = []
        for round_index in sorted({s.round_index for s in samples}):
            found = {s.security: s for s in samples if (s.row, s.round_index) == (row, round_index)}
            if "off" in found and "on" in found:
                off, on = _broker_us(found["off"]), _broker_us(found["on"])
                pairs.append(f"round {round_index}: {on:.0f}/{off:.0f} = {on / off:.2f}")
        lines.append(f"- {row}: " + ("; ".join(pairs) if pairs else "no complete pair"))
    return lines


def markdown(recorded: dict[str, Any], samples: Sequence[Sample]) -> str:
    """The table: per row (and security setting) the median over its complete rounds
    (``complete``) of owner and worker µs/msg, and the on/off ratio of the broker's µs/msg
    when both ran; then, with ``--security off,on``, the ratio of each round's complete pair."""
    settings, info = recorded["settings"], recorded["machine"]
    used = [s for s in samples if complete(s, settings)]
    rows = []
    for row in settings["rows"]:
        for security in settings.get("security", ["off"]):
            every = [s for s in samples if (s.row, s.security) == (row, security)]
            mine = [s for s in used if (s.row, s.security) == (row, security)]
            if not mine:
                if every:
                    rows.append([row, security, *["-"] * 6, f"0/{len(every)}", "-"])
                continue
            owner = statistics.median(s.owner_us for s in mine)
            workers = statistics.median(s.workers_us for s in mine)
            rate = statistics.median(s.messages / max(s.seconds, 1e-9) for s in mine)
            ext = max(s.ext_cores for s in mine)
            ratio = _security_ratio(used, row) if security == "on" else ""
            cells = [f"{owner:.0f}", f"{workers:.0f}", f"{owner + workers:.0f}", ratio]
            cells += [f"{rate:,.0f}", f"{ext:.2f}", f"{len(mine)}/{len(every)}"]
            rows.append([row, security, *cells, "yes" if mine[0].profiled else "no"])
    headers = ["row", "security", "owner µs/msg", "workers µs/msg", "broker µs/msg"]
    headers += ["on/off", "msgs/s", "ext_cores", "rounds used", "py-spy"]
    lines = [
        "# Broker CPU per message, official clients",
        "",
        f"Written by `bench/broker_cpu.py`. Command: `{recorded['command']}`",
        "",
        f"- {recorded['started_utc']}, flush {settings['flush']}, rounds "
        f"{settings['rounds']}, commit {info['git_commit'][:12]}, load average at start "
        f"{info['load_average_at_start']}, broker event loop "
        f"`{settings.get('event_loop', 'asyncio')}` (`$ARIANE_EVENT_LOOP`).",
        "- Cells: median over the rounds whose drivers counted every message asked (rounds "
        "used; a row cut short by errors or the deadline is left out); ext_cores: the largest "
        "outside load of those rounds; on/off: broker µs/msg with security on over off.",
        "",
        report.markdown_table(headers, rows),
    ]
    if set(settings.get("security", ["off"])) == set(SECURITY):
        lines += ["", "On/off per round (broker µs/msg, complete pairs only):", ""]
        lines += _paired_ratios(used, settings["rows"])
    lines += _profile_tables(samples)
    return "\n".join(lines)


def _profile_tables(samples: Sequence[Sample]) -> list[str]:
    """Per profiled row and process: the ``FLAME_TOP`` self-time frames (share of the busy
    samples) and the flame graph's file."""
    lines: list[str] = []
    for sample in samples:
        for profile in sample.profiles:
            lines += [
                "",
                f"### {sample.row}, round {sample.round_index}, {profile['process']}: "
                f"[{profile['svg']}]({profile['svg']})",
                "",
                f"{profile['busy_samples']} busy samples ({profile['idle_samples']} waiting in "
                "the selector or a condition, left out); self time:",
                "",
            ]
            rows = [
                [f"{100 * share:.1f}%", str(n), f"`{frame}`"]
                for frame, n, share in profile["self_top"]
            ]
            lines.append(report.markdown_table(["self", "samples", "frame"], rows))
    return lines


def render(path: pathlib.Path) -> str:
    """Rewrite the Markdown of a recorded run from its JSON (``--render``); returns it."""
    recorded = json.loads(path.read_text())
    names = {f.name for f in dataclasses.fields(Sample)}
    samples: list[Sample] = []
    for fields in recorded["samples"]:
        values: dict[str, Any] = {k: v for k, v in fields.items() if k in names}
        values["profiles"] = tuple(values.get("profiles", ()))
        samples.append(Sample(**values))
    page = markdown(recorded, samples)
    path.with_suffix(".md").write_text(page + "\n")
    return page


def parse(argv: Sequence[str] | None) -> Options:
    """The command line as ``Options``."""
    parser = argparse.ArgumentParser(
        prog="python -m bench.broker_cpu",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--flush", choices=("ASYNC_FLUSH", "SYNC_FLUSH"), default="ASYNC_FLUSH")
    parser.add_argument("--rows", default=",".join(ROWS), help="comma list of " + ",".join(ROWS))
    parser.add_argument("--rounds", type=int, default=1, choices=range(1, 6))
    parser.add_argument("--send-messages", type=int, default=4000)
    parser.add_argument("--drain-messages", type=int, default=20_000)
    parser.add_argument("--warmup-messages", type=int, default=2000)
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument(
        "--broker-role",
        choices=("", "ASYNC_MASTER", "SYNC_MASTER"),
        default="",
        help="run the broker as this master with one slave (default: a lone broker)",
    )
    parser.add_argument(
        "--security",
        default="off",
        help="comma list of off,on: plain cluster, `ariane dev --secure` (interleaved per round)",
    )
    parser.add_argument("--py-spy", type=pathlib.Path, default=None, help="py-spy executable")
    parser.add_argument(
        "--py-spy-native",
        action="store_true",
        help="py-spy --native: C frames too (grpcio's core, TLS), blocking the sampled process",
    )
    parser.add_argument("--java-batch-messages", type=int, default=64_000)
    parser.add_argument(
        "--flamegraphs",
        type=pathlib.Path,
        default=None,
        help="with --py-spy: keep each profile's stacks (.txt) and flame graph (.svg) here",
    )
    parser.add_argument("--cprofile", type=pathlib.Path, default=None, help="profile directory")
    parser.add_argument("--no-record", action="store_true")
    parser.add_argument(
        "--render",
        type=pathlib.Path,
        default=None,
        help="rewrite the .md of a recorded results JSON with this version's table, run nothing",
    )
    args = parser.parse_args(argv)
    rows = tuple(r for r in args.rows.split(",") if r)
    if not rows or not set(rows) <= set(ROWS):
        parser.error(f"--rows takes a comma list of {', '.join(ROWS)}")
    security = tuple(dict.fromkeys(x for x in args.security.split(",") if x))
    if not security or not set(security) <= set(SECURITY):
        parser.error("--security takes a comma list of off,on")
    if args.flamegraphs is not None and args.py_spy is None:
        parser.error("--flamegraphs needs --py-spy")
    for name in ("send_messages", "drain_messages", "warmup_messages", "java_batch_messages"):
        if not 1 <= getattr(args, name) <= 200_000:
            parser.error(f"--{name.replace('_', '-')} must be 1..200000")
    return Options(
        flush=args.flush,
        rows=rows,
        rounds=args.rounds,
        send_messages=args.send_messages,
        drain_messages=args.drain_messages,
        warmup_messages=args.warmup_messages,
        workers=args.workers,
        broker_role=args.broker_role,
        security=security,
        py_spy=args.py_spy,
        py_spy_native=args.py_spy_native,
        cprofile=args.cprofile,
        record=not args.no_record,
        command=report.command_line("bench.broker_cpu"),
        render=args.render,
        java_batch_messages=args.java_batch_messages,
        flamegraphs=args.flamegraphs,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the rounds, print the table, record JSON and Markdown."""
    opts = parse(argv)
    if opts.render is not None:
        print(render(opts.render))
        return 0
    started = datetime.datetime.now(datetime.UTC)
    base = pathlib.Path(tempfile.mkdtemp(prefix=".bench-broker-cpu-", dir=bench.REPO))
    try:
        info = machine.machine_info(base, bench.REPO)
        java = compare.java_driver(base) if set(JAVA_ROWS) & set(opts.rows) else None
        samples = [
            sample
            for r in range(opts.rounds)
            for security in opts.security
            for sample in run_round(base, opts, r, security, java)
        ]
    finally:
        shutil.rmtree(base, ignore_errors=True)
    settings = dataclasses.asdict(opts)
    settings["py_spy"] = str(opts.py_spy) if opts.py_spy else None
    settings["cprofile"] = str(opts.cprofile) if opts.cprofile else None
    settings["flamegraphs"] = str(opts.flamegraphs) if opts.flamegraphs else None
    settings["java_client"] = java.version if java is not None else None
    settings["event_loop"] = os.environ.get(event_loop.ENV_VAR, event_loop.EventLoop.AUTO.value)
    for name in ("command", "record", "render"):
        settings.pop(name)
    recorded: dict[str, Any] = {
        "command": opts.command,
        "started_utc": started.isoformat(timespec="seconds"),
        "settings": settings,
        "machine": info,
        "samples": [
            {**dataclasses.asdict(s), "owner_us": s.owner_us, "workers_us": s.workers_us}
            for s in samples
        ],
    }
    page = markdown(recorded, samples)
    print(page)
    if opts.record:
        stamp = started.strftime("%Y-%m-%dT%H%M%SZ")
        paths = report.write_results(RESULTS_NAME, stamp, recorded, page, bench.RESULTS_DIR)
        print(f"recorded {paths[0]} and {paths[1]}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
