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


def session(app: str) -> object:
    """A local-mode SparkSession whose Python workers run this interpreter, with the
    ``rocketmq`` format registered."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from ariane.connectors.spark import RocketMQDataSource

    spark = (
        SparkSession.builder.master("local[2]")
        .appName(app)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.memory", "1g")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(RocketMQDataSource)
    return spark


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
    spark = session("ariane-stream-to-parquet")
    reader = (
        spark.readStream.format("rocketmq")  # type: ignore[attr-defined]
        .option("endpoints", args.endpoints)
        .option("topics", args.topics)
        .option("startingOffsets", "earliest")
    )
    if args.max_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(args.max_per_trigger))
    writer = (
        reader.load()
        .writeStream.format("parquet")
        .option("path", args.out)
        .option("checkpointLocation", args.checkpoint)
    )
    writer = (
        writer.trigger(availableNow=True)
        if args.available_now
        else writer.trigger(processingTime="0 seconds")
    )
    query = writer.start()
    query.awaitTermination()
    return 0


if __name__ == "__main__":
    sys.exit(main())
