"""SQL92 text from a filter's syntax tree: ``parse(render(node)) == node``."""

from __future__ import annotations

from ariane.broker.filters.sql_tree import (
    And,
    Between,
    BoolCast,
    BoolConst,
    Compare,
    In,
    IsNull,
    Node,
    Not,
    Operand,
    Or,
    Prop,
    TextMatch,
)


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
