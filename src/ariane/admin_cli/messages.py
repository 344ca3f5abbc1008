"""``ariane admin message get|round-trip`` and ``ariane admin dlq list|resend``: stored messages
and dead letters (RocketMQ ``mqadmin queryMsgById``, ``queryMsgByKey``, ``sendMessage`` +
``consumeMessage``, and the ``%DLQ%GROUP`` topic's ``resendMessage``).

Invariants: ``message get --key`` needs ``--topic`` (keys are indexed per topic); ``round-trip``
waits at most ``--wait-s`` for its own message; ``dlq resend`` leaves the letters in the DLQ.
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from typing import Any

from ariane.admin_cli import arguments, output
from ariane.client import consumer, producer, session
from ariane.common import errors

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
_DLQ_COLUMNS = (
    ("message_id", "message id"),
    ("origin_topic", "origin topic"),
    ("attempts", "attempts"),
    ("stored", "stored"),
    ("broker_name", "broker"),
    ("queue_offset", "DLQ offset"),
    ("body_preview", "body"),
)
_ROUND_TRIP_COLUMNS = (
    ("topic", "topic"),
    ("message_id", "message id"),
    ("broker", "broker"),
    ("bytes", "bytes"),
)


def add_arguments(sub: Any, common: argparse.ArgumentParser) -> None:
    """The ``message`` noun and its verbs."""
    msg = sub.add_parser("message", help="look up stored messages")
    verbs = msg.add_subparsers(dest="verb", required=True, metavar="VERB")
    get = verbs.add_parser("get", help="by message id or key", parents=[common])
    which = get.add_mutually_exclusive_group(required=True)
    which.add_argument("--id", help="client message id (with --topic) or offset message id")
    which.add_argument("--key", help="a message key (with --topic)")
    get.add_argument("--topic", help="the topic (needed for --key and client ids)")
    get.add_argument(
        "--max", type=arguments.positive, metavar="N", default=None, help="most messages per broker"
    )
    trip = verbs.add_parser(
        "round-trip",
        help="send one message and receive it back (a smoke test; helm test uses it)",
        parents=[common],
    )
    trip.add_argument("--topic", required=True, help="an existing NORMAL or MIXED topic")
    trip.add_argument("--group", default="ariane-round-trip", help="consumer group to receive with")
    trip.add_argument(
        "--wait-s", type=arguments.positive, default=30, metavar="S", help="how long to wait for it"
    )


def add_dlq_arguments(sub: Any, common: argparse.ArgumentParser) -> None:
    """The ``dlq`` noun and its verbs."""
    dlq = sub.add_parser("dlq", help="dead letters of a group (%%DLQ%%GROUP): list, resend")
    verbs = dlq.add_subparsers(dest="verb", required=True, metavar="VERB")
    listing = verbs.add_parser("list", help="the group's dead letters", parents=[common])
    listing.add_argument("group")
    listing.add_argument(
        "--max", type=arguments.positive, metavar="N", help="most letters per broker"
    )
    resend = verbs.add_parser(
        "resend", help="write dead letters back to their origin topics", parents=[common]
    )
    resend.add_argument("group")
    which = resend.add_mutually_exclusive_group(required=True)
    which.add_argument("--id", action="append", metavar="ID", help="a letter's message id")
    which.add_argument("--all", action="store_true", help="every letter of the group")


async def _get(client: output.Client, args: argparse.Namespace) -> output.Result:
    if args.key is not None:
        if not args.topic:
            raise arguments.UsageError("--key needs --topic: keys are indexed per topic")
        found = await client.query_message_by_key(args.topic, args.key, max_messages=args.max or 0)
    else:
        found = await client.query_message_by_id(args.id, topic=args.topic)
    rows = [
        {
            **dataclasses.asdict(m),
            "born": f"{output.iso(m.born_timestamp_ms)} ({m.born_timestamp_ms})",
            "stored": f"{output.iso(m.store_timestamp_ms)} ({m.store_timestamp_ms})",
            "body_bytes": len(m.body),
            "body_preview": output.body_preview(m.body),
        }
        for m in found
    ]
    return output.Result("message", _MESSAGE_COLUMNS, rows, vertical=True)


async def _round_trip(client: output.Client, args: argparse.Namespace) -> output.Result:
    """Send one message with ``ariane.client`` and receive it back with a SimpleConsumer.

    Raises:
        MessageNotFoundError: the message did not come back within ``--wait-s``.
    """
    del client  # the round trip goes through the v2 protocol, like any application
    body = f"ariane round trip {time.time_ns()}".encode()
    connection = session.ConnectionSettings(
        credentials=arguments.credentials(args), tls=arguments.client_tls(args)
    )
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
                return output.Result(
                    "round trip", _ROUND_TRIP_COLUMNS, [row], note="sent and received"
                )
    raise errors.MessageNotFoundError(
        f"message {receipt.message_id} was sent but not received within {args.wait_s} s"
    )


async def _dlq_list(client: output.Client, args: argparse.Namespace) -> output.Result:
    found = await client.dead_letters(args.group, max_messages=args.max or 0)
    rows = [
        {
            "message_id": d.origin_message_id,
            "origin_topic": d.origin_topic,
            "attempts": d.attempts,
            "stored": output.iso(d.message.store_timestamp_ms),
            "store_timestamp_ms": d.message.store_timestamp_ms,
            "broker_name": d.message.broker_name,
            "queue_offset": d.message.queue_offset,
            "body_preview": output.body_preview(d.message.body[:64]),
        }
        for d in found
    ]
    note = "" if rows else f"group {args.group} has no dead letters"
    return output.Result(f"dead letters of {args.group}", _DLQ_COLUMNS, rows, note=note)


async def _dlq_resend(client: output.Client, args: argparse.Namespace) -> output.Result:
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
    return output.Result(
        f"resent dead letters of {args.group}", columns, output.rows(resent), note=note
    )


HANDLERS: dict[tuple[str, str], output.Handler] = {
    ("message", "get"): _get,
    ("message", "round-trip"): _round_trip,
    ("dlq", "list"): _dlq_list,
    ("dlq", "resend"): _dlq_resend,
}
"""(noun, verb) → the coroutine that does it."""
