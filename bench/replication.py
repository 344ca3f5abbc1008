"""Send rows of a master/slave broker group: ``ASYNC_MASTER`` next to ``SYNC_MASTER``.

Issue 13 asks ``bench/`` for SYNC_MASTER send rows next to ASYNC_MASTER. For each role, each
round starts a fresh ``ariane dev`` cluster with one slave (``dev.dev_cluster(slaves=1,
broker_role=...)``, ASYNC_FLUSH unless ``--flush sync``) and an 8-queue topic, then runs the same
official-Python-client drivers as ``bench.compare``'s send rows: an untimed warm-up, ``send x1``
and ``send xN`` (msgs/s, p50 and p99 ack latency). With SYNC_MASTER a send is acknowledged only
once the slave holds its bytes (RocketMQ's ``SYNC_MASTER`` rule), so the difference between the
two rows is the price of that promise on this machine. Ariane only: RocketMQ needs a second
broker JVM for a slave, which this 2-core machine would share with the measured one.

Run: ``python -m bench.replication [--rounds N] [--flush async|sync]``; writes
``bench/results/replication-<UTC time>.md`` and ``.json`` with the command.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import datetime
import json
import pathlib
import secrets
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from typing import Any, cast

from ariane import dev
from ariane.benchmark import client_bench, machine
from bench import compare

ROLES = ("ASYNC_MASTER", "SYNC_MASTER")
"""The master roles measured, each with one slave."""

BENCH_DIR = pathlib.Path(__file__).resolve().parent
RESULTS_DIR = BENCH_DIR / "results"


def _rows(role: str, flush: str, opts: compare.Options, base: pathlib.Path) -> list[Any]:
    """One round of one role: the send rows of ``bench.compare`` on a master with one slave."""
    token = f"{role[:1].lower()}-{secrets.token_hex(3)}"
    data_dir = base / f"ariane-{token}"
    launched = time.monotonic()
    with dev.dev_cluster(
        data_dir, namesrv_port=0, flush_disk_type=flush, slaves=1, broker_role=role
    ) as endpoints:
        topic = f"replication-{token}"
        asyncio.run(client_bench.create_topic(endpoints.namesrv, topic))
        cluster = compare.Cluster(
            "ariane",
            endpoints.namesrv,
            topic,
            launched,
            time.monotonic() - launched,
            0,
            0,
            data_dir,
            None,
        )
        rows, _ = compare._send_rows(cluster, opts, machine.disk_of(base))
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    """Measure both roles ``--rounds`` times (alternating) and record the medians."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=1, choices=range(1, 6))
    parser.add_argument("--flush", choices=("async", "sync"), default="async")
    args = parser.parse_args(argv)
    flush = "ASYNC_FLUSH" if args.flush == "async" else "SYNC_FLUSH"
    opts = dataclasses.replace(compare.parse(["--rows", "send", "--rounds", "1"]), rows=("send",))
    values: dict[tuple[str, str], list[float]] = {}
    started = datetime.datetime.now(datetime.UTC)
    info = machine.machine_info(BENCH_DIR, BENCH_DIR.parent)
    with tempfile.TemporaryDirectory(prefix="ariane-bench-replication-") as tmp:
        for round_index in range(args.rounds):
            for role in ROLES:
                print(f"round {round_index + 1}/{args.rounds}: {role} + 1 slave, {flush}")
                for metric, value, details in _rows(role, flush, opts, pathlib.Path(tmp)):
                    values.setdefault((metric, role), []).append(value)
                    print(f"  {role} {metric}: {value:,.2f} {details}")
    metrics = list(dict.fromkeys(metric for metric, _ in values))
    lines = [
        "# Ariane send rows: ASYNC_MASTER vs SYNC_MASTER, each with one slave",
        "",
        "Written by `python -m bench.replication` (`bench/replication.py`). Command:",
        "",
        "```",
        "python -m bench.replication " + " ".join(sys.argv[1:] if argv is None else argv),
        "```",
        "",
        f"- {started.isoformat(timespec='seconds')}; {flush}; official Python client drivers of "
        f"`bench.compare` (8 queues, 1 KiB bodies, x{opts.producers} = {opts.producers} "
        f"processes); commit {str(info['git_commit'])[:12]}; load average at start "
        f"{[round(x, 2) for x in cast('list[float]', info['load_average_at_start'])]}.",
        f"- Cells: median over {args.rounds} round(s).",
        "",
        "| row | ASYNC_MASTER | SYNC_MASTER | SYNC/ASYNC |",
        "| --- | --- | --- | --- |",
    ]
    recorded: dict[str, Any] = {"flush": flush, "rounds": args.rounds, "machine": info, "rows": {}}
    for metric in metrics:
        a, s = (statistics.median(values[(metric, role)]) for role in ROLES)
        lines.append(f"| {metric} | {a:,.2f} | {s:,.2f} | {s / a:.2f} |")
        recorded["rows"][metric] = {"ASYNC_MASTER": a, "SYNC_MASTER": s}
    stamp = started.strftime("%Y-%m-%dT%H%M%SZ")
    RESULTS_DIR.mkdir(exist_ok=True)
    (RESULTS_DIR / f"replication-{stamp}.md").write_text("\n".join(lines) + "\n")
    (RESULTS_DIR / f"replication-{stamp}.json").write_text(json.dumps(recorded, indent=2) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
