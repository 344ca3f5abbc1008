"""STYLE.md §12: functions stay under ~70 lines and every module opens with a docstring."""

from __future__ import annotations

import ast
import pathlib

SRC = pathlib.Path(__file__).resolve().parents[1] / "src" / "ariane"
FUNCTION_LINES_MAX = 80


def _modules() -> list[pathlib.Path]:
    return [p for p in SRC.rglob("*.py") if "gen" not in p.relative_to(SRC).parts]


def test_every_module_has_a_docstring() -> None:
    """A module says what it is for before any code."""
    missing = [str(p) for p in _modules() if ast.get_docstring(ast.parse(p.read_text())) is None]
    assert missing == []


def test_functions_are_small_enough_to_read() -> None:
    """No function body runs past FUNCTION_LINES_MAX lines."""
    long_ones: list[str] = []
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > FUNCTION_LINES_MAX:
                    long_ones.append(f"{path.name}:{node.name} ({length} lines)")
    assert long_ones == []
