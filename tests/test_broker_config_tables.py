"""The broker's topic, subscription-group and consumer-offset tables validate, bound and persist."""

from __future__ import annotations

import json
import pathlib

import pytest

from ariane.broker import settings
from ariane.broker.tables import offsets, persistence, subscriptions, topic_config
from ariane.common import allocate, clock, errors, ids, message, route

T = ids.TopicName
G = ids.GroupName
Q = ids.QueueId
O = ids.QueueOffset  # noqa: E741


def _topics(
    root: pathlib.Path, time: clock.ManualClock | None = None, **overrides: object
) -> topic_config.TopicConfigManager:
    return topic_config.TopicConfigManager(
        persistence.config_path(root, topic_config.FILE_NAME),
        topic_settings=settings.TopicSettings(**overrides),  # type: ignore[arg-type]
        time=time or clock.ManualClock(),
    )


def _groups(root: pathlib.Path, **overrides: object) -> subscriptions.SubscriptionGroupManager:
    return subscriptions.SubscriptionGroupManager(
        persistence.config_path(root, subscriptions.FILE_NAME),
        group_settings=settings.SubscriptionSettings(**overrides),  # type: ignore[arg-type]
        time=clock.ManualClock(),
    )


def _offsets(root: pathlib.Path, entries_max: int = 1000) -> offsets.ConsumerOffsetManager:
    return offsets.ConsumerOffsetManager(
        persistence.config_path(root, offsets.FILE_NAME),
        offset_settings=settings.OffsetSettings(offset_entries_max=entries_max),
    )


def test_topics_survive_reopen_with_their_data_version(tmp_path: pathlib.Path) -> None:
    """Created topics, their fields and the data version are read back after a restart."""
    time = clock.ManualClock(start_ms=5_000)
    manager = _topics(tmp_path, time)
    fifo_topic = topic_config.TopicConfig(
        name=T("orders"),
        read_queue_nums=4,
        write_queue_nums=2,
        perm=route.Perm.READ,
        message_type=message.MessageType.FIFO,
        retention_hours=48,
    )
    manager.create_or_update(fifo_topic)
    time.advance_ms(10)
    manager.create_or_update(topic_config.TopicConfig(name=T("audit")))
    version = manager.data_version
    assert version.counter == 2 and version.timestamp_ms == 5_010
    assert (tmp_path / "config" / "topics.json").exists()

    reopened = _topics(tmp_path)
    assert reopened.get("orders") == fifo_topic
    assert [t.name for t in reopened.list_all()] == ["audit", "orders"]
    assert reopened.data_version == version


def test_every_change_bumps_the_data_version_and_a_no_op_does_not(tmp_path: pathlib.Path) -> None:
    """Create, update and delete each change the version; re-putting the same config does not."""
    manager = _topics(tmp_path)
    seen = [manager.data_version.counter]
    config = topic_config.TopicConfig(name=T("t1"))
    manager.create_or_update(config)
    seen.append(manager.data_version.counter)
    manager.create_or_update(config)
    seen.append(manager.data_version.counter)
    manager.create_or_update(topic_config.TopicConfig(name=T("t1"), write_queue_nums=3))
    seen.append(manager.data_version.counter)
    assert manager.delete("t1") is True
    seen.append(manager.data_version.counter)
    assert manager.delete("t1") is False
    seen.append(manager.data_version.counter)
    assert seen == [0, 1, 1, 2, 3, 3]


@pytest.mark.parametrize(
    "bad",
    [
        topic_config.TopicConfig(name=T("has space")),
        topic_config.TopicConfig(name=T("SCHEDULE_TOPIC_XXXX")),
        topic_config.TopicConfig(name=T("q"), read_queue_nums=0),
        topic_config.TopicConfig(name=T("q"), write_queue_nums=17),
        topic_config.TopicConfig(name=T("q"), perm=route.Perm(16)),
        topic_config.TopicConfig(name=T("q"), retention_hours=0),
    ],
)
def test_illegal_topic_configs_are_refused_and_not_stored(
    tmp_path: pathlib.Path, bad: topic_config.TopicConfig
) -> None:
    """Bad names, queue counts outside 1..queue_nums_max, unknown perm bits, bad retention."""
    manager = _topics(tmp_path, queue_nums_max=16)
    with pytest.raises(errors.IllegalTopicError):
        manager.create_or_update(bad)
    assert len(manager) == 0
    assert manager.data_version.counter == 0


def test_system_topics_need_the_internal_flag(tmp_path: pathlib.Path) -> None:
    """Internal callers may create reserved system topics; the admin path may not."""
    manager = _topics(tmp_path)
    schedule = topic_config.TopicConfig(name=T("SCHEDULE_TOPIC_XXXX"), read_queue_nums=18)
    assert manager.create_or_update(schedule, system=True) == schedule


def test_topic_count_is_bounded_but_updates_still_pass(tmp_path: pathlib.Path) -> None:
    """At topic_count_max a new topic is refused while an existing one can still change."""
    manager = _topics(tmp_path, topic_count_max=2)
    manager.create_or_update(topic_config.TopicConfig(name=T("a")))
    manager.create_or_update(topic_config.TopicConfig(name=T("b")))
    with pytest.raises(errors.TooManyRequestsError):
        manager.create_or_update(topic_config.TopicConfig(name=T("c")))
    manager.create_or_update(topic_config.TopicConfig(name=T("a"), read_queue_nums=1))
    assert manager.get("a") == topic_config.TopicConfig(name=T("a"), read_queue_nums=1)
    assert manager.get("c") is None


def test_unknown_topics_are_rejected_unless_a_producer_may_auto_create(
    tmp_path: pathlib.Path,
) -> None:
    """Auto-create is off by default; when on, only the send path creates, with default queues."""
    manager = _topics(tmp_path)
    with pytest.raises(errors.TopicNotFoundError):
        manager.require("ghost", auto_create=True)
    auto = _topics(tmp_path / "auto", auto_create_topic_enable=True, default_queue_nums=3)
    with pytest.raises(errors.TopicNotFoundError):
        auto.require("ghost")
    created = auto.require("ghost", auto_create=True)
    assert (created.read_queue_nums, created.write_queue_nums) == (3, 3)
    assert auto.require("ghost") == created
    with pytest.raises(errors.IllegalTopicError):
        auto.require("rmq_sys_x", auto_create=True)


def test_retry_and_dlq_topics_are_created_on_demand_once(tmp_path: pathlib.Path) -> None:
    """%RETRY%<group> and %DLQ%<group> get 1 read+write queue; a second call changes nothing."""
    manager = _topics(tmp_path)
    dlq = manager.ensure_dlq_topic(G("billing"))
    retry = manager.ensure_retry_topic(G("billing"))
    assert dlq.name == "%DLQ%billing" and retry.name == "%RETRY%billing"
    for config in (dlq, retry):
        assert (config.read_queue_nums, config.write_queue_nums) == (1, 1)
        assert config.readable and config.writeable
    version = manager.data_version
    assert manager.ensure_dlq_topic(G("billing")) == dlq
    assert manager.data_version == version


def test_a_failed_write_leaves_the_table_unchanged(tmp_path: pathlib.Path) -> None:
    """If the file cannot be written the new topic is not kept and the version stays."""
    manager = _topics(tmp_path)
    (tmp_path / "config").write_text("a file where the config directory should be")
    with pytest.raises(OSError):
        manager.create_or_update(topic_config.TopicConfig(name=T("t")))
    assert manager.get("t") is None
    assert manager.data_version.counter == 0


def test_a_corrupt_table_file_is_reported_not_ignored(tmp_path: pathlib.Path) -> None:
    """A topics.json that does not parse stops the load instead of starting empty."""
    path = persistence.config_path(tmp_path, topic_config.FILE_NAME)
    path.parent.mkdir(parents=True)
    path.write_text("{not json")
    with pytest.raises(persistence.CorruptMetadataError):
        _topics(tmp_path)
    path.write_text(json.dumps({"data_version": {"counter": 1, "timestamp_ms": 0}, "topics": []}))
    with pytest.raises(persistence.CorruptMetadataError):
        _topics(tmp_path)


def test_groups_auto_create_on_first_use_and_survive_reopen(tmp_path: pathlib.Path) -> None:
    """require() creates a default group (17 attempts); an update with a policy persists."""
    manager = _groups(tmp_path)
    created = manager.require("billing")
    assert created.max_delivery_attempts == 17 and created.retry_max_times == 16
    assert created.effective_retry_policy() == subscriptions.DEFAULT_RETRY_POLICY
    policy = subscriptions.GroupRetryPolicy(
        kind=subscriptions.GroupRetryPolicyType.EXPONENTIAL, initial_ms=1000, max_ms=8000
    )
    updated = subscriptions.SubscriptionGroupConfig(
        group=G("billing"), consume_orderly=True, max_delivery_attempts=4, retry_policy=policy
    )
    manager.create_or_update(updated)
    reopened = _groups(tmp_path)
    assert reopened.get("billing") == updated
    assert reopened.data_version.counter == 2


def test_a_groups_allocation_strategy_persists_and_old_files_read_as_avg(
    tmp_path: pathlib.Path,
) -> None:
    """The per-group allocation strategy and CONFIG queues survive a reopen; a group stored
    before the field existed reads as AVG; an unknown strategy name is a corrupt file."""
    manager = _groups(tmp_path)
    queue = route.MessageQueue(T("orders"), ids.BrokerName("broker-a"), Q(3))
    config = subscriptions.SubscriptionGroupConfig(
        group=G("hashing"),
        allocate_strategy=allocate.AllocateStrategy.CONFIG,
        allocate_config_queues=(queue,),
    )
    manager.create_or_update(config)
    assert _groups(tmp_path).get("hashing") == config
    raw = config.to_json()
    del raw["allocate_strategy"], raw["allocate_config_queues"]
    old = subscriptions.SubscriptionGroupConfig.from_json(raw)
    assert old.allocate_strategy is allocate.AllocateStrategy.AVG
    assert old.allocate_config_queues == ()
    with pytest.raises(persistence.CorruptMetadataError):
        subscriptions.SubscriptionGroupConfig.from_json({**raw, "allocate_strategy": "RANDOM"})


def test_group_rules_and_bounds(tmp_path: pathlib.Path) -> None:
    """Unknown groups fail without auto-create; bad names, attempts and policies are refused."""
    strict = _groups(tmp_path, auto_create_subscription_group=False, group_count_max=1)
    with pytest.raises(errors.ConsumerGroupNotFoundError):
        strict.require("g1")
    with pytest.raises(errors.IllegalConsumerGroupError):
        strict.require("bad name")
    strict.create_or_update(subscriptions.SubscriptionGroupConfig(group=G("g1")))
    with pytest.raises(errors.TooManyRequestsError):
        strict.create_or_update(subscriptions.SubscriptionGroupConfig(group=G("g2")))
    for bad in (
        subscriptions.SubscriptionGroupConfig(group=G("g1"), max_delivery_attempts=0),
        subscriptions.SubscriptionGroupConfig(
            group=G("g1"), retry_policy=subscriptions.GroupRetryPolicy(delays_ms=())
        ),
        subscriptions.SubscriptionGroupConfig(
            group=G("g1"),
            retry_policy=subscriptions.GroupRetryPolicy(
                kind=subscriptions.GroupRetryPolicyType.EXPONENTIAL, initial_ms=10, max_ms=5
            ),
        ),
    ):
        with pytest.raises(errors.IllegalConsumerGroupError):
            strict.create_or_update(bad)
    assert strict.get("g1") == subscriptions.SubscriptionGroupConfig(group=G("g1"))


def test_retry_policies_follow_rocketmq_defaults() -> None:
    """Customized: 1 s, 5 s, …, last one repeats; exponential: doubling, capped; FIFO: 3 s."""
    default = subscriptions.DEFAULT_RETRY_POLICY
    assert [default.next_delay_ms(a) for a in (1, 2, 3)] == [1_000, 5_000, 10_000]
    assert default.next_delay_ms(18) == default.next_delay_ms(500) == 7_200_000
    exponential = subscriptions.GroupRetryPolicy(
        kind=subscriptions.GroupRetryPolicyType.EXPONENTIAL
    )
    assert [exponential.next_delay_ms(a) for a in (1, 2, 3)] == [5_000, 10_000, 20_000]
    assert exponential.next_delay_ms(10_000) == 7_200_000
    fifo_group = subscriptions.SubscriptionGroupConfig(group=G("f"), consume_orderly=True)
    assert fifo_group.effective_retry_policy().next_delay_ms(7) == 3_000


def test_offsets_commit_query_reset_and_survive_persist(tmp_path: pathlib.Path) -> None:
    """Committed offsets come back after persist + reopen; reset and remove_group apply."""
    table = _offsets(tmp_path)
    assert table.query(G("g"), T("t"), Q(0)) is None
    table.commit(G("g"), T("t"), Q(0), O(12))
    table.commit(G("g"), T("t"), Q(1), O(40))
    table.commit(G("h"), T("t"), Q(0), O(3))
    table.reset(G("g"), T("t"), {Q(1): O(5), Q(2): O(7)})
    assert table.offsets_of(G("g"), T("t")) == {0: 12, 1: 5, 2: 7}
    assert table.persist() is True
    assert table.persist() is False  # nothing changed since

    reopened = _offsets(tmp_path)
    assert reopened.query(G("g"), T("t"), Q(2)) == 7
    assert reopened.groups_of_topic(T("t")) == ("g", "h")
    assert len(reopened) == 4
    assert reopened.remove_group(G("g")) == 3
    assert reopened.dirty and len(reopened) == 1
    reopened.persist()
    assert _offsets(tmp_path).offsets_of(G("g"), T("t")) == {}
    raw = json.loads((tmp_path / "config" / "consumerOffset.json").read_text())
    assert raw == {"offsets": {"t@h": {"0": 3}}}


def test_unpersisted_commits_are_lost_on_restart(tmp_path: pathlib.Path) -> None:
    """Only what persist() wrote survives: a later commit is rewound (at-least-once)."""
    table = _offsets(tmp_path)
    table.commit(G("g"), T("t"), Q(0), O(10))
    table.persist()
    table.commit(G("g"), T("t"), Q(0), O(20))
    assert _offsets(tmp_path).query(G("g"), T("t"), Q(0)) == 10


def test_offset_table_is_bounded_and_rejects_negative_offsets(tmp_path: pathlib.Path) -> None:
    """A new entry past offset_entries_max is refused; overwriting an entry is still allowed."""
    table = _offsets(tmp_path, entries_max=2)
    table.commit(G("g"), T("t"), Q(0), O(1))
    table.commit(G("g"), T("t"), Q(1), O(1))
    with pytest.raises(errors.TooManyRequestsError):
        table.commit(G("g"), T("u"), Q(0), O(1))
    with pytest.raises(errors.TooManyRequestsError):
        table.reset(G("g"), T("t"), {Q(0): O(2), Q(5): O(2)})
    assert table.query(G("g"), T("t"), Q(0)) == 1  # the failed reset applied nothing
    table.commit(G("g"), T("t"), Q(0), O(9))
    with pytest.raises(errors.IllegalOffsetError):
        table.commit(G("g"), T("t"), Q(0), O(-1))
    assert len(table) == 2 and table.query(G("g"), T("t"), Q(0)) == 9


def test_settings_refuse_values_outside_their_bounds() -> None:
    """A zero or absurd bound fails at construction with the field named."""
    with pytest.raises(ValueError, match="queue_nums_max"):
        settings.TopicSettings(queue_nums_max=0)
    with pytest.raises(ValueError, match="default_queue_nums"):
        settings.TopicSettings(queue_nums_max=4, default_queue_nums=8)
    with pytest.raises(ValueError, match="parked_requests_max"):
        settings.LongPollingSettings(parked_requests_max=0)
    assert settings.CoreSettings().pop.inflight_messages_max > 0


def test_a_topic_contributes_its_queue_data_to_the_route() -> None:
    """QueueData for registration carries the queue counts and perm bits of the topic."""
    config = topic_config.TopicConfig(
        name=T("t"), read_queue_nums=4, write_queue_nums=2, perm=route.Perm.WRITE
    )
    data = config.queue_data(ids.BrokerName("broker-a"))
    assert data == route.QueueData(
        broker_name=ids.BrokerName("broker-a"), read_queue_nums=4, write_queue_nums=2, perm=2
    )
    assert config.writeable and not config.readable


def test_clamp_pulls_offsets_past_the_queue_end_back_to_it(
    tmp_path: pathlib.Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Proves ``clamp_to`` lowers exactly the offsets above their queue's end (an unknown queue
    ends at 0) to that end, leaves the others, marks the table dirty and logs one line per
    group with its count."""
    table = _offsets(tmp_path)
    table.commit(G("g"), T("t"), Q(0), O(747))  # the chaos run's stale offset
    table.commit(G("g"), T("t"), Q(1), O(5))
    table.commit(G("g"), T("u"), Q(0), O(3))  # a queue this store lacks
    table.commit(G("h"), T("t"), Q(0), O(737))  # exactly at the end: kept
    table.persist()
    ends = {(T("t"), Q(0)): O(737), (T("t"), Q(1)): O(9)}

    with caplog.at_level("WARNING"):
        clamped = table.clamp_to(lambda t, q: ends.get((t, q), O(0)), why="promotion")

    assert clamped == {"g": 2}
    assert table.offsets_of(G("g"), T("t")) == {0: 737, 1: 5}
    assert table.offsets_of(G("g"), T("u")) == {0: 0}
    assert table.query(G("h"), T("t"), Q(0)) == 737
    assert table.dirty
    lines = [r.getMessage() for r in caplog.records if "past their queue's end" in r.getMessage()]
    assert lines == [
        "promotion: 2 consumer offsets of group g were past their queue's end; pulled back to it"
    ]
    assert table.clamp_to(lambda t, q: ends.get((t, q), O(0)), why="again") == {}
