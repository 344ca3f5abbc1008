"""``ariane admin``: topics, groups, lag, offsets, messages and brokers of a cluster.

The command knows only the name servers (``--endpoints HOST:PORT[;HOST:PORT]`` or the
``NAMESRV_ADDR`` environment variable, as RocketMQ's ``mqadmin -n``) and reaches every broker
through ``ariane.client.AdminClient``::

    ariane admin --endpoints 127.0.0.1:9876 topic create orders --queues 8 --type FIFO
    ariane admin topic update|delete NAME …    topic list [--all]
    ariane admin group create billing [--fifo] [--max-delivery-attempts N]
        [--allocate-strategy AVG|AVG_BY_CIRCLE|CONSISTENT_HASH|CONFIG] [--allocate-queue T/B/ID]
    ariane admin group list|delete|lag|reset-offset …
    ariane admin message get --topic orders --id ID | --key KEY
    ariane admin dlq list GROUP | dlq resend GROUP --id ID | --all
    ariane admin broker list | wipe-write-perm NAME… | add-write-perm NAME…
    ariane admin broker promote --broker-name G --broker-id N [--role SYNC_MASTER]
                                [--lease-wait-s S]  (failover waits for the old master's lease)
                                [--force]  (failover: promote a slave the master's last in-sync
                                            report does not vouch for: may lose acked messages)
    ariane admin cluster | brokers | topics | groups | lag     (one-word views for people)
    ariane admin top [--interval-s 2] [--iterations N]       (live rates and lag)
    ariane admin user create|update|delete|get|list …   acl create|update|delete|get|list …
                                                  (ACL 2.0, ``admin_auth_cli``; mqadmin letters)

``topic create`` returns once every name server that answers routes the topic to the broker
groups it was created on (``--route-wait-s``, default 24 s, RocketMQ's broker registration
deadline; exit 1 with REQUEST_TIMEOUT after it): RocketMQ's broker registers a new topic before
it answers ``updateTopic``, so a producer started right after ``mqadmin updateTopic`` finds it.

Brokers with ACL 2.0 on need signed calls: ``--access-key``/``--secret-key`` (or
``ARIANE_ACCESS_KEY``/``ARIANE_SECRET_KEY``) on any command. A cluster serving TLS needs
``--tls --ca-file PATH`` (or ``ARIANE_TLS=1``, ``ARIANE_CA_FILE``): name servers and brokers are
verified against that CA (without ``--ca-file``: the system's roots); a plaintext call to an
``enforcing`` port fails as unreachable, with that fix printed.

Output is a ``rich`` table, or JSON with ``--json`` (for scripts). Exit status: 0 done; 1 a
broker or name server refused (the RocketMQ code name is printed with what to fix) or a broker
did not answer; 2 a usage error; 3 no name server answered.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import dataclasses
import datetime
import enum
import json
import os
import re
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from rich import console as rich_console
from rich import table as rich_table

from ariane import admin_auth_cli, admin_top
from ariane.client import admin, admin_types, consumer, producer, session
from ariane.client import credentials as client_credentials
from ariane.client import failover as admin_failover
from ariane.common import errors, message
from ariane.grpcwire import tls as grpc_tls

EXIT_REFUSED = 1
EXIT_USAGE = 2
EXIT_NAMESRV_UNREACHABLE = 3

TLS_ENV = "ARIANE_TLS"
CA_FILE_ENV = "ARIANE_CA_FILE"
"""Environment variables for ``--tls`` (``1``/``true``/``yes``) and ``--ca-file``."""

TLS_HINT = f"if the cluster serves TLS, pass --tls --ca-file PATH (or {TLS_ENV}=1, {CA_FILE_ENV})"
"""Printed with an unreachable name server or broker when the call was plaintext."""

ENDPOINTS_ENV = "NAMESRV_ADDR"
"""Environment variable with the name servers when ``--endpoints`` is absent (RocketMQ's)."""

BODY_PREVIEW_BYTES = 512
"""Body bytes ``message get`` shows in its table."""

_TYPES = [kind.value for kind in message.MessageType]
_DURATION = re.compile(r"^(\d+)(ms|s|m|h)$")
_UNIT_MS = {"ms": 1, "s": 1_000, "m": 60_000, "h": 3_600_000}

HINTS: dict[errors.Code, str] = {
    errors.Code.TOPIC_NOT_FOUND: (
        "list topics with `ariane admin topic list`, or create it with "
        "`ariane admin topic create NAME`"
    ),
    errors.Code.ILLEGAL_TOPIC: (
        "topic names are 1-127 characters of letters, digits, '-', '_' and '%' (system names "
        "are reserved); queues 1..1024; perm 2, 4 or 6; retention hours >= 1"
    ),
    errors.Code.CONSUMER_GROUP_NOT_FOUND: "list groups with `ariane admin group list`",
    errors.Code.ILLEGAL_CONSUMER_GROUP: (
        "group names are 1-255 characters of letters, digits, '-', '_' and '%'; "
        "--max-delivery-attempts is 1..1000"
    ),
    errors.Code.MESSAGE_NOT_FOUND: (
        "check the id or key and --topic; retention may have deleted the message"
    ),
    errors.Code.TOO_MANY_REQUESTS: "a broker limit was reached; retry later or raise the limit",
    errors.Code.UNSUPPORTED: "this broker does not support it yet",
    errors.Code.FORBIDDEN: (
        "if the message names a user and a resource, grant it: `ariane admin acl create "
        "-s User:NAME -r RESOURCE -a ACTION -d Allow` (as a Super user); otherwise send changes "
        "to the master and check the topic's permission"
    ),
    errors.Code.UNAUTHORIZED: (
        "the brokers enforce ACL 2.0: pass --access-key and --secret-key of one of their users "
        f"(or set {client_credentials.ACCESS_KEY_ENV} and {client_credentials.SECRET_KEY_ENV}); "
        "check the secret key and that the user exists and is enabled"
    ),
}
"""What to do about a refusal, by RocketMQ code (the server's message says what was wrong)."""


class UsageError(Exception):
    """Arguments that parse but make no sense together (exit 2)."""


# -- arguments ---------------------------------------------------------------------------------


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not >= 1")
    return value


def _seconds(text: str) -> float:
    value = float(text)
    if not 0 <= value <= 600:
        raise argparse.ArgumentTypeError(f"{value} is not 0..600 seconds")
    return value


def _message_type(text: str) -> message.MessageType:
    try:
        return message.MessageType(text.upper())
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not one of {', '.join(_TYPES)}") from None


def parse_duration_ms(text: str) -> int:
    """``250ms``, ``5s``, ``1m`` or ``2h`` in ms.

    Raises:
        argparse.ArgumentTypeError: for anything else.
    """
    match = _DURATION.match(text.strip())
    if match is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration like 250ms, 5s, 1m or 2h")
    return int(match.group(1)) * _UNIT_MS[match.group(2)]


def _delays(text: str) -> tuple[int, ...]:
    return tuple(parse_duration_ms(part) for part in text.split(",") if part.strip())


def _queue_ref(text: str) -> tuple[str, str, int]:
    """``TOPIC/BROKER/ID`` → (topic, broker name, queue id)."""
    topic, _, rest = text.partition("/")
    broker, _, queue_id = rest.partition("/")
    if not topic or not broker or not queue_id.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not TOPIC/BROKER/QUEUE_ID")
    return topic, broker, int(queue_id)


def parse_timestamp_ms(text: str) -> int:
    """Ms since the epoch from an integer or ISO 8601 (no zone = local time).

    Raises:
        argparse.ArgumentTypeError: for anything else.
    """
    if text.strip().isdigit():
        return int(text)
    try:
        when = datetime.datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is neither ms since the epoch nor ISO 8601 (2024-05-01T12:00:00Z)"
        ) from None
    if when.tzinfo is None:
        when = when.astimezone()
    return int(when.timestamp() * 1000)


def _add_common(parser: argparse.ArgumentParser, *, suppress: bool) -> None:
    """``--endpoints``, ``--json`` and ``--timeout``: on ``ariane admin`` with their defaults,
    and on every sub-command with suppressed defaults, so they work before or after it."""

    def default(value: object) -> object:
        return argparse.SUPPRESS if suppress else value

    parser.add_argument(
        "--endpoints",
        default=default(os.environ.get(ENDPOINTS_ENV, "")),
        metavar="HOST:PORT[;HOST:PORT]",
        help=f"name servers (default: ${ENDPOINTS_ENV})",
    )
    parser.add_argument(
        "--json", action="store_true", default=default(False), help="print JSON for scripts"
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=default(admin.DEFAULT_TIMEOUT_S),
        metavar="S",
        help=f"deadline of each call in seconds (default {admin.DEFAULT_TIMEOUT_S:g})",
    )
    parser.add_argument(
        "--access-key",
        default=default(os.environ.get(client_credentials.ACCESS_KEY_ENV, "")),
        metavar="AK",
        help=f"sign calls as this ACL 2.0 user (default: ${client_credentials.ACCESS_KEY_ENV})",
    )
    parser.add_argument(
        "--secret-key",
        default=default(os.environ.get(client_credentials.SECRET_KEY_ENV, "")),
        metavar="SK",
        help=(
            f"that user's secret key (default: ${client_credentials.SECRET_KEY_ENV}); "
            "write --secret-key=SK when it starts with '-'"
        ),
    )
    parser.add_argument(
        "--tls",
        action="store_true",
        default=default(os.environ.get(TLS_ENV, "").lower() in ("1", "true", "yes")),
        help=f"speak TLS to name servers and brokers (default: ${TLS_ENV})",
    )
    parser.add_argument(
        "--ca-file",
        default=default(os.environ.get(CA_FILE_ENV, "")),
        metavar="PATH",
        help=f"PEM CA that signed the servers' certificates, with --tls (default: "
        f"${CA_FILE_ENV}; none: the system's roots)",
    )


def _topic_arguments(sub: Any, common: argparse.ArgumentParser) -> None:
    topic = sub.add_parser("topic", help="create, update, delete and list topics")
    verbs = topic.add_subparsers(dest="verb", required=True, metavar="VERB")
    for verb, text in (("create", "create (or replace) a topic"), ("update", "change a topic")):
        p = verbs.add_parser(verb, help=text, parents=[common])
        p.add_argument("name")
        p.add_argument(
            "--queues", type=_positive, metavar="N", help="read and write queues per broker group"
        )
        p.add_argument(
            "--read-queues", type=_positive, metavar="N", help="read queues (default: --queues)"
        )
        p.add_argument(
            "--write-queues", type=_positive, metavar="N", help="write queues (default: --queues)"
        )
        p.add_argument(
            "--type",
            "--message-type",
            dest="type",
            type=_message_type,
            metavar="TYPE",
            help=" | ".join(_TYPES),
        )
        p.add_argument("--perm", type=int, choices=[2, 4, 6], help="WRITE 2, READ 4, both 6")
        p.add_argument("--retention-hours", type=int, metavar="H", help="-1 = the broker default")
        if verb == "create":
            p.add_argument(
                "--broker",
                action="append",
                default=[],
                metavar="NAME",
                help="only this broker group",
            )
            p.add_argument(
                "--route-wait-s",
                type=_seconds,
                default=admin.ROUTE_WAIT_S_DEFAULT,
                metavar="S",
                help="return once the name servers route the topic, waiting at most S seconds "
                f"(default {admin.ROUTE_WAIT_S_DEFAULT:g}; 0: do not wait)",
            )
    verbs.add_parser("delete", help="delete a topic", parents=[common]).add_argument("name")
    listing = verbs.add_parser("list", help="list topics", parents=[common])
    listing.add_argument("--all", action="store_true", help="also system, retry and DLQ topics")


def _group_arguments(sub: Any, common: argparse.ArgumentParser) -> None:
    group = sub.add_parser("group", help="consumer groups: create, delete, list, lag, reset")
    verbs = group.add_subparsers(dest="verb", required=True, metavar="VERB")
    create = verbs.add_parser("create", help="create (or replace) a group", parents=[common])
    create.add_argument("name")
    create.add_argument("--fifo", action="store_true", help="consume orderly (FIFO)")
    create.add_argument(
        "--max-delivery-attempts", type=_positive, metavar="N", help="before the DLQ (17)"
    )
    create.add_argument("--broadcast", action="store_true", help="broadcast consumption")
    create.add_argument(
        "--retry-delays", type=_delays, metavar="LIST", help="backoff, e.g. 1s,5s,30s,2m"
    )
    create.add_argument(
        "--allocate-strategy",
        choices=["AVG", "AVG_BY_CIRCLE", "CONSISTENT_HASH", "CONFIG"],
        default="",
        help="how FIFO consumers share the queues (AVG)",
    )
    create.add_argument(
        "--allocate-queue",
        type=_queue_ref,
        action="append",
        default=[],
        metavar="TOPIC/BROKER/ID",
        help="a queue of the CONFIG strategy (repeatable)",
    )
    create.add_argument(
        "--broker", action="append", default=[], metavar="NAME", help="only this broker group"
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
    where.add_argument("--timestamp", type=parse_timestamp_ms, help="ms or ISO 8601")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``ariane admin`` options and sub-commands."""
    _add_common(parser, suppress=False)
    common = argparse.ArgumentParser(add_help=False)
    _add_common(common, suppress=True)
    sub = parser.add_subparsers(dest="noun", required=True, metavar="NOUN")
    _topic_arguments(sub, common)
    _group_arguments(sub, common)
    admin_auth_cli.add_arguments(sub, common)
    msg = sub.add_parser("message", help="look up stored messages")
    verbs = msg.add_subparsers(dest="verb", required=True, metavar="VERB")
    get = verbs.add_parser("get", help="by message id or key", parents=[common])
    which = get.add_mutually_exclusive_group(required=True)
    which.add_argument("--id", help="client message id (with --topic) or offset message id")
    which.add_argument("--key", help="a message key (with --topic)")
    get.add_argument("--topic", help="the topic (needed for --key and client ids)")
    get.add_argument(
        "--max", type=_positive, metavar="N", default=None, help="most messages per broker"
    )
    trip = verbs.add_parser(
        "round-trip",
        help="send one message and receive it back (a smoke test; helm test uses it)",
        parents=[common],
    )
    trip.add_argument("--topic", required=True, help="an existing NORMAL or MIXED topic")
    trip.add_argument("--group", default="ariane-round-trip", help="consumer group to receive with")
    trip.add_argument(
        "--wait-s", type=_positive, default=30, metavar="S", help="how long to wait for it"
    )
    _dlq_arguments(sub, common)
    _overview_arguments(sub, common)
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
    promote.add_argument("--broker-id", required=True, type=_positive, metavar="N")
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


def _dlq_arguments(sub: Any, common: argparse.ArgumentParser) -> None:
    dlq = sub.add_parser("dlq", help="dead letters of a group (%%DLQ%%GROUP): list, resend")
    verbs = dlq.add_subparsers(dest="verb", required=True, metavar="VERB")
    listing = verbs.add_parser("list", help="the group's dead letters", parents=[common])
    listing.add_argument("group")
    listing.add_argument("--max", type=_positive, metavar="N", help="most letters per broker")
    resend = verbs.add_parser(
        "resend", help="write dead letters back to their origin topics", parents=[common]
    )
    resend.add_argument("group")
    which = resend.add_mutually_exclusive_group(required=True)
    which.add_argument("--id", action="append", metavar="ID", help="a letter's message id")
    which.add_argument("--all", action="store_true", help="every letter of the group")


def _overview_arguments(sub: Any, common: argparse.ArgumentParser) -> None:
    """The one-word views for people: ``cluster``, ``brokers``, ``topics``, ``groups``,
    ``lag`` and the live ``top``."""
    views = {
        "cluster": "each cluster: broker groups, topics, groups, traffic, disk",
        "brokers": "masters and their runtime figures (as `broker list`)",
        "topics": "topics (as `topic list`)",
        "groups": "consumer groups (as `group list`)",
        "lag": "every group's lag, summed per topic",
        "top": "live per-topic in/out rates and per-group lag, refreshing",
    }
    for noun, text in views.items():
        view = sub.add_parser(noun, help=text, parents=[common])
        view.set_defaults(verb="show")
        if noun == "topics":
            view.add_argument("--all", action="store_true", help="include system topics")
    top = sub.choices["top"]
    top.add_argument(
        "--interval-s", type=float, default=admin_top.TOP_INTERVAL_S_DEFAULT, metavar="S",
        help="seconds between refreshes",
    )  # fmt: skip
    top.add_argument(
        "--iterations", type=_positive, default=admin_top.TOP_ITERATIONS_DEFAULT, metavar="N",
        help="refreshes before exiting (default: an hour's worth)",
    )  # fmt: skip


# -- results -----------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class Result:
    """What a sub-command prints: rows as a table (or JSON), and a closing note.

    Attributes:
        title: the table title.
        columns: (row key, column header) in display order.
        rows: one mapping per row; ``--json`` prints the list as is.
        note: a sentence printed after the table (not in JSON).
        vertical: print each row as its own field/value table (long records).
    """

    title: str
    columns: Sequence[tuple[str, str]]
    rows: Sequence[dict[str, Any]]
    note: str = ""
    vertical: bool = False


def _jsonable(value: Any) -> Any:
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value


def _cell(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, enum.Enum):
        return str(value.value)
    if value is None or value == "":
        return "-"
    if isinstance(value, dict):
        return "\n".join(f"{k}={v}" for k, v in sorted(value.items())) or "-"
    if isinstance(value, list | tuple):
        return " ".join(str(v) for v in value) or "-"
    return str(value)


def render(result: Result, *, as_json: bool, out: rich_console.Console) -> None:
    """Print ``result`` as tables (or JSON) on ``out``."""
    if as_json:
        out.print_json(json.dumps(_jsonable(list(result.rows))))
        return
    if result.vertical:
        for index, row in enumerate(result.rows, 1):
            table = rich_table.Table(title=f"{result.title} {index}/{len(result.rows)}")
            table.add_column("field", style="bold")
            table.add_column("value", overflow="fold")
            for key, header in result.columns:
                table.add_row(header, _cell(row.get(key)))
            out.print(table)
    else:
        table = rich_table.Table(title=result.title)
        for _, header in result.columns:
            table.add_column(header)
        for row in result.rows:
            table.add_row(*(_cell(row.get(key)) for key, _ in result.columns))
        out.print(table)
    if result.note:
        out.print(result.note)


def _iso(ms: int) -> str:
    when = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)
    return when.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _describe_policy(policy: admin_types.GroupRetryPolicy | None) -> str:
    if policy is None:
        return "default"
    if policy.kind is admin_types.RetryKind.EXPONENTIAL:
        return f"exponential {policy.initial_ms}ms x{policy.multiplier} <= {policy.max_ms}ms"
    return "delays " + ",".join(f"{d}ms" for d in policy.delays_ms)


def _body_preview(body: bytes) -> str:
    shown = body[:BODY_PREVIEW_BYTES]
    try:
        text = shown.decode("utf-8")
    except UnicodeDecodeError:
        text = "hex " + shown.hex()
    more = f" … ({len(body)} bytes)" if len(body) > len(shown) else ""
    return text + more


# -- sub-commands ------------------------------------------------------------------------------

Client = admin.AdminClient
Handler = Callable[[Client, argparse.Namespace], Awaitable[Result]]

_TOPIC_COLUMNS = (
    ("name", "topic"),
    ("broker_name", "broker"),
    ("read_queue_nums", "read queues"),
    ("write_queue_nums", "write queues"),
    ("perm", "perm"),
    ("message_type", "type"),
    ("retention_hours", "retention h (0 = default)"),
)
_GROUP_COLUMNS = (
    ("name", "group"),
    ("broker_name", "broker"),
    ("consume_orderly", "fifo"),
    ("max_delivery_attempts", "max attempts"),
    ("broadcast", "broadcast"),
    ("retry", "retry policy"),
    ("allocate_strategy", "allocate"),
)
_MESSAGE_COLUMNS = (
    ("broker_name", "broker"),
    ("topic", "topic"),
    ("queue_id", "queue"),
    ("queue_offset", "queue offset"),
    ("commit_log_offset", "commit-log offset"),
    ("message_id", "message id"),
    ("tag", "tag"),
    ("keys", "keys"),
    ("born", "born"),
    ("stored", "stored"),
    ("born_host", "born host"),
    ("store_host", "store host"),
    ("reconsume_times", "reconsume times"),
    ("properties", "properties"),
    ("body_bytes", "body bytes"),
    ("body_preview", "body"),
)


def _rows(values: Sequence[Any]) -> list[dict[str, Any]]:
    return [dataclasses.asdict(v) for v in values]


def _group_rows(groups: Sequence[admin_types.GroupInfo]) -> list[dict[str, Any]]:
    return [{**dataclasses.asdict(g), "retry": _describe_policy(g.retry_policy)} for g in groups]


async def _topic_create(client: Client, args: argparse.Namespace) -> Result:
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
    return Result(f"topic {args.name}", _TOPIC_COLUMNS, _rows(created))


async def _topic_update(client: Client, args: argparse.Namespace) -> Result:
    fields = (args.queues, args.read_queues, args.write_queues, args.type, args.perm)
    if all(f is None for f in fields) and args.retention_hours is None:
        raise UsageError(
            "nothing to change: give --queues, --read-queues, --write-queues, --type, --perm "
            "or --retention-hours"
        )
    if args.retention_hours == 0:
        raise UsageError("--retention-hours 0 changes nothing; use -1 for the broker default")
    updated = await client.update_topic(
        args.name,
        read_queue_nums=args.read_queues or args.queues or 0,
        write_queue_nums=args.write_queues or args.queues or 0,
        message_type=args.type,
        perm=args.perm or 0,
        retention_hours=args.retention_hours or 0,
    )
    return Result(f"topic {args.name}", _TOPIC_COLUMNS, _rows(updated))


async def _topic_delete(client: Client, args: argparse.Namespace) -> Result:
    brokers = await client.delete_topic(args.name)
    rows = [{"topic": args.name, "broker_name": b, "deleted": True} for b in brokers]
    columns = (("topic", "topic"), ("broker_name", "broker"), ("deleted", "deleted"))
    return Result(f"topic {args.name} deleted", columns, rows)


async def _topic_list(client: Client, args: argparse.Namespace) -> Result:
    found = await client.list_topics(include_system=args.all)
    return Result("topics", _TOPIC_COLUMNS, _rows(found), note=f"{len(found)} rows")


async def _group_create(client: Client, args: argparse.Namespace) -> Result:
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
    return Result(f"group {args.name}", _GROUP_COLUMNS, _group_rows(created))


async def _group_delete(client: Client, args: argparse.Namespace) -> Result:
    brokers = await client.delete_group(args.name)
    rows = [{"group": args.name, "broker_name": b, "deleted": True} for b in brokers]
    columns = (("group", "group"), ("broker_name", "broker"), ("deleted", "deleted"))
    return Result(f"group {args.name} deleted", columns, rows)


async def _group_list(client: Client, args: argparse.Namespace) -> Result:
    found = await client.list_groups()
    return Result("consumer groups", _GROUP_COLUMNS, _group_rows(found), note=f"{len(found)} rows")


async def _group_lag(client: Client, args: argparse.Namespace) -> Result:
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
    return Result(f"lag of {args.name}", columns, _rows(queues), note=note)


async def _group_reset(client: Client, args: argparse.Namespace) -> Result:
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
    return Result(f"{args.name} reset on {args.topic}", columns, _rows(offsets))


async def _message_get(client: Client, args: argparse.Namespace) -> Result:
    if args.key is not None:
        if not args.topic:
            raise UsageError("--key needs --topic: keys are indexed per topic")
        found = await client.query_message_by_key(args.topic, args.key, max_messages=args.max or 0)
    else:
        found = await client.query_message_by_id(args.id, topic=args.topic)
    rows = [
        {
            **dataclasses.asdict(m),
            "born": f"{_iso(m.born_timestamp_ms)} ({m.born_timestamp_ms})",
            "stored": f"{_iso(m.store_timestamp_ms)} ({m.store_timestamp_ms})",
            "body_bytes": len(m.body),
            "body_preview": _body_preview(m.body),
        }
        for m in found
    ]
    return Result("message", _MESSAGE_COLUMNS, rows, vertical=True)


_DLQ_COLUMNS = (
    ("message_id", "message id"),
    ("origin_topic", "origin topic"),
    ("attempts", "attempts"),
    ("stored", "stored"),
    ("broker_name", "broker"),
    ("queue_offset", "DLQ offset"),
    ("body_preview", "body"),
)


async def _dlq_list(client: Client, args: argparse.Namespace) -> Result:
    found = await client.dead_letters(args.group, max_messages=args.max or 0)
    rows = [
        {
            "message_id": d.origin_message_id,
            "origin_topic": d.origin_topic,
            "attempts": d.attempts,
            "stored": _iso(d.message.store_timestamp_ms),
            "store_timestamp_ms": d.message.store_timestamp_ms,
            "broker_name": d.message.broker_name,
            "queue_offset": d.message.queue_offset,
            "body_preview": _body_preview(d.message.body[:64]),
        }
        for d in found
    ]
    note = "" if rows else f"group {args.group} has no dead letters"
    return Result(f"dead letters of {args.group}", _DLQ_COLUMNS, rows, note=note)


async def _dlq_resend(client: Client, args: argparse.Namespace) -> Result:
    resent = await client.resend_dead_letters(
        args.group, message_ids=args.id or (), everything=args.all
    )
    columns = (
        ("message_id", "message id"),
        ("topic", "resent to"),
        ("broker_name", "broker"),
        ("queue_id", "queue"),
        ("queue_offset", "queue offset"),
    )
    note = f"{len(resent)} dead letters of {args.group} resent (the DLQ keeps them)"
    return Result(f"resent dead letters of {args.group}", columns, _rows(resent), note=note)


async def _message_round_trip(client: Client, args: argparse.Namespace) -> Result:
    """Send one message with ``ariane.client`` and receive it back with a SimpleConsumer.

    Raises:
        MessageNotFoundError: the message did not come back within ``--wait-s``.
    """
    del client  # the round trip goes through the v2 protocol, like any application
    body = f"ariane round trip {time.time_ns()}".encode()
    connection = session.ConnectionSettings(credentials=_credentials(args), tls=_tls(args))
    producing = producer.ProducerSettings(connection=connection)
    async with producer.Producer(args.endpoints, settings=producing) as sender:
        receipt = await sender.send(args.topic, body, tag="round-trip")
    deadline = time.monotonic() + args.wait_s
    consuming = consumer.ConsumerSettings(connection=connection)
    async with consumer.SimpleConsumer(
        args.endpoints, args.group, args.topic, settings=consuming
    ) as receiver:
        while time.monotonic() < deadline:
            got = await receiver.receive(max_messages=32, invisible_duration_s=30.0)
            await receiver.ack(got)
            if any(m.message_id == receipt.message_id for m in got):
                row = {
                    "topic": args.topic,
                    "message_id": receipt.message_id,
                    "broker": receipt.broker_name,
                    "bytes": len(body),
                }
                return Result("round trip", _ROUND_TRIP_COLUMNS, [row], note="sent and received")
    raise errors.MessageNotFoundError(
        f"message {receipt.message_id} was sent but not received within {args.wait_s} s"
    )


_ROUND_TRIP_COLUMNS = (
    ("topic", "topic"),
    ("message_id", "message id"),
    ("broker", "broker"),
    ("bytes", "bytes"),
)


async def _broker_list(client: Client, args: argparse.Namespace) -> Result:
    masters = {m.broker_name: m.endpoint for m in await client.masters()}
    stats = await client.broker_stats()
    rows = [
        {
            **dataclasses.asdict(s),
            "endpoint": masters.get(s.broker_name, ""),
            "commit_log": f"{s.commit_log_min_offset}..{s.commit_log_max_offset}",
            "disk": f"{s.disk_used_ratio:.0%}",
            "started": _iso(s.start_timestamp_ms),
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
    return Result("brokers", columns, rows)


async def _broker_write_perm(client: Client, args: argparse.Namespace) -> Result:
    writable = args.verb == "add-write-perm"
    changed = await client.set_write_perm(args.names, writable=writable)
    rows = [{"broker_name": b, "topics_changed": n} for b, n in changed.items()]
    columns = (("broker_name", "broker"), ("topics_changed", "topics changed"))
    state = "writable" if writable else "read-only"
    return Result(f"topics made {state}", columns, rows)


async def _broker_promote(client: Client, args: argparse.Namespace) -> Result:
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
    return Result("promoted", columns, [dataclasses.asdict(outcome)], vertical=True)


async def _cluster(client: Client, args: argparse.Namespace) -> Result:
    stats = await client.broker_stats()
    topics = await client.list_topics()
    groups = await client.list_groups()
    rows = []
    for name in sorted({s.cluster for s in stats}):
        mine = [s for s in stats if s.cluster == name]
        brokers = {s.broker_name for s in mine}
        rows.append({
            "cluster": name,
            "broker_groups": len(brokers),
            "topics": len({t.name for t in topics if t.broker_name in brokers}),
            "groups": len({g.name for g in groups if g.broker_name in brokers}),
            "messages_in_total": sum(s.messages_in_total for s in mine),
            "messages_out_total": sum(s.messages_out_total for s in mine),
            "writable": all(s.writable for s in mine),
            "disk_used_max": f"{max(s.disk_used_ratio for s in mine):.0%}",
        })  # fmt: skip
    columns = (
        ("cluster", "cluster"),
        ("broker_groups", "broker groups"),
        ("topics", "topics"),
        ("groups", "groups"),
        ("messages_in_total", "messages in"),
        ("messages_out_total", "messages out"),
        ("writable", "writable"),
        ("disk_used_max", "fullest disk"),
    )
    return Result("clusters", columns, rows, note=f"name servers: {args.endpoints}")


async def _lag(client: Client, args: argparse.Namespace) -> Result:
    found = await admin_top.lag_summary(client)
    columns = (
        ("group", "group"),
        ("topic", "topic"),
        ("queues", "queues"),
        ("broker_offset", "stored"),
        ("consumer_offset", "consumed"),
        ("lag", "lag"),
        ("inflight", "in flight"),
    )
    note = f"total lag {sum(r.lag for r in found)} over {len(found)} group x topic pairs"
    return Result("consumer lag", columns, admin_top.rows(found), note=note)


async def _top(client: Client, args: argparse.Namespace, out: rich_console.Console) -> Result:
    shown = await admin_top.top(
        client,
        rich_console.Console(quiet=True) if args.json else out,
        interval_s=args.interval_s,
        iterations=args.iterations,
    )
    columns = (("topic", "topic"), ("in_per_s", "in/s"), ("out_per_s", "out/s"))
    return Result("topics (messages/s)", columns, admin_top.rows(shown))


HANDLERS: dict[tuple[str, str], Handler] = {
    ("cluster", "show"): _cluster,
    ("brokers", "show"): _broker_list,
    ("topics", "show"): _topic_list,
    ("groups", "show"): _group_list,
    ("lag", "show"): _lag,
    ("topic", "create"): _topic_create,
    ("topic", "update"): _topic_update,
    ("topic", "delete"): _topic_delete,
    ("topic", "list"): _topic_list,
    ("group", "create"): _group_create,
    ("group", "delete"): _group_delete,
    ("group", "list"): _group_list,
    ("group", "lag"): _group_lag,
    ("group", "reset-offset"): _group_reset,
    ("message", "get"): _message_get,
    ("message", "round-trip"): _message_round_trip,
    ("dlq", "list"): _dlq_list,
    ("dlq", "resend"): _dlq_resend,
    ("broker", "list"): _broker_list,
    ("broker", "wipe-write-perm"): _broker_write_perm,
    ("broker", "add-write-perm"): _broker_write_perm,
    ("broker", "promote"): _broker_promote,
}
"""(noun, verb) → the coroutine that does it."""


# -- running -----------------------------------------------------------------------------------


async def execute(args: argparse.Namespace, out: rich_console.Console | None = None) -> Result:
    """Run one parsed ``ariane admin`` command against the cluster (``top`` draws on ``out``).

    Raises:
        UsageError: arguments that make no sense together.
        ValueError: malformed endpoints or timeout.
        ArianeError: a refusal, or an unreachable name server or broker.
    """
    credentials = _credentials(args)
    async with admin.AdminClient(
        args.endpoints, timeout_s=args.timeout, credentials=credentials, tls=_tls(args)
    ) as client:
        if args.noun == "top":
            return await _top(client, args, out or rich_console.Console())
        auth_handler = admin_auth_cli.HANDLERS.get((args.noun, args.verb))
        if auth_handler is not None:
            return Result(*await auth_handler(client, args))
        return await HANDLERS[(args.noun, args.verb)](client, args)


def _credentials(args: argparse.Namespace) -> client_credentials.Credentials | None:
    """The ``--access-key``/``--secret-key`` pair, or ``None`` when neither is given.

    Raises:
        UsageError: only one of the two is given.
    """
    access_key = getattr(args, "access_key", "")
    secret_key = getattr(args, "secret_key", "")
    if not access_key and not secret_key:
        return None
    if not access_key or not secret_key:
        raise UsageError(
            "give both --access-key and --secret-key (or "
            f"{client_credentials.ACCESS_KEY_ENV} and {client_credentials.SECRET_KEY_ENV})"
        )
    return client_credentials.Credentials(access_key, secret_key)


def _tls(args: argparse.Namespace) -> grpc_tls.ClientTls | None:
    """``--tls``/``--ca-file`` as client TLS options, or ``None`` for plaintext (``--ca-file``
    alone does not turn TLS on: ``ARIANE_CA_FILE`` may be set for another cluster)."""
    if not getattr(args, "tls", False):
        return None
    return grpc_tls.ClientTls(ca_file=getattr(args, "ca_file", ""))


def _fail(err: rich_console.Console, text: str, hint: str = "") -> None:
    err.print(f"ariane admin: {text}", markup=False, highlight=False, soft_wrap=True)
    if hint:
        err.print(f"  fix: {hint}", markup=False, highlight=False, soft_wrap=True)


def run(
    args: argparse.Namespace,
    *,
    out: rich_console.Console | None = None,
    err: rich_console.Console | None = None,
) -> int:
    """Run ``ariane admin`` from parsed arguments; returns the exit status (see the module)."""
    out = out or rich_console.Console(width=None if sys.stdout.isatty() else 200)
    err = err or rich_console.Console(stderr=True, width=200)
    if not args.endpoints:
        _fail(err, "no name server given", f"pass --endpoints HOST:PORT or set {ENDPOINTS_ENV}")
        return EXIT_USAGE
    try:
        result = asyncio.run(execute(args, out))
    except (UsageError, ValueError) as exc:
        _fail(err, str(exc), "see `ariane admin --help`")
        return EXIT_USAGE
    except admin.NameServerUnreachableError as exc:
        hint = "start one with `ariane dev`" if _tls(args) else f"start one, or {TLS_HINT}"
        _fail(err, f"cannot reach a name server: {exc.message}", hint)
        return EXIT_NAMESRV_UNREACHABLE
    except admin.BrokerUnreachableError as exc:
        hint = "check the broker process and its address"
        _fail(err, f"UNREACHABLE: {exc.message}", hint if _tls(args) else f"{hint}; {TLS_HINT}")
        return EXIT_REFUSED
    except OSError as exc:  # --ca-file unreadable
        _fail(err, str(exc), "check --ca-file")
        return EXIT_USAGE
    except errors.ArianeError as exc:
        _fail(err, f"{exc.code.name}: {exc.message}", HINTS.get(exc.code, ""))
        return EXIT_REFUSED
    if args.noun != "top" or args.json:  # top has drawn its tables already
        render(result, as_json=args.json, out=out)
    return 0
