"""A stale master never acknowledges a write (issue 25), with real processes: after a failover
over a paused (SIGSTOPped) master, the old master answers no send OK and never takes its group's
route back at the name server; a master cut off from its name server stops acknowledging once
its lease runs out, and acknowledges again once renewed; promotion waits for the old master's
lease.

Own cluster: masters are paused (SIGSTOP), cut off from their name server and failed over."""

from __future__ import annotations

import asyncio
import os
import pathlib
import signal
import time
from collections.abc import Iterator

import pytest

import ha_testing as ht
from ariane.client import failover
from ariane.common import errors

pytestmark = [pytest.mark.slow, pytest.mark.solo]

OK = int(errors.Code.OK)
TOPIC = "fence-topic"
LEASE_MS = 3_000
SENDS = 50
ROUTE_WATCH_S = 3.0
"""How long the route is watched after the old master resumed and re-registered (a topic
created on it registers at once, as its 30 s period would): its heartbeats (1 s) and
re-registrations took the route back within that on the unfixed code."""


def _config(tmp: pathlib.Path) -> tuple[str, ...]:
    """Small CommitLog segments, a 3 s lease, a quick metadata sync, and the fence alone: a
    stale master here stays a fenced master (rejoining as a slave is test_ha_rejoin's)."""
    config = tmp / "fence.toml"
    config.write_text(
        "[store]\ncommit_log_file_size_bytes = 1048576\n"
        f"[ha]\nlease_ms = {LEASE_MS}\nrejoin_as_slave = false\n"
        "[slave_sync]\ninterval_ms = 200\n"
    )
    return ("--config", str(config))


@pytest.fixture
def pair(
    tmp_path: pathlib.Path,
) -> Iterator[tuple[str, ht.Broker, ht.Broker]]:
    """A name server and an ASYNC_MASTER + SLAVE pair with a topic the slave has synced."""
    extra = _config(tmp_path)
    with (
        ht.running_namesrv(tmp_path) as namesrv,
        ht.synced_pair(tmp_path, namesrv, TOPIC, extra) as (master, slave),
    ):
        yield namesrv, master, slave


def test_a_paused_master_after_failover_acknowledges_nothing_and_keeps_no_route(
    pair: tuple[str, ht.Broker, ht.Broker],
) -> None:
    """Proves the report of issue 25 is fixed: master SIGSTOPped, slave promoted to epoch 2
    once the old lease ran out, old master resumed: SENDS messages sent straight to it (a
    client's cached route) are all refused, and the name server never lists it as id 0 again."""
    namesrv, master, slave = pair
    assert master.process is not None
    os.kill(master.process.pid, signal.SIGSTOP)
    stopped = time.monotonic()
    promoted = asyncio.run(
        failover.promote((namesrv,), "ha-group", 1, role="ASYNC_MASTER", timeout_s=1.0)
    )
    assert time.monotonic() - stopped >= LEASE_MS / 1000, "promoted inside the old lease"
    assert (promoted.epoch, promoted.endpoint) == (2, slave.endpoint)
    ht.poll(lambda: ht.cluster_masters(namesrv) == [(slave.endpoint, 2)], "the epoch-2 route")

    os.kill(master.process.pid, signal.SIGCONT)
    codes = [ht.send(master.endpoint, TOPIC, f"stale-{i}".encode()) for i in range(SENDS)]
    assert OK not in codes, f"{codes.count(OK)} of {SENDS} sends acknowledged by a stale master"
    ht.create_topic(master.endpoint, "fence-other")  # re-registers now, not in 30 s
    deadline = time.monotonic() + ROUTE_WATCH_S
    while time.monotonic() < deadline:  # the old master's heartbeats and re-registrations
        assert ht.cluster_masters(namesrv) == [(slave.endpoint, 2)]
        time.sleep(0.1)
    assert not ht.stats(master.endpoint).writable
    assert ht.send(slave.endpoint, TOPIC, b"new-master") == OK


def test_promotion_is_refused_while_the_old_master_may_hold_its_lease(
    pair: tuple[str, ht.Broker, ht.Broker],
) -> None:
    """Proves a failover right after the master stopped answering is refused, saying how long
    its lease may still be held, and promotes nobody."""
    namesrv, master, slave = pair
    assert master.process is not None
    os.kill(master.process.pid, signal.SIGSTOP)
    with pytest.raises(errors.PreconditionFailedError, match=r"lease.*s more"):
        asyncio.run(failover.promote((namesrv,), "ha-group", 1, timeout_s=0.5, lease_wait_s=0))
    assert ht.stats(slave.endpoint).epoch == 1


def test_a_master_cut_off_from_its_name_server_stops_acknowledging_within_its_lease(
    tmp_path: pathlib.Path,
) -> None:
    """Proves a replicated master whose only name server is SIGSTOPped refuses sends once its
    lease (3 s) has run out, no later, and acknowledges again once the name server is back."""
    master, slave = ht.new_broker(tmp_path, "master"), ht.new_broker(tmp_path, "slave")
    extra = _config(tmp_path)
    with ht.running_namesrv_process(tmp_path) as (namesrv, process):
        try:
            master.start(tmp_path, namesrv, "ASYNC_MASTER", broker_id=0, extra=extra)
            slave.start(tmp_path, namesrv, "SLAVE", broker_id=1, master_ha=master.ha, extra=extra)
            ht.create_topic(master.endpoint, TOPIC)
            assert ht.send(master.endpoint, TOPIC, b"before") == OK
            os.kill(process.pid, signal.SIGSTOP)
            cut = time.monotonic()
            ht.poll(lambda: ht.send(master.endpoint, TOPIC, b"cut-off") != OK, "a refusal")
            assert time.monotonic() - cut <= LEASE_MS / 1000 + 1.0, "acked past its lease"
            os.kill(process.pid, signal.SIGCONT)
            ht.poll(lambda: ht.send(master.endpoint, TOPIC, b"back") == OK, "acks again")
        finally:
            master.stop()
            slave.stop()
