"""A log made of contiguous fixed-size segments in one directory (RocketMQ ``MappedFileQueue``).

Invariants: segment ``i + 1`` starts where segment ``i`` ends; every segment but the last is
full; the log's ``max_offset`` (bytes written) is the last segment's start plus its wrote
position; bytes at and past ``max_offset`` are zero. Only one thread appends (the store's put
lock); flushers and readers run concurrently and see an immutable tuple of segments that is
replaced under ``_lock`` when segments are created or deleted.
"""

from __future__ import annotations

import dataclasses
import errno
import logging
import pathlib
import threading
import time
from collections.abc import Callable

from ariane.store import file_layer, mapped_file

_log = logging.getLogger(__name__)


DISK_FULL_WARNING_INTERVAL_S = 10.0
"""Least time between two warnings that a segment could not be allocated (a full disk fails
every append until space frees; one line per interval, not one traceback per request)."""

_PAD_CHUNK_BYTES = 1024 * 1024
_DISK_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})


def _pad(handle: file_layer.RandomAccessFile, size: int, size_bytes: int) -> None:
    """Extend an open file from ``size`` to ``size_bytes`` with zeros and sync it."""
    while size < size_bytes:
        chunk = min(size_bytes - size, _PAD_CHUNK_BYTES)
        handle.pwrite(bytes(chunk), size)
        size += chunk
    handle.sync()


class StoreLayoutError(Exception):
    """Files on disk do not form a valid log (wrong size, gap); refusing to guess."""


class DiskFullError(OSError):
    """A new segment could not be allocated because the volume (or quota) is full."""


@dataclasses.dataclass(frozen=True, slots=True)
class SegmentInfo:
    """What a retention policy needs to know about a segment.

    Attributes:
        start_offset: offset of its first byte in the log.
        size_bytes: file size.
        modified_ms: last modification time, ms since epoch.
        path: the file.
    """

    start_offset: int
    size_bytes: int
    modified_ms: int
    path: pathlib.Path

    @property
    def end_offset(self) -> int:
        """Offset just past the segment."""
        return self.start_offset + self.size_bytes


class MappedFileQueue:
    """The segments of one log.

    Args:
        directory: where the segment files live.
        file_size_bytes: size of every segment.
        layer: the file layer.
    """

    def __init__(
        self, directory: pathlib.Path, file_size_bytes: int, layer: file_layer.FileLayer
    ) -> None:
        self.directory = directory
        self.file_size_bytes = file_size_bytes
        self._layer = layer
        self._files: tuple[mapped_file.MappedFile, ...] = ()
        self._lock = threading.Lock()
        self._empty_start_offset = 0
        self._disk_full_warned_s = -DISK_FULL_WARNING_INTERVAL_S

    @property
    def files(self) -> tuple[mapped_file.MappedFile, ...]:
        """The segments, oldest first (a snapshot)."""
        return self._files

    def load(self, *, pad_short_tail: bool = False) -> bool:
        """Open every segment in the directory; all start full (recovery sets positions).

        Args:
            pad_short_tail: a newest segment shorter than the segment size (truncated behind
                the store's back) is padded with zeros to its size instead of refused; the
                caller must then rescan (a slave does, and re-fetches what was cut).

        Returns:
            whether a short newest segment was padded.

        Raises:
            StoreLayoutError: on a file of the wrong size or a gap between segments.
            OSError: if a file cannot be opened or padded.
        """
        self._layer.make_dirs(self.directory)
        loaded: list[mapped_file.MappedFile] = []
        names = [
            n
            for n in self._layer.list_dir(self.directory)
            if mapped_file.start_offset_of(n) is not None
        ]
        padded = False
        for position, name in enumerate(names):
            start = int(name)
            path = self.directory / name
            size = self._layer.file_size(path)
            handle = self._layer.open_file(path)
            if size < self.file_size_bytes and pad_short_tail and position == len(names) - 1:
                _log.warning("%s is %d bytes: padded with zeros", path, size)
                _pad(handle, size, self.file_size_bytes)
                size, padded = self.file_size_bytes, True
            if size != self.file_size_bytes:
                handle.close()
                raise StoreLayoutError(f"{path} is {size} bytes; expected {self.file_size_bytes}")
            if loaded and loaded[-1].end_offset != start:
                handle.close()
                raise StoreLayoutError(
                    f"gap before {path}: previous ends at {loaded[-1].end_offset}"
                )
            segment = self._wrap(path, start, handle)
            segment.set_positions(size)
            loaded.append(segment)
        self._files = tuple(loaded)
        return padded

    def _wrap(
        self, path: pathlib.Path, start: int, handle: file_layer.RandomAccessFile
    ) -> mapped_file.MappedFile:
        return mapped_file.MappedFile(
            path=path,
            handle=handle,
            start_offset=start,
            size_bytes=self.file_size_bytes,
            layer=self._layer,
        )

    @property
    def min_offset(self) -> int:
        """Offset of the first byte still stored (``max_offset`` when there is no segment)."""
        files = self._files
        return files[0].start_offset if files else self._empty_start_offset

    @property
    def max_offset(self) -> int:
        """Offset just past the last written byte."""
        files = self._files
        if not files:
            return self._empty_start_offset
        return files[-1].start_offset + files[-1].wrote_position

    @property
    def flushed_offset(self) -> int:
        """Offset just past the last durable byte."""
        # Flushes go oldest first, so the newest segment with flushed bytes marks the end.
        files = self._files
        for segment in reversed(files):
            if segment.flushed_position > 0:
                return segment.start_offset + segment.flushed_position
        return files[0].start_offset if files else self._empty_start_offset

    @property
    def unflushed_bytes(self) -> int:
        """``max_offset - flushed_offset``."""
        return self.max_offset - self.flushed_offset

    def reset_empty_start(self, offset: int) -> None:
        """Where the first segment of an empty log starts (rounded down to a segment start)."""
        assert not self._files, "only an empty log can move its start"
        self._empty_start_offset = offset - offset % self.file_size_bytes

    def find(self, offset: int) -> mapped_file.MappedFile | None:
        """The segment holding ``offset``, or ``None`` outside the stored range."""
        files = self._files
        if not files or offset < files[0].start_offset:
            return None
        index = (offset - files[0].start_offset) // self.file_size_bytes
        return files[index] if index < len(files) else None

    def segment_for_append(self) -> mapped_file.MappedFile:
        """The last segment, or a new one if there is none or it is full.

        Raises:
            DiskFullError: the volume has no room for the segment (a warning is logged at
                most every ``DISK_FULL_WARNING_INTERVAL_S``, without a traceback).
            OSError: if the new file cannot be created for another reason (permissions).
        """
        files = self._files
        if files and not files[-1].is_full:
            return files[-1]
        start = files[-1].end_offset if files else self._empty_start_offset
        path = self.directory / mapped_file.file_name_of(start)
        self._layer.make_dirs(self.directory)
        try:
            handle = self._layer.create_file(path, self.file_size_bytes)
        except OSError as exc:
            if exc.errno not in _DISK_FULL_ERRNOS:
                raise
            self._warn_disk_full(path, exc)
            raise DiskFullError(exc.errno, f"no room for {path}: {exc.strerror}") from exc
        segment = self._wrap(path, start, handle)
        with self._lock:
            self._files = (*self._files, segment)
        _log.debug("created segment %s", path)
        return segment

    def _warn_disk_full(self, path: pathlib.Path, exc: OSError) -> None:
        now_s = time.monotonic()
        if now_s - self._disk_full_warned_s >= DISK_FULL_WARNING_INTERVAL_S:
            self._disk_full_warned_s = now_s
            _log.warning(
                "cannot allocate segment %s of %d bytes: %s; appends fail until space frees",
                path,
                self.file_size_bytes,
                exc.strerror,
            )

    def set_max_offset(self, offset: int) -> None:
        """Declare ``offset`` the end of valid data (trusted start, no zeroing).

        Segments before the one holding ``offset`` become full and flushed; ones after it are
        not expected (assertion).
        """
        for segment in self._files:
            if segment.end_offset <= offset:
                segment.set_positions(segment.size_bytes)
            else:
                assert segment.start_offset <= offset, "data beyond the declared end"
                segment.set_positions(offset - segment.start_offset)
        if not self._files:
            self._empty_start_offset = offset - offset % self.file_size_bytes

    def truncate_to(self, offset: int, *, zero_end_offset: int | None = None) -> None:
        """Cut the log at ``offset``: zero the rest of its segment, delete later segments.

        Args:
            offset: the new end of the log.
            zero_end_offset: no byte at or past this log offset was ever written, so zeroing
                stops there; ``None`` zeroes to the segment's end.

        Raises:
            OSError: if zeroing or deleting fails.
        """
        keep: list[mapped_file.MappedFile] = []
        for segment in self._files:
            if segment.start_offset >= offset:
                segment.destroy()
                continue
            keep.append(segment)
            if segment.end_offset > offset:
                end = None if zero_end_offset is None else zero_end_offset - segment.start_offset
                segment.zero_from(offset - segment.start_offset, end)
            else:
                segment.set_positions(segment.size_bytes)
        with self._lock:
            self._files = tuple(keep)
        if not keep:
            self._empty_start_offset = offset - offset % self.file_size_bytes

    def flush(self) -> int:
        """Sync every segment with unflushed bytes, oldest first; returns ``flushed_offset``.

        Raises:
            OSError: if a sync fails.
        """
        for segment in self._files:
            if segment.flushed_position < segment.wrote_position:
                segment.flush()
        return self.flushed_offset

    def close(self) -> None:
        """Close every segment's file handle (the files stay)."""
        with self._lock:
            files, self._files = self._files, ()
        for segment in files:
            segment.close()

    def destroy(self) -> int:
        """Delete every segment (a ConsumeQueue of a deleted topic); returns how many."""
        with self._lock:
            files, self._files = self._files, ()
        for segment in files:
            segment.destroy()
        return len(files)

    def segment_infos(self) -> list[SegmentInfo]:
        """Start, size, modification time and path of every segment, oldest first."""
        infos: list[SegmentInfo] = []
        for segment in self._files:
            try:
                modified = self._layer.modified_ms(segment.path)
            except OSError:
                continue
            infos.append(
                SegmentInfo(segment.start_offset, segment.size_bytes, modified, segment.path)
            )
        return infos

    def delete_oldest(self, should_delete: Callable[[SegmentInfo], bool], *, batch_max: int) -> int:
        """Delete segments from the oldest while ``should_delete`` says so; never the last one.

        Stops at the first segment that must stay, so no hole opens in the middle of the log.

        Returns:
            how many segments were deleted (at most ``batch_max``).
        """
        deleted = 0
        for info in self.segment_infos()[:-1]:
            if deleted >= batch_max or not should_delete(info):
                break
            with self._lock:
                victim = self._files[0]
                assert victim.start_offset == info.start_offset
                self._files = self._files[1:]
            victim.destroy()
            deleted += 1
        return deleted

    def delete_expired(
        self, now_ms: int, reserved_ms: int, *, clean_immediately: bool = False, batch_max: int = 10
    ) -> int:
        """Delete the oldest segments not modified for ``reserved_ms``.

        Mirrors RocketMQ ``MappedFileQueue.deleteExpiredFileByTime``: the newest segment is
        never deleted; ``clean_immediately`` (disk above a watermark) ignores the age.

        Args:
            now_ms: current wall time, ms since epoch.
            reserved_ms: how long a segment is kept after its last write (``fileReservedTime``).
            clean_immediately: delete regardless of age.
            batch_max: most segments deleted by one call (``deleteFileBatchMax`` = 10).

        Returns:
            the number of segments deleted.
        """
        return self.delete_oldest(
            lambda info: clean_immediately or info.modified_ms + reserved_ms <= now_ms,
            batch_max=batch_max,
        )
