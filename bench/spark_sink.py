"""Benchmark (not a test): rows/s of the Spark sink with and without exactly-once writes.

Run ``python -m bench.spark_sink [--messages N] [--no-record]`` from the repository root
(issue 28 item 1: what the exactly-once sink costs).

One ``ariane dev`` cluster (name server + broker on 127.0.0.1, the broker's default front-end
workers). Each row writes ``--messages`` messages of ``--body-bytes`` each to a fresh 2-queue
topic of its own and then checks that the topic holds exactly that many messages and bytes
(failing otherwise):

- ``producer``: ``ariane.client.Producer.send_batch`` of 256 messages a call, one loop: the
  broker's own rate without Spark;
- ``producer, idempotency keys``: the same with an ``idempotency_key`` per message (the broker
  looks each key up in its key index before storing);
- ``spark sink, at least once``: ``df.write.format("rocketmq")`` with ``exactlyOnce=false``
  of ``spark.range`` rows in 2 partitions on ``local[2]``;
- ``spark sink, exactly once``: the same with ``exactlyOnce=true`` (the default: every row
  keyed by write, partition, row index and a digest of the row).

The Spark session starts once, before the rows, and a small write warms its Python workers.
``own_cores``/``ext_cores`` as in ``bench.spark_read``: the machine is a shared 2-core VM, so
compare the rows of one run, not absolute rates across runs. Results:
``bench/results/spark_sink-<stamp>.{json,md}`` with the command line.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import pathlib
import sys
import tempfile
import time
from typing import Any

from ariane import client, dev
from ariane.benchmark import machine, report
from bench import spark_read

SEND_BATCH_MESSAGES = 256
"""Messages per ``send_batch`` call of the producer rows (the sink's chunk too)."""


async def _create(namesrv: str, topic: str) -> None:
    async with client.AdminClient(namesrv) as admin:
        await admin.create_topic(topic, write_queue_nums=2)
        await spark_read._wait_routed(admin, topic)


async def _totals(namesrv: str, topic: str) -> tuple[int, int]:
    """(messages, body bytes) ``topic`` holds."""
    return await spark_read.pull(namesrv, topic, concurrent=True)


def _body(index: int, body_bytes: int) -> bytes:
    return (b"%010d" % index + b"x" * body_bytes)[:body_bytes]


async def produce(namesrv: str, topic: str, args: argparse.Namespace, *, keyed: bool) -> None:
    """Send ``args.messages`` bodies with the batching Producer (keyed: one key each)."""
    async with client.Producer(namesrv) as producer:
        for first in range(0, args.messages, SEND_BATCH_MESSAGES):
            count = min(SEND_BATCH_MESSAGES, args.messages - first)
            batch = [
                client.OutgoingMessage(
                    _body(first + i, args.body_bytes),
                    idempotency_key=f"bench/{topic}/{first + i}" if keyed else None,
                )
                for i in range(count)
            ]
            await producer.send_batch(topic, batch)


def sink(spark: Any, namesrv: str, topic: str, args: argparse.Namespace, exactly: bool) -> None:
    """``df.write.format("rocketmq")`` of ``args.messages`` rows in 2 partitions."""
    from pyspark.sql import functions as F  # noqa: N812 (PySpark's convention)

    body = F.substring(
        F.concat(
            F.lpad(F.col("id").cast("string"), 10, "0"), F.repeat(F.lit("x"), args.body_bytes)
        ),
        1,
        args.body_bytes,
    )
    frame = spark.range(0, args.messages, 1, 2).select(body.alias("body"))
    writer = frame.write.format("rocketmq").option("endpoints", namesrv).option("topic", topic)
    writer = writer.option("exactlyOnce", str(exactly).lower())
    writer.option("pullTimeoutMs", str(spark_read.PULL_TIMEOUT_MS)).mode("append").save()


def _row(name: str, namesrv: str, args: argparse.Namespace, write: Any) -> dict[str, Any]:
    topic = f"spark-sink-{len(name)}-{time.monotonic_ns()}"
    asyncio.run(_create(namesrv, topic))
    want = (args.messages, args.messages * args.body_bytes)

    def run() -> tuple[int, int]:
        write(topic)
        return asyncio.run(_totals(namesrv, topic))

    return spark_read.timed(name, 2, run, want)


def main(argv: list[str] | None = None) -> int:
    """Run every row, print them and record the results."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=20_000, help="messages per row")
    parser.add_argument("--body-bytes", type=int, default=1024)
    parser.add_argument("--no-record", action="store_true")
    parser.add_argument("--results-dir", type=pathlib.Path, default=spark_read.RESULTS_DIR)
    args = parser.parse_args(argv)
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H%M%SZ")
    meta: dict[str, Any] = {
        "stamp": stamp,
        "command": report.command_line("bench.spark_sink"),
        "messages": args.messages,
        "body_bytes": args.body_bytes,
        "load_1m_start": round(machine.load_average_1m(), 2),
    }
    from examples.spark import stream_to_parquet

    with (
        tempfile.TemporaryDirectory(prefix="spark-sink-", dir=spark_read.REPO) as data,
        dev.dev_cluster(pathlib.Path(data), namesrv_port=0) as ends,
    ):
        ns = ends.namesrv
        started = time.perf_counter()
        spark: Any = stream_to_parquet.session("ariane-bench-spark-sink")
        meta["session_s"] = round(time.perf_counter() - started, 1)
        try:
            warm = argparse.Namespace(messages=100, body_bytes=args.body_bytes)
            asyncio.run(_create(ns, "spark-sink-warm-up"))
            sink(spark, ns, "spark-sink-warm-up", warm, True)
            rows = [
                _row(
                    "producer", ns, args, lambda t: asyncio.run(produce(ns, t, args, keyed=False))
                ),
                _row(
                    "producer, idempotency keys",
                    ns,
                    args,
                    lambda t: asyncio.run(produce(ns, t, args, keyed=True)),
                ),
                _row(
                    "spark sink, at least once", ns, args, lambda t: sink(spark, ns, t, args, False)
                ),
                _row(
                    "spark sink, exactly once", ns, args, lambda t: sink(spark, ns, t, args, True)
                ),
            ]
        finally:
            spark.stop()
    base = rows[0]["rows_per_s"]
    for row in rows:
        row["vs_producer"] = round(row["rows_per_s"] / base, 2)
    table = report.markdown_table(
        ["row", "rows", "s", "rows/s", "MiB/s", "x producer", "own_cores", "ext_cores", "load_1m"],
        [
            [r["row"], f"{r['rows']:,}", f"{r['seconds']:.1f}", f"{r['rows_per_s']:,}",
             f"{r['mib_per_s']}", f"{r['vs_producer']}", f"{r['own_cores']}",
             f"{r['ext_cores']}", f"{r['load_1m']}"]
            for r in rows
        ],
    )  # fmt: skip
    markdown = (
        f"# Spark sink with and without exactly-once ({stamp})\n\n"
        f"Command: `{meta['command']}`\n\n"
        f"{args.messages:,} messages of {args.body_bytes} B per row, each row to a fresh "
        f"2-queue topic; Spark `local[2]`, 2 partitions; session start {meta['session_s']} s; "
        f"load average at start {meta['load_1m_start']} (a shared 2-core machine: compare "
        f"rows of this run only).\n\n{table}\n"
    )
    print(markdown)
    if not args.no_record:
        payload = {**meta, "machine": machine.machine_info(spark_read.REPO, spark_read.REPO)}
        payload["rows"] = rows
        paths = report.write_results("spark_sink", stamp, payload, markdown, args.results_dir)
        print("recorded:", *paths)
    return 0


if __name__ == "__main__":
    sys.exit(main())
