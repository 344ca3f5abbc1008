"""Helpers for client tests against a live cluster: poll with a deadline, create a routed topic,
receive and ack a known number of messages; start real name-server and broker processes and
SIGKILL a broker by its PID."""

from __future__ import annotations

import asyncio
import contextlib
import pathlib
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator

from ariane import client, dev
from ariane.common import errors, message

DEADLINE_S = 60.0
"""Longest wait for any condition."""


async def eventually(check: Callable[[], Awaitable[bool]]) -> None:
    """Poll ``check`` until it is true; fail after ``DEADLINE_S``."""
    deadline = time.monotonic() + DEADLINE_S
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
    deadline = time.monotonic() + DEADLINE_S
    while len(got) < count:
        assert time.monotonic() < deadline, f"received {len(got)} of {count} in time"
        received = await consumer.receive(batch, invisible_duration_s=30)
        await consumer.ack(received)
        got += received
    return got


def spawn(args: list[str], log: pathlib.Path) -> subprocess.Popen[bytes]:
    """``python -m ariane ARGS`` with stdout and stderr appended to ``log``."""
    with log.open("ab") as out:
        return subprocess.Popen([sys.executable, "-m", "ariane", *args], stdout=out, stderr=out)


@contextlib.contextmanager
def namesrv_process(tmp: pathlib.Path) -> Iterator[str]:
    """A real ``ariane namesrv`` on a free port; yields its ``HOST:PORT``."""
    port = dev.free_port()
    proc = spawn(["namesrv", "--listen", f"127.0.0.1:{port}"], tmp / "namesrv.log")
    try:
        dev.wait_until_listening("127.0.0.1", port, process=proc, timeout_s=DEADLINE_S)
        yield f"127.0.0.1:{port}"
    finally:
        assert dev.stop_process(proc) == 0


def start_broker(
    tmp: pathlib.Path, namesrv: str, port: int, *, name: str = "broker-k", remoting_port: int = 0
) -> subprocess.Popen[bytes]:
    """A real ``ariane broker`` storing under ``tmp/<name>``, listening on ``port`` (and serving
    the classic protocol on ``remoting_port`` when one is given)."""
    args = ["broker", "--listen", f"127.0.0.1:{port}", "--store-dir", str(tmp / name)]
    args += ["--remoting-listen", f"127.0.0.1:{remoting_port}"] if remoting_port else []
    proc = spawn([*args, "--broker-name", name, "--namesrv", namesrv], tmp / f"{name}.log")
    dev.wait_until_listening("127.0.0.1", port, process=proc, timeout_s=DEADLINE_S)
    return proc


def kill(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL a process by its PID (no clean shutdown: nothing is flushed or persisted), then
    wait until the processes it had started (a broker's front-end workers) are gone too.

    The workers share the broker's port (SO_REUSEPORT): while an orphaned one still accepts, a
    broker restarted on that port looks listening before it is, and the next call is refused.
    """
    children = _children(proc.pid)
    proc.kill()
    proc.wait(timeout=DEADLINE_S)
    deadline = time.monotonic() + DEADLINE_S
    while (alive := [pid for pid in children if pathlib.Path(f"/proc/{pid}").exists()]) and (
        time.monotonic() < deadline
    ):
        time.sleep(0.05)
    assert not alive, f"children {alive} of killed process {proc.pid} outlived it by {DEADLINE_S} s"


def _children(pid: int) -> list[int]:
    """Direct children of ``pid`` (from /proc/<pid>/task/*/children)."""
    found: list[int] = []
    for task in pathlib.Path(f"/proc/{pid}/task").glob("*"):
        with contextlib.suppress(OSError):
            found += [int(c) for c in (task / "children").read_text().split()]
    return found
