"""The POP journal file: append-only, replayed at start-up, compacted when it grows.

``PopJournal`` owns ``<store>/pop/popJournal``. Appends are one ``os.write`` of the records
of one processor call (receive, ack batch, …) on an ``O_APPEND`` descriptor, without fsync:
a SIGKILL of the broker keeps everything that reached the page cache; a machine crash loses
what the kernel had not written back yet (at most the last ``dirty_writeback`` seconds), and
then attempts restart from the older state — RocketMQ's at-least-once, as with its own CK
records under ASYNC_FLUSH.

Invariants: ``open`` truncates a torn or corrupt tail (an operating error: logged, never
fatal) so appends always follow a valid record; ``rewrite`` replaces the file atomically
(temp + fsync + rename, ``store.metadata.write_atomically``), so a crash during compaction
leaves the old or the new journal, never a mix. The file is at most ``journal_bytes_max``
bytes after a compaction of a live state that fits (the caller compacts before it passes).
"""

from __future__ import annotations

import logging
import os
import pathlib

from ariane.broker.pop import journal as pop_journal
from ariane.store import metadata

_log = logging.getLogger(__name__)

DIR_NAME = "pop"
"""Directory of the journal under the store root."""
FILE_NAME = "popJournal"
"""Name of the journal file."""


class PopJournal:
    """The append-only POP journal of one broker.

    Use ``PopJournal.open`` (it replays); ``append`` / ``rewrite`` / ``close`` after that.
    """

    def __init__(self, path: pathlib.Path, fd: int, size_bytes: int) -> None:
        self.path = path
        self._fd = fd
        self.size_bytes = size_bytes
        """Current length of the file, bytes."""

    @classmethod
    def open(cls, root: pathlib.Path) -> tuple[PopJournal, list[pop_journal.Record]]:
        """Open (or create) the journal under ``root``, replay it and cut a bad tail.

        Returns:
            the journal, ready to append, and its valid records in file order.

        Raises:
            OSError: the file cannot be read, truncated or opened.
            ValueError: the file is larger than ``metadata.METADATA_FILE_BYTES_MAX``.
        """
        path = root / DIR_NAME / FILE_NAME
        path.parent.mkdir(parents=True, exist_ok=True)
        data = metadata.read_optional(path) or b""
        decoded = pop_journal.decode(data)
        if decoded.problem is not None:
            _log.warning(
                "POP journal %s: %s; truncating %d bytes to %d",
                path,
                decoded.problem,
                len(data),
                decoded.valid_bytes,
            )
            os.truncate(path, decoded.valid_bytes)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        _log.info("POP journal %s: %d records replayed", path, len(decoded.records))
        return cls(path, fd, decoded.valid_bytes), decoded.records

    def append(self, data: bytes) -> None:
        """Append encoded records with one ``write`` (no fsync; see the module docstring).

        Raises:
            OSError: the write failed (the caller logs it; POP state stays in memory).
        """
        view = memoryview(data)
        while view:
            written = os.write(self._fd, view)
            view = view[written:]
            self.size_bytes += written

    def rewrite(self, data: bytes) -> None:
        """Replace the whole journal with ``data`` atomically (compaction).

        Raises:
            OSError, ValueError: as ``metadata.write_atomically``; the old journal stays.
        """
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
