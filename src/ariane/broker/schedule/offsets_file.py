"""``<store>/config/delayOffset.json``: the delay levels' progress, and how far it was derived.

RocketMQ's ``delayOffset.json`` holds ``{"offsetTable": {"<level>": <next schedule-queue
offset>}}``; Ariane keeps that table and adds ``progressOffset`` (the next
``rmq_sys_schedule_progress`` record to follow) and ``commitLogOffset`` (the CommitLog end when
the file was written, which the schedule state was derived from: a CommitLog found shorter at
start-up was cut below it, and the state must be derived again). Written atomically (temp + fsync +
rename); a missing file is the empty state.
"""

from __future__ import annotations

import dataclasses
import pathlib

from ariane.broker.tables import persistence
from ariane.common import ids

FILE_NAME = "delayOffset.json"
"""The file's name under ``<store>/config`` (RocketMQ's)."""


@dataclasses.dataclass(frozen=True, slots=True)
class SavedOffsets:
    """What the file holds.

    Attributes:
        levels: per delay level (1-based), the next schedule-queue offset to deliver.
        progress_offset: the next progress record to follow (queue offset).
        commit_log_offset: the CommitLog end the state was derived from, bytes.
    """

    levels: dict[int, ids.QueueOffset]
    progress_offset: ids.QueueOffset
    commit_log_offset: int


def path_under(root: pathlib.Path) -> pathlib.Path:
    """The file's path under the store ``root``."""
    return persistence.config_path(root, FILE_NAME)


def load(path: pathlib.Path) -> SavedOffsets:
    """The saved offsets (empty when the file does not exist).

    Raises:
        CorruptMetadataError: the file does not parse or holds a non-integer offset.
    """
    raw = persistence.load_json(path)
    if raw is None:
        return SavedOffsets({}, ids.QueueOffset(0), 0)
    table = persistence.expect_object(raw.get("offsetTable", {}), "delayOffset.offsetTable")
    levels = {
        int(level): ids.QueueOffset(persistence.expect_int(o, f"delayOffset.offsetTable.{level}"))
        for level, o in table.items()
        if level.isdigit()
    }
    progress_offset = persistence.expect_int(raw.get("progressOffset", 0), "progressOffset")
    seen = persistence.expect_int(raw.get("commitLogOffset", 0), "commitLogOffset")
    return SavedOffsets(levels, ids.QueueOffset(progress_offset), seen)


def save(path: pathlib.Path, saved: SavedOffsets) -> None:
    """Replace the file atomically with ``saved``.

    Raises:
        OSError: the write failed (the old file stays).
    """
    table = {str(level): o for level, o in sorted(saved.levels.items())}
    content = {
        "offsetTable": table,
        "progressOffset": saved.progress_offset,
        "commitLogOffset": saved.commit_log_offset,
    }
    persistence.save_json(path, content)
