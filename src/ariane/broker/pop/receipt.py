"""Receipt handles: the opaque string a consumer echoes back in Ack/ChangeInvisibleDuration.

A handle names one delivery of one message: the broker that issued it (so any hop could route
it), the queue and offsets of the message, when it was received, for how long it is invisible,
which delivery attempt it is, and the ``handle_version`` under which the pop bookkeeping
(``broker.pop``) registered that delivery. A redelivery or a ChangeInvisibleDuration issues a
new version, so an older handle is recognised as stale.

Pure codec, no I/O. Layout (big-endian), then base64url without padding::

    offset  size  field
    0       1     format version (FORMAT_VERSION = 1)
    1       1     broker name length B (1..255)
    2       B     broker name, UTF-8
    2+B     1     topic length T (1..255)
    3+B     T     topic, UTF-8
    .       4     queue id (u32)
    .       8     queue offset (u64)
    .       8     commit-log offset (u64)
    .       8     receive (pop) time, ms since the epoch (u64)
    .       4     invisible duration, ms (u32)
    .       2     delivery attempt, 1-based (u16)
    .       8     handle version (u64)
    .       4     CRC32 of every byte before it (u32)

Decoding checks the length bound (``RECEIPT_HANDLE_CHARS_MAX``) before anything else, the
alphabet, the CRC, the version and every length, and raises only
``InvalidReceiptHandleError`` whatever the input.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import re
import struct
import zlib

from ariane.common import errors, ids

FORMAT_VERSION = 1
"""Layout version written in the first byte."""

NAME_BYTES_MAX = 255
"""Longest broker name or topic in a handle, in UTF-8 bytes."""

RECEIPT_HANDLE_CHARS_MAX = 1024
"""Longest handle string accepted, in characters (the longest encodable is ~750)."""

_TAIL = struct.Struct(">IQQQIHQ")
_CRC = struct.Struct(">I")
_ALPHABET = re.compile(r"^[A-Za-z0-9_-]+$")
_U16_MAX = 0xFFFF
_U32_MAX = 0xFFFF_FFFF
_U64_MAX = 0xFFFF_FFFF_FFFF_FFFF


@dataclasses.dataclass(frozen=True, slots=True)
class ReceiptHandle:
    """The decoded content of a receipt handle.

    Attributes:
        broker_name: the broker group that delivered the message.
        topic: the message's topic.
        queue_id: its queue.
        queue_offset: its ConsumeQueue offset.
        commit_log_offset: its CommitLog byte position (to read it back, e.g. for the DLQ).
        popped_at_ms: wall time of this delivery or of the last visibility change, ms.
        invisible_ms: invisible duration from ``popped_at_ms``, in ms.
        delivery_attempt: 1 for the first delivery, +1 per redelivery.
        handle_version: the pop bookkeeping's version of this delivery.
    """

    broker_name: ids.BrokerName
    topic: ids.TopicName
    queue_id: ids.QueueId
    queue_offset: ids.QueueOffset
    commit_log_offset: ids.CommitLogOffset
    popped_at_ms: ids.TimestampMs
    invisible_ms: int
    delivery_attempt: int
    handle_version: int

    @property
    def invisible_until_ms(self) -> int:
        """Wall time at which the message becomes visible again, ms since the epoch."""
        return self.popped_at_ms + self.invisible_ms


def encode(handle: ReceiptHandle) -> str:
    """The urlsafe string of ``handle``.

    Raises:
        ValueError: a name is empty or longer than ``NAME_BYTES_MAX`` bytes, or a number does
            not fit its field (programmer error: the broker only encodes what it issued).
    """
    broker = handle.broker_name.encode("utf-8")
    topic = handle.topic.encode("utf-8")
    for label, raw in (("broker name", broker), ("topic", topic)):
        if not 1 <= len(raw) <= NAME_BYTES_MAX:
            raise ValueError(f"{label} must be 1..{NAME_BYTES_MAX} UTF-8 bytes, got {len(raw)}")
    try:
        # The struct's unsigned fields have exactly the ranges below: one pack checks them all
        # (this runs for every message delivered).
        tail = _TAIL.pack(
            handle.queue_id,
            handle.queue_offset,
            handle.commit_log_offset,
            handle.popped_at_ms,
            handle.invisible_ms,
            handle.delivery_attempt,
            handle.handle_version,
        )
    except struct.error:
        _check_ranges(handle)
        raise
    body = b"".join(
        (bytes((FORMAT_VERSION, len(broker))), broker, bytes((len(topic),)), topic, tail)
    )
    raw = body + _CRC.pack(zlib.crc32(body))
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def _check_ranges(handle: ReceiptHandle) -> None:
    """Raise ``ValueError`` naming the first number of ``handle`` that does not fit its field."""
    for label, value, high in (
        ("queue_id", handle.queue_id, _U32_MAX),
        ("queue_offset", handle.queue_offset, _U64_MAX),
        ("commit_log_offset", handle.commit_log_offset, _U64_MAX),
        ("popped_at_ms", handle.popped_at_ms, _U64_MAX),
        ("invisible_ms", handle.invisible_ms, _U32_MAX),
        ("delivery_attempt", handle.delivery_attempt, _U16_MAX),
        ("handle_version", handle.handle_version, _U64_MAX),
    ):
        if not 0 <= value <= high:
            raise ValueError(f"{label}={value} does not fit 0..{high}")


def decode(text: str) -> ReceiptHandle:
    """Parse a handle string made by ``encode``.

    Raises:
        InvalidReceiptHandleError: for any string ``encode`` did not make (too long, outside
            the base64url alphabet, damaged, truncated or of an unknown version).
    """
    raw = _unwrap(text)
    if raw[0] != FORMAT_VERSION:
        raise _invalid(f"unknown receipt handle format version {raw[0]}")
    body, (crc,) = raw[: -_CRC.size], _CRC.unpack(raw[-_CRC.size :])
    if zlib.crc32(body) != crc:
        raise _invalid("receipt handle is damaged (checksum mismatch)")
    pos = 1
    broker, pos = _read_name(body, pos, "broker name")
    topic, pos = _read_name(body, pos, "topic")
    if len(body) - pos != _TAIL.size:
        raise _invalid("receipt handle has a wrong length")
    queue_id, queue_offset, cl_offset, popped_at, invisible, attempt, version = _TAIL.unpack_from(
        body, pos
    )
    return ReceiptHandle(
        broker_name=ids.BrokerName(broker),
        topic=ids.TopicName(topic),
        queue_id=ids.QueueId(queue_id),
        queue_offset=ids.QueueOffset(queue_offset),
        commit_log_offset=ids.CommitLogOffset(cl_offset),
        popped_at_ms=ids.TimestampMs(popped_at),
        invisible_ms=invisible,
        delivery_attempt=attempt,
        handle_version=version,
    )


def _unwrap(text: str) -> bytes:
    if not text:
        raise _invalid("receipt handle is empty")
    if len(text) > RECEIPT_HANDLE_CHARS_MAX:
        raise _invalid(
            f"receipt handle is {len(text)} characters; the limit is {RECEIPT_HANDLE_CHARS_MAX}"
        )
    if not _ALPHABET.match(text):
        raise _invalid("receipt handle has characters outside the base64url alphabet")
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError) as exc:
        raise _invalid(f"receipt handle is not base64url: {exc}") from exc
    if len(raw) < 1 + _CRC.size:
        raise _invalid("receipt handle is truncated")
    return raw


def _read_name(body: bytes, pos: int, label: str) -> tuple[str, int]:
    if pos >= len(body):
        raise _invalid(f"receipt handle is truncated before the {label}")
    size = body[pos]
    start, end = pos + 1, pos + 1 + size
    if size == 0 or end > len(body):
        raise _invalid(f"receipt handle has a bad {label} length")
    try:
        return body[start:end].decode("utf-8"), end
    except UnicodeDecodeError as exc:
        raise _invalid(f"receipt handle {label} is not UTF-8") from exc


def _invalid(reason: str) -> errors.InvalidReceiptHandleError:
    return errors.InvalidReceiptHandleError(reason)
