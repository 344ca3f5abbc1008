"""Priority messages (RocketMQ 5.4, RIP-80) in-process: the PRIORITY topic type on every admin
surface and in routes, the send-side queue per priority, the receive order (highest first), a
retried message keeping its priority, and the aging rule that keeps low priorities from
starving; over a real store in a temp dir (small segments) and a manual clock."""

from __future__ import annotations

import argparse
import asyncio
import pathlib
from collections.abc import Iterator

import pytest

import broker_harness
from ariane import admin_cli
from ariane.broker import settings as broker_settings
from ariane.broker.pop import priority
from ariane.broker.processors import consume
from ariane.broker.remoting import admin_bodies
from ariane.broker.tables import subscriptions
from ariane.common import errors, ids, message
from ariane.grpcwire import convert, messages, pb
from broker_harness import incoming

T = ids.TopicName("jobs")
G = ids.GroupName("g")
P = message.Property
PRIORITY = message.MessageType.PRIORITY
LEVELS = 4
AGING_MS = broker_settings.ReceiveSettings().priority_aging_ms


@pytest.fixture
def harness(tmp_path: pathlib.Path) -> Iterator[broker_harness.BrokerHarness]:
    broker = broker_harness.BrokerHarness(tmp_path)
    broker.create_topic(T, queues=LEVELS, kind=PRIORITY)
    broker.runtime.groups.create_or_update(
        subscriptions.SubscriptionGroupConfig(
            G, retry_policy=subscriptions.GroupRetryPolicy(delays_ms=(1_000,))
        )
    )
    yield broker
    broker.close()


def _priority_message(body: bytes, level: int | None, topic: str = T) -> message.IncomingMessage:
    plain = incoming(topic, body)
    return message.IncomingMessage(
        **{f: getattr(plain, f) for f in plain.__slots__ if f not in ("message_type", "priority")},
        message_type="PRIORITY",
        priority=level,
    )


def _send(harness: broker_harness.BrokerHarness, *batch: message.IncomingMessage) -> None:
    asyncio.run(harness.processors.sender.send(list(batch), born_ip="10.1.2.3"))


def _receive(harness: broker_harness.BrokerHarness, batch_size: int = 32) -> list[consume.Received]:
    request = harness.receive_request(G, T, batch_size=batch_size)
    return asyncio.run(harness.processors.consumer.receive(request))


def _bodies(received: list[consume.Received]) -> list[bytes]:
    return [r.stored.body for r in received]


def test_the_priority_type_is_on_every_admin_surface_and_in_routes() -> None:
    """PRIORITY is a topic type of ``ariane admin topic create --message-type``, of the Remoting
    ``+message.type=PRIORITY`` attribute and of the admin/registry protos, and its route accepts
    PRIORITY messages only, while MIXED does not accept them (RocketMQ's RouteActivity)."""
    parser = argparse.ArgumentParser()
    admin_cli.add_arguments(parser)
    args = parser.parse_args(["topic", "create", "jobs", "--message-type", "PRIORITY"])
    assert args.type is PRIORITY
    attributes = "+message.type=PRIORITY"
    assert admin_bodies._message_type(attributes, message.MessageType.NORMAL) is PRIORITY
    wire = convert.topic_message_type(PRIORITY)
    assert wire == pb.topic.TopicMessageType.TOPIC_MESSAGE_TYPE_PRIORITY
    assert convert.message_type_of(wire) is PRIORITY
    assert convert.accept_message_types(PRIORITY) == [pb.v2.MessageType.PRIORITY]
    assert pb.v2.MessageType.PRIORITY not in convert.accept_message_types(message.MessageType.MIXED)


def test_a_priority_goes_to_its_level_queue_and_is_stored(
    harness: broker_harness.BrokerHarness,
) -> None:
    """Priority p lands in queue min(p, queues - 1) with ``_SYS_MSG_PRIORITY_`` stored, and a
    received message carries it back in ``system_properties.priority``."""
    _send(harness, *(_priority_message(f"p{p}".encode(), p) for p in (0, 2, 3, 9)))
    where = {}
    for queue in range(LEVELS):
        got = harness.runtime.store.get_messages(
            T, ids.QueueId(queue), ids.QueueOffset(0), max_count=10, max_bytes=1 << 20
        )
        for stored in got.messages:
            where[stored.body] = (queue, stored.properties.get(P.PRIORITY))
    assert where == {
        b"p0": (0, "0"),
        b"p2": (2, "2"),
        b"p3": (3, "3"),
        b"p9": (3, "9"),
    }
    (top,) = _receive(harness, batch_size=1)
    wire = messages.outgoing(top.stored, top.delivery)
    assert wire.system_properties.priority in (3, 9)
    assert wire.system_properties.message_type == pb.v2.MessageType.PRIORITY


def test_priority_sends_are_checked_like_rocketmq(harness: broker_harness.BrokerHarness) -> None:
    """A negative or missing priority is BAD_REQUEST; a PRIORITY message to a MIXED topic or a
    NORMAL one to a PRIORITY topic is MESSAGE_PROPERTY_CONFLICT_WITH_TYPE."""
    harness.create_topic("mixed", kind=message.MessageType.MIXED)
    with pytest.raises(errors.BadRequestError, match="negative"):
        _send(harness, _priority_message(b"x", -1))
    with pytest.raises(errors.BadRequestError, match="needs its priority"):
        _send(harness, _priority_message(b"x", None))
    with pytest.raises(errors.MessageTypeConflictError):
        _send(harness, _priority_message(b"x", 1, topic="mixed"))
    with pytest.raises(errors.MessageTypeConflictError):
        _send(harness, incoming(T, b"normal"))


def test_a_backlog_is_received_highest_priority_first(
    harness: broker_harness.BrokerHarness,
) -> None:
    """With a mixed backlog, one batch comes highest priority first (store order within a
    level), and single-message receives return the top non-empty level each time."""
    levels = [0, 3, 1, 2, 0, 3, 1, 2]
    _send(harness, *(_priority_message(f"{i}-p{p}".encode(), p) for i, p in enumerate(levels)))
    got = _bodies(_receive(harness))
    assert got == [b"1-p3", b"5-p3", b"3-p2", b"7-p2", b"2-p1", b"6-p1", b"0-p0", b"4-p0"]
    _send(harness, *(_priority_message(f"again-{p}".encode(), p) for p in (1, 3, 0, 2)))
    singles = [_bodies(_receive(harness, batch_size=1)) for _ in range(4)]
    assert singles == [[b"again-3"], [b"again-2"], [b"again-1"], [b"again-0"]]


def test_a_retried_message_keeps_its_priority(harness: broker_harness.BrokerHarness) -> None:
    """A nacked priority-2 message comes back from the retry topic after its backoff still
    carrying priority 2: after the priority-3 backlog and before priorities 1 and 0 (RocketMQ
    reads all retries from one queue, last: apache/rocketmq#10350)."""
    _send(harness, _priority_message(b"retried-p2", 2))
    (first,) = _receive(harness)
    consumer = harness.processors.consumer
    asyncio.run(consumer.nack(G, T, first.delivery.receipt_handle, 1_000))
    harness.clock.advance_ms(1_000)
    assert asyncio.run(harness.runtime.schedule.run_once()) == 1
    _send(harness, *(_priority_message(f"p{p}".encode(), p) for p in (0, 1, 3)))
    got = _receive(harness)
    assert _bodies(got) == [b"p3", b"retried-p2", b"p1", b"p0"]
    retried = got[1]
    assert retried.delivery.attempt == 2
    assert retried.stored.properties[P.PRIORITY] == "2"
    assert messages.outgoing(retried.stored, retried.delivery).system_properties.priority == 2


def test_low_priorities_age_into_a_fair_pass(harness: broker_harness.BrokerHarness) -> None:
    """Under a steady priority-3 backlog a priority-0 message is not served while the group's
    passes have skipped the lower levels for less than priority_aging_ms, and is the first
    served by the fair pass after that (starting at the lowest level)."""
    _send(harness, _priority_message(b"low", 0))
    _send(harness, *(_priority_message(f"high-{i}".encode(), 3) for i in range(20)))
    for i in range(5):
        assert _bodies(_receive(harness, batch_size=1)) == [f"high-{i}".encode()]
        harness.clock.advance_ms(AGING_MS // 5 - 1)
    harness.clock.advance_ms(5)
    assert _bodies(_receive(harness, batch_size=1)) == [b"low"]
    assert _bodies(_receive(harness, batch_size=1)) == [b"high-5"]


def test_a_backlog_drained_to_its_last_level_starts_no_fair_pass(
    harness: broker_harness.BrokerHarness,
) -> None:
    """A group that drained a backlog down to its lowest level long ago gets a new backlog
    highest first: only passes that keep skipping lower levels age them."""
    _send(harness, *(_priority_message(f"old-{p}".encode(), p) for p in (0, 3)))
    for expected in (b"old-3", b"old-0"):
        (got,) = _receive(harness, batch_size=1)
        assert got.stored.body == expected
        harness.processors.consumer.ack(G, T, got.delivery.receipt_handle)
    harness.clock.advance_ms(AGING_MS * 3)
    _send(harness, *(_priority_message(f"new-{p}".encode(), p) for p in (0, 2)))
    assert _bodies(_receive(harness, batch_size=1)) == [b"new-2"]
    assert _bodies(_receive(harness, batch_size=1)) == [b"new-0"]


def test_fair_passes_rotate_their_start_level() -> None:
    """Each fair pass starts one level higher than the last and restarts the aging clock, and
    the (group, topic) table is bounded by GROUPS_MAX."""
    order = priority.PriorityOrder(aging_ms=100)
    assert order.levels("g", "t", 3, 0) == [2, 1, 0]
    order.passed("g", "t", skipped=True, now_ms=0)
    assert order.levels("g", "t", 3, 99) == [2, 1, 0]
    assert order.levels("g", "t", 3, 100) == [0, 1, 2]
    assert order.levels("g", "t", 3, 150) == [2, 1, 0]
    order.passed("g", "t", skipped=True, now_ms=150)
    assert order.levels("g", "t", 3, 250) == [1, 2, 0]
    order.passed("g", "t", skipped=True, now_ms=250)
    order.passed("g", "t", skipped=False, now_ms=260)
    assert order.levels("g", "t", 3, 1_000) == [2, 1, 0]
    order.passed("g", "t", skipped=True, now_ms=1_000)
    assert order.levels("g", "t", 3, 1_100) == [2, 0, 1]
    for n in range(priority.GROUPS_MAX + 10):
        order.levels(f"g{n}", "t", 3, 0)
    assert len(order._state) == priority.GROUPS_MAX
    assert priority.queue_of(7, 4) == 3 and priority.queue_of(0, 4) == 0
