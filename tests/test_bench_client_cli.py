"""``ariane bench`` refuses bad arguments, skips the official scenario without the official
client, picks its results directory, keeps every run of a date with its command, and runs from
an installed copy of the package outside the source checkout."""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import shutil
import subprocess
import sys
from typing import Any

import pytest

import ariane
from ariane import cli
from ariane.benchmark import cli as bench_cli
from ariane.benchmark import client_bench, client_results


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


@pytest.fixture
def ran(monkeypatch: pytest.MonkeyPatch) -> list[client_bench.Options]:
    """The options ``client_bench.run`` is called with; no benchmark runs."""
    calls: list[client_bench.Options] = []

    def fake_run(options: client_bench.Options) -> int:
        calls.append(options)
        return 0

    monkeypatch.setattr(client_bench, "run", fake_run)
    return calls


def test_official_scenario_without_the_official_client_is_skipped_with_the_extra_named(
    ran: list[client_bench.Options],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Without ``rocketmq-python-client`` the official scenario is dropped with a line naming
    ``pip install 'ariane[clients]'``, the other scenarios still run, and asking for the
    official scenario alone exits 2 (nothing to measure) instead of crashing."""
    monkeypatch.setattr(client_bench, "official_client_installed", lambda: False)
    assert cli.main(["bench", "produce", "--scenarios", "ours-batch,official"]) == 0
    assert [o.scenarios for o in ran] == [("ours-batch",)]
    assert "pip install 'ariane[clients]'" in capsys.readouterr().err
    assert cli.main(["bench", "consume", "--scenarios", "official"]) == 2
    err = capsys.readouterr().err
    assert "skipping the official scenario" in err and "ariane[clients]" in err
    assert len(ran) == 1


def test_results_go_to_bench_results_in_a_checkout_else_the_current_directory(
    ran: list[client_bench.Options], tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without ``--results-dir`` results land in ``./bench/results`` at a checkout's root and in
    the current directory anywhere else; ``--results-dir`` wins over both."""
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command")
    bench_cli.add_arguments(sub.add_parser("bench"))
    checkout, elsewhere = tmp_path / "checkout", tmp_path / "elsewhere"
    (checkout / "bench" / "results").mkdir(parents=True)
    elsewhere.mkdir()
    for cwd, extra in ((checkout, []), (elsewhere, []), (checkout, ["--results-dir", "/x"])):
        monkeypatch.chdir(cwd)
        argv = ["bench", "produce", "--scenarios", "ours-batch", *extra]
        assert bench_cli.run(parser.parse_args(argv)) == 0
    assert [o.results_dir for o in ran] == [
        checkout / "bench" / "results",
        elsewhere,
        pathlib.Path("/x"),
    ]
    assert [o.data_dir for o in ran] == [checkout, elsewhere, checkout]


def _run(
    argv: list[str], cwd: pathlib.Path, env: dict[str, str], timeout_s: float
) -> subprocess.CompletedProcess[str]:
    """``argv`` as a process in ``cwd`` with exactly ``env``; its exit status and output."""
    return subprocess.run(
        argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout_s, check=False
    )


def _installed_copy(root: pathlib.Path) -> dict[str, str]:
    """A copy of the ``ariane`` package alone under ``root/site`` (as a wheel installs it, with
    no checkout around it) and the environment that imports it first."""
    package = pathlib.Path(ariane.__file__).resolve().parent
    shutil.copytree(package, root / "site" / "ariane", ignore=shutil.ignore_patterns("__pycache__"))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "NAMESRV_ADDR")}
    return {**env, "PYTHONPATH": str(root / "site"), "COLUMNS": "200"}


@pytest.mark.slow
def test_installed_cli_runs_a_benchmark_outside_the_checkout(tmp_path: pathlib.Path) -> None:
    """``python -m ariane bench`` from a copy of the package, in a directory with no ``bench/``
    and the checkout off ``sys.path``, shows its help and runs a real 200-message round against
    the cluster it starts with a progress bar per step, recording the result in the current
    directory."""
    env = _installed_copy(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    command = [sys.executable, "-m", "ariane", "bench", "produce"]
    shown = _run([*command, "--help"], work, env, 60)
    assert shown.returncode == 0, shown.stderr
    assert "--results-dir" in shown.stdout and "ariane[clients]" in shown.stdout
    tiny = ["--messages", "200", "--scenarios", "ours-batch", "--rounds", "1"]
    done = _run([*command, *tiny, "--quiet-wait-s", "0"], work, env, 120)
    assert done.returncode == 0, done.stderr
    assert "ours-batch" in done.stdout
    for step in ["round 1/1: start cluster", "ours-batch: wait for a quiet machine"]:
        assert step in done.stderr, done.stderr
    assert "round 1/1 produce ours-batch" in done.stderr
    (recorded,) = work.glob("client-*.json")
    (entry,) = json.loads(recorded.read_text())["runs"]
    assert [(r["scenario"], r["messages"]) for r in entry["runs"]] == [("ours-batch", 200.0)]
    assert sorted(p.name for p in work.iterdir()) == [recorded.name, recorded.stem + ".md"]


def test_official_driver_runs_by_path_without_loading_ariane(tmp_path: pathlib.Path) -> None:
    """The official client's driver ships inside the package and, started the way ``ariane
    bench`` and ``bench.compare`` start it, loads no module of Ariane and none of its
    neighbours (``machine``, ``report``, …) as top-level modules."""
    assert client_bench.DRIVER.parent == pathlib.Path(client_bench.__file__).parent
    exe, *flags = client_bench.driver_command()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    shown = _run([exe, "-X", "importtime", *flags, "--help"], tmp_path, env, 60)
    assert shown.returncode == 0, shown.stderr
    assert "produce" in shown.stdout and "consume" in shown.stdout
    loaded = {line.rsplit("|", 1)[-1].strip() for line in shown.stderr.splitlines() if "|" in line}
    assert "rocketmq" in loaded
    neighbours = {p.stem for p in client_bench.DRIVER.parent.glob("*.py")}
    assert {m for m in loaded if m == "ariane" or m.startswith("ariane.")} == set()
    assert loaded & neighbours == set()
