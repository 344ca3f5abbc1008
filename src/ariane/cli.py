"""The ``ariane`` command line: one entry point for every component.

Sub-commands are added as components land; each prints a clear error for bad arguments and
exits non-zero.
"""

from __future__ import annotations

import argparse
import pathlib
import sys
from collections.abc import Sequence

import ariane
from ariane import admin_cli
from ariane.benchmark import cli as bench_cli
from ariane.broker import __main__ as broker_main
from ariane.namesrv import __main__ as namesrv_main
from ariane.operator import __main__ as operator_main


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser with one sub-parser per component."""
    parser = argparse.ArgumentParser(prog="ariane", description="RocketMQ-compatible broker")
    parser.add_argument("--version", action="version", version=f"ariane {ariane.__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    namesrv_main.add_arguments(sub.add_parser("namesrv", help="run a name server"))
    broker_main.add_arguments(sub.add_parser("broker", help="run a broker"))
    dev = sub.add_parser("dev", help="run a local name server + broker until Ctrl-C")
    dev.add_argument("--data-dir", required=True, type=pathlib.Path, help="store and logs root")
    dev.add_argument("--namesrv-port", type=int, default=9876, help="0 picks a free port")
    dev.add_argument("--broker-port", type=int, default=0, help="0 picks a free port")
    dev.add_argument(
        "--workers",
        type=int,
        metavar="N",
        help="broker front-end worker processes (0 = none; default: the CPU count)",
    )
    dev.add_argument(
        "--slaves",
        type=int,
        default=None,
        metavar="N",
        help="SLAVE brokers replicating the broker (default 0; 1 with --secure)",
    )
    dev.add_argument(
        "--broker-role",
        choices=["SYNC_MASTER", "ASYNC_MASTER"],
        default="",
        help="the broker's role (default: ASYNC_MASTER with --slaves, else a lone broker)",
    )
    dev.add_argument(
        "--inner-credential",
        nargs="?",
        const="",
        default=None,
        metavar="ACCESS_KEY:SECRET_KEY",
        help="give the name server, master and slaves this inner credential (no value: a "
        "generated one): registrations are signed and the HA port serves only slaves holding it",
    )
    dev.add_argument(
        "--secure",
        action="store_true",
        help="TLS enforcing on every port (a CA generated in DATA_DIR/tls/ca.pem), ACL 2.0 on, a "
        "Super user written to DATA_DIR/credentials.json, and a slave (unless --slaves)",
    )
    admin_cli.add_arguments(
        sub.add_parser("admin", help="topics, groups, lag, messages (through the name server)")
    )
    bench_cli.add_arguments(
        sub.add_parser("bench", help="client benchmark: ariane.client vs the official client")
    )
    operator_main.add_arguments(
        sub.add_parser("operator", help="run the Kubernetes operator (needs ariane[operator])")
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``ariane`` command; returns the process exit status.

    Refuses to run under ``python -O``: assertions are the programmer-error checks (STYLE §7).
    """
    if not __debug__:
        print("ariane: refusing to run under python -O; assertions are checks", file=sys.stderr)
        return 2
    args = build_parser().parse_args(argv)
    if args.command == "dev":
        from ariane import dev as dev_cluster

        try:
            inner = (
                None
                if args.inner_credential is None
                else dev_cluster.inner_credential(args.inner_credential)
            )
        except ValueError as exc:
            print(f"ariane dev: {exc}", file=sys.stderr)
            return 2
        return dev_cluster.run_dev_cluster(
            args.data_dir,
            namesrv_port=args.namesrv_port,
            broker_port=args.broker_port,
            workers=args.workers,
            slaves=(
                args.slaves
                if args.slaves is not None
                else dev_cluster.SECURE_SLAVES_DEFAULT * args.secure
            ),
            broker_role=args.broker_role,
            inner=inner,
            secure=args.secure,
        )
    if args.command == "namesrv":
        return namesrv_main.run(args)
    if args.command == "broker":
        return broker_main.run(args)
    if args.command == "admin":
        return admin_cli.run(args)
    if args.command == "bench":
        return bench_cli.run(args)
    if args.command == "operator":
        return operator_main.run(args)
    return 2  # pragma: no cover - argparse rejects unknown commands first
