"""Store benchmark (not a test): append and read throughput of ``MessageStore`` vs the raw disk.

Run ``python -m bench.store_append [--messages N] [--runs R] [--dir DIR] [--quick]`` from the
repository root (``make bench`` does). Messages carry a 1 KiB body to one (topic, queue).

Scenarios (each run opens a fresh store in a fresh directory under ``--dir``, which should be
on the file system the broker will use; everything is deleted afterwards):

- append 1 / append 64, ASYNC_FLUSH: ``put_message`` / ``put_messages_sync`` in a loop;
- append 1 / append 64, SYNC_FLUSH, serial: the same, each call waiting for its fdatasync;
- append 1 / append 64, SYNC_FLUSH, P producers: P asyncio tasks each awaiting
  ``put_messages`` in a loop (group commit: one fdatasync covers every waiting producer);
- read: ``get_messages`` in batches of 32 by queue offset, and ``get_message`` by CommitLog
  offset, over a store just filled (warm page cache).

Each store run is followed at once by its disk baseline, the same bytes in the same call sizes
(``bench.disk_baseline``): ``os.pwrite`` of the call's record bytes to a preallocated file,
with no sync for ASYNC rows, and with ``os.fdatasync`` every as many messages as the store
covered per fsync in that run for SYNC rows (1 for serial single appends, 64 for serial
batches, the realized group size for producers); ``os.pread`` of the store's own CommitLog
segment for read rows. The ratio store/disk is taken per run and then summarized.

Measurement discipline (specs/perf.md §2.1): a quiet-machine gate before each run (bounded
wait, recorded), the outside load (``ext_cores``) measured over each timed loop, interleaved
rounds (every scenario once per round), median and [min-max] over the rounds, nearest-rank
percentiles, loops bounded by count and time. Results go to ``bench/results/``.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import datetime
import enum
import functools
import gc
import os
import pathlib
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence

from rich.console import Console
from rich.table import Table

import bench
from ariane.benchmark import machine, measure, report
from ariane.common import clock as clock_mod
from ariane.common import ids
from ariane.common import message as message_mod
from ariane.store import commit_log, message_store, settings
from bench import disk_baseline

TOPIC = ids.TopicName("BenchTopic")
QUEUE = ids.QueueId(0)
READ_MAX_BYTES = 4 * 1024 * 1024
"""``max_bytes`` of each read call: large enough never to cut a batch of 32 short."""

PUT_OK = commit_log.PutMessageStatus.PUT_OK


class BenchmarkError(RuntimeError):
    """The store answered something other than success; the numbers would mean nothing."""


@dataclasses.dataclass(frozen=True, slots=True)
class BenchSettings:
    """What one benchmark invocation measures and how carefully."""

    messages: int = 100_000
    """Messages per run of each scenario (a run also stops at ``run_seconds_max``)."""

    runs: int = 3
    """Interleaved rounds; each runs every scenario once."""

    base_dir: pathlib.Path = pathlib.Path(__file__).resolve().parents[1]
    """Directory under which each run's temporary store and baseline files live."""

    run_seconds_max: float = 10.0
    """Bound of one timed loop, seconds (store and baseline alike)."""

    quiet_busy_cores_max: float = 0.25
    """The quiet-machine gate's threshold, busy cores over a 1-s window."""

    quiet_wait_seconds_max: float = 20.0
    """Longest gate wait before one run, seconds."""

    quiet_wait_total_seconds_max: float = 180.0
    """Longest total gate wait of the invocation, seconds (then each gate samples once)."""

    loaded_repeats_max: int = 2
    """Repeats of a run whose outside load exceeded the gate's threshold (least loaded kept)."""

    producers: int = 8
    """Concurrent asyncio producers in the group-commit scenarios."""

    body_bytes: int = 1024
    """Message body size, bytes."""

    batch_messages: int = 64
    """Messages per call in the batched scenarios."""

    read_batch_messages: int = 32
    """``max_count`` of each ``get_messages`` call."""


class Kind(enum.Enum):
    """How a scenario drives the store."""

    SERIAL = "serial"
    PRODUCERS = "producers"
    READ_QUEUE = "read by queue offset"
    READ_OFFSET = "read by CommitLog offset"


@dataclasses.dataclass(frozen=True, slots=True)
class Scenario:
    """One row of the table."""

    name: str
    flush: settings.FlushDiskType
    kind: Kind
    batch: int
    """Messages per store call."""
    producers: int = 1


def scenarios(config: BenchSettings) -> list[Scenario]:
    """The scenarios, in the order of a round and of the table."""
    asyn, sync = settings.FlushDiskType.ASYNC_FLUSH, settings.FlushDiskType.SYNC_FLUSH
    batch, p = config.batch_messages, config.producers
    return [
        Scenario("append 1, ASYNC", asyn, Kind.SERIAL, 1),
        Scenario(f"append {batch}, ASYNC", asyn, Kind.SERIAL, batch),
        Scenario("append 1, SYNC serial", sync, Kind.SERIAL, 1),
        Scenario(f"append {batch}, SYNC serial", sync, Kind.SERIAL, batch),
        Scenario(f"append 1, SYNC x{p} producers", sync, Kind.PRODUCERS, 1, p),
        Scenario(f"append {batch}, SYNC x{p} producers", sync, Kind.PRODUCERS, batch, p),
        Scenario(
            f"read get_messages({config.read_batch_messages})",
            asyn,
            Kind.READ_QUEUE,
            config.read_batch_messages,
        ),
        Scenario("read get_message(offset)", asyn, Kind.READ_OFFSET, 1),
    ]


@dataclasses.dataclass(frozen=True, slots=True)
class RunSample:
    """One run of one scenario and its disk baseline."""

    scenario: Scenario
    round_index: int
    store: measure.Timing
    disk: measure.Timing
    messages_per_sync: float | None
    """SYNC rows: messages per CommitLog fdatasync in the store run (the baseline's grouping)."""
    gate: machine.GateResult
    store_load: machine.RunLoad
    disk_load: machine.RunLoad
    attempts: int = 1
    """Runs made for this sample (more than 1 when earlier ones were loaded)."""

    @property
    def ext_cores(self) -> float:
        """Outside load over the store and baseline loops together, cores (wall-weighted).

        Weighting matters: /proc/stat counts 10-ms ticks, so a 25-ms baseline loop alone
        would read as anything from 0 to 0.8 cores.
        """
        store, disk = self.store_load, self.disk_load
        busy = store.ext_cores * store.wall_s + disk.ext_cores * disk.wall_s
        return busy / (store.wall_s + disk.wall_s)

    @property
    def ratio(self) -> float:
        """Store throughput over disk throughput, messages per second each."""
        return self.store.messages_per_s / self.disk.messages_per_s

    def as_dict(self) -> dict[str, object]:
        """Every number of the run."""
        return {
            "scenario": self.scenario.name,
            "round": self.round_index,
            "store": self.store.summary(),
            "disk": self.disk.summary(),
            "ratio": round(self.ratio, 4),
            "messages_per_sync": self.messages_per_sync,
            "gate": dataclasses.asdict(self.gate),
            "store_load": dataclasses.asdict(self.store_load),
            "disk_load": dataclasses.asdict(self.disk_load),
            "attempts": self.attempts,
        }


def _request(body_bytes: int) -> commit_log.AppendRequest:
    message = message_mod.Message(
        topic=TOPIC, body=os.urandom(body_bytes), properties={message_mod.Property.TAGS: "bench"}
    )
    return commit_log.AppendRequest(message=message, queue_id=QUEUE)


def _check(result: commit_log.PutMessageResult) -> None:
    if result.status is not PUT_OK:
        raise BenchmarkError(f"append answered {result.status.name}")


def _serial(
    put: Callable[[], commit_log.PutMessageResult], calls: int, batch: int, deadline: float
) -> measure.Timing:
    """``calls`` calls of ``put`` (each storing ``batch`` messages), stopping at ``deadline``."""
    clock = time.perf_counter_ns
    timer = measure.CallTimer(deadline)
    for _ in range(calls):
        t0 = clock()
        result = put()
        t1 = clock()
        _check(result)
        if timer.record(t0, t1):
            break
    return timer.timing(timer.calls * batch, 0)


async def _producers(
    store: message_store.MessageStore,
    batch: Sequence[commit_log.AppendRequest],
    count: int,
    producers: int,
    deadline: float,
) -> measure.Timing:
    """``producers`` tasks each awaiting ``put_messages(batch)``, ``count`` messages in all.

    Every task stops once ``count`` messages are claimed or a call ends past ``deadline``.
    """
    clock = time.perf_counter_ns
    claimed = 0

    async def produce() -> None:
        nonlocal claimed
        while claimed < count:
            claimed += len(batch)
            t0 = clock()
            results = await store.put_messages(batch)
            t1 = clock()
            _check(results[-1])
            if timer.record(t0, t1):
                claimed = count

    timer = measure.CallTimer(deadline)
    await asyncio.gather(*(produce() for _ in range(producers)))
    return timer.timing(timer.calls * len(batch), 0)


@dataclasses.dataclass(frozen=True, slots=True)
class _StoreRun:
    """What a store run hands to its baseline."""

    timing: measure.Timing
    load: machine.RunLoad
    messages_per_sync: float | None
    record_bytes: int
    segment: pathlib.Path | None = None
    """Read rows: the CommitLog segment that was read (the baseline preads it)."""


def _open_store(root: pathlib.Path, flush: settings.FlushDiskType) -> message_store.MessageStore:
    config = settings.StoreSettings(flush_disk_type=flush)
    return message_store.MessageStore.open(root, config, clock=clock_mod.SystemClock())


def _drive_append(
    store: message_store.MessageStore,
    scenario: Scenario,
    batch: Sequence[commit_log.AppendRequest],
    count: int,
    deadline: float,
) -> measure.Timing:
    if scenario.kind is Kind.PRODUCERS:
        return asyncio.run(_producers(store, batch, count, scenario.producers, deadline))
    put: Callable[[], commit_log.PutMessageResult]
    if len(batch) == 1:
        put = functools.partial(store.put_message, batch[0])
    else:

        def put() -> commit_log.PutMessageResult:
            return store.put_messages_sync(batch)[-1]

    return _serial(put, -(-count // len(batch)), len(batch), deadline)


def _store_append(
    scenario: Scenario, config: BenchSettings, root: pathlib.Path, disk: str | None
) -> _StoreRun:
    batch = [_request(config.body_bytes)] * scenario.batch
    store = _open_store(root / "store", scenario.flush)
    try:
        _check(store.put_messages_sync(batch)[-1])  # warm-up: first segment, queue, caches
        before = store.stats()
        deadline = time.perf_counter() + config.run_seconds_max
        with machine.LoadMeter(disk) as meter:
            timing = _drive_append(store, scenario, batch, config.messages, deadline)
        after = store.stats()
    finally:
        store.close()
    stored = after.put_message_count - before.put_message_count
    failed = after.put_message_failure_count - before.put_message_failure_count
    if stored != timing.messages or failed:
        raise BenchmarkError(f"{scenario.name}: {stored} stored, {failed} failed")
    written = after.put_message_bytes - before.put_message_bytes
    syncs = after.flush_count - before.flush_count
    per_sync = None
    if scenario.flush is settings.FlushDiskType.SYNC_FLUSH:
        per_sync = timing.messages / max(1, syncs)
    timing = dataclasses.replace(timing, bytes=written)
    return _StoreRun(timing, meter.result(), per_sync, written // timing.messages)


def _read_queue(
    store: message_store.MessageStore, count: int, batch: int, deadline: float
) -> measure.Timing:
    clock = time.perf_counter_ns
    offset = ids.QueueOffset(0)
    got = total = 0
    timer = measure.CallTimer(deadline)
    while offset < count:
        t0 = clock()
        result = store.get_messages(TOPIC, QUEUE, offset, max_count=batch, max_bytes=READ_MAX_BYTES)
        t1 = clock()
        if result.status is not message_store.GetMessageStatus.FOUND:
            raise BenchmarkError(f"get_messages at {offset} answered {result.status.name}")
        got += len(result.messages)
        total += result.total_bytes
        offset = result.next_begin_offset
        if timer.record(t0, t1):
            break
    return timer.timing(got, total)


def _read_offsets(store: message_store.MessageStore, deadline: float) -> measure.Timing:
    clock = time.perf_counter_ns
    offset, end = store.min_commit_log_offset, store.max_commit_log_offset
    total = 0
    timer = measure.CallTimer(deadline)
    while offset < end:
        t0 = clock()
        found = store.get_message(offset).message
        t1 = clock()
        if found is None:
            raise BenchmarkError(f"get_message({offset}) found nothing")
        offset = ids.CommitLogOffset(offset + found.store_size_bytes)
        total += found.store_size_bytes
        if timer.record(t0, t1):
            break
    return timer.timing(timer.calls, total)


def _store_read(
    scenario: Scenario, config: BenchSettings, root: pathlib.Path, disk: str | None
) -> _StoreRun:
    batch = [_request(config.body_bytes)] * config.batch_messages
    store = _open_store(root / "store", scenario.flush)
    try:
        for _ in range(-(-config.messages // len(batch))):
            _check(store.put_messages_sync(batch)[-1])
        segment = store.commit_log_segments()[0].path
        count = store.max_queue_offset(TOPIC, QUEUE)
        deadline = time.perf_counter() + config.run_seconds_max
        with machine.LoadMeter(disk) as meter:
            if scenario.kind is Kind.READ_QUEUE:
                timing = _read_queue(store, count, scenario.batch, deadline)
            else:
                timing = _read_offsets(store, deadline)
    finally:
        store.close()
    return _StoreRun(timing, meter.result(), None, timing.bytes // timing.messages, segment)


def _in_messages(timing: measure.Timing, record_bytes: int) -> measure.Timing:
    """A raw-I/O timing counted in store messages (its bytes / one record's bytes)."""
    return dataclasses.replace(timing, messages=round(timing.bytes / record_bytes))


def _disk_baseline(
    scenario: Scenario, run: _StoreRun, config: BenchSettings, root: pathlib.Path, disk: str | None
) -> tuple[measure.Timing, machine.RunLoad]:
    """The raw-disk run matching ``run``: same bytes, same call size, same sync grouping."""
    chunk_bytes = run.record_bytes * scenario.batch
    deadline = time.perf_counter() + config.run_seconds_max
    with machine.LoadMeter(disk) as meter:
        if run.segment is not None:
            raw = disk_baseline.raw_read(
                run.segment, chunk_bytes, run.timing.bytes, deadline=deadline
            )
        else:
            sync_every = None
            if run.messages_per_sync is not None:
                sync_every = max(1.0, run.messages_per_sync / scenario.batch)
            raw = disk_baseline.raw_write(
                root / "raw",
                os.urandom(chunk_bytes),
                run.timing.calls,
                sync_every_chunks=sync_every,
                deadline=deadline,
            )
    return _in_messages(raw, run.record_bytes), meter.result()


def run_once(
    scenario: Scenario,
    config: BenchSettings,
    root: pathlib.Path,
    disk: str | None,
    gate: machine.GateResult,
    round_index: int,
) -> RunSample:
    """One run of ``scenario`` in the empty directory ``root``, then its disk baseline.

    Raises:
        BenchmarkError: if the store refused an append or a read found nothing.
    """
    reads = scenario.kind in (Kind.READ_QUEUE, Kind.READ_OFFSET)
    run = (_store_read if reads else _store_append)(scenario, config, root, disk)
    raw, raw_load = _disk_baseline(scenario, run, config, root, disk)
    return RunSample(
        scenario=scenario,
        round_index=round_index,
        store=run.timing,
        disk=raw,
        messages_per_sync=run.messages_per_sync,
        gate=gate,
        store_load=run.load,
        disk_load=raw_load,
    )


def _progress(sample: RunSample) -> str:
    gate = sample.gate
    seen = "quiet" if gate.quiet else f"NOT quiet ({gate.busy_cores:.2f} busy)"
    if sample.attempts > 1:
        seen += f", best of {sample.attempts} attempts"
    return (
        f"round {sample.round_index + 1}  {sample.scenario.name:<30} "
        f"{sample.store.messages_per_s:>10,.0f} msg/s  disk {sample.disk.messages_per_s:>11,.0f}"
        f"  ratio {sample.ratio:5.2f}  ext {sample.ext_cores:.2f} cores  gate {seen}"
    )


class _Gate:
    """The quiet-machine gate with the invocation's total wait budget."""

    def __init__(self, config: BenchSettings) -> None:
        self._config = config
        self._waited_s = 0.0

    def wait(self) -> machine.GateResult:
        """Wait for a quiet window, at most the per-run bound and what the budget has left."""
        config = self._config
        budget = config.quiet_wait_total_seconds_max - self._waited_s
        wait_max = max(1.0, min(config.quiet_wait_seconds_max, budget))
        gate = machine.wait_for_quiet(config.quiet_busy_cores_max, wait_max)
        self._waited_s += gate.waited_s
        return gate


def _gated_run(
    scenario: Scenario,
    config: BenchSettings,
    session: pathlib.Path,
    disk: str | None,
    gate: _Gate,
    round_index: int,
) -> RunSample:
    """Run ``scenario``, repeating a loaded run up to ``loaded_repeats_max`` times."""
    best: RunSample | None = None
    attempts = 0
    while attempts <= config.loaded_repeats_max:
        attempts += 1
        os.sync()  # the previous run's dirty pages must not be written back during this one
        gc.collect()
        seen = gate.wait()
        root = session / "run"
        root.mkdir()
        try:
            sample = run_once(scenario, config, root, disk, seen, round_index)
        finally:
            shutil.rmtree(root)
        if best is None or sample.ext_cores < best.ext_cores:
            best = sample
        if best.ext_cores <= config.quiet_busy_cores_max:
            break
    assert best is not None
    return dataclasses.replace(best, attempts=attempts)


def run_rounds(config: BenchSettings, console: Console, disk: str | None) -> list[RunSample]:
    """``config.runs`` interleaved rounds of every scenario, each run gated and cleaned up."""
    samples: list[RunSample] = []
    gate = _Gate(config)
    session = pathlib.Path(tempfile.mkdtemp(prefix=".bench-store_append-", dir=config.base_dir))
    try:
        for round_index in range(config.runs):
            for scenario in scenarios(config):
                sample = _gated_run(scenario, config, session, disk, gate, round_index)
                samples.append(sample)
                console.print(_progress(sample))
    finally:
        shutil.rmtree(session, ignore_errors=True)
    return samples


@dataclasses.dataclass(frozen=True, slots=True)
class RowSummary:
    """One scenario over all its runs: medians and ranges."""

    scenario: Scenario
    store_rate: measure.Spread
    """Messages per second."""
    store_mb: measure.Spread
    p50_us: measure.Spread
    """Per-call latency (a batch is one call), µs."""
    p99_us: measure.Spread
    disk_rate: measure.Spread
    ratio: measure.Spread
    messages_per_sync: measure.Spread | None
    record_bytes: int
    ext_cores_max: float
    loaded_runs: int
    """Runs whose store loop saw more outside load than the gate's threshold (flagged "!")."""
    quiet_runs: int
    runs: int

    @property
    def baseline(self) -> str:
        """What the raw-disk row did, in words."""
        kind = self.scenario.kind
        if kind in (Kind.READ_QUEUE, Kind.READ_OFFSET):
            return f"pread {self.scenario.batch} rec"
        text = f"pwrite {self.scenario.batch} rec"
        if self.messages_per_sync is None:
            return text
        return text + f" + fdatasync/{self.messages_per_sync.median:,.0f} msg"

    def cells(self) -> list[str]:
        """The table row."""
        per_sync = self.messages_per_sync
        return [
            self.scenario.name,
            self.store_rate.format(),
            f"{self.store_mb.median:.1f}",
            f"{1e6 / self.store_rate.median:.1f}",
            f"{self.p50_us.median:,.0f}",
            f"{self.p99_us.median:,.0f}",
            "-" if per_sync is None else f"{per_sync.median:,.1f}",
            self.baseline,
            self.disk_rate.format(),
            self.ratio.format(digits=3),
            f"{self.ext_cores_max:.2f}" + (" !" if self.loaded_runs else ""),
            f"{self.quiet_runs}/{self.runs}",
        ]

    def as_dict(self) -> dict[str, object]:
        """Every summarized number."""
        per_sync = self.messages_per_sync
        return {
            "scenario": self.scenario.name,
            "flush": self.scenario.flush.value,
            "kind": self.scenario.kind.value,
            "messages_per_call": self.scenario.batch,
            "producers": self.scenario.producers,
            "messages_per_s": self.store_rate.as_dict(),
            "mb_per_s": self.store_mb.as_dict(),
            "us_per_message_median": 1e6 / self.store_rate.median,
            "call_p50_us": self.p50_us.as_dict(),
            "call_p99_us": self.p99_us.as_dict(),
            "messages_per_sync": None if per_sync is None else per_sync.as_dict(),
            "disk_baseline": self.baseline,
            "disk_messages_per_s": self.disk_rate.as_dict(),
            "ratio_store_to_disk": self.ratio.as_dict(),
            "record_bytes": self.record_bytes,
            "ext_cores_max": self.ext_cores_max,
            "loaded_runs": self.loaded_runs,
            "quiet_runs": self.quiet_runs,
            "runs": self.runs,
        }


HEADERS = (
    "scenario",
    "msgs/s median [min-max]",
    "MB/s",
    "µs/msg",
    "p50 µs/call",
    "p99 µs/call",
    "msgs/fsync",
    "disk baseline",
    "disk msgs/s",
    "store/disk",
    "ext cores max",
    "quiet",
)


def summarize(samples: Sequence[RunSample], threshold: float) -> list[RowSummary]:
    """One row per scenario, in the order the scenarios first ran.

    Args:
        samples: every run.
        threshold: ``ext_cores`` above which a run counts as loaded (the gate's threshold).
    """
    by_name: dict[str, list[RunSample]] = {}
    for sample in samples:
        by_name.setdefault(sample.scenario.name, []).append(sample)
    rows = []
    for runs in by_name.values():
        per_sync = [s.messages_per_sync for s in runs if s.messages_per_sync is not None]
        rows.append(
            RowSummary(
                scenario=runs[0].scenario,
                store_rate=measure.Spread.of([s.store.messages_per_s for s in runs]),
                store_mb=measure.Spread.of([s.store.mb_per_s for s in runs]),
                p50_us=measure.Spread.of([s.store.latency_us(50) for s in runs]),
                p99_us=measure.Spread.of([s.store.latency_us(99) for s in runs]),
                disk_rate=measure.Spread.of([s.disk.messages_per_s for s in runs]),
                ratio=measure.Spread.of([s.ratio for s in runs]),
                messages_per_sync=measure.Spread.of(per_sync) if per_sync else None,
                record_bytes=runs[0].store.bytes // runs[0].store.messages,
                ext_cores_max=max(s.ext_cores for s in runs),
                loaded_runs=sum(s.ext_cores > threshold for s in runs),
                quiet_runs=sum(s.gate.quiet for s in runs),
                runs=len(runs),
            )
        )
    return rows


def rich_table(rows: Sequence[RowSummary], title: str) -> Table:
    """The result as a ``rich`` table."""
    table = Table(title=title)
    for index, header in enumerate(HEADERS):
        table.add_column(header, justify="left" if index in (0, 7) else "right")
    for row in rows:
        table.add_row(*row.cells())
    return table


def _load_summary(samples: Sequence[RunSample], config: BenchSettings) -> list[str]:
    ext = [s.ext_cores for s in samples]
    loads = [s.store_load.load_1m for s in samples]
    quiet = sum(s.gate.quiet for s in samples)
    threshold = config.quiet_busy_cores_max
    loaded = sum(e > threshold for e in ext)
    written = sum(s.store_load.disk_written_bytes + s.disk_load.disk_written_bytes for s in samples)
    repeated = sum(s.attempts > 1 for s in samples)
    return [
        f"- Quiet gate: {quiet}/{len(samples)} runs saw a 1-s window under "
        f"{config.quiet_busy_cores_max} busy cores within {config.quiet_wait_seconds_max:g} s "
        f"(total gate wait bounded at {config.quiet_wait_total_seconds_max:g} s).",
        f"- Outside load during the timed loops (`ext_cores`, perf.md §2.1; store and "
        f"baseline loops together): median {statistics.median(ext):.2f}, max "
        f"{max(ext):.2f} cores of {os.cpu_count()}; {loaded}/{len(samples)} kept runs above "
        f"{threshold} (marked `!` in ext cores max). {repeated} runs were repeated because "
        f"they were loaded (at most {config.loaded_repeats_max} repeats, least loaded kept).",
        f"- 1-min load average during the runs: {min(loads):.2f}-{max(loads):.2f}.",
        f"- Disk bytes written during the kept timed loops (all writers): {written / 1e9:.2f} GB.",
    ]


def _minutes(started: datetime.datetime) -> str:
    seconds = (datetime.datetime.now().astimezone() - started).total_seconds()
    return f"{seconds / 60:.1f} min"


_NOTES = """\
Notes:
- `rec` is one CommitLog record of {record} B (a {body} B body, header, topic, TAGS property);
  MB = 10^6 bytes of records. µs/msg = 1 / msgs/s. p50/p99 are per store call (a batch is one
  call; in the producer rows, one producer's await), median over the runs.
- Disk baseline (`bench/disk_baseline.py`), run right after each store run on the same file
  system: the same bytes in the same call sizes, `os.pwrite` into a file preallocated like a
  CommitLog segment (`posix_fallocate` + `fsync`), with no sync for ASYNC rows and with
  `os.fdatasync` every `msgs/fsync` messages (what the store achieved in that run) for SYNC
  rows; `os.pread` of the store's own CommitLog segment for read rows (warm page cache).
  store/disk is the per-run ratio of msgs/s, median [min-max].
- `ext cores` counts every CPU not used by this process, including kernel threads that serve
  its own I/O (journal commits, writeback): fsync-heavy loops read ~0.2 cores even on a quiet
  machine.
- Reference (perf.md §2.2, a file zero-filled before the run, gated): 1 KiB appends with one
  fdatasync per message 7.0k/s, per 64 messages 107.5k/s; 4 KiB writes to page cache 148k/s.
"""


def markdown(
    rows: Sequence[RowSummary],
    samples: Sequence[RunSample],
    config: BenchSettings,
    info: dict[str, object],
    command: str,
    started: datetime.datetime,
) -> str:
    """The Markdown record: command line, machine, load, table, notes."""
    fs = info.get("file_system")
    fs_text = f"{fs['fs_type']} on {fs['device']}" if isinstance(fs, dict) else "unknown"
    return "\n".join(
        [
            f"# Store append/read benchmark, {started:%Y-%m-%d %H:%M %Z}",
            "",
            "Command (from the repository root):",
            "",
            f"    {command}",
            "",
            f"- Machine: {info['cpu_count']} x {info['cpu_model']}, kernel {info['kernel']}, "
            f"Python {info['python']}, calibration sum(range(1000)) = "
            f"{info['calibration_sum_range_1000_us']} µs (perf.md §2: 15.4 µs).",
            f"- Directory: {info['bench_dir']} ({fs_text}, scheduler {info['disk_scheduler']}); "
            f"commit {info['git_commit']}.",
            f"- {config.runs} interleaved rounds; up to {config.messages:,} messages per run, "
            f"each timed loop bounded at {config.run_seconds_max:g} s; fresh store per run; "
            f"wall time {_minutes(started)}.",
            *_load_summary(samples, config),
            "",
            report.markdown_table(HEADERS, [r.cells() for r in rows]),
            "",
            _NOTES.format(record=rows[0].record_bytes, body=config.body_bytes),
        ]
    )


def payload(
    rows: Sequence[RowSummary],
    samples: Sequence[RunSample],
    config: BenchSettings,
    info: dict[str, object],
    command: str,
    started: datetime.datetime,
) -> dict[str, object]:
    """The JSON record: every number of every run, the summary, machine and settings."""
    config_dict = {
        k: str(v) if isinstance(v, pathlib.Path) else v
        for k, v in dataclasses.asdict(config).items()
    }
    return {
        "benchmark": "store_append",
        "started": started.isoformat(timespec="seconds"),
        "finished": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "command": command,
        "executable": sys.executable,
        "settings": config_dict,
        "machine": info,
        "rows": [r.as_dict() for r in rows],
        "runs": [s.as_dict() for s in samples],
    }


def parse_args(argv: Sequence[str] | None) -> tuple[BenchSettings, bool]:
    """The settings and whether to record results, from the command line."""
    parser = argparse.ArgumentParser(
        prog="python -m bench.store_append",
        description="Store append/read throughput against the disk's own rate (not a test).",
    )
    parser.add_argument("--messages", type=int, help="messages per run (default 100000)")
    parser.add_argument("--runs", type=int, help="interleaved rounds (default 3)")
    parser.add_argument("--dir", type=pathlib.Path, help="where temporary stores live")
    parser.add_argument(
        "--quick", action="store_true", help="3000 messages, 1 round, short gate; not recorded"
    )
    parser.add_argument("--no-record", action="store_true", help="do not write bench/results/")
    args = parser.parse_args(argv)
    config = BenchSettings()
    if args.quick:
        config = dataclasses.replace(
            config,
            messages=3_000,
            runs=1,
            run_seconds_max=3.0,
            quiet_wait_seconds_max=1.0,
            quiet_wait_total_seconds_max=10.0,
            loaded_repeats_max=0,
        )
    if args.messages is not None:
        config = dataclasses.replace(config, messages=args.messages)
    if args.runs is not None:
        config = dataclasses.replace(config, runs=args.runs)
    if args.dir is not None:
        config = dataclasses.replace(config, base_dir=args.dir)
    if not 64 <= config.messages <= 800_000:
        parser.error("--messages must be in [64, 800000] (the read rows read one 1 GiB segment)")
    if not 1 <= config.runs <= 20:
        parser.error("--runs must be in [1, 20]")
    if not config.base_dir.is_dir():
        parser.error(f"--dir {config.base_dir} is not a directory")
    return config, not (args.quick or args.no_record)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark, print the table, record the results; 0 on success."""
    config, record = parse_args(argv)
    console = Console() if sys.stdout.isatty() else Console(width=200)
    started = datetime.datetime.now().astimezone()
    command = report.command_line("bench.store_append")
    disk = machine.disk_of(config.base_dir)
    info = machine.machine_info(config.base_dir, bench.REPO)
    console.print(f"{command}\n{info['cpu_count']} CPUs, load {info['load_average_at_start']}")
    try:
        samples = run_rounds(config, console, disk)
    except BenchmarkError as failure:
        console.print(f"[red]benchmark failed: {failure}[/red]")
        return 1
    rows = summarize(samples, config.quiet_busy_cores_max)
    console.print(rich_table(rows, f"MessageStore vs raw disk, {config.runs} rounds"))
    if record:
        paths = report.write_results(
            "store_append",
            f"{started:%Y-%m-%dT%H%M}",
            payload(rows, samples, config, info, command, started),
            markdown(rows, samples, config, info, command, started),
            bench.RESULTS_DIR,
        )
        console.print("recorded " + ", ".join(str(p) for p in paths))
    return 0


if __name__ == "__main__":
    sys.exit(main())
