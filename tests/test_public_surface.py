"""Each package's ``__all__`` is sorted and names only things the package really has."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import ariane

PACKAGES = [
    *sorted(m.name for m in pkgutil.walk_packages(ariane.__path__, "ariane.") if m.ispkg),
    "ariane",
]


@pytest.mark.parametrize("name", PACKAGES)
def test_all_is_sorted_and_resolvable(name: str) -> None:
    """``__all__`` is sorted and every entry resolves to an attribute."""
    if name.endswith(".gen") or ".gen." in name:
        return
    module = importlib.import_module(name)
    exported = getattr(module, "__all__", [])
    assert list(exported) == sorted(exported)
    for attr in exported:
        assert hasattr(module, attr), f"{name}.__all__ names missing {attr!r}"
