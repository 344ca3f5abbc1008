"""``ClientSettingsProcessor``: what a client's settings report gets back, and who gets which queue.

Mirrors the RocketMQ 5 proxy's ``ClientActivity`` settings merge (grpc-v2.md §6.2) and
``RouteActivity.queryAssignment`` (§6.6), protocol-neutral so the gRPC Telemetry/QueryAssignment
adapters and a future Remoting heartbeat answer alike:

* a producer gets the broker's body limit, message-type validation and the proxy's default send
  retry backoff (3 attempts, 10 ms doubling to 1 s);
* a push/simple consumer's (plain or lite, RocketMQ 5.5) group is created on first use
  (``autoCreateSubscriptionGroup``) and the consumer gets the receive batch size, the
  long-polling timeout, whether the group is FIFO and the group's retry policy with its max
  delivery attempts;
* either report refreshes the client's session (type, group, topics) in the ``ClientRegistry``;
  a consumer's also makes it a live CLUSTERING member of its group, with its subscriptions, in
  the ``ConsumerRegistry`` (RocketMQ ``ConsumerManager.registerConsumer``).

``one_assignment_per_broker`` is QueryAssignment's rule for non-FIFO groups: POP consumers pull
from any queue of a broker, so each broker is assigned once with queue id -1; FIFO groups share
their readable queues among their live members (``assignment.AssignmentProcessor``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
from collections.abc import Callable, Iterable
from typing import TypeVar

from ariane.broker import settings as broker_settings
from ariane.broker.tables import clients, consumers, subscriptions, topic_config
from ariane.common import ids, limits, topics

Q = TypeVar("Q")

RECEIVE_BATCH_SIZE = limits.RECEIVE_BATCH_SIZE_MAX
"""``receive_batch_size`` announced to consumers; also the most one receive returns."""


class ClientKind(enum.Enum):
    """The v2 client types a settings report may come from."""

    PRODUCER = "PRODUCER"
    PUSH_CONSUMER = "PUSH_CONSUMER"
    SIMPLE_CONSUMER = "SIMPLE_CONSUMER"
    PULL_CONSUMER = "PULL_CONSUMER"
    LITE_PUSH_CONSUMER = "LITE_PUSH_CONSUMER"
    LITE_SIMPLE_CONSUMER = "LITE_SIMPLE_CONSUMER"


@dataclasses.dataclass(frozen=True, slots=True)
class Backoff:
    """Exponential retry backoff announced to producers.

    Attributes:
        max_attempts: attempts including the first, a count.
        initial_ms: wait after the first failure, ms.
        max_ms: cap of one wait, ms.
        multiplier: growth per attempt.
    """

    max_attempts: int
    initial_ms: int
    max_ms: int
    multiplier: float


PRODUCER_BACKOFF = Backoff(max_attempts=3, initial_ms=10, max_ms=1_000, multiplier=2.0)
"""Producer send retries announced in the settings reply (the Java proxy's defaults)."""


@dataclasses.dataclass(frozen=True, slots=True)
class ProducerPolicy:
    """The publishing settings a producer gets back.

    Attributes:
        max_body_size_bytes: largest body the broker stores.
        validate_message_type: the producer checks a message's type against the topic's.
        backoff: send retry backoff.
    """

    max_body_size_bytes: int
    validate_message_type: bool
    backoff: Backoff


@dataclasses.dataclass(frozen=True, slots=True)
class ConsumerPolicy:
    """The subscription settings a consumer gets back.

    Attributes:
        receive_batch_size: most messages one receive returns.
        long_polling_ms: long-polling timeout to use, ms.
        fifo: the group consumes in order.
        max_delivery_attempts: deliveries before the DLQ, a count.
        retry_policy: the group's redelivery backoff.
    """

    receive_batch_size: int
    long_polling_ms: int
    fifo: bool
    max_delivery_attempts: int
    retry_policy: subscriptions.GroupRetryPolicy


class ClientSettingsProcessor:
    """Answers settings reports and keeps client sessions current.

    Args:
        group_table: subscription groups (``require`` creates on first use).
        client_registry: live client sessions.
        consumer_registry: live members of each consumer group.
        receive: the broker's receive settings (long-polling default).
        message_size_bytes_max: the store's body limit.
    """

    def __init__(
        self,
        *,
        group_table: subscriptions.SubscriptionGroupManager,
        client_registry: clients.ClientRegistry,
        consumer_registry: consumers.ConsumerRegistry,
        receive: broker_settings.ReceiveSettings,
        message_size_bytes_max: int,
        retry_topics: Callable[[ids.GroupName], None] | None = None,
    ) -> None:
        self._groups = group_table
        self._retry_topics = retry_topics
        self._clients = client_registry
        self._consumers = consumer_registry
        self._receive = receive
        self._body_max = message_size_bytes_max

    def producer(self, client_id: ids.ClientId, topic_names: Iterable[str]) -> ProducerPolicy:
        """A producer's report: remember its topics, answer the publishing policy."""
        session = self._clients.touch(client_id)
        session.client_type = ClientKind.PRODUCER.value
        session.topics = frozenset(topic_names)
        return ProducerPolicy(self._body_max, True, PRODUCER_BACKOFF)

    def consumer(
        self,
        client_id: ids.ClientId,
        kind: ClientKind,
        group_name: str,
        subscribed: Iterable[consumers.Subscription],
    ) -> ConsumerPolicy:
        """A consumer's report: create its group on first use (with its ``%RETRY%<group>``
        topic through ``retry_topics``, as RocketMQ's proxy heartbeat to the broker does, so that
        mqadmin ``consumerProgress`` finds the group's route), register it as a member with its
        subscriptions, answer its policy.

        Raises:
            IllegalConsumerGroupError: a bad group name. ConsumerGroupNotFoundError: the group
                does not exist and auto-creation is off. TooManyRequestsError: a registry
                bound was hit.
        """
        assert kind is not ClientKind.PRODUCER, "producers report through producer()"
        group = self._groups.require(topics.validate_group(group_name))
        subs = list(subscribed)
        if self._retry_topics is not None:
            self._retry_topics(group.group)
        self._consumers.register(group.group, client_id, subscriptions=subs)
        session = self._clients.touch(client_id)
        session.client_type = kind.value
        session.group = group.group
        session.topics = frozenset(s.topic for s in subs)
        return ConsumerPolicy(
            receive_batch_size=RECEIVE_BATCH_SIZE,
            long_polling_ms=self._receive.long_polling_ms_default,
            fifo=group.consume_orderly,
            max_delivery_attempts=group.max_delivery_attempts,
            retry_policy=group.effective_retry_policy(),
        )


def retry_topic_creator(
    table: topic_config.TopicConfigManager, route_changed: asyncio.Event
) -> Callable[[ids.GroupName], None]:
    """What ``ClientSettingsProcessor(retry_topics=...)`` calls for a gRPC consumer group: its
    ``%RETRY%<group>`` (1 queue) created when missing and ``route_changed`` set, so the name
    servers learn it at once (RocketMQ's proxy heartbeats gRPC consumers to the broker, whose
    heartbeat creates it; mqadmin ``consumerProgress`` routes by it).

    The callable raises TooManyRequestsError when the topic table is full.
    """

    def ensure(group: ids.GroupName) -> None:
        if table.get(topics.retry_topic(group)) is None:
            table.ensure_retry_topic(group)
            route_changed.set()

    return ensure


def one_assignment_per_broker(
    queues: Iterable[Q], *, fifo: bool, broker_of: Callable[[Q], str]
) -> list[Q]:
    """QueryAssignment's queues: all of them for FIFO groups, else the first of each broker
    (the caller sends that one with queue id -1: POP reads any queue of the broker)."""
    if fifo:
        return list(queues)
    seen: dict[str, Q] = {}
    for queue in queues:
        seen.setdefault(broker_of(queue), queue)
    return list(seen.values())
