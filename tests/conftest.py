"""Suite-wide settings for running tests/ in parallel with pytest-xdist (``make unit``).

- Each xdist worker draws ports from its own slice (``$ARIANE_PORT_RANGE``, see
  ``ariane.dev.free_port``): two workers never hand out the same port, and the processes a test
  starts inherit the slice.
- ``solo``: a test that asserts a wall-clock bound (a lease, a route hole, a restart within
  seconds) and so must not share the machine's 2 cores with other tests: ``make unit`` runs
  those after the parallel run, one at a time (``-m solo``).

Invariant: nothing here changes what a test asserts or how long it may take.
"""

from __future__ import annotations

import os

import pytest

from ariane import dev


def pytest_configure(config: pytest.Config) -> None:
    """Registers ``solo``; gives this xdist worker (if any) its own port slice."""
    config.addinivalue_line(
        "markers",
        "solo: asserts a wall-clock bound; run alone, after the parallel run (make unit)",
    )
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    count = os.environ.get("PYTEST_XDIST_WORKER_COUNT", "")
    if worker.startswith("gw") and worker[2:].isdigit() and count.isdigit():
        os.environ[dev.PORT_RANGE_ENV] = dev.worker_port_range(int(worker[2:]), int(count))
