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

Invariant: a process never repeats an id until the 32-bit sequence wraps (2^32 ids in one
second): every factory of a process draws from one process-wide sequence (as the Java client's
static codec does), so two producers of one process cannot make the same id.
"""

from __future__ import annotations

import itertools
import os
import uuid
from collections.abc import Iterator

from ariane.common import clock, ids

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
