"""Bit flips and truncation of one replica's store files (``e2e.chaos.corruption``) with real
processes: a slave restarted on a damaged CommitLog cuts it at the first bad record and
re-fetches the rest from its master until both are byte-identical, then follows new writes; a
master's damaged record is fetched back from its slave when a read meets it (the consumer's
offset stays on it meanwhile); a damaged or cut ConsumeQueue is rebuilt from the CommitLog, so
pulls deliver every message once, at its own queue offset.

Own cluster: a broker is stopped, its files damaged, and restarted.
"""

from __future__ import annotations

import asyncio
import pathlib
import random
import time
from collections.abc import Callable
from typing import Any

import pytest
from e2e.chaos import corruption

import ha_testing
from ariane import client
from ariane.common import errors

TOPIC = "damaged"
MESSAGES = 60

Damage = Callable[[pathlib.Path, random.Random], dict[str, Any]]


def _fill(master: ha_testing.Broker, slave: ha_testing.Broker) -> int:
    """Send ``MESSAGES`` messages to the master; wait for the slave to hold them; the end."""
    for start in range(0, MESSAGES, 10):
        bodies = [f"message-{n:04d}-".encode() * 8 for n in range(start, start + 10)]
        assert set(ha_testing.send_batch(master.endpoint, TOPIC, bodies)) == {int(errors.Code.OK)}
    end = ha_testing.stats(master.endpoint).commit_log_max_offset
    ha_testing.poll(
        lambda: ha_testing.stats(slave.endpoint).commit_log_max_offset >= end, "the slave synced"
    )
    return end


def _repaired(tmp: pathlib.Path, damage: Damage, seed: int) -> dict[str, Any]:
    """Damage the stopped slave's CommitLog, restart it, wait until its bytes are the master's
    again (and then for a message sent after); returns what was damaged."""
    with (
        ha_testing.running_namesrv(tmp) as namesrv,
        ha_testing.synced_pair(tmp, namesrv, TOPIC, ()) as (master, slave),
    ):
        end = _fill(master, slave)
        slave.stop()
        done = damage(slave.store, random.Random(seed))
        assert ha_testing.commit_log_bytes(slave.store, end) != ha_testing.commit_log_bytes(
            master.store, end
        )
        slave.start(tmp, namesrv, "SLAVE", broker_id=1, master_ha=master.ha)
        ha_testing.poll(
            lambda: (
                ha_testing.commit_log_bytes(slave.store, end)
                == ha_testing.commit_log_bytes(master.store, end)
            ),
            f"the slave repaired from its master after {done}",
        )
        assert ha_testing.send(master.endpoint, TOPIC, b"after") == int(errors.Code.OK)
        after = ha_testing.stats(master.endpoint).commit_log_max_offset
        ha_testing.poll(
            lambda: ha_testing.stats(slave.endpoint).commit_log_max_offset == after,
            "the repaired slave to follow new writes",
        )
    return done


@pytest.mark.slow
def test_a_bit_flip_in_the_middle_of_a_slaves_commit_log_is_refetched_from_the_master(
    tmp_path: pathlib.Path,
) -> None:
    """Proves a slave restarted (after a clean stop) on a CommitLog with one flipped bit in a
    middle record cuts it there and re-fetches everything after from its master."""
    done = _repaired(tmp_path, corruption.flip_commit_log_record, seed=7)
    assert done["kind"] == "flip_commit_log_record"
    assert "is corrupt" in (tmp_path / "slave.log").read_text()


@pytest.mark.slow
def test_a_truncated_commit_log_segment_of_a_slave_is_refetched_from_the_master(
    tmp_path: pathlib.Path,
) -> None:
    """Proves a slave whose newest CommitLog segment was cut short (mid-record) starts,
    rescans and re-fetches the lost tail from its master instead of refusing to start."""
    done = _repaired(tmp_path, corruption.truncate_commit_log, seed=3)
    assert done["kind"] == "truncate_commit_log"


PULL_DEADLINE_S = 15.0


def _expected_bodies() -> set[bytes]:
    """What ``synced_pair`` and ``_fill`` sent."""
    return {b"before"} | {f"message-{n:04d}-".encode() * 8 for n in range(MESSAGES)}


def _pull_all(namesrv: str) -> tuple[list[bytes], list[str]]:
    """Pull both queues of ``TOPIC`` from offset 0 to their ends (following each answer's next
    offset, retrying one that does not move, until ``PULL_DEADLINE_S``); the bodies in the
    order got and the violations seen: a message at another queue offset than the one it was
    served at, or an answer whose next offset skips offsets it did not deliver."""

    async def main() -> tuple[list[bytes], list[str]]:
        got: list[bytes] = []
        wrong: list[str] = []
        async with client.PullConsumer(namesrv) as consumer:
            queues = await consumer.queues_for_topic(TOPIC)
            ends = await consumer.end_offsets(queues)
            at = dict.fromkeys(queues, 0)
            deadline = time.monotonic() + PULL_DEADLINE_S
            while any(at[q] < ends[q] for q in queues) and time.monotonic() < deadline:
                for queue in (q for q in queues if at[q] < ends[q]):
                    batch = await consumer.fetch(
                        queue, at[queue], max_messages=64, long_polling_timeout_s=0
                    )
                    for expected, pulled in enumerate(batch.messages, start=at[queue]):
                        if pulled.queue_offset != expected:
                            wrong.append(f"{queue}: {pulled.queue_offset} served at {expected}")
                        got.append(pulled.body)
                    if batch.next_offset > at[queue] + len(batch.messages):
                        wrong.append(f"{queue}: skipped to {batch.next_offset} from {at[queue]}")
                    at[queue] = max(at[queue], batch.next_offset)
                await asyncio.sleep(0.1)
            wrong += [f"{q}: stuck at {at[q]} of {ends[q]}" for q in queues if at[q] < ends[q]]
        return got, wrong

    return asyncio.run(main())


def _extra_stat(endpoint: str, name: str) -> int:
    return int(ha_testing.stats(endpoint).extra.get(name, "0"))


def _flip_a_master_record_and_restart(
    tmp_path: pathlib.Path, *, clean_stop: bool, role: str
) -> None:
    """A synced pair filled, the master stopped (``clean_stop``) or SIGKILLed, one bit of a
    CommitLog record flipped, the master restarted as ``role``: every message delivered once
    and nothing corrupt, the master byte-identical to its slave, one record repaired."""
    with (
        ha_testing.running_namesrv(tmp_path) as namesrv,
        ha_testing.synced_pair(tmp_path, namesrv, TOPIC, ()) as (master, slave),
    ):
        end = _fill(master, slave)
        if clean_stop:
            master.stop()
        else:
            master.kill()
        done = corruption.flip_commit_log_record(master.store, random.Random(11))
        master.start(tmp_path, namesrv, role, broker_id=0)
        got, wrong = _pull_all(namesrv)
        assert not wrong, f"after {done}"
        assert sorted(got) == sorted(_expected_bodies())
        assert ha_testing.commit_log_bytes(master.store, end) == ha_testing.commit_log_bytes(
            slave.store, end
        )
        assert _extra_stat(master.endpoint, "repaired_record_count") == 1


@pytest.mark.slow
def test_a_damaged_record_of_a_master_is_fetched_back_from_its_slave_and_delivered(
    tmp_path: pathlib.Path,
) -> None:
    """Proves a master restarted on a CommitLog with one flipped bit delivers every message
    once (the damaged one repaired from its slave, never skipped) and ends byte-identical to
    its slave, counting the repair."""
    _flip_a_master_record_and_restart(tmp_path, clean_stop=True, role="ASYNC_MASTER")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("damage", "seed"),
    [(corruption.flip_consume_queue_unit, 5), (corruption.truncate_consume_queue, 2)],
)
def test_a_damaged_consume_queue_of_a_master_is_rebuilt_from_the_commit_log(
    tmp_path: pathlib.Path, damage: Damage, seed: int
) -> None:
    """Proves a master restarted on a ConsumeQueue with a flipped CommitLog offset, or cut
    mid-unit, serves every message once at its own queue offset (the queue's units rebuilt from
    the CommitLog), with no slave to ask."""
    with ha_testing.running_namesrv(tmp_path) as namesrv:
        master = ha_testing.new_broker(tmp_path, "master")
        try:
            master.start(tmp_path, namesrv, "ASYNC_MASTER", broker_id=0)
            ha_testing.create_topic(master.endpoint, TOPIC)
            assert ha_testing.send(master.endpoint, TOPIC, b"before") == int(errors.Code.OK)
            for start in range(0, MESSAGES, 10):
                bodies = [f"message-{n:04d}-".encode() * 8 for n in range(start, start + 10)]
                codes = ha_testing.send_batch(master.endpoint, TOPIC, bodies)
                assert set(codes) == {int(errors.Code.OK)}
            master.stop()
            done = damage(master.store, random.Random(seed))
            master.start(tmp_path, namesrv, "ASYNC_MASTER", broker_id=0)
            got, wrong = _pull_all(namesrv)
            assert not wrong, f"after {done}"
            assert sorted(got) == sorted(_expected_bodies()), f"after {done}"
        finally:
            master.stop()


@pytest.mark.slow
def test_a_killed_sync_master_keeps_a_damaged_acked_record_and_repairs_it_from_its_slave(
    tmp_path: pathlib.Path,
) -> None:
    """Proves a master SIGKILLed (an unclean stop: its recovery rescans the CommitLog) and
    restarted as SYNC_MASTER on a CommitLog with one flipped bit in an acknowledged record keeps
    that record and every one after it, and delivers every acknowledged message once (the
    damaged one repaired from its slave), ending byte-identical to its slave (RocketMQ's
    recoverAbnormally, and Ariane's before issue 25, cut the log there)."""
    _flip_a_master_record_and_restart(tmp_path, clean_stop=False, role="SYNC_MASTER")
    log = (tmp_path / "master.log").read_text()
    assert "unclean stop" in log and "is damaged" in log  # the path this test is about
