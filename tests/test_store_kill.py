"""A SYNC_FLUSH writer killed with SIGKILL mid-stream loses no acknowledged message."""

from __future__ import annotations

import os
import pathlib
import signal
import subprocess
import sys
import time

import pytest

from ariane.common import clock
from ariane.store import GetMessageStatus, LookupStatus, MessageStore, StoreSettings

TESTS_DIR = pathlib.Path(__file__).resolve().parent
ACKS_BEFORE_KILL = 300
DEADLINE_S = 60


@pytest.mark.slow
def test_sigkill_mid_stream_keeps_every_acknowledged_message(tmp_path: pathlib.Path) -> None:
    """Every key printed as acknowledged is readable by offset and via its ConsumeQueue."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(TESTS_DIR), os.environ.get("PYTHONPATH", "")]),
    }
    writer = subprocess.Popen(
        [sys.executable, "-m", "store_crash_writer", str(tmp_path), "100000"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        text=True,
    )
    assert writer.stdout is not None
    acked: list[tuple[str, int, int, int]] = []
    deadline = time.monotonic() + DEADLINE_S
    try:
        for line in writer.stdout:
            if line.startswith("ACK ") and line.endswith("\n"):
                _, key, offset, queue_id, queue_offset = line.split()
                acked.append((key, int(offset), int(queue_id), int(queue_offset)))
            if len(acked) >= ACKS_BEFORE_KILL or time.monotonic() > deadline:
                break
        os.kill(writer.pid, signal.SIGKILL)
        rest, errors = writer.communicate(timeout=DEADLINE_S)
    finally:
        if writer.poll() is None:
            os.kill(writer.pid, signal.SIGKILL)
            writer.wait(timeout=DEADLINE_S)
    for line in rest.splitlines(keepends=True):
        if line.startswith("ACK ") and line.endswith("\n") and len(line.split()) == 5:
            _, key, offset, queue_id, queue_offset = line.split()
            acked.append((key, int(offset), int(queue_id), int(queue_offset)))
    assert writer.returncode == -signal.SIGKILL, errors
    assert len(acked) >= ACKS_BEFORE_KILL, errors
    _check_store(tmp_path, acked)


def _check_store(root: pathlib.Path, acked: list[tuple[str, int, int, int]]) -> None:
    config = StoreSettings(
        commit_log_file_size_bytes=64 * 1024,
        consume_queue_file_entries=64,
        message_size_bytes_max=4096,
        write_buffer_bytes=256 * 1024,
    )
    store = MessageStore.open(root, config, clock=clock.SystemClock())
    try:
        assert not store.recovery_report.clean
        for key, offset, queue_id, queue_offset in acked:
            found = store.get_message(offset)
            assert found.status is LookupStatus.FOUND, key
            assert found.message is not None and found.message.message.keys == (key,)
            got = store.get_messages("Crash", queue_id, queue_offset, max_count=1, max_bytes=1)
            assert got.status is GetMessageStatus.FOUND, key
            assert got.messages[0].commit_log_offset == offset
        for queue_id in (0, 1):
            offset = 0
            while offset < store.max_queue_offset("Crash", queue_id):
                got = store.get_messages(
                    "Crash", queue_id, offset, max_count=512, max_bytes=1 << 30
                )
                assert got.status is GetMessageStatus.FOUND
                assert [m.queue_offset for m in got.messages] == list(
                    range(offset, offset + len(got.messages))
                )
                offset = got.next_begin_offset
        assert store.stats().corrupt_read_count == 0
    finally:
        store.close()
