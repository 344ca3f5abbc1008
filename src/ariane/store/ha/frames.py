"""The HA stream's wire format: pure encode/decode, no I/O, no clock (RocketMQ ``HAConnection``).

A slave talks to its master's HA port over one TCP connection. Every frame starts with a
one-byte kind; all integers are big-endian and signed (Java ``long``/``int``).

Slave → master, fixed 17 bytes (RocketMQ's 8-byte offset report, plus the slave's epoch so that
the master can fence itself or tell a diverged slave where to cut, as ``AutoSwitchHAClient``)::

    offset  size  field
    0       1     kind          HELLO (1, first frame of a connection) or REPORT (2)
    1       8     epoch         the epoch of the slave's last CommitLog byte (0: none)
    9       8     max_offset    the slave's max CommitLog offset (bytes it holds)

Master → slave, a 33-byte header then ``body_size`` bytes of CommitLog (RocketMQ's
``[phyOffset 8][bodySize 4]`` transfer header with the epoch fields of the controller mode)::

    offset  size  field
    0       1     kind                TRANSFER (3) or TRUNCATE (4)
    1       8     epoch               the epoch the body's bytes were written under
    9       8     epoch_start_offset  where that epoch starts in the CommitLog
    17      8     offset              TRANSFER: CommitLog offset of the body's first byte;
                                      TRUNCATE: cut the slave's CommitLog here, then HELLO again
    25      4     body_size           bytes that follow (0 for TRUNCATE and for heartbeats)
    29      4     reserved            0

Invariants: ``body_size`` never exceeds the reader's cap (``decode_transfer_header`` refuses a
larger one as a protocol error, so a corrupt or hostile peer cannot make us allocate), offsets
and epochs are never negative.
"""

from __future__ import annotations

import dataclasses
import enum
import struct


class FrameError(ValueError):
    """A frame that breaks the layout: unknown kind, negative field or oversize body."""


class Kind(enum.IntEnum):
    """The first byte of every frame."""

    HELLO = 1
    REPORT = 2
    TRANSFER = 3
    TRUNCATE = 4


_REPORT = struct.Struct(">Bqq")
_TRANSFER = struct.Struct(">BqqqiI")

REPORT_BYTES = _REPORT.size
"""Size of a slave → master frame (17)."""
TRANSFER_HEADER_BYTES = _TRANSFER.size
"""Size of a master → slave header (33)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Report:
    """A slave's HELLO or REPORT: its epoch and max CommitLog offset."""

    kind: Kind
    epoch: int
    max_offset: int


@dataclasses.dataclass(frozen=True, slots=True)
class TransferHeader:
    """A master's TRANSFER or TRUNCATE header (the body, if any, follows on the wire)."""

    kind: Kind
    epoch: int
    epoch_start_offset: int
    offset: int
    body_size: int


def encode_report(report: Report) -> bytes:
    """The 17 bytes of a HELLO or REPORT frame."""
    assert report.kind in (Kind.HELLO, Kind.REPORT), "a slave sends HELLO or REPORT"
    assert report.epoch >= 0 and report.max_offset >= 0
    return _REPORT.pack(report.kind, report.epoch, report.max_offset)


def decode_report(data: bytes | memoryview) -> Report:
    """Decode exactly ``REPORT_BYTES`` bytes.

    Raises:
        FrameError: wrong length, unknown kind or a negative field.
    """
    if len(data) != REPORT_BYTES:
        raise FrameError(f"a report is {REPORT_BYTES} bytes, not {len(data)}")
    kind, epoch, max_offset = _REPORT.unpack(data)
    if kind not in (Kind.HELLO, Kind.REPORT) or epoch < 0 or max_offset < 0:
        raise FrameError(f"bad report: kind={kind} epoch={epoch} max_offset={max_offset}")
    return Report(Kind(kind), epoch, max_offset)


def encode_transfer(header: TransferHeader, body: bytes | memoryview = b"") -> bytes:
    """A TRANSFER (with ``body``) or TRUNCATE frame, header and body in one buffer."""
    assert header.kind in (Kind.TRANSFER, Kind.TRUNCATE), "a master sends TRANSFER or TRUNCATE"
    assert header.body_size == len(body), "body_size must match the body"
    assert min(header.epoch, header.epoch_start_offset, header.offset) >= 0
    packed = _TRANSFER.pack(
        header.kind, header.epoch, header.epoch_start_offset, header.offset, header.body_size, 0
    )
    return packed + bytes(body)


def decode_transfer_header(data: bytes | memoryview, *, body_bytes_max: int) -> TransferHeader:
    """Decode exactly ``TRANSFER_HEADER_BYTES`` bytes.

    Args:
        data: the header bytes.
        body_bytes_max: the largest body the reader accepts, bytes.

    Raises:
        FrameError: wrong length, unknown kind, negative field, body over ``body_bytes_max``,
            or a TRUNCATE with a body.
    """
    if len(data) != TRANSFER_HEADER_BYTES:
        raise FrameError(f"a transfer header is {TRANSFER_HEADER_BYTES} bytes, not {len(data)}")
    kind, epoch, epoch_start, offset, size, _reserved = _TRANSFER.unpack(data)
    if kind not in (Kind.TRANSFER, Kind.TRUNCATE):
        raise FrameError(f"unknown master frame kind {kind}")
    if min(epoch, epoch_start, offset, size) < 0:
        raise FrameError("negative field in a transfer header")
    if size > body_bytes_max:
        raise FrameError(f"body of {size} bytes exceeds the cap of {body_bytes_max}")
    if kind == Kind.TRUNCATE and size:
        raise FrameError("a TRUNCATE frame carries no body")
    return TransferHeader(Kind(kind), epoch, epoch_start, offset, size)
