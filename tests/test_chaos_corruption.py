"""Bit flips and truncation of one replica's CommitLog (``e2e.chaos.corruption``) with real
processes: a slave restarted on a damaged CommitLog cuts it at the first bad record and
re-fetches the rest from its master until both are byte-identical, then follows new writes
(a master's handling of a damaged record is proved in process by ``test_store_recovery``).

Own cluster: a slave is stopped, its files damaged, and restarted against its master.
"""

from __future__ import annotations

import pathlib
import random
from collections.abc import Callable
from typing import Any

import pytest
from e2e.chaos import corruption

import ha_testing
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
