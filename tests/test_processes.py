"""The one process layer of the test suites (``e2e.testenv.processes``): a timed-out wait names
what it waited for, a hang guard stretches with the machine's load (and only within bounds), and
the log tails a failing test's report gets are those of the processes it started or that still
run, never an old, finished one's."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest
from e2e.testenv import processes


def test_wait_until_names_what_it_waited_for_and_chains_the_last_error() -> None:
    """A predicate that never holds ends in a TimeoutError naming ``what``, caused by the last
    exception the predicate raised."""

    def never() -> bool:
        raise ConnectionRefusedError("not yet")

    with pytest.raises(TimeoutError, match="waiting for the broker to take writes") as caught:
        processes.wait_until(never, timeout_s=0.3, what="the broker to take writes")
    assert isinstance(caught.value.__cause__, ConnectionRefusedError)


@pytest.mark.parametrize(
    ("load_1m", "cpus", "expected_s"),
    [(0.3, 2, 30.0), (2.0, 2, 30.0), (9.0, 2, 135.0), (21.0, 2, 300.0), (21.0, 16, 39.375)],
)
def test_a_hang_guard_stretches_with_the_load_per_cpu_up_to_its_bound(
    monkeypatch: pytest.MonkeyPatch, load_1m: float, cpus: int, expected_s: float
) -> None:
    """A 30 s guard stays 30 s on an idle machine, grows with the 1-minute load per CPU (the
    share of a CPU each runnable task gets) and stops at ``LOAD_FACTOR_MAX`` times."""
    monkeypatch.setattr(os, "getloadavg", lambda: (load_1m, 0.0, 0.0))
    monkeypatch.setattr(os, "cpu_count", lambda: cpus)
    assert processes.loaded_timeout_s(30.0) == pytest.approx(expected_s)


def test_a_hang_guard_is_unstretched_where_no_load_is_reported(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Without a load average (``OSError``), the guard is its idle value."""

    def unavailable() -> tuple[float, float, float]:
        raise OSError("no load average here")

    monkeypatch.setattr(os, "getloadavg", unavailable)
    assert processes.loaded_timeout_s(30.0) == 30.0


def _child(tmp_path: pathlib.Path, name: str, code: str) -> subprocess.Popen[bytes]:
    log = tmp_path / f"{name}.log"
    with log.open("ab") as out:
        proc = subprocess.Popen([sys.executable, "-c", code], stdout=out, stderr=out)
    processes.track(proc, log)
    return proc


def test_log_tails_are_those_of_processes_started_since_the_mark_or_still_running(
    tmp_path: pathlib.Path,
) -> None:
    """An old process that exited is left out; one started after the mark and one still
    running (a module-scoped cluster's) are in, with their last lines."""
    old = _child(tmp_path, "old", "print('old line')")
    old.wait(timeout=30)
    running = _child(tmp_path, "running", "import time; print('up', flush=True); time.sleep(60)")
    mark = processes.started_mark()
    new = _child(tmp_path, "new", "print('boom: the last line')")
    new.wait(timeout=30)
    try:
        processes.wait_until(
            lambda: "up" in (tmp_path / "running.log").read_text(), timeout_s=30, what="output"
        )
        tails = dict(processes.log_tails(mark))
    finally:
        running.kill()
        running.wait(timeout=30)
    titles = " ".join(tails)
    assert "old.log" not in titles
    assert "running.log" in titles and "new.log" in titles
    assert any("boom: the last line" in tail for tail in tails.values())
    assert any("running" in title and "running.log" in title for title in tails)
