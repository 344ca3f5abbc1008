"""``ariane admin``'s composition and run: every resource's nouns in one parser, every handler
in one table, and what a failure prints and exits with.

Invariants: the nouns appear in ``--help`` in a fixed order (topic, group, user, acl, message,
dlq, the views, broker); each (noun, verb) has exactly one handler (``HANDLERS`` refuses a
duplicate at import); ``run`` never raises for a refusal or an unreachable server, it prints
``ariane admin: …`` and a ``fix:`` line on stderr and returns an exit status.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from rich import console as rich_console

from ariane.admin_cli import (
    arguments,
    auth,
    brokers,
    groups,
    messages,
    output,
    topics,
    views,
)
from ariane.client import admin
from ariane.client import credentials as client_credentials
from ariane.common import errors

EXIT_REFUSED = 1
EXIT_USAGE = 2
EXIT_NAMESRV_UNREACHABLE = 3

TLS_HINT = (
    f"if the cluster serves TLS, pass --tls --ca-file PATH "
    f"(or {arguments.TLS_ENV}=1, {arguments.CA_FILE_ENV})"
)
"""Printed with an unreachable name server or broker when the call was plaintext."""

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


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``ariane admin`` options and sub-commands."""
    arguments.add_common(parser, suppress=False)
    common = argparse.ArgumentParser(add_help=False)
    arguments.add_common(common, suppress=True)
    sub = parser.add_subparsers(dest="noun", required=True, metavar="NOUN")
    topics.add_arguments(sub, common)
    groups.add_arguments(sub, common)
    auth.add_arguments(sub, common)
    messages.add_arguments(sub, common)
    messages.add_dlq_arguments(sub, common)
    views.add_arguments(sub, common)
    brokers.add_arguments(sub, common)


def _handlers() -> dict[tuple[str, str], output.Handler]:
    tables = (
        topics.HANDLERS,
        groups.HANDLERS,
        auth.HANDLERS,
        messages.HANDLERS,
        views.HANDLERS,
        brokers.HANDLERS,
    )
    merged: dict[tuple[str, str], output.Handler] = {}
    for table in tables:
        assert not merged.keys() & table.keys(), merged.keys() & table.keys()
        merged.update(table)
    return merged


HANDLERS = _handlers()
"""(noun, verb) → the coroutine that does it (``top`` draws as it goes: ``views.run_top``)."""


async def execute(
    args: argparse.Namespace, out: rich_console.Console | None = None
) -> output.Result:
    """Run one parsed ``ariane admin`` command against the cluster (``top`` draws on ``out``).

    Raises:
        UsageError: arguments that make no sense together.
        ValueError: malformed endpoints or timeout.
        ArianeError: a refusal, or an unreachable name server or broker.
    """
    async with admin.AdminClient(
        args.endpoints,
        timeout_s=args.timeout,
        credentials=arguments.credentials(args),
        tls=arguments.client_tls(args),
    ) as client:
        if args.noun == "top":
            return await views.run_top(client, args, out or rich_console.Console())
        return await HANDLERS[(args.noun, args.verb)](client, args)


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
    """Run ``ariane admin`` from parsed arguments; returns the exit status (see the package)."""
    out = out or rich_console.Console(width=None if sys.stdout.isatty() else 200)
    err = err or rich_console.Console(stderr=True, width=200)
    if not args.endpoints:
        hint = f"pass --endpoints HOST:PORT or set {arguments.ENDPOINTS_ENV}"
        _fail(err, "no name server given", hint)
        return EXIT_USAGE
    tls = arguments.client_tls(args)
    try:
        result = asyncio.run(execute(args, out))
    except (arguments.UsageError, ValueError) as exc:
        _fail(err, str(exc), "see `ariane admin --help`")
        return EXIT_USAGE
    except admin.NameServerUnreachableError as exc:
        hint = "start one with `ariane dev`" if tls else f"start one, or {TLS_HINT}"
        _fail(err, f"cannot reach a name server: {exc.message}", hint)
        return EXIT_NAMESRV_UNREACHABLE
    except admin.BrokerUnreachableError as exc:
        hint = "check the broker process and its address"
        _fail(err, f"UNREACHABLE: {exc.message}", hint if tls else f"{hint}; {TLS_HINT}")
        return EXIT_REFUSED
    except OSError as exc:  # --ca-file unreadable
        _fail(err, str(exc), "check --ca-file")
        return EXIT_USAGE
    except errors.ArianeError as exc:
        _fail(err, f"{exc.code.name}: {exc.message}", HINTS.get(exc.code, ""))
        return EXIT_REFUSED
    if args.noun != "top" or args.json:  # top has drawn its tables already
        output.render(result, as_json=args.json, out=out)
    return 0
