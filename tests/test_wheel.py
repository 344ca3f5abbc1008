"""The wheel ships what an installed Ariane needs besides its modules: the ``.proto`` sources,
the generated code's ``.pyi`` stubs and ``py.typed`` (PEP 561), as ``pyproject.toml`` promises."""

from __future__ import annotations

import pathlib
import shutil
import subprocess
import sys
import zipfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "ariane"
BUILD_TIMEOUT_S = 300.0

pytestmark = pytest.mark.slow


def _build_wheel(tmp_path: pathlib.Path) -> pathlib.Path:
    """``pip wheel --no-deps --no-build-isolation`` of a copy of the project (a build in place
    would write ``build/`` and ``*.egg-info`` into the source tree under other tests)."""
    project = tmp_path / "project"
    project.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, project / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    shutil.copytree(ROOT / "src", project / "src", ignore=ignore)
    wheels = tmp_path / "wheels"
    command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation"]
    command += ["--no-index", "--quiet", "--wheel-dir", str(wheels), str(project)]
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S, check=False
    )
    assert done.returncode == 0, done.stderr[-4000:]
    (wheel,) = wheels.glob("ariane-*.whl")
    return wheel


def test_the_wheel_ships_the_protos_the_stubs_and_py_typed(tmp_path: pathlib.Path) -> None:
    """Every ``.proto`` under ``grpcwire/protos``, every ``.pyi`` under ``grpcwire/gen`` and
    ``py.typed`` are in the built wheel at their package paths."""
    wanted = {
        str(path.relative_to(PACKAGE.parent))
        for pattern in ("grpcwire/protos/**/*.proto", "grpcwire/gen/**/*.pyi", "py.typed")
        for path in PACKAGE.glob(pattern)
    }
    assert any(name.endswith(".proto") for name in wanted)
    assert any(name.endswith(".pyi") for name in wanted)

    with zipfile.ZipFile(_build_wheel(tmp_path)) as wheel:
        shipped = set(wheel.namelist())

    assert sorted(wanted - shipped) == []
    assert "ariane/admin_cli/__init__.py" in shipped and "ariane/grpcwire/pb.py" in shipped
