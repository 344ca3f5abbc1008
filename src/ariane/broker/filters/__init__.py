"""Subscription filters: tag expressions and SQL92 property filters, with RocketMQ's semantics.

One module per concern: ``tag`` (tag expressions and the ConsumeQueue tag-hash prefilter),
``sql_tree`` (the SQL92 syntax tree), ``sql_lexer`` and ``sql_parser`` (text to tree, with
RocketMQ's parse-time checks and our bounds), ``sql_eval`` (three-valued evaluation over a
message's properties), ``sql_render`` (tree back to text) and ``subscription`` (what a
subscription's expression compiles to). The package's names below are what the receive path and
the tests use (``lite``: a lite consumer's filter); each module's docstring states its rules
and its deviations from RocketMQ.
"""

from ariane.broker.filters.lite import LiteFilter
from ariane.broker.filters.sql_eval import evaluate
from ariane.broker.filters.sql_render import render
from ariane.broker.filters.sql_tree import (
    And,
    Between,
    BoolCast,
    BoolConst,
    Compare,
    CompareOp,
    Const,
    In,
    IsNull,
    Node,
    Not,
    Operand,
    Or,
    Prop,
    TextMatch,
    TextOp,
    Value,
)
from ariane.broker.filters.subscription import (
    FilterKind,
    MessageFilter,
    SqlFilter,
    compile_filter,
    parse_sql,
)
from ariane.broker.filters.tag import TagFilter, parse_tags

__all__ = [
    "And",
    "Between",
    "BoolCast",
    "BoolConst",
    "Compare",
    "CompareOp",
    "Const",
    "FilterKind",
    "In",
    "IsNull",
    "LiteFilter",
    "MessageFilter",
    "Node",
    "Not",
    "Operand",
    "Or",
    "Prop",
    "SqlFilter",
    "TagFilter",
    "TextMatch",
    "TextOp",
    "Value",
    "compile_filter",
    "evaluate",
    "parse_sql",
    "parse_tags",
    "render",
]
