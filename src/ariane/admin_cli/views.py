"""The one-word views of ``ariane admin`` for people: ``cluster``, ``brokers``, ``topics``,
``groups``, ``lag`` and the live ``top`` (RocketMQ ``mqadmin clusterList``, ``brokerStatus``,
``topicList``, ``consumerProgress``; ``top`` has no mqadmin twin).

A view is a noun without a verb (parsed as verb ``show``); ``brokers``, ``topics`` and
``groups`` answer as ``broker list``, ``topic list`` and ``group list``.

Invariants: ``top`` refreshes at most ``--iterations`` times (see ``top``); with ``--json`` it
draws nothing and prints the last rates.
"""

from __future__ import annotations

import argparse
from typing import Any

from rich import console as rich_console

from ariane.admin_cli import arguments, brokers, groups, output, top, topics


def add_arguments(sub: Any, common: argparse.ArgumentParser) -> None:
    """The view nouns: ``cluster``, ``brokers``, ``topics``, ``groups``, ``lag``, ``top``."""
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
    live = sub.choices["top"]
    live.add_argument(
        "--interval-s", type=float, default=top.TOP_INTERVAL_S_DEFAULT, metavar="S",
        help="seconds between refreshes",
    )  # fmt: skip
    live.add_argument(
        "--iterations", type=arguments.positive, default=top.TOP_ITERATIONS_DEFAULT,
        metavar="N", help="refreshes before exiting (default: an hour's worth)",
    )  # fmt: skip


async def _cluster(client: output.Client, args: argparse.Namespace) -> output.Result:
    stats = await client.broker_stats()
    found_topics = await client.list_topics()
    found_groups = await client.list_groups()
    rows = []
    for name in sorted({s.cluster for s in stats}):
        mine = [s for s in stats if s.cluster == name]
        names = {s.broker_name for s in mine}
        rows.append({
            "cluster": name,
            "broker_groups": len(names),
            "topics": len({t.name for t in found_topics if t.broker_name in names}),
            "groups": len({g.name for g in found_groups if g.broker_name in names}),
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
    return output.Result("clusters", columns, rows, note=f"name servers: {args.endpoints}")


async def _lag(client: output.Client, args: argparse.Namespace) -> output.Result:
    found = await top.lag_summary(client)
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
    return output.Result("consumer lag", columns, output.rows(found), note=note)


async def run_top(
    client: output.Client, args: argparse.Namespace, out: rich_console.Console
) -> output.Result:
    """``top``: draw the live view on ``out`` (nothing with ``--json``); the last rates shown.

    Raises:
        ArianeError: a name server or broker refused or did not answer.
    """
    shown = await top.top(
        client,
        rich_console.Console(quiet=True) if args.json else out,
        interval_s=args.interval_s,
        iterations=args.iterations,
    )
    columns = (("topic", "topic"), ("in_per_s", "in/s"), ("out_per_s", "out/s"))
    return output.Result("topics (messages/s)", columns, output.rows(shown))


HANDLERS: dict[tuple[str, str], output.Handler] = {
    ("cluster", "show"): _cluster,
    ("brokers", "show"): brokers.list_brokers,
    ("topics", "show"): topics.list_topics,
    ("groups", "show"): groups.list_groups,
    ("lag", "show"): _lag,
}
"""(noun, ``show``) → the coroutine that does it (``top`` draws as it goes: ``run_top``)."""
