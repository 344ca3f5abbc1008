"""Helpers for tests that run Debian's ``prometheus`` and ``promtool`` (fetched on first use by
``tests/prometheus/install.sh`` into ``~/.cache/ariane``; nothing is installed system-wide)."""

from __future__ import annotations

import functools
import json
import pathlib
import subprocess

INSTALL = pathlib.Path(__file__).parent / "prometheus" / "install.sh"
INSTALL_TIMEOUT_S = 600.0
"""Longest the first download and unpacking of the package may take."""


@functools.cache
def bin_dir() -> pathlib.Path:
    """The directory holding ``prometheus`` and ``promtool`` (installed on first use)."""
    out = subprocess.run(
        ["sh", str(INSTALL)], capture_output=True, text=True, check=True, timeout=INSTALL_TIMEOUT_S
    )
    return pathlib.Path(out.stdout.strip())


def promtool() -> str:
    """The promtool binary."""
    return str(bin_dir() / "promtool")


def check_rules(tmp_path: pathlib.Path, groups: list[dict[str, object]]) -> None:
    """``promtool check rules`` on a rule file holding ``groups``; fails the test if it refuses."""
    path = tmp_path / "rules.yaml"
    path.write_text(json.dumps({"groups": groups}))  # JSON is YAML
    done = subprocess.run(
        [promtool(), "check", "rules", str(path)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stdout + done.stderr
