"""``ariane admin broker promote`` and the slave's metadata sync with real processes: a planned
switchover makes the slave a SYNC_MASTER at epoch 2 that serves the master's topic, group and
consumer offsets without re-creating them, and demotes the old master into its slave; a failover
(master SIGKILLed) promotes the slave, and the old master rejoins as its slave."""

from __future__ import annotations

import asyncio
import pathlib
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from google.protobuf.message import Message

import ha_testing as ht
from ariane.common import errors
from ariane.grpcwire import codes, pb

pytestmark = pytest.mark.slow

OK = int(errors.Code.OK)
TOPIC = "promote-topic"
GROUP = "promote-group"


@pytest.fixture
def namesrv(tmp_path: pathlib.Path) -> Iterator[str]:
    with ht.running_namesrv(tmp_path) as endpoint:
        yield endpoint


def _fast_sync(tmp: pathlib.Path) -> tuple[str, ...]:
    config = tmp / "fast-sync.toml"
    config.write_text("[slave_sync]\ninterval_ms = 200\n[ha]\nlease_ms = 2000\n")  # quick failover
    return ("--config", str(config))


@pytest.fixture
def pair(tmp_path: pathlib.Path, namesrv: str) -> Iterator[tuple[ht.Broker, ht.Broker]]:
    master, slave = ht.new_broker(tmp_path, "master"), ht.new_broker(tmp_path, "slave")
    extra = _fast_sync(tmp_path)
    try:
        master.start(tmp_path, namesrv, "SYNC_MASTER", broker_id=0, extra=extra)
        slave.start(tmp_path, namesrv, "SLAVE", broker_id=1, master_ha=master.ha, extra=extra)
        ht.create_topic(master.endpoint, TOPIC)
        ht.poll(lambda: ht.send(master.endpoint, TOPIC, b"warm-up") == OK, "a slave in sync")
        yield master, slave
    finally:
        master.stop()
        slave.stop()


def _admin(endpoint: str, name: str, request: Message, answer: type[Any]) -> Any:
    response = asyncio.run(ht._admin(endpoint, name, request, answer))
    codes.raise_for_status(response.status)
    return response


def _consumer_offsets(endpoint: str) -> dict[int, int]:
    lag = _admin(
        endpoint,
        "GetConsumerLag",
        pb.admin.GetConsumerLagRequest(group=GROUP, topic=TOPIC),
        pb.admin.GetConsumerLagResponse,
    )
    return {q.queue_id: q.consumer_offset for q in lag.queues}


def _topics(endpoint: str) -> set[str]:
    listed = _admin(
        endpoint, "ListTopics", pb.admin.ListTopicsRequest(), pb.admin.ListTopicsResponse
    )
    return {t.name for t in listed.topics}


def _synced_offsets(endpoint: str) -> dict[int, int]:
    """The group's offsets on a slave; empty until its metadata sync copied the group."""
    try:
        return _consumer_offsets(endpoint)
    except errors.ConsumerGroupNotFoundError:
        return {}


def _promote(namesrv: str, broker_id: int) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "ariane", "admin", "--endpoints", namesrv, "--json"]
    command += ["broker", "promote", "--broker-name", "ha-group", "--broker-id", str(broker_id)]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)


def test_switchover_serves_synced_metadata_and_demotes_old_master(
    tmp_path: pathlib.Path, namesrv: str, pair: tuple[ht.Broker, ht.Broker]
) -> None:
    """Proves a planned switchover keeps every acked message, the topic, the group and its
    committed offsets on the promoted slave, and turns the old master into its slave."""
    master, slave = pair
    group = pb.admin.SubscriptionGroup(name=GROUP, max_delivery_attempts=5)
    request = pb.admin.CreateSubscriptionGroupRequest(group=group)
    _admin(
        master.endpoint,
        "CreateSubscriptionGroup",
        request,
        pb.admin.CreateSubscriptionGroupResponse,
    )
    for i in range(20):
        assert ht.send(master.endpoint, TOPIC, f"before-{i}".encode()) == OK
    reset = pb.admin.ResetOffsetRequest(
        group=GROUP, topic=TOPIC, target=pb.admin.ResetTarget.RESET_TARGET_LATEST
    )
    _admin(master.endpoint, "ResetOffset", reset, pb.admin.ResetOffsetResponse)
    committed = _consumer_offsets(master.endpoint)
    assert sum(committed.values()) == 21
    ht.poll(lambda: _synced_offsets(slave.endpoint) == committed, "the slave's offset copy")
    acked_end = ht.stats(master.endpoint).commit_log_max_offset

    done = _promote(namesrv, 1)
    assert done.returncode == 0, done.stderr

    new_stats, old_stats = ht.stats(slave.endpoint), ht.stats(master.endpoint)
    assert (new_stats.role, new_stats.epoch, new_stats.broker_id) == (
        pb.admin.BrokerRole.BROKER_ROLE_SYNC_MASTER,
        2,
        0,
    )
    assert (old_stats.role, old_stats.broker_id) == (ht.SLAVE_ROLE, 1)
    assert new_stats.commit_log_max_offset >= acked_end
    assert _consumer_offsets(slave.endpoint) == committed
    # the topic was never created on the slave: it came with the metadata sync
    ht.poll(lambda: ht.send(slave.endpoint, TOPIC, b"after") == OK, "acks on the new master")
    assert ht.send(master.endpoint, TOPIC, b"refused") != OK
    ht.poll(
        lambda: (
            ht.stats(master.endpoint).commit_log_max_offset
            == ht.stats(slave.endpoint).commit_log_max_offset
        ),
        "the old master replicating from the new one",
    )


def test_failover_after_sigkill_promotes_slave_and_old_master_rejoins(
    tmp_path: pathlib.Path, namesrv: str, pair: tuple[ht.Broker, ht.Broker]
) -> None:
    """Proves a slave is promoted when its master was SIGKILLed (nobody to demote), holds the
    acked messages, and takes writes once the old master came back as its slave."""
    master, slave = pair
    for i in range(10):
        assert ht.send(master.endpoint, TOPIC, f"k-{i}".encode()) == OK
    acked_end = ht.stats(master.endpoint).commit_log_max_offset
    ht.poll(lambda: TOPIC in _topics(slave.endpoint), "the topic synced to the slave")
    master.kill()

    done = _promote(namesrv, 1)
    assert done.returncode == 0, done.stderr
    assert '"old_master_demoted": false' in done.stdout

    stats = ht.stats(slave.endpoint)
    assert (stats.epoch, stats.broker_id) == (2, 0)
    assert stats.commit_log_max_offset >= acked_end
    master.start(
        tmp_path, namesrv, "SLAVE", broker_id=1, master_ha=slave.ha, extra=_fast_sync(tmp_path)
    )
    ht.poll(lambda: ht.send(slave.endpoint, TOPIC, b"after") == OK, "acks with the old master")
    assert ht.stats(master.endpoint).epoch == 2


def test_promote_refuses_a_slave_that_is_not_the_choice(
    namesrv: str, pair: tuple[ht.Broker, ht.Broker]
) -> None:
    """Proves the command refuses an id that is not a live slave of the group (exit 1, the
    decision's reason printed) and changes nobody's role."""
    master, slave = pair
    done = _promote(namesrv, 7)
    assert done.returncode == 1
    assert "PRECONDITION_FAILED" in done.stderr
    assert ht.stats(master.endpoint).role == pb.admin.BrokerRole.BROKER_ROLE_SYNC_MASTER
    assert ht.stats(slave.endpoint).role == ht.SLAVE_ROLE
