"""Committed consumer offsets (RocketMQ ``ConsumerOffsetManager``) in ``consumerOffset.json``.

The table maps (group, topic, queue id) to the committed ``QueueOffset``: the next offset the
group has not consumed, i.e. every message below it is done. Commits are cheap in-memory updates;
the server calls ``persist()`` every ``persist_interval_ms`` and on shutdown, so a crash can
rewind a group by at most one interval — RocketMQ's at-least-once promise (the messages above the
persisted offset are delivered again).

The file uses RocketMQ's key ``topic@group`` (neither name may contain ``@``):
``{"offsets": {"orders@billing": {"0": 12, "1": 40}}}``. The table is bounded by
``offset_entries_max``; a commit that would add an entry beyond it raises
``TooManyRequestsError``. Not thread-safe.

No offset stays above its queue's end once the queue may have been cut or its owner changed
(``clamp_to``: a promotion, a truncation of the CommitLog, a master's start): a slave copies its
master's offsets, which can be ahead of the messages the slave holds, and a master whose queue
end moved back would write new messages at offsets the group is recorded past, skipping them.
"""

from __future__ import annotations

import logging
import pathlib
from collections.abc import Callable, Mapping

from ariane.broker import settings
from ariane.broker.tables import persistence
from ariane.common import errors, ids

_log = logging.getLogger(__name__)

FILE_NAME = "consumerOffset.json"
"""Name of the offset file inside ``config/`` (RocketMQ ``consumerOffset.json``)."""

_SEPARATOR = "@"

OffsetKey = tuple[ids.GroupName, ids.TopicName, ids.QueueId]
"""(group, topic, queue id)."""


class ConsumerOffsetManager:
    """Committed offsets of every group on this broker.

    Args:
        path: the JSON file (``persistence.config_path(store_root, FILE_NAME)``); read if it
            exists.
        offset_settings: the table bound.

    Raises:
        CorruptMetadataError: if the file exists but does not hold a valid table.
    """

    def __init__(self, path: pathlib.Path, *, offset_settings: settings.OffsetSettings) -> None:
        self._path = path
        self._entries_max = offset_settings.offset_entries_max
        self._table: dict[tuple[ids.TopicName, ids.GroupName], dict[ids.QueueId, int]] = {}
        self._count = 0
        self._dirty = False
        self._load()

    @property
    def path(self) -> pathlib.Path:
        """The JSON file of the table."""
        return self._path

    @property
    def dirty(self) -> bool:
        """Whether the table changed since the last ``persist()``."""
        return self._dirty

    def __len__(self) -> int:
        """Number of (group, topic, queue id) entries."""
        return self._count

    def query(
        self, group: ids.GroupName, topic: ids.TopicName, queue_id: ids.QueueId
    ) -> ids.QueueOffset | None:
        """The committed offset, or ``None`` when the group never committed on that queue."""
        offsets = self._table.get((topic, group))
        if offsets is None:
            return None
        found = offsets.get(queue_id)
        return None if found is None else ids.QueueOffset(found)

    def offsets_of(self, group: ids.GroupName, topic: ids.TopicName) -> dict[ids.QueueId, int]:
        """A copy of queue id → committed offset for one group and topic (empty if none)."""
        return dict(self._table.get((topic, group), {}))

    def commit(
        self,
        group: ids.GroupName,
        topic: ids.TopicName,
        queue_id: ids.QueueId,
        offset: ids.QueueOffset,
    ) -> None:
        """Set the committed offset (RocketMQ ``commitOffset``: last writer wins).

        Raises:
            IllegalOffsetError: ``offset`` or ``queue_id`` is negative.
            TooManyRequestsError: a new entry would exceed ``offset_entries_max``.
        """
        if offset < 0 or queue_id < 0:
            raise errors.IllegalOffsetError(
                f"offset {offset} / queue id {queue_id} of {group}@{topic} must be >= 0"
            )
        offsets = self._table.get((topic, group))
        if offsets is None or queue_id not in offsets:
            if self._count >= self._entries_max:
                raise errors.TooManyRequestsError(
                    f"the consumer offset table is full ({self._count} entries, "
                    "offset_entries_max); remove unused groups"
                )
            self._count += 1
            offsets = self._table.setdefault((topic, group), {})
        if offsets.get(queue_id) != offset:
            offsets[queue_id] = offset
            self._dirty = True

    def reset(
        self,
        group: ids.GroupName,
        topic: ids.TopicName,
        offsets: Mapping[ids.QueueId, ids.QueueOffset],
    ) -> None:
        """Set several queues of one group and topic at once (admin offset reset).

        Args:
            offsets: queue id → new committed offset; queues not named keep theirs.

        Raises:
            IllegalOffsetError, TooManyRequestsError: as ``commit``; checked for every entry
                before any is applied.
        """
        existing = self._table.get((topic, group), {})
        new_entries = sum(1 for q in offsets if q not in existing)
        if self._count + new_entries > self._entries_max:
            raise errors.TooManyRequestsError(
                f"the consumer offset table is full ({self._count} entries, offset_entries_max)"
            )
        for queue_id, offset in offsets.items():
            if offset < 0 or queue_id < 0:
                raise errors.IllegalOffsetError(
                    f"offset {offset} / queue id {queue_id} of {group}@{topic} must be >= 0"
                )
        for queue_id, offset in sorted(offsets.items()):
            self.commit(group, topic, queue_id, offset)

    def clamp_to(
        self, queue_end: Callable[[ids.TopicName, ids.QueueId], ids.QueueOffset], *, why: str
    ) -> dict[ids.GroupName, int]:
        """Pull every committed offset above its queue's end back to that end, logging one
        WARNING per group with the count (``why``: the occasion, in the log line).

        A promoted slave's offsets were copied from the old master and can be ahead of what it
        holds; a truncated queue (a diverged tail cut, a recovery cut) ends below offsets
        committed before the cut. Left there, the next messages written at those queue offsets
        would be skipped by the group (acknowledged, stored, never delivered). RocketMQ does
        not clamp here: a pull past ``maxOffset`` answers ``OFFSET_OVERFLOW_BADLY`` and the
        client corrects to ``maxOffset`` at pull time, which is too late once new messages sit
        at or beyond the stale offset (they are read from there, those below it skipped).

        Args:
            queue_end: (topic, queue id) → the queue's next offset to be written (0 for a
                queue this store lacks).
            why: e.g. ``"promotion"``.

        Returns:
            group → how many of its (topic, queue) offsets were pulled back (groups with none
            absent).
        """
        clamped: dict[ids.GroupName, int] = {}
        for (topic, group), offsets in self._table.items():
            for queue_id, offset in offsets.items():
                end = queue_end(topic, queue_id)
                if offset > end:
                    offsets[queue_id] = end
                    clamped[group] = clamped.get(group, 0) + 1
        for group, count in sorted(clamped.items()):
            _log.warning(
                "%s: %d consumer offsets of group %s were past their queue's end; pulled back "
                "to it",
                why,
                count,
                group,
            )
        if clamped:
            self._dirty = True
        return clamped

    def remove_group(self, group: ids.GroupName) -> int:
        """Forget every offset of ``group``; returns how many entries were removed."""
        return self._remove(lambda topic, g: g == group)

    def remove_topic(self, topic: ids.TopicName) -> int:
        """Forget every group's offsets on ``topic`` (the topic was deleted)."""
        return self._remove(lambda t, group: t == topic)

    def pairs(self) -> list[tuple[ids.TopicName, ids.GroupName]]:
        """Every ``(topic, group)`` with committed offsets."""
        return list(self._table)

    def groups_of_topic(self, topic: ids.TopicName) -> tuple[ids.GroupName, ...]:
        """Groups with committed offsets on ``topic``, sorted."""
        return tuple(sorted(g for (t, g) in self._table if t == topic))

    def persist(self) -> bool:
        """Write the table atomically if it changed; returns whether a write happened.

        Raises:
            OSError: the write failed; the table stays dirty so the next call retries.
        """
        if not self._dirty:
            return False
        content = {
            f"{topic}{_SEPARATOR}{group}": {str(q): off for q, off in sorted(offsets.items())}
            for (topic, group), offsets in self._table.items()
            if offsets
        }
        persistence.save_json(self._path, {"offsets": content})
        self._dirty = False
        return True

    def _remove(self, match: Callable[[ids.TopicName, ids.GroupName], bool]) -> int:
        doomed = [key for key in self._table if match(*key)]
        removed = 0
        for key in doomed:
            removed += len(self._table.pop(key))
        self._count -= removed
        if removed:
            self._dirty = True
        return removed

    def _load(self) -> None:
        content = persistence.load_json(self._path)
        if content is None:
            return
        table = persistence.expect_object(content.get("offsets"), "offsets")
        for key, raw in table.items():
            topic, sep, group = key.rpartition(_SEPARATOR)
            if not sep or not topic or not group:
                raise persistence.CorruptMetadataError(f"{self._path}: bad key {key!r}")
            queues = persistence.expect_object(raw, key)
            offsets: dict[ids.QueueId, int] = {}
            for queue, value in queues.items():
                if not queue.isdigit():
                    raise persistence.CorruptMetadataError(f"{key}: bad queue id {queue!r}")
                offsets[ids.QueueId(int(queue))] = persistence.expect_int(value, key)
            self._table[(ids.TopicName(topic), ids.GroupName(group))] = offsets
            self._count += len(offsets)
        _log.info("loaded %d consumer offsets from %s", self._count, self._path)
