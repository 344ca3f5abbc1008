"""``ariane bench produce|consume``: the client benchmark's command line.

The drivers live in the source checkout's ``bench/`` package (benchmarks are not shipped with
the wheel and are not tests): this module parses the arguments, finds ``bench`` (importable
from the working directory, or next to the ``src/`` this package was installed from in
editable mode) and runs ``bench.client_bench.run``. See that module for what is measured::

    ariane bench produce [--endpoints HOST:PORT] [--messages 50000] [--batch 64]
                         [--in-flight 8] [--official-messages 10000] [--threads 8] [--json]
                         [--scenarios ours-batch,ours-stream,ours-single,official]
    ariane bench consume …  (same options; no ours-stream)

Exit status: 0 done; 1 some calls failed during the runs; 2 a usage error or no ``bench/``.
"""

from __future__ import annotations

import argparse
import importlib
import pathlib
import shlex
import sys
from types import ModuleType

EXIT_USAGE = 2

KINDS = ("produce", "consume")
SCENARIOS = ("ours-batch", "ours-stream", "ours-single", "official")
PRODUCE_ONLY = ("ours-stream",)
"""Scenarios ``consume`` does not have (streaming is a send path)."""


def _positive(text: str) -> int:
    value = int(text)
    if not 1 <= value <= 10_000_000:
        raise argparse.ArgumentTypeError(f"must be 1..10000000, not {value}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``bench`` sub-command's arguments."""
    parser.add_argument("kind", choices=KINDS, help="what to measure")
    parser.add_argument(
        "--endpoints", help="name servers of a running cluster (default: start one per round)"
    )
    parser.add_argument("--messages", type=_positive, default=50_000, help="ours-batch run size")
    parser.add_argument(
        "--single-messages", type=_positive, default=10_000, help="ours-single run size"
    )
    parser.add_argument(
        "--official-messages", type=_positive, default=10_000, help="official client run size"
    )
    parser.add_argument("--batch", type=_positive, default=64, help="messages per ours-batch call")
    parser.add_argument("--in-flight", type=_positive, default=8, help="calls at once (ours)")
    parser.add_argument("--threads", type=_positive, default=8, help="official client threads")
    parser.add_argument("--rounds", type=_positive, default=3, help="interleaved rounds")
    parser.add_argument("--body-bytes", type=_positive, default=1024, help="body size")
    parser.add_argument(
        "--scenarios",
        help=f"comma-separated subset of {','.join(SCENARIOS)} (default: all; "
        f"{','.join(PRODUCE_ONLY)} only for produce)",
    )
    parser.add_argument(
        "--quiet-wait-s", type=float, default=5.0, help="longest wait for a quiet machine per run"
    )
    parser.add_argument(
        "--flush-disk-type", choices=("ASYNC_FLUSH", "SYNC_FLUSH"), default="ASYNC_FLUSH"
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument(
        "--no-record", action="store_true", help="do not write bench/results/client-<date>.*"
    )
    parser.add_argument("--results-dir", type=pathlib.Path, help="default: bench/results")


def find_bench() -> ModuleType:
    """Import ``bench.client_bench`` from the working directory or the source checkout.

    Raises:
        ImportError: no ``bench/`` package can be found.
    """
    try:
        return importlib.import_module("bench.client_bench")
    except ModuleNotFoundError as exc:
        if exc.name not in ("bench", "bench.client_bench"):
            raise
    checkout = pathlib.Path(__file__).resolve().parents[2]
    if not (checkout / "bench" / "client_bench.py").is_file():
        raise ImportError(
            "ariane bench needs the source checkout's bench/ directory; run it from the "
            "repository root (benchmarks are not installed with the package)"
        )
    sys.path.insert(0, str(checkout))
    return importlib.import_module("bench.client_bench")


def run(args: argparse.Namespace) -> int:
    """Run the benchmark described by ``args``; returns the exit status."""
    valid = (
        SCENARIOS
        if args.kind == "produce"
        else tuple(s for s in SCENARIOS if s not in PRODUCE_ONLY)
    )
    chosen = ",".join(valid) if args.scenarios is None else args.scenarios
    scenarios = tuple(s.strip() for s in chosen.split(",") if s.strip())
    unknown = [s for s in scenarios if s not in valid]
    if not scenarios or unknown:
        print(f"ariane bench {args.kind}: --scenarios takes {', '.join(valid)}", file=sys.stderr)
        return EXIT_USAGE
    try:
        bench = find_bench()
    except ImportError as exc:
        print(f"ariane bench: {exc}", file=sys.stderr)
        return EXIT_USAGE
    options = bench.Options(
        kind=args.kind,
        endpoints=args.endpoints,
        messages=args.messages,
        single_messages=args.single_messages,
        official_messages=args.official_messages,
        batch=args.batch,
        in_flight=args.in_flight,
        threads=args.threads,
        rounds=args.rounds,
        body_bytes=args.body_bytes,
        scenarios=scenarios,
        quiet_wait_s=max(0.0, args.quiet_wait_s),
        flush_disk_type=args.flush_disk_type,
        json_output=args.json,
        record=not args.no_record,
        results_dir=args.results_dir or bench.REPO / "bench" / "results",
        command=shlex.join(["ariane", *sys.argv[1:]]),
    )
    return int(bench.run(options))
