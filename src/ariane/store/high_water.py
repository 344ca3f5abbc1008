"""The CommitLog's high-water mark: every CommitLog byte at or past it is zero.

Before any byte is written at or past the persisted mark, the CommitLog raises it
``HIGH_WATER_STEP_BYTES`` beyond the write and syncs it (one small fsync per 16 MiB written), so
recovery zeroes a cut tail only up to the mark (see ``commit_log``). The file holds two slots
written alternately, each ``sequence, offset`` and a CRC32: a torn slot write leaves the other.
"""

from __future__ import annotations

import pathlib
import struct
import zlib

from ariane.store import file_layer

HIGH_WATER_FILE_NAME = "high_water"
"""The high-water mark's file in the ``commitlog`` directory (not a segment name)."""
HIGH_WATER_STEP_BYTES = 16 * 1024 * 1024
"""How far past a write the high-water mark is raised: an fsync per step, zeroing up to one."""
_HIGH_WATER_SLOTS = (0, 512)
_HIGH_WATER_HEAD = struct.Struct(">qq")  # sequence, offset; then the CRC32 of these 16 bytes
_HIGH_WATER_SLOT_BYTES = _HIGH_WATER_HEAD.size + 4


class HighWaterMark:
    """The persisted bound on written CommitLog bytes; see the module docstring.

    Two 20-byte slots (at 0 and 512, written alternately, each with a sequence number and its
    CRC32), so a torn write spoils only the slot being written, as the checkpoint does.

    Args:
        layer: the file layer.
        path: the mark's file.
    """

    def __init__(self, layer: file_layer.FileLayer, path: pathlib.Path) -> None:
        self._layer = layer
        self._path = path
        self._handle: file_layer.RandomAccessFile | None = None
        self._sequence = 0
        self._loaded = False
        self.offset: int | None = None
        """Every byte at or past it is zero; ``None`` until loaded or first raised."""

    def load(self) -> int | None:
        """Read the mark (``None`` if the file is missing or both slots are torn).

        Raises:
            OSError: if the file exists but cannot be read.
        """
        self._loaded = True
        if self._layer.exists(self._path):
            handle = self._open()
            for position in _HIGH_WATER_SLOTS:
                raw = handle.pread(_HIGH_WATER_SLOT_BYTES, position)
                head = raw[: _HIGH_WATER_HEAD.size]
                if len(raw) < _HIGH_WATER_SLOT_BYTES or zlib.crc32(head) != int.from_bytes(
                    raw[_HIGH_WATER_HEAD.size :], "big"
                ):
                    continue
                sequence, offset = _HIGH_WATER_HEAD.unpack(head)
                if sequence > self._sequence:
                    self._sequence, self.offset = sequence, offset
        return self.offset

    def cover(self, end_offset: int) -> None:
        """Make sure the mark is past ``end_offset`` before bytes below it are written.

        Raises:
            OSError: if the mark cannot be written or synced (nothing may be written then).
        """
        if not self._loaded:
            self.load()  # continue the sequence on disk, or an older slot would win
        if self.offset is not None and end_offset <= self.offset:
            return
        offset = end_offset + HIGH_WATER_STEP_BYTES
        self._sequence += 1
        head = _HIGH_WATER_HEAD.pack(self._sequence, offset)
        handle = self._open()
        handle.pwrite(
            head + zlib.crc32(head).to_bytes(4, "big"), _HIGH_WATER_SLOTS[self._sequence % 2]
        )
        handle.sync()
        self.offset = offset

    def _open(self) -> file_layer.RandomAccessFile:
        if self._handle is None:
            if self._layer.exists(self._path):
                self._handle = self._layer.open_file(self._path)
            else:
                self._layer.make_dirs(self._path.parent)
                self._handle = self._layer.create_file(self._path, 1024)
        return self._handle

    def close(self) -> None:
        """Release the file handle."""
        if self._handle is not None:
            self._handle.close()
            self._handle = None
