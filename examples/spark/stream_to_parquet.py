"""A Structured Streaming job: topics → parquet through the ``rocketmq`` format, with a
checkpoint (what the exactly-once tests kill and restart, and a template for real jobs).

Run: ``python -m examples.spark.stream_to_parquet --endpoints HOST:PORT --topics T --out DIR
--checkpoint DIR [--max-per-trigger N] [--available-now]``. With ``--available-now`` it reads
what the topics hold when it starts and exits; otherwise it runs until killed. The output is
exactly-once when read through Spark (the file sink's ``_spark_metadata`` log).
"""

from __future__ import annotations

import argparse
import os
import sys

LOCAL_MASTER = "local[2,4]"
"""The master of the local runs (``make run``, the tests): two worker threads, one per core,
and up to 4 tries of a failed task (Spark's cluster default ``spark.task.maxFailures``; plain
``local[2]`` fails the query on the first task error)."""

LOOPBACK = "127.0.0.1"
"""Where a local-mode session binds its driver and block manager."""


def session(app: str, *, master: str | None = LOCAL_MASTER) -> object:
    """A SparkSession with the ``rocketmq`` format registered.

    With ``master`` (the default ``LOCAL_MASTER``): a local-mode session whose Python workers run
    this interpreter, sized for a laptop. With ``master=None``: the session of the cluster the
    job was submitted to (``spark-submit``, the spark-operator's driver pod), none of those
    local settings: the master, the interpreters and the memory come from the submission
    (``examples/spark/flights-sparkapplication.yaml``), which a builder setting would override.
    """
    from pyspark.sql import SparkSession

    from ariane.connectors.spark import RocketMQDataSource

    builder = SparkSession.builder.appName(app).config("spark.ui.showConsoleProgress", "false")
    if master is not None:
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        # Loopback only: without these Spark binds its driver and block manager to the first
        # non-loopback interface when the host name resolves to 127.0.0.1 ("Your hostname ...
        # resolves to a loopback address ... using <interface address> instead").
        os.environ.setdefault("SPARK_LOCAL_IP", LOOPBACK)
        builder = (
            builder.master(master)
            .config("spark.driver.host", LOOPBACK)
            .config("spark.driver.bindAddress", LOOPBACK)
            .config("spark.ui.enabled", "false")
            .config("spark.sql.shuffle.partitions", "2")
            .config("spark.driver.memory", "1g")
        )
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(RocketMQDataSource)
    return spark


def start(
    spark: object,
    *,
    endpoints: str,
    topics: str,
    out: str,
    checkpoint: str,
    max_per_trigger: int = 0,
    available_now: bool = False,
) -> object:
    """Start the query topics -> parquet ``out`` (checkpoint ``checkpoint``) from the earliest
    offsets, at most ``max_per_trigger`` offsets a batch (0: no cap), micro-batches back to back
    or, with ``available_now``, until what the topics hold now is read; the ``StreamingQuery``.
    """
    reader = (
        spark.readStream.format("rocketmq")  # type: ignore[attr-defined]
        .option("endpoints", endpoints)
        .option("topics", topics)
        .option("startingOffsets", "earliest")
    )
    if max_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(max_per_trigger))
    writer = (
        reader.load()
        .writeStream.format("parquet")
        .option("path", out)
        .option("checkpointLocation", checkpoint)
    )
    writer = (
        writer.trigger(availableNow=True)
        if available_now
        else writer.trigger(processingTime="0 seconds")
    )
    return writer.start()


def main(argv: list[str] | None = None) -> int:
    """Run the job; 0 when an ``--available-now`` run finished."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--endpoints", required=True)
    parser.add_argument("--topics", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--max-per-trigger", type=int, default=0)
    parser.add_argument("--available-now", action="store_true")
    args = parser.parse_args(argv)
    query = start(
        session("ariane-stream-to-parquet"),
        endpoints=args.endpoints,
        topics=args.topics,
        out=args.out,
        checkpoint=args.checkpoint,
        max_per_trigger=args.max_per_trigger,
        available_now=args.available_now,
    )
    query.awaitTermination()  # type: ignore[attr-defined]
    return 0


if __name__ == "__main__":
    sys.exit(main())
