"""What a subscription's filter expression compiles to: a tag filter or an SQL92 filter.

The receive path prefilters on the ConsumeQueue tag hash (``matches_tag_hash``) and then checks
the message itself (``matches``); both kinds answer both questions.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping

from ariane.broker import settings
from ariane.broker.filters import lite, sql_eval, sql_parser, sql_tree, tag


class FilterKind(enum.Enum):
    """``apache.rocketmq.v2.FilterType``: TAG or SQL."""

    TAG = "TAG"
    SQL92 = "SQL92"


@dataclasses.dataclass(frozen=True, slots=True)
class SqlFilter:
    """A parsed SQL92 filter.

    Attributes:
        expression: the source text.
        root: the syntax tree.
    """

    expression: str
    root: sql_tree.Node

    def matches_tag_hash(self, tag_hash: int) -> bool:
        """SQL filters cannot prefilter on the tag hash: always ``True``."""
        del tag_hash
        return True

    def evaluate(self, properties: Mapping[str, str]) -> bool | None:
        """The three-valued result over ``properties`` (``None`` = unknown)."""
        return sql_eval.evaluate(self.root, properties)

    def matches(self, tag: str | None, properties: Mapping[str, str]) -> bool:
        """Whether the message matches: the expression is TRUE over its properties."""
        del tag
        return sql_eval.evaluate(self.root, properties) is True


MessageFilter = tag.TagFilter | SqlFilter | lite.LiteFilter
"""What a subscription's filter expression compiles to (or a lite consumer's lite topics)."""


def compile_filter(
    kind: FilterKind, expression: str, *, limits: settings.FilterSettings = tag.DEFAULT_LIMITS
) -> MessageFilter:
    """Parse a subscription filter of either kind.

    Raises:
        IllegalFilterExpressionError: the expression does not parse or breaks a bound.
    """
    if kind is FilterKind.TAG:
        return tag.parse_tags(expression, limits=limits)
    return parse_sql(expression, limits=limits)


def parse_sql(
    expression: str, *, limits: settings.FilterSettings = tag.DEFAULT_LIMITS
) -> SqlFilter:
    """Parse an SQL92 filter with the grammar in the module docstring.

    Raises:
        IllegalFilterExpressionError: a syntax error (with its character position), a
            RocketMQ parse-time check, or a bound of ``limits``.
    """
    tag.check_length(expression, limits)
    return SqlFilter(expression=expression, root=sql_parser.parse(expression, limits))
