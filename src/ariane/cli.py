"""The ``ariane`` command line: one entry point for every component.

Sub-commands are added as components land; each prints a clear error for bad arguments and
exits non-zero.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from ariane.namesrv import __main__ as namesrv_main


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser with one sub-parser per component."""
    parser = argparse.ArgumentParser(prog="ariane", description="RocketMQ-compatible broker")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    sub.add_parser("run-example", help="the main job of `make run` (the flights pipeline)")
    namesrv_main.add_arguments(sub.add_parser("namesrv", help="run a name server"))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``ariane`` command; returns the process exit status."""
    args = build_parser().parse_args(argv)
    if args.command == "run-example":
        print(
            "ariane: the flights pipeline needs the broker (issue 3), which has not landed yet.",
            file=sys.stderr,
        )
        return 0
    if args.command == "namesrv":
        return namesrv_main.run(args)
    return 2  # pragma: no cover - argparse rejects unknown commands first


if __name__ == "__main__":
    assert __debug__ or sys.exit("ariane refuses to run under python -O (assertions are checks)")
    sys.exit(main())
