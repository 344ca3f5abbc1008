"""Subscription filters: tag expressions and SQL92 property filters, with RocketMQ's semantics.

Tag expressions (RocketMQ ``FilterAPI``/``SubscriptionData``): ``*``, empty or blank match every
message; otherwise ``a || b || c`` (whitespace around tags ignored) matches a message whose tag is
one of them. The ConsumeQueue stores each message's tag hash (Java ``String.hashCode``), so the
broker prefilters on ``matches_tag_hash`` without reading the message and then checks the real
tag with ``matches`` (hash collisions).

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

Keywords are case-insensitive; ``''`` escapes a quote; ``--`` and ``/* */`` are comments.
Evaluation is three-valued (TRUE, FALSE, unknown = ``None``); a message matches only on TRUE.

* Property values are strings. Compared with a number, or with ``<``/``<=``/``>``/``>=`` with
  each other, they are read as numbers (integer or decimal); a value that is not a number makes
  the comparison unknown. Strings compare with ``=``/``<>`` as strings; ``'true'``/``'false'``
  compare with TRUE/FALSE case-insensitively.
* A missing property makes comparisons, BETWEEN and IN unknown; ``IS NULL`` is true for it;
  CONTAINS/STARTSWITH/ENDSWITH and their NOT forms are false for it (RocketMQ), as they are for an
  empty search string.
* A bare property used as a condition is unknown when missing and false otherwise (RocketMQ's
  boolean cast: property values are never booleans).
* Parse-time checks as RocketMQ: ``<``/``>``/BETWEEN take only numeric literals, ``= NULL`` is
  refused (use ``IS NULL``), BETWEEN needs low ≤ high, IN takes string literals after a property.

Deviations from RocketMQ, on purpose: NOT binds looser than comparisons, as in SQL (RocketMQ's
grammar reads ``NOT a = 1`` as ``(NOT a) = 1``, which then fails at run time); a property such as
``'3.5'`` compared with an integer literal compares as a decimal (RocketMQ throws and drops the
message); an unparsable value is unknown rather than an error that drops the message; unary
minus applies to numeric literals only; two missing properties compare as unknown.

Expressions are bounded (``FilterSettings``: length, nesting depth, IN items, tags); parse errors
raise ``IllegalFilterExpressionError`` naming the character position.
"""

from __future__ import annotations

import dataclasses
import enum
import re
from collections.abc import Mapping

from ariane.broker import settings
from ariane.common import errors, hashing

_DEFAULT_LIMITS = settings.FilterSettings()
SUB_ALL = "*"
"""The tag expression that matches every message."""


class FilterKind(enum.Enum):
    """``apache.rocketmq.v2.FilterType``: TAG or SQL."""

    TAG = "TAG"
    SQL92 = "SQL92"


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


def parse_tags(expression: str, *, limits: settings.FilterSettings = _DEFAULT_LIMITS) -> TagFilter:
    """Parse ``*``, ``""`` or ``a || b || c``.

    Raises:
        IllegalFilterExpressionError: too long, too many tags, or no tag between separators
            only (``"||"``).
    """
    _check_length(expression, limits)
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


def _check_length(expression: str, limits: settings.FilterSettings) -> None:
    if len(expression) > limits.expression_chars_max:
        raise errors.IllegalFilterExpressionError(
            f"filter expression is {len(expression)} characters; "
            f"the limit is {limits.expression_chars_max}"
        )


# -- SQL92: values and syntax tree ---------------------------------------------------------------

Value = str | int | float | bool | None
"""A literal or property value during evaluation (``None`` = NULL / missing)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Prop:
    """A property reference."""

    name: str


@dataclasses.dataclass(frozen=True, slots=True)
class Const:
    """A literal: string, integer, decimal, TRUE/FALSE or NULL."""

    value: Value


Operand = Prop | Const


class CompareOp(enum.Enum):
    """Binary comparison operators."""

    EQ = "="
    NE = "<>"
    LT = "<"
    LE = "<="
    GT = ">"
    GE = ">="


class TextOp(enum.Enum):
    """RocketMQ 5.x string predicates."""

    CONTAINS = "CONTAINS"
    STARTSWITH = "STARTSWITH"
    ENDSWITH = "ENDSWITH"


@dataclasses.dataclass(frozen=True, slots=True)
class Compare:
    """``left op right``."""

    op: CompareOp
    left: Operand
    right: Operand


@dataclasses.dataclass(frozen=True, slots=True)
class Between:
    """``value [NOT] BETWEEN low AND high``."""

    value: Operand
    low: Operand
    high: Operand
    negated: bool


@dataclasses.dataclass(frozen=True, slots=True)
class In:
    """``prop [NOT] IN ('a', 'b')``."""

    prop: Prop
    items: tuple[str, ...]
    negated: bool


@dataclasses.dataclass(frozen=True, slots=True)
class IsNull:
    """``operand IS [NOT] NULL``."""

    operand: Operand
    negated: bool


@dataclasses.dataclass(frozen=True, slots=True)
class TextMatch:
    """``operand [NOT] CONTAINS|STARTSWITH|ENDSWITH 'search'``."""

    op: TextOp
    operand: Operand
    search: str
    negated: bool


@dataclasses.dataclass(frozen=True, slots=True)
class BoolConst:
    """TRUE or FALSE used as a condition."""

    value: bool


@dataclasses.dataclass(frozen=True, slots=True)
class BoolCast:
    """A bare property used as a condition."""

    prop: Prop


@dataclasses.dataclass(frozen=True, slots=True)
class Not:
    """``NOT operand``."""

    operand: Node


@dataclasses.dataclass(frozen=True, slots=True)
class And:
    """``a AND b AND …`` (n-ary so long chains need no deep recursion)."""

    operands: tuple[Node, ...]


@dataclasses.dataclass(frozen=True, slots=True)
class Or:
    """``a OR b OR …``."""

    operands: tuple[Node, ...]


Node = Compare | Between | In | IsNull | TextMatch | BoolConst | BoolCast | Not | And | Or
"""A boolean node of the syntax tree."""


@dataclasses.dataclass(frozen=True, slots=True)
class SqlFilter:
    """A parsed SQL92 filter.

    Attributes:
        expression: the source text.
        root: the syntax tree.
    """

    expression: str
    root: Node

    def matches_tag_hash(self, tag_hash: int) -> bool:
        """SQL filters cannot prefilter on the tag hash: always ``True``."""
        del tag_hash
        return True

    def evaluate(self, properties: Mapping[str, str]) -> bool | None:
        """The three-valued result over ``properties`` (``None`` = unknown)."""
        return evaluate(self.root, properties)

    def matches(self, tag: str | None, properties: Mapping[str, str]) -> bool:
        """Whether the message matches: the expression is TRUE over its properties."""
        del tag
        return evaluate(self.root, properties) is True


MessageFilter = TagFilter | SqlFilter
"""What a subscription's filter expression compiles to."""


def compile_filter(
    kind: FilterKind, expression: str, *, limits: settings.FilterSettings = _DEFAULT_LIMITS
) -> MessageFilter:
    """Parse a subscription filter of either kind.

    Raises:
        IllegalFilterExpressionError: the expression does not parse or breaks a bound.
    """
    if kind is FilterKind.TAG:
        return parse_tags(expression, limits=limits)
    return parse_sql(expression, limits=limits)


def parse_sql(expression: str, *, limits: settings.FilterSettings = _DEFAULT_LIMITS) -> SqlFilter:
    """Parse an SQL92 filter with the grammar in the module docstring.

    Raises:
        IllegalFilterExpressionError: a syntax error (with its character position), a
            RocketMQ parse-time check, or a bound of ``limits``.
    """
    _check_length(expression, limits)
    return SqlFilter(expression=expression, root=_Parser(expression, limits).parse())


# -- SQL92: lexer ----------------------------------------------------------------------------------

KEYWORDS = frozenset(
    {"NOT", "AND", "OR", "BETWEEN", "IN", "TRUE", "FALSE", "NULL", "IS"}
    | {op.value for op in TextOp}
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
_INT_DIGITS_MAX = 4000


@dataclasses.dataclass(frozen=True, slots=True)
class _Token:
    kind: str  # "float", "int", "string", "word", "keyword", "punct", "end"
    text: str  # keywords upper-cased; literals as written
    pos: int


def _lex(text: str) -> list[_Token]:
    tokens: list[_Token] = []
    pos = 0
    while pos < len(text):
        match = _TOKEN_PATTERN.match(text, pos)
        if match is None:
            raise _syntax(text, pos, f"unexpected character {text[pos]!r}")
        kind = match.lastgroup
        assert kind is not None
        if kind not in ("space", "comment"):
            word = match.group(kind)
            if kind == "word" and word.upper() in KEYWORDS:
                tokens.append(_Token("keyword", word.upper(), pos))
            else:
                tokens.append(_Token(kind, word, pos))
        pos = match.end()
    tokens.append(_Token("end", "", len(text)))
    return tokens


def _syntax(text: str, pos: int, reason: str) -> errors.IllegalFilterExpressionError:
    return errors.IllegalFilterExpressionError(
        f"SQL92 filter {text!r}: {reason} at character {pos}"
    )


# -- SQL92: parser -----------------------------------------------------------------------------

_COMPARE_OPS = {op.value: op for op in CompareOp}
_ORDERING = frozenset({CompareOp.LT, CompareOp.LE, CompareOp.GT, CompareOp.GE})
_NEGATABLE = frozenset({"BETWEEN", "IN"} | {op.value for op in TextOp})


class _Parser:
    """Recursive descent over the token list; depth bounded by ``expression_depth_max``."""

    def __init__(self, text: str, limits: settings.FilterSettings) -> None:
        self._text = text
        self._limits = limits
        self._tokens = _lex(text)
        self._index = 0
        self._depth = 0

    def parse(self) -> Node:
        node = self._or()
        if self._peek().kind != "end":
            raise self._error("expected AND, OR or the end of the expression")
        return node

    def _peek(self, ahead: int = 0) -> _Token:
        return self._tokens[min(self._index + ahead, len(self._tokens) - 1)]

    def _next(self) -> _Token:
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

    def _error(self, reason: str, token: _Token | None = None) -> errors.ArianeError:
        token = token or self._peek()
        found = "the end" if token.kind == "end" else repr(token.text)
        return _syntax(self._text, token.pos, f"{reason}, found {found}")

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

    def _keyword_tail(self, left: Operand, start: _Token, *, negated: bool) -> Node:
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
        raise _syntax(
            self._text, start.pos, "a literal is not a condition; compare it with something"
        )

    def _operand(self) -> Operand:
        token = self._next()
        if token.kind == "punct" and token.text in "+-":
            value = self._operand()
            if not isinstance(value, Const) or not _is_number(value.value):
                raise _syntax(self._text, token.pos, "unary + and - apply to numbers only")
            assert isinstance(value.value, int | float)
            return Const(-value.value if token.text == "-" else value.value)
        if token.kind == "int":
            digits = token.text.rstrip("lL")
            if len(digits) > _INT_DIGITS_MAX:
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

    def _compare(self, op: CompareOp, left: Operand, right: Operand, at: _Token) -> Node:
        for side in (left, right):
            if not isinstance(side, Const):
                continue
            if op in _ORDERING and not _is_number(side.value):
                raise _syntax(
                    self._text, at.pos, f"{op.value} compares numbers only, not {side.value!r}"
                )
            if side.value is None:
                raise _syntax(
                    self._text, at.pos, f"NULL cannot be compared with {op.value}; use IS NULL"
                )
        if (
            isinstance(left, Const)
            and isinstance(right, Const)
            and isinstance(left.value, bool) != isinstance(right.value, bool)
        ):
            raise _syntax(self._text, at.pos, "a boolean cannot be compared with a non-boolean")
        return Compare(op, left, right)

    def _between(
        self, value: Operand, low: Operand, high: Operand, negated: bool, at: _Token
    ) -> Node:
        for side in (value, low, high):
            if isinstance(side, Const) and not _is_number(side.value):
                raise _syntax(self._text, at.pos, f"BETWEEN takes numbers only, not {side.value!r}")
        if isinstance(low, Const) and isinstance(high, Const):
            assert isinstance(low.value, int | float) and isinstance(high.value, int | float)
            if low.value > high.value:
                raise _syntax(
                    self._text, at.pos, f"BETWEEN {low.value} AND {high.value}: low exceeds high"
                )
        return Between(value, low, high, negated)

    def _in(self, left: Operand, negated: bool, at: _Token) -> Node:
        if not isinstance(left, Prop):
            raise _syntax(self._text, at.pos, "IN needs a property on its left")
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


# -- SQL92: evaluation ---------------------------------------------------------------------------

_INT_TEXT = re.compile(r"[+-]?\d{1,4000}")
_DECIMAL_TEXT = re.compile(r"[+-]?(?:\d+\.?\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)")


def evaluate(node: Node, properties: Mapping[str, str]) -> bool | None:
    """Three-valued value of ``node`` over ``properties`` (``None`` = unknown)."""
    match node:
        case Compare(op, left, right):
            return _compare(op, _value(left, properties), _value(right, properties))
        case Between(value, low, high, negated):
            v, lo, hi = (_value(x, properties) for x in (value, low, high))
            if negated:
                return _or3(_compare(CompareOp.LT, v, lo), _compare(CompareOp.GT, v, hi))
            return _and3(_compare(CompareOp.GE, v, lo), _compare(CompareOp.LE, v, hi))
        case In(prop, items, negated):
            found = properties.get(prop.name)
            return None if found is None else (found in items) != negated
        case IsNull(operand, negated):
            return (_value(operand, properties) is None) != negated
        case TextMatch(op, operand, search, negated):
            return _text_match(op, _value(operand, properties), search, negated)
        case BoolConst(value):
            return value
        case BoolCast(prop):
            return None if prop.name not in properties else False
        case Not(operand):
            inner = evaluate(operand, properties)
            return None if inner is None else not inner
        case And(operands):
            return _and3(*(evaluate(x, properties) for x in operands))
        case Or(operands):
            return _or3(*(evaluate(x, properties) for x in operands))
    raise AssertionError(f"unknown filter node {node!r}")


def _value(operand: Operand, properties: Mapping[str, str]) -> Value:
    if isinstance(operand, Prop):
        return properties.get(operand.name)
    return operand.value


def _and3(*values: bool | None) -> bool | None:
    if any(v is False for v in values):
        return False
    return None if any(v is None for v in values) else True


def _or3(*values: bool | None) -> bool | None:
    if any(v is True for v in values):
        return True
    return None if any(v is None for v in values) else False


def _number(value: Value) -> int | float | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return value
    text = value.strip()
    if _INT_TEXT.fullmatch(text):
        return int(text)
    if _DECIMAL_TEXT.fullmatch(text):
        return float(text)
    return None


def _equal(left: Value, right: Value) -> bool | None:
    if isinstance(left, bool) or isinstance(right, bool):
        flag, other = (left, right) if isinstance(left, bool) else (right, left)
        if isinstance(other, bool):
            return flag == other
        if isinstance(other, str):
            return (other.lower() == "true") == flag
        return False
    if isinstance(left, str) and isinstance(right, str):
        return left == right
    ln, rn = _number(left), _number(right)
    return None if ln is None or rn is None else ln == rn


def _compare(op: CompareOp, left: Value, right: Value) -> bool | None:
    if left is None or right is None:
        return None
    if op is CompareOp.EQ or op is CompareOp.NE:
        equal = _equal(left, right)
        return None if equal is None else equal == (op is CompareOp.EQ)
    ln, rn = _number(left), _number(right)
    if ln is None or rn is None:
        return None
    if op is CompareOp.LT:
        return ln < rn
    if op is CompareOp.LE:
        return ln <= rn
    if op is CompareOp.GT:
        return ln > rn
    return ln >= rn


def _text_match(op: TextOp, value: Value, search: str, negated: bool) -> bool:
    if not search or not isinstance(value, str):
        return False
    if op is TextOp.CONTAINS:
        found = search in value
    elif op is TextOp.STARTSWITH:
        found = value.startswith(search)
    else:
        found = value.endswith(search)
    return found != negated


# -- SQL92: rendering ------------------------------------------------------------------------------


def render(node: Node) -> str:
    """SQL92 text that parses back to ``node`` (every compound child is parenthesised)."""
    match node:
        case Compare(op, left, right):
            return f"{_render_operand(left)} {op.value} {_render_operand(right)}"
        case Between(value, low, high, negated):
            word = "NOT BETWEEN" if negated else "BETWEEN"
            v, lo, hi = (_render_operand(x) for x in (value, low, high))
            return f"{v} {word} {lo} AND {hi}"
        case In(prop, items, negated):
            listed = ", ".join(_quote(i) for i in items)
            return f"{prop.name} {'NOT IN' if negated else 'IN'} ({listed})"
        case IsNull(operand, negated):
            return f"{_render_operand(operand)} IS {'NOT NULL' if negated else 'NULL'}"
        case TextMatch(op, operand, search, negated):
            word = f"NOT {op.value}" if negated else op.value
            return f"{_render_operand(operand)} {word} {_quote(search)}"
        case BoolConst(value):
            return "TRUE" if value else "FALSE"
        case BoolCast(prop):
            return prop.name
        case Not(operand):
            return f"NOT ({render(operand)})"
        case And(operands):
            return " AND ".join(f"({render(x)})" for x in operands)
        case Or(operands):
            return " OR ".join(f"({render(x)})" for x in operands)
    raise AssertionError(f"unknown filter node {node!r}")


def _render_operand(operand: Operand) -> str:
    if isinstance(operand, Prop):
        return operand.name
    value = operand.value
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, str):
        return _quote(value)
    return repr(value)


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"
