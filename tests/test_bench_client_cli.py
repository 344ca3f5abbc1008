"""``ariane bench`` refuses bad arguments, and its results files keep every run of a date with
the command that produced it (no benchmark is run here)."""

from __future__ import annotations

import json
import pathlib
from typing import Any

import pytest

from ariane import cli
from ariane.benchmark import client_results


def _entry(command: str, kind: str) -> dict[str, Any]:
    spread = {"median": 1000.0, "min": 900.0, "max": 1100.0}
    row = {
        "scenario": "ours-batch",
        "client": "ariane.client",
        "messages_per_run": 500,
        "messages_per_call": 64,
        "at_once": 8,
        "msgs_per_s": spread,
        "mb_per_s": {"median": 1.0, "min": 0.9, "max": 1.1},
        "p50_ms": spread,
        "p99_ms": spread,
        "limit": "SendBatch c8",
        "limit_msgs_per_s": 128_000.0,
        "ratio": 1000 / 128_000,
        "client_cores": {"median": 0.5, "min": 0.5, "max": 0.5},
        "server_cores": {"median": 0.8, "min": 0.8, "max": 0.8},
        "ext_cores_max": 0.1,
        "load_1m": [1.5],
    }
    return {
        "kind": kind,
        "command": command,
        "started_utc": "2030-01-02T03:04:05+00:00",
        "finished_utc": "2030-01-02T03:05:05+00:00",
        "cluster": "ariane dev",
        "machine": {"cpu_count": 2, "git_commit": "abc"},
        "runs": [{"gate": {"quiet": False}}],
        "summary": [row],
    }


def test_unknown_scenario_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    """A scenario name the benchmark does not have exits 2 with the valid names."""
    assert cli.main(["bench", "produce", "--scenarios", "ours-batch,fast"]) == 2
    assert "ours-batch, ours-stream, ours-single, official" in capsys.readouterr().err


def test_streaming_scenario_is_produce_only(capsys: pytest.CaptureFixture[str]) -> None:
    """``ours-stream`` is refused for consume (no streaming receive), with the valid names."""
    assert cli.main(["bench", "consume", "--scenarios", "ours-stream"]) == 2
    assert "takes ours-batch, ours-single, official" in capsys.readouterr().err


def test_results_of_one_date_accumulate_with_their_commands(tmp_path: pathlib.Path) -> None:
    """Two invocations on one date land in one JSON file and one Markdown file that shows both
    command lines and their tables; a foreign JSON file is not overwritten."""
    first = client_results.record(tmp_path, "client", _entry("ariane bench produce", "produce"))
    second = client_results.record(tmp_path, "client", _entry("ariane bench consume", "consume"))
    assert (
        first == second == (tmp_path / "client-2030-01-02.json", tmp_path / "client-2030-01-02.md")
    )
    payload = json.loads(first[0].read_text())
    assert [e["command"] for e in payload["runs"]] == [
        "ariane bench produce",
        "ariane bench consume",
    ]
    text = first[1].read_text()
    assert "ariane bench produce" in text and "ariane bench consume" in text
    assert "1,000 [900-1,100]" in text and "SendBatch c8: 128,000" in text
    foreign = tmp_path / "client-2030-01-02.json"
    foreign.write_text('{"something": "else"}')
    with pytest.raises(ValueError, match="not a client benchmark"):
        client_results.record(tmp_path, "client", _entry("x", "produce"))
