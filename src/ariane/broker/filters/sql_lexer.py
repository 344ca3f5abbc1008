"""The SQL92 filter lexer (RocketMQ ``SelectorParser.jj`` tokens).

Keywords are case-insensitive (upper-cased in tokens); ``''`` escapes a quote inside a string;
``--`` and ``/* */`` are comments. The token list always ends with an ``end`` token.
"""

from __future__ import annotations

import dataclasses
import re

from ariane.broker.filters import sql_tree
from ariane.common import errors

KEYWORDS = frozenset(
    {"NOT", "AND", "OR", "BETWEEN", "IN", "TRUE", "FALSE", "NULL", "IS"}
    | {op.value for op in sql_tree.TextOp}
)
"""Reserved words (case-insensitive); they cannot name properties."""

_TOKEN_PATTERN = re.compile(
    r"""
    (?P<space>\s+)
    | (?P<comment>--[^\n\r]*|/\*.*?\*/)
    | (?P<float>\d+\.\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+)
    | (?P<int>\d+)[lL]?
    | (?P<string>'(?:[^']|'')*')
    | (?P<word>[A-Za-z_$][A-Za-z0-9_$]*)
    | (?P<punct><>|<=|>=|[=<>(),+-])
    """,
    re.VERBOSE | re.DOTALL,
)
INT_DIGITS_MAX = 4000
"""The longest integer literal accepted, in digits (Python parses longer ones slowly)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Token:
    """One token and its character position."""

    kind: str  # "float", "int", "string", "word", "keyword", "punct", "end"
    text: str  # keywords upper-cased; literals as written
    pos: int


def lex(text: str) -> list[Token]:
    """Tokens of ``text``, ending with an ``end`` token.

    Raises:
        IllegalFilterExpressionError: a character no token starts with.
    """
    tokens: list[Token] = []
    pos = 0
    while pos < len(text):
        match = _TOKEN_PATTERN.match(text, pos)
        if match is None:
            raise syntax_error(text, pos, f"unexpected character {text[pos]!r}")
        kind = match.lastgroup
        assert kind is not None
        if kind not in ("space", "comment"):
            word = match.group(kind)
            if kind == "word" and word.upper() in KEYWORDS:
                tokens.append(Token("keyword", word.upper(), pos))
            else:
                tokens.append(Token(kind, word, pos))
        pos = match.end()
    tokens.append(Token("end", "", len(text)))
    return tokens


def syntax_error(text: str, pos: int, reason: str) -> errors.IllegalFilterExpressionError:
    """The error for ``reason`` at character ``pos`` of ``text``."""
    return errors.IllegalFilterExpressionError(
        f"SQL92 filter {text!r}: {reason} at character {pos}"
    )
