"""The POP journal file: append-only, replayed at start-up, compacted when it grows.

``PopJournal`` owns ``<store>/pop/popJournal``. Appends are one ``os.write`` of the records
of one processor call (receive, ack batch, …) on an ``O_APPEND`` descriptor, without fsync:
a SIGKILL of the broker keeps everything that reached the page cache; a machine crash loses
what the kernel had not written back yet (at most the last ``dirty_writeback`` seconds), and
then attempts restart from the older state — RocketMQ's at-least-once, as with its own CK
records under ASYNC_FLUSH.

Invariants (``store.metadata.AppendLog``): ``open_journal`` truncates a torn or corrupt tail
(an operating error: logged, never fatal) so appends always follow a valid record; ``rewrite``
replaces the file atomically (temp + fsync + rename, ``store.metadata.write_atomically``), so a
crash during compaction leaves the old or the new journal, never a mix. The file is at most
``journal_bytes_max`` bytes after a compaction of a live state that fits (the caller compacts
before it passes).
"""

from __future__ import annotations

import logging
import pathlib

from ariane.broker.pop import journal as pop_journal
from ariane.store import metadata

_log = logging.getLogger(__name__)

DIR_NAME = "pop"
"""Directory of the journal under the store root."""
FILE_NAME = "popJournal"
"""Name of the journal file."""


PopJournal = metadata.AppendLog
"""The append-only POP journal of one broker (``open_journal`` opens and replays it)."""


def open_journal(root: pathlib.Path) -> tuple[PopJournal, list[pop_journal.Record]]:
    """Open (or create) the journal under the store ``root``, replay it and cut a bad tail.

    Returns:
        the journal, ready to append, and its valid records in file order.

    Raises:
        OSError: the file cannot be read, truncated or opened.
        ValueError: the file is larger than ``metadata.METADATA_FILE_BYTES_MAX``.
    """
    journal, records = metadata.AppendLog.open(root / DIR_NAME / FILE_NAME, _decode, "POP journal")
    _log.info("POP journal %s: %d records replayed", journal.path, len(records))
    return journal, records


def _decode(data: bytes) -> tuple[list[pop_journal.Record], int, str | None]:
    decoded = pop_journal.decode(data)
    return decoded.records, decoded.valid_bytes, decoded.problem
