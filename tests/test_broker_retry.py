"""The retry processor and the consume path over it: retry copies in ``%RETRY%<group>``, the
group's backoff through the schedule, dead letters, CONSUMER_SEND_MSG_BACK (in-process over a
real store and a manual clock; no sockets)."""

from __future__ import annotations

import asyncio
import pathlib
from collections.abc import Iterator

import pytest

import broker_harness
from ariane.broker.processors import retry
from ariane.broker.tables import subscriptions
from ariane.common import ids, message, topics
from broker_harness import incoming

T = ids.TopicName("orders")
G = ids.GroupName("g")
RETRY = topics.retry_topic(G)
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


def _send_one(harness: broker_harness.BrokerHarness, body: bytes = b"x") -> message.StoredMessage:
    asyncio.run(harness.processors.sender.send([incoming(T, body)], born_ip="10.1.2.3"))
    return _stored(harness, T)[-1]


async def _deliver_due(harness: broker_harness.BrokerHarness) -> int:
    return await harness.runtime.schedule.run_once()


def test_a_failed_attempt_parks_a_retry_copy_until_the_policy_backoff_passed(
    harness: broker_harness.BrokerHarness,
) -> None:
    """Attempt 1 failing under a 7 s customized policy parks a copy that reaches %RETRY%g
    with RECONSUMETIMES 1, RETRY_TOPIC, ORIGIN_MESSAGE_ID and the same UNIQ_KEY only once 7 s
    passed."""
    group = _group(harness, policy=subscriptions.GroupRetryPolicy(delays_ms=(7_000, 9_000)))
    original = _send_one(harness)
    result = asyncio.run(harness.processors.retry.retry_failed(group, original, failed_attempt=1))
    assert result.destination is retry.Destination.RETRY
    assert result.topic == RETRY
    assert result.due_ms == harness.clock.now_ms() + 7_000
    assert asyncio.run(_deliver_due(harness)) == 0
    assert _stored(harness, RETRY) == []
    harness.clock.advance_ms(6_999)
    assert asyncio.run(_deliver_due(harness)) == 0
    harness.clock.advance_ms(1)
    assert asyncio.run(_deliver_due(harness)) == 1
    (copy,) = _stored(harness, RETRY)
    assert copy.reconsume_times == 1
    assert copy.properties[P.RETRY_TOPIC] == T
    assert copy.properties[P.ORIGIN_MESSAGE_ID] == message.message_id_of(original)
    assert message.message_id_of(copy) == message.message_id_of(original)
    assert copy.body == original.body
    assert retry.as_consumed(copy).topic == T
    config = harness.runtime.topics.get(RETRY)
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
    """A copy made from a %RETRY% message keeps RETRY_TOPIC = the first topic (not %RETRY%g)
    and its DLQ letter names that topic too."""
    group = _group(harness, attempts=5)
    processor = harness.processors.retry
    original = _send_one(harness)
    asyncio.run(processor.retry_failed(group, original, failed_attempt=1, delay_ms=0))
    (first,) = _stored(harness, RETRY)
    asyncio.run(processor.retry_failed(group, first, failed_attempt=2, delay_ms=0))
    second = _stored(harness, RETRY)[1]
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
