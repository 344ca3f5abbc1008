"""A SYNC_FLUSH writer killed with SIGKILL mid-stream loses no acknowledged message.

The mixed test kills a writer of 1 KiB / 2 MiB / 4 MiB bodies ``ARIANE_KILL_ROUNDS`` times
(default 10) on one store, each writer recovering what the previous one left; ``make chaos``
can raise the rounds and ``ARIANE_KILL_ACKS`` (acknowledgements awaited per round).
"""

from __future__ import annotations

import os
import pathlib
import signal
import subprocess
import sys
import time

import pytest

import store_crash_writer
from ariane.common import clock, ids
from ariane.store import GetMessageStatus, LookupStatus, MessageStore

TESTS_DIR = pathlib.Path(__file__).resolve().parent
ACKS_BEFORE_KILL = 300
DEADLINE_S = 60
KILL_ROUNDS = int(os.environ.get("ARIANE_KILL_ROUNDS", "10"))
"""SIGKILLs of the mixed-body test (``make chaos`` raises it)."""
MIXED_ACKS_PER_ROUND = int(os.environ.get("ARIANE_KILL_ACKS", "12"))
"""Acknowledgements the mixed-body test waits for before each SIGKILL."""

Acked = tuple[str, ids.CommitLogOffset, ids.QueueId, ids.QueueOffset, int]
"""key, CommitLog offset, queue id, queue offset, body bytes (typed where the line is parsed)."""
CRASH = ids.TopicName("Crash")
"""The topic ``store_crash_writer`` writes to."""


def _parse(line: str) -> Acked | None:
    parts = line.split()
    if not line.endswith("\n") or len(parts) != 6 or parts[0] != "ACK":
        return None  # a line cut by the kill
    _, key, offset, queue_id, queue_offset, size = parts
    return (
        key,
        ids.CommitLogOffset(int(offset)),
        ids.QueueId(int(queue_id)),
        ids.QueueOffset(int(queue_offset)),
        int(size),
    )


def _run_and_kill(root: pathlib.Path, acks_wanted: int, tag: str, mix: str) -> list[Acked]:
    """Start a writer on ``root``, SIGKILL it (by PID) after ``acks_wanted`` ACK lines."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(TESTS_DIR), os.environ.get("PYTHONPATH", "")]),
    }
    writer = subprocess.Popen(
        [sys.executable, "-m", "store_crash_writer", str(root), "100000", tag, mix],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        text=True,
    )
    assert writer.stdout is not None
    acked: list[Acked] = []
    deadline = time.monotonic() + DEADLINE_S
    try:
        for line in writer.stdout:
            ack = _parse(line)
            if ack is not None:
                acked.append(ack)
            if len(acked) >= acks_wanted or time.monotonic() > deadline:
                break
        os.kill(writer.pid, signal.SIGKILL)
        rest, errors = writer.communicate(timeout=DEADLINE_S)
    finally:
        if writer.poll() is None:
            os.kill(writer.pid, signal.SIGKILL)
            writer.wait(timeout=DEADLINE_S)
    acked += [ack for line in rest.splitlines(keepends=True) if (ack := _parse(line))]
    assert writer.returncode == -signal.SIGKILL, errors
    assert len(acked) >= acks_wanted, errors
    return acked


@pytest.mark.slow
def test_sigkill_mid_stream_keeps_every_acknowledged_message(tmp_path: pathlib.Path) -> None:
    """Every key printed as acknowledged is readable by offset and via its ConsumeQueue."""
    acked = _run_and_kill(tmp_path, ACKS_BEFORE_KILL, "", "small")
    _check_store(tmp_path, acked, "small")


@pytest.mark.slow
def test_repeated_sigkills_with_4_mib_bodies_keep_every_acknowledged_message(
    tmp_path: pathlib.Path,
) -> None:
    """Ten kills of a writer of 1 KiB, 2 MiB and 4 MiB bodies lose no acknowledged message."""
    acked: list[Acked] = []
    for round_number in range(KILL_ROUNDS):
        acked += _run_and_kill(tmp_path, MIXED_ACKS_PER_ROUND, f"r{round_number}", "mixed")
    assert {size for *_, size in acked} >= {1024, 2 * 1024 * 1024, 4 * 1024 * 1024}
    _check_store(tmp_path, acked, "mixed")


def _check_store(root: pathlib.Path, acked: list[Acked], mix: str) -> None:
    store = MessageStore.open(root, store_crash_writer.settings_for(mix), clock=clock.SystemClock())
    try:
        assert not store.recovery_report.clean
        for key, offset, queue_id, queue_offset, size in acked:
            found = store.get_message(offset)
            assert found.status is LookupStatus.FOUND, key
            assert found.message is not None and found.message.message.keys == (key,)
            assert len(found.message.body) == size, key
            got = store.get_messages(CRASH, queue_id, queue_offset, max_count=1, max_bytes=1)
            assert got.status is GetMessageStatus.FOUND, key
            assert got.messages[0].commit_log_offset == offset
        for queue_id in map(ids.QueueId, (0, 1)):
            at = ids.QueueOffset(0)
            while at < store.max_queue_offset(CRASH, queue_id):
                got = store.get_messages(CRASH, queue_id, at, max_count=512, max_bytes=1 << 30)
                assert got.status is GetMessageStatus.FOUND
                assert [m.queue_offset for m in got.messages] == list(
                    range(at, at + len(got.messages))
                )
                at = got.next_begin_offset
        assert store.stats().corrupt_read_count == 0
    finally:
        store.close()
