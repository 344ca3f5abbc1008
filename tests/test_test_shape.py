"""The test suite's time budget stays visible (issue 22): a test file that starts its own name
server and broker says why in its module docstring.

A cluster of its own costs a name server and a broker start (seconds each, more on a loaded
machine) and a CommitLog; a file whose tests do not kill, pause, restart or reconfigure them
should use the session's shared cluster (``shared_cluster``, tests/conftest.py) with topics and
groups of its own instead. A file starts
its own when it calls one of ``STARTERS`` (the process layer and the helpers built on it) or
passes an ``ariane namesrv``/``ariane broker`` argv (a list opening with ``"namesrv"`` or
``"broker"`` and holding a ``--flag``) to anything outside an ``assert``. Its docstring must then
hold a paragraph opening with ``Own cluster:`` and the reason.

``OWN_CLUSTER_DEBT`` lists the files that start their own without a reason yet: a ratchet, not a
pass (it may only shrink: an entry whose file stopped starting its own, or now gives a reason,
fails until it is removed).
"""

from __future__ import annotations

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]
MARKER = "Own cluster:"
NAMESRV_STARTERS = frozenset(
    {"running_namesrv", "running_namesrv_process", "namesrv_process", "_namesrv", "synced_pair"}
    | {"dev_cluster", "ProcessCluster"}
)
BROKER_STARTERS = frozenset(
    {"start_broker", "_broker", "_start_broker", "new_broker", "synced_pair"}
    | {"dev_cluster", "ProcessCluster"}
)
STARTERS = NAMESRV_STARTERS | BROKER_STARTERS
OWN_CLUSTER_DEBT: frozenset[str] = frozenset()


def _called_name(call: ast.Call) -> str:
    func = call.func
    return func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")


def _argv_of(node: ast.List | ast.Tuple) -> str:
    """``namesrv``/``broker`` when ``node`` is such an argv literal, else ``""``."""
    first = node.elts[0] if node.elts else None
    if not isinstance(first, ast.Constant) or first.value not in ("namesrv", "broker"):
        return ""
    flagged = any(
        isinstance(e, ast.Constant) and isinstance(e.value, str) and e.value.startswith("--")
        for e in node.elts
    )
    return str(first.value) if flagged else ""


def starts(tree: ast.Module) -> set[str]:
    """Which of ``namesrv``/``broker`` a module's code starts (see the module docstring)."""
    asserted = {id(n) for a in ast.walk(tree) if isinstance(a, ast.Assert) for n in ast.walk(a)}
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = _called_name(node)
            found |= {"namesrv"} if name in NAMESRV_STARTERS else set()
            found |= {"broker"} if name in BROKER_STARTERS else set()
        elif isinstance(node, ast.List | ast.Tuple) and id(node) not in asserted:
            found |= {_argv_of(node)} - {""}
    return found


def _test_files() -> list[pathlib.Path]:
    return sorted([*ROOT.glob("tests/**/test_*.py"), *ROOT.glob("e2e/test_*.py")])


def test_files_with_their_own_cluster_say_why() -> None:
    """Every test file that starts a name server and a broker has an ``Own cluster:`` reason
    in its docstring, or is in the (shrinking) debt list."""
    unexplained, stale = [], []
    for path in _test_files():
        tree = ast.parse(path.read_text())
        name = path.relative_to(ROOT).as_posix()
        own = starts(tree) >= {"namesrv", "broker"}
        explained = MARKER in (ast.get_docstring(tree) or "")
        if own and not explained and name not in OWN_CLUSTER_DEBT:
            unexplained.append(name)
        if name in OWN_CLUSTER_DEBT and (explained or not own):
            stale.append(name)
    assert unexplained == [], f"add an '{MARKER} <reason>' paragraph to their docstrings"
    assert stale == [], "remove these from OWN_CLUSTER_DEBT (the ratchet only shrinks)"


def test_the_detector_sees_argv_starters_and_ignores_asserted_argv() -> None:
    """A spawned ``namesrv`` argv and a ``start_broker`` call count; an argv inside an
    ``assert`` (an operator test checking a pod's arguments) and a bare word do not."""
    spawned = ast.parse(
        'p = spawn(["namesrv", "--listen", addr], log)\nb = helpers.start_broker(tmp, ns, 1)\n'
    )
    assert starts(spawned) == {"namesrv", "broker"}
    asserted = ast.parse('assert args == ["broker", "--config", "/etc/b.toml"]\nx = ["namesrv"]\n')
    assert starts(asserted) == set()
