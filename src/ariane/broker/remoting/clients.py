"""The classic clients of one broker: who heartbeats, in which groups, over which connection.

Mirrors RocketMQ's ``ConsumerManager`` / ``ProducerManager`` as ``HEART_BEAT`` (34),
``UNREGISTER_CLIENT`` (35) and ``GET_CONSUMER_LIST_BY_GROUP`` (38) use them: per consumer group
the clients (client id -> connection and last heartbeat), the message model and the
subscriptions (topic -> expression, type and ``subVersion``); per producer group the clients.
A client silent for ``client_silence_ms_max`` (RocketMQ 120 s) or whose connection closed is
dropped. Every change of a consumer group's membership is reported to the caller, which then
pushes ``NOTIFY_CONSUMER_IDS_CHANGED`` (40) to the group's other members. A consumer that
leaves a group (unregister, closed connection, silence) gives up its queue locks of that group
in the broker's shared ``RebalanceLockManager`` (the one gRPC clients lock in too).

This is the one module holding that table; a protocol-neutral consumer registry can replace it
behind the same methods. Invariants: at most ``groups_max`` groups of each kind and
``clients_per_group_max`` clients per group (a heartbeat beyond either is refused with
TooManyRequestsError, never grown); used from the broker's one event loop only. Connections are
opaque hashable values (the transport's ``Connection``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Hashable, Iterable, Mapping

from ariane.broker.tables import queue_locks
from ariane.common import clock, errors, ids

CLIENT_SILENCE_MS_MAX = 120_000
"""A client not heard from for this long is dropped, ms (RocketMQ ``channelExpiredTimeout``)."""

GROUPS_MAX = 10_000
"""Most consumer groups (and, separately, producer groups) the table holds."""

CLIENTS_PER_GROUP_MAX = 1_000
"""Most clients one group holds."""


@dataclasses.dataclass(frozen=True, slots=True)
class Subscription:
    """One topic a consumer group subscribes to (RocketMQ ``SubscriptionData``).

    Attributes:
        topic: the topic.
        expression: the filter expression (``*``, ``a || b``, or SQL92).
        expression_type: ``TAG`` or ``SQL92``.
        sub_version: the client's subscription version (ms it was made).
    """

    topic: str
    expression: str
    expression_type: str = "TAG"
    sub_version: int = 0


@dataclasses.dataclass(frozen=True, slots=True)
class ClientVersion:
    """What a client's heartbeat frame says about it (RocketMQ ``ClientChannelInfo``).

    Attributes:
        language: its ``LanguageCode`` name (``JAVA``, ``GO`` …).
        version: its ``MQVersion`` ordinal (Java 5.3.3: 479).
    """

    language: str = "JAVA"
    version: int = 0


@dataclasses.dataclass(slots=True)
class _Member:
    connection: Hashable
    last_seen_ms: int
    client: ClientVersion = ClientVersion()


_Predicate = Callable[[str, _Member], bool]


@dataclasses.dataclass(slots=True)
class ConsumerGroup:
    """One consumer group's live members and subscriptions (``ConsumerGroupInfo``).

    Attributes:
        group: the group name.
        message_model: ``CLUSTERING`` or ``BROADCASTING``.
        consume_type: ``CONSUME_PASSIVELY`` (push) or ``CONSUME_ACTIVELY`` (pull).
        consume_from_where: the clients' ``ConsumeFromWhere`` name ("" when not sent).
        subscriptions: topic -> subscription, from the latest heartbeat.
    """

    group: str
    message_model: str = "CLUSTERING"
    consume_type: str = "CONSUME_PASSIVELY"
    consume_from_where: str = ""
    subscriptions: dict[str, Subscription] = dataclasses.field(default_factory=dict)
    members: dict[str, _Member] = dataclasses.field(default_factory=dict)

    def client_ids(self) -> list[str]:
        """The live client ids, sorted (what clients allocate queues over)."""
        return sorted(self.members)

    def connections(self) -> list[Hashable]:
        """The live members' connections."""
        return [m.connection for m in self.members.values()]

    def member_details(self) -> list[tuple[str, Hashable, ClientVersion]]:
        """(client id, connection, language and version) of each live member, by id."""
        return [(cid, m.connection, m.client) for cid, m in sorted(self.members.items())]


class ClassicClientTable:
    """Consumer and producer groups of the classic clients connected to this broker.

    Args:
        time: the clock (heartbeat times; expiry).
        client_silence_ms_max: how long a silent client stays, ms.
        locks: the broker's queue lock table; a leaving consumer's locks of the group go.
    """

    def __init__(
        self,
        *,
        time: clock.Clock,
        client_silence_ms_max: int = CLIENT_SILENCE_MS_MAX,
        locks: queue_locks.RebalanceLockManager | None = None,
    ) -> None:
        self._clock = time
        self._locks = locks
        self._silence_ms_max = client_silence_ms_max
        self._consumers: dict[str, ConsumerGroup] = {}
        self._producers: dict[str, dict[str, _Member]] = {}

    def consumer_group(self, group: str) -> ConsumerGroup | None:
        """The group's live state, or ``None`` when no client of it heartbeats here."""
        return self._consumers.get(group)

    def consumer_ids(self, group: str) -> list[str]:
        """The group's live client ids, sorted (``GET_CONSUMER_LIST_BY_GROUP``)."""
        found = self._consumers.get(group)
        return [] if found is None else found.client_ids()

    def subscription(self, group: str, topic: str) -> Subscription | None:
        """The group's subscription to ``topic`` from its heartbeats, or ``None``."""
        found = self._consumers.get(group)
        return None if found is None else found.subscriptions.get(topic)

    def producer_connections(self, group: str) -> list[Hashable]:
        """The connections of the producer group's live clients (check-backs go there)."""
        return [m.connection for m in self._producers.get(group, {}).values()]

    def register_consumer(
        self,
        group: str,
        client_id: str,
        connection: Hashable,
        *,
        message_model: str,
        consume_type: str,
        subscriptions: Iterable[Subscription],
        consume_from_where: str = "",
        client: ClientVersion = ClientVersion(),
    ) -> bool:
        """Record a consumer heartbeat (``ConsumerManager.registerConsumer``).

        Returns:
            True when the group's membership changed (a new client, or a new connection).

        Raises:
            TooManyRequestsError: the group or client limit is reached.
        """
        found = self._consumers.get(group)
        if found is None:
            _check_room(len(self._consumers), GROUPS_MAX, "consumer groups")
            found = self._consumers[group] = ConsumerGroup(group)
        found.message_model = message_model
        found.consume_type = consume_type
        found.consume_from_where = consume_from_where
        found.subscriptions = {s.topic: s for s in subscriptions}
        return _touch(found.members, client_id, connection, self._clock.now_ms(), client)

    def groups_subscribed_to(self, topic: str) -> list[str]:
        """The consumer groups whose live clients subscribe to ``topic``, sorted (RocketMQ
        ``ConsumerManager.queryTopicConsumeByWho``)."""
        return sorted(g for g, found in self._consumers.items() if topic in found.subscriptions)

    def producer_details(self, group: str) -> list[tuple[str, Hashable, ClientVersion]] | None:
        """(client id, connection, language and version) of the producer group's live
        clients by id, or ``None`` when none heartbeats here (``GET_PRODUCER_CONNECTION_LIST``)."""
        members = self._producers.get(group)
        if not members:
            return None
        return [(cid, m.connection, m.client) for cid, m in sorted(members.items())]

    def register_producer(
        self,
        group: str,
        client_id: str,
        connection: Hashable,
        client: ClientVersion = ClientVersion(),
    ) -> None:
        """Record a producer heartbeat (``ProducerManager.registerProducer``).

        Raises:
            TooManyRequestsError: the group or client limit is reached.
        """
        members = self._producers.get(group)
        if members is None:
            _check_room(len(self._producers), GROUPS_MAX, "producer groups")
            members = self._producers[group] = {}
        _touch(members, client_id, connection, self._clock.now_ms(), client)

    def unregister(
        self, client_id: str, *, consumer_group: str = "", producer_group: str = ""
    ) -> list[str]:
        """Drop a client from the named groups (``UNREGISTER_CLIENT``).

        Returns:
            the consumer groups whose membership changed.
        """
        if producer_group:
            self._drop_producer(producer_group, lambda cid, _m: cid == client_id)
        if not consumer_group:
            return []
        return self._drop_consumers([consumer_group], lambda cid, _m: cid == client_id)

    def connection_closed(self, connection: Hashable) -> list[str]:
        """Drop every client on ``connection`` (``doChannelCloseEvent``).

        Returns:
            the consumer groups whose membership changed.
        """
        for group in list(self._producers):
            self._drop_producer(group, lambda _cid, m: m.connection == connection)
        return self._drop_consumers(
            list(self._consumers), lambda _cid, m: m.connection == connection
        )

    def expire(self) -> list[str]:
        """Drop clients silent for longer than ``client_silence_ms_max``
        (``scanNotActiveChannel``).

        Returns:
            the consumer groups whose membership changed.
        """
        oldest_ms = self._clock.now_ms() - self._silence_ms_max
        for group in list(self._producers):
            self._drop_producer(group, lambda _cid, m: m.last_seen_ms < oldest_ms)
        return self._drop_consumers(
            list(self._consumers), lambda _cid, m: m.last_seen_ms < oldest_ms
        )

    def _drop_producer(self, group: str, gone: _Predicate) -> None:
        members = self._producers.get(group)
        if members is None:
            return
        for client_id in [cid for cid, m in members.items() if gone(cid, m)]:
            del members[client_id]
        if not members:
            del self._producers[group]

    def _drop_consumers(self, groups: Iterable[str], gone: _Predicate) -> list[str]:
        changed: list[str] = []
        for group in groups:
            found = self._consumers.get(group)
            if found is None:
                continue
            leaving = [cid for cid, m in found.members.items() if gone(cid, m)]
            for client_id in leaving:
                del found.members[client_id]
                if self._locks is not None:
                    self._locks.release_client(ids.ClientId(client_id), ids.GroupName(group))
            if leaving:
                changed.append(group)
            if not found.members:
                del self._consumers[group]
        return changed


def _touch(
    members: dict[str, _Member],
    client_id: str,
    connection: Hashable,
    now_ms: int,
    client: ClientVersion = ClientVersion(),
) -> bool:
    found = members.get(client_id)
    if found is not None:
        changed = found.connection != connection
        found.connection, found.last_seen_ms, found.client = connection, now_ms, client
        return changed
    _check_room(len(members), CLIENTS_PER_GROUP_MAX, "clients in one group")
    members[client_id] = _Member(connection, now_ms, client)
    return True


def _check_room(count: int, limit: int, what: str) -> None:
    if count >= limit:
        raise errors.TooManyRequestsError(f"{count} {what} are registered, the limit; retry later")


def subscriptions_of(raw: Iterable[Mapping[str, object]]) -> list[Subscription]:
    """The subscriptions of a heartbeat's ``subscriptionDataSet`` (JSON objects); entries
    without a topic are skipped."""
    found: list[Subscription] = []
    for entry in raw:
        topic = entry.get("topic")
        if not isinstance(topic, str) or not topic:
            continue
        expression = entry.get("subString")
        kind = entry.get("expressionType")
        version = entry.get("subVersion")
        found.append(
            Subscription(
                topic=topic,
                expression=expression if isinstance(expression, str) and expression else "*",
                expression_type=kind if isinstance(kind, str) and kind else "TAG",
                sub_version=version if isinstance(version, int) else 0,
            )
        )
    return found
