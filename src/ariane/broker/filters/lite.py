"""The filter of a lite consumer's receive (RocketMQ 5.5 lite topics, ``tables.lite_topics``).

A lite message sits in its LITE parent's queue with the Java hash of its lite topic in the
ConsumeQueue tag-code slot and the name in ``__LITE_TOPIC``. ``LiteFilter`` prefilters units on
that hash against the group's subscribed hashes (no CommitLog read for lite topics nobody in the
group subscribes), then checks the name on the message. It reads the group's live view, so a
SyncLiteSubscription applies to receives already long polling.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Container, Mapping

from ariane.common import hashing, message

_LITE = message.Property.LITE_TOPIC


@dataclasses.dataclass(frozen=True, slots=True)
class LiteFilter:
    """Matches the lite messages of the subscribed lite topics.

    Attributes:
        names: the subscribed lite topic names (a live container).
        hashes: their Java hashes (a live container).
    """

    names: Container[str]
    hashes: Container[int]

    @property
    def matches_all(self) -> bool:
        """Never: only subscribed lite topics match."""
        return False

    def matches_tag_hash(self, tag_hash: int) -> bool:
        """Prefilter on the unit's tag-code slot, which holds the lite topic's hash."""
        return hashing.to_int32(tag_hash) in self.hashes

    def matches(self, tag: str | None, properties: Mapping[str, str]) -> bool:
        """Whether the message belongs to a subscribed lite topic."""
        del tag
        name = properties.get(_LITE)
        return name is not None and name in self.names
