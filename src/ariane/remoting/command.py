"""The Remoting frame: ``RemotingCommand`` values and their byte encoding, pure (no I/O, no clock).

Mirrors RocketMQ ``RemotingCommand``, ``NettyEncoder``/``NettyDecoder`` and
``RocketMQSerializable`` (remoting.md §1). Every integer is big-endian. One frame::

    size    field          notes
    4       length         bytes after this field (header-info word + header + body)
    4       header info    high byte: serialize type (0 JSON, 1 ROCKETMQ); low 24 bits: header
                           length
    n       header         JSON object, or the ROCKETMQ binary header below
    rest    body           opaque bytes (may be empty)

The ROCKETMQ binary header::

    2  code (signed)       1  language ordinal     2  version (signed)
    4  opaque              4  flag                 4+n remark (UTF-8; length 0 = null)
    4+n extFields: entries of (2+k key, 4+v value), n = bytes of all entries

The JSON header is what Java's fastjson writes: keys sorted, compact separators, nulls omitted,
``language`` and ``serializeTypeCurrentRPC`` by name, every ``extFields`` value a JSON string
(Go decodes them into ``map[string]string`` and fails the whole frame on a number)::

    {"code":105,"extFields":{"topic":"T"},"flag":0,"language":"JAVA","opaque":3,
     "serializeTypeCurrentRPC":"JSON","version":479}

``flag`` bit 0 marks a response, bit 1 a oneway request. ``opaque`` pairs a response with its
request on one connection; responses may come in any order.

Header text that is not valid UTF-8 (a JSON header, or a remark, ext key or ext value of a
ROCKETMQ header) decodes with U+FFFD in place of each bad sequence, as Java's ``new String(bytes,
UTF_8)`` in ``RemotingSerializable``/``RocketMQSerializable`` does: the request is still read, so
the server answers it (an ``AccessKey`` of bad bytes is then refused NO_PERMISSION by the security
gate) instead of closing a connection whose opaque it knows.

Invariants: ``decode_frame(encode(c)[4:])`` equals ``c`` for any command ``encode`` accepts (in
either header encoding) whose text holds no lone surrogate, and every malformed input raises
``FrameError`` and nothing else.
A frame longer than ``FRAME_BYTES_MAX`` is refused on both sides (Java closes the channel).
"""

from __future__ import annotations

import dataclasses
import json
import struct
from collections.abc import Iterable, Mapping
from typing import Any

from ariane.remoting import codes, fastjson

FRAME_BYTES_MAX = 16 * 1024 * 1024
"""Largest frame, length prefix included (Java ``com.rocketmq.remoting.frameMaxLength``)."""

LENGTH_PREFIX_BYTES = 4
"""Size of the frame's length field."""

HEADER_BYTES_MAX = 0xFFFFFF
"""Largest header: the 24 bits of the header-info word."""

RESPONSE_FLAG = 0x1
"""``flag`` bit 0 (RocketMQ ``RPC_TYPE``): the command is a response."""
ONEWAY_FLAG = 0x2
"""``flag`` bit 1 (RocketMQ ``RPC_ONEWAY``): the request wants no response."""

_LENGTH = struct.Struct(">i")
_HEADER_INFO = struct.Struct(">ii")
_BINARY_FIXED = struct.Struct(">hBhii")
_INT = struct.Struct(">i")
_SHORT = struct.Struct(">h")
_INT_MIN, _INT_MAX = -(2**31), 2**31 - 1
_SHORT_MIN, _SHORT_MAX = -(2**15), 2**15 - 1


class FrameError(ValueError):
    """A frame or header that cannot be decoded (or a command that cannot be encoded).

    The one error of this module: truncated frames, lengths out of range, an unknown serialize
    type, garbage JSON, wrong field types. A server closes the connection on it, as Java does.
    """


@dataclasses.dataclass(frozen=True, slots=True)
class RemotingCommand:
    """One Remoting request or response (RocketMQ ``RemotingCommand``).

    Attributes:
        code: the request code (``codes.RequestCode``) or, in a response, the result code
            (``codes.ResponseCode``); any 32-bit integer (16-bit in a ROCKETMQ header).
        language: the sender's language (JSON: by name; binary: ordinal).
        version: the sender's ``MQVersion`` ordinal (Java 5.3.3: 479, Go: 317).
        opaque: the request id that the response copies.
        flag: bit 0 response, bit 1 oneway (``RESPONSE_FLAG``, ``ONEWAY_FLAG``).
        remark: a human-readable message or ``None`` (Java's null).
        ext_fields: the custom header, every value a string.
        body: the body bytes (empty = Java's null).
        serialize_type: the header encoding the command arrived in; ``encode`` takes its own
            argument and ignores this field (Ariane always answers in JSON).
    """

    code: int
    language: codes.LanguageCode = codes.LanguageCode.JAVA
    version: int = codes.ROCKETMQ_VERSION_5_3_3
    opaque: int = 0
    flag: int = 0
    remark: str | None = None
    ext_fields: Mapping[str, str] = dataclasses.field(default_factory=dict)
    body: bytes = b""
    serialize_type: codes.SerializeType = codes.SerializeType.JSON

    @property
    def is_response(self) -> bool:
        """Whether ``flag`` marks a response."""
        return bool(self.flag & RESPONSE_FLAG)

    @property
    def is_oneway(self) -> bool:
        """Whether ``flag`` marks a oneway request (never answered)."""
        return bool(self.flag & ONEWAY_FLAG)


def request(
    code: int,
    ext_fields: Mapping[str, str] | None = None,
    body: bytes = b"",
    *,
    opaque: int = 0,
    oneway: bool = False,
) -> RemotingCommand:
    """A request as Ariane sends it: language JAVA, version 479 (``createRequestCommand``).

    Args:
        code: the request code.
        ext_fields: the custom header (string values).
        body: the body.
        opaque: the request id (a transport assigns its own when it sends).
        oneway: mark the request oneway (no response will come).
    """
    return RemotingCommand(
        code=int(code),
        opaque=opaque,
        flag=ONEWAY_FLAG if oneway else 0,
        ext_fields=dict(ext_fields or {}),
        body=body,
    )


def response(
    to: RemotingCommand,
    code: int = codes.ResponseCode.SUCCESS,
    *,
    remark: str | None = None,
    ext_fields: Mapping[str, str] | None = None,
    body: bytes = b"",
) -> RemotingCommand:
    """The response to ``to``: its opaque, the response flag, language JAVA, version 479.

    Args:
        to: the request answered.
        code: the result code (``codes.ResponseCode``).
        remark: the message shown by clients on errors.
        ext_fields: the response's custom header (string values).
        body: the body.
    """
    return RemotingCommand(
        code=int(code),
        opaque=to.opaque,
        flag=RESPONSE_FLAG,
        remark=remark,
        ext_fields=dict(ext_fields or {}),
        body=body,
    )


def encode(
    command: RemotingCommand, serialize: codes.SerializeType = codes.SerializeType.JSON
) -> bytes:
    """The whole frame of ``command``, length prefix included.

    Args:
        command: the command; ``ext_fields`` values must be strings.
        serialize: the header encoding (clients and Ariane use JSON by default).

    Raises:
        FrameError: a field does not fit its slot (a code outside 16 bits in a ROCKETMQ
            header, a non-string ext value) or the frame exceeds ``FRAME_BYTES_MAX``.
    """
    _check_encodable(command)
    if serialize is codes.SerializeType.JSON:
        header = _json_header(command)
    else:
        header = _binary_header(command)
    if len(header) > HEADER_BYTES_MAX:
        raise FrameError(f"header of {len(header)} bytes exceeds {HEADER_BYTES_MAX}")
    length = 4 + len(header) + len(command.body)
    if LENGTH_PREFIX_BYTES + length > FRAME_BYTES_MAX:
        raise FrameError(f"frame of {LENGTH_PREFIX_BYTES + length} bytes exceeds {FRAME_BYTES_MAX}")
    info = (int(serialize) << 24) | len(header)
    return _HEADER_INFO.pack(length, info) + header + command.body


def _check_encodable(command: RemotingCommand) -> None:
    for name, number in (
        ("opaque", command.opaque),
        ("flag", command.flag),
        ("code", command.code),
    ):
        if not _INT_MIN <= number <= _INT_MAX:
            raise FrameError(f"{name} {number} does not fit 32 bits")
    # Typed as str → str, but callers build them from untyped JSON; Go fails on a non-string.
    entries: Iterable[tuple[object, object]] = command.ext_fields.items()
    for key, value in entries:
        if not isinstance(key, str) or not isinstance(value, str):
            raise FrameError(f"extFields entry {key!r}: {value!r} is not string to string")


def _json_header(command: RemotingCommand) -> bytes:
    header: dict[str, Any] = {
        "code": command.code,
        "flag": command.flag,
        "language": command.language.name,
        "opaque": command.opaque,
        "serializeTypeCurrentRPC": "JSON",
        "version": command.version,
    }
    if command.ext_fields:
        header["extFields"] = dict(command.ext_fields)
    if command.remark is not None:
        header["remark"] = command.remark
    try:
        return fastjson.dumps(header)
    except fastjson.JsonError as exc:
        raise FrameError(str(exc)) from exc


def _binary_header(command: RemotingCommand) -> bytes:
    if not _SHORT_MIN <= command.code <= _SHORT_MAX:
        raise FrameError(f"code {command.code} does not fit a ROCKETMQ header's 16 bits")
    if not _SHORT_MIN <= command.version <= _SHORT_MAX:
        raise FrameError(f"version {command.version} does not fit 16 bits")
    parts = [
        _BINARY_FIXED.pack(
            command.code, int(command.language), command.version, command.opaque, command.flag
        )
    ]
    remark = (command.remark or "").encode("utf-8", "surrogatepass")
    parts += [_INT.pack(len(remark)), remark]
    entries = []
    for key, value in command.ext_fields.items():
        key_bytes = key.encode("utf-8", "surrogatepass")
        value_bytes = value.encode("utf-8", "surrogatepass")
        if len(key_bytes) > _SHORT_MAX:
            raise FrameError(f"extFields key of {len(key_bytes)} bytes does not fit 16 bits")
        entries += [
            _SHORT.pack(len(key_bytes)),
            key_bytes,
            _INT.pack(len(value_bytes)),
            value_bytes,
        ]
    ext = b"".join(entries)
    parts += [_INT.pack(len(ext)), ext]
    return b"".join(parts)


def read_frame_length(prefix: bytes | memoryview) -> int:
    """The frame length announced by a 4-byte prefix: the bytes to read next.

    Raises:
        FrameError: fewer than 4 bytes, or a length below 4 (no room for the header-info
            word) or above ``FRAME_BYTES_MAX - LENGTH_PREFIX_BYTES``.
    """
    if len(prefix) < LENGTH_PREFIX_BYTES:
        raise FrameError(f"length prefix truncated at {len(prefix)} bytes")
    (length,) = _LENGTH.unpack_from(prefix, 0)
    if not 4 <= length <= FRAME_BYTES_MAX - LENGTH_PREFIX_BYTES:
        raise FrameError(f"frame length {length} outside [4, {FRAME_BYTES_MAX - 4}]")
    return int(length)


def decode(data: bytes | memoryview) -> RemotingCommand:
    """Decode one whole frame, length prefix included; the bytes must end with it.

    Raises:
        FrameError: malformed, truncated or trailed by extra bytes.
    """
    view = memoryview(data)
    length = read_frame_length(view)
    if len(view) != LENGTH_PREFIX_BYTES + length:
        raise FrameError(f"frame announces {length} bytes, {len(view) - 4} follow")
    return decode_frame(view[LENGTH_PREFIX_BYTES:])


def decode_frame(frame: bytes | memoryview) -> RemotingCommand:
    """Decode the bytes after a frame's length prefix (as ``read_frame_length`` announced).

    Args:
        frame: header-info word, header and body.

    Returns:
        the command, with ``serialize_type`` set to the header encoding found.

    Raises:
        FrameError: a truncated frame, an unknown serialize type, a header length past the
            frame, garbage JSON or a binary header that does not add up.
    """
    view = memoryview(frame)
    if len(view) < 4:
        raise FrameError(f"frame of {len(view)} bytes has no header-info word")
    (info,) = _INT.unpack_from(view, 0)
    kind, header_length = (info >> 24) & 0xFF, info & 0xFFFFFF
    if 4 + header_length > len(view):
        raise FrameError(f"header length {header_length} runs past the frame ({len(view)} bytes)")
    header = view[4 : 4 + header_length]
    body = bytes(view[4 + header_length :])
    if kind == codes.SerializeType.JSON:
        return dataclasses.replace(_decode_json_header(header), body=body)
    if kind == codes.SerializeType.ROCKETMQ:
        return dataclasses.replace(_decode_binary_header(header), body=body)
    raise FrameError(f"unknown serialize type {kind}")


def _decode_json_header(header: memoryview) -> RemotingCommand:
    try:
        fields = json.loads(bytes(header).decode("utf-8", "replace"))
    except (ValueError, RecursionError) as exc:
        raise FrameError(f"header is not JSON: {exc}") from exc
    if not isinstance(fields, dict):
        raise FrameError("JSON header is not an object")
    remark = fields.get("remark")
    if remark is not None and not isinstance(remark, str):
        raise FrameError("remark is not a string")
    return RemotingCommand(
        code=_json_int(fields, "code"),
        language=_language_by_name(fields.get("language")),
        version=_json_int(fields, "version"),
        opaque=_json_int(fields, "opaque"),
        flag=_json_int(fields, "flag"),
        remark=remark,
        ext_fields=_json_ext_fields(fields.get("extFields")),
        serialize_type=codes.SerializeType.JSON,
    )


def _json_int(fields: Mapping[str, object], name: str) -> int:
    # A missing number reads as 0, as Java's primitive int fields do.
    value = fields.get(name, 0)
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int):
        raise FrameError(f"{name} is not an integer: {value!r}")
    if not _INT_MIN <= value <= _INT_MAX:
        raise FrameError(f"{name} {value} does not fit 32 bits")
    return value


def _language_by_name(value: object) -> codes.LanguageCode:
    # Unknown names read as OTHER: a client of a newer release must still be served.
    if value is None:
        return codes.LanguageCode.JAVA
    if not isinstance(value, str):
        raise FrameError(f"language is not a name: {value!r}")
    return codes.LanguageCode.__members__.get(value, codes.LanguageCode.OTHER)


def _json_ext_fields(value: object) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise FrameError("extFields is not an object")
    result: dict[str, str] = {}
    for key, item in value.items():
        # Java writes strings; numbers and booleans are accepted as their Java text, nulls
        # dropped (fastjson omits them), anything nested refused.
        if item is None:
            continue
        if isinstance(item, bool):
            result[key] = "true" if item else "false"
        elif isinstance(item, (str, int)):
            result[key] = str(item)
        else:
            raise FrameError(f"extFields value of {key!r} is not a string: {item!r}")
    return result


def _decode_binary_header(header: memoryview) -> RemotingCommand:
    try:
        code, language, version, opaque, flag = _BINARY_FIXED.unpack_from(header, 0)
        p = _BINARY_FIXED.size
        remark, p = _read_string(header, p, _INT)
        (ext_length,) = _INT.unpack_from(header, p)
        p += 4
        if ext_length < 0 or p + ext_length != len(header):
            raise FrameError(f"extFields length {ext_length} does not end the header")
        ext: dict[str, str] = {}
        while p < len(header):
            key, p = _read_string(header, p, _SHORT)
            value, p = _read_string(header, p, _INT)
            ext[key or ""] = value or ""
    except struct.error as exc:
        raise FrameError(f"binary header does not decode: {exc}") from exc
    try:
        language_code = codes.LanguageCode(language)
    except ValueError:
        language_code = codes.LanguageCode.OTHER
    return RemotingCommand(
        code=code,
        language=language_code,
        version=version,
        opaque=opaque,
        flag=flag,
        remark=remark,
        ext_fields=ext,
        serialize_type=codes.SerializeType.ROCKETMQ,
    )


def _read_string(view: memoryview, p: int, length: struct.Struct) -> tuple[str | None, int]:
    (n,) = length.unpack_from(view, p)
    p += length.size
    if n < 0 or p + n > len(view):
        raise FrameError(f"string of {n} bytes runs past the header")
    if n == 0:
        return None, p  # Java decodes a zero length as null
    return bytes(view[p : p + n]).decode("utf-8", "replace"), p + n
