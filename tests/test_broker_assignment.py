"""QueryAssignment shares a FIFO group's queues among its live members and re-balances when one
joins, terminates, loses its Telemetry stream or falls silent; concurrent groups keep POP."""

from __future__ import annotations

import asyncio
import dataclasses
import pathlib
import zlib
from collections.abc import AsyncIterator, Iterator

import pytest

import broker_harness
from ariane.broker.grpc import messaging, routes
from ariane.broker.tables import clients, consumers, queue_locks, subscriptions
from ariane.common import allocate, ids, message, route
from ariane.grpcwire import channel_pool, convert, pb

FIFO_TOPIC = "fifo-orders"
GROUP = "fifo-readers"


class Broker:
    """A MessagingService over a harness runtime, with its client tables exposed."""

    def __init__(self, root: pathlib.Path) -> None:
        self.harness = broker_harness.BrokerHarness(root)
        runtime = self.harness.runtime
        runtime.advertise("127.0.0.1:18081")
        self.sessions = clients.ClientRegistry(time=self.harness.clock, expired_ms=120_000)
        self.locks = queue_locks.RebalanceLockManager(time=self.harness.clock)
        self.registry = consumers.ConsumerRegistry(self.sessions, locks=self.locks)
        lookup = routes.RouteLookup(runtime, channel_pool.ChannelPool(channels_max=1))
        lookup.topic_route = _local(lookup)  # type: ignore[method-assign]
        processors = self.harness.processors
        self.service = messaging.MessagingService(
            runtime,
            processors.sender,
            processors.consumer,
            lookup,
            self.sessions,
            processors.puller,
            consumer_registry=self.registry,
        )
        self.harness.create_topic(FIFO_TOPIC, queues=8, kind=message.MessageType.FIFO)
        runtime.groups.create_or_update(
            subscriptions.SubscriptionGroupConfig(group=ids.GroupName(GROUP), consume_orderly=True)
        )

    def assigned(self, client_id: str, topic: str = FIFO_TOPIC, group: str = GROUP) -> list[int]:
        """The queue ids QueryAssignment gives ``client_id``."""
        request = pb.v2_service.QueryAssignmentRequest(
            topic=convert.resource(topic), group=convert.resource(group)
        )
        answer = asyncio.run(
            self.service.query_assignment(request, broker_harness.FakeCallContext(client_id))
        )
        assert answer.status.code == 20000, answer.status
        return [a.message_queue.id for a in answer.assignments]

    def terminate(self, client_id: str) -> int:
        request = pb.v2_service.NotifyClientTerminationRequest(group=convert.resource(GROUP))
        answer = asyncio.run(
            self.service.notify_client_termination(
                request, broker_harness.FakeCallContext(client_id)
            )
        )
        return answer.status.code


def _local(lookup: routes.RouteLookup):  # type: ignore[no-untyped-def]
    async def topic_route(topic: ids.TopicName) -> pb.registry.GetTopicRouteResponse:
        return lookup.local_route(topic)

    return topic_route


@pytest.fixture
def broker(tmp_path: pathlib.Path) -> Iterator[Broker]:
    made = Broker(tmp_path)
    yield made
    made.harness.close()


def _queue(queue_id: int) -> route.MessageQueue:
    return route.MessageQueue(
        ids.TopicName(FIFO_TOPIC), ids.BrokerName("broker-a"), ids.QueueId(queue_id)
    )


def test_two_then_three_members_split_a_fifo_groups_queues_averagely(broker: Broker) -> None:
    """Alone a member gets all 8 queues; with two, 4 and 4; with three, 3, 3 and 2, as
    AllocateMessageQueueAveragely over the sorted client ids."""
    assert broker.assigned("c-1") == list(range(8))
    assert broker.assigned("c-2") == [4, 5, 6, 7]
    assert broker.assigned("c-1") == [0, 1, 2, 3]
    assert broker.assigned("c-3") == [6, 7]
    assert [broker.assigned(c) for c in ("c-1", "c-2")] == [[0, 1, 2], [3, 4, 5]]


def test_a_terminated_member_gives_its_queues_and_locks_to_the_others(broker: Broker) -> None:
    """NotifyClientTermination answers OK, drops the client from the group (the others' next
    query covers its queues) and releases its queue locks."""
    for client_id in ("c-1", "c-2", "c-3"):
        broker.assigned(client_id)
    group = ids.GroupName(GROUP)
    assert broker.locks.lock_batch(group, [_queue(3)], ids.ClientId("c-2")) == {_queue(3)}
    assert broker.terminate("c-2") == 20000
    assert broker.locks.holder(group, _queue(3)) is None
    assert broker.registry.client_ids(group) == ["c-1", "c-3"]
    assert broker.assigned("c-1") + broker.assigned("c-3") == list(range(8))
    assert broker.terminate("never-seen") == 20000


def test_a_silent_member_expires_after_120_s_and_its_queues_move(broker: Broker) -> None:
    """A member that stops calling is dropped by the expiry scan once more than 120 s passed;
    until then its share stays its own."""
    broker.assigned("c-1")
    broker.assigned("c-2")
    broker.harness.clock.advance_ms(120_000)
    assert broker.assigned("c-1") == [0, 1, 2, 3]
    assert broker.sessions.expire() == []  # c-1 just called; c-2 is silent for exactly 120 s
    broker.harness.clock.advance_ms(1)
    assert broker.sessions.expire() == ["c-2"]
    assert broker.assigned("c-1") == list(range(8))


def test_the_end_of_a_members_telemetry_stream_drops_it(broker: Broker) -> None:
    """A push consumer's settings report makes it a member with its subscription; when its
    Telemetry stream ends (the channel closed) it leaves the group."""

    async def scenario() -> tuple[list[ids.ClientId], list[ids.ClientId]]:
        closed = asyncio.Event()

        async def commands() -> AsyncIterator[pb.v2_service.TelemetryCommand]:
            yield pb.v2_service.TelemetryCommand(
                settings=pb.v2.Settings(
                    client_type=pb.v2.ClientType.PUSH_CONSUMER,
                    subscription=pb.v2.Subscription(
                        group=convert.resource(GROUP),
                        subscriptions=[
                            pb.v2.SubscriptionEntry(
                                topic=convert.resource(FIFO_TOPIC),
                                expression=pb.v2.FilterExpression(
                                    type=pb.v2.FilterType.TAG, expression="a||b"
                                ),
                            )
                        ],
                    ),
                )
            )
            await closed.wait()

        stream = broker.service.telemetry(commands(), broker_harness.FakeCallContext("c-9"))
        reply = await anext(stream)
        assert reply.status.code == 20000
        during = broker.registry.client_ids(ids.GroupName(GROUP), topic=FIFO_TOPIC)
        member = broker.registry.member(ids.GroupName(GROUP), ids.ClientId("c-9"))
        assert member is not None
        assert member.subscriptions[0].expression == "a||b"
        closed.set()
        async for _ in stream:
            pass
        return during, broker.registry.client_ids(ids.GroupName(GROUP))

    during, after = asyncio.run(scenario())
    assert during == ["c-9"]
    assert after == []


def test_a_groups_strategy_picks_the_allocation(broker: Broker) -> None:
    """A group set to AVG_BY_CIRCLE deals its queues round robin instead of in blocks."""
    broker.harness.runtime.groups.create_or_update(
        subscriptions.SubscriptionGroupConfig(
            group=ids.GroupName(GROUP),
            consume_orderly=True,
            allocate_strategy=allocate.AllocateStrategy.AVG_BY_CIRCLE,
        )
    )
    broker.assigned("c-1")
    assert broker.assigned("c-2") == [1, 3, 5, 7]
    assert broker.assigned("c-1") == [0, 2, 4, 6]


def test_a_concurrent_group_still_gets_every_broker_once(broker: Broker) -> None:
    """Non-FIFO groups consume by POP: each member gets one assignment per broker, queue -1."""
    broker.harness.create_topic("plain", queues=4)
    for client_id in ("c-1", "c-2"):
        assert broker.assigned(client_id, topic="plain", group="poppers") == [-1]


def test_an_assigned_fifo_receive_reads_only_its_queue(broker: Broker) -> None:
    """A push consumer's receive of an assigned queue reads that queue only, so members do not
    drain each other's queues; an unassigned receive (a SimpleConsumer's) still looks at all."""
    group_of_queue_3 = next(f"g{k}" for k in range(100) if zlib.crc32(f"g{k}".encode()) % 8 == 3)
    fifo = [broker_harness.incoming(FIFO_TOPIC, b"m", group=group_of_queue_3)]
    asyncio.run(broker.harness.processors.sender.send(fifo, born_ip="10.1.2.3"))
    consumer = broker.harness.processors.consumer

    def receive(queue_id: int, *, assigned: bool) -> list[int]:
        request = dataclasses.replace(
            broker.harness.receive_request(GROUP, FIFO_TOPIC),
            queue_id=queue_id,
            assigned_queue=assigned,
        )
        return [r.stored.queue_id for r in asyncio.run(consumer.receive(request))]

    assert receive(0, assigned=True) == []
    assert receive(3, assigned=True) == [3]
    broker.harness.clock.advance_ms(60_000)  # invisible time over: redelivered
    assert receive(0, assigned=False) == [3]


def test_the_local_route_names_the_broker_id_it_has_now(tmp_path: pathlib.Path) -> None:
    """The fallback route (no name server knows the topic) names the broker's live id: a master
    demoted to slave 1 (``replication.demote`` sets ``runtime.broker_id``) is not announced as
    id 0 any more, and promoted back it is id 0 again (it read the start-up id before)."""
    harness = broker_harness.BrokerHarness(tmp_path)
    try:
        runtime = harness.runtime
        runtime.advertise("127.0.0.1:18081")
        harness.create_topic(FIFO_TOPIC, queues=2, kind=message.MessageType.FIFO)
        lookup = routes.RouteLookup(runtime, channel_pool.ChannelPool(channels_max=1))

        def member_id() -> int:
            (group,) = lookup.local_route(ids.TopicName(FIFO_TOPIC)).broker_groups
            (member,) = group.members
            return member.broker_id

        assert member_id() == 0
        runtime.broker_id = ids.BrokerId(1)
        assert member_id() == 1
        runtime.broker_id = ids.MASTER_BROKER_ID
        assert member_id() == 0
    finally:
        harness.close()
