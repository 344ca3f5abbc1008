"""The ``checkpoint`` file and the ``abort`` marker (RocketMQ ``StoreCheckpoint``, abort file).

The checkpoint says how far the store is known to be safe: every CommitLog byte below
``flushed_commit_log_offset`` was synced, and every record below
``dispatched_commit_log_offset`` has its ConsumeQueue units synced. Its writer must sync the
CommitLog and the ConsumeQueues before writing the offsets it claims.

The file is one 4 KiB page with two 64-byte slots at 0 and 512 (different disk sectors),
written alternately; each slot carries a sequence number and its own CRC32, so a torn write
destroys at most the slot being written and the reader takes the valid slot with the highest
sequence. Slot layout (big-endian)::

    offset  size  field
    0       4     magic 0x41524350 ("ARCP")
    4       4     version (1)
    8       8     sequence
    16      8     physic_msg_timestamp_ms     store time of the last flushed record
    24      8     logics_msg_timestamp_ms     store time of the last dispatched record
    32      8     index_msg_timestamp_ms      store time of the last indexed record
    40      8     flushed_commit_log_offset
    48      8     dispatched_commit_log_offset
    56      4     CRC32 of bytes 0..56

The ``abort`` file exists while the store is open; finding it at start means the last stop was
not clean.
"""

from __future__ import annotations

import dataclasses
import logging
import pathlib
import struct
import zlib

from ariane.store import file_layer

_log = logging.getLogger(__name__)

FILE_BYTES = 4096
SLOT_POSITIONS = (0, 512)
_MAGIC = 0x41524350
_VERSION = 1
_BODY = struct.Struct(">iiqqqqqq")
_CRC = struct.Struct(">I")


@dataclasses.dataclass(frozen=True, slots=True)
class Checkpoint:
    """What the store knows to be durable; all times ms since epoch, offsets CommitLog bytes."""

    physic_msg_timestamp_ms: int = 0
    logics_msg_timestamp_ms: int = 0
    index_msg_timestamp_ms: int = 0
    flushed_commit_log_offset: int = 0
    dispatched_commit_log_offset: int = 0


def encode_slot(checkpoint: Checkpoint, sequence: int) -> bytes:
    """The 60 bytes of one slot."""
    body = _BODY.pack(
        _MAGIC,
        _VERSION,
        sequence,
        checkpoint.physic_msg_timestamp_ms,
        checkpoint.logics_msg_timestamp_ms,
        checkpoint.index_msg_timestamp_ms,
        checkpoint.flushed_commit_log_offset,
        checkpoint.dispatched_commit_log_offset,
    )
    return body + _CRC.pack(zlib.crc32(body))


def decode_slot(data: bytes) -> tuple[int, Checkpoint] | None:
    """(sequence, checkpoint) of a slot, or ``None`` if it is empty, torn or foreign."""
    if len(data) < _BODY.size + _CRC.size:
        return None
    body = data[: _BODY.size]
    (crc,) = _CRC.unpack_from(data, _BODY.size)
    if zlib.crc32(body) != crc:
        return None
    magic, version, sequence, *values = _BODY.unpack(body)
    if magic != _MAGIC or version != _VERSION:
        return None
    return sequence, Checkpoint(*values)


class CheckpointFile:
    """Reads and writes the checkpoint through the file layer.

    Args:
        layer: the file layer.
        path: the ``checkpoint`` file.
    """

    def __init__(self, layer: file_layer.FileLayer, path: pathlib.Path) -> None:
        self._layer = layer
        self._path = path
        self._sequence = 0
        self._handle: file_layer.RandomAccessFile | None = None

    def load(self) -> Checkpoint | None:
        """The newest valid checkpoint, or ``None`` if there is none.

        Raises:
            OSError: if the file exists but cannot be read.
        """
        if not self._layer.exists(self._path):
            return None
        handle = self._open()
        best: tuple[int, Checkpoint] | None = None
        for position in SLOT_POSITIONS:
            slot = decode_slot(handle.pread(_BODY.size + _CRC.size, position))
            if slot is not None and (best is None or slot[0] > best[0]):
                best = slot
        if best is None:
            _log.warning("checkpoint %s has no valid slot", self._path)
            return None
        self._sequence = best[0]
        return best[1]

    def _open(self) -> file_layer.RandomAccessFile:
        if self._handle is None:
            if self._layer.exists(self._path):
                self._handle = self._layer.open_file(self._path)
            else:
                self._layer.make_dirs(self._path.parent)
                self._handle = self._layer.create_file(self._path, FILE_BYTES)
        return self._handle

    def write(self, checkpoint: Checkpoint) -> None:
        """Write ``checkpoint`` into the older slot and sync.

        Raises:
            OSError: if the write or sync fails.
        """
        handle = self._open()
        self._sequence += 1
        handle.pwrite(encode_slot(checkpoint, self._sequence), SLOT_POSITIONS[self._sequence % 2])
        handle.sync()

    def close(self) -> None:
        """Release the file handle."""
        if self._handle is not None:
            self._handle.close()
            self._handle = None


def create_abort_marker(layer: file_layer.FileLayer, path: pathlib.Path) -> None:
    """Create the ``abort`` file (the store is running)."""
    layer.make_dirs(path.parent)
    layer.create_file(path, 0).close()


def abort_marker_exists(layer: file_layer.FileLayer, path: pathlib.Path) -> bool:
    """Whether the last run did not stop cleanly."""
    return layer.exists(path)


def remove_abort_marker(layer: file_layer.FileLayer, path: pathlib.Path) -> None:
    """Delete the ``abort`` file (clean stop)."""
    layer.remove(path)
