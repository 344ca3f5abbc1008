"""The timer log file: append-only, replayed at start-up, compacted when it grows.

``TimerLog`` owns ``<store>/timer/timerlog`` (RocketMQ 5 keeps ``timerlog`` and ``timerwheel``
under its store root). Appends are one ``os.write`` per batch of records on an ``O_APPEND``
descriptor, without fsync: a SIGKILL keeps what reached the page cache; a machine crash may lose
the last records, and then the timer topic is read again from the older cursor and the
progress records in the CommitLog (``progress``) finish again what was delivered or recalled:
a message is delivered twice only if the CommitLog lost its batch too, never lost.

Invariants: ``open`` truncates a torn or corrupt tail (logged, never fatal), so appends always
follow a valid record; ``rewrite`` replaces the file atomically (temp + fsync + rename), so a
crash during compaction leaves the old or the new log, never a mix.
"""

from __future__ import annotations

import logging
import pathlib

from ariane.broker.schedule import timer_codec
from ariane.store import metadata

_log = logging.getLogger(__name__)

DIR_NAME = "timer"
FILE_NAME = "timerlog"


class TimerLog:
    """The append-only timer log of one broker (a ``store.metadata.AppendLog`` of
    ``timer_codec`` records). Use ``TimerLog.open``."""

    def __init__(self, file: metadata.AppendLog) -> None:
        self._file = file
        self.path = file.path

    @property
    def size_bytes(self) -> int:
        """Current length of the file, bytes."""
        return self._file.size_bytes

    @classmethod
    def open(cls, root: pathlib.Path) -> tuple[TimerLog, list[timer_codec.TimerRecord]]:
        """The log under the store ``root``, opened (or created) and replayed, and its valid
        records in file order; a bad tail is cut and errors are raised as
        ``metadata.AppendLog.open`` raises them."""
        file, records = metadata.AppendLog.open(root / DIR_NAME / FILE_NAME, _decode, "timer log")
        _log.info("timer log %s: %d records replayed", file.path, len(records))
        return cls(file), records

    def append(self, records: list[timer_codec.TimerRecord]) -> None:
        """Append ``records`` with one ``write`` (no fsync; see the module docstring).

        Raises:
            OSError: the write failed.
        """
        self._file.append(b"".join(timer_codec.encode(r) for r in records))

    def rewrite(self, records: list[timer_codec.TimerRecord]) -> None:
        """Replace the whole log with ``records`` atomically (compaction).

        Raises:
            OSError, ValueError: as ``metadata.write_atomically``; the old log stays.
        """
        self._file.rewrite(b"".join(timer_codec.encode(r) for r in records))

    def close(self) -> None:
        """Close the descriptor (idempotent)."""
        self._file.close()


def _decode(data: bytes) -> tuple[list[timer_codec.TimerRecord], int, str | None]:
    records, valid_bytes = timer_codec.decode_all(data)
    return records, valid_bytes, None
