"""The deleted-topic floors of a store: what keeps a deleted topic's messages out of a
re-created topic of the same name.

RocketMQ's ``DefaultMessageStore.deleteTopics`` destroys the topic's ConsumeQueues and
restarts its queue offsets (``removeQueueFromTopicQueueTable``); the CommitLog records stay
until retention deletes their segments. A recovery that re-dispatches the CommitLog tail
(after an unclean stop) would then build them into the ConsumeQueues of a re-created topic.
So the store remembers, per deleted topic, the CommitLog offset at its deletion (its
*floor*); the dispatcher never dispatches a record of that topic below it. File
``<root>/deletedTopics.json``: ``{"<topic>": <floor>}``, written atomically.

Invariants: a floor at or below the CommitLog's min offset is dropped (nothing of the old
topic is left below it); at most ``FLOORS_MAX`` floors are kept, the lowest going first (a
recovery scans the tail, far above the oldest floors).
"""

from __future__ import annotations

import json
import logging
import pathlib

from ariane.common import ids
from ariane.store import commit_log, consume_queue, file_layer, metadata

_log = logging.getLogger(__name__)

FILE_NAME = "deletedTopics.json"
"""The floors file under the store root."""

FLOORS_MAX = 100_000
"""Most deleted-topic floors kept, a count."""


class DeletedTopics:
    """The persisted floors, shared with the dispatcher's ``topic_floors`` dict.

    Args:
        root: the store root (the file is ``FILE_NAME`` under it).
        layer: the file layer.
        floors: the dispatcher's table, filled by ``load`` and ``add``.
    """

    def __init__(
        self, root: pathlib.Path, layer: file_layer.FileLayer, floors: dict[str, int]
    ) -> None:
        self._path = root / FILE_NAME
        self._layer = layer
        self.floors = floors

    def delete(
        self,
        topic: ids.TopicName,
        log: commit_log.CommitLog,
        queues: consume_queue.ConsumeQueueStore,
    ) -> int:
        """Delete ``topic``'s ConsumeQueues with their files, restart its queue offsets at 0
        and set its floor at the CommitLog's end (RocketMQ ``DefaultMessageStore.deleteTopics``
        with ``removeQueueFromTopicQueueTable``); returns how many queues went. Called under
        the store's put and checkpoint locks.

        Raises:
            OSError: the floors file cannot be written (nothing was deleted then).
        """
        self.add(topic, log.max_offset, log.min_offset)
        log.forget_queue_offsets(topic)
        return queues.delete_topic(topic)

    def load(self, commit_log_min_offset: int) -> None:
        """Read the file (absent: no floors) and drop floors retention made moot.

        Raises:
            OSError: the file cannot be read. ValueError: it does not parse.
        """
        raw = metadata.read_optional(self._path, layer=self._layer)
        if raw is None:
            return
        parsed = json.loads(raw)
        if not isinstance(parsed, dict) or not all(
            isinstance(k, str) and isinstance(v, int) for k, v in parsed.items()
        ):
            raise ValueError(f"{self._path}: expected an object of topic -> offset")
        self.floors.update(parsed)
        self._prune(commit_log_min_offset)

    def add(self, topic: str, floor: int, commit_log_min_offset: int) -> None:
        """Remember that ``topic`` was deleted when the CommitLog ended at ``floor``.

        Raises:
            OSError: the file cannot be written.
        """
        self.floors[topic] = max(floor, self.floors.get(topic, 0))
        self._prune(commit_log_min_offset)
        data = json.dumps(self.floors, sort_keys=True).encode()
        metadata.write_atomically(self._path, data, layer=self._layer)

    def _prune(self, commit_log_min_offset: int) -> None:
        for topic in [t for t, floor in self.floors.items() if floor <= commit_log_min_offset]:
            del self.floors[topic]
        while len(self.floors) > FLOORS_MAX:
            lowest = min(self.floors, key=self.floors.__getitem__)
            _log.warning("deleted-topic floor of %s forgotten (FLOORS_MAX)", lowest)
            del self.floors[lowest]
