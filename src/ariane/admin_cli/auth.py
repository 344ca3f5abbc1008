"""``ariane admin user …`` and ``ariane admin acl …``: ACL 2.0 users and ACLs of every broker.

Option letters follow RocketMQ's ``mqadmin`` auth commands (security.md §6.2), with long names::

    ariane admin user create -u alice -p SECRET [-t Super|Normal]        (mqadmin createUser)
    ariane admin user update -u alice [-p NEW] [-t TYPE] [-s enable|disable]   (updateUser)
    ariane admin user delete -u alice | get -u alice | list [-f FILTER]
    ariane admin acl create -s User:alice -r Topic:orders,Group:billing -a Pub,Sub -d Allow
                            [-i 10.0.0.0/8]                               (mqadmin createAcl)
    ariane admin acl update …   (same options; both merge one entry per resource)
    ariane admin acl delete -s User:alice [-r Topic:orders] | get -s User:alice
    ariane admin acl list [-s SUBJECT_FILTER] [-r RESOURCE_FILTER]

Writes go to every broker, masters and slaves; reads to the masters. Passwords are never shown.
The caller signs with ``--access-key``/``--secret-key`` (or ``ARIANE_ACCESS_KEY`` /
``ARIANE_SECRET_KEY``), which every ``ariane admin`` command takes; only a Super user may create
a Super user.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from ariane.admin_cli import arguments, output
from ariane.client import auth_admin

_USER_COLUMNS = (
    ("broker_name", "broker"),
    ("username", "user"),
    ("user_type", "type"),
    ("user_status", "status"),
)
_ACL_COLUMNS = (
    ("broker_name", "broker"),
    ("subject", "subject"),
    ("policy_type", "policy"),
    ("resource", "resource"),
    ("actions", "actions"),
    ("source_ips", "source ips"),
    ("decision", "decision"),
)


def add_arguments(sub: Any, common: argparse.ArgumentParser) -> None:
    """The ``user`` and ``acl`` nouns of ``ariane admin``."""
    user = sub.add_parser("user", help="ACL 2.0 users: create, update, delete, get, list")
    verbs = user.add_subparsers(dest="verb", required=True, metavar="VERB")
    create = verbs.add_parser("create", help="create a user on every broker", parents=[common])
    create.add_argument("-u", "--username", required=True)
    create.add_argument("-p", "--password", required=True, help="the user's secret key")
    create.add_argument("-t", "--user-type", default="", help="Super or Normal (default)")
    update = verbs.add_parser("update", help="change a user", parents=[common])
    update.add_argument("-u", "--username", required=True)
    update.add_argument("-p", "--password", default="", help="a new secret key")
    update.add_argument("-t", "--user-type", default="", help="Super or Normal")
    update.add_argument("-s", "--user-status", default="", help="enable or disable")
    for verb, text in (("delete", "delete a user and its ACL"), ("get", "show a user")):
        p = verbs.add_parser(verb, help=text, parents=[common])
        p.add_argument("-u", "--username", required=True)
    listing = verbs.add_parser("list", help="list users", parents=[common])
    listing.add_argument("-f", "--filter", default="", help="only names containing this")
    _acl_arguments(sub, common)


def _acl_arguments(sub: Any, common: argparse.ArgumentParser) -> None:
    acl = sub.add_parser("acl", help="ACL 2.0 policies: create, update, delete, get, list")
    verbs = acl.add_subparsers(dest="verb", required=True, metavar="VERB")
    for verb in ("create", "update"):
        p = verbs.add_parser(verb, help=f"{verb} entries of a user's ACL", parents=[common])
        p.add_argument("-s", "--subject", required=True, help="User:NAME (or NAME)")
        p.add_argument(
            "-r", "--resources", type=arguments.comma_list, required=True,
            help="comma list: Topic:T, Topic:prefix-*, Group:G, Cluster:C, *",
        )  # fmt: skip
        p.add_argument(
            "-a", "--actions", type=arguments.comma_list, required=True,
            help="comma list of Pub, Sub, Create, Update, Delete, Get, List, All",
        )  # fmt: skip
        p.add_argument("-d", "--decision", required=True, help="Allow or Deny")
        p.add_argument(
            "-i",
            "--source-ip",
            type=arguments.comma_list,
            default=[],
            help="comma list of IPs or CIDRs",
        )
        p.add_argument("--policy-type", default="", help="Custom (default) or Default")
    delete = verbs.add_parser("delete", help="delete an entry or a whole ACL", parents=[common])
    delete.add_argument("-s", "--subject", required=True)
    delete.add_argument("-r", "--resource", default="", help="only this entry")
    delete.add_argument("--policy-type", default="", help="Custom (default) or Default")
    get = verbs.add_parser("get", help="show a user's ACL", parents=[common])
    get.add_argument("-s", "--subject", required=True)
    listing = verbs.add_parser("list", help="list ACLs", parents=[common])
    listing.add_argument("-s", "--subject", default="", help="only subjects containing this")
    listing.add_argument("-r", "--resource", default="", help="only resources containing this")


def _done(what: str, brokers: list[str]) -> output.Result:
    rows = [{"broker_name": b} for b in brokers]
    return output.Result(
        what, (("broker_name", "broker"),), rows, f"{what} on {len(brokers)} broker(s)"
    )


def _user_rows(users: Sequence[auth_admin.UserRecord]) -> list[dict[str, Any]]:
    return [
        {"broker_name": u.broker_name, "username": u.username, "user_type": u.user_type,
         "user_status": u.user_status}
        for u in users
    ]  # fmt: skip


def _acl_rows(acls: Sequence[auth_admin.AclRecord]) -> list[dict[str, Any]]:
    return [
        {"broker_name": a.broker_name, "subject": a.subject, "policy_type": kind,
         "resource": e.resource, "actions": list(e.actions), "source_ips": list(e.source_ips),
         "decision": e.decision}
        for a in acls
        for kind, entries in a.policies
        for e in entries
    ]  # fmt: skip


async def _user_create(client: output.Client, args: argparse.Namespace) -> output.Result:
    done = await client.create_user(args.username, args.password, user_type=args.user_type)
    return _done(f"user {args.username} created", done)


async def _user_update(client: output.Client, args: argparse.Namespace) -> output.Result:
    if not (args.password or args.user_type or args.user_status):
        raise ValueError("give at least one of -p/--password, -t/--user-type, -s/--user-status")
    done = await client.update_user(
        args.username,
        password=args.password,
        user_type=args.user_type,
        user_status=args.user_status,
    )
    return _done(f"user {args.username} updated", done)


async def _user_delete(client: output.Client, args: argparse.Namespace) -> output.Result:
    return _done(f"user {args.username} deleted", await client.delete_user(args.username))


async def _user_get(client: output.Client, args: argparse.Namespace) -> output.Result:
    rows = _user_rows(await client.get_user(args.username))
    return output.Result(f"user {args.username}", _USER_COLUMNS, rows)


async def _user_list(client: output.Client, args: argparse.Namespace) -> output.Result:
    rows = _user_rows(await client.list_users(args.filter))
    return output.Result("users", _USER_COLUMNS, rows, f"{len(rows)} user(s)")


async def _acl_put(client: output.Client, args: argparse.Namespace) -> output.Result:
    done = await client.put_acl(
        args.subject,
        resources=args.resources,
        actions=args.actions,
        decision=args.decision,
        source_ips=args.source_ip,
        policy_type=args.policy_type,
    )
    return _done(f"ACL of {auth_admin.subject_of(args.subject)} updated", done)


async def _acl_delete(client: output.Client, args: argparse.Namespace) -> output.Result:
    done = await client.delete_acl(
        args.subject, resource=args.resource, policy_type=args.policy_type
    )
    what = f"entry {args.resource}" if args.resource else "ACL"
    return _done(f"{what} of {auth_admin.subject_of(args.subject)} deleted", done)


async def _acl_get(client: output.Client, args: argparse.Namespace) -> output.Result:
    rows = _acl_rows(await client.get_acl(args.subject))
    return output.Result(f"ACL of {auth_admin.subject_of(args.subject)}", _ACL_COLUMNS, rows)


async def _acl_list(client: output.Client, args: argparse.Namespace) -> output.Result:
    rows = _acl_rows(await client.list_acls(args.subject, args.resource))
    return output.Result("ACLs", _ACL_COLUMNS, rows, f"{len(rows)} entr(ies)")


HANDLERS: dict[tuple[str, str], output.Handler] = {
    ("user", "create"): _user_create,
    ("user", "update"): _user_update,
    ("user", "delete"): _user_delete,
    ("user", "get"): _user_get,
    ("user", "list"): _user_list,
    ("acl", "create"): _acl_put,
    ("acl", "update"): _acl_put,
    ("acl", "delete"): _acl_delete,
    ("acl", "get"): _acl_get,
    ("acl", "list"): _acl_list,
}
"""(noun, verb) → the coroutine that does it."""
