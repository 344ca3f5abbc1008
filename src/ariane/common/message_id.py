"""Client-made message ids, as the RocketMQ 5 clients make them (``MessageIdCodec``).

A producer names each message before sending it; the broker stores the id as the message's
unique key (RocketMQ ``UNIQ_KEY``) and echoes it in the send receipt and in every delivery.
Layout (17 bytes, written as 34 upper-case hex characters)::

    offset  size  field
    0       1     version, 0x01
    1       6     this host's MAC address (``uuid.getnode()``; random when there is none)
    7       2     process id, low 16 bits
    9       4     seconds since 2021-01-01T00:00:00Z, low 32 bits
    13      4     sequence number of this factory, low 32 bits

The broker's ids live here too: ``UNIQ_KEY`` of a classic message sent without one
(``MessageClientIDSetter.setUniqID``) comes from the same factory, and the offset message id
(``create_offset_message_id``: store host and CommitLog offset, RocketMQ
``MessageDecoder.createMessageId``) names where a record is stored.

Invariant: a process never repeats an id until the 32-bit sequence wraps (2^32 ids in one
second): every factory of a process draws from one process-wide sequence (as the Java client's
static codec does), so two producers of one process cannot make the same id.
"""

from __future__ import annotations

import functools
import itertools
import os
import socket
import struct
import uuid
from collections.abc import Iterator

from ariane.common import clock, ids
from ariane.common import message as message_mod

VERSION = 0x01
EPOCH_MS = 1_609_459_200_000
"""2021-01-01T00:00:00Z in ms since the Unix epoch (the clients' id epoch)."""

ID_CHARS = 34
"""Length of an id in hex characters."""

_U32 = 0xFFFF_FFFF

_PROCESS_SEQUENCE = itertools.count()
"""The sequence every factory of this process shares unless given its own."""


class MessageIdFactory:
    """Makes unique message ids (RocketMQ 5 ``MessageIdCodec.nextMessageId``).

    Args:
        time: the clock giving the seconds field.
        node: the 48-bit host part; ``uuid.getnode()`` when ``None``.
        pid: the process part; ``os.getpid()`` when ``None``.
        sequence: the sequence numbers to use; the process-wide one when ``None``.
    """

    def __init__(
        self,
        *,
        time: clock.Clock | None = None,
        node: int | None = None,
        pid: int | None = None,
        sequence: Iterator[int] | None = None,
    ) -> None:
        self._clock = time or clock.SystemClock()
        host = uuid.getnode() if node is None else node
        process = os.getpid() if pid is None else pid
        self._prefix = f"{VERSION:02X}{host & 0xFFFF_FFFF_FFFF:012X}{process & 0xFFFF:04X}"
        self._sequence = _PROCESS_SEQUENCE if sequence is None else sequence

    def _seconds(self) -> int:
        return ((self._clock.now_ms() - EPOCH_MS) // 1000) & _U32

    def next_id(self) -> ids.MessageId:
        """One new id."""
        return self.take(1)[0]

    def take(self, count: int) -> list[ids.MessageId]:
        """``count`` new ids (one clock read for all of them).

        Raises:
            ValueError: if ``count`` is negative.
        """
        if count < 0:
            raise ValueError(f"count must be >= 0, not {count}")
        head = f"{self._prefix}{self._seconds():08X}"
        sequence = self._sequence
        return [ids.MessageId(f"{head}{next(sequence) & _U32:08X}") for _ in range(count)]


@functools.lru_cache(maxsize=1024)
def pack_ip(ip: str) -> bytes | None:
    """The 4 or 16 address bytes of a literal IP, or ``None`` if it is not one."""
    family = socket.AF_INET6 if ":" in ip else socket.AF_INET
    try:
        return socket.inet_pton(family, ip)
    except OSError:
        return None


def _unpack_ip(packed: bytes) -> str:
    family = socket.AF_INET6 if len(packed) == 16 else socket.AF_INET
    return socket.inet_ntop(family, packed)


def create_offset_message_id(store_host: message_mod.HostAddress, commit_log_offset: int) -> str:
    """The offset message id: store IP, port and CommitLog offset as upper-case hex.

    Mirrors RocketMQ ``MessageDecoder.createMessageId``: IPv4 gives 4 + 4 + 8 bytes = 32 hex
    characters, IPv6 16 + 4 + 8 = 56.

    Raises:
        ValueError: if ``store_host.ip`` is not a literal IP address.
    """
    return offset_message_id_prefix(store_host) + f"{commit_log_offset & (2**64 - 1):016X}"


@functools.lru_cache(maxsize=64)
def offset_message_id_prefix(store_host: message_mod.HostAddress) -> str:
    """The host part (IP and port, upper-case hex) of every offset message id of a broker.

    Raises:
        ValueError: if ``store_host.ip`` is not a literal IP address.
    """
    packed = pack_ip(store_host.ip)
    if packed is None:
        raise ValueError(f"store host {store_host.ip!r} is not a literal IP address")
    return (packed + struct.pack(">i", store_host.port)).hex().upper()


def decode_offset_message_id(
    message_id: str,
) -> tuple[message_mod.HostAddress, ids.CommitLogOffset] | None:
    """Invert ``create_offset_message_id`` (RocketMQ ``MessageDecoder.decodeMessageId``).

    Returns:
        (store host, CommitLog offset), or ``None`` if ``message_id`` is not 32 or 56 hex chars.
    """
    if len(message_id) not in (32, 56):
        return None
    try:
        raw = bytes.fromhex(message_id)
    except ValueError:
        return None
    ip_bytes = 4 if len(raw) == 16 else 16
    port, offset = struct.unpack_from(">iq", raw, ip_bytes)
    host = message_mod.HostAddress(_unpack_ip(raw[:ip_bytes]), port)
    return host, ids.CommitLogOffset(offset)
