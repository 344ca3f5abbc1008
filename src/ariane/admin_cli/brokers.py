"""``ariane admin broker list|wipe-write-perm|add-write-perm|promote``: the broker groups of a
cluster (RocketMQ ``mqadmin brokerStatus``, ``wipeWritePerm``, ``addWritePerm``, and the
controller-less failover of ``ChangeRole``).

``broker promote`` makes a slave its group's master (epoch + 1); failover waits for the old
master's lease (``--lease-wait-s``) and refuses a slave the master's last in-sync report does
not vouch for unless ``--force`` (which may lose acknowledged messages).
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

from ariane.admin_cli import arguments, output
from ariane.client import failover as admin_failover


def add_arguments(sub: Any, common: argparse.ArgumentParser) -> None:
    """The ``broker`` noun and its verbs."""
    broker = sub.add_parser("broker", help="brokers: list, drain (wipe/add write permission)")
    verbs = broker.add_subparsers(dest="verb", required=True, metavar="VERB")
    verbs.add_parser("list", help="masters and their runtime figures", parents=[common])
    for verb in ("wipe-write-perm", "add-write-perm"):
        p = verbs.add_parser(verb, help=f"{verb} on broker groups", parents=[common])
        p.add_argument("names", nargs="+", metavar="BROKER")
    promote = verbs.add_parser(
        "promote", help="make a slave its group's master (epoch + 1)", parents=[common]
    )
    promote.add_argument("--broker-name", required=True, metavar="GROUP")
    promote.add_argument("--broker-id", required=True, type=arguments.positive, metavar="N")
    promote.add_argument("--role", choices=["SYNC_MASTER", "ASYNC_MASTER"], default="")
    promote.add_argument(
        "--lease-wait-s",
        type=float,
        default=admin_failover.LEASE_WAIT_S_DEFAULT,
        metavar="S",
        help="failover: longest wait for the old master's lease to run out (0 = refuse while it "
        f"may be held; default {admin_failover.LEASE_WAIT_S_DEFAULT:.0f})",
    )
    promote.add_argument(
        "--force",
        action="store_true",
        help="failover: promote a live slave even though the master's last in-sync report does "
        "not show it holding every acknowledged byte (or none was heard): may lose messages",
    )


async def list_brokers(client: output.Client, args: argparse.Namespace) -> output.Result:
    """``broker list`` (and the ``brokers`` view): each master's runtime figures."""
    masters = {m.broker_name: m.endpoint for m in await client.masters()}
    stats = await client.broker_stats()
    rows = [
        {
            **dataclasses.asdict(s),
            "endpoint": masters.get(s.broker_name, ""),
            "commit_log": f"{s.commit_log_min_offset}..{s.commit_log_max_offset}",
            "disk": f"{s.disk_used_ratio:.0%}",
            "started": output.iso(s.start_timestamp_ms),
        }
        for s in stats
    ]
    columns = (
        ("broker_name", "broker"),
        ("cluster", "cluster"),
        ("endpoint", "endpoint"),
        ("role", "role"),
        ("commit_log", "commit log bytes"),
        ("writable", "writable"),
        ("disk", "disk used"),
        ("messages_in_total", "in"),
        ("messages_out_total", "out"),
        ("started", "started"),
    )
    return output.Result("brokers", columns, rows)


async def _write_perm(client: output.Client, args: argparse.Namespace) -> output.Result:
    writable = args.verb == "add-write-perm"
    changed = await client.set_write_perm(args.names, writable=writable)
    rows = [{"broker_name": b, "topics_changed": n} for b, n in changed.items()]
    columns = (("broker_name", "broker"), ("topics_changed", "topics changed"))
    state = "writable" if writable else "read-only"
    return output.Result(f"topics made {state}", columns, rows)


async def _promote(client: output.Client, args: argparse.Namespace) -> output.Result:
    outcome = await admin_failover.promote(
        client.namesrv_endpoints,
        args.broker_name,
        args.broker_id,
        role=args.role,
        lease_wait_s=args.lease_wait_s,
        tls=client.tls,
        credentials=client.credentials,
        force=args.force,
    )
    columns = tuple((f.name, f.name.replace("_", " ")) for f in dataclasses.fields(outcome))
    return output.Result("promoted", columns, [dataclasses.asdict(outcome)], vertical=True)


HANDLERS: dict[tuple[str, str], output.Handler] = {
    ("broker", "list"): list_brokers,
    ("broker", "wipe-write-perm"): _write_perm,
    ("broker", "add-write-perm"): _write_perm,
    ("broker", "promote"): _promote,
}
"""(noun, verb) → the coroutine that does it."""
