"""Live members of each consumer group (RocketMQ ``ConsumerManager``/``ConsumerGroupInfo``).

A member is a client id in a group, with the message model it consumes in (CLUSTERING shares
the queues, BROADCASTING reads them all) and its subscriptions. Members are registered by the
protocol adapters: a gRPC consumer's Telemetry settings report, a Remoting ``HEART_BEAT``'s
consumer data. Liveness is the client's session in ``clients.ClientRegistry`` (its
``last_seen_ms`` and channel): when the session goes — NotifyClientTermination, its channel
closing, ``channel_expired_ms`` of silence — the client leaves every group it was in, its queue
locks are released (``queue_locks.RebalanceLockManager``), and the membership listeners hear of
it. A Remoting ``UNREGISTER_CLIENT`` leaves one group (``unregister``).

Membership listeners (``add_listener``) are called after every join, leave and subscription
change with the group's members as they now are: the Remoting adapter pushes
``NOTIFY_CONSUMER_IDS_CHANGED`` to the group's channels through one; QueryAssignment needs none
(it allocates from ``client_ids`` on every query, so the next query after a change re-balances).

Invariants: every member has a session in the client registry (a dropped session drops its
memberships in the same call); a group with no member is not kept; at most ``groups_max``
groups, ``members_per_group_max`` members each, ``subscriptions_per_member_max`` subscriptions
each — beyond, ``register`` answers TOO_MANY_REQUESTS and changes nothing. Protocol-neutral:
channels are opaque handles, compared by identity.
"""

from __future__ import annotations

import dataclasses
import enum
import logging
from collections.abc import Callable, Iterable

from ariane.broker import settings as broker_settings
from ariane.broker.tables import clients, queue_locks
from ariane.common import errors, ids

_log = logging.getLogger(__name__)

LISTENERS_MAX = 8
"""Most membership listeners (one per protocol adapter and a few more)."""


class MessageModel(enum.Enum):
    """How a group's members share a topic (RocketMQ ``MessageModel``)."""

    CLUSTERING = "CLUSTERING"
    """The queues are shared out: each message to one member (every v2 gRPC consumer)."""
    BROADCASTING = "BROADCASTING"
    """Every member reads every queue (classic consumers that ask for it)."""


class ExpressionType(enum.Enum):
    """How a subscription filters (RocketMQ ``ExpressionType``)."""

    TAG = "TAG"
    SQL92 = "SQL92"


@dataclasses.dataclass(frozen=True, slots=True)
class Subscription:
    """One topic a member consumes (RocketMQ ``SubscriptionData``).

    Attributes:
        topic: the topic.
        expression_type: TAG or SQL92.
        expression: the filter text (``*`` for every tag).
    """

    topic: ids.TopicName
    expression_type: ExpressionType = ExpressionType.TAG
    expression: str = "*"


@dataclasses.dataclass(frozen=True, slots=True)
class ConsumerMember:
    """A member of a group as the registry sees it now.

    Attributes:
        client_id: the member's client id.
        channel: its session's opaque channel handle (``None`` when unknown).
        last_seen_ms: monotonic ms of its last call (its session's).
        message_model: CLUSTERING or BROADCASTING.
        subscriptions: its topics, sorted by topic.
    """

    client_id: ids.ClientId
    channel: object | None
    last_seen_ms: int
    message_model: MessageModel
    subscriptions: tuple[Subscription, ...]

    def subscribes(self, topic: str) -> bool:
        """Whether the member consumes ``topic``."""
        return any(s.topic == topic for s in self.subscriptions)


class MembershipEvent(enum.Enum):
    """What changed in a group (RocketMQ ``ConsumerGroupEvent``)."""

    JOINED = "JOINED"
    LEFT = "LEFT"
    CHANGED = "CHANGED"
    """A member's message model or subscriptions changed."""


@dataclasses.dataclass(frozen=True, slots=True)
class MembershipChange:
    """One change of a group, as a listener gets it.

    Attributes:
        group: the group.
        client_id: the member that joined, left or changed.
        event: what happened.
        members: the group's members after the change, sorted by client id.
    """

    group: ids.GroupName
    client_id: ids.ClientId
    event: MembershipEvent
    members: tuple[ConsumerMember, ...]


MembershipListener = Callable[[MembershipChange], None]


@dataclasses.dataclass(frozen=True, slots=True)
class _Membership:
    message_model: MessageModel
    subscriptions: tuple[Subscription, ...]


class ConsumerRegistry:
    """The live consumer groups of one broker, over its client sessions.

    Args:
        sessions: the client sessions (liveness, channels); the registry listens for removals.
        locks: the queue lock table whose locks a leaving member gives up, if any.
        limits: the bounds (``ConsumerSettings``).
    """

    def __init__(
        self,
        sessions: clients.ClientRegistry,
        *,
        locks: queue_locks.RebalanceLockManager | None = None,
        limits: broker_settings.ConsumerSettings | None = None,
    ) -> None:
        self._sessions = sessions
        self._locks = locks
        self._limits = limits or broker_settings.ConsumerSettings()
        self._groups: dict[ids.GroupName, dict[ids.ClientId, _Membership]] = {}
        self._groups_of: dict[ids.ClientId, set[ids.GroupName]] = {}
        self._listeners: list[MembershipListener] = []
        sessions.add_removal_listener(self._client_gone)

    def add_listener(self, listener: MembershipListener) -> None:
        """Call ``listener`` after every membership change from now on."""
        assert len(self._listeners) < LISTENERS_MAX, "too many membership listeners"
        self._listeners.append(listener)

    def register(
        self,
        group: ids.GroupName,
        client_id: ids.ClientId,
        *,
        message_model: MessageModel = MessageModel.CLUSTERING,
        subscriptions: Iterable[Subscription] = (),
        channel: object | None = None,
    ) -> MembershipEvent | None:
        """Join or refresh ``client_id`` in ``group`` and mark the client as seen now.

        Args:
            group: the consumer group.
            client_id: the member.
            message_model: how it consumes.
            subscriptions: its topics (one per topic; a later duplicate wins).
            channel: the channel it reported over, kept on its session when given.

        Returns:
            JOINED, CHANGED, or ``None`` when nothing but liveness changed.

        Raises:
            TooManyRequestsError: a bound (groups, members per group, subscriptions, sessions)
                would be exceeded; nothing changed.
        """
        by_topic = {s.topic: s for s in subscriptions}
        subs = tuple(sorted(by_topic.values(), key=lambda s: s.topic))
        self._check_room(group, client_id, len(subs))
        session = self._sessions.touch(client_id)
        if channel is not None:
            session.channel = channel
        members = self._groups.setdefault(group, {})
        before = members.get(client_id)
        membership = _Membership(message_model, subs)
        if before == membership:
            return None
        members[client_id] = membership
        self._groups_of.setdefault(client_id, set()).add(group)
        event = MembershipEvent.JOINED if before is None else MembershipEvent.CHANGED
        _log.info("consumer %s %s group %s", client_id, event.value.lower(), group)
        self._notify(group, client_id, event)
        return event

    def unregister(self, group: ids.GroupName, client_id: ids.ClientId) -> bool:
        """Take ``client_id`` out of ``group`` only (Remoting ``UNREGISTER_CLIENT``) and
        release its locks there; returns whether it was a member."""
        if not self._leave(group, client_id):
            return False
        if self._locks is not None:
            self._locks.release_client(client_id, group)
        self._notify(group, client_id, MembershipEvent.LEFT)
        return True

    def members(self, group: ids.GroupName) -> list[ConsumerMember]:
        """The group's live members, sorted by client id (empty for an unknown group)."""
        found = []
        for client_id, membership in sorted(self._groups.get(group, {}).items()):
            session = self._sessions.get(client_id)
            assert session is not None, "a member without a session"
            found.append(
                ConsumerMember(
                    client_id=client_id,
                    channel=session.channel,
                    last_seen_ms=session.last_seen_ms,
                    message_model=membership.message_model,
                    subscriptions=membership.subscriptions,
                )
            )
        return found

    def member(self, group: ids.GroupName, client_id: ids.ClientId) -> ConsumerMember | None:
        """One member, or ``None`` when ``client_id`` is not in ``group``."""
        return next((m for m in self.members(group) if m.client_id == client_id), None)

    def client_ids(
        self,
        group: ids.GroupName,
        *,
        topic: str | None = None,
        model: MessageModel | None = None,
    ) -> list[ids.ClientId]:
        """The members' client ids, sorted (RocketMQ ``getAllClientId``, which the allocation
        strategies take), optionally only those subscribed to ``topic`` and in ``model``."""
        return [
            m.client_id
            for m in self.members(group)
            if (topic is None or m.subscribes(topic))
            and (model is None or m.message_model is model)
        ]

    def groups(self) -> list[ids.GroupName]:
        """Every group with a live member, sorted."""
        return sorted(self._groups)

    def groups_of(self, client_id: ids.ClientId) -> list[ids.GroupName]:
        """The groups ``client_id`` is a member of, sorted."""
        return sorted(self._groups_of.get(client_id, ()))

    def _check_room(self, group: ids.GroupName, client_id: ids.ClientId, subs: int) -> None:
        limits = self._limits
        if subs > limits.subscriptions_per_member_max:
            raise errors.TooManyRequestsError(
                f"{subs} subscriptions exceed subscriptions_per_member_max "
                f"{limits.subscriptions_per_member_max}"
            )
        members = self._groups.get(group)
        if members is None and len(self._groups) >= limits.groups_max:
            raise errors.TooManyRequestsError(
                f"too many consumer groups with live members ({limits.groups_max})"
            )
        full = members is not None and len(members) >= limits.members_per_group_max
        if full and members is not None and client_id not in members:
            raise errors.TooManyRequestsError(
                f"group {group!r} has {len(members)} live members already"
            )

    def _leave(self, group: ids.GroupName, client_id: ids.ClientId) -> bool:
        members = self._groups.get(group)
        if members is None or members.pop(client_id, None) is None:
            return False
        if not members:
            del self._groups[group]
        groups = self._groups_of[client_id]
        groups.discard(group)
        if not groups:
            del self._groups_of[client_id]
        _log.info("consumer %s left group %s", client_id, group)
        return True

    def _client_gone(self, client_id: ids.ClientId) -> None:
        """The session is gone: leave every group, give up every lock."""
        if self._locks is not None:
            self._locks.release_client(client_id)
        for group in self.groups_of(client_id):
            self._leave(group, client_id)
            self._notify(group, client_id, MembershipEvent.LEFT)

    def _notify(
        self, group: ids.GroupName, client_id: ids.ClientId, event: MembershipEvent
    ) -> None:
        if not self._listeners:
            return
        change = MembershipChange(group, client_id, event, tuple(self.members(group)))
        for listener in self._listeners:
            listener(change)
