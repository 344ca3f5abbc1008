"""Suite-wide settings for running tests/ in parallel with pytest-xdist (``make unit``).

- Each xdist worker draws ports from its own slice (``$ARIANE_PORT_RANGE``, see
  ``ariane.dev.free_port``): two workers never hand out the same port, and the processes a test
  starts inherit the slice.
- A failing test's report carries the log tails of the processes it started, or that still
  run (module-scoped clusters), through the one process layer (``e2e.testenv.processes``).
- ``shared_cluster``: one name server + broker (``ariane dev``'s settings: 128 MiB CommitLog
  segments, a small index) per pytest process (per xdist worker), for the modules whose tests
  only create their own topics and groups and send and receive on them. A module that kills,
  pauses, restarts or reconfigures a broker, changes what every client sees (a second broker
  group, permissions, KV config, users) or lists the whole cluster starts its own and says why
  (``Own cluster:``, tests/test_test_shape.py). Topic and group names must be unique across the
  modules that share it (each module prefixes its own).
- Longest file first (``tests/durations.py``): in an xdist worker the collected tests are
  reordered file by file by their recorded seconds, so that ``--dist loadfile
  --no-loadscope-reorder`` starts the long files first; with ``$ARIANE_TEST_DURATIONS`` set the
  controller records this run's seconds per file there.
- ``spark_jvm``: the modules that start Spark drivers (sessions, ``spark-submit``, jobs) ask for
  it; their JVMs then run with ``jvm_testing``'s options (C1, serial GC, a class-data-sharing
  archive of pyspark's jars: about a quarter of the CPU of a default one).
- The servers the suite starts run asyncio's own loop (``$ARIANE_EVENT_LOOP`` defaults to
  ``asyncio`` here), whether or not uvloop is installed: the suite's behaviour does not depend on
  the dev venv's extras. ``tests/test_event_loop.py`` runs a cluster on uvloop;
  ``ARIANE_EVENT_LOOP=auto make unit`` runs the whole suite on it.
- ``solo``: a test that asserts a wall-clock bound (a lease, a route hole, a restart within
  seconds) and so must not share the machine's 2 cores with other tests: ``make unit`` runs
  those after the parallel run, one at a time (``-m solo``).

Invariant: nothing here changes what a test asserts or how long it may take.
"""

from __future__ import annotations

import os
import pathlib
from collections.abc import Generator, Iterator

import pytest
from e2e.testenv import processes

import durations
import jvm_testing
from ariane import dev
from ariane.common import event_loop

_MARK = pytest.StashKey[int]()
_MEASURED: dict[str, float] = {}
"""Seconds per test file measured in this run (the controller's, or a run without xdist)."""


def pytest_configure(config: pytest.Config) -> None:
    """Registers ``solo``; gives this xdist worker (if any) its own port slice; the servers
    started by the tests run asyncio's loop unless ``$ARIANE_EVENT_LOOP`` says otherwise."""
    os.environ.setdefault(event_loop.ENV_VAR, event_loop.EventLoop.ASYNCIO.value)
    config.addinivalue_line(
        "markers",
        "solo: asserts a wall-clock bound; run alone, after the parallel run (make unit)",
    )
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    count = os.environ.get("PYTEST_XDIST_WORKER_COUNT", "")
    if worker.startswith("gw") and worker[2:].isdigit() and count.isdigit():
        os.environ[dev.PORT_RANGE_ENV] = dev.worker_port_range(int(worker[2:]), int(count))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """In an xdist worker: the longest test files first (``durations.longest_file_first``)."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return
    seconds = durations.load(durations.sources())
    order = durations.longest_file_first([item.nodeid for item in items], seconds)
    items[:] = [items[i] for i in order]


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Adds each phase's seconds to its file's total (not in a worker: the controller gets
    every worker's reports)."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        path = durations.file_of(report.nodeid)
        _MEASURED[path] = _MEASURED.get(path, 0.0) + report.duration


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Records the measured seconds per file where ``$ARIANE_TEST_DURATIONS`` says."""
    target = os.environ.get(durations.RECORD_ENV, "")
    if target and _MEASURED and not os.environ.get("PYTEST_XDIST_WORKER"):
        durations.record(pathlib.Path(target), _MEASURED)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Marks where this test's processes start (for the log tails of its report)."""
    item.stash[_MARK] = processes.started_mark()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """A failed phase's report gets a section per process log (started by the test or running)."""
    report = yield
    if report.failed and _MARK in item.stash:
        for title, tail in processes.log_tails(item.stash[_MARK]):
            report.sections.append((f"log tail: {title}", tail))
    return report


@pytest.fixture(scope="session")
def shared_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dev.DevEndpoints]:
    """A name server and a broker (gRPC, Remoting, metrics; ``dev.dev_cluster``) shared by every
    module of this pytest process that asks for it; stopped by PID at the end of the session."""
    with dev.dev_cluster(tmp_path_factory.mktemp("shared-cluster"), namesrv_port=0) as ends:
        yield ends


@pytest.fixture(scope="session")
def spark_jvm() -> None:
    """``$SPARK_SUBMIT_OPTS`` set for this process and its children (``jvm_testing.use_for_spark``:
    the first use on a machine dumps pyspark's archive, once), before any Spark driver starts."""
    jvm_testing.use_for_spark()
