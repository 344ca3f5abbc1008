"""Master/slave replication with real ``ariane namesrv`` and ``ariane broker`` processes: the
slave's CommitLog is byte-identical to the master's, a SYNC_MASTER acks only with a slave in sync
and refuses (HA_NOT_AVAILABLE) without storing while none is, a SIGKILL of the master after
acks loses nothing on the slave, and an old master that returns after a failover cuts its
divergent tail.

Own cluster: masters are SIGKILLed, slaves stopped and old masters returned after a failover."""

from __future__ import annotations

import pathlib
from collections.abc import Iterator

import pytest

import ha_testing as ht
from ariane.common import errors

pytestmark = pytest.mark.slow

OK = int(errors.Code.OK)
TOPIC = "ha-topic"


@pytest.fixture
def namesrv(tmp_path: pathlib.Path) -> Iterator[str]:
    with ht.running_namesrv(tmp_path) as endpoint:
        yield endpoint


def _small(tmp: pathlib.Path) -> tuple[str, ...]:
    return ht.small_store_config(tmp, "small-store")


@pytest.fixture
def pair(tmp_path: pathlib.Path, namesrv: str) -> Iterator[tuple[ht.Broker, ht.Broker]]:
    master, slave = ht.new_broker(tmp_path, "master"), ht.new_broker(tmp_path, "slave")
    try:
        master.start(tmp_path, namesrv, "SYNC_MASTER", broker_id=0, extra=_small(tmp_path))
        slave.start(
            tmp_path, namesrv, "SLAVE", broker_id=1, master_ha=master.ha, extra=_small(tmp_path)
        )
        ht.create_topic(master.endpoint, TOPIC)
        yield master, slave
    finally:
        master.stop()
        slave.stop()


def _caught_up(master: ht.Broker, slave: ht.Broker) -> bool:
    end = ht.stats(master.endpoint).commit_log_max_offset
    return ht.stats(slave.endpoint).commit_log_max_offset == end


def test_sync_master_acks_with_slave_and_slave_log_is_byte_identical(
    pair: tuple[ht.Broker, ht.Broker],
) -> None:
    """Proves every SYNC_MASTER ack means the slave holds the bytes, byte for byte."""
    master, slave = pair
    ht.poll(lambda: ht.send(master.endpoint, TOPIC, b"warm-up") == OK, "a slave in sync")
    for i in range(30):
        assert ht.send(master.endpoint, TOPIC, f"m-{i}".encode()) == OK
        # acked ⇒ the slave already reported the bytes (no wait needed before comparing)
        end = ht.stats(master.endpoint).commit_log_max_offset
        assert ht.stats(slave.endpoint).commit_log_max_offset >= end
    end = ht.stats(master.endpoint).commit_log_max_offset
    assert ht.commit_log_bytes(slave.store, end) == ht.commit_log_bytes(master.store, end)
    queues = list((slave.store / "consumequeue" / TOPIC).iterdir())
    assert queues, "the slave dispatched its own ConsumeQueues"
    slave_stats = ht.stats(slave.endpoint)
    assert slave_stats.role == ht.SLAVE_ROLE
    assert slave_stats.epoch == 1


def _stored(endpoint: str) -> tuple[int, int]:
    """The CommitLog max offset and the topic's message count (queue max offsets) on a broker."""
    ends = sum(ht.queue_end(endpoint, TOPIC, queue_id) for queue_id in range(2))
    return ht.stats(endpoint).commit_log_max_offset, ends


def test_sync_master_without_slave_refuses_without_storing_then_acks_again(
    tmp_path: pathlib.Path, namesrv: str, pair: tuple[ht.Broker, ht.Broker]
) -> None:
    """Proves a SYNC_MASTER whose slave was SIGKILLed answers HA_NOT_AVAILABLE to single and
    batch sends without storing a byte (so a client's retries make no copies), and acks again
    once the slave is back in sync."""
    master, slave = pair
    ht.poll(lambda: ht.send(master.endpoint, TOPIC, b"warm-up") == OK, "a slave in sync")
    slave.kill()
    ha_not_available = int(errors.Code.HA_NOT_AVAILABLE)
    ht.poll(
        lambda: ht.send(master.endpoint, TOPIC, b"alone") == ha_not_available,
        "HA_NOT_AVAILABLE",
    )
    before = _stored(master.endpoint)
    for i in range(5):
        assert ht.send(master.endpoint, TOPIC, f"refused-{i}".encode()) == ha_not_available
    batch = [f"batch-{i}".encode() for i in range(4)]
    assert ht.send_batch(master.endpoint, TOPIC, batch) == [ha_not_available] * 4
    assert _stored(master.endpoint) == before, "a refused send was stored"
    assert b"refused-" not in ht.commit_log_bytes(master.store, 1 << 20)
    slave.start(
        tmp_path, namesrv, "SLAVE", broker_id=1, master_ha=master.ha, extra=_small(tmp_path)
    )
    ht.poll(lambda: ht.send(master.endpoint, TOPIC, b"back") == OK, "acks with the slave back")
    ht.poll(lambda: _caught_up(master, slave), "the slave caught up")
    assert ht.send_batch(master.endpoint, TOPIC, batch) == [OK] * 4
    offset, messages = _stored(master.endpoint)
    assert offset > before[0] and messages == before[1] + 1 + 4


def test_sigkill_of_master_after_acks_loses_nothing_on_slave(
    pair: tuple[ht.Broker, ht.Broker],
) -> None:
    """Proves messages a SYNC_MASTER acknowledged survive a SIGKILL of the master on the slave."""
    master, slave = pair
    ht.poll(lambda: ht.send(master.endpoint, TOPIC, b"warm-up") == OK, "a slave in sync")
    for i in range(20):
        assert ht.send(master.endpoint, TOPIC, f"k-{i}".encode()) == OK
    acked_end = ht.stats(master.endpoint).commit_log_max_offset
    master.kill()
    assert ht.stats(slave.endpoint).commit_log_max_offset >= acked_end
    assert ht.commit_log_bytes(slave.store, acked_end) == ht.commit_log_bytes(
        master.store, acked_end
    )


def test_old_master_returning_after_failover_truncates_its_divergent_tail(
    tmp_path: pathlib.Path, namesrv: str
) -> None:
    """Proves an old master that wrote a tail no slave had, then came back as a slave of the
    promoted one, cuts that tail at the epoch boundary and serves the new master's bytes."""
    old, new = ht.new_broker(tmp_path, "old"), ht.new_broker(tmp_path, "new")
    try:
        old.start(tmp_path, namesrv, "ASYNC_MASTER", broker_id=0)
        new.start(tmp_path, namesrv, "SLAVE", broker_id=1, master_ha=old.ha)
        ht.create_topic(old.endpoint, TOPIC)
        for i in range(10):
            assert ht.send(old.endpoint, TOPIC, f"a-{i}".encode()) == OK
        ht.poll(lambda: _caught_up(old, new), "the slave caught up")
        agreed_end = ht.stats(new.endpoint).commit_log_max_offset
        new.kill()
        for i in range(10):  # an ASYNC_MASTER acks alone: this tail exists only on "old"
            assert ht.send(old.endpoint, TOPIC, f"divergent-{i}".encode()) == OK
        divergent_end = ht.stats(old.endpoint).commit_log_max_offset
        assert divergent_end > agreed_end
        old.kill()
        new.start(tmp_path, namesrv, "SLAVE", broker_id=1, master_ha=old.ha)
        ht.change_role(new.endpoint, "ASYNC_MASTER", epoch=2, broker_id=0)
        assert ht.stats(new.endpoint).epoch == 2
        ht.create_topic(new.endpoint, TOPIC)
        for i in range(3):
            assert ht.send(new.endpoint, TOPIC, f"c-{i}".encode()) == OK
        old.start(tmp_path, namesrv, "SLAVE", broker_id=1, master_ha=new.ha)
        ht.poll(lambda: _caught_up(new, old), "the old master caught up as a slave")
        end = ht.stats(new.endpoint).commit_log_max_offset
        assert ht.commit_log_bytes(old.store, end) == ht.commit_log_bytes(new.store, end)
        assert b"divergent-" not in ht.commit_log_bytes(old.store, end)
        assert ht.stats(old.endpoint).epoch == 2
    finally:
        old.stop()
        new.stop()
