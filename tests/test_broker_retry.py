"""The retry processor and the consume path over it: retry copies in ``%RETRY%<group>_<topic>``
(POP) and ``%RETRY%<group>`` (classic send-back), the group's backoff through the schedule,
dead letters, CONSUMER_SEND_MSG_BACK (in-process over a real store and a manual clock; no
sockets)."""

from __future__ import annotations

import asyncio
import dataclasses
import pathlib
from collections.abc import Iterator
from typing import Any

import pytest

import broker_harness
from ariane.broker import settings
from ariane.broker.grpc import admin_service
from ariane.broker.pop import service as pop_service
from ariane.broker.processors import consume, retry
from ariane.broker.tables import subscriptions
from ariane.common import clock, errors, ids, message, topics
from ariane.grpcwire import pb
from broker_harness import incoming

T = ids.TopicName("orders")
G = ids.GroupName("g")
RETRY = topics.retry_topic(G)
POP_RETRY = ids.TopicName("%RETRY%g_orders")  # KeyBuilder.buildPopRetryTopicV1
DLQ = topics.dlq_topic(G)
P = message.Property
Q0 = ids.QueueId(0)


@pytest.fixture
def harness(tmp_path: pathlib.Path) -> Iterator[broker_harness.BrokerHarness]:
    broker = broker_harness.BrokerHarness(tmp_path)
    broker.create_topic(T, queues=1)
    yield broker
    broker.close()


def _group(
    harness: broker_harness.BrokerHarness,
    *,
    attempts: int = 17,
    policy: subscriptions.GroupRetryPolicy | None = None,
) -> subscriptions.SubscriptionGroupConfig:
    return harness.runtime.groups.create_or_update(
        subscriptions.SubscriptionGroupConfig(
            G, max_delivery_attempts=attempts, retry_policy=policy
        )
    )


def _stored(harness: broker_harness.BrokerHarness, topic: str) -> list[message.StoredMessage]:
    result = harness.runtime.store.get_messages(
        ids.TopicName(topic), Q0, ids.QueueOffset(0), max_count=100, max_bytes=1 << 20
    )
    return list(result.messages)


def _send_one(
    harness: broker_harness.BrokerHarness, body: bytes = b"x", *, topic: str = T
) -> message.StoredMessage:
    asyncio.run(harness.processors.sender.send([incoming(topic, body)], born_ip="10.1.2.3"))
    return _stored(harness, topic)[-1]


async def _deliver_due(harness: broker_harness.BrokerHarness) -> int:
    return await harness.runtime.schedule.run_once()


def test_a_failed_attempt_parks_a_retry_copy_until_the_policy_backoff_passed(
    harness: broker_harness.BrokerHarness,
) -> None:
    """Attempt 1 failing under a 7 s customized policy parks a copy that reaches %RETRY%g_orders
    with RECONSUMETIMES 1, RETRY_TOPIC, ORIGIN_MESSAGE_ID and the same UNIQ_KEY only once 7 s
    passed."""
    group = _group(harness, policy=subscriptions.GroupRetryPolicy(delays_ms=(7_000, 9_000)))
    original = _send_one(harness)
    result = asyncio.run(harness.processors.retry.retry_failed(group, original, failed_attempt=1))
    assert result.destination is retry.Destination.RETRY
    assert result.topic == POP_RETRY
    assert result.due_ms == harness.clock.now_ms() + 7_000
    assert asyncio.run(_deliver_due(harness)) == 0
    assert _stored(harness, POP_RETRY) == []
    harness.clock.advance_ms(6_999)
    assert asyncio.run(_deliver_due(harness)) == 0
    harness.clock.advance_ms(1)
    assert asyncio.run(_deliver_due(harness)) == 1
    (copy,) = _stored(harness, POP_RETRY)
    assert copy.reconsume_times == 1
    assert copy.properties[P.RETRY_TOPIC] == T
    assert copy.properties[P.ORIGIN_MESSAGE_ID] == message.message_id_of(original)
    assert message.message_id_of(copy) == message.message_id_of(original)
    assert copy.body == original.body
    assert retry.as_consumed(copy).topic == T
    config = harness.runtime.topics.get(POP_RETRY)
    assert config is not None and (config.read_queue_nums, int(config.perm)) == (1, 6)
    assert harness.runtime.route_changed.is_set()


def test_exponential_policy_and_the_last_attempt_goes_to_the_dlq(
    harness: broker_harness.BrokerHarness,
) -> None:
    """Under an exponential policy attempt 2's copy waits initial*2; attempt 3 of 3 is written
    to %DLQ%g with the origin topic, the origin id and 3 attempts."""
    policy = subscriptions.GroupRetryPolicy(
        kind=subscriptions.GroupRetryPolicyType.EXPONENTIAL, initial_ms=2_000, max_ms=60_000
    )
    group = _group(harness, attempts=3, policy=policy)
    original = _send_one(harness)
    processor = harness.processors.retry
    second = asyncio.run(processor.retry_failed(group, original, failed_attempt=2))
    assert second.due_ms == harness.clock.now_ms() + 4_000
    dead = asyncio.run(processor.retry_failed(group, original, failed_attempt=3))
    assert (dead.destination, dead.topic, dead.reconsume_times) == (retry.Destination.DLQ, DLQ, 3)
    (letter,) = _stored(harness, DLQ)
    assert letter.reconsume_times == 3
    assert letter.properties[P.DLQ_ORIGIN_TOPIC] == T
    assert letter.properties[P.RETRY_TOPIC] == T
    assert letter.properties[P.DLQ_ORIGIN_MESSAGE_ID] == message.message_id_of(original)
    assert harness.runtime.counters.sent_to_dlq == 1


def test_a_retry_copy_of_a_retry_copy_keeps_the_first_origin(
    harness: broker_harness.BrokerHarness,
) -> None:
    """A copy made from a %RETRY% message keeps RETRY_TOPIC = the first topic (not %RETRY%g_orders)
    and its DLQ letter names that topic too."""
    group = _group(harness, attempts=5)
    processor = harness.processors.retry
    original = _send_one(harness)
    asyncio.run(processor.retry_failed(group, original, failed_attempt=1, delay_ms=0))
    (first,) = _stored(harness, POP_RETRY)
    asyncio.run(processor.retry_failed(group, first, failed_attempt=2, delay_ms=0))
    second = _stored(harness, POP_RETRY)[1]
    assert (second.reconsume_times, second.properties[P.RETRY_TOPIC]) == (2, T)
    assert P.REAL_TOPIC not in second.properties
    asyncio.run(processor.dead_letter(G, second, attempts=3))
    (letter,) = _stored(harness, DLQ)
    assert letter.properties[P.DLQ_ORIGIN_TOPIC] == T
    assert message.message_id_of(letter) == message.message_id_of(original)


def test_classic_send_back_levels_and_dlq(harness: broker_harness.BrokerHarness) -> None:
    """CONSUMER_SEND_MSG_BACK: level 0 parks at level 3 + reconsume times in
    SCHEDULE_TOPIC_XXXX, level -1 and reconsume times at the request's max go to the DLQ."""
    group = _group(harness)
    processor = harness.processors.retry
    original = _send_one(harness)
    asyncio.run(processor.send_msg_back(group, original, delay_level=0, max_reconsume_times=-1))
    level_queue = harness.runtime.store.get_messages(
        topics.SCHEDULE_TOPIC, ids.QueueId(2), ids.QueueOffset(0), max_count=4, max_bytes=1 << 20
    )
    (parked,) = level_queue.messages
    assert parked.properties[P.REAL_TOPIC] == RETRY
    assert parked.reconsume_times == 1
    now = asyncio.run(
        processor.send_msg_back(group, original, delay_level=-1, max_reconsume_times=16)
    )
    assert now.destination is retry.Destination.DLQ
    exhausted = asyncio.run(
        processor.send_msg_back(group, parked, delay_level=0, max_reconsume_times=1)
    )
    assert (exhausted.destination, exhausted.reconsume_times) == (retry.Destination.DLQ, 2)
    assert len(_stored(harness, DLQ)) == 2


def _receive(
    harness: broker_harness.BrokerHarness, *, poll_s: float = 0.0
) -> list[consume.Received]:
    request = dataclasses.replace(harness.receive_request(G, T), poll_s=poll_s)
    return asyncio.run(harness.processors.consumer.receive(request))


def test_a_push_nack_comes_back_from_the_retry_topic_after_the_backoff(
    harness: broker_harness.BrokerHarness,
) -> None:
    """A nacked message is done on its topic at once (its handle acks nothing), waits 3 s in
    the timer, then is received from %RETRY%g_orders as attempt 2 under its own topic and id, and
    acks with that topic."""
    _group(harness, policy=subscriptions.GroupRetryPolicy(delays_ms=(3_000,)))
    consumer = harness.processors.consumer
    original = _send_one(harness)
    (first,) = _receive(harness)
    handle = first.delivery.receipt_handle
    assert asyncio.run(consumer.nack(G, T, handle, 3_000)) == handle
    with pytest.raises(errors.InvalidReceiptHandleError):
        consumer.ack(G, T, handle)
    harness.clock.advance_ms(2_999)
    asyncio.run(_deliver_due(harness))
    assert _receive(harness) == []
    harness.clock.advance_ms(1)
    assert asyncio.run(_deliver_due(harness)) == 1
    (again,) = _receive(harness)
    assert (again.stored.topic, again.delivery.attempt) == (T, 2)
    assert message.message_id_of(again.stored) == message.message_id_of(original)
    consumer.ack(G, T, again.delivery.receipt_handle)
    harness.clock.advance_ms(60_000)
    assert _receive(harness) == []
    assert harness.runtime.offsets.query(G, POP_RETRY, Q0) == 1


def test_a_parked_receive_wakes_when_the_retry_copy_becomes_due(
    harness: broker_harness.BrokerHarness,
) -> None:
    """A receive long polling for 20 s returns the retry copy as soon as the schedule writes
    it to %RETRY%g_orders (within 2 s of real time, no 20 s stall)."""
    _group(harness, policy=subscriptions.GroupRetryPolicy(delays_ms=(1_000,)))
    consumer = harness.processors.consumer
    _send_one(harness)
    (first,) = _receive(harness)

    async def scenario() -> list[consume.Received]:
        await consumer.nack(G, T, first.delivery.receipt_handle, 1_000)
        request = dataclasses.replace(harness.receive_request(G, T), poll_s=20.0)
        waiting = asyncio.create_task(consumer.receive(request))
        deadline = asyncio.get_running_loop().time() + 2
        while harness.runtime.polling.parked == 0:
            assert asyncio.get_running_loop().time() < deadline, "the receive never parked"
            await asyncio.sleep(0.01)
        harness.clock.advance_ms(1_000)
        await harness.runtime.schedule.run_once()
        return await asyncio.wait_for(waiting, 2)

    (again,) = asyncio.run(scenario())
    assert again.delivery.attempt == 2


def test_nacks_end_in_the_dlq_with_origin_topic_id_and_attempts(
    harness: broker_harness.BrokerHarness,
) -> None:
    """With max_delivery_attempts 2, the second nack writes %DLQ%g (origin topic, origin id,
    RECONSUMETIMES 2) and nothing is delivered again; a DLQ reader sees the origin."""
    _group(harness, attempts=2, policy=subscriptions.GroupRetryPolicy(delays_ms=(1_000,)))
    consumer = harness.processors.consumer
    original = _send_one(harness)
    attempts = []
    for _ in range(3):
        got = _receive(harness)
        attempts += [r.delivery.attempt for r in got]
        for r in got:
            asyncio.run(consumer.nack(G, T, r.delivery.receipt_handle, 1_000))
        harness.clock.advance_ms(1_000)
        asyncio.run(_deliver_due(harness))
    assert attempts == [1, 2]
    (letter,) = _stored(harness, DLQ)
    assert letter.reconsume_times == 2
    assert letter.properties[P.DLQ_ORIGIN_TOPIC] == T
    assert letter.properties[P.DLQ_ORIGIN_MESSAGE_ID] == message.message_id_of(original)
    reader = dataclasses.replace(harness.receive_request("dlq-reader", DLQ))
    (dead,) = asyncio.run(consumer.receive(reader))
    assert dead.delivery.dead_letter_origin == (T, message.message_id_of(original))


def test_forward_to_dlq_copies_the_current_delivery_and_acks_it(
    harness: broker_harness.BrokerHarness,
) -> None:
    """ForwardMessageToDeadLetterQueue of attempt 2 (a retry copy) writes the DLQ letter with
    the origin topic and 2 attempts, and the handle acks nothing afterwards."""
    _group(harness)
    consumer = harness.processors.consumer
    _send_one(harness)
    (first,) = _receive(harness, poll_s=0)
    harness.clock.advance_ms(10_001)  # expires: copied to %RETRY%g_orders at once
    (second,) = _receive(harness)
    assert second.delivery.attempt == 2
    asyncio.run(consumer.forward_to_dlq(G, T, second.delivery.receipt_handle))
    (letter,) = _stored(harness, DLQ)
    assert (letter.reconsume_times, letter.properties[P.DLQ_ORIGIN_TOPIC]) == (2, T)
    with pytest.raises(errors.InvalidReceiptHandleError):
        consumer.ack(G, T, second.delivery.receipt_handle)
    with pytest.raises(errors.InvalidReceiptHandleError):
        consumer.ack(G, T, first.delivery.receipt_handle)


def test_the_revive_loop_copies_expired_deliveries_without_a_receive(
    harness: broker_harness.BrokerHarness,
) -> None:
    """With no receive running, the revive loop turns an expired delivery into a %RETRY%g_orders
    copy with RECONSUMETIMES 1 and commits the original."""
    _group(harness)
    _send_one(harness)
    _receive(harness)
    harness.clock.advance_ms(10_001)
    reviver = pop_service.PopReviveService(
        pop_service=harness.runtime.pop_service,
        group_table=harness.runtime.groups,
        reviver=harness.processors.consumer.revive,
        interval_ms=1_000,
    )
    assert asyncio.run(reviver.revive_once()) == 1
    (copy,) = _stored(harness, POP_RETRY)
    assert copy.reconsume_times == 1
    assert harness.runtime.offsets.query(G, T, Q0) == 1


@pytest.mark.parametrize("first_in", ["revive loop", "receive"])
def test_an_expiry_revived_by_the_loop_and_a_receive_at_once_is_copied_once(
    harness: broker_harness.BrokerHarness, monkeypatch: pytest.MonkeyPatch, first_in: str
) -> None:
    """Proves an expired delivery is copied to %RETRY%g_orders once when the revive loop and a
    receive both reach it while the other is still awaiting its copy's write (a SYNC_MASTER's
    slave wait): one copy at RECONSUMETIMES 1, delivered once at attempt 2, never a second
    copy delivered again at attempt 2 (nor the later one failing on the settled offset)."""
    _group(harness)
    _send_one(harness)
    _receive(harness)
    harness.clock.advance_ms(10_001)
    reviver = pop_service.PopReviveService(
        pop_service=harness.runtime.pop_service,
        group_table=harness.runtime.groups,
        reviver=harness.processors.consumer.revive,
        interval_ms=1_000,
    )
    consumer, request = harness.processors.consumer, harness.receive_request(G, T)
    retry_failed = harness.processors.retry.retry_failed
    gate, writes = asyncio.Event(), []

    async def held_write(*args: Any, **kwargs: Any) -> retry.SendBackResult:
        writes.append(args)
        if len(writes) == 1:  # the first writer waits (as for its slave) until released
            await gate.wait()
        return await retry_failed(*args, **kwargs)

    monkeypatch.setattr(harness.processors.retry, "retry_failed", held_write)

    async def revive() -> list[consume.Received]:
        await reviver.revive_once()
        return []

    async def race() -> list[consume.Received]:
        receive = consumer.receive(request)
        first, second = (revive(), receive) if first_in == "revive loop" else (receive, revive())
        held = asyncio.create_task(first)
        for _ in range(100):  # bounded: the first writer reaches its write in a few steps
            if writes:
                break
            await asyncio.sleep(0)
        assert writes, "the first reviver never reached its write"
        got = await second
        gate.set()
        return got + await held

    delivered = asyncio.run(race())
    assert [c.reconsume_times for c in _stored(harness, POP_RETRY)] == [1]
    delivered += _receive(harness)
    assert [r.delivery.attempt for r in delivered] == [2]
    assert harness.runtime.offsets.query(G, T, Q0) == 1


def test_attempts_and_parked_retries_survive_a_restart(tmp_path: pathlib.Path) -> None:
    """A nacked message parked for 5 s is delivered after a broker restart as attempt 2 (the
    count is in the stored copy, the schedule in the timer log)."""
    broker = broker_harness.BrokerHarness(tmp_path)
    broker.create_topic(T, queues=1)
    _group(broker, policy=subscriptions.GroupRetryPolicy(delays_ms=(5_000,)))
    _send_one(broker)
    (first,) = _receive(broker)
    asyncio.run(broker.processors.consumer.nack(G, T, first.delivery.receipt_handle, 5_000))
    broker.close()
    reopened = broker_harness.BrokerHarness(tmp_path)
    try:
        reopened.clock.advance_ms(broker.clock.now_ms() - reopened.clock.now_ms() + 5_000)
        assert asyncio.run(_deliver_due(reopened)) == 1
        (again,) = _receive(reopened)
        assert (again.stored.topic, again.delivery.attempt) == (T, 2)
    finally:
        reopened.close()


def test_admin_dead_letter_rpcs_refuse_bad_requests(
    harness: broker_harness.BrokerHarness,
) -> None:
    """ResendDeadLetters with neither ids nor all (or both) is BAD_REQUEST, an unknown id
    MESSAGE_NOT_FOUND, and ListDeadLetters of a malformed group ILLEGAL_CONSUMER_GROUP."""
    service = admin_service.AdminService(
        harness.runtime, harness.processors.admin, dead_letters=harness.processors.retry
    )
    context: Any = broker_harness.FakeCallContext()
    for request in (
        pb.admin.ResendDeadLettersRequest(group=G),
        pb.admin.ResendDeadLettersRequest(group=G, message_ids=["x"], all=True),
    ):
        with pytest.raises(errors.BadRequestError):
            asyncio.run(service.resend_dead_letters(request, context))
    with pytest.raises(errors.MessageNotFoundError):
        unknown = pb.admin.ResendDeadLettersRequest(group=G, message_ids=["nope"])
        asyncio.run(service.resend_dead_letters(unknown, context))
    with pytest.raises(errors.IllegalConsumerGroupError):
        asyncio.run(
            service.list_dead_letters(pb.admin.ListDeadLettersRequest(group="a b"), context)
        )
    empty = asyncio.run(
        service.list_dead_letters(pb.admin.ListDeadLettersRequest(group=G), context)
    )
    assert list(empty.letters) == []


def _two_topics(harness: broker_harness.BrokerHarness) -> ids.TopicName:
    """Topic ``invoices`` beside ``orders`` (1 queue each), and the group with a 1 s backoff."""
    other = ids.TopicName("invoices")
    harness.create_topic(other, queues=1)
    _group(harness, policy=subscriptions.GroupRetryPolicy(delays_ms=(1_000,)))
    return other


def _receive_topic(harness: broker_harness.BrokerHarness, topic: str) -> list[consume.Received]:
    request = harness.receive_request(G, topic)
    return asyncio.run(harness.processors.consumer.receive(request))


def test_redeliveries_of_a_group_with_two_topics_come_back_on_their_own_topic(
    harness: broker_harness.BrokerHarness,
) -> None:
    """A group nacking on orders and invoices gets each retry copy only on a receive for its
    own topic: copies live in %RETRY%g_orders and %RETRY%g_invoices, never in %RETRY%g."""
    other = _two_topics(harness)
    consumer = harness.processors.consumer
    sent = {T: _send_one(harness, b"o"), other: _send_one(harness, b"i", topic=other)}
    for topic in (T, other):
        (got,) = _receive_topic(harness, topic)
        asyncio.run(consumer.nack(G, topic, got.delivery.receipt_handle, 1_000))
    harness.clock.advance_ms(1_000)
    assert asyncio.run(_deliver_due(harness)) == 2
    for topic in (other, T):  # the other topic's receive first: it must not take T's copy
        (again,) = _receive_topic(harness, topic)
        assert (again.stored.topic, again.delivery.attempt) == (topic, 2)
        assert message.message_id_of(again.stored) == message.message_id_of(sent[topic])
        consumer.ack(G, topic, again.delivery.receipt_handle)
        assert [m.properties[P.RETRY_TOPIC] for m in _stored(harness, f"%RETRY%g_{topic}")] == [
            topic
        ]
    assert harness.runtime.topics.get(RETRY) is None


def test_copies_in_the_shared_retry_topic_are_delivered_on_their_own_topic(
    harness: broker_harness.BrokerHarness,
) -> None:
    """Copies stored in %RETRY%g (before the upgrade, or by a classic send-back) are moved to
    the per-topic retry topic of their RETRY_TOPIC by the next receive of the group and each is
    delivered, once, on a receive for its own topic with its attempt."""
    other = _two_topics(harness)
    group = harness.runtime.groups.require(G)
    processor = harness.processors.retry
    originals = {T: _send_one(harness, b"o"), other: _send_one(harness, b"i", topic=other)}
    for original in (originals[other], originals[T]):  # level 1 = 1 s, into %RETRY%g
        asyncio.run(processor.send_msg_back(group, original, delay_level=1, max_reconsume_times=-1))
    harness.clock.advance_ms(1_000)
    assert asyncio.run(_deliver_due(harness)) == 2
    assert [m.properties[P.RETRY_TOPIC] for m in _stored(harness, RETRY)] == [other, T]
    for topic in (T, other):
        request = harness.receive_request(G, topic)
        got = asyncio.run(harness.processors.consumer.receive(request))
        firsts = [r for r in got if r.delivery.attempt == 1]
        (again,) = [r for r in got if r.delivery.attempt == 2]
        assert {r.stored.topic for r in got} == {topic}
        assert message.message_id_of(again.stored) == message.message_id_of(originals[topic])
        assert len(firsts) == 1  # the original itself, never received before
    harness.clock.advance_ms(1)
    assert _receive_topic(harness, T) == [] and _receive_topic(harness, other) == []
    assert harness.runtime.offsets.query(G, RETRY, Q0) == 2


def test_a_retry_topic_is_read_from_its_first_copy_even_for_last_offset_groups(
    tmp_path: pathlib.Path,
) -> None:
    """On a LAST_OFFSET broker, a retry copy written before the group first opened its
    %RETRY%g_orders queue is still delivered (RocketMQ starts retry topics at their min offset,
    as PopMessageProcessor's getInitOffset does): here a receive of another topic moved it
    there from %RETRY%g."""
    receive = settings.ReceiveSettings(consume_from_where=settings.ConsumeFromWhere.LAST_OFFSET)
    broker = broker_harness.BrokerHarness(tmp_path, receive=receive)
    try:
        broker.create_topic(T, queues=1)
        other = _two_topics(broker)
        group = broker.runtime.groups.require(G)
        original = _send_one(broker)
        asyncio.run(
            broker.processors.retry.send_msg_back(
                group, original, delay_level=1, max_reconsume_times=-1
            )
        )
        broker.clock.advance_ms(1_000)
        assert asyncio.run(_deliver_due(broker)) == 1
        assert _receive_topic(broker, other) == []  # moves the copy to %RETRY%g_orders
        assert len(_stored(broker, POP_RETRY)) == 1
        (again,) = _receive_topic(broker, T)
        assert (again.stored.topic, again.delivery.attempt) == (T, 2)
    finally:
        broker.close()


def test_deleting_a_topic_deletes_its_retry_topics_so_a_new_one_gets_no_old_redeliveries(
    harness: broker_harness.BrokerHarness,
) -> None:
    """DeleteTopic of orders also deletes %RETRY%g_orders (RocketMQ's
    clearRetryTopicWhenDeleteTopic): orders created again delivers nothing of the old topic."""
    _group(harness, policy=subscriptions.GroupRetryPolicy(delays_ms=(1_000,)))
    _send_one(harness)
    (first,) = _receive(harness)
    asyncio.run(harness.processors.consumer.nack(G, T, first.delivery.receipt_handle, 1_000))
    harness.clock.advance_ms(1_000)
    assert asyncio.run(_deliver_due(harness)) == 1
    assert len(_stored(harness, POP_RETRY)) == 1
    harness.processors.admin.delete_topic(T)
    assert harness.runtime.topics.get(POP_RETRY) is None
    assert harness.runtime.offsets.query(G, POP_RETRY, Q0) is None
    harness.create_topic(T, queues=1)
    assert _receive(harness) == []


class _TickingClock(clock.ManualClock):
    """A manual clock whose wall time moves 1 ms on every read (code between two reads)."""

    def now_ms(self) -> ids.TimestampMs:
        self._wall_ms += 1
        return super().now_ms()


def test_a_backoff_equal_to_the_timer_precision_is_parked_even_if_the_clock_ticks(
    tmp_path: pathlib.Path,
) -> None:
    """A 1 s backoff (the timer's 1 s precision) is parked for 1 s even when the wall clock
    moves between the retry path's reading and the timer's: the copy is not stored at once."""
    broker = broker_harness.BrokerHarness(tmp_path, time=_TickingClock())
    try:
        broker.create_topic(T, queues=1)
        group = _group(broker, policy=subscriptions.GroupRetryPolicy(delays_ms=(1_000,)))
        original = _send_one(broker)
        result = asyncio.run(
            broker.processors.retry.retry_failed(group, original, failed_attempt=1)
        )
        assert result.due_ms is not None
        assert _stored(broker, POP_RETRY) == []
        broker.clock.advance_ms(1_000)
        assert asyncio.run(_deliver_due(broker)) == 1
    finally:
        broker.close()
