"""``python -m e2e.chaos``: one chaos run, its report as JSON (``--out``) and as tables.

Exit status: 0 when nothing acknowledged was lost and nothing corrupt was delivered, 1 otherwise
(an ASYNC run may lose; its report says how much), 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import pathlib
import sys
import tempfile

from rich import console as rich_console

from e2e.chaos import nemesis, runner


def main(argv: list[str] | None = None) -> int:
    """Parse the arguments, run, write and print the report."""
    parser = argparse.ArgumentParser(prog="python -m e2e.chaos", description=__doc__)
    parser.add_argument("--faults", type=int, default=20, help="faults to inject")
    parser.add_argument("--seed", type=int, default=1, help="seed of the fault schedule")
    parser.add_argument("--role", choices=["SYNC_MASTER", "ASYNC_MASTER"], default="SYNC_MASTER")
    parser.add_argument("--flush", choices=["SYNC_FLUSH", "ASYNC_FLUSH"], default="SYNC_FLUSH")
    parser.add_argument(
        "--kinds",
        default="",
        help=f"comma-separated fault kinds (default: all): {','.join(nemesis.REGISTRY)}",
    )
    parser.add_argument(
        "--wait-healed",
        action="store_true",
        help="one fault at a time, each into a healed, in-sync group (the first runs' mode)",
    )
    parser.add_argument("--concurrency", type=int, default=2, help="most faults in force at once")
    parser.add_argument(
        "--no-network", action="store_true", help="no Toxiproxy: process and clock faults only"
    )
    parser.add_argument(
        "--no-power-loss",
        action="store_true",
        help="stores on the plain disk (no FUSE power-loss layer): no power-loss faults",
    )
    parser.add_argument("--out", type=pathlib.Path, help="write the JSON report here")
    parser.add_argument("--history", type=pathlib.Path, help="write the OpenChaos history here")
    parser.add_argument("--work", type=pathlib.Path, help="stores and logs (default: a temp dir)")
    args = parser.parse_args(argv)
    kinds = tuple(k for k in args.kinds.split(",") if k)
    unknown = set(kinds) - set(nemesis.REGISTRY)
    if unknown or args.faults < 1 or args.concurrency < 1:
        parser.error(f"unknown fault kinds {sorted(unknown)}, or --faults/--concurrency < 1")
    logging.basicConfig(level=logging.WARNING)
    logging.getLogger("ariane.client").setLevel(logging.ERROR)  # retries during faults: expected
    schedule = nemesis.Schedule(
        faults=args.faults,
        seed=args.seed,
        kinds=kinds,
        overlap=not args.wait_healed,
        concurrency_max=args.concurrency,
    )
    with tempfile.TemporaryDirectory(prefix="ariane-chaos-") as tmp:
        work = args.work or pathlib.Path(tmp)
        report = asyncio.run(
            runner.run(
                work,
                schedule=schedule,
                role=args.role,
                flush_disk_type=args.flush,
                network=not args.no_network,
                power_loss=not args.no_power_loss,
                history_path=args.history,
            )
        )
    if args.out:
        runner.write(report, args.out)
    runner.render(report, rich_console.Console())
    result = report["result"]
    return 0 if result["lost"] == 0 and result["corrupt_delivered"] == 0 else 1


if __name__ == "__main__":
    assert __debug__, "run without -O (assertions guard invariants)"
    sys.exit(main())
