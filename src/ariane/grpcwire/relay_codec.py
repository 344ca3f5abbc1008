"""The relay's wire format: gRPC calls forwarded between front-end workers and the store owner.

A broker with front-end workers (``broker.frontend``) runs N processes that terminate the
clients' gRPC connections and one process that owns the store. Each worker forwards every call
it receives, as frames over one Unix stream socket, to the owner, which runs the handlers and
sends the responses back. This module is the pure codec of those frames (standard library only,
no I/O): the same role as RocketMQ's ``RemotingCommand`` codec between its Proxy (cluster
mode) and broker, but carrying serialized v2 protobuf messages unchanged.

Frame layout (big-endian)::

    u32 length      bytes after this field (kind + call id + payload)
    u8  kind        FrameKind
    u64 call_id     chosen by the worker, unique per connection while the call lives
    ... payload     per kind:
        HELLO       u32 pid, u16 worker index                 (worker -> owner, call id 0)
        OPEN        u8 flags, i64 deadline µs (-1: none), u16+path, u16+peer,
                    u16 header count, per header u16+key u32+value, then the request
                    message when flags has OPEN_HAS_MESSAGE   (worker -> owner)
        MESSAGE     one serialized protobuf message           (both ways)
        HALF_CLOSE  empty: the client sends no more requests  (worker -> owner)
        CANCEL      empty: the client went away               (worker -> owner)
        END         u8 gRPC status code (0 = OK), u32+details (owner -> worker)

``u16+x`` / ``u32+x`` is a length of that width followed by ``x`` in UTF-8. A unary call is one
OPEN frame with ``OPEN_HAS_MESSAGE | OPEN_HALF_CLOSED`` and is answered by MESSAGE + END.

Invariants: a frame is at most ``FRAME_BYTES_MAX`` long (the decoder refuses longer ones with
``FrameError`` and keeps nothing of them); ``FrameDecoder`` returns only whole frames, in order,
whatever the chunking of its input.
"""

from __future__ import annotations

import dataclasses
import enum
import struct
from collections.abc import Sequence

MIB = 1024 * 1024
FRAME_BYTES_MAX = 131 * MIB
"""Largest frame: a 130 MiB gRPC message (the servers' limit) plus headers."""

HEADER_COUNT_MAX = 256
"""Most headers one OPEN carries (clients send about ten)."""

OPEN_HAS_MESSAGE = 0x01
"""OPEN flag: the payload ends with the first request message."""
OPEN_HALF_CLOSED = 0x02
"""OPEN flag: no more request messages follow (unary and server-streaming calls)."""

NO_DEADLINE = -1
"""``deadline_us`` of a call without a deadline."""

_PREFIX = struct.Struct(">IBQ")
_PREFIX_TAIL_BYTES = _PREFIX.size - 4
_OPEN_FIXED = struct.Struct(">Bq")
_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
_HELLO = struct.Struct(">IH")
_END_FIXED = struct.Struct(">BI")


class FrameKind(enum.IntEnum):
    """What a frame says (see the module docstring for each payload)."""

    HELLO = 1
    OPEN = 2
    MESSAGE = 3
    HALF_CLOSE = 4
    CANCEL = 5
    END = 6


class FrameError(ValueError):
    """A frame that does not follow the layout: the connection must be dropped."""


@dataclasses.dataclass(frozen=True, slots=True)
class Frame:
    """One decoded frame: its kind, call id and raw payload."""

    kind: FrameKind
    call_id: int
    payload: bytes


@dataclasses.dataclass(frozen=True, slots=True)
class OpenCall:
    """The OPEN payload: one call as the worker received it.

    Attributes:
        path: the gRPC method path, ``/apache.rocketmq.v2.MessagingService/SendMessage``.
        peer: the client's address as gRPC reports it (``ipv4:127.0.0.1:53312``).
        headers: the call's text headers, ``(key, value)`` in arrival order.
        deadline_us: time left until the client's deadline, in µs; ``NO_DEADLINE`` if none.
        message: the first request message when the OPEN carries it, else ``None``.
        half_closed: ``True`` when no further request messages follow.
    """

    path: str
    peer: str
    headers: tuple[tuple[str, str], ...]
    deadline_us: int
    message: bytes | None
    half_closed: bool


def _frame(kind: FrameKind, call_id: int, payload: bytes) -> bytes:
    length = _PREFIX_TAIL_BYTES + len(payload)
    if length + 4 > FRAME_BYTES_MAX:
        raise FrameError(f"a {kind.name} frame of {length + 4} bytes exceeds {FRAME_BYTES_MAX}")
    return _PREFIX.pack(length, kind, call_id) + payload


def _text(value: str, width: struct.Struct) -> bytes:
    raw = value.encode()
    if len(raw) >= 1 << (8 * width.size):
        raise FrameError(f"a text field of {len(raw)} bytes does not fit {width.size} bytes")
    return width.pack(len(raw)) + raw


def encode_hello(pid: int, worker_index: int) -> bytes:
    """The HELLO frame a worker sends once its gRPC server is listening."""
    return _frame(FrameKind.HELLO, 0, _HELLO.pack(pid, worker_index))


def decode_hello(payload: bytes) -> tuple[int, int]:
    """``(pid, worker_index)`` of a HELLO payload.

    Raises:
        FrameError: if the payload is not 6 bytes.
    """
    if len(payload) != _HELLO.size:
        raise FrameError(f"HELLO payload is {len(payload)} bytes, not {_HELLO.size}")
    pid, index = _HELLO.unpack(payload)
    return int(pid), int(index)


def encode_open(call_id: int, call: OpenCall) -> bytes:
    """The OPEN frame of ``call``.

    Raises:
        FrameError: too many headers, a field too long, or the frame above the limit.
    """
    if len(call.headers) > HEADER_COUNT_MAX:
        raise FrameError(f"{len(call.headers)} headers; at most {HEADER_COUNT_MAX}")
    flags = (OPEN_HAS_MESSAGE if call.message is not None else 0) | (
        OPEN_HALF_CLOSED if call.half_closed else 0
    )
    parts = [
        _OPEN_FIXED.pack(flags, call.deadline_us),
        _text(call.path, _U16),
        _text(call.peer, _U16),
        _U16.pack(len(call.headers)),
    ]
    for key, value in call.headers:
        parts.append(_text(key, _U16))
        parts.append(_text(value, _U32))
    if call.message is not None:
        parts.append(call.message)
    return _frame(FrameKind.OPEN, call_id, b"".join(parts))


class _Reader:
    """Reads fields off a payload, raising ``FrameError`` when it runs short."""

    def __init__(self, payload: bytes) -> None:
        self._view = memoryview(payload)
        self.at = 0

    def take(self, size: int) -> memoryview:
        end = self.at + size
        if end > len(self._view):
            raise FrameError("payload ends inside a field")
        piece = self._view[self.at : end]
        self.at = end
        return piece

    def text(self, width: struct.Struct) -> str:
        (size,) = width.unpack(self.take(width.size))
        try:
            return str(self.take(size), "utf-8")
        except UnicodeDecodeError as exc:
            raise FrameError("a text field is not UTF-8") from exc

    def rest(self) -> bytes:
        piece = bytes(self._view[self.at :])
        self.at = len(self._view)
        return piece


def decode_open(payload: bytes) -> OpenCall:
    """The call an OPEN payload describes.

    Runs once per forwarded call with about ten headers, so it reads the fields with
    ``unpack_from`` and slices in one loop rather than through ``_Reader`` (a third of the
    owner's relay CPU went to per-field method calls).

    Raises:
        FrameError: if the payload is truncated, not UTF-8 where text is expected, or has too
            many headers.
    """
    try:
        flags, deadline_us = _OPEN_FIXED.unpack_from(payload, 0)
        path, at = _text_at(payload, _OPEN_FIXED.size, _U16)
        peer, at = _text_at(payload, at, _U16)
        (count,) = _U16.unpack_from(payload, at)
        at += _U16.size
        if count > HEADER_COUNT_MAX:
            raise FrameError(f"{count} headers; at most {HEADER_COUNT_MAX}")
        headers = []
        key_size, value_size = _U16.unpack_from, _U32.unpack_from
        for _ in range(count):
            key_end = at + 2 + key_size(payload, at)[0]
            value_at = key_end + 4
            value_end = value_at + value_size(payload, key_end)[0]
            if value_end > len(payload):
                raise FrameError("payload ends inside a field")
            headers.append(
                (str(payload[at + 2 : key_end], "utf-8"), str(payload[value_at:value_end], "utf-8"))
            )
            at = value_end
    except struct.error as exc:
        raise FrameError("payload ends inside a field") from exc
    except UnicodeDecodeError as exc:
        raise FrameError("a text field is not UTF-8") from exc
    message = payload[at:] if flags & OPEN_HAS_MESSAGE else None
    return OpenCall(
        path=path,
        peer=peer,
        headers=tuple(headers),
        deadline_us=int(deadline_us),
        message=message,
        half_closed=bool(flags & OPEN_HALF_CLOSED),
    )


def _text_at(payload: bytes, at: int, width: struct.Struct) -> tuple[str, int]:
    """The ``width``-prefixed UTF-8 text at ``at`` and the offset after it (raises
    ``struct.error`` / ``FrameError`` / ``UnicodeDecodeError`` for the caller to map)."""
    end = at + width.size + width.unpack_from(payload, at)[0]
    if end > len(payload):
        raise FrameError("payload ends inside a field")
    return str(payload[at + width.size : end], "utf-8"), end


def encode_message(call_id: int, message: bytes) -> bytes:
    """A MESSAGE frame carrying one serialized protobuf message."""
    return _frame(FrameKind.MESSAGE, call_id, message)


def encode_half_close(call_id: int) -> bytes:
    """The HALF_CLOSE frame: the client sends no more requests on this call."""
    return _frame(FrameKind.HALF_CLOSE, call_id, b"")


def encode_cancel(call_id: int) -> bytes:
    """The CANCEL frame: the client cancelled or disconnected; the owner stops the call."""
    return _frame(FrameKind.CANCEL, call_id, b"")


def end_payload(code: int, details: str) -> bytes:
    """The payload of an END frame (see ``encode_end``).

    Raises:
        FrameError: if ``code`` is not a gRPC status code (0..16).
    """
    if not 0 <= code <= 16:
        raise FrameError(f"{code} is not a gRPC status code (0..16)")
    raw = details.encode()
    return _END_FIXED.pack(code, len(raw)) + raw


def encode_end(call_id: int, code: int, details: str) -> bytes:
    """The END frame: the call is over, with gRPC status ``code`` (0 = OK) and ``details``.

    Raises:
        FrameError: if ``code`` is not a gRPC status code (0..16).
    """
    return _frame(FrameKind.END, call_id, end_payload(code, details))


def decode_end(payload: bytes) -> tuple[int, str]:
    """``(grpc status code, details)`` of an END payload.

    Raises:
        FrameError: if the payload is truncated or the details are not UTF-8.
    """
    reader = _Reader(payload)
    code, size = _END_FIXED.unpack(reader.take(_END_FIXED.size))
    try:
        details = str(reader.take(size), "utf-8")
    except UnicodeDecodeError as exc:
        raise FrameError("END details are not UTF-8") from exc
    return int(code), details


class FrameDecoder:
    """Splits a byte stream into frames, whatever the chunking.

    ``feed`` keeps at most one partial frame buffered; a length above ``FRAME_BYTES_MAX`` or an
    unknown kind raises ``FrameError`` (the stream cannot be resynchronised: drop it).
    """

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[Frame]:
        """Append ``data`` and return every frame now complete, in order.

        Raises:
            FrameError: a frame is too long or has an unknown kind.
        """
        buffer = self._buffer
        buffer += data
        frames: list[Frame] = []
        at = 0
        available = len(buffer)
        while available - at >= _PREFIX.size:
            length, kind, call_id = _PREFIX.unpack_from(buffer, at)
            if length + 4 > FRAME_BYTES_MAX or length < _PREFIX_TAIL_BYTES:
                raise FrameError(f"frame length {length} is outside the layout's bounds")
            end = at + 4 + length
            if end > available:
                break
            try:
                frame_kind = FrameKind(kind)
            except ValueError as exc:
                raise FrameError(f"unknown frame kind {kind}") from exc
            frames.append(Frame(frame_kind, call_id, bytes(buffer[at + _PREFIX.size : end])))
            at = end
        if at:
            del buffer[:at]
        return frames

    @property
    def buffered_bytes(self) -> int:
        """Bytes of an incomplete frame held back."""
        return len(self._buffer)


def join(frames: Sequence[bytes]) -> bytes:
    """Several encoded frames as one write."""
    return b"".join(frames)
