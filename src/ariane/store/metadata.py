"""Small metadata files (topics, subscription groups, consumer offsets) written atomically, and
the append-only logs of a broker's own state (the POP journal, the timer log).

Invariant: a reader sees either the old or the new content of a file, never a torn mix, even if
the process or the machine dies mid-write. The recipe is RocketMQ's ``MixAll.string2File`` made
crash-safe, and it lives in the file layer (``FileLayer.replace_file``: a temporary file in the
same directory, fsync, rename over the target, fsync of the directory), so the in-memory crash
model reaches these files as it reaches the CommitLog.

An ``AppendLog`` always ends with a valid record: ``open`` cuts a torn or corrupt tail (logged,
never fatal) before the first append, and ``rewrite`` (compaction) replaces the whole file with
``write_atomically``, so a crash leaves the old or the new log, never a mix.
"""

from __future__ import annotations

import logging
import os
import pathlib
from collections.abc import Callable
from typing import TypeVar

from ariane.store import file_layer

_log = logging.getLogger(__name__)

Replayed = TypeVar("Replayed")
"""What an ``AppendLog``'s decoder makes of the file's valid records."""

METADATA_FILE_BYTES_MAX = 64 * 1024 * 1024
"""Largest metadata file read back, in bytes; a bigger file is refused as corrupt."""

_OS_LAYER = file_layer.OsFileLayer()


def write_atomically(
    path: pathlib.Path, data: bytes, *, layer: file_layer.FileLayer = _OS_LAYER
) -> None:
    """Replace ``path`` with ``data`` so that a crash leaves the old or the new content.

    Args:
        path: the target file; its directory is created if missing.
        data: the full new content, at most ``METADATA_FILE_BYTES_MAX`` bytes.
        layer: the file layer (default: the real file system).

    Raises:
        ValueError: if ``data`` is larger than ``METADATA_FILE_BYTES_MAX``.
        OSError: if the file system refuses the write, sync or rename.
    """
    if len(data) > METADATA_FILE_BYTES_MAX:
        raise ValueError(f"metadata of {len(data)} bytes exceeds {METADATA_FILE_BYTES_MAX}")
    layer.make_dirs(path.parent)
    layer.replace_file(path, data)


def read_optional(path: pathlib.Path, *, layer: file_layer.FileLayer = _OS_LAYER) -> bytes | None:
    """The content of ``path``, or ``None`` if it does not exist.

    Raises:
        ValueError: if the file is larger than ``METADATA_FILE_BYTES_MAX``.
        OSError: for read errors other than a missing file.
    """
    try:
        size = layer.file_size(path)
    except FileNotFoundError:
        return None
    if size > METADATA_FILE_BYTES_MAX:
        raise ValueError(
            f"{path} is {size} bytes; metadata files are at most {METADATA_FILE_BYTES_MAX}"
        )
    return layer.read_file(path)


fsync_directory = file_layer.fsync_directory
"""Make the entries of a directory durable (``file_layer.fsync_directory``)."""


class AppendLog:
    """An append-only log file of a broker's own state, replayed at start-up.

    Appends are one ``os.write`` per call on an ``O_APPEND`` descriptor, without fsync: a
    SIGKILL keeps everything that reached the page cache, a machine crash may lose the last
    writes (the callers' state is then at-least-once, as RocketMQ's own CK and timer records
    under ASYNC_FLUSH). Use ``AppendLog.open``; ``append`` / ``rewrite`` / ``close`` after that.
    """

    def __init__(self, path: pathlib.Path, fd: int, size_bytes: int) -> None:
        self.path = path
        self._fd = fd
        self.size_bytes = size_bytes
        """Current length of the file, bytes."""

    @classmethod
    def open(
        cls,
        path: pathlib.Path,
        decode: Callable[[bytes], tuple[Replayed, int, str | None]],
        what: str,
    ) -> tuple[AppendLog, Replayed]:
        """Open (or create) the log at ``path``, replay it and cut a bad tail.

        Args:
            path: the log file; its directory is created if missing.
            decode: the file's bytes -> (what they replay to, the length of the valid prefix in
                bytes, why the rest is not valid or ``None``).
            what: the log's name in the warning logged when a tail is cut.

        Returns:
            the log, ready to append after its valid prefix, and what that prefix replays to.

        Raises:
            OSError: the file cannot be read, truncated or opened.
            ValueError: the file is larger than ``METADATA_FILE_BYTES_MAX``.
        """
        path.parent.mkdir(parents=True, exist_ok=True)
        data = read_optional(path) or b""
        replayed, valid_bytes, problem = decode(data)
        if valid_bytes < len(data):
            _log.warning(
                "%s %s: %s; truncating %d bytes to %d",
                what,
                path,
                problem or "torn or corrupt tail",
                len(data),
                valid_bytes,
            )
            os.truncate(path, valid_bytes)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        return cls(path, fd, valid_bytes), replayed

    def append(self, data: bytes) -> None:
        """Append ``data`` (whole encoded records) with one ``write`` call, no fsync.

        Raises:
            OSError: the write failed.
        """
        view = memoryview(data)
        while view:
            written = os.write(self._fd, view)
            view = view[written:]
            self.size_bytes += written

    def rewrite(self, data: bytes) -> None:
        """Replace the whole log with ``data`` atomically (compaction).

        Raises:
            OSError, ValueError: as ``write_atomically``; the old log stays.
        """
        write_atomically(self.path, data)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND, 0o644)
        os.close(self._fd)
        self._fd = fd
        self.size_bytes = len(data)

    def close(self) -> None:
        """Close the descriptor (idempotent)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
