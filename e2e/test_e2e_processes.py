"""Test-environment helpers: processes stopped by PID, dead components reported, sockets read."""

from __future__ import annotations

import ipaddress
import os
import pathlib
import signal
import socket
import sys

import pytest

from e2e.testenv import processes, sockets

IGNORE_TERM = (
    "import signal, sys, time\n"
    "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    "print('ready', flush=True)\n"
    "while True:\n"
    "    time.sleep(1)\n"
)


def test_stop_kills_a_child_that_ignores_sigterm(tmp_path: pathlib.Path) -> None:
    """A child ignoring SIGTERM is killed after the grace period, and only that PID."""
    child = processes.ManagedProcess.start(
        "stubborn", [sys.executable, "-c", IGNORE_TERM], log_dir=tmp_path, cwd=tmp_path
    )
    child.wait_ready(lambda: "ready" in child.log_tail(), timeout_s=30, what="child ready")

    status = child.stop(grace_s=0.5)

    assert status == -signal.SIGKILL
    assert not child.running()


def test_wait_ready_fails_fast_with_the_log_tail_when_the_child_dies(
    tmp_path: pathlib.Path,
) -> None:
    """A component that exits during start-up raises StartupError holding its last log lines."""
    child = processes.ManagedProcess.start(
        "broken",
        [sys.executable, "-c", "print('bad flag --nope'); raise SystemExit(2)"],
        log_dir=tmp_path,
        cwd=tmp_path,
    )

    with pytest.raises(processes.StartupError, match="bad flag --nope"):
        child.wait_ready(lambda: False, timeout_s=60, what="never")
    assert child.stop() == 2


def test_free_port_is_on_loopback_and_bindable() -> None:
    """free_port returns a port that can be bound on 127.0.0.1 right away."""
    port = processes.free_port()

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))
    assert 0 < port < 65536


def test_tcp_sockets_reports_exact_addresses_of_this_process() -> None:
    """tcp_sockets decodes /proc addresses and ports exactly (listener, client and accepted end)."""
    with socket.socket() as listener, socket.socket() as client:
        listener.bind(("127.0.0.2", 0))
        listener.listen()
        server = (ipaddress.ip_address("127.0.0.2"), listener.getsockname()[1])
        client.connect(("127.0.0.2", server[1]))
        client_host, client_port = client.getsockname()
        accepted, _ = listener.accept()
        with accepted:
            found = {
                (s.local, s.local_port, s.remote, s.remote_port, s.state)
                for s in sockets.tcp_sockets(os.getpid())
            }

    near = (ipaddress.ip_address(client_host), client_port)
    unspecified = (ipaddress.ip_address("0.0.0.0"), 0)
    assert (*server, *unspecified, sockets.LISTEN_STATE) in found
    assert (*near, *server, "01") in found
    assert (*server, *near, "01") in found
