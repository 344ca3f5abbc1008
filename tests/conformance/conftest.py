"""Fixtures for conformance tests: a real ``ariane namesrv`` + ``ariane broker`` on 127.0.0.1.

``cluster`` is the session's shared name server + broker (``shared_cluster`` in
tests/conftest.py: ``ariane.dev.dev_cluster``, child processes, free ports, stopped by PID at the
end of the session); every module that uses it creates topics and groups whose names no other
such module uses (a module that needs a cluster of its own defines its own ``cluster``).
``run_driver`` runs the official Python client driver in its own process (its protobuf modules
clash with ours) and returns its JSON events; ``admin`` runs ``python -m ariane admin`` the way
a user would.
``ProcessCluster`` starts a broker with extra TOML settings (two front-end workers) that a test
may SIGKILL and start again; ``DriverProcess`` runs one long driver command and reads its events
as they come.
"""

from __future__ import annotations

import contextlib
import json
import pathlib
import queue
import subprocess
import sys
import threading
import time
from typing import Any

import pytest
from e2e.testenv import processes

import live_testing
from ariane import dev

HERE = pathlib.Path(__file__).resolve().parent
DRIVER = HERE / "official_py_driver.py"
REPO = HERE.parents[1]
EVENT_DEADLINE_S = 60.0
"""Longest wait for one event of a ``DriverProcess``."""


class Cluster:
    """Handles to a running local cluster."""

    def __init__(self, endpoints: dev.DevEndpoints) -> None:
        self.namesrv = endpoints.namesrv
        self.broker = endpoints.broker
        self.data_dir = pathlib.Path(endpoints.data_dir)

    def admin(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """Run ``python -m ariane admin --endpoints <namesrv> ARGS``."""
        done = subprocess.run(
            [sys.executable, "-m", "ariane", "admin", "--endpoints", self.namesrv, *args],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        if check and done.returncode != 0:
            raise AssertionError(f"admin {args} failed ({done.returncode}): {done.stderr}")
        return done

    def wait_for_message(self, message_id: str, topic: str, *, deadline_s: float = 30) -> None:
        """Poll ``ariane admin message get`` (``deadline_s`` deadline) until ``topic`` holds
        the message ``message_id`` (e.g. the retry copy of a failed message, once its backoff
        passed, in the group's retry topic ``%RETRY%<group>_<topic>``)."""
        deadline = time.monotonic() + deadline_s
        while True:
            done = self.admin(
                "--json", "message", "get", "--id", message_id, "--topic", topic, check=False
            )
            if done.returncode == 0 and json.loads(done.stdout):
                return
            assert time.monotonic() < deadline, f"no {message_id} in {topic}: {done.stderr}"
            time.sleep(0.2)  # polling the admin API with a deadline

    def run_driver(self, *args: str, timeout_s: float = 120) -> tuple[int, list[dict[str, Any]]]:
        """Run the official-client driver; returns its exit code and JSON events."""
        done = subprocess.run(
            [sys.executable, str(DRIVER), *args, "--endpoints", self.namesrv],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
            cwd=REPO,
        )
        events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
        if done.returncode not in (0, 3):
            raise AssertionError(
                f"driver {args} crashed ({done.returncode}): {done.stderr[-3000:]}"
            )
        return done.returncode, events


class ProcessCluster(Cluster):
    """A name server and a broker (two front-end workers, ``broker_toml`` appended to the dev
    settings) whose process the test may SIGKILL and start again on the same store and port."""

    def __init__(self, data_dir: pathlib.Path, *, broker_toml: str = "") -> None:
        port = dev.free_port()
        super().__init__(
            dev.DevEndpoints(
                namesrv=f"127.0.0.1:{dev.free_port()}",
                broker=f"127.0.0.1:{port}",
                data_dir=str(data_dir),
            )
        )
        self.port = port
        self.config = data_dir / "broker.toml"
        self.config.write_text(
            dev.DEV_BROKER_TOML.format(flush_disk_type="ASYNC_FLUSH") + broker_toml
        )
        self.namesrv_process = self._spawn(["namesrv", "--listen", self.namesrv], "namesrv.log")
        dev.wait_until_listening(
            "127.0.0.1",
            int(self.namesrv.rpartition(":")[2]),
            process=self.namesrv_process,
            timeout_s=dev.READY_TIMEOUT_S,
        )
        self.broker_process = self.start_broker()

    def _spawn(self, args: list[str], log: str) -> subprocess.Popen[bytes]:
        return processes.spawn_ariane(args, self.data_dir / log)

    def start_broker(self) -> subprocess.Popen[bytes]:
        """Start the broker on the cluster's store and port; wait until it is registered."""
        args = ["broker", "--config", str(self.config), "--namesrv", self.namesrv]
        args += ["--listen", self.broker, "--store-dir", str(self.data_dir / "store")]
        process = self._spawn([*args, "--workers", "2"], "broker.log")
        ready_s = dev.READY_TIMEOUT_S
        dev.wait_until_listening("127.0.0.1", self.port, process=process, timeout_s=ready_s)
        dev.wait_until_registered(self.namesrv, "broker-a", process=process, timeout_s=ready_s)
        return process

    def kill_broker(self) -> None:
        """SIGKILL the broker (by PID); return once it and its front-end workers are gone."""
        live_testing.kill(self.broker_process)

    def stop(self) -> None:
        """Stop both processes by PID."""
        dev.stop_process(self.broker_process)
        dev.stop_process(self.namesrv_process)


class DriverProcess:
    """One long command of an official-client driver in a child process (``--endpoints`` is
    the cluster's name server), its JSON events read as they come; closing its stdin asks it
    to shut its client down.

    Args:
        cluster: whose name server the client uses.
        args: the driver's command and its arguments.
        driver: the argv prefix of another driver (``polyglot.Client.command``); the Python
            driver when empty.
        env: that driver's environment.
        log: a file that gets the driver's stderr (its client's log); discarded when ``None``.
    """

    def __init__(
        self,
        cluster: Cluster,
        *args: str,
        driver: tuple[str, ...] = (),
        env: dict[str, str] | None = None,
        log: pathlib.Path | None = None,
    ) -> None:
        self.events: queue.Queue[dict[str, Any]] = queue.Queue()
        self.seen: list[dict[str, Any]] = []
        with contextlib.ExitStack() as files:
            stderr = files.enter_context(log.open("ab")) if log else subprocess.DEVNULL
            self.process = subprocess.Popen(
                [*(driver or (sys.executable, str(DRIVER))), *args, "--endpoints", cluster.namesrv],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
                cwd=REPO,
                env=env,
            )
        if log is not None:
            processes.track(self.process, log)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            if line.startswith("{"):
                self.events.put(json.loads(line))

    def wait_for(self, event: str, *, deadline_s: float = EVENT_DEADLINE_S) -> dict[str, Any]:
        """The next event named ``event`` (earlier ones stay in ``seen``); fails after
        ``deadline_s``."""
        deadline = time.monotonic() + deadline_s
        while True:
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"no {event!r} event from the driver; saw {self.seen[-20:]}"
            try:
                got = self.events.get(timeout=remaining)
            except queue.Empty:
                continue
            self.seen.append(got)
            if got["event"] == event:
                return got

    def drain(self) -> list[dict[str, Any]]:
        """Every event that arrived since the last call (also appended to ``seen``)."""
        got = []
        while True:
            try:
                got.append(self.events.get_nowait())
            except queue.Empty:
                self.seen.extend(got)
                return got

    def close(self) -> None:
        """Close stdin (the driver then shuts its client down) and wait for it."""
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._reader.join(timeout=30)  # the pipe ends with the process
        assert self.process.stdout is not None
        self.process.stdout.close()


@pytest.fixture(scope="module")
def cluster(shared_cluster: dev.DevEndpoints) -> Cluster:
    """The session's shared name server and broker (``shared_cluster``)."""
    return Cluster(shared_cluster)
