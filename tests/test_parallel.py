"""What keeps the suite correct when pytest-xdist runs it in several workers at once.

Invariants proven here: two workers never hand out the same port (each draws from its own slice,
``$ARIANE_PORT_RANGE``, set by tests/conftest.py and inherited by child processes), a
fetch/build of a shared cache entry runs once at a time (``cache_lock``), and the workers get the
test files longest first, whole, each file's tests in their order (``durations``).
"""

from __future__ import annotations

import itertools
import json
import os
import pathlib
import re
import socket

import pytest

import durations
from ariane import dev


def test_free_port_draws_only_from_the_range_in_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With ``ARIANE_PORT_RANGE`` set, every port ``free_port`` hands out lies inside it."""
    monkeypatch.setenv("ARIANE_PORT_RANGE", "20000-21024")
    ports = [dev.free_port() for _ in range(200)]
    assert all(20000 <= port < 21024 for port in ports), sorted(ports)
    assert len(set(ports)) == len(ports)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", ports[-1]))


def test_a_malformed_port_range_falls_back_to_the_room_below_the_ephemeral_range(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A range that is not ``LOW-HIGH`` inside [FREE_PORT_FLOOR, 65536) is ignored."""
    monkeypatch.delenv("ARIANE_PORT_RANGE", raising=False)
    default = dev.port_range()
    assert default[0] == dev.FREE_PORT_FLOOR
    for bad in ("", "x-y", "30000", "21000-20000", "80-2000", "60000-70000"):
        monkeypatch.setenv("ARIANE_PORT_RANGE", bad)
        assert dev.port_range() == default, bad


def test_worker_slices_are_disjoint_and_wide() -> None:
    """The slices of 4 workers do not overlap, and each leaves room for random draws."""
    bounds = [tuple(map(int, dev.worker_port_range(i, 4).split("-"))) for i in range(4)]
    for (low, high), (next_low, _) in itertools.pairwise(bounds):
        assert low < high <= next_low
    assert all(high - low >= 1024 for low, high in bounds)
    with pytest.raises(ValueError):
        dev.worker_port_range(4, 4)


def test_this_worker_draws_from_its_own_slice() -> None:
    """Under xdist, tests/conftest.py gave this worker (and its children) its own slice."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    count = os.environ.get("PYTEST_XDIST_WORKER_COUNT", "")
    if not worker.startswith("gw"):
        pytest.skip("not under pytest-xdist")
    assert os.environ["ARIANE_PORT_RANGE"] == dev.worker_port_range(int(worker[2:]), int(count))


def test_test_files_are_handed_out_longest_first_and_whole() -> None:
    """Files go by recorded seconds, longest first (a file without a record counts
    ``UNKNOWN_S``, ties in collection order); each file's tests stay together in their order,
    none lost or repeated."""
    nodeids = [
        "tests/test_a.py::test_1",
        "tests/test_a.py::test_2[x]",
        "tests/test_b.py::test_1",
        "tests/test_c.py::test_1",
        "tests/test_c.py::test_2",
        "tests/test_d.py::test_1",
        "tests/test_e.py::test_1",
    ]
    seconds = {
        "tests/test_a.py": 1.0,
        "tests/test_b.py": 300.0,
        "tests/test_c.py": durations.UNKNOWN_S,
        "tests/test_e.py": 90.0,
    }
    order = [nodeids[i] for i in durations.longest_file_first(nodeids, seconds)]
    assert order == [
        "tests/test_b.py::test_1",
        "tests/test_e.py::test_1",
        "tests/test_c.py::test_1",
        "tests/test_c.py::test_2",
        "tests/test_d.py::test_1",
        "tests/test_a.py::test_1",
        "tests/test_a.py::test_2[x]",
    ]


def test_a_run_records_its_seconds_per_file_over_the_last_record(tmp_path: pathlib.Path) -> None:
    """``record`` merges a run's seconds into the record file (files it did not run keep their
    seconds), and ``load`` lets the record override the committed file; an unreadable file or
    entry counts as absent."""
    committed, recorded = tmp_path / "committed.json", tmp_path / "run" / "recorded.json"
    committed.write_text(json.dumps({"tests/test_a.py": 5, "tests/test_b.py": 7, "x": "y"}))
    durations.record(recorded, {"tests/test_b.py": 70.04, "tests/test_c.py": 3.0})
    durations.record(recorded, {"tests/test_c.py": 30.0})
    assert json.loads(recorded.read_text()) == {"tests/test_b.py": 70.0, "tests/test_c.py": 30.0}
    assert durations.load([committed, recorded, tmp_path / "missing.json"]) == {
        "tests/test_a.py": 5.0,
        "tests/test_b.py": 70.0,
        "tests/test_c.py": 30.0,
    }
    assert not list(recorded.parent.glob("*.partial"))


def test_every_test_file_has_recorded_seconds_and_make_unit_keeps_that_order() -> None:
    """``tests/durations.json`` names only test files that exist (with non-negative seconds),
    and ``make unit`` records its run and hands files out in collection order (xdist's default
    reorders by test count, which put the long Spark and client files last)."""
    here = pathlib.Path(__file__).resolve().parent
    recorded = json.loads(durations.DURATIONS_FILE.read_text())
    assert all((here.parent / path).is_file() for path in recorded), "stale entries"
    assert all(seconds >= 0 for seconds in recorded.values())
    makefile = (here.parent / "Makefile").read_text()
    unit = re.search(r"^unit:.*?(?=^\S)", makefile, re.MULTILINE | re.DOTALL)
    assert unit is not None
    assert "--dist loadfile --no-loadscope-reorder" in unit.group(0)
    assert f"{durations.RECORD_ENV}=" in unit.group(0)
