"""``ariane admin topic create|update|delete|list|lite``: topics on every broker group (RocketMQ
``mqadmin updateTopic``, ``deleteTopic``, ``topicList``), and the lite topics under a LITE topic
(``ListLiteTopics``: name, queue, latest offset and store time).

``topic create`` returns once every name server that answers routes the topic to the broker
groups it was created on (``--route-wait-s``, default 24 s, RocketMQ's broker registration
deadline; exit 1 with REQUEST_TIMEOUT after it): RocketMQ's broker registers a new topic before
it answers ``updateTopic``, so a producer started right after ``mqadmin updateTopic`` finds it.

Invariants: ``--type`` takes ``arguments.MESSAGE_TYPES``; ``topic update`` refuses (exit 2) a
call that changes nothing.
"""

from __future__ import annotations

import argparse
from typing import Any

from ariane.admin_cli import arguments, output
from ariane.client import admin
from ariane.common import message

_TOPIC_COLUMNS = (
    ("name", "topic"),
    ("broker_name", "broker"),
    ("read_queue_nums", "read queues"),
    ("write_queue_nums", "write queues"),
    ("perm", "perm"),
    ("message_type", "type"),
    ("retention_hours", "retention h (0 = default)"),
)


def add_arguments(sub: Any, common: argparse.ArgumentParser) -> None:
    """The ``topic`` noun and its verbs."""
    topic = sub.add_parser("topic", help="create, update, delete and list topics")
    verbs = topic.add_subparsers(dest="verb", required=True, metavar="VERB")
    for verb, text in (("create", "create (or replace) a topic"), ("update", "change a topic")):
        p = verbs.add_parser(verb, help=text, parents=[common])
        p.add_argument("name")
        p.add_argument(
            "--queues",
            type=arguments.positive,
            metavar="N",
            help="read and write queues per broker group",
        )
        p.add_argument(
            "--read-queues",
            type=arguments.positive,
            metavar="N",
            help="read queues (default: --queues)",
        )
        p.add_argument(
            "--write-queues",
            type=arguments.positive,
            metavar="N",
            help="write queues (default: --queues)",
        )
        p.add_argument(
            "--type",
            "--message-type",
            dest="type",
            type=arguments.message_type,
            metavar="TYPE",
            help=" | ".join(arguments.MESSAGE_TYPES),
        )
        p.add_argument("--perm", type=int, choices=[2, 4, 6], help="WRITE 2, READ 4, both 6")
        p.add_argument("--retention-hours", type=int, metavar="H", help="-1 = the broker default")
        if verb == "create":
            _create_arguments(p)
    verbs.add_parser("delete", help="delete a topic", parents=[common]).add_argument("name")
    listing = verbs.add_parser("list", help="list topics", parents=[common])
    listing.add_argument("--all", action="store_true", help="also system, retry and DLQ topics")
    lite = verbs.add_parser(
        "lite", help="list the lite topics under a LITE topic", parents=[common]
    )
    lite.add_argument("parent")
    lite.add_argument(
        "--limit", type=arguments.positive, default=0, metavar="N", help="rows per broker group"
    )


def _create_arguments(create: argparse.ArgumentParser) -> None:
    create.add_argument(
        "--broker",
        action="append",
        default=[],
        metavar="NAME",
        help="only this broker group",
    )
    create.add_argument(
        "--route-wait-s",
        type=arguments.seconds,
        default=admin.ROUTE_WAIT_S_DEFAULT,
        metavar="S",
        help="return once the name servers route the topic, waiting at most S seconds "
        f"(default {admin.ROUTE_WAIT_S_DEFAULT:g}; 0: do not wait)",
    )


async def _create(client: output.Client, args: argparse.Namespace) -> output.Result:
    created = await client.create_topic(
        args.name,
        read_queue_nums=args.read_queues or args.queues or 0,
        write_queue_nums=args.write_queues or args.queues or 0,
        message_type=args.type or message.MessageType.NORMAL,
        perm=args.perm or 0,
        retention_hours=args.retention_hours or 0,
        broker_names=args.broker,
        route_wait_s=args.route_wait_s,
    )
    return output.Result(f"topic {args.name}", _TOPIC_COLUMNS, output.rows(created))


async def _update(client: output.Client, args: argparse.Namespace) -> output.Result:
    fields = (args.queues, args.read_queues, args.write_queues, args.type, args.perm)
    if all(f is None for f in fields) and args.retention_hours is None:
        raise arguments.UsageError(
            "nothing to change: give --queues, --read-queues, --write-queues, --type, --perm "
            "or --retention-hours"
        )
    if args.retention_hours == 0:
        raise arguments.UsageError(
            "--retention-hours 0 changes nothing; use -1 for the broker default"
        )
    updated = await client.update_topic(
        args.name,
        read_queue_nums=args.read_queues or args.queues or 0,
        write_queue_nums=args.write_queues or args.queues or 0,
        message_type=args.type,
        perm=args.perm or 0,
        retention_hours=args.retention_hours or 0,
    )
    return output.Result(f"topic {args.name}", _TOPIC_COLUMNS, output.rows(updated))


async def _delete(client: output.Client, args: argparse.Namespace) -> output.Result:
    brokers = await client.delete_topic(args.name)
    rows = [{"topic": args.name, "broker_name": b, "deleted": True} for b in brokers]
    columns = (("topic", "topic"), ("broker_name", "broker"), ("deleted", "deleted"))
    return output.Result(f"topic {args.name} deleted", columns, rows)


async def list_topics(client: output.Client, args: argparse.Namespace) -> output.Result:
    """``topic list`` (and the ``topics`` view): every topic per broker group (``--all``: with
    system, retry and DLQ topics)."""
    found = await client.list_topics(include_system=args.all)
    return output.Result("topics", _TOPIC_COLUMNS, output.rows(found), note=f"{len(found)} rows")


_LITE_COLUMNS = (
    ("name", "lite topic"),
    ("broker_name", "broker"),
    ("queue_id", "queue"),
    ("last_queue_offset", "last offset"),
    ("last_stored", "last stored"),
)


async def _lite(client: output.Client, args: argparse.Namespace) -> output.Result:
    found = await client.list_lite_topics(args.parent, limit=args.limit)
    rows = [
        {**r, "last_stored": output.iso(r["last_stored_timestamp_ms"])} for r in output.rows(found)
    ]
    return output.Result(
        f"lite topics of {args.parent}", _LITE_COLUMNS, rows, note=f"{len(found)} rows"
    )


HANDLERS: dict[tuple[str, str], output.Handler] = {
    ("topic", "create"): _create,
    ("topic", "update"): _update,
    ("topic", "delete"): _delete,
    ("topic", "list"): list_topics,
    ("topic", "lite"): _lite,
}
"""(noun, verb) → the coroutine that does it."""
