"""``python -m bench.compare``: the same workloads against Ariane and Apache RocketMQ 5.5.1.

Both systems are driven by the official ``rocketmq-python-client`` 5.1.2
(``ariane/benchmark/official_client_driver.py``, one process per producer or consumer) and,
in the ``java`` rows, by the official classic Java client ``rocketmq-client`` 5.3.3 (Remoting;
``bench/java/BenchDriver.java``, ``bench.classic_java``), 1 KiB bodies: the same clients against
both systems. RocketMQ runs its 5.5.1 broker, store and remoting with the 5.5.0 name server,
proxy and tools (5.5.1 of those is not served here: ``bench/peers/rocketmq/pom.xml``).

* ``send xN``: N producer processes, one thread each, synchronous ``Producer.send`` (one
  message per SendMessage call); msgs/s over the span all N share (they start together on a
  "go" line), p50/p99 of the per-send latency of all N;
* ``simple drain``: one process, 8 threads of ``SimpleConsumer.receive(32)`` + one ack per
  message, reading the topic the send rows wrote (a fresh group, from the first offset);
* ``push drain``: one ``PushConsumer`` process (8 consumption threads), clock from the first
  listener call to the last;
* before the timed rows, ``--warmup-messages`` untimed sends (8 threads) warm the JVM's JIT
  and both systems' routes, channels and files;
* ``cold start``: from launching the name server to the topic being routable (``ready``), and
  to the first send acknowledged by a fresh official-client process (``first ack``);
* ``RSS``: resident memory (``VmRSS`` of ``/proc/<pid>/status``) of the broker process and its
  descendants (for RocketMQ the JVM holding broker + LOCAL-mode proxy; for Ariane the broker
  and any front-end workers it started) and of broker + name server, idle (after start and the
  first-ack probe) and the maximum sampled every 0.2 s during the send, drain and e2e rows.
* ``drain`` rows read ``--drain-messages`` (default 100k): before them the topic is topped up
  untimed to that count + ``DRAIN_SLACK_MESSAGES`` by N official producer processes.
* ``e2e <rate>/s``: send -> receive latency at a fixed rate on a fresh 8-queue topic. A paced
  producer process (``official_client_driver.py paced``: 4 threads share one schedule, slot k
  at start + k / rate, so a slow call does not shift it; the body starts with the slot number
  and ``time.time_ns()`` taken just before the send) sends ``--e2e-rate`` msgs/s (default 500)
  for ``E2E_WARMUP_S`` (2 s, not counted) + ``--e2e-duration-s`` (default 10 s); a consumer
  process (``e2e``) started before it notes wall-clock receive time - send time per measured
  message (same machine, one clock). ``--e2e-consumer simple`` (default): a SimpleConsumer, 4
  threads of ``receive(32)`` with 5-s long polling, time taken when ``receive`` returns;
  ``push``: a PushConsumer with 4 consumption threads, time taken in the listener. The same
  kind runs on both systems; simple is the default because it gave the lower latency on
  RocketMQ (smoke runs on the shared VM: p50 34 ms simple vs 520 ms push). Rows: p50 and p99
  ms over the unique measured messages, and the achieved send rate (measured messages acked /
  seconds from the first measured slot to the last ack).
* ``ariane.client send_batch 64, 1|8 in flight`` (Ariane only, no RocketMQ column):
  ``client_bench.produce_ours`` (``ariane.client.Producer.send_batch``, 64 x 1 KiB per call,
  1 call or 8 pipelined calls under way), ``--own-messages`` (default 200k) messages, shown
  with the perf.md §2.4 limits SendBatch c1 72k / SendBatch c8 128k msg/s and the ratio to
  them; and the ``ariane.ingest.v1.Ingest/SendStream`` bidi stream (``Producer`` with
  ``streaming=True``, 64 per stream message, window 8) against BidiBatches 174k msg/s.
* ``recovery <n> GiB``: N official producer processes fill the commit log with
  ``--recovery-fill-mib`` (default 1024) of ``--recovery-body-kib`` (default 256) bodies; the
  messages stored (sum of the topic's queue max offsets: RocketMQ ``mqadmin topicStatus``,
  Ariane ``GetConsumerLag``) are counted; the broker is SIGKILLed (RocketMQ: the broker+proxy
  JVM; Ariane: the broker PID, then every process it had started is waited for) and started
  again with the same command line on the same store, the name server still running. Rows,
  from that restart: ``port s`` (the gRPC port accepts: RocketMQ's proxy, Ariane's broker),
  ``routable s`` (gRPC ``QueryRoute`` of the topic answers OK with queues, asked where the
  official client asks), ``first ack s`` (fresh official-client processes send one message
  until one is acked), and ``messages missing`` (stored before + the acked probe - stored
  after; the check ``ok`` is in the notes and the JSON).
* ``java send x1`` / ``java send x8``: one JVM, one ``DefaultMQProducer`` shared by 1 or 8
  threads, synchronous ``send(Message)``, ``--java-send-messages`` (default 20k) in all;
  ``java batch 64``: one thread, synchronous ``send(Collection)`` of 64 messages per call,
  ``--java-batch-messages`` (default 128k), its p50/p99 per call; each JVM first sends
  ``JAVA_WARMUP_MESSAGES`` untimed (the client's JIT). ``java push drain`` (ASYNC_FLUSH): one
  ``DefaultMQPushConsumer`` (8 consumption threads, a fresh group from the first offset) reads
  ``--drain-messages`` after an untimed Java top-up; clock from the first listener call to the
  last. The classic client starts from the name server's Remoting address
  (``Cluster.classic_namesrv``: Ariane's name server port, which sniffs Remoting next to gRPC;
  RocketMQ's namesrv) and sends to the broker's Remoting port, so RocketMQ's proxy is idle.
  The Java client is much cheaper per call than the Python one: these rows measure the brokers
  more than the client.
* ``broker CPU µs/msg`` (a column of every side-by-side msgs/s row, ``cpu_columns``): utime +
  stime from ``/proc`` of the broker's process tree over the timed span (RocketMQ: the JVM
  holding broker + LOCAL-mode proxy; Ariane: the broker process and its front-end workers;
  taken by ``process_cpu.TreeLoadMeter``) / the messages the drivers counted; the name server's
  is kept apart in the JSON (``namesrv_cpu_us_per_msg``). The e2e row counts its warm-up
  messages too (the CPU covers them). The figure holds whoever saturates the machine.
* ``workers=<n>: send xN`` / ``simple drain`` (Ariane only, section "msgs/s against front-end
  workers"): per ``--workers`` count (default 0,1,2) a fresh ASYNC_FLUSH cluster with
  ``dev.dev_cluster(workers=n)``, warm-up, ``send xN`` and a simple drain of what it wrote. Runs
  only when this build's ``dev_cluster`` takes ``workers``; otherwise the rows say "not
  available in this build".

Order (specs/perf.md §2.1): for each flush mode (ASYNC_FLUSH, then SYNC_FLUSH with the send rows
only), ``--rounds`` rounds, each starting a fresh Ariane cluster (``ariane.dev.dev_cluster``)
and then a fresh RocketMQ peer (``bench.peers.rocketmq.peer``): A/B/A/B; in ASYNC_FLUSH the
recovery rows come last (they kill the broker), and the workers sweep follows each round.
``--rows`` picks row groups (send, drain, e2e, own, recovery, workers, java; cold start and RSS
always run; SYNC_FLUSH runs the send rows of both clients). Before each timed run the
quiet-machine gate waits up to ``--quiet-wait-s`` for < 0.25 busy cores; each run records
``ext_cores`` (busy cores minus this process tree: bench, brokers, drivers). The table gives
the median [min-max] over rounds and the ratio Ariane/RocketMQ of the medians. Results:
``bench/results/compare-<UTC stamp>.json``, ``.md`` (tables + command) and ``.png`` (ratios).

Run time of ``make bench`` (defaults: 2 rounds, both flush modes, 100k drains, 1 GiB recovery,
workers 0,1,2 when available): 20 min measured on this 2-core VM when quiet (2026-11-22
23:27-23:47), up to ~40 min when the quiet gate has to wait. ``--drain-messages 20000
--recovery-fill-mib 256 --rounds 1`` cuts it to about 8-10 min; ``--rows e2e --flush async
--rounds 1`` (one row group) to about 2 min. Those times predate the ``java`` rows (in the
default since 2026-11-28), which add their timed rows (0.5-5 min per system and flush mode
on the loaded machine of their first run) and one JVM start per row, and a first run's fetch of
the Java client (about 20 s); ``--rows send,java --rounds 1`` took 26 min on a loaded machine.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import datetime
import inspect
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
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import bench
from ariane import client, dev
from ariane.benchmark import client_bench, machine, measure, process_cpu, report
from bench import classic_java, recovery
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
ROW_GROUPS = ("send", "drain", "e2e", "own", "recovery", "workers", "java")
"""What ``--rows`` selects from (cold start and RSS rows always run)."""
DRAIN_SLACK_MESSAGES = 1024
"""Messages left in a topic beyond what a simple drain reads: a SimpleConsumer thread that
finds the topic empty long-polls 5 s, which would otherwise end up on the drain's clock."""
E2E_WARMUP_S = 2.0
"""Seconds of paced sends before the measured ones (excluded from the latencies)."""
E2E_PRODUCER_THREADS = 4
"""Threads of the paced producer sharing its schedule."""
E2E_CONSUMER_THREADS = 4
"""Threads of the e2e SimpleConsumer (or consumption threads of its PushConsumer)."""
RECOVERY_FILL_PROCESSES = 4
"""Producer processes filling the commit log before the SIGKILL."""
RECOVERY_WAIT_S = 180.0
"""Longest wait for a restarted broker to serve again (port, route, first ack)."""
JAVA_PRODUCER_THREADS = 8
"""Threads of the classic Java producer of ``java send x8`` (one ``DefaultMQProducer``)."""
JAVA_BATCH = 64
"""Messages per ``send(Collection)`` call of ``java batch 64``."""
JAVA_WARMUP_MESSAGES = 2000
"""Untimed sends inside each Java producer JVM before its "ready" (the client's own JIT)."""
Row = tuple[str, float, dict[str, Any]]
"""One figure of one run: metric, value, details."""


@dataclasses.dataclass(frozen=True, slots=True)
class Options:
    """One ``bench.compare`` invocation.

    Attributes:
        rounds: A/B rounds per flush mode (each starts both systems afresh).
        send1_messages: messages of the one-producer send row.
        producers: producer processes of the many-producer send row.
        send_n_messages_per_process: messages each of those producers sends.
        drain_messages: messages each drain row reads (the topic is topped up untimed to this).
        warmup_messages: messages sent untimed before the timed rows (after idle RSS).
        flush_modes: which flush modes run (SYNC_FLUSH runs only the send rows).
        quiet_wait_s: longest wait for a quiet machine before each run, seconds.
        rows: the row groups that run (``ROW_GROUPS``).
        e2e_rate_per_s: send rate of the end-to-end latency row, messages per second.
        e2e_duration_s: measured seconds of that row (after ``E2E_WARMUP_S``).
        e2e_consumer: ``simple`` (SimpleConsumer, long polling) or ``push`` (PushConsumer).
        recovery_fill_bytes: bytes of bodies put in the commit log before the SIGKILL.
        recovery_body_bytes: body size of those messages, bytes.
        own_messages: messages per run of the rows of Ariane's own batching client.
        workers: front-end worker counts of the workers sweep.
        ariane_workers: the Ariane broker's ``workers`` in every other row (``None``: the
            broker's default, the CPU count).
        java_send_messages: messages of each of ``java send x1`` and ``java send x8``.
        java_batch_messages: messages of ``java batch 64`` (in calls of ``JAVA_BATCH``).
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
    rows: tuple[str, ...]
    e2e_rate_per_s: float
    e2e_duration_s: float
    e2e_consumer: str
    recovery_fill_bytes: int
    recovery_body_bytes: int
    own_messages: int
    workers: tuple[int, ...]
    record: bool
    results_dir: pathlib.Path
    command: str
    ariane_workers: int | None = None
    java_send_messages: int = 20_000
    java_batch_messages: int = 128_000


@dataclasses.dataclass(frozen=True, slots=True)
class Cluster:
    """One running system: where the official client connects and which processes to watch.

    Attributes:
        system: ``ariane`` or ``rocketmq``.
        endpoints: what the official client takes (Ariane's name server, RocketMQ's proxy).
        topic: the 8-queue topic of the send and drain rows.
        launched: ``time.monotonic()`` when the start began.
        ready_s: seconds from launch to the topic being routable.
        broker_pid: the broker process (RocketMQ: the JVM holding broker + proxy).
        namesrv_pid: the name server process.
        work_dir: Ariane's data dir, or the RocketMQ peer's temp dir.
        running: the RocketMQ peer (to restart its broker), None for Ariane.
        classic_namesrv: the name server's Remoting address, ``HOST:PORT``, where the classic
            clients start (Ariane: the same port as gRPC, sniffed; RocketMQ: its namesrv, whose
            routes send them straight to the broker's Remoting port, past the proxy).
    """

    system: str
    endpoints: str
    topic: str
    launched: float
    ready_s: float
    broker_pid: int
    namesrv_pid: int
    work_dir: pathlib.Path
    running: peer.RunningPeer | None
    classic_namesrv: str = ""


# -- the two systems -------------------------------------------------------------------------


def _child_with(words: Sequence[str]) -> int:
    """The pid of our direct child whose command line holds every word of ``words`` (direct,
    so that a broker's own worker processes, which may share its command line, never match)."""
    for pid in process_cpu.descendants(os.getpid()):
        try:
            cmdline = pathlib.Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            stat = pathlib.Path(f"/proc/{pid}/stat").read_text(errors="replace")
        except OSError:
            continue
        if int(stat[stat.rfind(")") + 2 :].split()[1]) != os.getpid():
            continue
        text = [part.decode(errors="replace") for part in cmdline]
        if all(any(word in part for part in text) for word in words):
            return pid
    raise RuntimeError(f"no child process with {words} in its command line")


def workers_supported() -> bool:
    """Whether this build's ``ariane.dev.dev_cluster`` takes ``workers`` (front-end workers)."""
    return "workers" in inspect.signature(dev.dev_cluster).parameters


@contextlib.contextmanager
def ariane_cluster(
    base: pathlib.Path,
    flush: str,
    tag: str,
    workers: int | None = None,
    broker_role: str = "",
    *,
    secure: bool = False,
) -> Iterator[Cluster]:
    """A fresh ``ariane dev`` cluster with an 8-queue topic; its data is removed afterwards.

    ``workers`` (front-end worker processes) is passed on only when not None, so it needs a
    build where ``workers_supported()``; a ``broker_role`` (``ASYNC_MASTER``/``SYNC_MASTER``)
    gives the broker one slave (the measured broker stays the master). ``secure``: ``ariane dev
    --secure`` (TLS enforcing on every port, ACL 2.0 on); the topic is created as its Super
    user, and for the ``with`` block the drivers started by ``run_drivers`` sign as that user
    over TLS (``secured_drivers``).
    """
    data_dir = base / f"ariane-{tag}"
    launched = time.monotonic()
    extra: dict[str, Any] = {} if workers is None else {"workers": workers}
    if broker_role:
        extra.update(slaves=1, broker_role=broker_role)
    if secure:
        extra["secure"] = True
    master_words = ["--metrics-listen"] if broker_role else []  # slaves run without metrics
    try:
        with (
            dev.dev_cluster(data_dir, namesrv_port=0, flush_disk_type=flush, **extra) as endpoints,
            secured_drivers(endpoints),
        ):
            topic = f"compare-{tag}"
            asyncio.run(
                client_bench.create_topic(endpoints.namesrv, topic, **_admin_auth(endpoints))
            )
            ready = time.monotonic() - launched
            yield Cluster(
                "ariane",
                endpoints.namesrv,
                topic,
                launched,
                ready,
                _child_with(["ariane", "broker", "--store-dir", *master_words]),
                _child_with(["ariane", "namesrv"]),
                data_dir,
                None,
                classic_namesrv=endpoints.namesrv,
            )
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)


def _admin_auth(endpoints: dev.DevEndpoints) -> dict[str, Any]:
    """``create_topic``'s ``credentials`` and ``tls`` for a secured cluster ({} for a plain one)."""
    if not endpoints.credentials_path:
        return {}
    saved = json.loads(pathlib.Path(endpoints.credentials_path).read_text())
    return {
        "credentials": client.Credentials(saved["access_key"], saved["secret_key"]),
        "tls": client.ClientTls(ca_file=endpoints.ca_path),
    }


@contextlib.contextmanager
def secured_drivers(endpoints: dev.DevEndpoints) -> Iterator[None]:
    """For a secured cluster, the environment that makes every official-client driver started
    meanwhile sign as its Super user over TLS verified against its CA
    (``official_client_driver``'s ``RMQ_DRIVER_*`` and ``GRPC_DEFAULT_SSL_ROOTS_FILE_PATH``);
    restored after. Nothing for a plain cluster."""
    if not endpoints.credentials_path:
        yield
        return
    saved = json.loads(pathlib.Path(endpoints.credentials_path).read_text())
    wanted = {
        "RMQ_DRIVER_ACCESS_KEY": saved["access_key"],
        "RMQ_DRIVER_SECRET_KEY": saved["secret_key"],
        "RMQ_DRIVER_TLS": "1",
        "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH": endpoints.ca_path,
    }
    before = {name: os.environ.get(name) for name in wanted}
    os.environ.update(wanted)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextlib.contextmanager
def rocketmq_cluster(flush: str, tag: str) -> Iterator[Cluster]:
    """A fresh RocketMQ (``peer.version()``) name server + broker/proxy with its 8-queue
    ``BenchTopic``."""
    launched = time.monotonic()
    with peer.running_peer(peer.FlushMode(flush)) as running:
        endpoints = running.endpoints
        ready = time.monotonic() - launched
        yield Cluster(
            "rocketmq",
            endpoints.grpc,
            endpoints.topic,
            launched,
            ready,
            running.broker_pid,
            _child_with([peer.NAMESRV_MAIN]),
            endpoints.work_dir,
            running,
            classic_namesrv=endpoints.namesrv,
        )


def start(
    system: str, base: pathlib.Path, flush: str, tag: str, ariane_workers: int | None = None
) -> contextlib.AbstractContextManager[Cluster]:
    """The context manager that runs ``system`` (Ariane with ``ariane_workers`` if given)."""
    if system == "ariane":
        return ariane_cluster(base, flush, tag, workers=ariane_workers)
    return rocketmq_cluster(flush, tag)


# -- resident memory -------------------------------------------------------------------------


def rss_tree_bytes(pid: int) -> int:
    """``VmRSS`` of a process plus its descendants (a broker's front-end workers), bytes."""
    return sum(rss_bytes(p) for p in (pid, *process_cpu.descendants(pid)))


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
            broker, namesrv = rss_tree_bytes(self._pids[0]), rss_bytes(self._pids[1])
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
    cpu_s_by_pid: dict[int, float] = dataclasses.field(default_factory=dict)
    """CPU seconds per live process of this tree over the timed span (``bench.broker_cpu``)."""


def _spawn_driver(
    args: Sequence[str], log: pathlib.Path, program: Sequence[str] | None = None
) -> subprocess.Popen[str]:
    """Start one driver: ``program`` (default: the official Python client's driver) + ``args``."""
    with log.open("ab") as log_file:
        return subprocess.Popen(
            [*(program or client_bench.driver_command()), *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log_file,
            text=True,
        )


def _read_event(proc: subprocess.Popen[str], wanted: str, log: pathlib.Path) -> dict[str, Any]:
    assert proc.stdout is not None
    while line := proc.stdout.readline():
        if not line.startswith("{"):
            continue  # not an event: a JVM or client library writing to stdout
        event: dict[str, Any] = json.loads(line)
        if event["event"] == wanted:
            return event
    raise RuntimeError(f"the official client's driver exited before {wanted!r}; see {log}")


@contextlib.contextmanager
def _guarded(procs: list[subprocess.Popen[str]]) -> Iterator[None]:
    """Kill ``procs`` (our own children, by their handles) if the block outlasts
    ``RUN_TIMEOUT_S``, and any still running when it ends."""

    def kill_all() -> None:
        for proc in procs:
            proc.kill()

    killer = threading.Timer(RUN_TIMEOUT_S, kill_all)
    killer.start()
    try:
        yield
    finally:
        killer.cancel()
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def combine_done(done: Sequence[dict[str, Any]]) -> tuple[measure.Timing, int]:
    """The ``done`` events of drivers that ran together, as one ``Timing`` and an error count.

    Throughput is all messages over the longest driver's clock (``seconds``); the latencies
    (``latencies_us``, one per call, µs) are pooled and kept in ns, as ``measure.Timing`` takes
    them. The same for the official Python client's driver and ``BenchDriver.java``.
    """
    latencies = [us * 1000 for event in done for us in event["latencies_us"]]
    messages = sum(int(event["messages"]) for event in done)
    seconds = max((float(event["seconds"]) for event in done), default=0.0)
    timing = measure.Timing(messages, len(latencies), messages * BODY_BYTES, seconds, latencies)
    return timing, sum(int(event["errors"]) for event in done)


def run_drivers(
    commands: Sequence[Sequence[str]], disk: str | None, program: Sequence[str] | None = None
) -> DriverResult:
    """Start one driver per command, let them go together, and combine their reports
    (``combine_done``). ``program``: the driver to run (default: the official Python client's).

    Raises:
        RuntimeError: a driver exited before it finished (its stderr is in the log named).
    """
    log = pathlib.Path(tempfile.gettempdir()) / "ariane-bench-compare-driver.log"
    procs = [_spawn_driver(c, log, program) for c in commands]
    meter = process_cpu.TreeLoadMeter(disk)
    with _guarded(procs):
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
    timing, errors = combine_done(done)
    cpu_s = {pid: cores * load.wall_s for pid, cores in meter.cores_by_pid.items()}
    return DriverResult(timing, load, errors, cpu_s)


def broker_pids(cluster: Cluster) -> tuple[int, ...]:
    """The broker's process tree, taken now: RocketMQ's broker JVM (it holds the LOCAL-mode
    proxy too), Ariane's broker (the store owner) and its front-end workers. Empty when the
    caller did not name the broker (``broker_pid`` 0, as ``bench.replication`` does)."""
    if cluster.broker_pid <= 0:
        return ()
    return (cluster.broker_pid, *process_cpu.descendants(cluster.broker_pid))


def cpu_us_per_message(
    cpu_s_by_pid: dict[int, float], pids: Sequence[int], messages: int
) -> float | None:
    """CPU time of the processes ``pids`` per message, µs (None when no message was counted).

    Args:
        cpu_s_by_pid: CPU seconds of each process over the timed span (``DriverResult``).
        pids: the processes to count (one process counts once, however often it is named).
        messages: messages the drivers counted over that span.
    """
    if messages <= 0:
        return None
    return sum(cpu_s_by_pid.get(pid, 0.0) for pid in set(pids)) * 1e6 / messages


def _cpu_details(
    cluster: Cluster, pids: Sequence[int], cpu_s_by_pid: dict[int, float], messages: int
) -> dict[str, Any]:
    """The broker's (and, apart, the name server's) CPU µs per message of one run."""
    broker = cpu_us_per_message(cpu_s_by_pid, pids, messages)
    namesrv = cpu_us_per_message(cpu_s_by_pid, (cluster.namesrv_pid,), messages)
    if not pids or cluster.namesrv_pid <= 0 or broker is None or namesrv is None:
        return {}  # pid 0 would be this process in ``cpu_s_by_pid``
    return {"broker_cpu_us_per_msg": round(broker, 1), "namesrv_cpu_us_per_msg": round(namesrv, 1)}


def driver_args(
    kind: str, cluster: Cluster, count: int, threads: int, group: str, body_bytes: int = BODY_BYTES
) -> list[str]:
    """One driver's command line (``kind`` is produce, consume or push)."""
    args = [kind, "--endpoints", cluster.endpoints, "--topic", cluster.topic]
    args += ["--count", str(count), "--threads", str(threads), "--wait-go"]
    args += ["--deadline-s", str(RUN_TIMEOUT_S - 30), "--body-bytes", str(body_bytes)]
    return args if kind == "produce" else [*args, "--group", group]


def probe_send(cluster: Cluster) -> float | None:
    """One send by a fresh official-client process: ``time.monotonic()`` when it was
    acknowledged, or None when it failed."""
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
    return acked if event["messages"] == 1 else None


def first_ack_s(cluster: Cluster) -> float:
    """Seconds from the cluster's launch to one send acknowledged by a fresh driver process."""
    acked = probe_send(cluster)
    if acked is None:
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


def _load_details(gate: machine.GateResult, load: machine.RunLoad) -> dict[str, Any]:
    """The quiet gate's outcome and the outside load of one run (perf.md §2.1)."""
    return {
        "quiet": gate.quiet,
        "gate_busy_cores": round(gate.busy_cores, 2),
        "ext_cores": round(load.ext_cores, 2),
        "own_cores": round(load.own_cores, 2),
        "load_1m": round(load.load_1m, 2),
    }


def _details(gate: machine.GateResult, result: DriverResult) -> dict[str, Any]:
    return {
        **_load_details(gate, result.load),
        "errors": result.errors,
        "messages": result.timing.messages,
        "seconds": round(result.timing.seconds, 3),
    }


def _timed_rows(
    name: str,
    commands: Sequence[Sequence[str]],
    latencies: bool,
    opts: Options,
    disk: str | None,
    cluster: Cluster,
    program: Sequence[str] | None = None,
) -> list[Row]:
    """One timed run of ``commands`` (drivers of ``program``, default the official Python
    client's): its msgs/s row (details: load, errors and the broker's CPU µs per message) and,
    with ``latencies``, its p50 and p99 per-call latency rows."""
    gate = machine.wait_for_quiet(QUIET_BUSY_CORES_MAX, opts.quiet_wait_s)
    pids = broker_pids(cluster)
    result = run_drivers(commands, disk, program)
    details = _details(gate, result)
    details |= _cpu_details(cluster, pids, result.cpu_s_by_pid, result.timing.messages)
    rows = [(f"{name} msgs/s", result.timing.messages_per_s, details)]
    if latencies:
        rows.append((f"{name} p50 ms", result.timing.latency_us(50) / 1e3, details))
        rows.append((f"{name} p99 ms", result.timing.latency_us(99) / 1e3, details))
    return rows


def _send_rows(cluster: Cluster, opts: Options, disk: str | None) -> tuple[list[Row], int]:
    """Warm-up (untimed), ``send x1`` and ``send xN``; also returns the messages written."""
    written = 0
    if opts.warmup_messages:  # untimed: warms the JVM's JIT and both systems' routes and files
        warmup = driver_args("produce", cluster, opts.warmup_messages, opts.producers, "")
        written += run_drivers([warmup], disk).timing.messages
    rows: list[Row] = []
    if "send" not in opts.rows:
        return rows, written
    one = [driver_args("produce", cluster, opts.send1_messages, 1, "")]
    rows += _timed_rows("send x1", one, True, opts, disk, cluster)
    many = [
        driver_args("produce", cluster, opts.send_n_messages_per_process, 1, "")
        for _ in range(opts.producers)
    ]
    rows += _timed_rows(f"send x{opts.producers}", many, True, opts, disk, cluster)
    written += opts.send1_messages + opts.producers * opts.send_n_messages_per_process
    return rows, written


def _drain_rows(
    cluster: Cluster,
    opts: Options,
    disk: str | None,
    token: str,
    written: int,
    kinds: Sequence[str],
) -> list[Row]:
    """Top the topic up to ``drain_messages`` + ``DRAIN_SLACK_MESSAGES`` (untimed, N producer
    processes), then read ``drain_messages`` of it with a fresh group per row (``consume``:
    simple drain; ``push``: push drain)."""
    missing = opts.drain_messages + DRAIN_SLACK_MESSAGES - written
    if missing > 0:
        share = -(-missing // opts.producers)
        fill = [driver_args("produce", cluster, share, 1, "") for _ in range(opts.producers)]
        run_drivers(fill, disk)
    rows: list[Row] = []
    for kind in kinds:
        name = {"consume": "simple drain", "push": "push drain"}[kind]
        group = f"compare-{kind}-{token}"
        command = [driver_args(kind, cluster, opts.drain_messages, DRAIN_THREADS, group)]
        rows += _timed_rows(name, command, False, opts, disk, cluster)
    return rows


def workloads(
    cluster: Cluster,
    flush: str,
    opts: Options,
    disk: str | None,
    token: str,
    java: JavaDriver | None = None,
) -> list[Row]:
    """Every row on one running cluster: cold start, RSS, sends, (ASYNC) the drains and the
    end-to-end latency, the classic Java client's rows (with ``java``), Ariane's own client
    and, last, the recovery after SIGKILL."""
    rows: list[Row] = [
        ("cold start: ready s", cluster.ready_s, {}),
        ("cold start: first ack s", first_ack_s(cluster), {}),
    ]
    rows.append(("RSS idle broker MiB", rss_tree_bytes(cluster.broker_pid) / 2**20, {}))
    idle_total = rss_tree_bytes(cluster.broker_pid) + rss_bytes(cluster.namesrv_pid)
    rows.append(("RSS idle broker+namesrv MiB", idle_total / 2**20, {}))
    asynchronous = flush == "ASYNC_FLUSH"
    with RssSampler(cluster) as sampler:
        send, written = _send_rows(cluster, opts, disk)
        rows += send
        if asynchronous and "drain" in opts.rows:
            rows += _drain_rows(cluster, opts, disk, token, written, ("consume", "push"))
            written = max(written, opts.drain_messages + DRAIN_SLACK_MESSAGES)
        if asynchronous and "e2e" in opts.rows:
            rows += e2e_rows(cluster, opts, disk, token)
        if java is not None and "java" in opts.rows:
            rows += java_rows(cluster, flush, opts, disk, token, java, written)
    rows.append(("RSS under load broker MiB", sampler.broker_max / 2**20, {}))
    rows.append(("RSS under load broker+namesrv MiB", sampler.total_max / 2**20, {}))
    if asynchronous and "own" in opts.rows and cluster.system == "ariane":
        rows += own_client_rows(cluster, flush, opts, disk)
    if asynchronous and "recovery" in opts.rows:
        rows += recovery_rows(cluster, opts, disk, token)
    return rows


# -- the official classic Java client (Remoting) ---------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class JavaDriver:
    """The built ``BenchDriver.java`` (``bench.classic_java``).

    Attributes:
        program: the JVM's command line up to the scenario.
        version: the ``rocketmq-client`` version it runs.
    """

    program: tuple[str, ...]
    version: str


def java_driver(base: pathlib.Path) -> JavaDriver:
    """Fetch the classic Java client and compile the driver (cached); its logs go under ``base``.

    Raises:
        classic_java.JavaClientError: Maven, the JDK or Maven Central failed.
    """
    logs = base / "java-client-logs"
    logs.mkdir(parents=True, exist_ok=True)
    program = classic_java.command(classic_java.build(), logs)
    return JavaDriver(tuple(program), classic_java.client_version())


def _java_produce(cluster: Cluster, count: int, threads: int, batch: int, warmup: int) -> list[str]:
    return classic_java.produce_args(
        cluster.classic_namesrv,
        cluster.topic,
        count=count,
        threads=threads,
        batch=batch,
        body_bytes=BODY_BYTES,
        warmup=warmup,
        deadline_s=RUN_TIMEOUT_S - 30,
    )


def java_rows(
    cluster: Cluster,
    flush: str,
    opts: Options,
    disk: str | None,
    token: str,
    java: JavaDriver,
    written: int,
) -> list[Row]:
    """``java send x1`` / ``x8`` / ``batch 64`` and (ASYNC_FLUSH) ``java push drain``: the
    official classic Java client from the cluster's Remoting name server, one JVM per row.

    ``written``: messages already in the topic; the drain tops it up (untimed, Java, 8 threads
    of 64-message batches) to ``drain_messages`` + ``DRAIN_SLACK_MESSAGES`` and reads
    ``drain_messages`` with a fresh group.
    """
    program, warmup = java.program, JAVA_WARMUP_MESSAGES
    send = opts.java_send_messages
    runs = [
        ("java send x1", _java_produce(cluster, send, 1, 1, warmup)),
        (
            f"java send x{JAVA_PRODUCER_THREADS}",
            _java_produce(cluster, send, JAVA_PRODUCER_THREADS, 1, warmup),
        ),
        (
            f"java batch {JAVA_BATCH}",
            _java_produce(cluster, opts.java_batch_messages, 1, JAVA_BATCH, warmup),
        ),
    ]
    rows: list[Row] = []
    for name, args in runs:
        mine = _timed_rows(name, [args], True, opts, disk, cluster, program)
        written += warmup + int(mine[0][2]["messages"])
        rows += mine
    if flush != FLUSH_MODES[0]:
        return rows
    missing = opts.drain_messages + DRAIN_SLACK_MESSAGES - written
    if missing > 0:
        top_up = _java_produce(
            cluster, max(missing, JAVA_BATCH), JAVA_PRODUCER_THREADS, JAVA_BATCH, 0
        )
        run_drivers([top_up], disk, program)
    drain = classic_java.push_args(
        cluster.classic_namesrv,
        cluster.topic,
        group=f"compare-java-push-{token}",
        count=opts.drain_messages,
        threads=DRAIN_THREADS,
        deadline_s=RUN_TIMEOUT_S - 30,
    )
    return rows + _timed_rows("java push drain", [drain], False, opts, disk, cluster, program)


# -- send -> receive latency at a fixed rate ---------------------------------------------------


def _e2e_topic(cluster: Cluster, token: str) -> str:
    """A fresh 8-queue topic for the latency row (so the consumer never meets older messages)."""
    topic = f"e2e-{token}"
    if cluster.running is None:
        asyncio.run(client_bench.create_topic(cluster.endpoints, topic))
    else:
        endpoints = cluster.running.endpoints
        peer.create_topic(endpoints, topic, peer.PeerSettings().queue_count)
        peer.wait_routed(endpoints, topic, time.monotonic() + RECOVERY_WAIT_S)
    return topic


def run_e2e(
    consumer_args: Sequence[str], producer_args: Sequence[str], disk: str | None
) -> tuple[dict[str, Any], dict[str, Any], machine.RunLoad, dict[int, float]]:
    """Start the e2e consumer, then the paced producer; tell the consumer how many measured
    messages were acked; return both ``done`` events, the load over the paced run and the CPU
    seconds of each process of this tree over it.

    Raises:
        RuntimeError: a driver exited before it finished (its stderr is in the log named).
    """
    log = pathlib.Path(tempfile.gettempdir()) / "ariane-bench-compare-driver.log"
    procs = [_spawn_driver(consumer_args, log)]
    with _guarded(procs):
        _read_event(procs[0], "ready", log)
        procs.append(_spawn_driver(producer_args, log))
        consumer, producer = procs
        _read_event(producer, "ready", log)
        meter = process_cpu.TreeLoadMeter(disk)
        meter.start()
        assert producer.stdin is not None and consumer.stdin is not None
        producer.stdin.write("go\n")
        producer.stdin.flush()
        sent = _read_event(producer, "done", log)
        consumer.stdin.write(f"expect {sent['messages']}\n")
        consumer.stdin.flush()
        received = _read_event(consumer, "done", log)
        load = meter.stop()
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.close()
            proc.wait(timeout=60)
    cpu_s = {pid: cores * load.wall_s for pid, cores in meter.cores_by_pid.items()}
    return sent, received, load, cpu_s


def e2e_rows(cluster: Cluster, opts: Options, disk: str | None, token: str) -> list[Row]:
    """``e2e <rate>/s``: paced official-client sends, receive - send wall-clock latency."""
    topic = _e2e_topic(cluster, token)
    rate = opts.e2e_rate_per_s
    where = ["--endpoints", cluster.endpoints, "--topic", topic]
    consumer_args = ["e2e", *where, "--group", f"compare-e2e-{token}", "--mode", opts.e2e_consumer]
    consumer_args += ["--threads", str(E2E_CONSUMER_THREADS)]
    consumer_args += ["--skip", str(round(rate * E2E_WARMUP_S))]
    producer_args = ["paced", *where, "--rate", str(rate), "--duration-s", str(opts.e2e_duration_s)]
    producer_args += ["--warmup-s", str(E2E_WARMUP_S), "--threads", str(E2E_PRODUCER_THREADS)]
    producer_args += ["--wait-go"]
    gate = machine.wait_for_quiet(QUIET_BUSY_CORES_MAX, opts.quiet_wait_s)
    pids = broker_pids(cluster)
    sent, received, load, cpu_s = run_e2e(consumer_args, producer_args, disk)
    latencies = sorted(float(us) for us in received["latencies_us"])
    late = sorted(float(us) for us in sent["latencies_us"])
    details = {
        **_load_details(gate, load),
        "errors": int(sent["errors"]) + int(received["errors"]),
        "messages": sent["messages"],
        "received": received["messages"],
        "duplicates": received["duplicates"],
        "seconds": round(float(sent["seconds"]), 3),
        "send_late_p99_ms": round(measure.percentile(late, 99) / 1e3, 3),
        "consumer": opts.e2e_consumer,
    }
    # the CPU covers the warm-up slots too: count them (each message is sent and received once)
    paced = int(sent["messages"]) + round(rate * E2E_WARMUP_S)
    details |= _cpu_details(cluster, pids, cpu_s, paced)
    name = f"e2e {rate:g}/s"
    return [
        (f"{name} achieved msgs/s", sent["messages"] / float(sent["seconds"]), details),
        (f"{name} p50 ms", measure.percentile(latencies, 50) / 1e3, details),
        (f"{name} p99 ms", measure.percentile(latencies, 99) / 1e3, details),
    ]


# -- Ariane's own batching client next to perf.md §2.4 ----------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class OwnClientRow:
    """One row of Ariane's own client (``ariane.client.Producer``), no RocketMQ column.

    Attributes:
        metric: the row's name (``msgs/s`` rows).
        batch: messages per call.
        in_flight: calls under way at once (pipelined when above 1).
        limit_label: the transport-only limit of perf.md §2.4 it is set against.
        limit_msgs_per_s: that limit, msgs/s.
        scenario: the ``client_bench`` scenario that drives it (``ours-batch`` unary
            ``send_batch``, ``ours-stream`` the ``Ingest/SendStream`` bidi stream).
        built: False for a row whose client method does not exist yet (shown as not measured).
    """

    metric: str
    batch: int
    in_flight: int
    limit_label: str
    limit_msgs_per_s: float
    scenario: str = "ours-batch"
    built: bool = True


OWN_CLIENT_ROWS = (
    OwnClientRow("ariane.client send_batch 64, 1 in flight msgs/s", 64, 1, "SendBatch c1", 72e3),
    OwnClientRow("ariane.client send_batch 64, 8 in flight msgs/s", 64, 8, "SendBatch c8", 128e3),
    # the bidi stream answers each 64-message request: perf.md's BidiBatches (one ack per batch)
    OwnClientRow(
        "ariane.client streaming (SendStream), 64 per message, window 8 msgs/s",
        64,
        8,
        "BidiBatches",
        174e3,
        scenario="ours-stream",
    ),
)
"""The rows of Ariane's own client, in table order."""


def own_client_rows(cluster: Cluster, flush: str, opts: Options, disk: str | None) -> list[Row]:
    """Each built ``OWN_CLIENT_ROWS`` entry once (``client_bench.produce_ours``), 1 KiB bodies."""
    rows: list[Row] = []
    for spec in (r for r in OWN_CLIENT_ROWS if r.built):
        options = client_bench.Options(
            kind="produce",
            endpoints=cluster.endpoints,
            messages=opts.own_messages,
            single_messages=opts.own_messages,
            official_messages=opts.own_messages,
            batch=spec.batch,
            in_flight=spec.in_flight,
            threads=1,
            rounds=1,
            body_bytes=BODY_BYTES,
            scenarios=(spec.scenario,),
            quiet_wait_s=opts.quiet_wait_s,
            flush_disk_type=flush,
            json_output=False,
            record=False,
            results_dir=opts.results_dir,
            data_dir=bench.REPO,
            command=opts.command,
        )
        target = client_bench.Target(cluster.endpoints, cluster.topic, "")
        gate = machine.wait_for_quiet(QUIET_BUSY_CORES_MAX, opts.quiet_wait_s)
        meter = process_cpu.TreeLoadMeter(disk)
        timing, load, errors, _ = asyncio.run(
            client_bench.produce_ours(target, options, spec.scenario, lambda n: None, meter)
        )
        result = DriverResult(timing, load, errors)
        details = _details(gate, result)
        details["p99_ms_per_call"] = round(timing.latency_us(99) / 1e3, 3)
        rows.append((spec.metric, timing.messages_per_s, details))
    return rows


# -- recovery after SIGKILL ----------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class _Restart:
    """How to kill and restart one system's broker (see ``bench.recovery``)."""

    kill: Callable[[], None]
    restart: Callable[[], None]
    exited: Callable[[], bool]
    stop: Callable[[], None]
    port: int


def _restart_of(cluster: Cluster) -> _Restart:
    if cluster.running is not None:
        running = cluster.running
        return _Restart(
            running.kill_broker,
            running.restart_broker,
            running.broker_exited,
            lambda: None,  # running_peer stops the restarted JVM
            running.grpc_port,
        )
    broker = recovery.ArianeBroker(cluster.broker_pid, cluster.work_dir / "broker-restart.log")
    return _Restart(broker.kill, broker.restart, broker.exited, broker.stop, broker.port)


def _stored_messages(cluster: Cluster, token: str) -> int:
    """Messages stored in the cluster's topic: the sum of its queues' max offsets."""
    if cluster.running is not None:
        return peer.topic_max_offset_total(cluster.running.endpoints, cluster.topic)
    group = f"compare-offsets-{token}"
    return asyncio.run(recovery.ariane_max_offset_total(cluster.endpoints, cluster.topic, group))


def _fill_commit_log(cluster: Cluster, opts: Options, disk: str | None) -> DriverResult:
    """Put ``recovery_fill_bytes`` of large bodies in the commit log (official client)."""
    count = -(-opts.recovery_fill_bytes // opts.recovery_body_bytes)
    share = -(-count // RECOVERY_FILL_PROCESSES)
    body = opts.recovery_body_bytes
    fill = [
        driver_args("produce", cluster, share, 1, "", body) for _ in range(RECOVERY_FILL_PROCESSES)
    ]
    return run_drivers(fill, disk)


def _serve_again(cluster: Cluster, restart: _Restart) -> tuple[float, float, float, int]:
    """Restart the killed broker; seconds until its port accepts, the topic routes and a fresh
    client's send is acked (NaN for what did not happen within ``RECOVERY_WAIT_S``), and the
    probe sends made."""
    nan = float("nan")
    started = time.monotonic()
    deadline = started + RECOVERY_WAIT_S
    restart.restart()
    if not recovery.wait_port(restart.port, restart.exited, deadline):
        return nan, nan, nan, 0
    port_s = time.monotonic() - started
    if not recovery.wait_routed(cluster.endpoints, cluster.topic, deadline):
        return port_s, nan, nan, 0
    routed_s = time.monotonic() - started
    probes = 0
    while time.monotonic() < deadline and not restart.exited():
        probes += 1
        acked = probe_send(cluster)
        if acked is not None:
            return port_s, routed_s, acked - started, probes
    return port_s, routed_s, nan, probes


def recovery_rows(cluster: Cluster, opts: Options, disk: str | None, token: str) -> list[Row]:
    """Fill the commit log, SIGKILL the broker, restart it on the same store: time to port,
    route and first ack, and a check that every stored message is still there."""
    filled = _fill_commit_log(cluster, opts, disk)
    before = _stored_messages(cluster, token)
    restart = _restart_of(cluster)
    restart.kill()
    gate = machine.wait_for_quiet(QUIET_BUSY_CORES_MAX, opts.quiet_wait_s)
    meter = process_cpu.TreeLoadMeter(disk)
    try:
        meter.start()
        port_s, routed_s, ack_s, probes = _serve_again(cluster, restart)
        load = meter.stop()
        after = _stored_messages(cluster, token) if probes else -1
    finally:
        restart.stop()
    acked = 0 if ack_s != ack_s else 1  # NaN: no probe was acked
    missing = max(before + acked - after, 0) if after >= 0 else before
    details = {
        **_load_details(gate, load),
        "errors": filled.errors,
        "fill_messages": filled.timing.messages,
        "fill_mb_per_s": round(
            filled.timing.messages * opts.recovery_body_bytes / 1e6 / filled.timing.seconds, 1
        ),
        "stored_before_kill": before,
        "stored_after_restart": after,
        "probe_sends": probes,
        "check": "ok" if missing == 0 and acked else "FAILED",
    }
    name = f"recovery {opts.recovery_fill_bytes / 2**30:g} GiB"
    rows = [
        (f"{name}: port s", port_s, details),
        (f"{name}: routable s", routed_s, details),
        (f"{name}: first ack s", ack_s, details),
        (f"{name}: messages missing", float(missing), details),
    ]
    return [row for row in rows if row[1] == row[1]]  # a NaN time is not a sample


# -- msgs/s against front-end workers (Ariane only) --------------------------------------------


def workers_rows(
    opts: Options, base: pathlib.Path, disk: str | None, round_index: int, log: Any
) -> list[Sample]:
    """For each ``--workers`` count: a fresh Ariane cluster (ASYNC_FLUSH), warm-up, ``send xN``
    and a simple drain of what it wrote less ``DRAIN_SLACK_MESSAGES``."""
    flush = FLUSH_MODES[0]
    samples: list[Sample] = []
    for workers in opts.workers:
        token = f"w{workers}r{round_index}-{secrets.token_hex(3)}"
        log(f"workers sweep round {round_index + 1}/{opts.rounds}: workers={workers} starting")
        with ariane_cluster(base, flush, token, workers=workers) as cluster:
            sweep = dataclasses.replace(opts, rows=("send",), warmup_messages=0)
            first = driver_args("produce", cluster, opts.warmup_messages, opts.producers, "")
            written = run_drivers([first], disk).timing.messages if opts.warmup_messages else 0
            many = [
                driver_args("produce", cluster, opts.send_n_messages_per_process, 1, "")
                for _ in range(opts.producers)
            ]
            rows = _timed_rows(f"send x{opts.producers}", many, False, sweep, disk, cluster)
            written += opts.producers * opts.send_n_messages_per_process
            count = (
                written - DRAIN_SLACK_MESSAGES if written > 2 * DRAIN_SLACK_MESSAGES else written
            )
            drain = dataclasses.replace(opts, drain_messages=count)
            rows += _drain_rows(cluster, drain, disk, token, written, ("consume",))
        for metric, value, details in rows:
            sample = Sample(
                f"workers={workers}: {metric}", flush, "ariane", round_index, value, details
            )
            samples.append(sample)
            log(f"  ariane workers={workers} {metric}: {value:,.2f} {details}")
    return samples


def run_all(opts: Options, base: pathlib.Path, log: Any) -> list[Sample]:
    """Every flush mode, every round, Ariane then RocketMQ (A/B/A/B), then (ASYNC_FLUSH) the
    workers sweep of that round."""
    disk = machine.disk_of(base)
    samples: list[Sample] = []
    modes = [
        f for f in opts.flush_modes if f == FLUSH_MODES[0] or {"send", "java"} & set(opts.rows)
    ]
    java = java_driver(base) if "java" in opts.rows else None
    for flush in modes:
        for round_index in range(opts.rounds):
            for system in SYSTEMS:
                token = f"{flush[:1].lower()}{round_index}-{secrets.token_hex(3)}"
                log(f"{flush} round {round_index + 1}/{opts.rounds}: {system} starting")
                with start(system, base, flush, token, opts.ariane_workers) as cluster:
                    rows = workloads(cluster, flush, opts, disk, token, java)
                for metric, value, details in rows:
                    samples.append(Sample(metric, flush, system, round_index, value, details))
                    log(f"  {system} {flush} {metric}: {value:,.2f} {details}")
            sweep = flush == FLUSH_MODES[0] and "workers" in opts.rows and workers_supported()
            if sweep:
                samples += workers_rows(opts, base, disk, round_index, log)
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
        row |= cpu_columns(metric, by_system)
        ariane, rocketmq = row["ariane"], row["rocketmq"]
        comparable = ariane is not None and rocketmq is not None and rocketmq["median"] > 0
        row["ratio"] = ariane["median"] / rocketmq["median"] if comparable else None
        row["section"] = section_of(metric)
        own = {r.metric: r for r in OWN_CLIENT_ROWS}.get(metric)
        if own is not None and ariane is not None:
            row["limit"] = own.limit_label
            row["limit_msgs_per_s"] = own.limit_msgs_per_s
            row["limit_ratio"] = ariane["median"] / own.limit_msgs_per_s
        checks = [
            str(s.details["check"]) for m in by_system.values() for s in m if "check" in s.details
        ]
        if checks:
            row["checks"] = checks
        rows.append(row)
    return rows


def cpu_columns(metric: str, by_system: dict[str, list[Sample]]) -> dict[str, Any]:
    """The broker CPU µs/msg of a msgs/s row: per system the spread over the runs that measured
    it (``broker_cpu_us_per_msg`` in their details; None when none did) and the ratio of the
    medians, Ariane's over RocketMQ's (None unless both have one). Other rows get nothing."""
    if not metric.endswith("msgs/s"):
        return {}
    columns: dict[str, Any] = {}
    for system in SYSTEMS:
        values = [
            float(s.details["broker_cpu_us_per_msg"])
            for s in by_system.get(system, [])
            if s.details.get("broker_cpu_us_per_msg") is not None
        ]
        columns[f"{system}_cpu_us_per_msg"] = (
            measure.Spread.of(values).as_dict() if values else None
        )
    ariane, rocketmq = columns["ariane_cpu_us_per_msg"], columns["rocketmq_cpu_us_per_msg"]
    both = ariane is not None and rocketmq is not None and rocketmq["median"] > 0
    columns["cpu_ratio"] = ariane["median"] / rocketmq["median"] if both else None
    return columns


SECTIONS = ("compare", "own client", "workers")
"""Table sections: both systems; Ariane's own client vs perf.md §2.4; the workers sweep."""


def section_of(metric: str) -> str:
    """The table section a metric belongs to."""
    if metric.startswith("workers="):
        return "workers"
    if metric.startswith("ariane.client"):
        return "own client"
    return "compare"


def _cell(spread: dict[str, float] | None, metric: str) -> str:
    if spread is None:
        return "not measured"
    digits = 0 if "msgs/s" in metric or "MiB" in metric else 2
    return measure.Spread(spread["median"], spread["min"], spread["max"]).format(digits)


def _notes(row: dict[str, Any]) -> str:
    notes = []
    for system in SYSTEMS:
        ext, unquiet = row[f"{system}_ext_cores_max"], row[f"{system}_unquiet_runs"]
        if ext > QUIET_BUSY_CORES_MAX or unquiet:
            notes.append(f"{system}: ext cores max {ext:.2f}, {unquiet} run(s) not quiet")
        if row[f"{system}_errors"]:
            notes.append(f"{system}: {row[f'{system}_errors']} failed calls")
    if row.get("checks"):
        notes.append("restart check: " + ", ".join(row["checks"]))
    return "; ".join(notes)


def own_client_table(rows: Sequence[dict[str, Any]]) -> str:
    """Ariane's own client next to the perf.md §2.4 limits (one line per ``OWN_CLIENT_ROWS``)."""
    headers = ["flush", "row", "Ariane", "perf.md §2.4 limit", "Ariane/limit", "notes"]
    cells = []
    for spec in OWN_CLIENT_ROWS:
        limit = f"{spec.limit_label} {spec.limit_msgs_per_s:,.0f}"
        mine = [r for r in rows if r["metric"] == spec.metric]
        if not mine:
            why = "not measured" if spec.built else "not built yet (see OWN_CLIENT_ROWS)"
            cells.append(["ASYNC_FLUSH", spec.metric, why, limit, "-", ""])
        for row in mine:
            ratio = f"{row['limit_ratio']:.2f}" if "limit_ratio" in row else "-"
            value = _cell(row["ariane"], spec.metric)
            cells.append([row["flush"], spec.metric, value, limit, ratio, _notes(row)])
    return report.markdown_table(headers, cells)


def workers_table(rows: Sequence[dict[str, Any]], recorded: dict[str, Any]) -> str:
    """The workers sweep (Ariane only), or why it is missing."""
    headers = ["flush", "row", "Ariane", "notes"]
    mine = [r for r in rows if r.get("section") == "workers"]
    cells = [[r["flush"], r["metric"], _cell(r["ariane"], r["metric"]), _notes(r)] for r in mine]
    if not mine:
        why = "not available in this build" if not recorded["workers_available"] else "not run"
        for workers in recorded["settings"]["workers"]:
            for name in (f"send x{recorded['settings']['producers']}", "simple drain"):
                cells.append(["ASYNC_FLUSH", f"workers={workers}: {name} msgs/s", why, ""])
    return report.markdown_table(headers, cells)


def _cpu_cell(spread: dict[str, float] | None) -> str:
    if spread is None:
        return "-"
    return measure.Spread(spread["median"], spread["min"], spread["max"]).format(0)


def _ratio_cell(ratio: float | None) -> str:
    return f"{ratio:.2f}" if ratio is not None else "-"


def table(rows: Sequence[dict[str, Any]], rocketmq: str = peer.PREVIOUS_VERSION) -> str:
    """The Markdown table of the ``summary`` rows that have both systems (section compare),
    with the broker CPU µs/msg of each msgs/s row (``cpu_columns``); ``rocketmq``: the peer's
    version (what the run recorded)."""
    headers = [
        "flush",
        "row",
        "Ariane",
        f"RocketMQ {rocketmq}",
        "Ariane/RocketMQ",
        "Ariane CPU µs/msg",
        "RocketMQ CPU µs/msg",
        "CPU Ariane/RocketMQ",
        "notes",
    ]
    cells = []
    for row in rows:
        if row.get("section", "compare") != "compare":
            continue
        metric = row["metric"]
        cells.append(
            [
                row["flush"],
                metric,
                _cell(row["ariane"], metric),
                _cell(row["rocketmq"], metric),
                _ratio_cell(row["ratio"]),
                _cpu_cell(row.get("ariane_cpu_us_per_msg")),
                _cpu_cell(row.get("rocketmq_cpu_us_per_msg")),
                _ratio_cell(row.get("cpu_ratio")),
                _notes(row),
            ]
        )
    return report.markdown_table(headers, cells)


def plot(
    rows: Sequence[dict[str, Any]], path: pathlib.Path, rocketmq: str = peer.PREVIOUS_VERSION
) -> None:
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
        f"Ariane / RocketMQ {rocketmq}, median of rounds, log scale "
        "(blue: Ariane better; msgs/s higher is better, ms/s/MiB lower)"
    )
    axes.set_title("Official Python client 5.1.2 and classic Java client, 1 KiB, 2-core VM")
    for index, value in enumerate(ratios):
        axes.text(value, index, f" {value:.2f}", va="center", fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    pyplot.close(figure)


def markdown(recorded: dict[str, Any]) -> str:
    """The Markdown page of one invocation: command, conditions, table, what is missing."""
    info = recorded["machine"]
    rocketmq = recorded.get("rocketmq_version", peer.PREVIOUS_VERSION)
    return "\n".join(
        [
            f"# Ariane vs Apache RocketMQ {rocketmq}, official Python client and classic Java "
            "client",
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
            "- Clients: rows without a prefix use the official Python client 5.1.2 (gRPC: "
            "RocketMQ's LOCAL-mode proxy, Ariane's broker); `java` rows the official classic "
            f"Java client {recorded.get('java_client') or '(not run)'} (Remoting, from the "
            "name server straight to the broker, RocketMQ's proxy idle).",
            "- Broker CPU µs/msg (msgs/s rows): utime + stime from `/proc` over the timed span "
            "of the broker's process tree (RocketMQ: the JVM holding broker + proxy; Ariane: "
            "the broker and its front-end workers; name servers not counted) / the messages "
            "the drivers counted. Lower is better; it holds whoever saturates the machine.",
            "- Notes flag rows where a run's outside load (`ext_cores`) exceeded 0.25 cores or "
            "the quiet gate (< 0.25 busy cores, perf.md §2.1) ran out of patience.",
            "",
            table(recorded["summary"], rocketmq),
            "",
            "## Ariane's own batching client next to the machine limits (no RocketMQ column)",
            "",
            "`ariane.client.Producer`, 64 x 1 KiB per unary `send_batch` call or per",
            "`Ingest/SendStream` stream message, against the transport-only limits of",
            "specs/perf.md §2.4 (measured there, not here).",
            "",
            own_client_table(recorded["summary"]),
            "",
            "## msgs/s against front-end workers",
            "",
            "Ariane only, official client, a fresh ASYNC_FLUSH cluster per worker count",
            "(`workers = N` broker setting; 0 = gRPC served by the store-owning process).",
            "",
            workers_table(recorded["summary"], recorded),
            "",
            "Not measured by this benchmark (issue 4 item 2): " + recorded["not_measured"],
            "",
        ]
    )


NOT_MEASURED = (
    "the PushConsumer end-to-end latency unless `--e2e-consumer push` was given (one consumer "
    "kind per run, the same for both systems); RocketMQ's batch send with the official Python "
    "client (it has none: the `java batch 64` row is the classic Java client's "
    "`send(Collection)`), so Ariane's own-client rows have no RocketMQ column."
)


def _int_list(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(",") if part.strip())


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
    parser.add_argument("--drain-messages", type=int, default=100_000)
    parser.add_argument("--warmup-messages", type=int, default=2000)
    parser.add_argument("--flush", choices=["async", "sync", "both"], default="both")
    parser.add_argument("--quiet-wait-s", type=float, default=30.0)
    parser.add_argument("--rows", default=",".join(ROW_GROUPS), help="comma list of row groups")
    parser.add_argument("--e2e-rate", type=float, default=500.0)
    parser.add_argument("--e2e-duration-s", type=float, default=10.0)
    parser.add_argument("--e2e-consumer", choices=("simple", "push"), default="simple")
    parser.add_argument("--recovery-fill-mib", type=int, default=1024)
    parser.add_argument("--recovery-body-kib", type=int, default=256)
    parser.add_argument("--own-messages", type=int, default=200_000)
    parser.add_argument("--workers", type=_int_list, default=(0, 1, 2))
    parser.add_argument(
        "--ariane-workers",
        type=int,
        default=None,
        help="the Ariane broker's front-end workers in the side-by-side rows (default: its own)",
    )
    parser.add_argument("--java-send-messages", type=int, default=20_000)
    parser.add_argument("--java-batch-messages", type=int, default=128_000)
    parser.add_argument("--no-record", action="store_true")
    parser.add_argument("--results-dir", type=pathlib.Path, default=bench.RESULTS_DIR)
    args = parser.parse_args(argv)
    modes = {"async": FLUSH_MODES[:1], "sync": FLUSH_MODES[1:], "both": FLUSH_MODES}
    for name in ("send1_messages", "send_n_messages_per_process", "drain_messages"):
        if not 1 <= getattr(args, name) <= 200_000:
            parser.error(f"--{name.replace('_', '-')} must be 1..200000")
    for name in ("java_send_messages", "java_batch_messages"):
        if not JAVA_BATCH <= getattr(args, name) <= 1_000_000:
            parser.error(f"--{name.replace('_', '-')} must be {JAVA_BATCH}..1000000")
    rows = tuple(r for r in args.rows.split(",") if r)
    if not set(rows) <= set(ROW_GROUPS):
        parser.error(f"--rows takes a comma list of {', '.join(ROW_GROUPS)}")
    if "java" in rows and args.drain_messages < 2:
        parser.error("the java rows need --drain-messages of at least 2")
    if not (1 <= args.e2e_rate <= 5000 and 1 <= args.e2e_duration_s <= 60):
        parser.error("--e2e-rate must be 1..5000 and --e2e-duration-s 1..60")
    if not (1 <= args.recovery_fill_mib <= 4096 and 1 <= args.recovery_body_kib <= 4000):
        parser.error("--recovery-fill-mib must be 1..4096 and --recovery-body-kib 1..4000")
    if not 64 <= args.own_messages <= 1_000_000:
        parser.error("--own-messages must be 64..1000000")
    if not args.workers or not all(0 <= w <= 64 for w in args.workers):
        parser.error("--workers takes a comma list of counts 0..64")
    return Options(
        rounds=args.rounds,
        send1_messages=args.send1_messages,
        producers=args.producers,
        send_n_messages_per_process=args.send_n_messages_per_process,
        drain_messages=args.drain_messages,
        warmup_messages=max(args.warmup_messages, 0),
        flush_modes=modes[args.flush],
        quiet_wait_s=min(max(args.quiet_wait_s, 1.0), 120.0),
        rows=rows,
        e2e_rate_per_s=args.e2e_rate,
        e2e_duration_s=args.e2e_duration_s,
        e2e_consumer=args.e2e_consumer,
        recovery_fill_bytes=args.recovery_fill_mib * 2**20,
        recovery_body_bytes=args.recovery_body_kib * 1024,
        own_messages=args.own_messages,
        workers=args.workers,
        ariane_workers=args.ariane_workers,
        java_send_messages=args.java_send_messages,
        java_batch_messages=args.java_batch_messages,
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
        replotted = json.loads(recorded_path.read_text())
        version = replotted.get("rocketmq_version", peer.PREVIOUS_VERSION)
        plot(replotted["summary"], recorded_path.with_suffix(".png"), version)
        return 0
    opts = parse(argv)
    started = datetime.datetime.now(datetime.UTC)
    base = pathlib.Path(tempfile.mkdtemp(prefix=".bench-compare-", dir=bench.REPO))

    def log(text: str) -> None:
        print(f"{time.strftime('%H:%M:%S')} {text}", file=sys.stderr, flush=True)

    try:
        info = machine.machine_info(base, bench.REPO)
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
        "workers_available": workers_supported(),
        "java_client": classic_java.client_version() if "java" in opts.rows else None,
        "rocketmq_version": peer.version(),
        "rocketmq_modules": peer.module_versions(),
    }
    page = markdown(recorded)
    print(page)
    if opts.record:
        stamp = started.strftime("%Y-%m-%dT%H%M%SZ")
        json_path, md_path = report.write_results(
            RESULTS_NAME, stamp, recorded, page, opts.results_dir
        )
        png_path = json_path.with_suffix(".png")
        plot(recorded["summary"], png_path, recorded["rocketmq_version"])
        log(f"recorded {json_path}, {md_path} and {png_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
