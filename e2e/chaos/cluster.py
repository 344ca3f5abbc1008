"""The cluster under test: one name server and a master/slave broker group, as processes.

``Cluster`` knows which broker is master now (a promotion swaps the roles) and restarts each
process on its own port and store, so a restart is the same node coming back. Every process
logs to ``<work>/<name>.log``. The brokers flush with ``flush_disk_type``, sync their metadata
every ``SLAVE_SYNC_INTERVAL_MS`` and hold a write lease of ``LEASE_MS`` through the name server.

With a ``network`` (``network.Network``, Toxiproxy) every connection between two nodes crosses
a proxy: each broker registers through its own proxy to the name server, advertises its gRPC
and HA proxies, and a slave dials its master's HA proxy; ``client_namesrv_endpoint`` is the
clients' way in. The classic protocol (Remoting) is off then (no peer dials it). Without one,
everything is dialed directly (the faults are then process faults only). ``Node.endpoint`` is
always the real port: the nemesis's health checks never cross a proxy.

Each broker's wall clock can be jumped (``jump_clock``): it starts with the
``clockshim/sitecustomize.py`` hook reading its offset file (see that module for why not
libfaketime).

With ``power_loss`` each broker's store sits on its own ``powerloss.PowerLossMount`` (mounted by
``start``, unmounted by ``stop``, and at interpreter exit at the latest): ``power_off`` SIGKILLs
the broker and drops every write it never synced (a torn prefix kept), then mounts the layer
again for the restart. The stores use small files (``STORE_TOML``: 4 MiB CommitLog segments, a
small key index) so that the corruption injectors read them quickly.

Invariants: at most one broker is started with a master role (a restarted old master comes back
as the slave of the promoted one; a planned restart of the master keeps it master); nothing
stays mounted once ``stop`` returned or raised.
"""

from __future__ import annotations

import atexit
import dataclasses
import os
import pathlib
import signal
import subprocess

from ariane import dev
from e2e.chaos import network as network_mod
from e2e.chaos import powerloss
from e2e.testenv import processes

GROUP_NAME = "chaos-group"
START_TIMEOUT_S = 30.0
"""Longest wait for a process to listen after a start, s."""

SLAVE_SYNC_INTERVAL_MS = 500
"""The slaves' metadata sync period in the chaos runs, ms (production: 10 s)."""

LEASE_MS = 4_000
"""The master's write lease through the name server in the chaos runs, ms (production: 10 s):
shorter, so a partitioned master stops acknowledging and a failover may start sooner."""

STORE_TOML = (
    "[store]\n"
    "commit_log_file_size_bytes = 4194304\n"
    "consume_queue_file_entries = 16384\n"
    "[index]\n"
    "hash_slot_count = 4096\n"
    "index_count_max = 16384\n"
)
"""The brokers' store sizes in the chaos runs (RocketMQ's 1 GiB segments and 420 MB index
would make every injected bit flip read gigabytes)."""

CLOCK_SHIM_DIR = pathlib.Path(__file__).with_name("clockshim")


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

    def __init__(
        self,
        work: pathlib.Path,
        *,
        role: str,
        flush_disk_type: str,
        network: network_mod.Network | None = None,
        power_loss: bool = False,
    ) -> None:
        work.mkdir(parents=True, exist_ok=True)
        self.work = work
        self.role = role
        self.flush_disk_type = flush_disk_type
        self.network = network
        self.namesrv = Node("namesrv", dev.free_port())
        self.master = Node("broker-a", dev.free_port(), dev.free_port())
        self.slave = Node("broker-b", dev.free_port(), dev.free_port())
        self.mounts: dict[str, powerloss.PowerLossMount] = {}
        """Each broker's power-loss layer by node name (empty without ``power_loss``)."""
        if power_loss:
            for broker in (self.master, self.slave):
                self.mounts[broker.name] = powerloss.PowerLossMount(
                    work / f"{broker.name}-disk", work / f"{broker.name}-disk.log"
                )
            atexit.register(self.unmount)
        self.config = work / "broker.toml"
        sync = f"[slave_sync]\ninterval_ms = {SLAVE_SYNC_INTERVAL_MS}\n"
        self.config.write_text(STORE_TOML + sync)
        if network is not None:
            for dialer in (network_mod.CLIENT, self.master.name, self.slave.name):
                network.add(dialer, self.namesrv.name, "grpc", self.namesrv.port)
            for broker, peer in ((self.master, self.slave), (self.slave, self.master)):
                network.add(network_mod.CLIENT, broker.name, "grpc", broker.port)
                network.add(peer.name, broker.name, "ha", broker.ha_port)
        for broker in (self.master, self.slave):
            self.jump_clock(broker, 0)

    @property
    def namesrv_endpoint(self) -> str:
        """The name server's real ``HOST:PORT`` (the control plane's)."""
        return self.namesrv.endpoint

    @property
    def client_namesrv_endpoint(self) -> str:
        """The name server's ``HOST:PORT`` as the clients dial it (through their proxy)."""
        return self._via(network_mod.CLIENT, self.namesrv, "grpc")

    @property
    def nodes(self) -> tuple[str, ...]:
        """Every node's name, the clients included (the network's view)."""
        return (network_mod.CLIENT, self.namesrv.name, self.master.name, self.slave.name)

    def _via(self, dialer: str, target: Node, port_name: str) -> str:
        """How ``dialer`` reaches ``target``'s port: its proxy, or the port itself."""
        if self.network is None:
            return target.ha if port_name == "ha" else target.endpoint
        return self.network.address(dialer, target.name, port_name)

    def master_ha_for(self, node: Node) -> str:
        """The master's HA address as ``node`` dials it."""
        return self._via(node.name, self.master, "ha")

    @property
    def power_loss(self) -> bool:
        """Whether the brokers' stores sit on power-loss layers."""
        return bool(self.mounts)

    def store_dir(self, node: Node) -> pathlib.Path:
        """``node``'s store directory (inside its power-loss mount when there is one)."""
        mount = self.mounts.get(node.name)
        return mount.store if mount is not None else self.work / node.name

    def power_off(self, node: Node, seed: int) -> int:
        """Power loss of ``node``: SIGKILL, drop its unsynced writes (torn: a prefix drawn from
        ``seed`` kept), mount again; returns the writes dropped. ``start_broker`` restarts it.

        Raises:
            KeyError: the cluster has no power-loss layers.
        """
        mount = self.mounts[node.name]
        node.kill()
        dropped = mount.crash(seed=seed, torn=True)
        mount.mount()
        return dropped

    def unmount(self) -> None:
        """Unmount every power-loss layer (idempotent; the brokers must be stopped)."""
        for mount in self.mounts.values():
            mount.close()

    def peer_of(self, node: Node) -> Node:
        """The other broker."""
        return self.slave if node is self.master else self.master

    def clock_file(self, node: Node) -> pathlib.Path:
        """The file holding ``node``'s wall-clock offset, ms."""
        return self.work / f"{node.name}.clock"

    def jump_clock(self, node: Node, offset_ms: int) -> None:
        """Set ``node``'s wall clock to real time + ``offset_ms`` (0 = real time); it sees the
        jump within ``clockshim``'s recheck period."""
        path = self.clock_file(node)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(f"{offset_ms}\n")
        tmp.replace(path)

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
        peer = self.peer_of(node)
        args = ["broker", "--listen", node.endpoint, "--store-dir", str(self.store_dir(node))]
        args += ["--broker-name", GROUP_NAME, "--broker-id", "0" if is_master else "1"]
        args += ["--namesrv", self._via(node.name, self.namesrv, "grpc"), "--workers", "0"]
        args += ["--config", str(self.config), "--lease-ms", str(LEASE_MS)]
        args += ["--broker-role", self.role if is_master else "SLAVE", "--ha-listen", node.ha]
        args += ["--flush-disk-type", self.flush_disk_type]
        # The workload speaks gRPC only: no classic port, so the brokers never take RocketMQ's
        # machine-wide default 10911 (two chaos brokers, or a parallel test, would fight for it).
        args += ["--remoting-listen", ""]
        if self.network is not None:
            args += ["--advertise", self._via(network_mod.CLIENT, node, "grpc")]
            args += ["--ha-advertise", self._via(peer.name, node, "ha")]
        if not is_master:
            args += ["--master-ha", self.master_ha_for(node)]
        python_path = os.pathsep.join(
            p for p in (str(CLOCK_SHIM_DIR), os.environ.get("PYTHONPATH", "")) if p
        )
        env = {"PYTHONPATH": python_path, "ARIANE_CHAOS_CLOCK_FILE": str(self.clock_file(node))}
        node.process = _spawn(args, self.work / f"{node.name}.log", env=env)
        dev.wait_until_listening(
            "127.0.0.1", node.port, process=node.process, timeout_s=START_TIMEOUT_S
        )

    def start(self) -> None:
        """Start everything (power-loss layers, name server, master, slave)."""
        for mount in self.mounts.values():
            mount.mount()
        self.start_namesrv()
        self.start_broker(self.master)
        self.start_broker(self.slave)

    def swap_roles(self) -> None:
        """Record a promotion: the slave is the master now."""
        self.master, self.slave = self.slave, self.master

    def stop(self) -> None:
        """Stop every process (clean stop, SIGCONT first), then unmount the power-loss layers
        (SIGKILLing a broker whose stop failed first), even when a stop raises."""
        try:
            for node in (self.slave, self.master, self.namesrv):
                node.stop()
        finally:
            for node in (self.slave, self.master):
                node.kill()
            self.unmount()

    def heal(self) -> None:
        """Resume paused processes and start stopped ones (name server first)."""
        for node in (self.namesrv, self.master, self.slave):
            node.resume()
        if not self.namesrv.running:
            self.start_namesrv()
        for node in (self.master, self.slave):
            if not node.running:
                self.start_broker(node)
