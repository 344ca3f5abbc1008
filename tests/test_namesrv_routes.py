"""RouteInfoManager keeps RocketMQ's route tables: register, route, expire, unregister, bound."""

from __future__ import annotations

import pytest

from ariane.common import clock, errors, ids, message
from ariane.namesrv import route_info_manager as rim

NORMAL = message.MessageType.NORMAL
RW = 6


def topic_config(
    name: str,
    *,
    read: int = 4,
    write: int = 4,
    perm: int = RW,
    kind: message.MessageType = NORMAL,
) -> rim.RegisteredTopic:
    return rim.RegisteredTopic(ids.TopicName(name), read, write, perm, kind)


def registration(
    broker_name: str,
    *configs: rim.RegisteredTopic,
    broker_id: int = 0,
    address: str | None = None,
    cluster: str = "DefaultCluster",
    version: int = 1,
    epoch: int = 0,
) -> rim.BrokerRegistration:
    return rim.BrokerRegistration(
        cluster=ids.ClusterName(cluster),
        broker_name=ids.BrokerName(broker_name),
        broker_id=ids.BrokerId(broker_id),
        client_address=address or f"{broker_name}-{broker_id}.brokers:8081",
        ha_address=f"{broker_name}-{broker_id}.brokers:10912",
        data_version=version,
        topic_configs=configs,
        epoch=epoch,
        lease_ms=3_000 if epoch else 0,
    )


@pytest.fixture
def manual() -> clock.ManualClock:
    return clock.ManualClock()


@pytest.fixture
def manager(manual: clock.ManualClock) -> rim.RouteInfoManager:
    return rim.RouteInfoManager(settings=rim.RouteSettings(), clock=manual)


def topic(name: str) -> ids.TopicName:
    return ids.TopicName(name)


def test_a_registered_master_serves_its_topics(manager: rim.RouteInfoManager) -> None:
    """After one master registers, its topics route to its group with its queue data."""
    group = manager.register_broker(
        registration("broker-a", topic_config("orders", read=8, write=4))
    )
    master = group.master()
    assert master is not None and master.client_address == "broker-a-0.brokers:8081"
    route = manager.pickup_topic_route(topic("orders"))
    assert route.queue_datas == (rim.QueueData(ids.BrokerName("broker-a"), 8, 4, RW, NORMAL),)
    assert [g.broker_name for g in route.broker_groups] == ["broker-a"]
    assert route.broker_groups[0].as_broker_data().master_addr() == "broker-a-0.brokers:8081"
    with pytest.raises(errors.TopicNotFoundError):
        manager.pickup_topic_route(topic("unknown"))


def test_re_registration_replaces_the_groups_topic_configs(manager: rim.RouteInfoManager) -> None:
    """A master's new registration updates changed topics and drops topics it no longer has."""
    manager.register_broker(registration("a", topic_config("t1"), topic_config("t2")))
    manager.register_broker(
        registration(
            "a", topic_config("t1", read=2, write=2, perm=4), topic_config("t3"), version=2
        )
    )
    assert manager.topic_names() == ("t1", "t3")
    (queue_data,) = manager.pickup_topic_route(topic("t1")).queue_datas
    assert (queue_data.read_queue_nums, queue_data.perm) == (2, 4)
    with pytest.raises(errors.TopicNotFoundError):
        manager.pickup_topic_route(topic("t2"))
    assert manager.cluster_info()[0].members[0].data_version == 2


def test_slave_registration_joins_the_group_without_touching_routes(
    manager: rim.RouteInfoManager,
) -> None:
    """A slave (id 1) is listed in its group but its topic configs never change routes."""
    manager.register_broker(registration("a", topic_config("t1")))
    group = manager.register_broker(registration("a", topic_config("other"), broker_id=1))
    assert [m.broker_id for m in group.members] == [0, 1]
    assert group.master() is not None
    assert manager.topic_names() == ("t1",)


def test_a_promoted_slave_replaces_its_old_entry(manager: rim.RouteInfoManager) -> None:
    """A broker re-registering its address under id 0 removes its old slave entry."""
    manager.register_broker(registration("a", broker_id=1, address="pod-1:8081"))
    group = manager.register_broker(registration("a", topic_config("t"), address="pod-1:8081"))
    assert [(m.broker_id, m.client_address) for m in group.members] == [(0, "pod-1:8081")]


def test_expiry_happens_at_120_s_exactly_and_not_before(
    manager: rim.RouteInfoManager, manual: clock.ManualClock
) -> None:
    """A broker silent 119.999 s survives the scan; at 120 s it and its routes are dropped."""
    manager.register_broker(registration("a", topic_config("t")))
    manual.advance_ms(119_999)
    assert manager.scan_not_active_brokers() == []
    assert manager.pickup_topic_route(topic("t")).broker_groups
    manual.advance_ms(1)
    assert manager.scan_not_active_brokers() == [("a", 0)]
    assert manager.cluster_info() == ()
    with pytest.raises(errors.TopicNotFoundError):
        manager.pickup_topic_route(topic("t"))


def test_registration_and_heartbeat_refresh_liveness(
    manager: rim.RouteInfoManager, manual: clock.ManualClock
) -> None:
    """Re-registering or heartbeating within 120 s keeps a broker; only the silent one goes."""
    manager.register_broker(registration("a", topic_config("t")))
    manager.register_broker(registration("b", topic_config("t")))
    manual.advance_ms(100_000)
    manager.register_broker(registration("a", topic_config("t")))
    needs_register = manager.heartbeat(
        cluster=ids.ClusterName("DefaultCluster"),
        broker_name=ids.BrokerName("b"),
        broker_id=ids.BrokerId(0),
        data_version=7,
    )
    assert needs_register is True  # the name server holds version 1, the broker sent 7
    manual.advance_ms(100_000)
    assert manager.scan_not_active_brokers() == []
    manual.advance_ms(20_000)
    assert manager.scan_not_active_brokers() == [("a", 0), ("b", 0)]
    with pytest.raises(errors.NotFoundError):
        manager.heartbeat(
            cluster=ids.ClusterName("DefaultCluster"),
            broker_name=ids.BrokerName("b"),
            broker_id=ids.BrokerId(0),
            data_version=1,
        )


def test_a_group_keeps_its_routes_while_one_member_is_alive(
    manager: rim.RouteInfoManager, manual: clock.ManualClock
) -> None:
    """A silent master is dropped; its group's routes stay while its slave is alive."""
    manager.register_broker(registration("a", topic_config("t")))
    manual.advance_ms(60_000)
    manager.register_broker(registration("a", broker_id=1))
    manual.advance_ms(60_000)
    assert manager.scan_not_active_brokers() == [("a", 0)]
    (group,) = manager.pickup_topic_route(topic("t")).broker_groups
    assert group.master() is None and [m.broker_id for m in group.members] == [1]


def test_unregister_removes_a_broker_at_once(manager: rim.RouteInfoManager) -> None:
    """Unregistering the last member removes the group and its routes; unknown ones are False."""
    manager.register_broker(registration("a", topic_config("t")))

    def unregister(cluster: str, broker_id: int) -> bool:
        return manager.unregister_broker(
            cluster=ids.ClusterName(cluster),
            broker_name=ids.BrokerName("a"),
            broker_id=ids.BrokerId(broker_id),
        )

    assert unregister("DefaultCluster", 3) is False
    assert unregister("Other", 0) is False
    assert unregister("DefaultCluster", 0) is True
    assert manager.cluster_info() == () and manager.topic_names() == ()


def test_several_groups_are_listed_sorted_by_broker_name(manager: rim.RouteInfoManager) -> None:
    """Routes and cluster info list groups by name whatever the registration order."""
    for name in ["broker-c", "broker-a", "broker-b"]:
        manager.register_broker(registration(name, topic_config("t")))
    manager.register_broker(registration("broker-z", topic_config("t"), cluster="Another"))
    route = manager.pickup_topic_route(topic("t"))
    expected = ["broker-a", "broker-b", "broker-c", "broker-z"]
    assert [q.broker_name for q in route.queue_datas] == expected
    assert [g.broker_name for g in route.broker_groups] == expected
    assert [(g.cluster, g.broker_name) for g in manager.cluster_info()] == [
        ("Another", "broker-z"),
        ("DefaultCluster", "broker-a"),
        ("DefaultCluster", "broker-b"),
        ("DefaultCluster", "broker-c"),
    ]


def test_each_groups_message_type_is_kept_per_topic(manager: rim.RouteInfoManager) -> None:
    """MIXED and FIFO topics keep their types through registration."""
    manager.register_broker(
        registration(
            "a",
            topic_config("mixed", kind=message.MessageType.MIXED),
            topic_config("fifo", kind=message.MessageType.FIFO),
        )
    )
    assert [q.message_type for q in manager.pickup_topic_route(topic("mixed")).queue_datas] == [
        message.MessageType.MIXED
    ]
    assert [q.message_type for q in manager.pickup_topic_route(topic("fifo")).queue_datas] == [
        message.MessageType.FIFO
    ]


def test_bounds_refuse_with_too_many_requests_and_change_nothing(
    manual: clock.ManualClock,
) -> None:
    """Exceeding topics_max, broker_groups_max or members_per_group_max is refused whole."""
    settings = rim.RouteSettings(topics_max=2, broker_groups_max=2, members_per_group_max=2)
    manager = rim.RouteInfoManager(settings=settings, clock=manual)
    manager.register_broker(registration("a", topic_config("t1")))
    with pytest.raises(errors.TooManyRequestsError):
        manager.register_broker(
            registration("a", topic_config("t1"), topic_config("t2"), topic_config("t3"))
        )
    assert manager.topic_names() == ("t1",)
    manager.register_broker(registration("b"))
    with pytest.raises(errors.TooManyRequestsError):
        manager.register_broker(registration("c"))
    manager.register_broker(registration("a", broker_id=1))
    with pytest.raises(errors.TooManyRequestsError):
        manager.register_broker(registration("a", broker_id=2))
    assert [g.broker_name for g in manager.cluster_info()] == ["a", "b"]
    assert [m.broker_id for m in manager.cluster_info()[0].members] == [0, 1]


def test_invalid_registrations_are_bad_requests(manager: rim.RouteInfoManager) -> None:
    """Illegal topic names, queue counts, perms, ids and names are refused."""
    bad = [
        registration("a", topic_config("bad topic")),
        registration("a", topic_config("t", read=2000)),
        registration("a", topic_config("t", perm=16)),
        registration("a", broker_id=-1),
        registration("has space"),
        registration(""),
    ]
    for item in bad:
        with pytest.raises(errors.BadRequestError):
            manager.register_broker(item)
    assert manager.cluster_info() == ()


def test_settings_reject_unbounded_values() -> None:
    """Every RouteSettings bound must be positive and finite."""
    with pytest.raises(ValueError, match="topics_max"):
        rim.RouteSettings(topics_max=0)


# -- epochs (DESIGN.md §7: name servers keep the route of the highest epoch) -----------------


def _masters(manager: rim.RouteInfoManager, name: str) -> list[tuple[str, int]]:
    """(client address, epoch) of the id-0 member in the route, in cluster info, per view."""
    route = manager.pickup_topic_route(topic("T"))
    listed = [g.master() for g in route.broker_groups if g.broker_name == name]
    listed += [g.master() for g in manager.cluster_info() if g.broker_name == name]
    return [(m.client_address, m.epoch) for m in listed if m is not None]


def _heartbeat(manager: rim.RouteInfoManager, *, epoch: int) -> bool:
    """BrokerHeartbeat of group g's id 0 at ``epoch`` (data version 1)."""
    return manager.heartbeat(
        cluster=ids.ClusterName("DefaultCluster"),
        broker_name=ids.BrokerName("g"),
        broker_id=ids.BrokerId(0),
        data_version=1,
        epoch=epoch,
    )


def test_a_newer_epoch_master_replaces_the_old_id_0_entry_at_once(
    manager: rim.RouteInfoManager,
) -> None:
    """A promoted slave registering as id 0 with epoch 2 replaces the epoch-1 master in routes
    and cluster info, with no wait for the old entry to expire."""
    manager.register_broker(registration("g", topic_config("T"), address="a:1", epoch=1))
    manager.register_broker(registration("g", topic_config("T"), broker_id=1, address="b:1"))
    manager.register_broker(registration("g", topic_config("T"), address="b:1", epoch=2))
    assert _masters(manager, "g") == [("b:1", 2), ("b:1", 2)]
    assert manager.group_epoch(ids.BrokerName("g")) == 2
    assert [m.broker_id for m in manager.cluster_info()[0].members] == [0]


def test_an_older_epoch_master_is_refused_with_the_current_epoch_and_master(
    manager: rim.RouteInfoManager,
) -> None:
    """The old master re-registering as id 0 at epoch 1 after epoch 2 is refused with
    PRECONDITION_FAILED naming epoch 2 and the new master, and the route keeps the new one."""
    manager.register_broker(registration("g", topic_config("T"), address="a:1", epoch=1))
    manager.register_broker(registration("g", topic_config("T"), address="b:1", epoch=2))
    with pytest.raises(rim.StaleEpochError) as refused:
        manager.register_broker(registration("g", topic_config("T"), address="a:1", epoch=1))
    assert refused.value.code == errors.Code.PRECONDITION_FAILED
    assert refused.value.group_epoch == 2
    assert refused.value.master is not None and refused.value.master.client_address == "b:1"
    assert "epoch 2" in str(refused.value) and "b:1" in str(refused.value)
    assert _masters(manager, "g") == [("b:1", 2), ("b:1", 2)]


def test_a_stale_master_is_told_the_slave_id_the_promotion_freed(
    manager: rim.RouteInfoManager,
) -> None:
    """The refusal of a stale master names, as the id to rejoin as, the id the promoted slave
    left (the lowest one above 0 no member holds), with the new master's HA address; a heartbeat
    refusal names the same."""
    manager.register_broker(registration("g", topic_config("T"), address="a:1", epoch=1))
    manager.register_broker(registration("g", broker_id=1, address="b:1", epoch=1))
    manager.register_broker(registration("g", broker_id=2, address="c:1", epoch=1))
    manager.register_broker(registration("g", topic_config("T"), address="c:1", epoch=2))
    with pytest.raises(rim.StaleEpochError) as refused:
        manager.register_broker(registration("g", topic_config("T"), address="a:1", epoch=1))
    assert refused.value.rejoin_broker_id == 2
    assert refused.value.master is not None and refused.value.master.client_address == "c:1"
    assert refused.value.master.ha_address == "g-0.brokers:10912"
    with pytest.raises(rim.StaleEpochError) as heartbeat:
        _heartbeat(manager, epoch=1)
    assert heartbeat.value.rejoin_broker_id == 2
    assert rim.rejoin_broker_id([]) == 1
    assert rim.rejoin_broker_id([0, 1, 3]) == 2
    assert rim.rejoin_broker_id([0, 1, 2]) == 3


def test_a_stale_master_heartbeat_is_refused_even_after_its_entry_was_dropped(
    manager: rim.RouteInfoManager,
) -> None:
    """A heartbeat of id 0 at an older epoch is refused (not NOT_FOUND), and refreshes nothing."""
    manager.register_broker(registration("g", topic_config("T"), address="a:1", epoch=1))
    manager.register_broker(registration("g", topic_config("T"), address="b:1", epoch=2))
    with pytest.raises(rim.StaleEpochError) as refused:
        _heartbeat(manager, epoch=1)
    assert refused.value.group_epoch == 2
    assert _heartbeat(manager, epoch=2) is False


def test_a_heartbeat_with_another_epoch_than_registered_asks_for_a_registration(
    manager: rim.RouteInfoManager, manual: clock.ManualClock
) -> None:
    """A promoted slave's id-0 heartbeat (epoch 2) arriving before its registration does not
    refresh the epoch-1 master's entry: it asks for a registration instead."""
    manager.register_broker(registration("g", topic_config("T"), address="a:1", epoch=1))
    manual.advance_ms(5_000)
    assert _heartbeat(manager, epoch=2) is True
    master = manager.cluster_info()[0].master()
    assert master is not None and master.heard_ago_ms == 5_000


def test_a_slave_showing_a_newer_epoch_drops_the_stale_master_entry(
    manager: rim.RouteInfoManager,
) -> None:
    """When a slave registers with a newer epoch than the listed master (this name server
    missed the promotion), the master entry leaves the routes and cannot come back."""
    manager.register_broker(registration("g", topic_config("T"), address="a:1", epoch=1))
    manager.register_broker(registration("g", broker_id=1, address="c:1", epoch=2))
    assert [m.broker_id for m in manager.cluster_info()[0].members] == [1]
    with pytest.raises(rim.StaleEpochError):
        manager.register_broker(registration("g", topic_config("T"), address="a:1", epoch=1))


def test_the_group_epoch_outlives_the_expiry_of_every_member(
    manager: rim.RouteInfoManager, manual: clock.ManualClock
) -> None:
    """After the whole group expired (120 s), a master at an older epoch is still refused."""
    manager.register_broker(registration("g", topic_config("T"), address="b:1", epoch=2))
    manual.advance_ms(rim.RouteSettings().broker_channel_expired_ms)
    assert manager.scan_not_active_brokers() == [(ids.BrokerName("g"), ids.BrokerId(0))]
    with pytest.raises(rim.StaleEpochError) as refused:
        manager.register_broker(registration("g", topic_config("T"), address="a:1", epoch=1))
    assert refused.value.master is None


def test_a_stale_master_leaving_does_not_unregister_its_successor(
    manager: rim.RouteInfoManager,
) -> None:
    """UnregisterBroker of id 0 at epoch 1 keeps the epoch-2 master; at epoch 2 it removes it."""
    manager.register_broker(registration("g", topic_config("T"), address="b:1", epoch=2))
    cluster, name, master = ids.ClusterName("DefaultCluster"), ids.BrokerName("g"), ids.BrokerId(0)
    assert not manager.unregister_broker(
        cluster=cluster, broker_name=name, broker_id=master, epoch=1
    )
    assert _masters(manager, "g") == [("b:1", 2), ("b:1", 2)]
    assert manager.unregister_broker(cluster=cluster, broker_name=name, broker_id=master, epoch=2)


def test_group_epochs_of_gone_groups_are_forgotten_beyond_the_bound(
    manual: clock.ManualClock,
) -> None:
    """Epochs of groups no longer present are dropped oldest first past ``group_epochs_max``;
    a present group's epoch is never dropped."""
    settings = rim.RouteSettings(group_epochs_max=2, broker_channel_expired_ms=10)
    manager = rim.RouteInfoManager(settings=settings, clock=manual)
    manager.register_broker(registration("old", epoch=3))
    manual.advance_ms(10)
    manager.scan_not_active_brokers()
    manager.register_broker(registration("g1", epoch=1))
    manager.register_broker(registration("g2", epoch=1))
    assert manager.group_epoch(ids.BrokerName("old")) == 0
    assert manager.group_epoch(ids.BrokerName("g1")) == 1
    assert manager.group_epoch(ids.BrokerName("g2")) == 1
