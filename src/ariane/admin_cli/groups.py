"""``ariane admin group create|delete|list|lag|reset-offset``: consumer groups and their
progress (RocketMQ ``mqadmin updateSubGroup``, ``deleteSubGroup``, ``consumerProgress``,
``resetOffsetByTime``).

Invariants: ``reset-offset`` takes exactly one of ``--earliest``, ``--latest`` and
``--timestamp``; ``--allocate-queue`` is repeatable, for the CONFIG strategy.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Sequence
from typing import Any

from ariane.admin_cli import arguments, output
from ariane.client import admin_types

_GROUP_COLUMNS = (
    ("name", "group"),
    ("broker_name", "broker"),
    ("consume_orderly", "fifo"),
    ("max_delivery_attempts", "max attempts"),
    ("broadcast", "broadcast"),
    ("retry", "retry policy"),
    ("allocate_strategy", "allocate"),
)


def add_arguments(sub: Any, common: argparse.ArgumentParser) -> None:
    """The ``group`` noun and its verbs."""
    group = sub.add_parser("group", help="consumer groups: create, delete, list, lag, reset")
    verbs = group.add_subparsers(dest="verb", required=True, metavar="VERB")
    _create_arguments(
        verbs.add_parser("create", help="create (or replace) a group", parents=[common])
    )
    verbs.add_parser("delete", help="delete a group", parents=[common]).add_argument("name")
    verbs.add_parser("list", help="list groups", parents=[common])
    lag = verbs.add_parser("lag", help="lag per queue", parents=[common])
    lag.add_argument("name")
    lag.add_argument("--topic", help="only this topic")
    reset = verbs.add_parser("reset-offset", help="move a group on a topic", parents=[common])
    reset.add_argument("name")
    reset.add_argument("--topic", required=True)
    where = reset.add_mutually_exclusive_group(required=True)
    where.add_argument("--earliest", action="store_true", help="the oldest retained message")
    where.add_argument("--latest", action="store_true", help="skip everything stored")
    where.add_argument("--timestamp", type=arguments.parse_timestamp_ms, help="ms or ISO 8601")


def _create_arguments(create: argparse.ArgumentParser) -> None:
    create.add_argument("name")
    create.add_argument("--fifo", action="store_true", help="consume orderly (FIFO)")
    create.add_argument(
        "--max-delivery-attempts", type=arguments.positive, metavar="N", help="before the DLQ (17)"
    )
    create.add_argument("--broadcast", action="store_true", help="broadcast consumption")
    create.add_argument(
        "--retry-delays", type=arguments.delays, metavar="LIST", help="backoff, e.g. 1s,5s,30s,2m"
    )
    create.add_argument(
        "--allocate-strategy",
        choices=["AVG", "AVG_BY_CIRCLE", "CONSISTENT_HASH", "CONFIG"],
        default="",
        help="how FIFO consumers share the queues (AVG)",
    )
    create.add_argument(
        "--allocate-queue",
        type=arguments.queue_ref,
        action="append",
        default=[],
        metavar="TOPIC/BROKER/ID",
        help="a queue of the CONFIG strategy (repeatable)",
    )
    create.add_argument(
        "--broker", action="append", default=[], metavar="NAME", help="only this broker group"
    )


def _describe_policy(policy: admin_types.GroupRetryPolicy | None) -> str:
    if policy is None:
        return "default"
    if policy.kind is admin_types.RetryKind.EXPONENTIAL:
        return f"exponential {policy.initial_ms}ms x{policy.multiplier} <= {policy.max_ms}ms"
    return "delays " + ",".join(f"{d}ms" for d in policy.delays_ms)


def _group_rows(groups: Sequence[admin_types.GroupInfo]) -> list[dict[str, Any]]:
    return [{**dataclasses.asdict(g), "retry": _describe_policy(g.retry_policy)} for g in groups]


async def _create(client: output.Client, args: argparse.Namespace) -> output.Result:
    policy = (
        None
        if args.retry_delays is None
        else admin_types.GroupRetryPolicy(
            admin_types.RetryKind.CUSTOMIZED, delays_ms=args.retry_delays
        )
    )
    created = await client.create_group(
        args.name,
        consume_orderly=args.fifo,
        max_delivery_attempts=args.max_delivery_attempts or 0,
        broadcast=args.broadcast,
        retry_policy=policy,
        broker_names=args.broker,
        allocate_strategy=args.allocate_strategy,
        allocate_config_queues=args.allocate_queue,
    )
    return output.Result(f"group {args.name}", _GROUP_COLUMNS, _group_rows(created))


async def _delete(client: output.Client, args: argparse.Namespace) -> output.Result:
    brokers = await client.delete_group(args.name)
    rows = [{"group": args.name, "broker_name": b, "deleted": True} for b in brokers]
    columns = (("group", "group"), ("broker_name", "broker"), ("deleted", "deleted"))
    return output.Result(f"group {args.name} deleted", columns, rows)


async def list_groups(client: output.Client, args: argparse.Namespace) -> output.Result:
    """``group list`` (and the ``groups`` view): every group per broker group."""
    found = await client.list_groups()
    return output.Result(
        "consumer groups", _GROUP_COLUMNS, _group_rows(found), note=f"{len(found)} rows"
    )


async def _lag(client: output.Client, args: argparse.Namespace) -> output.Result:
    queues = await client.consumer_lag(args.name, args.topic)
    columns = (
        ("topic", "topic"),
        ("broker_name", "broker"),
        ("queue_id", "queue"),
        ("broker_offset", "broker offset"),
        ("consumer_offset", "consumer offset"),
        ("lag", "lag"),
        ("inflight", "in flight"),
    )
    note = f"total lag {sum(q.lag for q in queues)}, in flight {sum(q.inflight for q in queues)}"
    return output.Result(f"lag of {args.name}", columns, output.rows(queues), note=note)


async def _reset(client: output.Client, args: argparse.Namespace) -> output.Result:
    if args.earliest:
        target = admin_types.ResetTarget.EARLIEST
    elif args.latest:
        target = admin_types.ResetTarget.LATEST
    else:
        target = admin_types.ResetTarget.TIMESTAMP
    offsets = await client.reset_offset(
        args.name, args.topic, target, timestamp_ms=args.timestamp or 0
    )
    columns = (
        ("topic", "topic"),
        ("broker_name", "broker"),
        ("queue_id", "queue"),
        ("offset", "new offset"),
    )
    return output.Result(f"{args.name} reset on {args.topic}", columns, output.rows(offsets))


HANDLERS: dict[tuple[str, str], output.Handler] = {
    ("group", "create"): _create,
    ("group", "delete"): _delete,
    ("group", "list"): list_groups,
    ("group", "lag"): _lag,
    ("group", "reset-offset"): _reset,
}
"""(noun, verb) → the coroutine that does it."""
