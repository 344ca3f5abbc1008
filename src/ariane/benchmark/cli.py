"""``ariane bench produce|consume``: the client benchmark's command line.

Parses the arguments, checks the scenarios (and that the official client is installed when its
scenario is asked for) and runs ``client_bench.run``; see that module for what is measured::

    ariane bench produce [--endpoints HOST:PORT] [--messages 50000] [--batch 64]
                         [--in-flight 8] [--official-messages 10000] [--threads 8] [--json]
                         [--scenarios ours-batch,ours-stream,ours-single,official]
                         [--results-dir DIR] [--data-dir DIR] [--no-record]
    ariane bench consume …  (same options; no ours-stream)

Everything it needs is in the installed package (like RocketMQ's ``benchmark/producer.sh``):
it runs from a wheel, in any directory. Results go to ``--results-dir``, by default
``./bench/results`` when run from the root of a source checkout, else the current directory.
Without ``rocketmq-python-client`` the ``official`` scenario is skipped with a line naming
``pip install 'ariane[clients]'``.

Exit status: 0 done; 1 some calls failed during the runs; 2 a usage error, or no scenario left
to run.
"""

from __future__ import annotations

import argparse
import pathlib
import shlex
import sys

from ariane.benchmark import client_bench

EXIT_USAGE = 2
RUN_MESSAGES_MAX = 10_000_000
"""The largest count any numeric option takes (messages, calls, threads, rounds, bytes)."""


def _positive(text: str) -> int:
    value = int(text)
    if not 1 <= value <= RUN_MESSAGES_MAX:
        raise argparse.ArgumentTypeError(f"must be 1..{RUN_MESSAGES_MAX}, not {value}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``bench`` sub-command's arguments."""
    parser.add_argument("kind", choices=client_bench.KINDS, help="what to measure")
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
        help=f"comma-separated subset of {','.join(client_bench.SCENARIOS)} (default: all; "
        f"{','.join(client_bench.PRODUCE_ONLY)} only for produce; official needs "
        f"{client_bench.INSTALL_HINT}, skipped without it)",
    )
    parser.add_argument(
        "--quiet-wait-s", type=float, default=5.0, help="longest wait for a quiet machine per run"
    )
    parser.add_argument(
        "--flush-disk-type", choices=("ASYNC_FLUSH", "SYNC_FLUSH"), default="ASYNC_FLUSH"
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument(
        "--no-record", action="store_true", help="do not write <results dir>/client-<date>.*"
    )
    parser.add_argument(
        "--results-dir",
        type=pathlib.Path,
        help="where results are recorded (default: ./bench/results when run from the root of "
        "a source checkout, else the current directory)",
    )
    parser.add_argument(
        "--data-dir",
        type=pathlib.Path,
        help="where started clusters keep their data, removed afterwards (default: the "
        "current directory)",
    )


def chosen_scenarios(kind: str, chosen: str | None) -> tuple[str, ...] | None:
    """The scenarios named by ``--scenarios`` (all of ``kind``'s if ``None``), in the order given;
    ``None`` if one is unknown to ``kind`` or none is named."""
    valid = client_bench.scenarios_of(kind)
    names = ",".join(valid) if chosen is None else chosen
    scenarios = tuple(s.strip() for s in names.split(",") if s.strip())
    if not scenarios or any(s not in valid for s in scenarios):
        return None
    return scenarios


def run(args: argparse.Namespace) -> int:
    """Run the benchmark described by ``args``; returns the exit status."""
    scenarios = chosen_scenarios(args.kind, args.scenarios)
    if scenarios is None:
        valid = ", ".join(client_bench.scenarios_of(args.kind))
        print(f"ariane bench {args.kind}: --scenarios takes {valid}", file=sys.stderr)
        return EXIT_USAGE
    if "official" in scenarios and not client_bench.official_client_installed():
        print(
            f"ariane bench {args.kind}: skipping the official scenario: "
            f"{client_bench.OFFICIAL_DISTRIBUTION} is not installed "
            f"({client_bench.INSTALL_HINT} adds it)",
            file=sys.stderr,
        )
        scenarios = tuple(s for s in scenarios if s != "official")
        if not scenarios:
            return EXIT_USAGE
    cwd = pathlib.Path.cwd()
    options = client_bench.Options(
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
        results_dir=args.results_dir or client_bench.default_results_dir(cwd),
        data_dir=args.data_dir or cwd,
        command=shlex.join(["ariane", *sys.argv[1:]]),
    )
    return client_bench.run(options)
