"""The syntax tree of SQL92 filters: operands, operators and boolean nodes (values only).

Nodes are frozen dataclasses; ``And``/``Or`` are n-ary so long chains need no deep recursion.
"""

from __future__ import annotations

import dataclasses
import enum

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
