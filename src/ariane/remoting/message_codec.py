"""Message encodings of the classic protocol (RocketMQ ``MessageDecoder``), pure.

Three encodings travel in Remoting bodies and headers:

* **properties** (header ``i``/``properties`` of a send, inside records): ``name\\x01value\\x02``
  per property, UTF-8. Java's reader drops items with an empty name or value
  (``string2messageProperties``), so ``decode_properties`` does too and ``encode_properties``
  never writes them.
* **batch bodies** (SEND_BATCH_MESSAGE), what ``MessageDecoder.encodeMessages`` writes, per
  message, big-endian::

      4  TOTALSIZE (this message, bytes)   4  MAGICCODE (0)   4  BODYCRC (0)   4  FLAG
      4+n BODY                             2+m PROPERTIES

  The topic is the request header's; ``batch_items`` walks a body once over slices of it and
  checks that the sizes add up (``decode_batch`` decodes each message from that walk).
* **stored records** (pull, view and query bodies; the body of CHECK_TRANSACTION_STATE): the
  CommitLog record. Ariane's store already writes RocketMQ's layout byte for byte (V1 magic and
  91 fixed bytes with IPv4 hosts; V2 only for topics over 127 bytes), so a record goes out as
  stored minus the record-CRC property that Ariane keeps on disk: Apache RocketMQ's default
  (``enabledAppendPropCRC=false``) never shows ``__CRC32#`` to clients, and the classic clients
  parse records field by field. A pull body is cut from the stored bytes themselves
  (``stored_records_body``: no decode, no re-encode); view, query and check bodies are
  built from a decoded message (``encode_stored``, the same bytes).

Offset message ids (``create_offset_message_id`` / ``decode_offset_message_id``) are
``common.message_id``'s (32 upper-case hex characters for IPv4: IP, port, CommitLog offset).

Invariants: ``decode_batch(encode_batch(ms)) == ms``, ``decode_stored(encode_stored(s))``
gives ``s`` back (with ``store_size_bytes`` of the record without the CRC property), and every
malformed input raises ``MessageCodecError``.
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Iterable, Iterator, Mapping

from ariane.common import message as message_mod
from ariane.common import message_id
from ariane.store import message_codec as store_codec

PROPERTIES_BYTES_MAX = 32_767
"""Longest properties string (its length is a signed 16-bit field)."""

BATCH_MESSAGES_MAX = 4096
"""Most messages ``decode_batch`` accepts in one body (Java caps a batch at 4 MiB, not count)."""

RECORD_BYTES_MAX = 16 * 1024 * 1024
"""Largest stored record ``decode_stored`` believes (a frame's bound)."""

create_offset_message_id = message_id.create_offset_message_id
decode_offset_message_id = message_id.decode_offset_message_id

_BATCH_HEAD = struct.Struct(">iiiii")
_SHORT = struct.Struct(">h")
_INT = struct.Struct(">i")
_BATCH_FIXED_BYTES = _BATCH_HEAD.size + _SHORT.size
_NAME_VALUE = "\x01"
_PROPERTY_END = "\x02"


class MessageCodecError(ValueError):
    """A message encoding that does not decode, or a value that cannot be encoded."""


@dataclasses.dataclass(frozen=True, slots=True)
class BatchMessage:
    """One message of a batch body (RocketMQ ``Message`` as ``encodeMessage`` writes it).

    Attributes:
        body: the body bytes.
        properties: the message's properties (UNIQ_KEY, KEYS, TAGS, WAIT … and user ones).
        flag: the application flag.
        properties_bytes: the properties string as the batch held it (``decode_batch`` sets
            it; not compared), or ``None``.
    """

    body: bytes
    properties: Mapping[str, str]
    flag: int = 0
    properties_bytes: bytes | None = dataclasses.field(default=None, compare=False)


def encode_properties(properties: Mapping[str, str]) -> bytes:
    """The properties string (``messageProperties2String``), without empty names or values.

    Raises:
        MessageCodecError: a name or value holds a separator, or the result is longer than
            ``PROPERTIES_BYTES_MAX``.
    """
    kept = {name: value for name, value in properties.items() if name and value}
    data = store_codec.properties_to_bytes(kept)
    if data is None:
        raise MessageCodecError("a property name or value holds \\x01 or \\x02")
    if len(data) > PROPERTIES_BYTES_MAX:
        raise MessageCodecError(f"properties of {len(data)} bytes exceed {PROPERTIES_BYTES_MAX}")
    return data


def decode_properties(data: bytes | memoryview | str) -> dict[str, str]:
    """Parse a properties string as Java's ``string2messageProperties`` does.

    Items without a separator, with an empty name or with an empty value are skipped.

    Raises:
        MessageCodecError: the bytes are not UTF-8.
    """
    if isinstance(data, str):
        text = data
    else:
        try:
            text = bytes(data).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise MessageCodecError(f"properties are not UTF-8: {exc}") from exc
    result: dict[str, str] = {}
    for item in text.split(_PROPERTY_END):
        name, sep, value = item.partition(_NAME_VALUE)
        if sep and name and value:
            result[name] = value
    return result


def encode_batch(messages: list[BatchMessage]) -> bytes:
    """A SEND_BATCH_MESSAGE body (``MessageDecoder.encodeMessages``), as a client writes it.

    Raises:
        MessageCodecError: a message's properties cannot be encoded.
    """
    parts: list[bytes] = []
    for m in messages:
        props = encode_properties(m.properties)
        size = _BATCH_FIXED_BYTES + len(m.body) + len(props)
        parts += [_BATCH_HEAD.pack(size, 0, 0, m.flag, len(m.body)), m.body]
        parts += [_SHORT.pack(len(props)), props]
    return b"".join(parts)


def batch_items(body: bytes | memoryview) -> Iterator[tuple[int, memoryview, memoryview]]:
    """Walk a SEND_BATCH_MESSAGE body once: ``(flag, body, properties)`` of each message, the
    two as slices of ``body`` (nothing copied or decoded). Every size is checked before its
    message is yielded; a caller that must be all-or-nothing consumes the whole walk before it
    acts.

    Raises:
        MessageCodecError: sizes that do not add up (a TOTALSIZE, BODY or PROPERTIES length
            that lies), truncation, or more than ``BATCH_MESSAGES_MAX`` messages.
    """
    view = memoryview(body)
    end_of_body = len(view)
    count = p = 0
    while p < end_of_body:
        if count >= BATCH_MESSAGES_MAX:
            raise MessageCodecError(f"more than {BATCH_MESSAGES_MAX} messages in a batch")
        if p + _BATCH_FIXED_BYTES > end_of_body:
            raise MessageCodecError(f"batch message truncated at {p}")
        size, _magic, _crc, flag, body_length = _BATCH_HEAD.unpack_from(view, p)
        start = p + _BATCH_HEAD.size
        if body_length < 0 or start + body_length + _SHORT.size > end_of_body:
            raise MessageCodecError(f"body length {body_length} at {p} runs past the batch")
        (props_length,) = _SHORT.unpack_from(view, start + body_length)
        props_start = start + body_length + _SHORT.size
        end = props_start + props_length
        if props_length < 0 or end > end_of_body or end - p != size:
            raise MessageCodecError(f"sizes of the batch message at {p} do not add up")
        yield flag, view[start : start + body_length], view[props_start:end]
        count += 1
        p = end


def decode_batch(body: bytes | memoryview) -> list[BatchMessage]:
    """Split a SEND_BATCH_MESSAGE body into its messages (``MessageDecoder.decodeMessages``).

    Raises:
        MessageCodecError: as ``batch_items``; or undecodable properties.
    """
    messages: list[BatchMessage] = []
    for flag, message_body, properties in batch_items(body):
        raw = bytes(properties)
        messages.append(BatchMessage(bytes(message_body), decode_properties(raw), flag, raw))
    return messages


def encode_stored(stored: message_mod.StoredMessage) -> bytes:
    """The record of a stored message as a pull body carries it (``MessageDecoder.decode`` reads).

    Built with the store's own record codec from the message's stored values, then without the
    record-CRC property (see the module docstring). Concatenate records for a pull body.

    Raises:
        MessageCodecError: the message cannot be encoded (e.g. a host that is not a literal IP).
    """
    fields = store_codec.RecordFields(
        queue_id=stored.queue_id,
        flag=stored.message.flag,
        sys_flag=int(stored.sys_flag),
        born_timestamp_ms=stored.born_timestamp_ms,
        born_host=stored.born_host,
        store_host=stored.store_host,
        reconsume_times=stored.reconsume_times,
        prepared_transaction_offset=stored.prepared_transaction_offset,
    )
    prepared = store_codec.prepare(
        stored.topic,
        stored.body,
        stored.properties,
        fields,
        body_bytes_max=RECORD_BYTES_MAX,
        properties_bytes_max=PROPERTIES_BYTES_MAX - store_codec.CRC_PROPERTY_BYTES,
    )
    if isinstance(prepared, store_codec.PrepareProblem):
        raise MessageCodecError(f"stored message cannot be encoded: {prepared.value}")
    buffer = bytearray(prepared.total_size)
    store_codec.encode_into(
        buffer,
        0,
        prepared,
        fields,
        queue_offset=stored.queue_offset,
        commit_log_offset=stored.commit_log_offset,
        store_timestamp_ms=stored.store_timestamp_ms,
    )
    crc_bytes = store_codec.CRC_PROPERTY_BYTES
    size = prepared.total_size - crc_bytes
    properties_length_at = size - len(prepared.properties_bytes) - _SHORT.size
    _INT.pack_into(buffer, 0, size)
    _SHORT.pack_into(buffer, properties_length_at, len(prepared.properties_bytes))
    return bytes(buffer[:size])


def stored_records_body(records: Iterable[memoryview]) -> bytes:
    """A pull body from records as the CommitLog holds them, without decoding them.

    Each record is sent as stored except the record-CRC property cut off its end
    (``store_codec.without_crc_property``: TOTALSIZE and the PROPERTIES length patched), so
    the body equals ``b"".join(encode_stored(m) for m in messages)`` for the same messages
    while costing a few slices per record and one join (RocketMQ sends its stored bytes as
    they are; the property exists only with its ``enabledAppendPropCRC``, off by default).

    Args:
        records: whole records, each already checked by the store's reader.
    """
    parts: list[bytes | memoryview] = []
    for record in records:
        parts += store_codec.without_crc_property(record)
    return b"".join(parts)


def decode_stored(body: bytes | memoryview) -> list[message_mod.StoredMessage]:
    """Parse a pull/view/query body: concatenated records, as the classic clients do.

    Raises:
        MessageCodecError: a record that does not decode (bad magic, sizes, text).
    """
    view = memoryview(body)
    messages: list[message_mod.StoredMessage] = []
    p = 0
    while p < len(view):
        result = store_codec.decode(view[p:], record_bytes_max=RECORD_BYTES_MAX, check_crc=False)
        if result.status is not store_codec.DecodeStatus.OK or result.message is None:
            raise MessageCodecError(f"record at {p}: {result.status.value} {result.reason}")
        messages.append(result.message)
        p += result.size
    return messages
