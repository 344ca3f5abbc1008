"""Benchmark (not a test): rows/s of the Spark connector's reads against the raw pull rate.

Run ``python -m bench.spark_read [--messages N] [--queues 2,8] [--no-record]`` from the
repository root (issue 14 item 5; the full run is ``--messages 1000000``, the default).

One ``ariane dev`` cluster (name server + broker on 127.0.0.1, the broker's default front-end
workers) holds, per queue count Q, a topic ``spark-read-q<Q>`` of ``--messages`` messages of
``--body-bytes`` each (sent untimed with ``ariane.client``'s batching Producer). On each topic,
every row reads all of it, earliest to latest:

- ``pull, 1 task``: one ``PullConsumer.fetch`` loop over the queues one after the other,
  ``pullBatchSize`` (256) messages a call: what one connector partition does, without Spark;
- ``pull, Q tasks``: the same with one asyncio task per queue in the one process;
- ``spark batch``: ``spark.read.format("rocketmq")`` on ``local[2]``, the action
  ``count(*), sum(length(body))`` (every body is materialised: the Python source has no
  column pruning);
- ``spark stream``: ``spark.readStream`` with ``Trigger.AvailableNow`` and
  ``maxOffsetsPerTrigger`` = messages / ``--triggers``, each micro-batch aggregated the same way
  in ``foreachBatch``; timed from ``start()`` to the end of the last batch (checkpoint I/O and
  planning included).

Every row checks that it saw exactly ``messages`` rows and ``messages * body_bytes`` bytes, and
fails otherwise. The Spark session starts once, before the rows (its start-up is a column of
its own), and a small read warms its Python workers. ``own_cores`` is the CPU of this
process tree during the row (the bench, the name server, the broker and its workers, Spark's JVM
and Python workers), ``ext_cores`` everybody else's (``ariane.benchmark.process_cpu``): the
machine is a shared 2-core VM, so compare the ratios to the pull rows, not absolute rates
across runs. Results:
``bench/results/spark_read-<stamp>.{json,md}`` with the command line.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import pathlib
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

from ariane import client, dev
from ariane.benchmark import machine, process_cpu, report
from ariane.common import errors
from ariane.connectors.spark import options as spark_options

RESULTS_DIR = pathlib.Path(__file__).parent / "results"
REPO = pathlib.Path(__file__).resolve().parents[1]
WARM_TOPIC = "spark-read-warm-up"
WARM_MESSAGES = 100
"""A small topic read once before the rows, to start Spark's Python workers."""
SEND_BATCH_MESSAGES = 256
"""Messages per SendMessage call while filling a topic (untimed)."""
PULL_TIMEOUT_MS = 60_000
"""Deadline of each pull and route query, ms, for the raw pulls and the connector
(``pullTimeoutMs``) alike: on a shared machine at a load of 15-20 the default 10 s was seen to
expire while connecting, failing a run."""
ROW_ATTEMPTS_MAX = 2
"""Tries of one row: a row that fails (a name server that did not answer a connection at a
load of 20 was seen) runs once more from scratch; the row records its ``attempts``."""
ROUTE_WAIT_S = 30.0
"""Longest wait for a new topic's route, seconds."""


def _topic(queues: int) -> str:
    return f"spark-read-q{queues}"


async def _wait_routed(admin: client.AdminClient, topic: str) -> None:
    deadline = time.monotonic() + ROUTE_WAIT_S
    while True:
        try:
            if await admin.topic_masters(topic):
                return
        except errors.TopicNotFoundError:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"topic {topic} not routed within {ROUTE_WAIT_S} s")
        await asyncio.sleep(0.2)


async def fill(namesrv: str, topic: str, queues: int, messages: int, body_bytes: int) -> float:
    """Create ``topic`` with ``queues`` queues and send ``messages`` bodies; returns seconds."""
    async with client.AdminClient(namesrv) as admin:
        await admin.create_topic(topic, write_queue_nums=queues)
        await _wait_routed(admin, topic)
    filler = b"x" * body_bytes
    started = time.perf_counter()
    async with client.Producer(namesrv) as producer:
        for first in range(0, messages, SEND_BATCH_MESSAGES):
            count = min(SEND_BATCH_MESSAGES, messages - first)
            batch = [(b"%010d" % (first + i) + filler)[:body_bytes] for i in range(count)]
            await producer.send_batch(topic, batch)
    return time.perf_counter() - started


async def _pull_queue(consumer: client.PullConsumer, queue: client.MessageQueue) -> tuple[int, int]:
    (low,) = (await consumer.beginning_offsets([queue])).values()
    (high,) = (await consumer.end_offsets([queue])).values()
    rows = size = 0
    offset = low
    while offset < high:
        count = min(spark_options.PULL_BATCH_SIZE_DEFAULT, high - offset)
        batch = await consumer.fetch(queue, offset, max_messages=count)
        rows += len(batch.messages)
        size += sum(len(m.body) for m in batch.messages)
        offset = batch.next_offset
    return rows, size


async def pull(namesrv: str, topic: str, *, concurrent: bool) -> tuple[int, int]:
    """Read every message of ``topic`` with one PullConsumer; returns (rows, body bytes)."""
    settings = client.PullSettings(
        connection=client.ConnectionSettings(request_timeout_s=PULL_TIMEOUT_MS / 1000),
        long_polling_timeout_s=0,
        max_messages=spark_options.PULL_BATCH_SIZE_DEFAULT,
    )
    async with client.PullConsumer(namesrv, settings=settings) as consumer:
        queues = await consumer.queues_for_topic(topic)
        if concurrent:
            parts = await asyncio.gather(*(_pull_queue(consumer, q) for q in queues))
        else:
            parts = [await _pull_queue(consumer, q) for q in queues]
    return sum(r for r, _ in parts), sum(s for _, s in parts)


def _totals(frame: Any) -> tuple[int, int]:
    from pyspark.sql import functions as F  # noqa: N812 (PySpark's convention)

    row = frame.agg(F.count(F.lit(1)).alias("n"), F.sum(F.length("body")).alias("b")).first()
    return int(row["n"]), int(row["b"] or 0)


def spark_batch(spark: Any, namesrv: str, topic: str) -> tuple[int, int]:
    """One batch read of the whole topic; returns (rows, body bytes)."""
    frame = (
        spark.read.format("rocketmq")
        .option("endpoints", namesrv)
        .option("topics", topic)
        .option("pullTimeoutMs", str(PULL_TIMEOUT_MS))
    )
    return _totals(frame.load())


def spark_stream(spark: Any, namesrv: str, topic: str, per_trigger: int) -> tuple[int, int]:
    """An ``availableNow`` stream over the whole topic; returns (rows, body bytes)."""
    seen = [0, 0]

    def each(batch: Any, _batch_id: int) -> None:
        rows, size = _totals(batch)
        seen[0] += rows
        seen[1] += size

    with tempfile.TemporaryDirectory(prefix="spark-read-") as checkpoint:
        query = (
            spark.readStream.format("rocketmq")
            .option("endpoints", namesrv)
            .option("topics", topic)
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", str(per_trigger))
            .option("pullTimeoutMs", str(PULL_TIMEOUT_MS))
            .load()
            .writeStream.foreachBatch(each)
            .option("checkpointLocation", checkpoint)
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
    return seen[0], seen[1]


def timed(
    name: str, queues: int, read: Callable[[], tuple[int, int]], want: tuple[int, int]
) -> dict[str, Any]:
    """Run ``read`` under a load meter; the row, or SystemExit when it saw the wrong data."""
    for attempt in range(1, ROW_ATTEMPTS_MAX + 1):
        meter = process_cpu.TreeLoadMeter(None)
        meter.start()
        started = time.perf_counter()
        try:
            got = read()
        except Exception as exc:  # a refused connection on a swamped machine; recorded
            if attempt == ROW_ATTEMPTS_MAX:
                raise
            print(f"{name} on {queues} queues, attempt {attempt} failed: {exc!r:.300}", flush=True)
            continue
        seconds = time.perf_counter() - started
        load = meter.stop()
        break
    if got != want:
        raise SystemExit(f"{name} on {queues} queues read {got} (rows, bytes), want {want}")
    row = {
        "row": name,
        "queues": queues,
        "rows": got[0],
        "seconds": round(seconds, 3),
        "rows_per_s": round(got[0] / seconds),
        "mib_per_s": round(got[1] / seconds / 2**20, 1),
        "own_cores": round(load.own_cores, 2),
        "ext_cores": round(load.ext_cores, 2),
        "load_1m": round(load.load_1m, 2),
        "attempts": attempt,
    }
    print(row, flush=True)
    return row


def _rows_for(args: argparse.Namespace, spark: Any, namesrv: str, q: int) -> list[dict[str, Any]]:
    topic = _topic(q)
    want = (args.messages, args.messages * args.body_bytes)
    per_trigger = max(-(-args.messages // args.triggers), 1)
    rows = [
        timed("pull, 1 task", q, lambda: asyncio.run(pull(namesrv, topic, concurrent=False)), want),
        timed(
            f"pull, {q} tasks", q, lambda: asyncio.run(pull(namesrv, topic, concurrent=True)), want
        ),
        timed("spark batch", q, lambda: spark_batch(spark, namesrv, topic), want),
        timed("spark stream", q, lambda: spark_stream(spark, namesrv, topic, per_trigger), want),
    ]
    base = rows[0]["rows_per_s"]
    for row in rows:
        row["vs_pull_1_task"] = round(row["rows_per_s"] / base, 2)
    return rows


def _row_name(row: dict[str, Any]) -> str:
    name: str = row["row"]
    return name + (f" ({row['attempts']} tries)" if row["attempts"] > 1 else "")


def _markdown(meta: dict[str, Any], rows: list[dict[str, Any]]) -> str:
    table = report.markdown_table(
        ["queues", "row", "rows", "s", "rows/s", "MiB/s", "x pull 1 task", "own_cores",
         "ext_cores"],
        [
            [str(r["queues"]), _row_name(r), f"{r['rows']:,}", f"{r['seconds']:.1f}",
             f"{r['rows_per_s']:,}", f"{r['mib_per_s']}", f"{r['vs_pull_1_task']}",
             f"{r['own_cores']}", f"{r['ext_cores']}"]
            for r in rows
        ],
    )  # fmt: skip
    fills = ", ".join(f"q{q}: {s:.0f} s" for q, s in meta["fill_s"].items())
    return (
        f"# Spark connector reads vs raw pulls ({meta['stamp']})\n\n"
        f"Command: `{meta['command']}`\n\n"
        f"{meta['messages']:,} messages of {meta['body_bytes']} B per topic; Spark `local[2]`, "
        f"stream in {meta['triggers']} triggers; Spark session start {meta['session_s']:.1f} s; "
        f"fill (untimed, batched Producer): {fills}; load average at start "
        f"{meta['load_1m_start']}.\n\n{table}\n"
    )


def main(argv: list[str] | None = None) -> int:
    """Run every row for every queue count, print them and record the results."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=1_000_000, help="messages per topic")
    parser.add_argument("--body-bytes", type=int, default=1024)
    parser.add_argument("--queues", default="2,8", help="comma-separated queue counts")
    parser.add_argument("--triggers", type=int, default=4, help="micro-batches of the stream")
    parser.add_argument("--no-record", action="store_true")
    parser.add_argument("--results-dir", type=pathlib.Path, default=RESULTS_DIR)
    args = parser.parse_args(argv)
    queue_counts = [int(q) for q in args.queues.split(",")]
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H%M%SZ")
    meta: dict[str, Any] = {
        "stamp": stamp,
        "command": report.command_line("bench.spark_read"),
        "messages": args.messages,
        "body_bytes": args.body_bytes,
        "triggers": args.triggers,
        "load_1m_start": round(machine.load_average_1m(), 2),
        "fill_s": {},
    }
    from examples.spark import stream_to_parquet

    rows: list[dict[str, Any]] = []
    with (
        tempfile.TemporaryDirectory(prefix="spark-read-", dir=REPO) as data,
        dev.dev_cluster(pathlib.Path(data), namesrv_port=0) as ends,
    ):
        asyncio.run(fill(ends.namesrv, WARM_TOPIC, 2, WARM_MESSAGES, args.body_bytes))
        for q in queue_counts:
            meta["fill_s"][q] = round(
                asyncio.run(fill(ends.namesrv, _topic(q), q, args.messages, args.body_bytes)), 1
            )
            print(f"filled {_topic(q)} in {meta['fill_s'][q]} s", flush=True)
        started = time.perf_counter()
        spark: Any = stream_to_parquet.session("ariane-bench-spark-read")
        meta["session_s"] = round(time.perf_counter() - started, 1)
        try:
            spark_batch(spark, ends.namesrv, WARM_TOPIC)
            for q in queue_counts:
                rows += _rows_for(args, spark, ends.namesrv, q)
        finally:
            spark.stop()
    markdown = _markdown(meta, rows)
    print(markdown)
    if not args.no_record:
        payload = {**meta, "machine": machine.machine_info(REPO, REPO), "rows": rows}
        paths = report.write_results("spark_read", stamp, payload, markdown, args.results_dir)
        print("recorded:", *paths)
    return 0


if __name__ == "__main__":
    sys.exit(main())
