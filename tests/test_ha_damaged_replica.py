"""A master's CommitLog record with a flipped TOPIC bit (its record CRC fails: the header can no
longer be trusted), streamed verbatim to a new slave over the HA port, with real processes: the
slave's reput dispatches every record after it, and a failover to that slave serves them at
their master's queue offsets and gives new messages the offsets after them, never the damaged
record's (issue 25's residual: the slave's reput stopped at such a record, the promotion kept
everything after it undispatched and gave its queue offsets to new messages).

Own cluster: the master is stopped, damaged, restarted, then SIGKILLed for a failover.
"""

from __future__ import annotations

import asyncio
import pathlib
import subprocess
import sys

import pytest
from e2e.chaos import corruption

import ha_testing as ht
from ariane import client
from ariane.common import errors
from ariane.store import message_codec

pytestmark = pytest.mark.slow

OK = int(errors.Code.OK)
TOPIC = "damaged-topic"
MESSAGES = 40
QUEUES = (0, 1)
FIXED_BYTES = message_codec.BODY_LENGTH_POSITION_V4 + 4
"""Where BODY starts in a record with IPv4 hosts."""


def _extra(tmp: pathlib.Path) -> tuple[str, ...]:
    """64 KiB CommitLog segments, a quick metadata sync and a short lease (a quick failover)."""
    fast = "[slave_sync]\ninterval_ms = 200\n[ha]\nlease_ms = 2000\n"
    return ht.small_store_config(tmp, "fast", fast)


def _flip_topic_of_a_middle_record(store: pathlib.Path) -> tuple[int, int]:
    """Flip the low bit of the first TOPIC byte of a record of ``TOPIC`` in the middle of the
    CommitLog; its (queue id, queue offset)."""
    records = []
    segments: dict[pathlib.Path, bytes] = {}
    for segment, at, total in corruption.commit_log_records(store):
        data = segments.setdefault(segment, segment.read_bytes())[at : at + total]
        body_bytes = int.from_bytes(data[FIXED_BYTES - 4 : FIXED_BYTES], "big")
        magic = int.from_bytes(data[4:8], "big", signed=True)
        topic_at = FIXED_BYTES + body_bytes + (2 if magic == message_codec.MAGIC_CODE_V2 else 1)
        if data[topic_at : topic_at + len(TOPIC)] == TOPIC.encode():
            records.append((segment, at, data, topic_at))
    segment, at, data, topic_at = records[len(records) // 2]
    corruption.flip_bit(segment, at + topic_at, 0)
    return int.from_bytes(data[12:16], "big"), int.from_bytes(data[20:28], "big")


def _pull(
    namesrv: str, ranges: dict[int, list[tuple[int, int]]]
) -> dict[int, list[tuple[int, bytes]]]:
    """(queue offset, body) of each queue's messages over the given [start, end) ranges."""

    async def main() -> dict[int, list[tuple[int, bytes]]]:
        got: dict[int, list[tuple[int, bytes]]] = {q: [] for q in ranges}
        async with client.PullConsumer(namesrv) as consumer:
            queues = {q.queue_id: q for q in await consumer.queues_for_topic(TOPIC)}
            for queue_id, spans in ranges.items():
                for start, end in spans:
                    at = start
                    while at < end:
                        batch = await consumer.fetch(
                            queues[queue_id], at, max_messages=end - at, long_polling_timeout_s=0
                        )
                        assert batch.messages, f"queue {queue_id}: nothing at {at} of {end}"
                        got[queue_id] += [(m.queue_offset, m.body) for m in batch.messages]
                        at = got[queue_id][-1][0] + 1
        return got

    return asyncio.run(main())


def _promote(namesrv: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "ariane", "admin", "--endpoints", namesrv, "--json"]
    command += ["broker", "promote", "--broker-name", "ha-group", "--broker-id", "1"]
    command += ["--role", "ASYNC_MASTER"]  # no slave left to acknowledge a SYNC_MASTER
    return subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)


def test_a_slave_fed_a_topic_flipped_record_dispatches_past_it_and_a_failover_keeps_offsets(
    tmp_path: pathlib.Path,
) -> None:
    """Proves a slave that received its master's record with a flipped TOPIC bit holds every
    queue to the master's end, and once promoted (the master SIGKILLed) serves the messages
    around the damaged one at the master's queue offsets and stores new ones after them."""
    extra = _extra(tmp_path)
    with ht.running_namesrv(tmp_path) as namesrv:
        master, slave = ht.new_broker(tmp_path, "master"), ht.new_broker(tmp_path, "slave")
        try:
            master.start(tmp_path, namesrv, "ASYNC_MASTER", broker_id=0, extra=extra)
            ht.create_topic(master.endpoint, TOPIC)
            for start in range(0, MESSAGES, 10):
                bodies = [f"m-{n:03d}".encode() * 8 for n in range(start, start + 10)]
                assert set(ht.send_batch(master.endpoint, TOPIC, bodies)) == {OK}
            master.stop()
            damaged_queue, damaged_offset = _flip_topic_of_a_middle_record(master.store)
            master.start(tmp_path, namesrv, "ASYNC_MASTER", broker_id=0, extra=extra)
            ends = {q: ht.queue_end(master.endpoint, TOPIC, q) for q in QUEUES}
            spans = {
                q: [(0, damaged_offset), (damaged_offset + 1, ends[q])]
                if q == damaged_queue
                else [(0, ends[q])]
                for q in QUEUES
            }
            served = _pull(namesrv, spans)
            assert sum(len(m) for m in served.values()) == MESSAGES - 1

            slave.start(tmp_path, namesrv, "SLAVE", broker_id=1, master_ha=master.ha, extra=extra)
            end = ht.stats(master.endpoint).commit_log_max_offset
            ht.poll(
                lambda: ht.stats(slave.endpoint).commit_log_max_offset >= end,
                "the slave to hold the master's bytes",
            )
            ht.poll(
                lambda: all(ht.queue_end(slave.endpoint, TOPIC, q) == ends[q] for q in QUEUES),
                f"the slave to dispatch every queue to the master's end {ends}",
            )
            ht.poll(lambda: ht.reported_in_sync(namesrv), "the master's report of its slave")

            master.kill()
            done = _promote(namesrv)
            assert done.returncode == 0, done.stderr
            assert _pull(namesrv, spans) == served
            assert set(ht.send_batch(slave.endpoint, TOPIC, [b"new-0", b"new-1"])) == {OK}
            after = {q: ht.queue_end(slave.endpoint, TOPIC, q) for q in QUEUES}
            assert sum(after.values()) == sum(ends.values()) + 2
            new = _pull(namesrv, {q: [(ends[q], after[q])] for q in QUEUES})
            assert sorted(body for got in new.values() for _, body in got) == [b"new-0", b"new-1"]
        finally:
            master.stop()
            slave.stop()
