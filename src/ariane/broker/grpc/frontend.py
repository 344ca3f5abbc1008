"""How a broker serves gRPC: in its own process, or through N front-end worker processes.

A gRPC-Python call costs ~0.5 ms of CPU whatever it carries, and one process holds one core
(the GIL), so a broker that serves the official clients (one message per SendMessage) in one
process is capped near 2k calls/s (specs/perf.md §3c). With ``workers`` = N > 0 the broker
process keeps the store and the handlers, and starts N worker processes
(``python -m ariane.broker.grpc.frontend``) that listen on the same port with ``SO_REUSEPORT`` (the
kernel spreads client connections over them) and forward every call over a Unix socket
(``grpcwire.relay``). RocketMQ 5 splits the same way: stateless gRPC Proxies in front of the
broker that owns the CommitLog.

* ``InProcessFrontEnd``: the broker's own ``grpc.aio`` server (``workers = 0``).
* ``WorkerFrontEnd``: reserves the port (refusing one in use), starts the relay and the
  workers, waits until each says it is serving, restarts a worker that dies (1 s backoff
  doubling to 30 s, like a process supervisor), and on ``stop`` sends SIGTERM to each worker by
  PID, waits for their calls to drain, then SIGKILLs leftovers.
* ``main``: the worker process. It forwards raw bytes (it never parses a message), ignores
  SIGINT (the owner stops it), stops on SIGTERM, and exits by itself when the owner's socket
  closes, so a SIGKILLed broker leaves no serving workers behind.

TLS (``[tls]``): both front ends expose the port through ``grpcwire.ports.ServedPort``:
``enforcing`` is grpcio's own TLS (``add_secure_port``, certificates reloaded on change),
``permissive`` a first-byte splice to a TLS and a plaintext Unix socket. Workers get the
``[tls]`` settings on their command line and each builds its own ``ServerTls`` (one per
process), so each re-reads rotated files itself.

Invariants: the port is held (by the owner's reservation socket or a worker) from ``start`` to
``stop``; the owner never serves a call before every worker has said hello; a worker serves
only while its relay connection is open.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import logging
import os
import pathlib
import shutil
import signal
import socket
import sys
import tempfile
from collections.abc import Sequence

from ariane.broker import settings as broker_settings
from ariane.common import tls
from ariane.grpcwire import guard, pb, ports, relay, rpc_latency
from ariane.grpcwire import server as grpc_server

_log = logging.getLogger(__name__)

SERVED_SERVICES = (
    pb.MESSAGING_SERVICE,
    pb.ADMIN_SERVICE,
    pb.INGEST_SERVICE,
    pb.V2_ADMIN_SERVICE,
)
"""The gRPC services a broker serves (both front ends serve exactly these)."""

WORKER_START_TIMEOUT_S = 60.0
"""Longest wait for every worker to say it is serving before the broker gives up."""
WORKER_STOP_MARGIN_S = 5.0
"""How long past the shutdown grace a worker may take to exit before it is SIGKILLed."""
RESTART_BACKOFF_S_INITIAL = 1.0
RESTART_BACKOFF_S_MAX = 30.0
"""Pause before restarting a dead worker: 1 s, doubling to 30 s while it keeps dying."""
STABLE_RUN_S = 60.0
"""A worker that served this long before dying restarts after the initial backoff again."""
RELAY_DIR_PREFIX = "ariane-relay-"
"""Name prefix of the private temporary directory holding the relay socket."""
RELAY_CALLS_MAX = 8192
"""Most forwarded calls open at once per worker connection (above the gRPC server's own
``concurrent_rpcs_max`` default, so the worker's limit applies first)."""


class InProcessFrontEnd:
    """``workers = 0``: the broker process serves gRPC itself.

    Args:
        settings: the broker's settings (listen address, gRPC options).
        implementations: ``(service descriptor, implementation)`` pairs.
        latency: where the guard times each call (``rocketmq_rpc_latency``).
        gate: authenticates and authorizes each call first (``None``: auth off).
        server_tls: the process's TLS (``None``: ``disabled``).
    """

    def __init__(
        self,
        settings: broker_settings.BrokerSettings,
        implementations: Sequence[tuple[pb.ServiceDescriptor, object]],
        *,
        latency: rpc_latency.RpcLatency | None = None,
        gate: guard.Gate | None = None,
        server_tls: tls.ServerTls | None = None,
    ) -> None:
        handlers = [
            guard.service_handler(s, impl, latency=latency, gate=gate)
            for s, impl in implementations
        ]
        self._settings = settings
        self._server = grpc_server.build(settings.server, handlers)
        self.port_front = ports.ServedPort(settings.listen, server_tls)
        """The public port in the ``[tls]`` mode."""

    @property
    def workers(self) -> int:
        """Front-end worker processes: none."""
        return 0

    async def start(self) -> int:
        """Bind and start; returns the bound port.

        Raises:
            OSError: if the listen address cannot be bound.
        """
        return await self.port_front.start(self._server)

    def calls_by_worker(self) -> dict[int, int]:
        """No workers, so no forwarded calls."""
        return {}

    async def run(self) -> None:
        """Nothing to supervise: wait until cancelled."""
        await asyncio.Event().wait()

    async def stop(self) -> None:
        """Stop serving, letting calls in flight finish within the grace period."""
        self.port_front.stop_accepting()
        await self._server.stop(self._settings.server.shutdown_grace_ms / 1000)
        await self.port_front.stop()


@dataclasses.dataclass(slots=True)
class _Worker:
    """One worker slot: its index and current process."""

    index: int
    process: asyncio.subprocess.Process | None = None


class WorkerFrontEnd:
    """``workers`` = N > 0: N worker processes share the port and forward to this process.

    Args:
        settings: the broker's settings (listen address, gRPC options, ``workers``).
        implementations: ``(service descriptor, implementation)`` pairs served on the owner.
        workers: how many worker processes to run (1..``broker_settings.WORKERS_MAX``).
        latency: where the owner's guard times each forwarded call (the owner's handling
            time; the workers' gRPC hop is not in it).
        gate: authenticates and authorizes each forwarded call on this process (the owner of
            the users and ACLs), before its handler; the workers check nothing (``None``: auth
            off).
        server_tls: the process's TLS (``None``: ``disabled``); the workers get its settings.
    """

    def __init__(
        self,
        settings: broker_settings.BrokerSettings,
        implementations: Sequence[tuple[pb.ServiceDescriptor, object]],
        workers: int,
        *,
        latency: rpc_latency.RpcLatency | None = None,
        gate: guard.Gate | None = None,
        server_tls: tls.ServerTls | None = None,
    ) -> None:
        assert 1 <= workers <= broker_settings.WORKERS_MAX, f"bad worker count {workers}"
        methods = [
            m
            for s, impl in implementations
            for m in guard.guarded_methods(s, impl, latency=latency, gate=gate)
        ]
        self._settings = settings
        self._tls_settings = None if server_tls is None else server_tls.settings
        self._relay = relay.RelayServer(methods, calls_max=RELAY_CALLS_MAX)
        self._workers = [_Worker(index) for index in range(workers)]
        self._holder: socket.socket | None = None
        self._socket_dir: pathlib.Path | None = None
        self._port = 0
        self._stopping = False

    @property
    def socket_path(self) -> str:
        """The relay's Unix socket (in a private temporary directory)."""
        assert self._socket_dir is not None, "not started"
        return str(self._socket_dir / "relay.sock")

    @property
    def workers(self) -> int:
        """Front-end worker processes run."""
        return len(self._workers)

    def calls_by_worker(self) -> dict[int, int]:
        """Worker index -> calls it forwarded since it (re)started."""
        return self._relay.calls_by_worker()

    def worker_pids(self) -> list[int]:
        """PIDs of the worker processes currently running."""
        return [w.process.pid for w in self._workers if w.process is not None]

    async def start(self) -> int:
        """Reserve the port, start the relay and every worker; returns the port.

        Raises:
            OSError: the port is in use or not local, or a worker did not come up.
        """
        self._holder, self._port = grpc_server.reserve_port(self._settings.listen)
        self._socket_dir = pathlib.Path(tempfile.mkdtemp(prefix=RELAY_DIR_PREFIX))
        await self._relay.start(self.socket_path)
        for worker in self._workers:
            await self._spawn(worker)
        await self._wait_serving()
        _log.info("%d front-end workers serve port %d", len(self._workers), self._port)
        return self._port

    async def _spawn(self, worker: _Worker) -> None:
        host, _ = grpc_server.parse_listen(self._settings.listen)
        listen = f"[{host}]:{self._port}" if ":" in host else f"{host}:{self._port}"
        worker.process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "ariane.broker.grpc.frontend",
            "--relay",
            self.socket_path,
            "--listen",
            listen,
            "--index",
            str(worker.index),
            "--server-settings",
            json.dumps(dataclasses.asdict(self._settings.server)),
            "--log-level",
            logging.getLevelName(logging.getLogger().getEffectiveLevel()),
            *(("--tls-settings", tls_to_json(self._tls_settings)) if self._tls_settings else ()),
            stdin=asyncio.subprocess.DEVNULL,
        )

    async def _wait_serving(self) -> None:
        """Wait until every worker says it serves.

        Raises:
            OSError: a worker exited first.
            TimeoutError: not all did within ``WORKER_START_TIMEOUT_S``; the message names
                them (the broker logs it as the reason of its exit 1).
        """
        try:
            async with asyncio.timeout(WORKER_START_TIMEOUT_S):
                while not set(self.worker_pids()) <= self._relay.serving_pids():
                    for worker in self._workers:
                        if worker.process is not None and worker.process.returncode is not None:
                            raise OSError(
                                f"front-end worker {worker.index} exited with status "
                                f"{worker.process.returncode} before serving (its log is above)"
                            )
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(0.2):
                            await self._relay.wait_changed()
        except TimeoutError:
            serving = self._relay.serving_pids()
            late = [w for w in self._workers if w.process is None or w.process.pid not in serving]
            names = ", ".join(str(w.index) for w in late)
            raise TimeoutError(
                f"front-end workers {names} did not say they serve within "
                f"{WORKER_START_TIMEOUT_S:g} s (a machine too busy to start them?)"
            ) from None

    async def run(self) -> None:
        """Supervise the workers until cancelled: restart any that dies."""
        async with asyncio.TaskGroup() as tasks:
            for worker in self._workers:
                tasks.create_task(self._keep(worker), name=f"frontend-worker-{worker.index}")

    async def _keep(self, worker: _Worker) -> None:
        backoff_s = RESTART_BACKOFF_S_INITIAL
        loop = asyncio.get_running_loop()
        while True:
            assert worker.process is not None
            started_s = loop.time()
            status = await worker.process.wait()
            if self._stopping:
                return
            if loop.time() - started_s >= STABLE_RUN_S:
                backoff_s = RESTART_BACKOFF_S_INITIAL
            _log.error(
                "front-end worker %d (pid %d) exited with status %d; restarting in %.0f s",
                worker.index,
                worker.process.pid,
                status,
                backoff_s,
            )
            await asyncio.sleep(backoff_s)
            backoff_s = min(backoff_s * 2, RESTART_BACKOFF_S_MAX)
            if self.stopping():  # stop() may have begun during the pause
                return
            await self._spawn(worker)

    def stopping(self) -> bool:
        """Whether ``stop`` has begun."""
        return self._stopping

    async def stop(self) -> None:
        """Stop the workers (SIGTERM, then SIGKILL after the grace), the relay and the port."""
        self._stopping = True
        grace_s = self._settings.server.shutdown_grace_ms / 1000 + WORKER_STOP_MARGIN_S
        running = [w.process for w in self._workers if w.process is not None]
        for proc in running:
            if proc.returncode is None:
                proc.terminate()
        for proc in running:
            try:
                async with asyncio.timeout(grace_s):
                    await proc.wait()
            except TimeoutError:
                _log.warning("front-end worker pid %d did not stop; killing it", proc.pid)
                proc.kill()
                await proc.wait()
        await self._relay.close()
        if self._holder is not None:
            self._holder.close()
        if self._socket_dir is not None:
            shutil.rmtree(self._socket_dir, ignore_errors=True)


FrontEnd = InProcessFrontEnd | WorkerFrontEnd
"""Either way of serving gRPC; both have ``workers`` and ``start``/``run``/``stop``."""


def build(
    settings: broker_settings.BrokerSettings,
    implementations: Sequence[tuple[pb.ServiceDescriptor, object]],
    *,
    latency: rpc_latency.RpcLatency | None = None,
    gate: guard.Gate | None = None,
    server_tls: tls.ServerTls | None = None,
) -> FrontEnd:
    """The front end ``settings.workers`` asks for, timing calls into ``latency`` and checking
    them with ``gate`` (on this process either way), serving ``server_tls``'s mode."""
    workers = settings.effective_workers()
    if workers == 0:
        return InProcessFrontEnd(
            settings, implementations, latency=latency, gate=gate, server_tls=server_tls
        )
    return WorkerFrontEnd(
        settings, implementations, workers, latency=latency, gate=gate, server_tls=server_tls
    )


def tls_to_json(settings: tls.TlsSettings) -> str:
    """``settings`` as the JSON a worker's ``--tls-settings`` takes."""
    values = dataclasses.asdict(settings)
    values["server_mode"] = settings.server_mode.value
    values["need_client_auth"] = settings.need_client_auth.value
    return json.dumps(values)


def tls_from_json(text: str) -> tls.TlsSettings:
    """The ``TlsSettings`` of ``tls_to_json``'s text (``ValueError`` if malformed)."""
    values = json.loads(text)
    values["server_mode"] = tls.TlsMode(values["server_mode"])
    values["need_client_auth"] = tls.ClientAuth(values["need_client_auth"])
    return tls.TlsSettings(**values)


# -- the worker process -------------------------------------------------------------------------


async def serve_worker(
    relay_socket: str,
    listen: str,
    index: int,
    settings: grpc_server.ServerSettings,
    tls_settings: tls.TlsSettings | None = None,
) -> None:
    """Serve as front-end worker ``index`` until SIGTERM or until the owner goes away, in
    ``tls_settings``' mode (``None``: plaintext).

    Raises:
        OSError: if the relay socket or the port cannot be reached/bound.
        ValueError: the TLS files do not load.
    """
    forwarder = await relay.RelayForwarder.connect(relay_socket)
    server = grpc_server.build(settings, forwarder.handlers(SERVED_SERVICES), reuse_port=True)
    server_tls = tls.ServerTls(tls_settings) if tls_settings and tls_settings.enabled else None
    served = ports.ServedPort(listen, server_tls, reuse_port=True)
    await served.start(server)
    forwarder.hello(os.getpid(), index)
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    lost = loop.create_task(forwarder.lost.wait())
    stopped = loop.create_task(stop.wait())
    await asyncio.wait({lost, stopped}, return_when=asyncio.FIRST_COMPLETED)
    if forwarder.lost.is_set():
        _log.warning("worker %d: the broker's store process went away; stopping", index)
        _remove_relay_dir(relay_socket)  # the owner died without cleaning up
    served.stop_accepting()
    await server.stop(0 if forwarder.lost.is_set() else settings.shutdown_grace_ms / 1000)
    await served.stop()
    for task in (lost, stopped):
        task.cancel()
    forwarder.close()


def _remove_relay_dir(relay_socket: str) -> None:
    directory = pathlib.Path(relay_socket).parent
    if directory.name.startswith(RELAY_DIR_PREFIX):
        shutil.rmtree(directory, ignore_errors=True)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m ariane.broker.grpc.frontend``: one worker process (started by the broker)."""
    parser = argparse.ArgumentParser(
        prog="python -m ariane.broker.grpc.frontend", description=__doc__
    )
    parser.add_argument("--relay", required=True, help="the owner's relay Unix socket")
    parser.add_argument("--listen", required=True, metavar="HOST:PORT")
    parser.add_argument("--index", type=int, required=True)
    parser.add_argument("--server-settings", required=True, help="ServerSettings as JSON")
    parser.add_argument("--log-level", default="INFO")
    parser.add_argument("--tls-settings", default="", help="[tls] as JSON (default: none)")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's Ctrl-C reaches the owner
    logging.basicConfig(
        level=args.log_level,
        format=f"%(asctime)s %(levelname)s worker-{args.index} %(name)s: %(message)s",
        stream=sys.stderr,
    )
    settings = grpc_server.ServerSettings(**json.loads(args.server_settings))
    tls_settings = tls_from_json(args.tls_settings) if args.tls_settings else None
    try:
        asyncio.run(serve_worker(args.relay, args.listen, args.index, settings, tls_settings))
    except (OSError, ValueError) as exc:
        _log.error("front-end worker %d: %s", args.index, exc)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
