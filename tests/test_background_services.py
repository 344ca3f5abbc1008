"""The broker's background loops follow one naming rule (issue 26 item 4, STYLE.md §9).

Every periodic loop (``while True`` around ``await asyncio.sleep``) in ``src/ariane/broker`` is
a method of a class named ``…Service``, and only such a class (or the composition root's
``_run_services``) starts tasks, so "what runs in the background" is found by that name: the
index is ``broker/services/__init__.py``. The gRPC front end is the one exception: it owns its
worker processes' supervisors and is started as the server's ``front-end`` task.
"""

from __future__ import annotations

import ast
import asyncio
import pathlib

from ariane.broker import settings as broker_settings
from ariane.broker.services import client_housekeeping, offset_persist
from ariane.broker.tables import clients, queue_locks
from ariane.common import clock, ids, route

BROKER = pathlib.Path(__file__).resolve().parents[1] / "src" / "ariane" / "broker"

EXEMPT_MODULES = {"grpc/frontend.py"}
"""Modules whose loops and tasks belong to an adapter that is not named a service (the gRPC
front end supervises worker processes; its ``run`` is the server's ``front-end`` task)."""

TASK_STARTERS = {"server.py:_run_services"}
"""Functions outside a ``…Service`` that may start tasks: the composition root's task group."""


def _is_sleep(node: ast.AST) -> bool:
    """``await asyncio.sleep(...)``."""
    return (
        isinstance(node, ast.Await)
        and isinstance(node.value, ast.Call)
        and isinstance(node.value.func, ast.Attribute)
        and node.value.func.attr == "sleep"
        and isinstance(node.value.func.value, ast.Name)
        and node.value.func.value.id == "asyncio"
    )


def _is_periodic_loop(node: ast.AST) -> bool:
    """``while True:`` whose body awaits ``asyncio.sleep`` (not in a nested function)."""
    if not (isinstance(node, ast.While) and isinstance(node.test, ast.Constant)):
        return False
    return node.test.value is True and any(_is_sleep(n) for n in ast.walk(node))


def _is_create_task(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "create_task"
    )


def _findings() -> tuple[list[str], list[str]]:
    """(periodic loops outside a ``…Service``, tasks started outside one), as
    ``path:Class.function``."""
    loops: list[str] = []
    starters: list[str] = []
    for path in sorted(BROKER.rglob("*.py")):
        name = path.relative_to(BROKER).as_posix()
        if name in EXEMPT_MODULES:
            continue
        tree = ast.parse(path.read_text())
        owners: list[tuple[str, ast.AST]] = [("", tree)]
        owners += [(c.name, c) for c in ast.walk(tree) if isinstance(c, ast.ClassDef)]
        for owner, scope in owners:
            body = scope.body if isinstance(scope, ast.ClassDef | ast.Module) else []
            for function in body:
                if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                    continue
                where = f"{name}:{owner + '.' if owner else ''}{function.name}"
                in_service = owner.endswith("Service")
                nodes = list(ast.walk(function))
                if not in_service and any(_is_periodic_loop(n) for n in nodes):
                    loops.append(where)
                if (
                    not in_service
                    and f"{name}:{function.name}" not in TASK_STARTERS
                    and any(_is_create_task(n) for n in nodes)
                ):
                    starters.append(where)
    return loops, starters


def test_every_periodic_loop_is_a_service() -> None:
    """No periodic loop of the broker lives outside a ``…Service`` class."""
    loops, _ = _findings()
    assert loops == []


def test_only_services_and_the_server_task_group_start_tasks() -> None:
    """Tasks are started by ``…Service`` classes for the loops they own, or by the server's
    one task group, nowhere else."""
    _, starters = _findings()
    assert starters == []


def test_the_rule_sees_a_loop_outside_a_service() -> None:
    """The check finds a periodic loop in a class not named a service (it can fail)."""
    source = (
        "import asyncio\n"
        "class Table:\n"
        "    async def run(self) -> None:\n"
        "        while True:\n"
        "            await asyncio.sleep(1)\n"
    )
    function = ast.parse(source).body[1].body[0]  # type: ignore[attr-defined]
    assert any(_is_periodic_loop(n) for n in ast.walk(function))


def test_client_housekeeping_expires_silent_clients_and_stale_locks() -> None:
    """A pass drops the clients silent past ``channel_expired_ms`` (not the others) and the
    queue locks past ``lock_expiry_ms`` (RocketMQ ``ClientHousekeepingService``)."""
    manual = clock.ManualClock()
    limits = broker_settings.ConsumerSettings(channel_expired_ms=1_000, lock_expiry_ms=1_000)
    registry = clients.ClientRegistry(time=manual, expired_ms=limits.channel_expired_ms)
    locks = queue_locks.RebalanceLockManager(
        time=manual, expiry_ms=limits.lock_expiry_ms, locks_max=10
    )
    queue = route.MessageQueue(ids.TopicName("t"), ids.BrokerName("b"), ids.QueueId(0))
    locks.lock_batch(ids.GroupName("g"), [queue], ids.ClientId("holder"))
    registry.touch(ids.ClientId("silent"))
    manual.advance_ms(1_500)
    registry.touch(ids.ClientId("talking"))
    client_housekeeping.ClientHousekeepingService(registry, locks, limits).run_once()
    assert [s.client_id for s in registry.sessions()] == ["talking"]
    assert len(locks) == 0


def test_offset_persist_service_writes_every_interval_until_cancelled() -> None:
    """The offset loop persists again and again, each after its pause, and stops when its
    task is cancelled."""

    async def scenario() -> tuple[list[float], float, bool]:
        writes: list[float] = []
        three = asyncio.Event()
        loop = asyncio.get_running_loop()

        def persist() -> None:
            writes.append(loop.time())
            if len(writes) == 3:
                three.set()

        service = offset_persist.ConsumerOffsetPersistService(persist, interval_ms=10)
        started = loop.time()
        task = asyncio.create_task(service.run())
        async with asyncio.timeout(10):
            await three.wait()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        return writes, started, task.cancelled()

    writes, started, cancelled = asyncio.run(scenario())
    assert cancelled
    assert writes[0] - started >= 0.009  # after the first pause (the loop's clock rounds)
