"""A real ``ariane broker`` process and its classic protocol address: an address set with
``--remoting-listen`` that is taken stops the broker; the default one taken is skipped with a
warning and gRPC keeps serving.

The default-address test is ``solo``: RocketMQ's 10911 is one port for the whole machine, which
any other test's broker started without ``--remoting-listen`` binds too; in the parallel run
such a broker could hold it while the test looks and release it before the test's broker
binds (seen in a CI run: the broker bound 10911 and never warned)."""

from __future__ import annotations

import asyncio
import pathlib
import socket
import subprocess

import pytest

import live_testing
from ariane import dev


def _held_port() -> socket.socket:
    held = socket.socket()
    held.bind(("127.0.0.1", 0))
    held.listen()
    return held


def test_explicit_remoting_address_taken_stops_the_broker(tmp_path: pathlib.Path) -> None:
    """The broker exits with an error naming the address instead of running without it."""
    with _held_port() as held:
        port = held.getsockname()[1]
        proc = live_testing.spawn(
            [
                "broker",
                *("--listen", f"127.0.0.1:{dev.free_port()}", "--store-dir", str(tmp_path / "s")),
                *("--namesrv", "127.0.0.1:1", "--workers", "0"),
                *("--remoting-listen", f"127.0.0.1:{port}"),
            ],
            tmp_path / "broker.log",
        )
        try:
            code = proc.wait(timeout=live_testing.DEADLINE_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise AssertionError("the broker kept running without its Remoting address") from None
    assert code != 0
    assert str(port) in (tmp_path / "broker.log").read_text()


@pytest.mark.solo
def test_default_remoting_address_taken_is_skipped(tmp_path: pathlib.Path) -> None:
    """With the default address (RocketMQ's 10911) taken, the broker logs that it serves no
    Remoting and keeps serving gRPC."""
    config = tmp_path / "broker.toml"
    config.write_text(f'store_dir = "{tmp_path / "s"}"\n')
    try:
        blocker: socket.socket | None = socket.create_server(("127.0.0.1", 10911))
    except OSError:
        blocker = None  # taken by another process already: the same situation for the broker
    grpc_port = dev.free_port()
    proc = live_testing.spawn(
        [
            "broker",
            *("--config", str(config), "--listen", f"127.0.0.1:{grpc_port}"),
            *("--namesrv", "127.0.0.1:1", "--workers", "0"),
        ],
        tmp_path / "broker.log",
    )
    try:
        log = tmp_path / "broker.log"

        async def warned() -> bool:
            assert proc.poll() is None, log.read_text()
            return "classic protocol not served" in log.read_text()

        asyncio.run(live_testing.eventually(warned))
        dev.wait_until_listening(
            "127.0.0.1", grpc_port, process=proc, timeout_s=live_testing.DEADLINE_S
        )
    finally:
        assert dev.stop_process(proc) == 0
        if blocker is not None:
            blocker.close()
