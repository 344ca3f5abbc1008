"""Three-valued evaluation of SQL92 filters over a message's properties (RocketMQ semantics).

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
Deviations from RocketMQ, on purpose: a property such as ``'3.5'`` compared with an integer
literal compares as a decimal (RocketMQ throws and drops the message); an unparsable value is
unknown rather than an error that drops the message; two missing properties compare as unknown.
(Parse-time checks and the parser's deviations: ``sql_parser``.)
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from ariane.broker.filters.sql_tree import (
    And,
    Between,
    BoolCast,
    BoolConst,
    Compare,
    CompareOp,
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
