"""The downstream step of ``make run``: the ``flights`` topic through Spark, checked.

A Structured Streaming query reads the topic through the ``rocketmq`` format
(``ariane.connectors.spark``) from ``earliest`` with ``Trigger.AvailableNow`` in
``SPARK_TRIGGERS`` micro-batches (``maxOffsetsPerTrigger``), parses the JSON bodies and keeps
departure-delay statistics in Spark's streaming state: per carrier and per day, the flights
(``count(*)``), the flights that departed (``dep_delay`` present), the mean delay and its
p50/p95 (``percentile_approx``). Each micro-batch writes the whole table (complete output
mode) to parquet through ``foreachBatch`` with ``overwrite``, so a batch replayed after a crash
writes the same files again: with the checkpoint (offsets WAL + state store) the tables count
every message once.

Layout under ``<data dir>/spark``: ``checkpoint/``, ``carriers/`` and ``days/`` (parquet),
``initial-offsets.json`` (the connector's ``initialOffsetsPath``) and
``mean_delay_by_carrier.png``.

The check: the per-carrier and per-day flight counts and the per-carrier mean delays equal those
computed in plain Python from the source data set (``dataset.Flight``), and the counts' totals
equal the number of flights sent (336,776 for the whole year).

Run on its own (``python examples/flights/spark_job.py --endpoints NAMESRV --out DIR``, what the
SparkApplication ``examples/spark/flights-sparkapplication.yaml`` submits): the same step against
a topic some producer filled, on the master the job was submitted to; it exits 1 on a mismatch.

Delta Lake is not used: ``delta-spark``'s Python package fetches its JARs from Maven Central
when the session starts, which a local ``make run`` must not depend on.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import pathlib
import sys
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from rich.console import Console
from rich.table import Table

from examples.flights import dataset
from examples.spark import stream_to_parquet

SPARK_TRIGGERS = 4
"""Micro-batches the query is cut into (``maxOffsetsPerTrigger`` = flights / this), so the
statistics are carried across batches in Spark's state, not computed in one go."""

MEAN_TOLERANCE_MIN = 1e-6
"""Largest difference, minutes, between Spark's and Python's mean delay (summation order)."""

_BODY_SCHEMA = "year STRING, month STRING, day STRING, carrier STRING, dep_delay STRING"
"""The body fields the job reads; every CSV value is a JSON string, ``NA`` when missing."""


@dataclasses.dataclass(frozen=True, slots=True)
class Stat:
    """One row of a result table.

    Attributes:
        key: the carrier code or the day (``YYYY-MM-DD``).
        flights: flights (messages) counted.
        departed: flights with a departure delay (not cancelled).
        mean / p50 / p95: departure delay, minutes; ``None`` when nothing departed.
    """

    key: str
    flights: int
    departed: int
    mean: float | None
    p50: float | None
    p95: float | None


@dataclasses.dataclass(frozen=True, slots=True)
class SparkResult:
    """What the Spark step computed and how it compares with the data set.

    Attributes:
        carriers / days: the result tables, by flights descending / by day.
        seconds: wall time of the step (session start to tables read back).
        mismatches: one line per disagreement with the data set; empty when it agrees.
        plot: the PNG of mean departure delay per carrier.
        master: the Spark master the job ran on (``local[2,4]``, or the submission's).
    """

    carriers: list[Stat]
    days: list[Stat]
    seconds: float
    mismatches: list[str]
    plot: pathlib.Path
    master: str

    @property
    def flights(self) -> int:
        """Flights the per-carrier table counts."""
        return sum(s.flights for s in self.carriers)

    @property
    def ok(self) -> bool:
        """True when the tables agree with the data set."""
        return not self.mismatches


@dataclasses.dataclass(frozen=True, slots=True)
class Expected:
    """What the data set says the tables must hold.

    Attributes:
        carriers / days: flights per carrier / per day (``YYYY-MM-DD``).
        carrier_means: mean departure delay per carrier, minutes (carriers with a departure).
    """

    carriers: Counter[str]
    days: Counter[str]
    carrier_means: dict[str, float]


def expected(flights: Iterable[dataset.Flight]) -> Expected:
    """Count the flights per carrier and per day, and average the delays, in plain Python."""
    carriers: Counter[str] = Counter()
    days: Counter[str] = Counter()
    delays: dict[str, list[float]] = {}
    for flight in flights:
        row = json.loads(flight.body)
        carriers[flight.carrier] += 1
        days[f"{int(row['year']):04d}-{int(row['month']):02d}-{int(row['day']):02d}"] += 1
        if row["dep_delay"] not in ("", "NA"):
            delays.setdefault(flight.carrier, []).append(float(row["dep_delay"]))
    means = {carrier: sum(d) / len(d) for carrier, d in delays.items()}
    return Expected(carriers, days, means)


def compare(
    name: str, got: list[Stat], expected: Counter[str], total: int | None = None
) -> list[str]:
    """Lines naming each key whose count differs (and the total when it differs)."""
    counts = {s.key: s.flights for s in got}
    wrong = [
        f"{name} {key}: spark {counts.get(key, 0):,}, data set {expected.get(key, 0):,}"
        for key in sorted(set(counts) | set(expected), key=str)
        if counts.get(key, 0) != expected.get(key, 0)
    ]
    want = sum(expected.values()) if total is None else total
    if sum(counts.values()) != want:
        wrong.append(f"{name} total: spark {sum(counts.values()):,}, expected {want:,}")
    return wrong


def compare_means(got: list[Stat], means: dict[str, float]) -> list[str]:
    """Lines naming each carrier whose mean delay differs from the data set's by > 1e-6 min."""
    return [
        f"carrier {s.key} mean delay: spark {s.mean}, data set {means.get(s.key)}"
        for s in got
        if (s.mean is None) != (s.key not in means)
        or (s.mean is not None and abs(s.mean - means[s.key]) > MEAN_TOLERANCE_MIN)
    ]


def _stream(
    spark: Any,
    namesrv: str,
    out: pathlib.Path,
    per_trigger: int,
    options: Mapping[str, str],
) -> None:
    """Run the streaming query to the end of the topic (``Trigger.AvailableNow``); ``options``
    are more source options (TLS, credentials, the consumer group on a secure cluster)."""
    from pyspark.sql import functions as F  # noqa: N812 (PySpark's convention)

    flights = (
        spark.readStream.format("rocketmq")
        .options(**options)
        .option("endpoints", namesrv)
        .option("topics", "flights")
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", str(per_trigger))
        .option("initialOffsetsPath", str(out / "initial-offsets.json"))
        .load()
        .select(F.from_json(F.col("body").cast("string"), _BODY_SCHEMA).alias("f"))
        .select(
            F.col("f.carrier").alias("carrier"),
            F.date_format(
                F.make_date(*(F.col(f"f.{c}").cast("int") for c in ("year", "month", "day"))),
                "yyyy-MM-dd",
            ).alias("day"),
            F.col("f.dep_delay").try_cast("double").alias("delay"),
        )
    )
    keyed = flights.select(
        F.explode(
            F.array(
                F.struct(F.lit("carrier").alias("kind"), F.col("carrier").alias("key")),
                F.struct(F.lit("day").alias("kind"), F.col("day").alias("key")),
            )
        ).alias("k"),
        "delay",
    ).select("k.kind", "k.key", "delay")
    stats = keyed.groupBy("kind", "key").agg(
        F.count(F.lit(1)).alias("flights"),
        F.count("delay").alias("departed"),
        F.avg("delay").alias("mean"),
        F.percentile_approx("delay", 0.5).cast("double").alias("p50"),
        F.percentile_approx("delay", 0.95).cast("double").alias("p95"),
    )

    def write(batch: Any, _batch_id: int) -> None:
        batch.persist()
        for kind in ("carrier", "day"):
            part = batch.where(F.col("kind") == kind).drop("kind")
            part.coalesce(1).write.mode("overwrite").parquet(str(out / f"{kind}s"))
        batch.unpersist()

    query = (
        stats.writeStream.outputMode("complete")
        .foreachBatch(write)
        .option("checkpointLocation", str(out / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()


def _table(spark: Any, path: pathlib.Path) -> list[Stat]:
    """A result table read back through Spark, sorted by key."""
    rows = spark.read.parquet(str(path)).collect()
    stats = [
        Stat(r["key"], r["flights"], r["departed"], r["mean"], r["p50"], r["p95"]) for r in rows
    ]
    return sorted(stats, key=lambda s: s.key)


def plot(carriers: list[Stat], path: pathlib.Path) -> pathlib.Path:
    """Write a bar chart of mean departure delay (minutes) per carrier to ``path`` (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ranked = sorted((s for s in carriers if s.mean is not None), key=lambda s: s.mean or 0.0)
    fig, ax = plt.subplots(figsize=(9, 5))
    ax.barh([s.key for s in ranked], [s.mean or 0.0 for s in ranked], color="tab:blue")
    for index, stat in enumerate(ranked):
        ax.annotate(
            f"{stat.flights:,} flights",
            (stat.mean or 0.0, index),
            fontsize=7,
            xytext=(3, -3),
            textcoords="offset points",
        )
    ax.set_xlabel("mean departure delay, minutes")
    ax.set_title("NYC 2013 flights: mean departure delay per carrier (Spark over Ariane)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def run(
    namesrv: str,
    out: pathlib.Path,
    flights: list[dataset.Flight],
    total: int,
    *,
    master: str | None = stream_to_parquet.LOCAL_MASTER,
    options: Mapping[str, str] | None = None,
) -> SparkResult:
    """Run the Spark step against the cluster at ``namesrv``, writing under ``out``.

    ``flights`` are the flights sent; ``total`` the count the tables must add up to (the
    data set's ``FLIGHTS_ROWS`` for a whole run); ``master`` the Spark master, ``None`` for the
    one the job was submitted to (``stream_to_parquet.session``); ``options`` more options of
    the ``rocketmq`` source (``tls``/``caFile``, ``accessKey``/``secretKey``, ``consumerGroup``
    on a secure cluster). Raises whatever Spark raises
    when the query fails (the pipeline then exits non-zero).
    """
    import time

    start = time.monotonic()
    out.mkdir(parents=True, exist_ok=True)
    spark: Any = stream_to_parquet.session("ariane-flights", master=master)
    try:
        per_trigger = max(-(-len(flights) // SPARK_TRIGGERS), 1)
        _stream(spark, namesrv, out, per_trigger, options or {})
        carriers = sorted(_table(spark, out / "carriers"), key=lambda s: -s.flights)
        days = _table(spark, out / "days")
        ran_on = str(spark.sparkContext.master)
    finally:
        spark.stop()
    want = expected(flights)
    mismatches = [
        *compare("carrier", carriers, want.carriers, total),
        *compare("day", days, want.days, total),
        *compare_means(carriers, want.carrier_means),
    ]
    picture = plot(carriers, out / "mean_delay_by_carrier.png")
    return SparkResult(carriers, days, time.monotonic() - start, mismatches, picture, ran_on)


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def show(console: Console, result: SparkResult, *, top: int = 10) -> None:
    """Print the top ``top`` carriers by flights, the busiest days, the verdict and the plot."""
    table = Table(title=f"Spark over Ariane: departure delay per carrier (top {top} by flights)")
    for column in ("carrier", "flights", "departed", "mean min", "p50 min", "p95 min"):
        table.add_column(column, justify="right")
    for stat in result.carriers[:top]:
        table.add_row(
            stat.key,
            f"{stat.flights:,}",
            f"{stat.departed:,}",
            _fmt(stat.mean),
            _fmt(stat.p50),
            _fmt(stat.p95),
        )
    flights = result.flights
    busiest = sorted(result.days, key=lambda s: (-s.flights, s.key))[:3]
    verdict = "matches the data set" if result.ok else "MISMATCH: " + "; ".join(result.mismatches)
    table.caption = (
        f"{verdict}: {flights:,} flights, {len(result.carriers)} carriers, "
        f"{len(result.days)} days (busiest {', '.join(f'{d.key} {d.flights:,}' for d in busiest)})"
        f"; {result.seconds:.1f} s on Spark master {result.master}"
    )
    console.print(table)
    console.print(f"plot of mean departure delay per carrier: {result.plot}")


def main(argv: list[str] | None = None) -> int:
    """The job on its own: 0 when the tables match the data set, 1 on a mismatch.

    ``--endpoints`` is the name server (``host:port``); ``--out`` the directory the checkpoint,
    the tables and the plot go to (on a cluster: storage every executor shares); ``--limit N``
    checks against the first N flights (the producer sent only those); ``--tls`` dials the
    cluster over TLS, verified against ``--ca-file`` (a PEM bundle readable on the driver and
    every executor; without it the system's roots), the source's ``tls``/``caFile`` options;
    ``--local`` runs in local mode instead of on the master the job was submitted to.
    """
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--endpoints", required=True, help="name server, host:port")
    parser.add_argument("--out", required=True, type=pathlib.Path, help="output directory")
    parser.add_argument("--limit", type=int, default=0, help="only the first N flights were sent")
    parser.add_argument("--tls", action="store_true", help="dial TLS (the source's tls=true)")
    parser.add_argument("--ca-file", default="", help="PEM CA bundle verifying the servers")
    local = stream_to_parquet.LOCAL_MASTER
    parser.add_argument("--local", action="store_true", help=f"run on {local} instead")
    args = parser.parse_args(argv)
    if args.ca_file and not args.tls:
        parser.error("--ca-file needs --tls")
    options = {"tls": "true", **({"caFile": args.ca_file} if args.ca_file else {})}
    flights = dataset.load_flights()[: args.limit or None]
    total = len(flights) if args.limit else dataset.FLIGHTS_ROWS
    master = local if args.local else None
    result = run(
        args.endpoints, args.out, flights, total, master=master, options=options if args.tls else {}
    )
    show(Console(), result)
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
