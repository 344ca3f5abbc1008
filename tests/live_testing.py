"""Helpers for client tests against a live cluster: poll with a deadline, create a routed topic,
receive and ack a known number of messages; start real name-server and broker processes and
SIGKILL a broker by its PID (``spawn``, ``namesrv_process`` and ``kill`` go through the one process
layer, ``e2e.testenv.processes``)."""

from __future__ import annotations

import asyncio
import contextlib
import pathlib
import subprocess
import time
from collections.abc import Awaitable, Callable, Iterator

from e2e.testenv import processes

from ariane import client, dev
from ariane.common import errors, message
from ha_testing import SMALL_STORE_TOML

DEADLINE_S = 60.0
"""Longest wait for any condition on an idle machine (a hang guard: every wait here stretches it
on a loaded one, ``processes.loaded_timeout_s``)."""


async def eventually(check: Callable[[], Awaitable[bool]]) -> None:
    """Poll ``check`` until it is true; fail after ``DEADLINE_S`` (stretched under load)."""
    deadline = time.monotonic() + processes.loaded_timeout_s(DEADLINE_S)
    while not await check():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.05)


async def make_topic(
    admin: client.AdminClient, name: str, kind: message.MessageType, *, fifo_group: str = ""
) -> None:
    """Create a 4-queue topic (and a FIFO group if named); wait until the name server routes it."""
    await admin.create_topic(name, write_queue_nums=4, message_type=kind)
    if fifo_group:
        await admin.create_group(fifo_group, consume_orderly=True)
    await wait_routed(admin, name)


async def wait_routed(admin: client.AdminClient, name: str) -> None:
    """Wait until the name server routes ``name`` to a master (fail after ``DEADLINE_S``)."""

    async def routed() -> bool:
        try:
            return bool(await admin.topic_masters(name))
        except errors.TopicNotFoundError:
            return False

    await eventually(routed)


async def wait_registered(admin: client.AdminClient, *, masters: int = 1) -> None:
    """Wait until ``masters`` broker masters are registered with the name servers."""

    async def registered() -> bool:
        try:
            return len(await admin.masters()) >= masters
        except errors.NotFoundError:
            return False

    await eventually(registered)


async def drain(
    consumer: client.SimpleConsumer, count: int, *, batch: int = 32
) -> list[client.ReceivedMessage]:
    """Receive and ack until ``count`` messages arrived (each receive's batch acked at once)."""
    got: list[client.ReceivedMessage] = []
    deadline = time.monotonic() + processes.loaded_timeout_s(DEADLINE_S)
    while len(got) < count:
        assert time.monotonic() < deadline, f"received {len(got)} of {count} in time"
        received = await consumer.receive(batch, invisible_duration_s=30)
        await consumer.ack(received)
        got += received
    return got


spawn = processes.spawn_ariane
"""``python -m ariane ARGS`` with stdout and stderr appended to ``log`` (tracked)."""


@contextlib.contextmanager
def namesrv_process(tmp: pathlib.Path) -> Iterator[str]:
    """A real ``ariane namesrv`` on a free port; yields its ``HOST:PORT``; must exit 0."""
    with processes.running_namesrv(tmp / "namesrv.log", check_exit=True, timeout_s=DEADLINE_S) as (
        endpoint,
        _,
    ):
        yield endpoint


def start_broker(
    tmp: pathlib.Path, namesrv: str, port: int, *, name: str = "broker-k", remoting_port: int = 0
) -> subprocess.Popen[bytes]:
    """A real ``ariane broker`` storing under ``tmp/<name>`` in 1 MiB CommitLog segments
    (``ha_testing.SMALL_STORE_TOML``), listening on ``port`` (and serving the classic protocol
    on ``remoting_port`` when one is given)."""
    config = tmp / f"{name}-small-store.toml"
    config.write_text(SMALL_STORE_TOML)
    args = ["broker", "--listen", f"127.0.0.1:{port}", "--store-dir", str(tmp / name)]
    args += ["--config", str(config)]
    args += ["--remoting-listen", f"127.0.0.1:{remoting_port}"] if remoting_port else []
    proc = spawn([*args, "--broker-name", name, "--namesrv", namesrv], tmp / f"{name}.log")
    listening_s = processes.loaded_timeout_s(DEADLINE_S)
    dev.wait_until_listening("127.0.0.1", port, process=proc, timeout_s=listening_s)
    return proc


kill = processes.kill_tree
"""SIGKILL a process by its PID, then wait until its children (front-end workers) are gone."""
