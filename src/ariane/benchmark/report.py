"""Recording a benchmark's result: ``<results dir>/<name>-<stamp>.json`` and ``.md``.

The JSON holds every number (for later comparison by a program); the Markdown holds the table
and the exact command line (for a person). Both are written whole or not at all (temporary
name, then rename), so an interrupted run leaves no half file.
"""

from __future__ import annotations

import json
import os
import pathlib
import shlex
import sys
from collections.abc import Sequence


def command_line(module: str) -> str:
    """The command that ran this process as ``python -m <module> <args>``, shell-quoted."""
    return shlex.join(["python", "-m", module, *sys.argv[1:]])


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A GitHub Markdown table; ``|`` inside cells is escaped."""

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"

    divider = "|" + "|".join("---" for _ in headers) + "|"
    return "\n".join([line(headers), divider, *(line(r) for r in rows)])


def _write_atomically(path: pathlib.Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def write_results(
    name: str,
    stamp: str,
    payload: dict[str, object],
    markdown: str,
    results_dir: pathlib.Path,
) -> tuple[pathlib.Path, pathlib.Path]:
    """Write ``<name>-<stamp>.json`` (``payload``) and ``<name>-<stamp>.md`` (``markdown``).

    Returns:
        the two paths, JSON first.

    Raises:
        OSError: if the directory cannot be created or written.
    """
    results_dir.mkdir(parents=True, exist_ok=True)
    json_path = results_dir / f"{name}-{stamp}.json"
    md_path = results_dir / f"{name}-{stamp}.md"
    _write_atomically(json_path, json.dumps(payload, indent=2, sort_keys=False) + "\n")
    _write_atomically(md_path, markdown.rstrip("\n") + "\n")
    return json_path, md_path
