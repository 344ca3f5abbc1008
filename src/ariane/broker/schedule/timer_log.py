"""The timer log file: append-only, replayed at start-up, compacted when it grows.

``TimerLog`` owns ``<store>/timer/timerlog`` (RocketMQ 5 keeps ``timerlog`` and ``timerwheel``
under its store root). Appends are one ``os.write`` per batch of records on an ``O_APPEND``
descriptor, without fsync: a SIGKILL keeps what reached the page cache; a machine crash may lose
the last records, and then the timer topic is read again from the older cursor, so a message
may be delivered twice, never lost (RocketMQ's at-least-once).

Invariants: ``open`` truncates a torn or corrupt tail (logged, never fatal), so appends always
follow a valid record; ``rewrite`` replaces the file atomically (temp + fsync + rename), so a
crash during compaction leaves the old or the new log, never a mix.
"""

from __future__ import annotations

import logging
import os
import pathlib

from ariane.broker.schedule import timer_codec
from ariane.store import metadata

_log = logging.getLogger(__name__)

DIR_NAME = "timer"
FILE_NAME = "timerlog"


class TimerLog:
    """The append-only timer log of one broker. Use ``TimerLog.open``."""

    def __init__(self, path: pathlib.Path, fd: int, size_bytes: int) -> None:
        self.path = path
        self._fd = fd
        self.size_bytes = size_bytes
        """Current length of the file, bytes."""

    @classmethod
    def open(cls, root: pathlib.Path) -> tuple[TimerLog, list[timer_codec.TimerRecord]]:
        """Open (or create) the log under the store ``root``, replay it and cut a bad tail.

        Returns:
            the log, ready to append, and its valid records in file order.

        Raises:
            OSError: the file cannot be read, truncated or opened.
            ValueError: the file is larger than ``metadata.METADATA_FILE_BYTES_MAX``.
        """
        path = root / DIR_NAME / FILE_NAME
        path.parent.mkdir(parents=True, exist_ok=True)
        data = metadata.read_optional(path) or b""
        records, valid_bytes = timer_codec.decode_all(data)
        if valid_bytes < len(data):
            _log.warning(
                "timer log %s: torn or corrupt tail; truncating %d bytes to %d",
                path,
                len(data),
                valid_bytes,
            )
            os.truncate(path, valid_bytes)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        _log.info("timer log %s: %d records replayed", path, len(records))
        return cls(path, fd, valid_bytes), records

    def append(self, records: list[timer_codec.TimerRecord]) -> None:
        """Append ``records`` with one ``write`` (no fsync; see the module docstring).

        Raises:
            OSError: the write failed.
        """
        view = memoryview(b"".join(timer_codec.encode(r) for r in records))
        while view:
            written = os.write(self._fd, view)
            view = view[written:]
            self.size_bytes += written

    def rewrite(self, records: list[timer_codec.TimerRecord]) -> None:
        """Replace the whole log with ``records`` atomically (compaction).

        Raises:
            OSError, ValueError: as ``metadata.write_atomically``; the old log stays.
        """
        data = b"".join(timer_codec.encode(r) for r in records)
        metadata.write_atomically(self.path, data)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND, 0o644)
        os.close(self._fd)
        self._fd = fd
        self.size_bytes = len(data)

    def close(self) -> None:
        """Close the descriptor (idempotent)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
