"""``ariane bench produce|consume``: 1 KiB messages through a cluster with Ariane's client and
with the official Python client; msgs/s, MB/s and p50/p99 latency per call.

Scenarios (each one run per round, rounds interleaved as specs/perf.md §2.1 asks):

* ``ours-batch``: ``ariane.client`` with ``--batch`` messages per call and ``--in-flight``
  calls under way (produce: ``send_batch``; consume: ``receive(batch)`` + one batched ``ack``;
  Ariane's brokers return at most 32 messages per receive);
* ``ours-stream`` (produce only): ``ariane.client`` in streaming mode, ``--batch`` messages per
  request on one ``ariane.ingest.v1.Ingest/SendStream`` per broker, ``--in-flight`` requests
  under way (the stream's window too);
* ``ours-single``: ``ariane.client`` with one message per call and ``--in-flight`` calls under
  way (produce: ``send``; consume: ``receive(1)`` + ``ack`` of that message);
* ``official``: ``rocketmq-python-client`` 5.1.2 in its own process
  (``official_client_driver.py`` next to this module, run by path: ``driver_command``),
  ``--threads`` threads calling the synchronous ``Producer.send`` (one message per call, as the
  official clients always send), or ``SimpleConsumer.receive(32)`` + ``ack`` per message. It is
  an optional dependency (``pip install 'ariane[clients]'``): without it the scenario is
  skipped, with a line saying so (``official_client_installed``).

Latency is per call: one ``send_batch``/``send`` (produce) or one ``receive`` (consume); the
official client's calls include its own retries. Unless ``--endpoints`` names a cluster, each
round starts a fresh ``ariane dev`` cluster (name server + broker as child processes,
ASYNC_FLUSH unless ``--flush-disk-type``) with its data under ``<data dir>/.bench-client-*``
(``Options.data_dir``: the current directory unless ``--data-dir``), and removes it
afterwards. Consume rounds first fill their topic with the batch producer (untimed); each
consume scenario reads it with a fresh group (so with ``--endpoints`` the brokers must start
new groups at the first offset, Ariane's default ``consume_from_where``).

Before each run the quiet-machine gate waits up to ``--quiet-wait-s`` for < 0.25 busy cores;
each run records ``ext_cores`` (the machine's busy cores minus those of this process tree:
bench, name server, broker, official driver), the 1-min load average and the disk bytes
written. Results are appended to ``<results dir>/client-<UTC date>.json``
(``default_results_dir``: ``./bench/results`` in a source checkout, else the current
directory) and the ``.md`` next to it is rewritten with every run of that date, each with its
exact command line. Every figure is shown next to the transport-only limit of specs/perf.md
§2.4 (measured there, not re-measured here) and the ratio between the two.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime
import importlib.metadata
import json
import os
import pathlib
import secrets
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Coroutine, Iterator, Sequence
from typing import Any

from rich import console as rich_console
from rich import progress as rich_progress

import ariane
from ariane import client, dev
from ariane.benchmark import client_results, machine, measure, process_cpu
from ariane.common import errors

KINDS = ("produce", "consume")
SCENARIOS = ("ours-batch", "ours-stream", "ours-single", "official")
PRODUCE_ONLY = ("ours-stream",)
"""Scenarios with no consume side (streaming is a send path)."""


def scenarios_of(kind: str) -> tuple[str, ...]:
    """Every scenario of ``kind`` (``produce`` or ``consume``), in their order."""
    return SCENARIOS if kind == "produce" else tuple(s for s in SCENARIOS if s not in PRODUCE_ONLY)


PACKAGE_DIR = pathlib.Path(ariane.__file__).resolve().parent
"""The installed ``ariane`` package; its git commit (if it is a checkout) goes with each result."""
DRIVER = pathlib.Path(__file__).resolve().parent / "official_client_driver.py"
"""The official client's driver, shipped in the package and run by path (``driver_command``)."""
OFFICIAL_DISTRIBUTION = "rocketmq-python-client"
"""The optional dependency of the ``official`` scenario (the ``clients`` extra)."""
INSTALL_HINT = "pip install 'ariane[clients]'"
RESULTS_NAME = "client"

QUIET_BUSY_CORES_MAX = 0.25
"""The quiet-machine threshold of perf.md §2.1, busy cores."""

RUN_TIMEOUT_S = 300.0
"""Longest one scenario run may take before it is abandoned."""

INVISIBLE_S = 30
"""Invisible duration of received messages, seconds."""

RECEIVE_MESSAGES_MAX = 32
"""Most messages an Ariane broker returns per receive (``limits.RECEIVE_BATCH_SIZE_MAX``)."""

PREFILL_SLACK_MESSAGES = 4096
"""Messages put in a consume topic beyond the largest count, so no consumer runs dry."""

DRIVER_LINE_BYTES_MAX = 16 * 1024 * 1024
"""Longest JSON line read from the official driver (its last line carries every latency)."""

ROUTE_WAIT_S = 30.0
"""How long a new topic may take to appear in the name server's routes."""


@dataclasses.dataclass(frozen=True, slots=True)
class Options:
    """One ``ariane bench`` invocation.

    Attributes:
        kind: ``produce`` or ``consume``.
        endpoints: name servers of an existing cluster, or ``None`` to start one per round.
        messages: messages per ``ours-batch`` and ``ours-stream`` run.
        single_messages: messages per ``ours-single`` run.
        official_messages: messages per ``official`` run.
        batch: messages per call of ``ours-batch`` (per request of ``ours-stream``).
        in_flight: calls under way at once for ``ours-*``.
        threads: threads of the official client.
        rounds: interleaved rounds.
        body_bytes: message body size, bytes.
        scenarios: which scenarios run, in order.
        quiet_wait_s: longest wait for a quiet machine before each run, seconds.
        flush_disk_type: ``ASYNC_FLUSH`` or ``SYNC_FLUSH`` for started clusters.
        json_output: print the result as JSON on stdout instead of a table.
        record: write the results files.
        results_dir: where the results files go (``default_results_dir``).
        data_dir: under which the started clusters keep their data, in a temporary directory
            removed afterwards (on the disk being measured).
        command: the command line, as recorded.
    """

    kind: str
    endpoints: str | None
    messages: int
    single_messages: int
    official_messages: int
    batch: int
    in_flight: int
    threads: int
    rounds: int
    body_bytes: int
    scenarios: tuple[str, ...]
    quiet_wait_s: float
    flush_disk_type: str
    json_output: bool
    record: bool
    results_dir: pathlib.Path
    data_dir: pathlib.Path
    command: str

    def count(self, scenario: str) -> int:
        """Messages one run of ``scenario`` moves."""
        return {
            "ours-batch": self.messages,
            "ours-stream": self.messages,
            "ours-single": self.single_messages,
            "official": self.official_messages,
        }[scenario]

    def shape(self, scenario: str) -> tuple[int, int]:
        """``(messages per call, calls or threads at once)`` of ``scenario``."""
        if scenario in ("ours-batch", "ours-stream"):
            per_call = self.batch if self.kind == "produce" else min(self.batch, 32)
            return per_call, self.in_flight
        if scenario == "ours-single":
            return 1, self.in_flight
        return (1 if self.kind == "produce" else RECEIVE_MESSAGES_MAX), self.threads


@dataclasses.dataclass(frozen=True, slots=True)
class Target:
    """Where one run sends or reads."""

    namesrv: str
    topic: str
    group: str


@dataclasses.dataclass(frozen=True, slots=True)
class Run:
    """One scenario run of one round."""

    scenario: str
    round_index: int
    timing: measure.Timing
    load: machine.RunLoad
    gate: machine.GateResult
    errors: int
    client_cores: float

    @property
    def server_cores(self) -> float:
        """Cores of the rest of the process tree: the cluster's name server and broker."""
        return max(self.load.own_cores - self.client_cores, 0.0)


Measured = tuple[measure.Timing, machine.RunLoad, int, float]
"""What a driver returns: timing, load, failed calls, the client process's cores."""
Advance = Callable[[int], None]


def default_results_dir(cwd: pathlib.Path) -> pathlib.Path:
    """Where results go without ``--results-dir``: ``<cwd>/bench/results`` when ``cwd`` is the
    root of a source checkout (that directory exists), else ``cwd`` itself."""
    checkout_results = cwd / "bench" / "results"
    return checkout_results if checkout_results.is_dir() else cwd


def official_client_installed() -> bool:
    """Whether ``rocketmq-python-client`` is installed for this interpreter (the one that runs
    the driver)."""
    try:
        importlib.metadata.version(OFFICIAL_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def driver_command() -> list[str]:
    """The command that starts the official client's driver: this interpreter with ``-P`` (the
    driver's directory, this package's, is not put on ``sys.path``) and the script's path."""
    return [sys.executable, "-P", str(DRIVER)]


# -- our client ------------------------------------------------------------------------------


async def _timed(
    meter: process_cpu.TreeLoadMeter, workers: Sequence[Coroutine[Any, Any, None]]
) -> tuple[float, machine.RunLoad]:
    """Run ``workers`` together (bounded by ``RUN_TIMEOUT_S``); their seconds and load."""
    meter.start()
    started = time.perf_counter()
    await asyncio.wait_for(asyncio.gather(*workers), RUN_TIMEOUT_S)
    seconds = time.perf_counter() - started
    return seconds, meter.stop()


async def produce_ours(
    target: Target,
    options: Options,
    scenario: str,
    advance: Advance,
    meter: process_cpu.TreeLoadMeter,
) -> Measured:
    """Send ``count`` bodies with ``ariane.client.Producer``, ``per_call`` per call (streaming
    for ``ours-stream``, with ``in_flight`` as the stream's window too)."""
    count = options.count(scenario)
    per_call, in_flight = options.shape(scenario)
    body = os.urandom(options.body_bytes)
    settings = client.ProducerSettings(
        in_flight_max=in_flight,
        streaming=scenario == "ours-stream",
        stream_window_max=min(in_flight, 1024),
    )
    async with client.Producer(target.namesrv, settings=settings) as producer:
        await producer.send_batch(target.topic, [body] * per_call)  # warm-up: route, channel
        sizes = iter([min(per_call, count - start) for start in range(0, count, per_call)])
        latencies: list[int] = []

        async def worker() -> None:
            for size in sizes:  # one shared iterator: each worker takes the next call
                t0 = time.perf_counter_ns()
                if size == 1:
                    await producer.send(target.topic, body)
                else:
                    await producer.send_batch(target.topic, [body] * size)
                latencies.append(time.perf_counter_ns() - t0)
                advance(size)

        seconds, load = await _timed(meter, [worker() for _ in range(in_flight)])
    timing = measure.Timing(count, len(latencies), count * len(body), seconds, latencies)
    return timing, load, 0, meter.cores_by_pid.get(0, 0.0)


async def consume_ours(
    target: Target,
    options: Options,
    scenario: str,
    advance: Advance,
    meter: process_cpu.TreeLoadMeter,
) -> Measured:
    """Receive and ack ``count`` messages with ``ariane.client.SimpleConsumer``."""
    count = options.count(scenario)
    per_call, in_flight = options.shape(scenario)
    latencies: list[int] = []
    moved = [0, 0]  # messages, bytes
    async with client.SimpleConsumer(target.namesrv, target.group, target.topic) as consumer:
        await consumer.ack(await consumer.receive(1, INVISIBLE_S))  # warm-up: route, channel

        async def worker() -> None:
            while moved[0] < count:
                t0 = time.perf_counter_ns()
                received = await consumer.receive(per_call, INVISIBLE_S)
                latencies.append(time.perf_counter_ns() - t0)
                if received:
                    await consumer.ack(received)
                    moved[0] += len(received)
                    moved[1] += sum(len(m.body) for m in received)
                    advance(len(received))

        seconds, load = await _timed(meter, [worker() for _ in range(in_flight)])
    timing = measure.Timing(moved[0], len(latencies), moved[1], seconds, latencies)
    return timing, load, 0, meter.cores_by_pid.get(0, 0.0)


# -- the official client ----------------------------------------------------------------------


def official_arguments(target: Target, options: Options) -> list[str]:
    """The driver's command line for one official run."""
    common = [
        "--endpoints",
        target.namesrv,
        "--topic",
        target.topic,
        "--count",
        str(options.official_messages),
        "--threads",
        str(options.threads),
        "--deadline-s",
        str(RUN_TIMEOUT_S - 30),
    ]
    if options.kind == "produce":
        return ["produce", *common, "--body-bytes", str(options.body_bytes)]
    return [
        "consume",
        *common,
        "--group",
        target.group,
        "--batch",
        str(RECEIVE_MESSAGES_MAX),
        "--invisible-s",
        str(INVISIBLE_S),
    ]


async def run_official(
    target: Target,
    options: Options,
    scenario: str,
    advance: Advance,
    meter: process_cpu.TreeLoadMeter,
) -> Measured:
    """Run the official client's driver; its clock runs from ``ready`` to ``done``."""
    log_path = pathlib.Path(tempfile.gettempdir()) / "ariane-bench-official-driver.log"
    with log_path.open("ab") as log:
        proc = await asyncio.create_subprocess_exec(
            *driver_command(),
            *official_arguments(target, options),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=log,
            limit=DRIVER_LINE_BYTES_MAX,
        )
    try:
        return await asyncio.wait_for(_follow_driver(proc, advance, meter), RUN_TIMEOUT_S)
    finally:
        if proc.returncode is None:
            proc.kill()  # our own child, by its handle
            await proc.wait()


async def _follow_driver(
    proc: asyncio.subprocess.Process, advance: Advance, meter: process_cpu.TreeLoadMeter
) -> Measured:
    assert proc.stdout is not None and proc.stdin is not None
    reported = 0
    while line := await proc.stdout.readline():
        event = json.loads(line)
        if event["event"] == "ready":
            meter.start()
        elif event["event"] == "progress":
            advance(event["done"] - reported)
            reported = event["done"]
        elif event["event"] == "done":
            load = meter.stop()
            advance(event["messages"] - reported)
            proc.stdin.close()
            await proc.wait()
            latencies = [us * 1000 for us in event["latencies_us"]]
            timing = measure.Timing(
                event["messages"], len(latencies), event["bytes"], event["seconds"], latencies
            )
            return timing, load, int(event["errors"]), meter.cores_by_pid.get(proc.pid, 0.0)
    await proc.wait()
    raise RuntimeError(
        f"the official client's driver exited with {proc.returncode} before it finished; see "
        f"{tempfile.gettempdir()}/ariane-bench-official-driver.log"
    )


DRIVERS = {
    ("produce", "ours-batch"): produce_ours,
    ("produce", "ours-stream"): produce_ours,
    ("produce", "ours-single"): produce_ours,
    ("produce", "official"): run_official,
    ("consume", "ours-batch"): consume_ours,
    ("consume", "ours-single"): consume_ours,
    ("consume", "official"): run_official,
}


# -- summary --------------------------------------------------------------------------------


def reference(options: Options, scenario: str) -> tuple[str, float]:
    """The transport-only limit of specs/perf.md §2.4 matching ``scenario``: (label, msgs/s)."""
    _, at_once = options.shape(scenario)
    if options.kind == "produce":
        if scenario == "ours-stream":
            # Our stream answers every request (bidi); StreamBatches (one answer per stream,
            # 304k msg/s) is the transport's bound without per-batch answers.
            return "BidiBatches (StreamBatches 304k)", 174_000.0
        if scenario == "ours-batch":
            return ("SendBatch c1", 72_000.0) if at_once == 1 else ("SendBatch c8", 128_000.0)
        return ("Echo c1", 1_321.0) if at_once == 1 else ("Send->Ack c32", 2_266.0)
    if scenario == "ours-batch":
        return ("Pull c1", 67_000.0) if at_once == 1 else ("Pull c8", 126_000.0)
    # Unbatched consume makes more than one unary call per message: receive (1 or 1/32) + ack.
    calls = 2.0 if scenario == "ours-single" else 1 + 1 / RECEIVE_MESSAGES_MAX
    label, limit = ("Echo c1", 1_321.0) if at_once == 1 else ("Echo c32", 2_150.0)
    return f"{label} / {calls:.2f} calls per msg", limit / calls


def summary(options: Options, runs: Sequence[Run]) -> list[dict[str, Any]]:
    """One row per scenario: median [min, max] over the rounds, limit and ratio."""
    rows: list[dict[str, Any]] = []
    for scenario in options.scenarios:
        mine = [r for r in runs if r.scenario == scenario]
        if not mine:
            continue
        rate = measure.Spread.of([r.timing.messages_per_s for r in mine])
        label, limit = reference(options, scenario)
        per_call, at_once = options.shape(scenario)
        rows.append(
            {
                "scenario": scenario,
                "client": CLIENT_NAMES[scenario],
                "messages_per_run": options.count(scenario),
                "messages_per_call": per_call,
                "at_once": at_once,
                "msgs_per_s": rate.as_dict(),
                "mb_per_s": measure.Spread.of([r.timing.mb_per_s for r in mine]).as_dict(),
                "p50_ms": measure.Spread.of(
                    [r.timing.latency_us(50) / 1e3 for r in mine]
                ).as_dict(),
                "p99_ms": measure.Spread.of(
                    [r.timing.latency_us(99) / 1e3 for r in mine]
                ).as_dict(),
                "limit": label,
                "limit_msgs_per_s": limit,
                "ratio": rate.median / limit,
                "client_cores": measure.Spread.of([r.client_cores for r in mine]).as_dict(),
                "server_cores": measure.Spread.of([r.server_cores for r in mine]).as_dict(),
                "ext_cores_max": max(r.load.ext_cores for r in mine),
                "load_1m": [round(r.load.load_1m, 2) for r in mine],
                "quiet_runs": sum(r.gate.quiet for r in mine),
                "runs": len(mine),
                "errors": sum(r.errors for r in mine),
            }
        )
    return rows


CLIENT_NAMES = {
    "ours-batch": "ariane.client",
    "ours-stream": "ariane.client (SendStream)",
    "ours-single": "ariane.client",
    "official": "rocketmq-python-client 5.1.2",
}


def entry(
    options: Options,
    info: dict[str, object],
    runs: Sequence[Run],
    started: datetime.datetime,
    finished: datetime.datetime,
) -> dict[str, Any]:
    """Everything recorded about one invocation."""
    settings = dataclasses.asdict(options)
    for key in ("command", "results_dir", "data_dir", "json_output", "record"):
        settings.pop(key)
    return {
        "kind": options.kind,
        "command": options.command,
        "started_utc": started.isoformat(timespec="seconds"),
        "finished_utc": finished.isoformat(timespec="seconds"),
        "cluster": (
            f"external, name servers {options.endpoints}"
            if options.endpoints
            else f"ariane dev (name server + broker, {options.flush_disk_type}), fresh per round"
        ),
        "settings": settings,
        "machine": info,
        "runs": [
            {
                "scenario": r.scenario,
                "round": r.round_index + 1,
                **r.timing.summary(),
                "load": dataclasses.asdict(r.load),
                "gate": dataclasses.asdict(r.gate),
                "errors": r.errors,
                "client_cores": round(r.client_cores, 3),
                "server_cores": round(r.server_cores, 3),
            }
            for r in runs
        ],
        "summary": summary(options, runs),
    }


# -- rounds ----------------------------------------------------------------------------------


@contextlib.contextmanager
def cluster(options: Options, base: pathlib.Path, round_index: int) -> Iterator[str]:
    """The name server of one round: ``--endpoints``, or a fresh ``ariane dev`` cluster whose
    data is removed afterwards."""
    if options.endpoints:
        yield options.endpoints
        return
    data_dir = base / f"round-{round_index}"
    try:
        with dev.dev_cluster(
            data_dir, namesrv_port=0, flush_disk_type=options.flush_disk_type
        ) as endpoints:
            yield endpoints.namesrv
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)


async def create_topic(
    namesrv: str,
    topic: str,
    *,
    credentials: client.Credentials | None = None,
    tls: client.ClientTls | None = None,
) -> None:
    """Create ``topic`` on every master and wait until the name server routes it; signed with
    ``credentials`` and over ``tls`` when given (a secured cluster).

    Raises:
        RuntimeError: the route did not appear within ``ROUTE_WAIT_S``.
    """
    async with client.AdminClient(namesrv, credentials=credentials, tls=tls) as admin:
        await admin.create_topic(topic)
        deadline = time.monotonic() + ROUTE_WAIT_S
        while time.monotonic() < deadline:
            with contextlib.suppress(errors.TopicNotFoundError):
                if await admin.topic_masters(topic):
                    return
            await asyncio.sleep(0.1)
    raise RuntimeError(f"topic {topic} was not routed by {namesrv} within {ROUTE_WAIT_S} s")


async def prefill(
    namesrv: str, topic: str, options: Options, progress: rich_progress.Progress, label: str
) -> None:
    """Fill a consume topic with the batch producer (untimed) so no consumer runs dry."""
    total = max(options.count(s) for s in options.scenarios) + PREFILL_SLACK_MESSAGES
    task = progress.add_task(f"{label} fill topic", total=total)
    filler = dataclasses.replace(options, kind="produce", messages=total, batch=64, in_flight=8)
    await produce_ours(
        Target(namesrv, topic, ""),
        filler,
        "ours-batch",
        lambda n: progress.advance(task, n),
        process_cpu.TreeLoadMeter(None),
    )


async def run_round(
    options: Options,
    namesrv: str,
    round_index: int,
    disk: str | None,
    progress: rich_progress.Progress,
) -> list[Run]:
    """Every scenario once, on a topic (and groups) of this round."""
    token = secrets.token_hex(3)
    topic = f"bench-{options.kind}-r{round_index}-{token}"
    label = f"round {round_index + 1}/{options.rounds} {options.kind}"
    await create_topic(namesrv, topic)
    if options.kind == "consume":
        await prefill(namesrv, topic, options, progress, label)
    runs: list[Run] = []
    for scenario in options.scenarios:
        target = Target(namesrv, topic, f"bench-{scenario}-r{round_index}-{token}")
        with phase(progress, f"{label} {scenario}: wait for a quiet machine"):
            gate = await asyncio.to_thread(
                machine.wait_for_quiet, QUIET_BUSY_CORES_MAX, options.quiet_wait_s
            )
        task = progress.add_task(f"{label} {scenario}", total=options.count(scenario))
        timing, load, failed, client_cores = await DRIVERS[(options.kind, scenario)](
            target,
            options,
            scenario,
            lambda n, task=task: progress.advance(task, n),  # type: ignore[misc]
            process_cpu.TreeLoadMeter(disk),
        )
        runs.append(Run(scenario, round_index, timing, load, gate, failed, client_cores))
    return runs


@contextlib.contextmanager
def phase(progress: rich_progress.Progress, description: str) -> Iterator[None]:
    """A bar for a step of unknown length (pulsing while it runs, full once it is done)."""
    task = progress.add_task(description, total=None)
    try:
        yield
    finally:
        progress.update(task, total=1, completed=1)


def _progress(console: rich_console.Console) -> rich_progress.Progress:
    return rich_progress.Progress(
        rich_progress.TextColumn("{task.description}"),
        rich_progress.BarColumn(),
        rich_progress.MofNCompleteColumn(),
        rich_progress.TimeElapsedColumn(),
        console=console,
        refresh_per_second=4,
    )


def run(options: Options) -> int:
    """Run every round, print the summary, record the results; returns the exit status."""
    console = rich_console.Console(stderr=True)
    started = datetime.datetime.now(datetime.UTC)
    base = pathlib.Path(tempfile.mkdtemp(prefix=".bench-client-", dir=options.data_dir))
    try:
        info = machine.machine_info(base, PACKAGE_DIR)
        info["ariane_version"] = ariane.__version__
        disk = machine.disk_of(base)
        runs: list[Run] = []
        with _progress(console) as progress:
            for round_index in range(options.rounds):
                with contextlib.ExitStack() as round_cluster:
                    with phase(
                        progress, f"round {round_index + 1}/{options.rounds}: start cluster"
                    ):
                        namesrv = round_cluster.enter_context(cluster(options, base, round_index))
                    runs += asyncio.run(run_round(options, namesrv, round_index, disk, progress))
    finally:
        shutil.rmtree(base, ignore_errors=True)
    finished = datetime.datetime.now(datetime.UTC)
    recorded = entry(options, info, runs, started, finished)
    if options.json_output:
        print(json.dumps(recorded, indent=2))
    else:
        wide = rich_console.Console(width=max(shutil.get_terminal_size().columns, 200))
        wide.print(client_results.table(options.kind, recorded["summary"]))
    if options.record:
        paths = client_results.record(options.results_dir, RESULTS_NAME, recorded)
        console.print(f"recorded {paths[0]} and {paths[1]}")
    return 1 if any(r.errors for r in runs) else 0
