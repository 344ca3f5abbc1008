"""``python -m ariane.namesrv`` / ``ariane namesrv``: run one name server until SIGTERM/SIGINT.

Logging is configured here and nowhere else. Refuses to run under ``python -O``, because
assertions are part of Ariane's checks. Exits 0 after a clean shutdown, 2 for bad arguments and
1 when the listen address cannot be bound.
"""

from __future__ import annotations

import argparse
import pathlib
import sys
from collections.abc import Sequence

from ariane.common import process
from ariane.namesrv import config, server


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The name server's command-line options (shared with ``ariane namesrv``)."""
    parser.add_argument(
        "--config",
        type=pathlib.Path,
        metavar="FILE",
        help="TOML settings file (see ariane.namesrv.config; [auth] holds the inner credential "
        "brokers must sign registrations with); flags win over it",
    )
    parser.add_argument(
        "--listen",
        default=None,
        metavar="HOST:PORT",
        help=f"gRPC and Remoting listen address (default {server.DEFAULT_LISTEN}; use "
        "0.0.0.0:9876 in a pod)",
    )
    parser.add_argument(
        "--remoting-listen",
        metavar="HOST:PORT",
        help="serve Remoting (classic RocketMQ clients, mqadmin) there instead of on --listen's "
        "port (default: shared with --listen; the first byte tells the protocols apart)",
        default=None,
    )
    parser.add_argument(
        "--metrics-listen",
        default=None,
        metavar="HOST:PORT",
        help="serve Prometheus /metrics there (off by default; pods use 0.0.0.0:5557)",
    )
    parser.add_argument(
        "--log-level",
        default="INFO",
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="log level (default INFO)",
    )


def run(args: argparse.Namespace) -> int:
    """Run a name server from parsed arguments; returns the exit status."""
    return process.run_server(
        "ariane namesrv",
        make_settings=lambda: config.load(
            args.config,
            listen=args.listen,
            remoting_listen=args.remoting_listen,
            metrics_listen=args.metrics_listen,
        ),
        serve=lambda settings, stop: server.NameServer(settings).serve(stop),
        log_level=args.log_level,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` and run; returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m ariane.namesrv", description=__doc__)
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
