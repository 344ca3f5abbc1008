"""POP state across a failover, with real ``ariane namesrv`` and ``ariane broker`` processes
(issue 25): a SYNC_MASTER with one SLAVE delivers messages to a simple consumer, the master is
SIGKILLed, the slave is promoted with ChangeRole, and the promoted slave goes on from the POP
state the old master had (``broker.pop.replica``): delivery attempts keep counting toward the
DLQ, acked messages stay acked, and a receipt handle the old master issued acks on the new one.

The brokers run with 64 KiB CommitLog segments, a 0.2 s revive/poll slice and a 0.2 s metadata
sync; invisible durations are cut short with ChangeInvisibleDuration (a receive takes 10 s at
least), so the module takes well under a minute.

Own cluster: the master is SIGKILLed and its slave promoted.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import pathlib
import time
from collections.abc import Iterator

import grpc
import pytest

import ha_testing as ht
from ariane import client
from ariane.common import errors
from ariane.grpcwire import codes, messages, pb, rpc

pytestmark = pytest.mark.slow

OK = int(errors.Code.OK)
TOPIC = "ha-pop-topic"
WARM_UP = "ha-pop-warm-up"
GROUP = "ha-pop-group"
ATTEMPTS_MAX = 3
INVISIBLE_S = 10.0
EXTRA_TOML = """
[receive]
poll_slice_ms = 200
[slave_sync]
interval_ms = 200
[ha]
# The promoted slave is left alone: it must take the POP journal and retry writes.
min_in_sync_replicas = 1
"""
FAST = client.ConsumerSettings(long_polling_timeout_s=5.0)


@pytest.fixture
def namesrv(tmp_path: pathlib.Path) -> Iterator[str]:
    with ht.running_namesrv(tmp_path) as endpoint:
        yield endpoint


@pytest.fixture
def pair(tmp_path: pathlib.Path, namesrv: str) -> Iterator[tuple[ht.Broker, ht.Broker]]:
    """A SYNC_MASTER and its SLAVE with a one-queue topic and a group of 3 attempts, both
    synced to the slave."""
    master, slave = ht.new_broker(tmp_path, "master"), ht.new_broker(tmp_path, "slave")
    extra = ht.small_store_config(tmp_path, "pop-broker", EXTRA_TOML)
    try:
        master.start(tmp_path, namesrv, "SYNC_MASTER", broker_id=0, extra=extra)
        slave.start(tmp_path, namesrv, "SLAVE", broker_id=1, master_ha=master.ha, extra=extra)
        asyncio.run(_setup(namesrv))
        ht.poll(lambda: GROUP in _groups(slave.endpoint), "the group synced to the slave")
        ht.poll(lambda: ht.send(master.endpoint, WARM_UP, b"warm-up") == OK, "a slave in sync")
        yield master, slave
    finally:
        master.stop()
        slave.stop()


async def _setup(namesrv: str) -> None:
    async with client.AdminClient(namesrv) as admin:
        deadline = time.monotonic() + ht.DEADLINE_S
        while not await _has_master(admin):
            assert time.monotonic() < deadline, "no master registered"
            await asyncio.sleep(0.05)
        await admin.create_topic(TOPIC, write_queue_nums=1)
        await admin.create_topic(WARM_UP, write_queue_nums=1)
        await admin.create_group(GROUP, max_delivery_attempts=ATTEMPTS_MAX)
        while not await _routed(admin):
            assert time.monotonic() < deadline, "the topic is not routed"
            await asyncio.sleep(0.05)


async def _has_master(admin: client.AdminClient) -> bool:
    with contextlib.suppress(errors.NotFoundError):
        return bool(await admin.masters())
    return False


async def _routed(admin: client.AdminClient) -> bool:
    with contextlib.suppress(errors.TopicNotFoundError):
        return bool(await admin.topic_masters(TOPIC))
    return False


def _groups(endpoint: str) -> set[str]:
    request = pb.admin.ListSubscriptionGroupsRequest()
    answer = asyncio.run(
        ht._admin(
            endpoint, "ListSubscriptionGroups", request, pb.admin.ListSubscriptionGroupsResponse
        )
    )
    return {g.name for g in answer.groups}


def _send(namesrv: str, bodies: list[bytes]) -> list[str]:
    async def send() -> list[str]:
        async with client.Producer(namesrv) as producer:
            return [(await producer.send(TOPIC, body)).message_id for body in bodies]

    return asyncio.run(send())


def _receive(namesrv: str, count: int = 1) -> list[client.ReceivedMessage]:
    """Receive (never ack) until ``count`` messages came, through the routed master; fails
    after the deadline. Refusals while the route moves to a promoted slave are retried.
    ``count`` 0: one receive (a long poll of 5 s), whatever it brings."""

    async def receive() -> list[client.ReceivedMessage]:
        got: list[client.ReceivedMessage] = []
        deadline = time.monotonic() + ht.DEADLINE_S
        async with client.SimpleConsumer(namesrv, GROUP, TOPIC, settings=FAST) as consumer:
            while len(got) < max(count, 1):
                assert time.monotonic() < deadline, f"{len(got)} of {count} messages came"
                with contextlib.suppress(errors.ArianeError):
                    got += await consumer.receive(max(count - len(got), 1), INVISIBLE_S)
                if count == 0:
                    break
        return got

    return asyncio.run(receive())


def _change_invisible(received: client.ReceivedMessage, invisible_ms: int) -> None:
    """ChangeInvisibleDuration of a simple consumer (the message stays in place, due soon)."""
    request = pb.v2_service.ChangeInvisibleDurationRequest(
        group=pb.v2.Resource(name=GROUP),
        topic=pb.v2.Resource(name=TOPIC),
        receipt_handle=received.receipt_handle,
        invisible_duration=messages.duration(invisible_ms),
        message_id=received.message_id,
    )

    async def call() -> None:
        async with grpc.aio.insecure_channel(received.endpoint) as channel:
            answer = await rpc.unary_call(
                channel,
                pb.MESSAGING_SERVICE,
                "ChangeInvisibleDuration",
                request,
                pb.v2_service.ChangeInvisibleDurationResponse,
                timeout_s=10,
                metadata=ht.CLIENT,
            )
        codes.raise_for_status(answer.status)

    asyncio.run(call())


def _ack(namesrv: str, received: client.ReceivedMessage, endpoint: str) -> None:
    """Ack ``received`` at ``endpoint`` (raises the refusal)."""

    async def ack() -> None:
        async with client.SimpleConsumer(namesrv, GROUP, TOPIC, settings=FAST) as consumer:
            await consumer.ack([dataclasses.replace(received, endpoint=endpoint)])

    asyncio.run(ack())


def _failover(master: ht.Broker, slave: ht.Broker) -> None:
    """SIGKILL the master, promote the slave to SYNC_MASTER at epoch 2."""
    master.kill()
    ht.change_role(slave.endpoint, "SYNC_MASTER", epoch=2, broker_id=0)
    adopted = {
        t for t in ht.topics(slave.endpoint, include_system=True) if t.startswith("rmq_sys_")
    }
    assert not adopted, "a promotion adopted the store's own system topics as orphans"


def _dead_letter(namesrv: str, message_id: str) -> bool:
    async def query() -> bool:
        async with client.AdminClient(namesrv) as admin:
            with contextlib.suppress(errors.NotFoundError):
                return bool(await admin.query_message_by_id(message_id, topic=f"%DLQ%{GROUP}"))
        return False

    return asyncio.run(query())


def test_delivery_attempts_continue_on_the_promoted_slave(
    namesrv: str, pair: tuple[ht.Broker, ht.Broker]
) -> None:
    """Proves a message received twice from a SYNC_MASTER (attempts 1 and 2, never acked)
    comes back at attempt 3 from the slave promoted after the master's SIGKILL, and goes to
    ``%DLQ%<group>`` after it, at the group's max of 3 attempts."""
    master, slave = pair
    (message_id,) = _send(namesrv, [b"poison"])
    (first,) = _receive(namesrv)
    assert (first.message_id, first.delivery_attempt) == (message_id, 1)
    _change_invisible(first, 100)
    (second,) = _receive(namesrv)
    assert (second.message_id, second.delivery_attempt) == (message_id, 2)
    _change_invisible(second, 100)

    _failover(master, slave)
    (third,) = _receive(namesrv)
    assert third.endpoint == slave.endpoint
    assert (third.message_id, third.delivery_attempt) == (message_id, 3)
    _change_invisible(third, 100)
    ht.poll(lambda: _dead_letter(namesrv, message_id), "the message in the DLQ")


def test_acks_and_old_receipts_hold_on_the_promoted_slave(
    namesrv: str, pair: tuple[ht.Broker, ht.Broker]
) -> None:
    """Proves that after a SIGKILL of the SYNC_MASTER and the promotion of its slave a message
    acked on the old master is not delivered again, and that a receipt handle the old master
    issued acks on the new master (OK) and its message is not delivered again either."""
    master, slave = pair
    sent = _send(namesrv, [b"kept-in-flight", b"acked"])
    got: dict[str, client.ReceivedMessage] = {m.message_id: m for m in _receive(namesrv, 2)}
    received_at = time.monotonic()
    assert set(got) == set(sent)
    in_flight, acked = got[sent[0]], got[sent[1]]
    _ack(namesrv, acked, acked.endpoint)  # the later offset: the committed offset stays below

    _failover(master, slave)
    refused = None
    try:
        _ack(namesrv, in_flight, slave.endpoint)  # the old master's receipt, on the new master
    except errors.ArianeError as exc:
        refused = exc

    (canary,) = _send(namesrv, [b"canary"])
    (first,) = _receive(namesrv)
    _ack(namesrv, first, first.endpoint)
    seen = [first.message_id]
    while time.monotonic() < received_at + INVISIBLE_S + 1.0:  # past both invisible times
        seen += [m.message_id for m in _receive(namesrv, 0)]
    assert (refused, seen) == (None, [canary])
