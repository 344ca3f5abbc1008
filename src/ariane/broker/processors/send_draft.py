"""What a protocol's send adapter hands the one send core (``send.SendProcessor``): drafts.

A draft is one message of a send request, translated from its protocol (``send_v2`` for v2
``SendMessage``, ``send_classic`` for Remoting ``SEND_MESSAGE``/``V2``/``BATCH``) and checked
for what only that protocol knows (message types, FIFO groups, delay levels ...), but not yet
routed (a DELAY message parked, a TRANSACTION message made a half message) nor encoded: the
core does both, once, for either protocol. The checks both protocols share live here too:
the topic a producer may write, the body size, a GZIP body that must inflate, and the errors
that stand for what ``CommitLog.prepare`` refuses.

Invariant: a draft's append request carries the message's final properties but for the ones
its route adds; ``properties_bytes``, when set, is exactly their encoding (so the core does not
encode them again) and the route is ``STORE`` (a route rewrites properties).
"""

from __future__ import annotations

import enum
import zlib
from typing import NamedTuple

from ariane.broker.tables import topic_config
from ariane.common import errors, idempotency, message, topics
from ariane.store import commit_log, message_codec
from ariane.store import settings as store_settings_mod


class Route(enum.Enum):
    """Where the core sends a draft before it is encoded."""

    STORE = "STORE"
    """Appended as it is."""
    TIMER = "TIMER"
    """Parked on the timer wheel until ``delivery_ms`` (``ScheduleService.park``)."""
    LEVEL = "LEVEL"
    """Parked in ``SCHEDULE_TOPIC_XXXX`` for delay level ``level`` (``park_level``)."""
    HALF = "HALF"
    """Stored as a transaction half message (``TransactionalMessageService.to_half``)."""


class Draft(NamedTuple):
    """One message of a send request, checked by its protocol's adapter (module docstring).

    A NamedTuple: one is made per sent message.

    Attributes:
        request: the append request as the producer asked for it (before its route).
        topic: the topic as sent (long polling is notified of it).
        kind: the message type its size is counted under (``message_size_bytes``).
        client_id: the id the producer gave it (answered when it is not stored).
        route: where it goes before it is encoded.
        delivery_ms: a ``TIMER`` draft's delivery time, ms since the epoch (``None``: the
            schedule service's default).
        level: a ``LEVEL`` draft's delay level (1..).
        properties_bytes: the request's properties already encoded, or ``None``.
    """

    request: commit_log.AppendRequest
    topic: str
    kind: message.MessageType
    client_id: str
    route: Route = Route.STORE
    delivery_ms: int | None = None
    level: int = 0
    properties_bytes: bytes | None = None


def writable_topic(table: topic_config.TopicConfigManager, name: str) -> topic_config.TopicConfig:
    """The config of topic ``name`` for a producer (auto-created when that is on).

    Raises:
        IllegalTopicError: a bad name. TopicNotFoundError: unknown and not auto-created.
        ForbiddenError: the topic is not writable on this broker.
    """
    topic = table.require(topics.validate_topic(name), auto_create=True)
    if not topic.writeable:
        raise errors.ForbiddenError(f"topic {name!r} is not writable on this broker")
    return topic


def check_body(body: bytes, limits_: store_settings_mod.StoreSettings) -> None:
    """Refuse an empty body or one above ``message_size_bytes_max`` (before a GZIP body is
    inflated to be checked; ``CommitLog.prepare`` checks the size again).

    Raises:
        MessageBodyEmptyError, MessageBodyTooLargeError: as their names say.
    """
    if not body:
        raise errors.MessageBodyEmptyError("message body is empty; send at least one byte")
    limit = limits_.message_size_bytes_max
    if len(body) > limit:
        raise errors.MessageBodyTooLargeError(
            f"message body is {len(body)} bytes; the limit is {limit}"
        )


_PROBLEMS_REFUSING_THE_REQUEST = frozenset(
    {
        message_codec.PrepareProblem.BODY_EMPTY,
        message_codec.PrepareProblem.BODY_TOO_LARGE,
        message_codec.PrepareProblem.PROPERTY_ILLEGAL,
        message_codec.PrepareProblem.PROPERTIES_TOO_LARGE,
    }
)


def problem_error(
    prepared: commit_log.PreparedAppend, limits_: store_settings_mod.StoreSettings
) -> errors.ArianeError | None:
    """The error a sender refuses its request with for a message ``CommitLog.prepare`` refused
    (RocketMQ's ``SendMessageProcessor`` checks: body and properties), or ``None`` for the
    rarer problems (a field out of range, a bad host, a record too large), which the request
    answers as the store's status (MESSAGE_ILLEGAL) as a whole, storing nothing."""
    problem = prepared.problem
    if problem not in _PROBLEMS_REFUSING_THE_REQUEST:
        return None
    if problem is message_codec.PrepareProblem.BODY_EMPTY:
        return errors.MessageBodyEmptyError("message body is empty; send at least one byte")
    if problem is message_codec.PrepareProblem.BODY_TOO_LARGE:
        size = len(prepared.request.message.body)
        limit = limits_.message_size_bytes_max
        return errors.MessageBodyTooLargeError(
            f"message body is {size} bytes; the limit is {limit}"
        )
    if problem is message_codec.PrepareProblem.PROPERTY_ILLEGAL:
        return errors.BadRequestError(
            "a property name or value holds a control character \\x01 or \\x02 "
            "(the store's property separators)"
        )
    size = len(message_codec.properties_to_bytes(prepared.request.message.properties) or b"")
    return errors.MessagePropertiesTooLargeError(
        f"the message's properties (keys, tag, ids, user properties) take {size} bytes; the "
        f"limit is {limits_.properties_size_bytes_max}"
    )


def keyed_message_id(key: str) -> str:
    """The message id of a message with idempotency key ``key`` (both protocols).

    Raises:
        IllegalPropertyKeyError: ``key`` is not a valid idempotency key.
    """
    try:
        idempotency.check_key(key)
    except ValueError as exc:
        raise errors.IllegalPropertyKeyError(
            f"{idempotency.IDEMPOTENCY_KEY_PROPERTY}: {exc}"
        ) from None
    return idempotency.message_id_of(key)


def refuse_request(error: errors.ArianeError, position: int, count: int) -> errors.ArianeError:
    """The error refusing a whole request because its message at ``position`` is invalid.

    Same class and code as ``error``; the text names the message and says nothing was stored.
    """
    return type(error)(
        f"message {position + 1} of {count}: {error.message}; no message of this request was stored"
    )


GZIP_MAGIC = b"\x1f\x8b"
"""The first two bytes of a gzip member; a GZIP-flagged body without them must be zlib, as the
official Python client's ``Misc.uncompress_bytes_gzip`` reads it."""

GZIP_MEMBERS_MAX = 64
"""Most concatenated gzip members one body may hold (each costs a decompressor)."""


def check_gzip_body(body: bytes, inflated_bytes_max: int) -> None:
    """Refuse a GZIP-flagged body that a consumer could not inflate within the size limit.

    Reads ``body`` as the official Python client does: concatenated gzip members when it starts
    with ``1f 8b``, else one zlib stream. Inflation stops ``inflated_bytes_max + 1`` bytes in,
    so a compression bomb costs at most that much memory.

    Args:
        body: the body as sent (compressed).
        inflated_bytes_max: the largest inflated body accepted, bytes
            (``message_size_bytes_max``).

    Raises:
        MessageCorruptedError: (MESSAGE_CORRUPTED, 40016) the body is not a complete gzip or
            zlib stream, or has trailing bytes after its gzip members.
        MessageBodyTooLargeError: (MESSAGE_BODY_TOO_LARGE, 41301) it inflates beyond
            ``inflated_bytes_max``.
    """
    gzip_members = body[:2] == GZIP_MAGIC
    remaining, budget, members = body, inflated_bytes_max + 1, 0
    try:
        while remaining:
            members += 1
            if members > GZIP_MEMBERS_MAX:
                raise errors.MessageCorruptedError(
                    f"body flagged GZIP holds more than {GZIP_MEMBERS_MAX} gzip members"
                )
            inflater = zlib.decompressobj(wbits=31 if gzip_members else 15)
            budget -= len(inflater.decompress(remaining, budget))
            if budget <= 0 or inflater.unconsumed_tail:
                raise errors.MessageBodyTooLargeError(
                    f"body flagged GZIP inflates beyond {inflated_bytes_max} bytes, the limit"
                )
            if not inflater.eof:
                raise errors.MessageCorruptedError("body flagged GZIP is a truncated stream")
            remaining = inflater.unused_data if gzip_members else b""
            if remaining and remaining[:2] != GZIP_MAGIC:
                raise errors.MessageCorruptedError("body flagged GZIP has trailing garbage")
    except zlib.error as exc:
        raise errors.MessageCorruptedError(
            f"body flagged GZIP does not inflate ({exc}); send it with IDENTITY encoding or "
            "compress it with gzip"
        ) from None
