"""Each package's ``__all__`` is sorted and names only things the package really has."""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys

import pytest

import ariane

PACKAGES = [
    *sorted(m.name for m in pkgutil.walk_packages(ariane.__path__, "ariane.") if m.ispkg),
    "ariane",
]


def _isort_key(name: str) -> tuple[int, str]:
    """Ruff's ``__all__`` order (RUF022, isort style): CONSTANTS, then Classes, then the rest."""
    if name.isupper():
        return (0, name)
    return (1, name) if name[:1].isupper() else (2, name)


@pytest.mark.parametrize("name", PACKAGES)
def test_all_is_sorted_and_resolvable(name: str) -> None:
    """``__all__`` is sorted and every entry resolves to an attribute."""
    if name.endswith(".gen") or ".gen." in name:
        return
    module = importlib.import_module(name)
    exported = getattr(module, "__all__", [])
    assert list(exported) == sorted(exported, key=_isort_key)
    for attr in exported:
        assert hasattr(module, attr), f"{name}.__all__ names missing {attr!r}"


def test_the_command_line_does_not_load_the_operators_libraries() -> None:
    """``ariane broker``/``namesrv`` (and so every broker process) start without kopf or the
    Kubernetes client: those load only when ``ariane operator`` runs."""
    probe = "import sys, ariane.cli; print(sorted({'kopf', 'kubernetes'} & set(sys.modules)))"
    found = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert found.stdout.strip() == "[]"
