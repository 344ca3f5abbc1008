"""``ariane admin broker promote`` and the slave's metadata sync with real processes: a planned
switchover makes the slave a SYNC_MASTER at epoch 2 that serves the master's topic, group and
consumer offsets without re-creating them, and demotes the old master into its slave; a failover
(master SIGKILLed) promotes the slave, and the old master rejoins as its slave.

Own cluster: brokers are switched over, failed over (SIGKILL) and rejoined."""

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
from ariane import client
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


OLD_TOPIC = "old-topic"
YOUNG_TOPIC = "young-topic"


async def _routed_bodies(namesrv: str, topic: str) -> list[bytes] | str:
    """Every message of ``topic`` read through its name-server route, by offset from 0, sorted;
    or the error the route lookup or a pull answered."""
    async with client.PullConsumer(namesrv) as consumer:
        bodies: list[bytes] = []
        try:
            for queue in await consumer.queues_for_topic(topic):
                pulled = await consumer.fetch(queue, 0, max_messages=64, long_polling_timeout_s=0)
                bodies += [m.body for m in pulled.messages]
        except errors.ArianeError as exc:
            return repr(exc)
        return sorted(bodies)


def test_failover_keeps_a_topic_younger_than_one_metadata_sync_round(
    tmp_path: pathlib.Path, namesrv: str
) -> None:
    """Proves a topic created on the master after the slave's last metadata sync, whose messages
    were replicated, is listed, routable and readable on the slave promoted after the master's
    SIGKILL (a promoted slave never holds messages of a topic whose config it lacks)."""
    master, slave = ht.new_broker(tmp_path, "master"), ht.new_broker(tmp_path, "slave")
    no_round = ht.small_store_config(tmp_path, "slow-sync", "[slave_sync]\ninterval_ms = 3600000\n")
    try:
        master.start(tmp_path, namesrv, "SYNC_MASTER", broker_id=0, extra=no_round)
        ht.create_topic(master.endpoint, OLD_TOPIC)
        ht.poll(  # the slave's first round must find the master through the name server
            lambda: asyncio.run(_routed_bodies(namesrv, OLD_TOPIC)) == [],
            "the master registered",
        )
        slave.start(tmp_path, namesrv, "SLAVE", broker_id=1, master_ha=master.ha, extra=no_round)
        # The slave syncs once at start, then not for an hour: the young topic comes after it.
        ht.poll(lambda: OLD_TOPIC in _topics(slave.endpoint), "the slave's one metadata round")
        ht.create_topic(master.endpoint, YOUNG_TOPIC)
        ht.poll(lambda: ht.send(master.endpoint, YOUNG_TOPIC, b"young-0") == OK, "a slave in sync")
        sent = [b"young-0"]
        for i in range(1, 6):  # a SYNC_MASTER's OK: the slave holds the bytes
            assert ht.send(master.endpoint, YOUNG_TOPIC, f"young-{i}".encode()) == OK
            sent.append(f"young-{i}".encode())
        assert YOUNG_TOPIC not in _topics(slave.endpoint), "a metadata sync round copied it"
        master.kill()

        done = _promote(namesrv, 1)
        assert done.returncode == 0, done.stderr

        listed = _admin(
            slave.endpoint, "ListTopics", pb.admin.ListTopicsRequest(), pb.admin.ListTopicsResponse
        )
        young = [t for t in listed.topics if t.name == YOUNG_TOPIC]
        assert young, "the promoted slave has no config for the topic it holds messages of"
        assert young[0].message_type == pb.topic.TopicMessageType.TOPIC_MESSAGE_TYPE_NORMAL
        assert 1 <= young[0].write_queue_nums <= 2  # the queues that hold its messages
        ht.poll(
            lambda: asyncio.run(_routed_bodies(namesrv, YOUNG_TOPIC)) == sorted(sent),
            "the young topic's messages read through its route",
        )
    finally:
        master.stop()
        slave.stop()


def test_failover_does_not_bring_back_a_topic_deleted_on_the_master(
    namesrv: str, pair: tuple[ht.Broker, ht.Broker]
) -> None:
    """Proves a topic the master deleted (its deletion synced to the slave, whose ConsumeQueues
    still hold its messages) stays deleted on the slave promoted after the master's SIGKILL."""
    master, slave = pair
    ht.create_topic(master.endpoint, "gone-topic")
    for i in range(3):
        assert ht.send(master.endpoint, "gone-topic", f"gone-{i}".encode()) == OK
    ht.poll(lambda: "gone-topic" in _topics(slave.endpoint), "the topic synced to the slave")
    request = pb.admin.DeleteTopicRequest(name="gone-topic")
    _admin(master.endpoint, "DeleteTopic", request, pb.admin.DeleteTopicResponse)
    ht.poll(lambda: "gone-topic" not in _topics(slave.endpoint), "the deletion synced")
    assert (slave.store / "consumequeue" / "gone-topic").is_dir()
    master.kill()

    done = _promote(namesrv, 1)
    assert done.returncode == 0, done.stderr

    assert _topics(slave.endpoint) == {TOPIC}
