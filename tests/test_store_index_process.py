"""Query by key after a crash that cut the CommitLog, and offset message ids that name their
broker: real ``ariane namesrv``/``ariane broker`` processes, ``ariane admin message get``.

The broker is SIGKILLed, its CommitLog is torn from the middle of its 6th record on (zeros
after, as a power loss leaves unsynced bytes), and recovery cuts the CommitLog there; the key
index must follow, or the messages written at the reused offsets are
never indexed (``--key new1`` answered MESSAGE_NOT_FOUND, issue 10).

Own cluster: the broker is SIGKILLed and its CommitLog torn on disk.
"""

from __future__ import annotations

import asyncio
import json
import pathlib
import subprocess
import sys

import pytest

from ariane import client, dev
from ariane.common import message
from ariane.store import message_codec
from live_testing import kill, namesrv_process, start_broker, wait_registered, wait_routed

pytestmark = pytest.mark.slow

TOPIC = "keyed"
FIRST_BODY_BYTE = 88
"""Offset of a record's first body byte from its start (IPv4 hosts; ``message_codec`` layout)."""


async def _send_keyed(namesrv: str, keys: list[str], *, create: bool, brokers: int = 1) -> None:
    if create:
        async with client.AdminClient(namesrv) as admin:
            await wait_registered(admin, masters=brokers)
            await admin.create_topic(TOPIC, write_queue_nums=1)
            await wait_routed(admin, TOPIC)
    async with client.Producer(namesrv) as producer:
        for key in keys:
            await producer.send(TOPIC, f"body of {key}".encode(), keys=[key])


def _admin(namesrv: str, *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "ariane", "admin", "--endpoints", namesrv, "--json", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)


def _found_keys(namesrv: str, key: str) -> list[str]:
    """The KEYS of the messages ``ariane admin message get --key`` finds ([] if none)."""
    done = _admin(namesrv, "message", "get", "--topic", TOPIC, "--key", key)
    if done.returncode != 0:
        assert "MESSAGE_NOT_FOUND" in done.stdout + done.stderr, done
        return []
    return [" ".join(m["keys"]) for m in json.loads(done.stdout)]


def _tear_from_record(store_dir: pathlib.Path, ordinal: int) -> None:
    """Zero the first segment from the first body byte of the ``ordinal``-th record (0-based)
    to the end of its records: a torn tail (a flipped bit there would be a damaged record
    inside the log, which recovery keeps: ``test_store_recovery_damaged``)."""
    segment = store_dir / "commitlog" / f"{0:020d}"
    with segment.open("r+b") as file:
        position = 0
        for _ in range(ordinal):
            file.seek(position)
            position += int.from_bytes(file.read(4), "big")
        end = position
        while True:
            file.seek(end)
            total = int.from_bytes(file.read(4), "big")
            if total <= 0:
                break
            end += total
        file.seek(position + FIRST_BODY_BYTE)
        file.write(bytes(end - position - FIRST_BODY_BYTE))


def test_keys_after_a_cut_tail_answer_the_live_messages(tmp_path: pathlib.Path) -> None:
    """10 keyed sends, SIGKILL, the CommitLog torn from the 6th record on, restart, 3 more
    keyed sends: the new keys are found, the keys of the records recovery cut are not, the
    first five still are."""
    with namesrv_process(tmp_path) as namesrv:
        port = dev.free_port()
        broker = start_broker(tmp_path, namesrv, port)
        try:
            asyncio.run(_send_keyed(namesrv, [f"old{i}" for i in range(10)], create=True))
            kill(broker)
            _tear_from_record(tmp_path / "broker-k", 5)
            broker = start_broker(tmp_path, namesrv, port)
            asyncio.run(_send_keyed(namesrv, [f"new{i}" for i in range(3)], create=False))
            for i in range(3):
                assert _found_keys(namesrv, f"new{i}") == [f"new{i}"]
            for i in range(5, 10):
                assert _found_keys(namesrv, f"old{i}") == []
            assert _found_keys(namesrv, "old4") == ["old4"]
        finally:
            assert dev.stop_process(broker) in (0, -9)


def _stored(namesrv: str, key: str) -> dict[str, object]:
    done = _admin(namesrv, "message", "get", "--topic", TOPIC, "--key", key)
    assert done.returncode == 0, done
    (found,) = json.loads(done.stdout)
    assert isinstance(found, dict)
    return found


def test_offset_message_ids_name_the_broker_that_stored_them(tmp_path: pathlib.Path) -> None:
    """Two brokers on different ports stamp their own classic-protocol (Remoting) address as
    STOREHOST, because classic clients dial it: each message's offset message id decodes to the
    Remoting port of the broker that stored it, and
    ``ariane admin message get --id`` of that id finds the message."""
    with namesrv_process(tmp_path) as namesrv:
        ports = {f"broker-{n}": dev.free_port() for n in range(2)}
        remoting = {name: dev.free_port() for name in ports}
        brokers = [
            start_broker(tmp_path, namesrv, port, name=name, remoting_port=remoting[name])
            for name, port in ports.items()
        ]
        try:
            asyncio.run(_send_keyed(namesrv, [f"id{i}" for i in range(8)], create=True, brokers=2))
            seen: set[object] = set()
            for i in range(8):
                found = _stored(namesrv, f"id{i}")
                host, _, port = str(found["store_host"]).rpartition(":")
                address = message.HostAddress(host, int(port))
                assert address == message.HostAddress(
                    "127.0.0.1", remoting[str(found["broker_name"])]
                )
                offset_id = message_codec.create_offset_message_id(
                    address, int(str(found["commit_log_offset"]))
                )
                assert message_codec.decode_offset_message_id(offset_id) == (
                    address,
                    found["commit_log_offset"],
                )
                again = _admin(namesrv, "message", "get", "--id", offset_id)
                assert again.returncode == 0, again
                assert [m["keys"] for m in json.loads(again.stdout)] == [[f"id{i}"]]
                seen.add(found["broker_name"])
            assert seen == set(ports), "the producer spread the messages over both brokers"
        finally:
            for broker in brokers:
                assert dev.stop_process(broker) in (0, -9)
