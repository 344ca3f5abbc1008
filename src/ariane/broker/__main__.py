"""``python -m ariane.broker`` / ``ariane broker``: run one broker until SIGTERM/SIGINT.

Settings come from ``--config FILE`` (TOML, see ``broker.settings``) with flags overriding it.
Logging is configured here and nowhere else. Exits 0 after a clean shutdown, 2 for bad
arguments or settings (the message says which and how to fix it), 1 when the store cannot be
opened or the port cannot be bound.
"""

from __future__ import annotations

import argparse
import dataclasses
import pathlib
import sys
import tomllib
from collections.abc import Sequence
from typing import Any

from ariane.broker import server
from ariane.broker import settings as broker_settings
from ariane.common import event_loop, ids, process
from ariane.store import settings as store_settings
from ariane.store.ha import settings as ha_settings


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The broker's command-line options (shared with ``ariane broker``)."""
    parser.add_argument("--config", type=pathlib.Path, help="TOML settings file")
    parser.add_argument(
        "--auth-config",
        type=pathlib.Path,
        metavar="FILE",
        help="TOML file whose [auth] table replaces the config's (keys kept out of --config: "
        "the operator mounts it from a Secret)",
    )
    parser.add_argument(
        "--namesrv",
        action="append",
        metavar="HOST:PORT",
        help="name server to register with (repeatable; default 127.0.0.1:9876)",
    )
    parser.add_argument(
        "--listen",
        metavar="HOST:PORT",
        help=f"gRPC listen address (default {broker_settings.DEFAULT_LISTEN})",
    )
    parser.add_argument(
        "--remoting-listen",
        metavar="HOST:PORT",
        help="classic protocol (Remoting) listen address; port 0 picks one, '' turns it off "
        f"(default {broker_settings.DEFAULT_REMOTING_LISTEN})",
    )
    parser.add_argument(
        "--advertise",
        metavar="HOST:PORT",
        help="endpoint clients are told to dial (default: the listen address)",
    )
    parser.add_argument(
        "--metrics-listen",
        metavar="HOST:PORT",
        help="serve Prometheus /metrics there (off by default; pods use 0.0.0.0:5557)",
    )
    parser.add_argument("--store-dir", type=pathlib.Path, help="store root directory")
    parser.add_argument(
        "--workers",
        type=int,
        metavar="N",
        help="front-end worker processes serving gRPC (0 = none; default: the CPU count)",
    )
    parser.add_argument("--broker-name", help="broker group name (default broker-a)")
    parser.add_argument("--broker-id", type=int, help="0 = master, >0 = slave")
    parser.add_argument("--cluster", help="cluster name (default DefaultCluster)")
    parser.add_argument(
        "--flush-disk-type",
        choices=[t.value for t in store_settings.FlushDiskType],
        help="ASYNC_FLUSH (default) or SYNC_FLUSH",
    )
    _add_ha_arguments(parser)
    parser.add_argument(
        "--event-loop",
        choices=[e.value for e in event_loop.EventLoop],
        help="asyncio event loop: asyncio's, uvloop if installed (auto), or uvloop (required); "
        f"default ${event_loop.ENV_VAR} or asyncio",
    )
    parser.add_argument(
        "--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"]
    )


def _add_ha_arguments(parser: argparse.ArgumentParser) -> None:
    """Role, HA addresses and the operator's pod ordinals (RocketMQ ``brokerRole``, HA port)."""
    parser.add_argument(
        "--broker-role",
        choices=[r.value for r in ha_settings.BrokerRole],
        help="ASYNC_MASTER, SYNC_MASTER or SLAVE (opens the HA port; default: a lone master)",
    )
    parser.add_argument(
        "--ha-listen",
        metavar="HOST:PORT",
        help=f"HA (replication) port to bind (default 127.0.0.1:{ha_settings.DEFAULT_HA_PORT})",
    )
    parser.add_argument(
        "--ha-advertise",
        metavar="HOST:PORT",
        help="HA address registered for slaves to dial (RocketMQ brokerIP2; default: bound)",
    )
    parser.add_argument(
        "--master-ha",
        metavar="HOST:PORT",
        help="a slave's master HA address (default: ask the name server)",
    )
    parser.add_argument(
        "--lease-ms",
        type=int,
        metavar="MS",
        help="a replicated master's write lease through the name servers, ms (default 10000; "
        "0 = none)",
    )
    parser.add_argument(
        "--slave-read-enable",
        action="store_true",
        default=None,
        help="classic consumers may read from slaves (RocketMQ slaveReadEnable; default off)",
    )
    parser.add_argument(
        "--pod-ordinal",
        type=int,
        metavar="N",
        help="this pod's StatefulSet ordinal (operator pods; with --master-ordinal, sets "
        "--broker-id and the role)",
    )
    parser.add_argument(
        "--master-ordinal",
        type=int,
        metavar="M",
        help="the ordinal of the group's master pod (from the operator's roles ConfigMap)",
    )


def role_by_ordinal(
    pod_ordinal: int, master_ordinal: int, master_role: ha_settings.BrokerRole
) -> tuple[int, ha_settings.BrokerRole]:
    """A pod's broker id and role from its ordinal and the group's master ordinal (pure).

    The master pod is broker id 0 with ``master_role``; the others are SLAVEs keeping their
    ordinal as id, except ordinal 0, which takes the master's ordinal: the ids a promotion
    leaves (the promoted slave's id goes to the demoted master, as ``ChangeRole`` does).

    Raises:
        ValueError: a negative ordinal, or ``master_role`` is SLAVE.
    """
    if pod_ordinal < 0 or master_ordinal < 0 or not master_role.is_master:
        raise ValueError(
            f"--pod-ordinal {pod_ordinal} / --master-ordinal {master_ordinal} must be >= 0 "
            f"and the group's role a master role, not {master_role.value}"
        )
    if pod_ordinal == master_ordinal:
        return 0, master_role
    return (pod_ordinal or master_ordinal), ha_settings.BrokerRole.SLAVE


def settings_from_args(args: argparse.Namespace) -> broker_settings.BrokerSettings:
    """Build settings from the config file and flags.

    Raises:
        ValueError: a setting is unknown or out of range (the message names it), or a SLAVE
            has broker id 0.
        OSError: the config file cannot be read.
    """
    overrides: dict[str, Any] = {
        "namesrv_addrs": tuple(args.namesrv) if args.namesrv else None,
        "listen": args.listen,
        "workers": args.workers,
        "advertised_endpoint": args.advertise,
        "metrics_listen": args.metrics_listen,
        "remoting_listen": args.remoting_listen,
        "store_dir": args.store_dir,
        "broker_name": ids.BrokerName(args.broker_name) if args.broker_name else None,
        "broker_id": args.broker_id,
        "cluster": args.cluster,
        "slave_read_enable": args.slave_read_enable,
    }
    raw = tomllib.loads(args.config.read_text()) if args.config else {}
    if args.auth_config:
        raw = {**raw, "auth": tomllib.loads(args.auth_config.read_text()).get("auth", {})}
    settings = broker_settings.from_mapping(raw, **overrides)
    if args.flush_disk_type:
        store = dataclasses.replace(
            settings.store, flush_disk_type=store_settings.FlushDiskType(args.flush_disk_type)
        )
        settings = dataclasses.replace(settings, store=store)
    ha_flags = {
        "broker_role": ha_settings.BrokerRole(args.broker_role) if args.broker_role else None,
        "ha_listen": args.ha_listen,
        "ha_advertise": args.ha_advertise,
        "master_ha": args.master_ha,
        "lease_ms": args.lease_ms,
    }
    ha_given = {k: v for k, v in ha_flags.items() if v is not None}
    if ha_given:
        settings = dataclasses.replace(settings, ha=dataclasses.replace(settings.ha, **ha_given))
    if args.pod_ordinal is not None or args.master_ordinal is not None:
        if args.pod_ordinal is None or args.master_ordinal is None:
            raise ValueError("--pod-ordinal and --master-ordinal go together")
        broker_id, role = role_by_ordinal(args.pod_ordinal, args.master_ordinal, settings.ha.role)
        lone = role.is_master and settings.ha.broker_role is None  # no HA port for a lone master
        ha = dataclasses.replace(settings.ha, broker_role=None if lone else role)
        settings = dataclasses.replace(settings, broker_id=ids.BrokerId(broker_id), ha=ha)
    if settings.ha.broker_role is ha_settings.BrokerRole.SLAVE and (
        settings.broker_id == ids.MASTER_BROKER_ID
    ):
        # RocketMQ's BrokerStartup exits too ("Slave's brokerId must be > 0"): a slave with id 0
        # would register as its group's master.
        raise ValueError(
            "a SLAVE needs a broker id of 1 or more (--broker-id N, or broker_id in the config):"
            " id 0 names the group's master"
        )
    return settings


def run(args: argparse.Namespace) -> int:
    """Run a broker from parsed arguments; returns the exit status."""
    return process.run_server(
        "ariane broker",
        make_settings=lambda: settings_from_args(args),
        serve=lambda settings, stop: server.BrokerServer(settings).serve(stop),
        log_level=args.log_level,
        event_loop=event_loop.EventLoop(args.event_loop) if args.event_loop else None,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` and run; returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m ariane.broker", description=__doc__)
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
