"""A Structured Streaming job topic -> topic through the ``rocketmq`` source and sink, with a
checkpoint: what ``test_spark_sink`` SIGKILLs and restarts. Not a test module.

Run: ``python -m spark_sink_job --endpoints HOST:PORT --source T --sink T --checkpoint DIR
[--max-per-trigger N] [--available-now] [--exactly-once true|false] [--ca-file PEM
--access-key AK --secret-key SK]``: each source row's body is sent to the sink topic with the
property ``from`` = ``<queueId>:<queueOffset>``; with ``--ca-file`` source and sink dial over
TLS and sign as the user (options ``tls``, ``caFile``, ``accessKey``, ``secretKey``).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

from examples.spark import stream_to_parquet

from ariane import client


def stored(endpoints: str, topic: str, connection: client.ConnectionSettings) -> int:
    """Messages ``topic`` holds over all its queues and broker groups."""

    async def main() -> int:
        settings = client.PullSettings(connection=connection)
        async with client.PullConsumer(endpoints, "sink-check", settings=settings) as consumer:
            queues = await consumer.queues_for_topic(topic)
            return sum((await consumer.end_offsets(queues)).values())

    return asyncio.run(main())


def secured(options: Any, args: argparse.Namespace) -> Any:
    """``options`` (a reader or writer) with TLS and the user's signature when given."""
    if not args.ca_file:
        return options
    options = options.option("tls", "true").option("caFile", args.ca_file)
    return options.option("accessKey", args.access_key).option("secretKey", args.secret_key)


def start(spark: Any, args: argparse.Namespace) -> Any:
    """Start the query source -> sink; the ``StreamingQuery``."""
    from pyspark.sql import functions

    reader = secured(spark.readStream.format("rocketmq"), args)
    reader = (
        reader.option("endpoints", args.endpoints)
        .option("topics", args.source)
        .option("consumerGroup", "spark-sink-job")  # a pull names a group (ACL 2.0 checks it)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", str(args.max_per_trigger))
    )
    rows = reader.load().select(
        "body",
        functions.create_map(
            functions.lit("from"),
            functions.concat_ws(":", "queueId", "queueOffset"),
        ).alias("properties"),
    )
    writer = secured(rows.writeStream.format("rocketmq"), args)
    writer = (
        writer.option("endpoints", args.endpoints)
        .option("topic", args.sink)
        .option("exactlyOnce", args.exactly_once)
        .option("checkpointLocation", args.checkpoint)
    )
    if args.available_now:
        return writer.trigger(availableNow=True).start()
    return writer.trigger(processingTime="0 seconds").start()


def main(argv: list[str] | None = None) -> int:
    """Run the job; 0 when an ``--available-now`` run finished."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--endpoints", required=True)
    parser.add_argument("--source", required=True)
    parser.add_argument("--sink", required=True)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--max-per-trigger", type=int, default=1_000)
    parser.add_argument("--available-now", action="store_true")
    parser.add_argument("--exactly-once", default="true")
    parser.add_argument("--ca-file", default="")
    parser.add_argument("--access-key", default="")
    parser.add_argument("--secret-key", default="")
    args = parser.parse_args(argv)
    query = start(stream_to_parquet.session("ariane-sink-job"), args)
    query.awaitTermination()
    return 0


if __name__ == "__main__":
    sys.exit(main())
