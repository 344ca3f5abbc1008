"""A slave keeps replicating after its master drops the connection (issue 23: a master pod
deleted with ``kubectl delete pod``).

On real pods the slave's ``HAClient.run`` died at the master's first disconnect: ``_session``
re-raised the TaskGroup's error from inside an ``except*`` clause, which Python 3.11.0-3.11.3
(the image's Debian 3.11.2) wrap in a new ``ExceptionGroup`` that ``run``'s ``except OSError``
does not catch. The slave never reconnected, so its SYNC_MASTER refused every write once it came
back (POP journal writes: ``IN_SYNC_REPLICAS_NOT_ENOUGH``, the consumers got nothing), and the
operator's failover to that slave failed in ``ChangeRole`` on the dead task's exception.
"""

from __future__ import annotations

import ast
import asyncio
import json
import pathlib
import shutil
import subprocess
import sys

import pytest

from admin_testing import tiny_settings
from ariane.broker import runtime
from ariane.broker.services import replication
from ariane.common import clock
from ariane.store.ha import settings as ha_settings

ROOT = pathlib.Path(__file__).resolve().parents[1]
PROBE = ROOT / "tests" / "ha_client_probe.py"
PROBE_TIMEOUT_S = 60.0
DEBIAN_PYTHON = "/usr/bin/python3"
"""The interpreter of the broker image (e2e/testenv/build-image.sh's Debian stand-in: 3.11.2)."""


def _interpreters() -> list[str]:
    found = [sys.executable]
    system = shutil.which(DEBIAN_PYTHON)
    if system is not None and pathlib.Path(system).resolve() != pathlib.Path(sys.executable):
        found.append(system)
    return found


@pytest.mark.parametrize("python", _interpreters())
def test_a_slave_reconnects_after_its_master_drops_the_connection(
    python: str, tmp_path: pathlib.Path
) -> None:
    """Under this interpreter and the image's Python, ``HAClient.run`` survives the master
    closing the stream mid-session and connects again."""
    env = {"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [python, str(PROBE), str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=PROBE_TIMEOUT_S,
        check=False,
    )
    if "ModuleNotFoundError" in done.stderr:
        pytest.skip(f"{python} cannot import the broker's dependencies: {done.stderr[-300:]}")
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result == {"sessions": 2, "run_ended": None}, f"{python}: {result}"


def test_no_except_star_clause_in_the_product_raises() -> None:
    """No ``except*`` handler under src/ holds a ``raise``: its exception is wrapped in an
    ExceptionGroup on Python 3.11.0-3.11.3 and escapes every plain ``except``."""
    offenders = []
    for path in sorted((ROOT / "src").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.TryStar):
                for handler in node.handlers:
                    if any(isinstance(n, ast.Raise) for n in ast.walk(handler)):
                        offenders.append(f"{path.relative_to(ROOT)}:{handler.lineno}")
    assert not offenders, f"raise inside except*: {offenders}"


async def _died() -> None:
    """What the slave's HA client task ended with on the image's Python."""
    raise ExceptionGroup("", [asyncio.IncompleteReadError(b"", 33)])


async def _promote_after_the_client_died(broker: runtime.BrokerRuntime) -> ha_settings.BrokerRole:
    roles = replication.ReplicationService(broker)
    roles._client_task = asyncio.create_task(_died())
    await asyncio.sleep(0)  # the task runs and ends with its error
    assert roles._client_task.done()
    await roles.promote(role=ha_settings.BrokerRole.SYNC_MASTER, epoch=2)
    assert roles.epoch == 2
    return roles.role


def test_a_slave_whose_ha_client_task_died_is_still_promoted(tmp_path: pathlib.Path) -> None:
    """A ``ChangeRole`` promotion of a slave whose replication task had ended with an error
    makes it master instead of failing on that error."""
    ha = ha_settings.HASettings(broker_role=ha_settings.BrokerRole.SLAVE, master_ha="127.0.0.1:1")
    broker = runtime.BrokerRuntime(tiny_settings(tmp_path, ha=ha), time=clock.SystemClock())
    try:
        role = asyncio.run(_promote_after_the_client_died(broker))
    finally:
        broker.close()
    assert role is ha_settings.BrokerRole.SYNC_MASTER
