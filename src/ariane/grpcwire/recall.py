"""Recall handles: the token a DELAY send returns so that any access point can cancel it.

A producer sends RecallMessage to its access point (a name server or any broker), which must find
the broker holding the scheduled message, so the handle encodes the broker name (grpc-v2.md §6.9,
§8). Layout, after URL-safe base64 (padding optional on decode), space-separated ASCII::

    v1 <topic> <broker name> <delivery timestamp ms> <message id>

the field order of RocketMQ's ``RecallMessageHandle.HandleV1``. Topic names, message ids and
broker names cannot contain spaces (enforced on encode). Pure: no I/O, no clock.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses

from ariane.common import errors, ids

VERSION_1 = "v1"
HANDLE_CHARS_MAX = 1024
"""Longest encoded handle accepted, in characters."""


@dataclasses.dataclass(frozen=True, slots=True)
class RecallHandle:
    """What a recall handle names.

    Attributes:
        topic: the topic the DELAY message was sent to.
        broker_name: the broker group that holds it until delivery.
        delivery_timestamp_ms: when it is due, ms since the epoch.
        message_id: the client's message id (UNIQ_KEY).
    """

    topic: ids.TopicName
    broker_name: ids.BrokerName
    delivery_timestamp_ms: ids.TimestampMs
    message_id: ids.MessageId


def encode(handle: RecallHandle) -> str:
    """The URL-safe base64 text of a handle.

    Raises:
        ValueError: if a field is empty or contains whitespace.
    """
    fields = [handle.topic, handle.broker_name, handle.message_id]
    if any(not f or f.split() != [f] for f in fields):
        raise ValueError(f"recall handle fields must be non-empty words: {handle!r}")
    timestamp = str(handle.delivery_timestamp_ms)
    plain = " ".join([VERSION_1, handle.topic, handle.broker_name, timestamp, handle.message_id])
    return base64.urlsafe_b64encode(plain.encode()).decode()


def decode(text: str) -> RecallHandle:
    """Parse a handle made by ``encode`` (or by a RocketMQ proxy with the same layout).

    Raises:
        BadRequestError: if the text is too long, not base64, of an unknown version, or does not
            have the five fields with a numeric timestamp.
    """
    if not text or len(text) > HANDLE_CHARS_MAX:
        raise errors.BadRequestError(f"recall handle must be 1..{HANDLE_CHARS_MAX} characters")
    try:
        padded = text + "=" * (-len(text) % 4)
        plain = base64.urlsafe_b64decode(padded.encode()).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise errors.BadRequestError("recall handle is not URL-safe base64 text") from None
    parts = plain.split(" ")
    if len(parts) != 5 or parts[0] != VERSION_1 or not parts[3].isdigit() or "" in parts:
        raise errors.BadRequestError("recall handle is not a v1 handle")
    return RecallHandle(
        topic=ids.TopicName(parts[1]),
        broker_name=ids.BrokerName(parts[2]),
        delivery_timestamp_ms=ids.TimestampMs(int(parts[3])),
        message_id=ids.MessageId(parts[4]),
    )
