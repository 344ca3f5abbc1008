"""Benchmark drivers (not tests): each prints a table and records results in bench/results/.

The measurement helpers they share (the quiet-machine gate, timed loops, process-tree CPU, the
results writer) and the client benchmark live in the package, ``ariane.benchmark``, which is
shipped with the wheel; this directory holds what needs the source checkout (the side-by-side
comparison with Apache RocketMQ, the store benchmarks) and the recorded results.
"""

import pathlib

REPO = pathlib.Path(__file__).resolve().parents[1]
"""The source checkout this directory belongs to."""

RESULTS_DIR = REPO / "bench" / "results"
"""Where results are recorded by default (committed with the code they measured)."""
