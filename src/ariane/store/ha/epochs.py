"""Epoch history of a broker group's CommitLog (RocketMQ controller mode's ``EpochFile``).

Each promotion of a master starts a new epoch at the CommitLog offset the new master had then.
Every broker keeps the history of the bytes it holds: ``(epoch, start_offset)`` entries, epochs
strictly increasing, start offsets non-decreasing. A slave copies its master's entries as it
receives bytes; a master adds one when it is promoted.

File ``<store>/ha/epochs``: one ``"<epoch> <start_offset>\\n"`` line per entry; rewritten whole
through a temporary file, fsync and rename, so a crash leaves the old or the new history.

``truncation_point`` is the rule that makes a returning old master converge: the bytes a slave
wrote under epoch E agree with the master's only below the start of the master's first epoch
after E, so the slave cuts there (never above what it holds).
"""

from __future__ import annotations

import dataclasses
import os
import pathlib

EPOCH_FILE_NAME = "epochs"
ENTRIES_MAX = 100_000
"""Most entries one history holds (one per promotion); more is a programming error."""


@dataclasses.dataclass(frozen=True, slots=True)
class EpochEntry:
    """An epoch and the CommitLog offset where its bytes start."""

    epoch: int
    start_offset: int


class StaleEpochError(Exception):
    """The peer has seen a newer epoch than this broker: this broker is fenced."""


def truncation_point(
    master: list[EpochEntry], master_max_offset: int, slave_epoch: int, slave_max_offset: int
) -> int:
    """Where a slave must cut its CommitLog before replicating from this master.

    Args:
        master: the master's history (non-empty).
        master_max_offset: the master's max CommitLog offset, bytes.
        slave_epoch: the epoch of the slave's last byte (0: the slave holds no epoch).
        slave_max_offset: the slave's max CommitLog offset, bytes.

    Returns:
        the offset to cut at; ``slave_max_offset`` itself when nothing diverged.

    Raises:
        StaleEpochError: ``slave_epoch`` is newer than the master's: the master is stale.
    """
    assert master, "a master always has an epoch"
    if slave_epoch > master[-1].epoch:
        raise StaleEpochError(f"peer epoch {slave_epoch} > own epoch {master[-1].epoch}")
    if slave_epoch == 0:
        return min(slave_max_offset, master_max_offset)
    known = {entry.epoch for entry in master}
    if slave_epoch not in known:
        # An epoch the master never had (a master that was never replicated): only bytes
        # below the start of the last master epoch before it are agreed.
        older = [e for e in master if e.epoch < slave_epoch]
        return min(slave_max_offset, older[-1].start_offset if older else 0)
    later = [e.start_offset for e in master if e.epoch > slave_epoch]
    return min(slave_max_offset, later[0] if later else master_max_offset)


class EpochHistory:
    """The persisted history of one store (see the module docstring).

    Args:
        directory: where the ``epochs`` file lives (created if needed).

    Raises:
        ValueError: the file exists but does not parse or breaks the ordering.
        OSError: the file cannot be read.
    """

    def __init__(self, directory: pathlib.Path) -> None:
        self._path = directory / EPOCH_FILE_NAME
        directory.mkdir(parents=True, exist_ok=True)
        self.entries: list[EpochEntry] = []
        if self._path.exists():
            for line in self._path.read_text().splitlines():
                epoch, start = (int(part) for part in line.split())
                self._check_next(epoch, start)
                self.entries.append(EpochEntry(epoch, start))

    @property
    def last_epoch(self) -> int:
        """The newest epoch (0 when there is none)."""
        return self.entries[-1].epoch if self.entries else 0

    def entry_at(self, offset: int) -> EpochEntry:
        """The entry whose bytes include ``offset`` (the newest one starting at or before it;
        bytes older than every entry count as the first one's)."""
        assert self.entries, "a master always has an epoch"
        found = [e for e in self.entries if e.start_offset <= offset]
        return found[-1] if found else self.entries[0]  # older bytes: the first known epoch

    def next_start_after(self, epoch: int) -> int | None:
        """Start offset of the first epoch after ``epoch``, ``None`` if it is the newest."""
        return next((e.start_offset for e in self.entries if e.epoch > epoch), None)

    def append(self, epoch: int, start_offset: int) -> None:
        """Add a newer epoch and persist.

        Raises:
            ValueError: ``epoch`` is not newer or ``start_offset`` goes backwards.
            OSError: the file cannot be written.
        """
        self._check_next(epoch, start_offset)
        self.entries.append(EpochEntry(epoch, start_offset))
        self._save()

    def truncate(self, offset: int) -> None:
        """Forget epochs whose bytes start at or past ``offset`` (the CommitLog was cut there)."""
        kept = [e for e in self.entries if e.start_offset < offset]
        if kept != self.entries:
            self.entries = kept
            self._save()

    def _check_next(self, epoch: int, start: int) -> None:
        if epoch <= 0 or start < 0:
            raise ValueError(f"epoch {epoch} at {start} is out of range")
        if len(self.entries) >= ENTRIES_MAX:
            raise ValueError(f"more than {ENTRIES_MAX} epochs")
        if self.entries and (
            epoch <= self.entries[-1].epoch or start < self.entries[-1].start_offset
        ):
            raise ValueError(f"epoch {epoch} at {start} does not follow {self.entries[-1]}")

    def _save(self) -> None:
        temp = self._path.with_suffix(".tmp")
        text = "".join(f"{e.epoch} {e.start_offset}\n" for e in self.entries)
        with open(temp, "w") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, self._path)
