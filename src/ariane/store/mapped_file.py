"""One fixed-size segment file (RocketMQ ``MappedFile``), written with ``pwrite``.

A segment is named by the 20-digit offset of its first byte in its log. It tracks two positions
relative to its start: ``wrote_position`` (bytes handed to the OS) and ``flushed_position``
(bytes made durable by ``sync``); always ``flushed_position <= wrote_position <= size_bytes``.
Bytes past ``wrote_position`` are zero. Readers ``hold`` a segment while reading so that a
concurrent ``destroy`` (retention) closes the file only after the last reader released it.
"""

from __future__ import annotations

import logging
import pathlib
import threading

from ariane.store import file_layer

_log = logging.getLogger(__name__)

FILE_NAME_DIGITS = 20
_ZERO_CHUNK_BYTES = 1024 * 1024


def file_name_of(start_offset: int) -> str:
    """The 20-digit, zero-padded name of a segment starting at ``start_offset``."""
    return f"{start_offset:0{FILE_NAME_DIGITS}d}"


def start_offset_of(name: str) -> int | None:
    """The start offset a segment file name encodes, or ``None`` for other names."""
    if len(name) != FILE_NAME_DIGITS or not name.isdigit():
        return None
    return int(name)


class MappedFile:
    """A segment of a log.

    Args:
        path: the file.
        handle: the open file.
        start_offset: offset of the first byte in the whole log, bytes.
        size_bytes: the fixed file size.
        layer: the file layer the file lives in.
    """

    def __init__(
        self,
        *,
        path: pathlib.Path,
        handle: file_layer.RandomAccessFile,
        start_offset: int,
        size_bytes: int,
        layer: file_layer.FileLayer,
    ) -> None:
        self.path = path
        self.start_offset = start_offset
        self.size_bytes = size_bytes
        self.wrote_position = 0
        self.flushed_position = 0
        self._handle = handle
        self._layer = layer
        self._refs = 1  # the segment's own reference, dropped by destroy()
        self._refs_lock = threading.Lock()

    @property
    def end_offset(self) -> int:
        """Offset just past the segment."""
        return self.start_offset + self.size_bytes

    @property
    def remaining_bytes(self) -> int:
        """Bytes still free at the end."""
        return self.size_bytes - self.wrote_position

    @property
    def is_full(self) -> bool:
        """Whether nothing more can be appended."""
        return self.wrote_position >= self.size_bytes

    def append(self, data: bytes | bytearray | memoryview) -> None:
        """Write ``data`` at ``wrote_position`` and advance it.

        Raises:
            OSError: if the write fails; ``wrote_position`` is then unchanged.
        """
        assert self.wrote_position + len(data) <= self.size_bytes, "append past segment end"
        self._handle.pwrite(data, self.wrote_position)
        self.wrote_position += len(data)

    def overwrite(self, position: int, data: bytes | bytearray | memoryview) -> None:
        """Rewrite bytes below ``wrote_position`` (a ConsumeQueue repairing a unit)."""
        assert position + len(data) <= self.wrote_position
        self._handle.pwrite(data, position)
        self.flushed_position = min(self.flushed_position, position)

    def read(self, position: int, size: int) -> bytes | None:
        """Up to ``size`` bytes from ``position``, capped at ``wrote_position``.

        Returns:
            the bytes, or ``None`` if the segment was destroyed meanwhile.
        """
        if not self.hold():
            return None
        try:
            size = max(0, min(size, self.wrote_position - position))
            return self._handle.pread(size, position) if size else b""
        finally:
            self.release()

    def flush(self) -> int:
        """Make everything written so far durable; returns the new ``flushed_position``.

        Raises:
            OSError: if ``sync`` fails; ``flushed_position`` is then unchanged.
        """
        target = self.wrote_position
        if self.flushed_position < target and self.hold():
            try:
                self._handle.sync()
            finally:
                self.release()
            self.flushed_position = max(self.flushed_position, target)
        return self.flushed_position

    def force_sync(self) -> None:
        """Sync the whole file even if it counts as flushed (recovery trusts nothing cached).

        Raises:
            OSError: if the sync fails.
        """
        if self.hold():
            try:
                self._handle.sync()
            finally:
                self.release()

    def set_positions(self, position: int) -> None:
        """Set wrote and flushed positions after recovery (bytes there are on disk)."""
        assert 0 <= position <= self.size_bytes
        self.wrote_position = self.flushed_position = position

    def zero_from(self, position: int, end_position: int | None = None) -> None:
        """Zero the file from ``position`` to ``end_position``, sync, and make ``position`` the end.

        Only chunks that hold a non-zero byte are rewritten. The caller bounds the work with
        ``end_position`` when it knows nothing past it was ever written (the CommitLog's
        high-water mark); ``None`` zeroes to the end of the file.

        Raises:
            OSError: if a read, write or sync fails.
        """
        end = self.size_bytes if end_position is None else min(end_position, self.size_bytes)
        cursor = position
        while cursor < end:
            size = min(_ZERO_CHUNK_BYTES, end - cursor)
            if any(self._handle.pread(size, cursor)):
                self._handle.pwrite(bytes(size), cursor)
            cursor += size
        self._handle.sync()
        self.set_positions(position)

    def hold(self) -> bool:
        """Take a reader reference; ``False`` if the segment is being destroyed."""
        with self._refs_lock:
            if self._refs <= 0:
                return False
            self._refs += 1
            return True

    def release(self) -> None:
        """Drop a reader reference; the last one closes the file."""
        with self._refs_lock:
            self._refs -= 1
            last = self._refs == 0
        if last:
            self._handle.close()

    def close(self) -> None:
        """Drop the segment's own reference without deleting the file (store shutdown)."""
        with self._refs_lock:
            if self._refs <= 0:
                return
        self.release()

    def destroy(self) -> None:
        """Delete the file; the handle closes once no reader holds it."""
        with self._refs_lock:
            if self._refs <= 0:
                return
        self.release()
        self._layer.remove(self.path)
        _log.info("deleted segment %s", self.path)
