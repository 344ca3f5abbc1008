"""Showing and recording client benchmark results: the summary table, the dated results files.

``<results dir>/client-<UTC date>.json`` holds every invocation of that date (``runs``: each
with its command line, settings, machine facts, per-run figures and loads, and summary rows);
``client-<date>.md`` is rewritten from it on every invocation, so the Markdown always shows
every run of the day with the exact command that produced it. Files are written whole
(``report.write_results``).
"""

from __future__ import annotations

import json
import pathlib
from collections.abc import Mapping, Sequence
from typing import Any

from rich import table as rich_table

from ariane.benchmark import measure, report

HEADERS = (
    "scenario",
    "client",
    "msgs/run",
    "msgs/call",
    "at once",
    "msgs/s",
    "MB/s",
    "p50 ms/call",
    "p99 ms/call",
    "limit (perf.md §2.4)",
    "ratio",
    "client/server cores",
    "ext cores max",
    "1-min load",
)


def _spread(value: Mapping[str, float], digits: int) -> str:
    return measure.Spread(value["median"], value["min"], value["max"]).format(digits)


def cells(row: Mapping[str, Any]) -> list[str]:
    """The table cells of one summary row."""
    return [
        row["scenario"],
        row["client"],
        f"{row['messages_per_run']:,}",
        str(row["messages_per_call"]),
        str(row["at_once"]),
        _spread(row["msgs_per_s"], 0),
        _spread(row["mb_per_s"], 1),
        _spread(row["p50_ms"], 2),
        _spread(row["p99_ms"], 2),
        f"{row['limit']}: {row['limit_msgs_per_s']:,.0f}",
        f"{row['ratio']:.2f}",
        f"{row['client_cores']['median']:.2f} / {row['server_cores']['median']:.2f}",
        f"{row['ext_cores_max']:.2f}",
        " ".join(f"{v:.2f}" for v in row["load_1m"]),
    ]


def table(kind: str, rows: Sequence[Mapping[str, Any]]) -> rich_table.Table:
    """The summary as a ``rich`` table."""
    out = rich_table.Table(title=f"ariane bench {kind}: median \\[min-max] over the rounds")
    for header in HEADERS:
        out.add_column(header, justify="left" if header in ("scenario", "client") else "right")
    for row in rows:
        out.add_row(*cells(row))
    return out


def _machine_line(info: Mapping[str, Any]) -> str:
    return (
        f"{info.get('cpu_count')} x {info.get('cpu_model')}, Python {info.get('python')}, "
        f"kernel {info.get('kernel')}, calibration sum(range(1000)) "
        f"{info.get('calibration_sum_range_1000_us')} µs (perf.md §2: 15.4 µs), "
        f"load average at start {info.get('load_average_at_start')}, commit "
        f"{str(info.get('git_commit'))[:12]}"
    )


def _entry_markdown(entry: Mapping[str, Any]) -> str:
    runs = entry["runs"]
    quiet = sum(1 for r in runs if r["gate"]["quiet"])
    return "\n".join(
        [
            f"## {entry['kind']} — {entry['started_utc']} to {entry['finished_utc']}",
            "",
            "```",
            entry["command"],
            "```",
            "",
            f"- Cluster: {entry['cluster']}.",
            f"- Machine: {_machine_line(entry['machine'])}.",
            f"- Quiet-machine gate (< 0.25 busy cores, perf.md §2.1) passed before {quiet} of "
            f"{len(runs)} runs; `ext cores` is the machine's busy cores minus this benchmark's "
            "process tree (bench, name server, broker, official driver) during each run; "
            "`client/server cores` split that tree: the client's process (the bench itself, or "
            "the official driver) and the rest (name server + broker), medians.",
            "",
            report.markdown_table(HEADERS, [cells(row) for row in entry["summary"]]),
            "",
        ]
    )


PREAMBLE = """\
# Client benchmark: `ariane.client` vs the official Python client

Written by `ariane bench produce|consume` (`ariane.benchmark.client_bench`); every section below
is one invocation, with the exact command that produced it. 1 KiB bodies; MB = 10^6 body bytes.
Latency is per call (one send or send_batch; for consume, one receive). `limit` is the
transport-only figure of specs/perf.md §2.4 for the same call pattern (measured there on this
machine type, not re-measured by this run), and `ratio` = median msgs/s / limit. On a shared
machine, read `ext cores` and the load before comparing numbers across sections.
"""


def markdown(payload: Mapping[str, Any]) -> str:
    """The whole Markdown file of one date."""
    return PREAMBLE + "\n" + "\n".join(_entry_markdown(e) for e in payload["runs"])


def record(
    results_dir: pathlib.Path, name: str, entry: Mapping[str, Any]
) -> tuple[pathlib.Path, pathlib.Path]:
    """Append ``entry`` to ``<name>-<date>.json`` (date of its start, UTC) and rewrite the
    ``.md``; returns both paths.

    Raises:
        OSError: the files cannot be written.
        ValueError: the existing JSON file is not a results file of this benchmark.
    """
    date = str(entry["started_utc"])[:10]
    path = results_dir / f"{name}-{date}.json"
    payload: dict[str, Any] = {"benchmark": name, "date": date, "runs": []}
    if path.exists():
        payload = json.loads(path.read_text(encoding="utf-8"))
        if payload.get("benchmark") != name or not isinstance(payload.get("runs"), list):
            raise ValueError(f"{path} is not a {name} benchmark results file")
    payload["runs"].append(entry)
    return report.write_results(name, date, payload, markdown(payload), results_dir)
