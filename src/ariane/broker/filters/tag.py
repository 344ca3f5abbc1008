"""Tag expressions, with RocketMQ's semantics (``FilterAPI``/``SubscriptionData``).

``*``, empty or blank match every message; otherwise ``a || b || c`` (whitespace around tags
ignored) matches a message whose tag is one of them. The ConsumeQueue stores each message's tag
hash (Java ``String.hashCode``), so the broker prefilters on ``matches_tag_hash`` without reading
the message and then checks the real tag with ``matches`` (hash collisions).

Expressions are bounded by ``FilterSettings`` (length, number of tags).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from ariane.broker import settings
from ariane.common import errors, hashing

DEFAULT_LIMITS = settings.FilterSettings()
"""The bounds used when a caller passes none."""
SUB_ALL = "*"
"""The tag expression that matches every message."""


@dataclasses.dataclass(frozen=True, slots=True)
class TagFilter:
    """A parsed tag expression.

    Attributes:
        expression: the source text.
        tags: the accepted tags; empty means every message (``*``).
        tag_hashes: ``common.hashing.java_string_hash`` of each tag.
    """

    expression: str
    tags: frozenset[str]
    tag_hashes: frozenset[int]

    @property
    def matches_all(self) -> bool:
        """Whether every message matches (``*`` or empty)."""
        return not self.tags

    def matches_tag_hash(self, tag_hash: int) -> bool:
        """Prefilter on a ConsumeQueue tag hash (RocketMQ ``isMatchedByConsumeQueue``)."""
        return self.matches_all or hashing.to_int32(tag_hash) in self.tag_hashes

    def matches(self, tag: str | None, properties: Mapping[str, str]) -> bool:
        """Whether a message with ``tag`` matches (the exact check after the hash)."""
        del properties
        return self.matches_all or (tag is not None and tag in self.tags)


def parse_tags(expression: str, *, limits: settings.FilterSettings = DEFAULT_LIMITS) -> TagFilter:
    """Parse ``*``, ``""`` or ``a || b || c``.

    Raises:
        IllegalFilterExpressionError: too long, too many tags, or no tag between separators
            only (``"||"``).
    """
    check_length(expression, limits)
    text = expression.strip()
    if not text or text == SUB_ALL:
        return TagFilter(expression=expression, tags=frozenset(), tag_hashes=frozenset())
    tags = frozenset(t.strip() for t in text.split("||") if t.strip())
    if not tags:
        raise errors.IllegalFilterExpressionError(
            f"tag expression {expression!r} names no tag; use '*' for all messages"
        )
    if len(tags) > limits.tags_max:
        raise errors.IllegalFilterExpressionError(
            f"tag expression names {len(tags)} tags; the limit is {limits.tags_max}"
        )
    return TagFilter(
        expression=expression,
        tags=tags,
        tag_hashes=frozenset(hashing.java_string_hash(t) for t in tags),
    )


def check_length(expression: str, limits: settings.FilterSettings) -> None:
    """Refuse an expression longer than ``limits.expression_chars_max`` (either kind).

    Raises:
        IllegalFilterExpressionError: the expression is too long.
    """
    if len(expression) > limits.expression_chars_max:
        raise errors.IllegalFilterExpressionError(
            f"filter expression is {len(expression)} characters; "
            f"the limit is {limits.expression_chars_max}"
        )
