"""Fixtures for conformance tests: a real ``ariane namesrv`` + ``ariane broker`` on 127.0.0.1.

The cluster is started with ``ariane.dev.dev_cluster`` (child processes, free ports, data in a
temp dir) once per module and stopped by PID afterwards. ``run_driver`` runs the official
Python client driver in its own process (its protobuf modules clash with ours) and returns its
JSON events; ``admin`` runs ``python -m ariane admin`` the way a user would.
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from ariane import dev

HERE = pathlib.Path(__file__).resolve().parent
DRIVER = HERE / "official_py_driver.py"
REPO = HERE.parents[1]


class Cluster:
    """Handles to a running local cluster."""

    def __init__(self, endpoints: dev.DevEndpoints) -> None:
        self.namesrv = endpoints.namesrv
        self.broker = endpoints.broker
        self.data_dir = pathlib.Path(endpoints.data_dir)

    def admin(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """Run ``python -m ariane admin --endpoints <namesrv> ARGS``."""
        done = subprocess.run(
            [sys.executable, "-m", "ariane", "admin", "--endpoints", self.namesrv, *args],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        if check and done.returncode != 0:
            raise AssertionError(f"admin {args} failed ({done.returncode}): {done.stderr}")
        return done

    def run_driver(self, *args: str, timeout_s: float = 120) -> tuple[int, list[dict[str, Any]]]:
        """Run the official-client driver; returns its exit code and JSON events."""
        done = subprocess.run(
            [sys.executable, str(DRIVER), *args, "--endpoints", self.namesrv],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
            cwd=REPO,
        )
        events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
        if done.returncode not in (0, 3):
            raise AssertionError(
                f"driver {args} crashed ({done.returncode}): {done.stderr[-3000:]}"
            )
        return done.returncode, events


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A name server and a broker as child processes for the module's tests."""
    data_dir = tmp_path_factory.mktemp("cluster")
    with dev.dev_cluster(data_dir, namesrv_port=0) as endpoints:
        yield Cluster(endpoints)
