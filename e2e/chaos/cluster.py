"""The cluster under test: one name server and a master/slave broker group, as processes.

``Cluster`` knows which broker is master now (a promotion swaps the roles) and restarts each
process on its own port and store, so a restart is the same node coming back. Every process
logs to ``<work>/<name>.log``. The brokers flush with ``flush_disk_type`` and sync their
metadata every ``SLAVE_SYNC_INTERVAL_MS``.

Invariant: at most one broker is started with a master role (a restarted old master comes back
as the slave of the promoted one; a planned restart of the master keeps it master).
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import signal
import subprocess

from ariane import dev
from e2e.testenv import processes

GROUP_NAME = "chaos-group"
START_TIMEOUT_S = 30.0
"""Longest wait for a process to listen after a start, s."""

SLAVE_SYNC_INTERVAL_MS = 500
"""The slaves' metadata sync period in the chaos runs, ms (production: 10 s)."""


_spawn = processes.spawn_ariane  # the one process layer (tracked for log tails)


@dataclasses.dataclass
class Node:
    """One process of the cluster and how to start it again."""

    name: str
    port: int
    ha_port: int = 0
    process: subprocess.Popen[bytes] | None = None
    paused: bool = False

    @property
    def endpoint(self) -> str:
        """``127.0.0.1:PORT`` of its gRPC port."""
        return f"127.0.0.1:{self.port}"

    @property
    def ha(self) -> str:
        """``127.0.0.1:PORT`` of its HA port (brokers)."""
        return f"127.0.0.1:{self.ha_port}"

    @property
    def running(self) -> bool:
        """Started and not stopped or killed (a paused process is running)."""
        return self.process is not None

    def kill(self) -> None:
        """SIGKILL and reap (a paused process dies too)."""
        if self.process is not None:
            self.process.kill()
            self.process.wait()
        self.process, self.paused = None, False

    def stop(self) -> None:
        """Clean stop (SIGCONT first if paused)."""
        if self.process is not None:
            self.resume()
            dev.stop_process(self.process)
        self.process, self.paused = None, False

    def pause(self) -> None:
        """SIGSTOP."""
        assert self.process is not None, f"{self.name} is not running"
        os.kill(self.process.pid, signal.SIGSTOP)
        self.paused = True

    def resume(self) -> None:
        """SIGCONT if paused."""
        if self.process is not None and self.paused:
            os.kill(self.process.pid, signal.SIGCONT)
        self.paused = False


class Cluster:
    """A name server and two brokers of ``GROUP_NAME``; ``master``/``slave`` follow promotions.

    Args:
        work: directory for stores, logs and the broker config.
        role: the master's role, ``SYNC_MASTER`` or ``ASYNC_MASTER``.
        flush_disk_type: ``SYNC_FLUSH`` or ``ASYNC_FLUSH``.
    """

    def __init__(self, work: pathlib.Path, *, role: str, flush_disk_type: str) -> None:
        work.mkdir(parents=True, exist_ok=True)
        self.work = work
        self.role = role
        self.flush_disk_type = flush_disk_type
        self.namesrv = Node("namesrv", dev.free_port())
        self.master = Node("broker-a", dev.free_port(), dev.free_port())
        self.slave = Node("broker-b", dev.free_port(), dev.free_port())
        self.config = work / "broker.toml"
        self.config.write_text(f"[slave_sync]\ninterval_ms = {SLAVE_SYNC_INTERVAL_MS}\n")

    @property
    def namesrv_endpoint(self) -> str:
        """The name server's ``HOST:PORT``."""
        return self.namesrv.endpoint

    def start_namesrv(self) -> None:
        """Start the name server (again) on its port."""
        node = self.namesrv
        node.process = _spawn(["namesrv", "--listen", node.endpoint], self.work / "namesrv.log")
        dev.wait_until_listening(
            "127.0.0.1", node.port, process=node.process, timeout_s=START_TIMEOUT_S
        )

    def start_broker(self, node: Node) -> None:
        """Start ``node`` in its current role: master, or slave of the master."""
        is_master = node is self.master
        args = ["broker", "--listen", node.endpoint, "--store-dir", str(self.work / node.name)]
        args += ["--broker-name", GROUP_NAME, "--broker-id", "0" if is_master else "1"]
        args += ["--namesrv", self.namesrv_endpoint, "--workers", "0", "--config", str(self.config)]
        args += ["--broker-role", self.role if is_master else "SLAVE", "--ha-listen", node.ha]
        args += ["--flush-disk-type", self.flush_disk_type]
        if not is_master:
            args += ["--master-ha", self.master.ha]
        node.process = _spawn(args, self.work / f"{node.name}.log")
        dev.wait_until_listening(
            "127.0.0.1", node.port, process=node.process, timeout_s=START_TIMEOUT_S
        )

    def start(self) -> None:
        """Start everything (name server, master, slave)."""
        self.start_namesrv()
        self.start_broker(self.master)
        self.start_broker(self.slave)

    def swap_roles(self) -> None:
        """Record a promotion: the slave is the master now."""
        self.master, self.slave = self.slave, self.master

    def stop(self) -> None:
        """Stop every process (clean stop, SIGCONT first)."""
        for node in (self.slave, self.master, self.namesrv):
            node.stop()

    def heal(self) -> None:
        """Resume paused processes and start stopped ones (name server first)."""
        for node in (self.namesrv, self.master, self.slave):
            node.resume()
        if not self.namesrv.running:
            self.start_namesrv()
        for node in (self.master, self.slave):
            if not node.running:
                self.start_broker(node)
