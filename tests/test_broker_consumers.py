"""The consumer registry and the queue lock table keep RocketMQ's rules at their edges."""

from __future__ import annotations

import pytest

from ariane.broker import settings
from ariane.broker.tables import clients, consumers, queue_locks
from ariane.common import clock, errors, ids, route

G = ids.GroupName("g")
A = ids.ClientId("client-a")
B = ids.ClientId("client-b")
C = ids.ClientId("client-c")
ORDERS = consumers.Subscription(ids.TopicName("orders"))


def _q(queue_id: int, broker: str = "broker-a") -> route.MessageQueue:
    return route.MessageQueue(
        ids.TopicName("orders"), ids.BrokerName(broker), ids.QueueId(queue_id)
    )


def _tables(
    **limits: int,
) -> tuple[
    clock.ManualClock,
    clients.ClientRegistry,
    consumers.ConsumerRegistry,
    queue_locks.RebalanceLockManager,
]:
    time = clock.ManualClock()
    sessions = clients.ClientRegistry(time=time, expired_ms=120_000)
    locks = queue_locks.RebalanceLockManager(time=time)
    registry = consumers.ConsumerRegistry(
        sessions, locks=locks, limits=settings.ConsumerSettings(**limits)
    )
    return time, sessions, registry, locks


# -- consumer registry ---------------------------------------------------------------------------


def test_members_join_sorted_and_listeners_hear_each_change() -> None:
    """Joins, a subscription change and a leave reach the listener with the group as it is after
    the change; a repeated identical report changes nothing."""
    _, sessions, registry, _ = _tables()
    heard: list[tuple[str, str, list[str]]] = []
    registry.add_listener(
        lambda c: heard.append((c.event.value, c.client_id, [m.client_id for m in c.members]))
    )
    assert registry.register(G, B, subscriptions=[ORDERS]) is consumers.MembershipEvent.JOINED
    assert registry.register(G, A, subscriptions=[ORDERS]) is consumers.MembershipEvent.JOINED
    assert registry.register(G, A, subscriptions=[ORDERS]) is None
    other = consumers.Subscription(ids.TopicName("other"))
    assert registry.register(G, A, subscriptions=[ORDERS, other]) is (
        consumers.MembershipEvent.CHANGED
    )
    sessions.remove(B)
    assert heard == [
        ("JOINED", B, [B]),
        ("JOINED", A, [A, B]),
        ("CHANGED", A, [A, B]),
        ("LEFT", B, [A]),
    ]
    assert registry.client_ids(G) == [A]
    assert registry.client_ids(G, topic="orders") == [A]
    assert registry.client_ids(G, topic="nothing") == []


def test_a_member_idle_past_the_expiry_is_dropped_and_not_one_ms_before() -> None:
    """With a 120 s expiry a member silent for exactly 120 s stays; at 120.001 s it is gone,
    and a member that called in meanwhile stays."""
    time, sessions, registry, _ = _tables()
    registry.register(G, A, subscriptions=[ORDERS])
    registry.register(G, B, subscriptions=[ORDERS])
    time.advance_ms(60_000)
    sessions.touch(B)  # any call of B counts as a sign of life
    time.advance_ms(60_000)
    assert sessions.expire() == []
    assert registry.client_ids(G) == [A, B]
    time.advance_ms(1)
    assert sessions.expire() == [A]
    assert registry.client_ids(G) == [B]
    assert registry.groups_of(A) == []


def test_a_channel_close_drops_only_the_clients_still_on_that_channel() -> None:
    """A stream that ended after the client reconnected on a new one does not drop the client."""
    _, sessions, registry, _ = _tables()
    old, new = object(), object()
    registry.register(G, A, subscriptions=[ORDERS], channel=old)
    registry.register(G, B, subscriptions=[ORDERS], channel=old)
    registry.register(G, A, subscriptions=[ORDERS], channel=new)
    assert sessions.close_channel(old) == [B]
    assert registry.client_ids(G) == [A]
    assert registry.members(G)[0].channel is new


def test_message_models_split_clustering_from_broadcasting_members() -> None:
    """client_ids can ask for the CLUSTERING members only (the ones that share queues)."""
    _, _, registry, _ = _tables()
    registry.register(G, A, subscriptions=[ORDERS])
    registry.register(
        G, B, subscriptions=[ORDERS], message_model=consumers.MessageModel.BROADCASTING
    )
    assert registry.client_ids(G, model=consumers.MessageModel.CLUSTERING) == [A]
    assert registry.client_ids(G) == [A, B]


def test_unregister_leaves_one_group_and_its_locks_only() -> None:
    """A Remoting UNREGISTER_CLIENT of one group keeps the client's other group and locks."""
    _, _, registry, locks = _tables()
    h = ids.GroupName("h")
    registry.register(G, A, subscriptions=[ORDERS])
    registry.register(h, A, subscriptions=[ORDERS])
    locks.lock_batch(G, [_q(0)], A)
    locks.lock_batch(h, [_q(0)], A)
    assert registry.unregister(G, A)
    assert not registry.unregister(G, A)
    assert registry.groups_of(A) == [h]
    assert registry.groups() == [h]
    assert locks.holder(G, _q(0)) is None
    assert locks.holder(h, _q(0)) == A


def test_bounds_refuse_with_too_many_requests_and_change_nothing() -> None:
    """Groups, members per group and subscriptions per member are bounded."""
    _, _, registry, _ = _tables(
        groups_max=1, members_per_group_max=1, subscriptions_per_member_max=1
    )
    registry.register(G, A, subscriptions=[ORDERS])
    with pytest.raises(errors.TooManyRequestsError):
        registry.register(ids.GroupName("h"), B, subscriptions=[ORDERS])
    with pytest.raises(errors.TooManyRequestsError):
        registry.register(G, B, subscriptions=[ORDERS])
    two = [ORDERS, consumers.Subscription(ids.TopicName("other"))]
    with pytest.raises(errors.TooManyRequestsError):
        registry.register(G, A, subscriptions=two)
    assert registry.client_ids(G) == [A]
    assert registry.members(G)[0].subscriptions == (ORDERS,)
    assert registry.groups_of(B) == []


def test_termination_releases_the_clients_locks() -> None:
    """A client that goes (NotifyClientTermination removes its session) gives up its locks, so
    another client gets the queues at once rather than after 60 s."""
    _, sessions, registry, locks = _tables()
    registry.register(G, A, subscriptions=[ORDERS])
    assert locks.lock_batch(G, [_q(0), _q(1)], A) == {_q(0), _q(1)}
    assert locks.lock_batch(G, [_q(0)], B) == set()
    sessions.remove(A)
    assert locks.lock_batch(G, [_q(0), _q(1)], B) == {_q(0), _q(1)}
    assert len(locks) == 2


def test_expiry_and_a_closed_channel_release_the_clients_locks_too() -> None:
    """Whichever way a client goes (silence past the expiry, its channel closing) its locks go
    with it, and only its own."""
    time, sessions, registry, locks = _tables()
    channel = object()
    registry.register(G, A, subscriptions=[ORDERS])
    registry.register(G, B, subscriptions=[ORDERS], channel=channel)
    registry.register(G, C, subscriptions=[ORDERS])
    for client, queue_id in ((A, 0), (B, 1), (C, 2)):
        locks.lock_batch(G, [_q(queue_id)], client)
    sessions.close_channel(channel)
    assert locks.holder(G, _q(1)) is None
    assert len(locks) == 2
    time.advance_ms(100_000)
    assert locks.lock_batch(G, [_q(2)], C) == {_q(2)}  # a renewal is a call too
    sessions.touch(C)
    time.advance_ms(20_001)
    assert sessions.expire() == [A]
    assert len(locks) == 1  # A's lock entry is gone, not merely expired
    assert locks.holder(G, _q(2)) == C


# -- queue locks ---------------------------------------------------------------------------------


def test_a_lock_holds_for_exactly_60_s_then_another_client_takes_it() -> None:
    """At exactly 60 s since it was taken the lock still holds; 1 ms later it is expired and a
    second client takes it over."""
    time = clock.ManualClock()
    locks = queue_locks.RebalanceLockManager(time=time)
    assert locks.lock_batch(G, [_q(0)], A) == {_q(0)}
    time.advance_ms(60_000)
    assert locks.lock_batch(G, [_q(0)], B) == set()
    assert locks.is_locked(G, _q(0), A)
    time.advance_ms(1)
    assert not locks.is_locked(G, _q(0), A)
    assert locks.lock_batch(G, [_q(0)], B) == {_q(0)}
    assert locks.holder(G, _q(0)) == B


def test_renewal_at_59_999_ms_restarts_the_60_s() -> None:
    """Re-locking just before expiry renews the lock for another full 60 s."""
    time = clock.ManualClock()
    locks = queue_locks.RebalanceLockManager(time=time)
    locks.lock_batch(G, [_q(0)], A)
    time.advance_ms(59_999)
    assert locks.lock_batch(G, [_q(0)], A) == {_q(0)}
    time.advance_ms(60_000)
    assert locks.lock_batch(G, [_q(0)], B) == set()
    time.advance_ms(1)
    assert locks.lock_batch(G, [_q(0)], B) == {_q(0)}


def test_two_clients_racing_for_a_batch_split_it_first_come_first_served() -> None:
    """Two clients locking overlapping batches at the same instant: each queue goes to whoever
    asked first, the other gets only the rest; groups do not share locks."""
    locks = queue_locks.RebalanceLockManager(time=clock.ManualClock())
    assert locks.lock_batch(G, [_q(0), _q(1)], A) == {_q(0), _q(1)}
    assert locks.lock_batch(G, [_q(1), _q(2)], B) == {_q(2)}
    assert locks.lock_batch(ids.GroupName("h"), [_q(1)], B) == {_q(1)}
    assert {q: locks.holder(G, q) for q in (_q(0), _q(1), _q(2))} == {
        _q(0): A,
        _q(1): A,
        _q(2): B,
    }


def test_only_the_holder_unlocks() -> None:
    """An unlock by another client releases nothing; the holder's releases its queues."""
    locks = queue_locks.RebalanceLockManager(time=clock.ManualClock())
    locks.lock_batch(G, [_q(0), _q(1)], A)
    assert locks.unlock_batch(G, [_q(0), _q(1)], B) == set()
    assert locks.unlock_batch(G, [_q(0), _q(5)], A) == {_q(0)}
    assert locks.holder(G, _q(0)) is None
    assert locks.holder(G, _q(1)) == A


def test_the_lock_table_is_bounded_and_reuses_expired_room() -> None:
    """Beyond locks_max a new lock is not granted until an expired one can be purged."""
    time = clock.ManualClock()
    locks = queue_locks.RebalanceLockManager(time=time, locks_max=2)
    assert locks.lock_batch(G, [_q(0), _q(1), _q(2)], A) == {_q(0), _q(1)}
    time.advance_ms(60_001)
    assert locks.lock_batch(G, [_q(2)], B) == {_q(2)}
    assert len(locks) == 1
    assert locks.release_client(B) == 1
    assert len(locks) == 0
