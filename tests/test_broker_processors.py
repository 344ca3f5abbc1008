"""The send, consume and admin processors, driven in-process over a real store and a manual
clock (no sockets, no gRPC server, no waiting)."""

from __future__ import annotations

import asyncio
import pathlib
import zlib
from collections.abc import Iterator

import pytest

import broker_harness
from ariane.broker.grpc import admin_service
from ariane.broker.processors import admin
from ariane.broker.tables import subscriptions
from ariane.common import errors, ids, message, topics
from ariane.grpcwire import pb
from broker_harness import incoming

T = ids.TopicName("orders")


@pytest.fixture
def harness(tmp_path: pathlib.Path) -> Iterator[broker_harness.BrokerHarness]:
    broker = broker_harness.BrokerHarness(tmp_path)
    broker.create_topic(T, queues=4)
    yield broker
    broker.close()


def test_send_is_all_or_nothing(harness: broker_harness.BrokerHarness) -> None:
    """A request whose second message is invalid stores neither message."""
    batch = [incoming(T, b"ok"), incoming(T, b"")]  # an empty body is refused
    with pytest.raises(errors.ArianeError, match="message 2 of 2: "):
        asyncio.run(harness.processors.sender.send(batch, born_ip="10.1.2.3"))
    store = harness.runtime.store
    assert [store.max_queue_offset(T, ids.QueueId(q)) for q in range(4)] == [0, 0, 0, 0]


def test_normal_messages_go_round_robin_and_fifo_groups_hash(
    harness: broker_harness.BrokerHarness,
) -> None:
    """Four normal messages land on four different queues; a FIFO group always lands on
    ``crc32(group) % write queues``."""
    harness.create_topic("fifo-t", queues=4, kind=message.MessageType.FIFO)
    sender = harness.processors.sender
    asyncio.run(sender.send([incoming(T, bytes([i])) for i in range(4)], born_ip="10.1.2.3"))
    store = harness.runtime.store
    assert [store.max_queue_offset(T, ids.QueueId(q)) for q in range(4)] == [1, 1, 1, 1]
    fifo = [incoming("fifo-t", bytes([i]), group="g-42") for i in range(3)]
    asyncio.run(sender.send(fifo, born_ip="10.1.2.3"))
    expected = zlib.crc32(b"g-42") % 4
    counts = [store.max_queue_offset(ids.TopicName("fifo-t"), ids.QueueId(q)) for q in range(4)]
    assert counts == [3 if q == expected else 0 for q in range(4)]


def test_ack_ends_a_delivery_and_expiry_redelivers(harness: broker_harness.BrokerHarness) -> None:
    """An acked message never comes back; an un-acked one comes back as attempt 2 once the
    clock passes its invisible time (10 s advanced, not waited)."""
    consumer = harness.processors.consumer
    asyncio.run(harness.processors.sender.send([incoming(T, b"a")], born_ip="10.1.2.3"))
    asyncio.run(harness.processors.sender.send([incoming(T, b"b")], born_ip="10.1.2.3"))
    first = asyncio.run(consumer.receive(harness.receive_request("g", T)))
    assert sorted(r.stored.body for r in first) == [b"a", b"b"]
    acked = next(r for r in first if r.stored.body == b"a")
    consumer.ack(ids.GroupName("g"), T, acked.delivery.receipt_handle)
    assert asyncio.run(consumer.receive(harness.receive_request("g", T))) == []
    harness.clock.advance_ms(10_001)
    again = asyncio.run(consumer.receive(harness.receive_request("g", T)))
    assert [(r.stored.body, r.delivery.attempt) for r in again] == [(b"b", 2)]
    with pytest.raises(errors.InvalidReceiptHandleError):
        consumer.ack(ids.GroupName("g"), T, acked.delivery.receipt_handle)


def test_change_invisible_extends_the_deadline_and_stales_the_old_handle(
    harness: broker_harness.BrokerHarness,
) -> None:
    """After change-invisible to 60 s the message stays hidden past its first 10 s, and only the
    new handle acks it."""
    consumer = harness.processors.consumer
    asyncio.run(harness.processors.sender.send([incoming(T, b"a")], born_ip="10.1.2.3"))
    (got,) = asyncio.run(consumer.receive(harness.receive_request("g", T)))
    group = ids.GroupName("g")
    new_handle = consumer.change_invisible(group, T, got.delivery.receipt_handle, 60_000)
    harness.clock.advance_ms(30_000)
    assert asyncio.run(consumer.receive(harness.receive_request("g", T))) == []
    with pytest.raises(errors.InvalidReceiptHandleError):
        consumer.ack(group, T, got.delivery.receipt_handle)
    consumer.ack(group, T, new_handle)
    harness.clock.advance_ms(60_000)
    assert asyncio.run(consumer.receive(harness.receive_request("g", T))) == []


def test_a_message_past_its_max_attempts_goes_to_the_dlq(
    harness: broker_harness.BrokerHarness,
) -> None:
    """With max_delivery_attempts 2, the third expiry sends the message to %DLQ%g instead of
    delivering it again."""
    harness.runtime.groups.create_or_update(
        subscriptions.SubscriptionGroupConfig(ids.GroupName("g"), max_delivery_attempts=2)
    )
    consumer = harness.processors.consumer
    asyncio.run(harness.processors.sender.send([incoming(T, b"poison")], born_ip="10.1.2.3"))
    attempts = []
    for _ in range(3):
        got = asyncio.run(consumer.receive(harness.receive_request("g", T)))
        attempts += [r.delivery.attempt for r in got]
        harness.clock.advance_ms(10_001)
    assert attempts == [1, 2]
    dlq = ids.TopicName(topics.dlq_topic(ids.GroupName("g")))
    assert harness.runtime.store.max_queue_offset(dlq, ids.QueueId(0)) == 1
    assert harness.runtime.counters.sent_to_dlq == 1


def test_admin_lag_reset_and_delete(harness: broker_harness.BrokerHarness) -> None:
    """Lag counts unconsumed messages per queue, a reset to LATEST clears it, and deleting the
    topic drops the group's offsets on it."""
    admin_p = harness.processors.admin
    asyncio.run(
        harness.processors.sender.send(
            [incoming(T, bytes([i])) for i in range(8)], born_ip="10.1.2.3"
        )
    )
    harness.runtime.groups.require("g")
    lag = admin_p.consumer_lag("g", T)
    assert [(q.queue_id, q.lag) for q in lag] == [(0, 2), (1, 2), (2, 2), (3, 2)]
    topic, offsets = admin_p.reset_offset("g", T, admin.ResetTarget.LATEST)
    assert topic == T and offsets == {ids.QueueId(q): ids.QueueOffset(2) for q in range(4)}
    assert sum(q.lag for q in admin_p.consumer_lag("g", T)) == 0
    assert admin_p.delete_topic(T) == T
    assert harness.runtime.offsets.offsets_of(ids.GroupName("g"), T) == {}
    with pytest.raises(errors.TopicNotFoundError):
        admin_p.consumer_lag("g", T)


def test_admin_adapter_runs_in_process_with_a_fake_context(
    harness: broker_harness.BrokerHarness,
) -> None:
    """The gRPC AdminService decodes, calls the processor and encodes without a server:
    CreateTopic with zero queue counts takes the broker's default of 8."""
    service = admin_service.AdminService(harness.runtime, harness.processors.admin)
    context = broker_harness.FakeCallContext()
    request = pb.admin.CreateTopicRequest(topic=pb.admin.Topic(name="fresh"))
    answer = asyncio.run(service.create_topic(request, context))  # type: ignore[arg-type]
    assert answer.status.code == errors.Code.OK.value
    assert (answer.topic.read_queue_nums, answer.topic.write_queue_nums) == (8, 8)
    assert "fresh" in harness.runtime.topics
