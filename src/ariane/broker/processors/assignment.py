"""``AssignmentProcessor``: which queues a consumer asking QueryAssignment gets.

Protocol-neutral: the gRPC QueryAssignment adapter (and a Remoting ``QUERY_ASSIGNMENT`` one)
give it the topic's readable queues and the asking client, and turn its answer into their wire
form. Two rules, by the group's kind:

* **Concurrent (non-FIFO) groups** consume by POP: any consumer may pop any queue, so each
  broker is assigned to everyone once, standing for all its queues (the wire form has queue id
  -1), as the RocketMQ 5 proxy's ``RouteActivity.queryAssignment`` does (grpc-v2.md §6.6).
* **FIFO groups** (``consume_orderly``) are queue-based: the readable queues are shared out
  among the group's live CLUSTERING members subscribed to the topic with the group's
  ``allocate_strategy`` (``ariane.common.allocate``; AVG by default), as RocketMQ's broker
  ``QueryAssignmentProcessor.doLoadBalance`` does in PULL mode; a BROADCASTING member gets every
  queue. Members come from ``consumers.ConsumerRegistry`` at each query, so when a member joins,
  terminates, loses its channel or expires, the next query of every member (official push
  consumers ask every 5 s) re-balances.

A client asking for a group it is not a live member of (its settings report went to another
broker, or its session expired while it was paused) joins the group with the one topic it
asked about: asking for a share of a topic is a consumer's sign of life. A FIFO group's pop
path keeps one message group in flight at a time, so a queue handed over while its old owner
still has messages in flight is not consumed out of order.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection

from ariane.broker.processors import client_settings
from ariane.broker.tables import consumers, subscriptions
from ariane.common import allocate, ids, route


@dataclasses.dataclass(frozen=True, slots=True)
class Assignment:
    """The queues a consumer gets.

    Attributes:
        queues: the assigned queues, sorted.
        whole_broker: each queue stands for every queue of its broker (POP; queue id -1 on
            the wire).
    """

    queues: tuple[route.MessageQueue, ...]
    whole_broker: bool


class AssignmentProcessor:
    """Answers QueryAssignment from the consumer registry and the group's strategy.

    Args:
        consumer_registry: the live members of each group.
    """

    def __init__(self, *, consumer_registry: consumers.ConsumerRegistry) -> None:
        self._consumers = consumer_registry

    def assign(
        self,
        group: subscriptions.SubscriptionGroupConfig,
        topic: ids.TopicName,
        client_id: ids.ClientId,
        readable: Collection[route.MessageQueue],
    ) -> Assignment:
        """The queues of ``topic`` that ``client_id`` should consume for ``group``.

        Args:
            group: the group's config (FIFO or not, strategy).
            topic: the topic asked about.
            client_id: the consumer asking.
            readable: the topic's readable queues over every broker of its route.

        Returns:
            The assignment; empty when the member's share is empty (more members than queues).

        Raises:
            TooManyRequestsError: joining the group would exceed a registry bound.
        """
        if not group.consume_orderly:
            per_broker = client_settings.one_assignment_per_broker(
                sorted(readable), fifo=False, broker_of=lambda q: q.broker_name
            )
            return Assignment(tuple(per_broker), whole_broker=True)
        model = self._join(group.group, topic, client_id)
        if model is consumers.MessageModel.BROADCASTING:
            return Assignment(tuple(sorted(readable)), whole_broker=False)
        members = self._consumers.client_ids(
            group.group, topic=topic, model=consumers.MessageModel.CLUSTERING
        )
        share = allocate.allocate(
            group.allocate_strategy,
            readable,
            members,
            client_id,
            config_queues=group.allocate_config_queues,
        )
        return Assignment(tuple(share), whole_broker=False)

    def _join(
        self, group: ids.GroupName, topic: ids.TopicName, client_id: ids.ClientId
    ) -> consumers.MessageModel:
        """Make ``client_id`` a member subscribed to ``topic`` if it is not; its model."""
        member = self._consumers.member(group, client_id)
        if member is not None and member.subscribes(topic):
            return member.message_model
        model = member.message_model if member else consumers.MessageModel.CLUSTERING
        subs = [*(member.subscriptions if member else ()), consumers.Subscription(topic)]
        self._consumers.register(group, client_id, message_model=model, subscriptions=subs)
        return model
