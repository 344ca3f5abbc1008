"""A stale master rejoins its group as a slave by itself (issues 25 and 23), with real processes:
a SYNC_MASTER SIGKILLed with an unacknowledged tail its slave never got, the slave promoted
(``client.failover``), the old master restarted with its old start-up arguments (SYNC_MASTER,
broker id 0, epoch 1): the name server refuses it as stale, it demotes itself to a slave of the
new master, cuts its diverged tail, catches up, and the new master (``min_in_sync_replicas`` 2)
acknowledges sends again; every acknowledged message is readable through the route.

Own cluster: brokers are paused, SIGKILLed, promoted and restarted."""

from __future__ import annotations

import asyncio
import os
import pathlib
import signal

import pytest
from e2e.testenv import processes

import ha_testing as ht
from ariane import client
from ariane.client import failover
from ariane.common import errors
from ariane.grpcwire import pb

pytestmark = pytest.mark.slow

OK = int(errors.Code.OK)
TOPIC = "rejoin-topic"
LEASE_MS = 2_000
REJOIN_BOUND_S = 15.0
"""Longest the restarted old master may take to be a slave of the new master, s: its first
registration is refused at once, and the demotion follows that answer (about 1-2 s here)."""


def _config(tmp: pathlib.Path) -> tuple[str, ...]:
    """Small store files, a 1 s wait for a slave's ack, a 2 s lease, a quick metadata sync."""
    config = tmp / "rejoin.toml"
    config.write_text(
        ht.SMALL_STORE_TOML.replace("[store]\n", "[store]\nsync_flush_timeout_ms = 1000\n")
        + f"[ha]\nlease_ms = {LEASE_MS}\n[slave_sync]\ninterval_ms = 200\n"
    )
    return ("--config", str(config))


async def _routed_bodies(namesrv: str) -> list[bytes]:
    """Every message of ``TOPIC`` read through its name-server route, by offset from 0."""
    async with client.PullConsumer(namesrv) as consumer:
        bodies: list[bytes] = []
        for queue in await consumer.queues_for_topic(TOPIC):
            pulled = await consumer.fetch(queue, 0, max_messages=256, long_polling_timeout_s=0)
            bodies += [m.body for m in pulled.messages]
        return bodies


def _is_slave_of(old: ht.Broker, new: ht.Broker) -> bool:
    """``old`` is slave 1 holding exactly ``new``'s bytes (its epoch follows with the first
    bytes of the new epoch: none exist before the new master takes a send)."""
    old_stats, new_stats = ht.stats(old.endpoint), ht.stats(new.endpoint)
    return (
        old_stats.role == ht.SLAVE_ROLE
        and old_stats.broker_id == 1
        and old_stats.commit_log_max_offset == new_stats.commit_log_max_offset
    )


def test_a_stale_sync_master_restarted_after_a_failover_rejoins_as_slave(
    tmp_path: pathlib.Path,
) -> None:
    """Proves an old SYNC_MASTER restarted as master at its old epoch after a failover becomes a
    slave of the new master by itself within REJOIN_BOUND_S, with its unacknowledged diverged
    tail cut, so the new master takes sends again and nothing acknowledged is lost."""
    master, slave = ht.new_broker(tmp_path, "master"), ht.new_broker(tmp_path, "slave")
    extra = _config(tmp_path)
    with ht.running_namesrv(tmp_path) as namesrv:
        try:
            master.start(tmp_path, namesrv, "SYNC_MASTER", broker_id=0, extra=extra)
            slave.start(tmp_path, namesrv, "SLAVE", broker_id=1, master_ha=master.ha, extra=extra)
            ht.create_topic(master.endpoint, TOPIC)
            ht.poll(lambda: ht.send(master.endpoint, TOPIC, b"warm-up") == OK, "a slave in sync")
            acked = [b"warm-up"]
            for i in range(20):
                assert ht.send(master.endpoint, TOPIC, f"before-{i}".encode()) == OK
                acked.append(f"before-{i}".encode())
            ht.poll(lambda: TOPIC in ht.topics(slave.endpoint), "the topic synced to the slave")

            # A diverged tail: stored on the master, never on the slave (it is paused, then
            # killed with the bytes unread in its socket), never acknowledged.
            assert slave.process is not None
            os.kill(slave.process.pid, signal.SIGSTOP)
            assert ht.send(master.endpoint, TOPIC, b"unacked") != OK
            diverged_end = ht.stats(master.endpoint).commit_log_max_offset
            slave.kill()
            master.kill()
            slave.start(tmp_path, namesrv, "SLAVE", broker_id=1, master_ha=master.ha, extra=extra)

            promoted = asyncio.run(failover.promote((namesrv,), "ha-group", 1, timeout_s=1.0))
            assert (promoted.epoch, promoted.role) == (2, "SYNC_MASTER")
            assert promoted.commit_log_max_offset < diverged_end, "no diverged tail was made"
            assert ht.send(slave.endpoint, TOPIC, b"alone") != OK  # no slave in sync

            master.start(
                tmp_path, namesrv, "SYNC_MASTER", broker_id=0, extra=extra, wait_writable=False
            )
            processes.wait_until(
                lambda: _is_slave_of(master, slave),
                timeout_s=REJOIN_BOUND_S,
                what="the old master to rejoin as a synced slave of the new one",
            )
            old = ht.stats(master.endpoint)
            assert old.role == pb.admin.BrokerRole.BROKER_ROLE_SLAVE and not old.writable
            ht.poll(lambda: ht.send(slave.endpoint, TOPIC, b"after-0") == OK, "acks again")
            acked.append(b"after-0")
            for i in range(1, 10):
                assert ht.send(slave.endpoint, TOPIC, f"after-{i}".encode()) == OK
                acked.append(f"after-{i}".encode())
            ht.poll(lambda: _is_slave_of(master, slave), "the old master to hold every byte")
            assert ht.stats(master.endpoint).epoch == 2
            end = ht.stats(slave.endpoint).commit_log_max_offset
            assert end > diverged_end  # the old tail's offsets were written again, differently
            assert ht.commit_log_bytes(master.store, end) == ht.commit_log_bytes(slave.store, end)

            bodies = asyncio.run(_routed_bodies(namesrv))
            assert set(bodies) == set(acked)  # "unacked" and "alone" are not among them
            once = [b for b in bodies if b not in (b"warm-up", b"after-0")]  # sent until OK
            assert len(once) == len(set(once))
        finally:
            master.stop()
            slave.stop()


def test_a_paused_master_resumed_after_a_failover_rejoins_as_slave(
    tmp_path: pathlib.Path,
) -> None:
    """Proves an ASYNC_MASTER paused (SIGSTOP) through a failover turns, once resumed, into a
    slave of the new master by itself (its lease ran out while paused; the name server's refusal
    of its first renewal names the new master), and follows the new master's writes."""
    extra = _config(tmp_path)
    with (
        ht.running_namesrv(tmp_path) as namesrv,
        ht.synced_pair(tmp_path, namesrv, TOPIC, extra) as (master, slave),
    ):
        assert master.process is not None
        os.kill(master.process.pid, signal.SIGSTOP)
        promoted = asyncio.run(
            failover.promote((namesrv,), "ha-group", 1, role="ASYNC_MASTER", timeout_s=1.0)
        )
        assert promoted.epoch == 2
        assert ht.send(slave.endpoint, TOPIC, b"while-paused") == OK
        os.kill(master.process.pid, signal.SIGCONT)

        processes.wait_until(
            lambda: _is_slave_of(master, slave),
            timeout_s=REJOIN_BOUND_S,
            what="the resumed old master to rejoin as a synced slave of the new one",
        )
        assert ht.stats(master.endpoint).epoch == 2
        assert ht.send(master.endpoint, TOPIC, b"refused") != OK
        assert ht.cluster_masters(namesrv) == [(slave.endpoint, 2)]
