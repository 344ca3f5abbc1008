"""What an ``ariane admin`` command prints: a ``Result`` rendered as ``rich`` tables, or as JSON
with ``--json``, and the cell formats the handlers share.

Invariants: rendering is pure presentation (no call to the cluster); ``--json`` prints the rows
as they are (enums as their values, bytes as base64) and nothing else, so scripts can parse it;
tables print every column of ``Result.columns`` in order, ``-`` for an empty cell.
"""

from __future__ import annotations

import argparse
import base64
import dataclasses
import datetime
import enum
import json
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from rich import console as rich_console
from rich import table as rich_table

from ariane.client import admin

BODY_PREVIEW_BYTES = 512
"""Body bytes ``message get`` shows in its table."""


@dataclasses.dataclass(frozen=True, slots=True)
class Result:
    """What a sub-command prints: rows as a table (or JSON), and a closing note.

    Attributes:
        title: the table title.
        columns: (row key, column header) in display order.
        rows: one mapping per row; ``--json`` prints the list as is.
        note: a sentence printed after the table (not in JSON).
        vertical: print each row as its own field/value table (long records).
    """

    title: str
    columns: Sequence[tuple[str, str]]
    rows: Sequence[dict[str, Any]]
    note: str = ""
    vertical: bool = False


Client = admin.AdminClient
Handler = Callable[[Client, argparse.Namespace], Awaitable[Result]]
"""A sub-command: parsed arguments → the cluster's answer, as a ``Result``."""


def _jsonable(value: Any) -> Any:
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value


def _cell(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, enum.Enum):
        return str(value.value)
    if value is None or value == "":
        return "-"
    if isinstance(value, dict):
        return "\n".join(f"{k}={v}" for k, v in sorted(value.items())) or "-"
    if isinstance(value, list | tuple):
        return " ".join(str(v) for v in value) or "-"
    return str(value)


def render(result: Result, *, as_json: bool, out: rich_console.Console) -> None:
    """Print ``result`` as tables (or JSON) on ``out``."""
    if as_json:
        out.print_json(json.dumps(_jsonable(list(result.rows))))
        return
    if result.vertical:
        for index, row in enumerate(result.rows, 1):
            table = rich_table.Table(title=f"{result.title} {index}/{len(result.rows)}")
            table.add_column("field", style="bold")
            table.add_column("value", overflow="fold")
            for key, header in result.columns:
                table.add_row(header, _cell(row.get(key)))
            out.print(table)
    else:
        table = rich_table.Table(title=result.title)
        for _, header in result.columns:
            table.add_column(header)
        for row in result.rows:
            table.add_row(*(_cell(row.get(key)) for key, _ in result.columns))
        out.print(table)
    if result.note:
        out.print(result.note)


def rows(values: Sequence[Any]) -> list[dict[str, Any]]:
    """Dataclass values as row mappings (``--json`` prints them as they are)."""
    return [dataclasses.asdict(v) for v in values]


def iso(ms: int) -> str:
    """Ms since the epoch as ISO 8601 UTC with ms (``2024-05-01T12:00:00.000Z``)."""
    when = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)
    return when.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def body_preview(body: bytes) -> str:
    """The first ``BODY_PREVIEW_BYTES`` of a body as UTF-8 text (else hex), with its size when
    cut."""
    shown = body[:BODY_PREVIEW_BYTES]
    try:
        text = shown.decode("utf-8")
    except UnicodeDecodeError:
        text = "hex " + shown.hex()
    more = f" … ({len(body)} bytes)" if len(body) > len(shown) else ""
    return text + more
