"""Longest test file first: the order in which pytest-xdist hands out test files (``make unit``).

``make unit`` runs ``--dist loadfile`` (one file per worker at a time, so a module's cluster starts
once). xdist's default hands out the files with the most tests first, so the few files of a few
long tests (Spark jobs, the flights pipeline, official Java clients) came last and one worker ran
them alone for minutes while the others had finished. Ordered by their recorded seconds instead
(``--no-loadscope-reorder`` keeps this order), the longest start first and the short ones fill in
at the end.

- ``tests/durations.json``: seconds per test file (setup, call and teardown of all its tests
  summed), committed; a file missing from it counts ``UNKNOWN_S``.
- ``$ARIANE_TEST_DURATIONS`` (``make unit``: ``.ariane/test-durations.json``, not committed): where
  a run records what it measured (merged into what the file held); its entries override the
  committed ones. Copy it over ``tests/durations.json`` to refresh the committed order.

Invariant: only the order of whole files changes (a file's tests keep their order, and every
worker computes the same order from the same files, as xdist requires); no test is added, left
out or changed.
"""

from __future__ import annotations

import json
import os
import pathlib
from collections.abc import Iterable, Mapping, Sequence

DURATIONS_FILE = pathlib.Path(__file__).with_name("durations.json")
"""The committed seconds per test file (paths relative to the repository root)."""
RECORD_ENV = "ARIANE_TEST_DURATIONS"
"""The variable naming the file a run records its durations to (and reads them from)."""
UNKNOWN_S = 20.0
"""Seconds assumed for a test file with no record (a new file): among the longer quarter."""


def file_of(nodeid: str) -> str:
    """The test file part of a pytest node id (``tests/test_x.py::test_y[p]`` -> the path)."""
    return nodeid.split("::", 1)[0]


def load(paths: Iterable[pathlib.Path]) -> dict[str, float]:
    """Seconds per test file from the JSON objects at ``paths``, later ones overriding earlier;
    a missing or unreadable file, or an entry that is not a number, counts as absent."""
    seconds: dict[str, float] = {}
    for path in paths:
        try:
            found = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(found, dict):
            seconds.update(
                {str(k): float(v) for k, v in found.items() if isinstance(v, int | float)}
            )
    return seconds


def sources() -> list[pathlib.Path]:
    """The committed file, then this run's record file when ``$ARIANE_TEST_DURATIONS`` names one."""
    recorded = os.environ.get(RECORD_ENV, "")
    return [DURATIONS_FILE, *([pathlib.Path(recorded)] if recorded else [])]


def longest_file_first(nodeids: Sequence[str], seconds: Mapping[str, float]) -> list[int]:
    """The indices of ``nodeids`` reordered file by file: the file with the most recorded seconds
    first (``UNKNOWN_S`` without a record; ties in collection order), each file's tests in their
    own order."""
    first_seen: dict[str, int] = {}
    for index, nodeid in enumerate(nodeids):
        first_seen.setdefault(file_of(nodeid), index)

    def key(index: int) -> tuple[float, int, int]:
        path = file_of(nodeids[index])
        return (-seconds.get(path, UNKNOWN_S), first_seen[path], index)

    return sorted(range(len(nodeids)), key=key)


def record(path: pathlib.Path, measured: Mapping[str, float]) -> None:
    """Merge ``measured`` (seconds per test file) into the JSON object at ``path`` and write it
    whole (a temporary file renamed over it), keys sorted, seconds to 0.1."""
    merged = load([path])
    merged.update(measured)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f"{path.name}.{os.getpid()}.partial")
    rounded = {k: round(v, 1) for k, v in sorted(merged.items())}
    partial.write_text(json.dumps(rounded, indent=1) + "\n")
    partial.replace(path)
