"""Kill a broker with SIGKILL and start it again on the same store, for ``bench.compare``.

Role: the mechanics of the "recovery after SIGKILL" rows. ``ArianeBroker`` does for an
``ariane dev`` broker what ``bench.peers.rocketmq.peer.RunningPeer`` does for the RocketMQ
broker+proxy JVM: SIGKILL the process we started (by its PID), wait until it and every process
it started (front-end workers, if the broker runs any) are gone, then start it again with the
same command line (same config, listen address and store dir). ``wait_port`` and
``wait_routed`` time the first signs of life; ``ariane_max_offset_total`` counts what the
restarted broker still stores.

Invariants: only processes this benchmark started are signalled, each by its PID; every wait is
bounded by a deadline; the restarted broker is stopped by ``ArianeBroker.stop`` (SIGTERM, then
SIGKILL) before the dev cluster that started the original goes away.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pathlib
import signal
import socket
import subprocess
import time
from collections.abc import Callable

import grpc

from ariane import client, dev
from ariane.benchmark import process_cpu
from bench.peers.rocketmq import peer

POLL_INTERVAL_S = 0.05
"""How often the waits below look again."""

GONE_WAIT_S = 30.0
"""Longest wait for a killed broker and its children to disappear."""


def _gone(pid: int) -> bool:
    """Whether ``pid`` no longer runs (absent, or a zombie nobody reaped yet)."""
    try:
        text = pathlib.Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return True
    return text[text.rfind(")") + 2 :].startswith("Z")


class ArianeBroker:
    """The ``ariane broker`` child of a dev cluster, killed and restarted on the same store.

    Args:
        pid: the broker's PID (a direct child of this process, started by ``dev.dev_cluster``).
        log_path: where the restarted broker's output goes.
    """

    def __init__(self, pid: int, log_path: pathlib.Path) -> None:
        self._pid = pid
        raw = pathlib.Path(f"/proc/{pid}/cmdline").read_bytes()
        self._cmd = [part.decode() for part in raw.split(b"\0") if part]
        listen = self._cmd[self._cmd.index("--listen") + 1]
        self.port = int(listen.rsplit(":", 1)[1])
        """The broker's gRPC port (from its ``--listen``)."""
        self._log_path = log_path
        self._proc: subprocess.Popen[bytes] | None = None

    def kill(self) -> None:
        """SIGKILL the broker and wait until it and all its descendants are gone.

        Raises:
            RuntimeError: something still ran after ``GONE_WAIT_S``.
        """
        family = [self._pid, *process_cpu.descendants(self._pid)]
        os.kill(self._pid, signal.SIGKILL)  # the broker we started, by its PID
        deadline = time.monotonic() + GONE_WAIT_S
        while not all(_gone(pid) for pid in family):
            if time.monotonic() > deadline:
                raise RuntimeError(f"broker {self._pid} or its children outlived SIGKILL")
            time.sleep(POLL_INTERVAL_S)

    def restart(self) -> None:
        """Start the broker again with the original command line; returns at once."""
        with self._log_path.open("ab") as log_file:
            self._proc = subprocess.Popen(
                self._cmd, stdin=subprocess.DEVNULL, stdout=log_file, stderr=subprocess.STDOUT
            )

    def exited(self) -> bool:
        """Whether the restarted broker has exited."""
        return self._proc is not None and self._proc.poll() is not None

    def stop(self) -> None:
        """Stop the restarted broker (SIGTERM, then SIGKILL) and wait for its children."""
        if self._proc is None:
            return
        family = [self._proc.pid, *process_cpu.descendants(self._proc.pid)]
        dev.stop_process(self._proc)
        deadline = time.monotonic() + GONE_WAIT_S
        while not all(_gone(pid) for pid in family) and time.monotonic() < deadline:
            time.sleep(POLL_INTERVAL_S)


def wait_port(port: int, exited: Callable[[], bool], deadline: float) -> bool:
    """Poll a TCP connect to ``127.0.0.1:port`` until it succeeds; False at the deadline or as
    soon as ``exited()`` says the server died."""
    while time.monotonic() < deadline:
        if exited():
            return False
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5):
            return True
        time.sleep(POLL_INTERVAL_S)
    return False


def wait_routed(endpoint: str, topic: str, deadline: float) -> bool:
    """Poll gRPC ``QueryRoute`` at ``endpoint`` (what the official client asks first) until it
    answers OK with at least one queue; False at the deadline."""
    while time.monotonic() < deadline:
        with contextlib.suppress(grpc.aio.AioRpcError):
            code, queues = asyncio.run(peer.query_route(endpoint, topic))
            if code == "OK" and queues > 0:
                return True
        time.sleep(POLL_INTERVAL_S)
    return False


async def ariane_max_offset_total(namesrv: str, topic: str, group: str) -> int:
    """Messages stored in ``topic``: the sum of its queues' max offsets (``GetConsumerLag`` of
    a group created for the purpose, which never consumes)."""
    async with client.AdminClient(namesrv) as admin:
        await admin.create_group(group)
        return sum(lag.broker_offset for lag in await admin.consumer_lag(group, topic))
