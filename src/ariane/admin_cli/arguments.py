"""The vocabulary of ``ariane admin``'s arguments: value types, the options every command takes,
and what they mean to a client (credentials, TLS).

Each resource module (``topics``, ``groups``, …) adds its own nouns and verbs with the helpers
here; ``main.add_arguments`` puts them together. The topic message types a command accepts are
``MESSAGE_TYPES`` (parsed by ``message_type``): the one place that list lives.

Invariants: every value type raises ``argparse.ArgumentTypeError`` (argparse prints it and
exits 2) for a value it does not accept; options that read an environment variable read it when
the parser is built, as RocketMQ's ``mqadmin`` reads ``NAMESRV_ADDR``.
"""

from __future__ import annotations

import argparse
import datetime
import os
import re

from ariane.client import admin
from ariane.client import credentials as client_credentials
from ariane.common import message
from ariane.grpcwire import tls as grpc_tls

TLS_ENV = "ARIANE_TLS"
CA_FILE_ENV = "ARIANE_CA_FILE"
"""Environment variables for ``--tls`` (``1``/``true``/``yes``) and ``--ca-file``."""

ENDPOINTS_ENV = "NAMESRV_ADDR"
"""Environment variable with the name servers when ``--endpoints`` is absent (RocketMQ's)."""

MESSAGE_TYPES = [kind.value for kind in message.MessageType]
"""The ``--type`` choices of ``topic create|update`` (RocketMQ ``TopicMessageType`` names)."""

_DURATION = re.compile(r"^(\d+)(ms|s|m|h)$")
_UNIT_MS = {"ms": 1, "s": 1_000, "m": 60_000, "h": 3_600_000}


class UsageError(Exception):
    """Arguments that parse but make no sense together (exit 2)."""


# -- value types -------------------------------------------------------------------------------


def positive(text: str) -> int:
    """An integer >= 1.

    Raises:
        argparse.ArgumentTypeError: below 1 (``ValueError`` for no integer: argparse's message).
    """
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not >= 1")
    return value


def seconds(text: str) -> float:
    """Seconds in 0..600.

    Raises:
        argparse.ArgumentTypeError: outside that range.
    """
    value = float(text)
    if not 0 <= value <= 600:
        raise argparse.ArgumentTypeError(f"{value} is not 0..600 seconds")
    return value


def message_type(text: str) -> message.MessageType:
    """A topic message type, any case (one of ``MESSAGE_TYPES``).

    Raises:
        argparse.ArgumentTypeError: another word.
    """
    try:
        return message.MessageType(text.upper())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not one of {', '.join(MESSAGE_TYPES)}"
        ) from None


def parse_duration_ms(text: str) -> int:
    """``250ms``, ``5s``, ``1m`` or ``2h`` in ms.

    Raises:
        argparse.ArgumentTypeError: for anything else.
    """
    match = _DURATION.match(text.strip())
    if match is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration like 250ms, 5s, 1m or 2h")
    return int(match.group(1)) * _UNIT_MS[match.group(2)]


def delays(text: str) -> tuple[int, ...]:
    """``1s,5s,30s`` → the delays in ms (see ``parse_duration_ms``)."""
    return tuple(parse_duration_ms(part) for part in text.split(",") if part.strip())


def queue_ref(text: str) -> tuple[str, str, int]:
    """``TOPIC/BROKER/ID`` → (topic, broker name, queue id).

    Raises:
        argparse.ArgumentTypeError: another shape.
    """
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


def comma_list(text: str) -> list[str]:
    """``a,b, c`` → ``["a", "b", "c"]`` (mqadmin's comma lists).

    Raises:
        argparse.ArgumentTypeError: nothing between the commas.
    """
    items = [part.strip() for part in text.split(",") if part.strip()]
    if not items:
        raise argparse.ArgumentTypeError("expected a comma-separated list, got nothing")
    return items


# -- the options of every command --------------------------------------------------------------


def add_common(parser: argparse.ArgumentParser, *, suppress: bool) -> None:
    """``--endpoints``, ``--json``, ``--timeout``, the credentials and TLS: on ``ariane admin``
    with their defaults, and on every sub-command with suppressed defaults, so they work before
    or after it."""

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


def credentials(args: argparse.Namespace) -> client_credentials.Credentials | None:
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


def client_tls(args: argparse.Namespace) -> grpc_tls.ClientTls | None:
    """``--tls``/``--ca-file`` as client TLS options, or ``None`` for plaintext (``--ca-file``
    alone does not turn TLS on: ``ARIANE_CA_FILE`` may be set for another cluster)."""
    if not getattr(args, "tls", False):
        return None
    return grpc_tls.ClientTls(ca_file=getattr(args, "ca_file", ""))
