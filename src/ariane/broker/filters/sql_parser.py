"""The SQL92 filter parser (RocketMQ ``filter`` module, ``SelectorParser.jj``): text to tree.

SQL92 (RocketMQ ``filter`` module, ``SelectorParser.jj``), over the message's properties (all of
them, so ``TAGS`` and ``KEYS`` work too)::

    expr      := or
    or        := and (OR and)*
    and       := not (AND not)*
    not       := NOT not | predicate
    predicate := '(' expr ')' | operand [tail]
    tail      := (= | <> | < | <= | > | >=) operand
               | [NOT] BETWEEN operand AND operand
               | [NOT] IN '(' 'str' (',' 'str')* ')'
               | IS [NOT] NULL
               | [NOT] (CONTAINS | STARTSWITH | ENDSWITH) 'str'
    operand   := identifier | 'string' | [+|-] number | TRUE | FALSE | NULL

Parse-time checks as RocketMQ: ``<``/``>``/BETWEEN take only numeric literals, ``= NULL`` is
refused (use ``IS NULL``), BETWEEN needs low <= high, IN takes string literals after a property.
Deviation on purpose: NOT binds looser than comparisons, as in SQL (RocketMQ's grammar reads
``NOT a = 1`` as ``(NOT a) = 1``, which then fails at run time); unary minus applies to numeric
literals only. Depth, IN items and length are bounded by ``FilterSettings``.
"""

from __future__ import annotations

from ariane.broker import settings
from ariane.broker.filters import sql_lexer
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
from ariane.common import errors

_COMPARE_OPS = {op.value: op for op in CompareOp}
_ORDERING = frozenset({CompareOp.LT, CompareOp.LE, CompareOp.GT, CompareOp.GE})
_NEGATABLE = frozenset({"BETWEEN", "IN"} | {op.value for op in TextOp})


class _Parser:
    """Recursive descent over the token list; depth bounded by ``expression_depth_max``."""

    def __init__(self, text: str, limits: settings.FilterSettings) -> None:
        self._text = text
        self._limits = limits
        self._tokens = sql_lexer.lex(text)
        self._index = 0
        self._depth = 0

    def parse(self) -> Node:
        node = self._or()
        if self._peek().kind != "end":
            raise self._error("expected AND, OR or the end of the expression")
        return node

    def _peek(self, ahead: int = 0) -> sql_lexer.Token:
        return self._tokens[min(self._index + ahead, len(self._tokens) - 1)]

    def _next(self) -> sql_lexer.Token:
        token = self._peek()
        self._index += 1
        return token

    def _accept(self, kind: str, text: str) -> bool:
        token = self._peek()
        if token.kind == kind and token.text == text:
            self._index += 1
            return True
        return False

    def _expect(self, kind: str, text: str) -> None:
        if not self._accept(kind, text):
            raise self._error(f"expected {text}")

    def _error(self, reason: str, token: sql_lexer.Token | None = None) -> errors.ArianeError:
        token = token or self._peek()
        found = "the end" if token.kind == "end" else repr(token.text)
        return sql_lexer.syntax_error(self._text, token.pos, f"{reason}, found {found}")

    def _nest(self) -> None:
        self._depth += 1
        if self._depth > self._limits.expression_depth_max:
            raise self._error(
                f"nesting deeper than {self._limits.expression_depth_max} (expression_depth_max)"
            )

    def _or(self) -> Node:
        items = [self._and()]
        while self._accept("keyword", "OR"):
            items.append(self._and())
        return items[0] if len(items) == 1 else Or(tuple(items))

    def _and(self) -> Node:
        items = [self._not()]
        while self._accept("keyword", "AND"):
            items.append(self._not())
        return items[0] if len(items) == 1 else And(tuple(items))

    def _not(self) -> Node:
        if not self._accept("keyword", "NOT"):
            return self._predicate()
        self._nest()
        node = Not(self._not())
        self._depth -= 1
        return node

    def _predicate(self) -> Node:
        if self._accept("punct", "("):
            self._nest()
            node = self._or()
            self._expect("punct", ")")
            self._depth -= 1
            return node
        start = self._peek()
        left = self._operand()
        token = self._peek()
        if token.kind == "punct" and token.text in _COMPARE_OPS:
            self._index += 1
            return self._compare(_COMPARE_OPS[token.text], left, self._operand(), token)
        negated = token.kind == "keyword" and token.text == "NOT"
        if negated:
            if self._peek(1).text not in _NEGATABLE or self._peek(1).kind != "keyword":
                raise self._error(
                    "expected BETWEEN, IN, CONTAINS, STARTSWITH or ENDSWITH after NOT",
                    self._peek(1),
                )
            self._index += 1
        return self._keyword_tail(left, start, negated=negated)

    def _keyword_tail(self, left: Operand, start: sql_lexer.Token, *, negated: bool) -> Node:
        token = self._peek()
        if self._accept("keyword", "BETWEEN"):
            low = self._operand()
            self._expect("keyword", "AND")
            return self._between(left, low, self._operand(), negated, token)
        if self._accept("keyword", "IN"):
            return self._in(left, negated, token)
        if token.kind == "keyword" and token.text in {op.value for op in TextOp}:
            self._index += 1
            return TextMatch(TextOp(token.text), left, self._string(), negated)
        if self._accept("keyword", "IS"):
            is_not = self._accept("keyword", "NOT")
            self._expect("keyword", "NULL")
            return IsNull(left, is_not)
        if isinstance(left, Prop):
            return BoolCast(left)
        if isinstance(left.value, bool):
            return BoolConst(left.value)
        raise sql_lexer.syntax_error(
            self._text, start.pos, "a literal is not a condition; compare it with something"
        )

    def _operand(self) -> Operand:
        token = self._next()
        if token.kind == "punct" and token.text in "+-":
            value = self._operand()
            if not isinstance(value, Const) or not _is_number(value.value):
                raise sql_lexer.syntax_error(
                    self._text, token.pos, "unary + and - apply to numbers only"
                )
            assert isinstance(value.value, int | float)
            return Const(-value.value if token.text == "-" else value.value)
        if token.kind == "int":
            digits = token.text.rstrip("lL")
            if len(digits) > sql_lexer.INT_DIGITS_MAX:
                raise self._error("integer literal too long", token)
            return Const(int(digits))
        if token.kind == "float":
            return Const(float(token.text))
        if token.kind == "string":
            return Const(token.text[1:-1].replace("''", "'"))
        if token.kind == "word":
            return Prop(token.text)
        if token.kind == "keyword" and token.text in ("TRUE", "FALSE", "NULL"):
            return Const({"TRUE": True, "FALSE": False, "NULL": None}[token.text])
        raise self._error("expected a property name or a literal", token)

    def _string(self) -> str:
        token = self._next()
        if token.kind != "string":
            raise self._error("expected a string literal in quotes", token)
        return token.text[1:-1].replace("''", "'")

    def _compare(self, op: CompareOp, left: Operand, right: Operand, at: sql_lexer.Token) -> Node:
        for side in (left, right):
            if not isinstance(side, Const):
                continue
            if op in _ORDERING and not _is_number(side.value):
                raise sql_lexer.syntax_error(
                    self._text, at.pos, f"{op.value} compares numbers only, not {side.value!r}"
                )
            if side.value is None:
                raise sql_lexer.syntax_error(
                    self._text, at.pos, f"NULL cannot be compared with {op.value}; use IS NULL"
                )
        if (
            isinstance(left, Const)
            and isinstance(right, Const)
            and isinstance(left.value, bool) != isinstance(right.value, bool)
        ):
            raise sql_lexer.syntax_error(
                self._text, at.pos, "a boolean cannot be compared with a non-boolean"
            )
        return Compare(op, left, right)

    def _between(
        self, value: Operand, low: Operand, high: Operand, negated: bool, at: sql_lexer.Token
    ) -> Node:
        for side in (value, low, high):
            if isinstance(side, Const) and not _is_number(side.value):
                raise sql_lexer.syntax_error(
                    self._text, at.pos, f"BETWEEN takes numbers only, not {side.value!r}"
                )
        if isinstance(low, Const) and isinstance(high, Const):
            assert isinstance(low.value, int | float) and isinstance(high.value, int | float)
            if low.value > high.value:
                raise sql_lexer.syntax_error(
                    self._text, at.pos, f"BETWEEN {low.value} AND {high.value}: low exceeds high"
                )
        return Between(value, low, high, negated)

    def _in(self, left: Operand, negated: bool, at: sql_lexer.Token) -> Node:
        if not isinstance(left, Prop):
            raise sql_lexer.syntax_error(self._text, at.pos, "IN needs a property on its left")
        self._expect("punct", "(")
        items = [self._string()]
        while self._accept("punct", ","):
            items.append(self._string())
            if len(items) > self._limits.in_list_items_max:
                raise self._error(
                    f"more than {self._limits.in_list_items_max} items in IN (in_list_items_max)"
                )
        self._expect("punct", ")")
        return In(left, tuple(items), negated)


def _is_number(value: Value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def parse(text: str, limits: settings.FilterSettings) -> Node:
    """The syntax tree of ``text`` with the grammar in the module docstring.

    Raises:
        IllegalFilterExpressionError: a syntax error (with its character position), a
            RocketMQ parse-time check, or a bound of ``limits``.
    """
    return _Parser(text, limits).parse()
