"""The broker's Admin service against a real BrokerRuntime, served by grpc.aio on 127.0.0.1."""

from __future__ import annotations

import asyncio
import pathlib
from collections.abc import Awaitable, Callable

from admin_testing import AdminCaller, append_request, serving, tiny_settings
from ariane.broker import runtime
from ariane.common import allocate, clock, errors, ids
from ariane.grpcwire import pb

A = pb.admin
T = pb.topic.TopicMessageType
OK = errors.Code.OK
G = ids.GroupName("g")
BILLING = ids.GroupName("billing")
Q0 = ids.QueueId(0)


def run_admin(
    store_dir: pathlib.Path,
    body: Callable[[AdminCaller, runtime.BrokerRuntime], Awaitable[None]],
    *,
    time: clock.Clock | None = None,
    broker_id: int = 0,
) -> None:
    """Open a runtime on ``store_dir``, serve its Admin service and run ``body`` against it."""

    async def main() -> None:
        settings = tiny_settings(store_dir, broker_id=ids.BrokerId(broker_id))
        broker = runtime.BrokerRuntime(settings, time=time or clock.SystemClock())
        try:
            async with serving(broker) as (caller, _):
                await body(caller, broker)
        finally:
            broker.close()

    asyncio.run(main())


def code(response: object) -> errors.Code:
    """The status code of a response, as a ``Code``."""
    return errors.Code(response.status.code)  # type: ignore[attr-defined]


async def create_topic(caller: AdminCaller, name: str, queues: int = 2, perm: int = 0) -> None:
    topic = A.Topic(name=name, read_queue_nums=queues, write_queue_nums=queues, perm=perm)
    answer = await caller.call("CreateTopic", A.CreateTopicRequest(topic=topic))
    assert code(answer) == OK, answer.status


def test_topic_crud_round_trip_persists_across_a_reopen(tmp_path: pathlib.Path) -> None:
    """Created and updated topics list as stored, survive a reopen, and delete for good
    (their traffic stats too)."""

    async def first(caller: AdminCaller, broker: runtime.BrokerRuntime) -> None:
        assert not broker.route_changed.is_set()
        topic = A.Topic(
            name="orders",
            read_queue_nums=4,
            message_type=T.TOPIC_MESSAGE_TYPE_FIFO,
            retention_hours=48,
        )
        created = await caller.call("CreateTopic", A.CreateTopicRequest(topic=topic))
        assert code(created) == OK
        assert (created.topic.read_queue_nums, created.topic.write_queue_nums) == (4, 4)
        assert (created.topic.perm, created.topic.retention_hours) == (6, 48)
        assert broker.route_changed.is_set()
        await create_topic(caller, "plain")
        broker.topics.ensure_retry_topic(ids.GroupName("billing"))
        change = A.Topic(name="orders", write_queue_nums=2, perm=4)
        updated = await caller.call("UpdateTopic", A.UpdateTopicRequest(topic=change))
        assert code(updated) == OK
        assert (updated.topic.read_queue_nums, updated.topic.write_queue_nums) == (4, 2)
        assert updated.topic.message_type == T.TOPIC_MESSAGE_TYPE_FIFO
        assert updated.topic.retention_hours == 48

    async def second(caller: AdminCaller, broker: runtime.BrokerRuntime) -> None:
        listed = await caller.call("ListTopics", A.ListTopicsRequest())
        assert [t.name for t in listed.topics] == ["orders", "plain"]
        orders = listed.topics[0]
        assert (orders.read_queue_nums, orders.write_queue_nums, orders.perm) == (4, 2, 4)
        everything = await caller.call("ListTopics", A.ListTopicsRequest(include_system=True))
        assert [t.name for t in everything.topics] == ["%RETRY%billing", "orders", "plain"]
        broker.offsets.commit(G, ids.TopicName("orders"), Q0, ids.QueueOffset(3))
        broker.counters.traffic.put("orders", 1, 1)
        deleted = await caller.call("DeleteTopic", A.DeleteTopicRequest(name="orders"))
        assert code(deleted) == OK
        assert broker.counters.traffic.view("TOPIC_PUT_NUMS", "orders") is None  # statsAll
        assert broker.offsets.query(G, ids.TopicName("orders"), Q0) is None
        again = await caller.call("DeleteTopic", A.DeleteTopicRequest(name="orders"))
        assert code(again) == errors.Code.TOPIC_NOT_FOUND
        assert "create it first" in again.status.message
        missing = A.UpdateTopicRequest(topic=A.Topic(name="orders", read_queue_nums=1))
        assert code(await caller.call("UpdateTopic", missing)) == errors.Code.TOPIC_NOT_FOUND

    async def third(caller: AdminCaller, broker: runtime.BrokerRuntime) -> None:
        listed = await caller.call("ListTopics", A.ListTopicsRequest())
        assert [t.name for t in listed.topics] == ["plain"]

    run_admin(tmp_path, first)
    run_admin(tmp_path, second)
    run_admin(tmp_path, third)


def test_bad_topic_and_group_requests_answer_the_right_code(tmp_path: pathlib.Path) -> None:
    """Illegal names and values are refused with ILLEGAL_TOPIC / ILLEGAL_CONSUMER_GROUP."""

    async def body(caller: AdminCaller, broker: runtime.BrokerRuntime) -> None:
        bad_topics = [
            (A.Topic(name=""), "empty"),
            (A.Topic(name="bad name!"), "characters"),
            (A.Topic(name="SCHEDULE_TOPIC_XXXX"), "system"),
            (A.Topic(name="t", read_queue_nums=5000), "read_queue_nums"),
            (A.Topic(name="t", perm=99), "perm"),
            (A.Topic(name="t", retention_hours=-5), "retention"),
            (A.Topic(name="t", message_type=42), "message_type"),  # type: ignore[arg-type]
        ]
        for topic, words in bad_topics:
            answer = await caller.call("CreateTopic", A.CreateTopicRequest(topic=topic))
            assert code(answer) == errors.Code.ILLEGAL_TOPIC, topic
            assert words in answer.status.message
        bad_groups = [
            (A.SubscriptionGroup(name=""), "empty"),
            (A.SubscriptionGroup(name="g", max_delivery_attempts=5000), "max_delivery_attempts"),
            (A.SubscriptionGroup(name="g", max_delivery_attempts=-1), "max_delivery_attempts"),
        ]
        policy = pb.v2.RetryPolicy(exponential_backoff=pb.v2.ExponentialBackoff(multiplier=1.5))
        bad_groups.append((A.SubscriptionGroup(name="g", retry_policy=policy), "whole number"))
        for group, words in bad_groups:
            request = A.CreateSubscriptionGroupRequest(group=group)
            answer = await caller.call("CreateSubscriptionGroup", request)
            assert code(answer) == errors.Code.ILLEGAL_CONSUMER_GROUP, group
            assert words in answer.status.message
        lag = await caller.call("GetConsumerLag", A.GetConsumerLagRequest(group="bad group"))
        assert code(lag) == errors.Code.ILLEGAL_CONSUMER_GROUP
        nobody = await caller.call("GetConsumerLag", A.GetConsumerLagRequest(group="nobody"))
        assert code(nobody) == errors.Code.CONSUMER_GROUP_NOT_FOUND
        named = A.GetConsumerLagRequest(group="nobody", topic="t")
        assert (
            code(await caller.call("GetConsumerLag", named)) == errors.Code.CONSUMER_GROUP_NOT_FOUND
        )
        assert len(broker.topics) == 0 and len(broker.groups) == 0

    run_admin(tmp_path, body)


def test_group_crud_and_fifo_switch(tmp_path: pathlib.Path) -> None:
    """Groups are created (or replace an auto-created config), listed, updated and deleted."""

    async def body(caller: AdminCaller, broker: runtime.BrokerRuntime) -> None:
        auto = broker.groups.require("billing")  # first use by a consumer
        state = broker.pop_service.state(auto)
        assert not state.orderly
        policy = pb.v2.RetryPolicy(
            exponential_backoff=pb.v2.ExponentialBackoff(multiplier=3),
        )
        policy.exponential_backoff.initial.FromMilliseconds(1_000)
        policy.exponential_backoff.max.FromMilliseconds(60_000)
        group = A.SubscriptionGroup(
            name="billing", consume_orderly=True, max_delivery_attempts=5, retry_policy=policy
        )
        request = A.CreateSubscriptionGroupRequest(group=group)
        created = await caller.call("CreateSubscriptionGroup", request)
        assert code(created) == OK and "existed" in created.status.message
        stored = broker.groups.get("billing")
        assert stored is not None and stored.consume_orderly and stored.max_delivery_attempts == 5
        assert stored.retry_policy is not None and stored.retry_policy.next_delay_ms(3) == 9_000
        assert broker.pop_service.existing_state(ids.GroupName("billing")) is None  # kind changed
        await caller.call(
            "CreateSubscriptionGroup",
            A.CreateSubscriptionGroupRequest(group=A.SubscriptionGroup(name="audit")),
        )
        listed = await caller.call("ListSubscriptionGroups", A.ListSubscriptionGroupsRequest())
        assert [g.name for g in listed.groups] == ["audit", "billing"]
        audit, billing = listed.groups
        assert (audit.max_delivery_attempts, audit.HasField("retry_policy")) == (17, False)
        assert billing.retry_policy.exponential_backoff.max.ToMilliseconds() == 60_000
        delays = pb.v2.RetryPolicy(customized_backoff=pb.v2.CustomizedBackoff())
        delays.customized_backoff.next.add().FromMilliseconds(2_000)
        change = A.SubscriptionGroup(name="billing", retry_policy=delays)
        request2 = A.UpdateSubscriptionGroupRequest(group=change)
        updated = await caller.call("UpdateSubscriptionGroup", request2)
        assert code(updated) == OK and not updated.group.consume_orderly
        assert [d.ToMilliseconds() for d in updated.group.retry_policy.customized_backoff.next] == [
            2_000
        ]
        broker.offsets.commit(BILLING, ids.TopicName("t"), Q0, ids.QueueOffset(1))
        request3 = A.DeleteSubscriptionGroupRequest(name="billing")
        assert code(await caller.call("DeleteSubscriptionGroup", request3)) == OK
        assert broker.offsets.query(BILLING, ids.TopicName("t"), Q0) is None
        again = await caller.call("DeleteSubscriptionGroup", request3)
        assert code(again) == errors.Code.CONSUMER_GROUP_NOT_FOUND
        request4 = A.UpdateSubscriptionGroupRequest(group=A.SubscriptionGroup(name="billing"))
        gone = await caller.call("UpdateSubscriptionGroup", request4)
        assert code(gone) == errors.Code.CONSUMER_GROUP_NOT_FOUND

    run_admin(tmp_path, body)


def test_lag_follows_appends_commits_and_in_flight_messages(tmp_path: pathlib.Path) -> None:
    """Lag is max offset minus consumer offset per queue; in-flight comes from the POP state."""

    async def body(caller: AdminCaller, broker: runtime.BrokerRuntime) -> None:
        await create_topic(caller, "orders", queues=2)
        group = broker.groups.require("billing")
        request = A.GetConsumerLagRequest(group="billing", topic="orders")
        before = await caller.call("GetConsumerLag", request)
        assert [(q.queue_id, q.broker_offset, q.lag) for q in before.queues] == [
            (0, 0, 0),
            (1, 0, 0),
        ]
        appends = [append_request("orders", queue_id=q) for q in (0, 0, 0, 1, 1)]
        await broker.store.put_messages(appends)
        after = await caller.call("GetConsumerLag", request)
        assert [(q.broker_offset, q.consumer_offset, q.lag) for q in after.queues] == [
            (3, 0, 3),
            (2, 0, 2),
        ]
        assert (after.total_lag, after.queues[0].broker_name) == (5, "broker-a")
        broker.offsets.commit(group.group, ids.TopicName("orders"), Q0, ids.QueueOffset(2))
        state = broker.pop_service.state(group)
        broker.pop_service.open_queue(state, ids.TopicName("orders"), ids.QueueId(1))
        state.reserve(
            ids.TopicName("orders"), ids.QueueId(1), ids.QueueOffset(0), invisible_ms=60_000
        )
        every = await caller.call("GetConsumerLag", A.GetConsumerLagRequest(group="billing"))
        rows = [(q.topic, q.queue_id, q.consumer_offset, q.lag, q.inflight) for q in every.queues]
        assert rows == [("orders", 0, 2, 1, 0), ("orders", 1, 0, 2, 1)]
        assert (every.total_lag, every.total_inflight) == (3, 1)
        unknown = A.GetConsumerLagRequest(group="billing", topic="nope")
        assert code(await caller.call("GetConsumerLag", unknown)) == errors.Code.TOPIC_NOT_FOUND

    run_admin(tmp_path, body)


def test_query_by_id_and_key_finds_stored_messages_and_skips_hash_collisions(
    tmp_path: pathlib.Path,
) -> None:
    """Messages are found by UNIQ_KEY, by offset message id and by key; false hits are dropped."""

    async def body(caller: AdminCaller, broker: runtime.BrokerRuntime) -> None:
        await create_topic(caller, "orders")
        appends = [
            append_request("orders", uniq_key="ID-1", keys="k1 shared", tag="TagA", body=b"one"),
            append_request("orders", queue_id=1, uniq_key="ID-2", keys="shared", body=b"two"),
            append_request("other", uniq_key="ID-3", keys="shared"),
        ]
        results = await broker.store.put_messages(appends)
        by_id = A.QueryMessageByIdRequest(topic="orders", message_id="ID-2")
        found = await caller.call("QueryMessageById", by_id)
        assert code(found) == OK and len(found.messages) == 1
        two = found.messages[0]
        assert (two.topic, two.queue_id, two.queue_offset, two.body) == ("orders", 1, 0, b"two")
        assert (two.message_id, list(two.keys), two.broker_name) == ("ID-2", ["shared"], "broker-a")
        assert two.commit_log_offset == results[1].commit_log_offset
        assert two.properties["UNIQ_KEY"] == "ID-2" and not two.HasField("tag")
        offset_id = A.QueryMessageByIdRequest(message_id=results[0].message_id)
        by_offset = await caller.call("QueryMessageById", offset_id)
        assert [m.body for m in by_offset.messages] == [b"one"]
        assert by_offset.messages[0].tag == "TagA"
        wrong_topic = A.QueryMessageByIdRequest(topic="other", message_id="ID-1")
        missing = await caller.call("QueryMessageById", wrong_topic)
        assert code(missing) == errors.Code.MESSAGE_NOT_FOUND and not missing.messages
        no_topic = await caller.call("QueryMessageById", A.QueryMessageByIdRequest(message_id="x"))
        assert (
            code(no_topic) == errors.Code.BAD_REQUEST
            and "give the topic" in no_topic.status.message
        )
        by_key = await caller.call(
            "QueryMessageByKey", A.QueryMessageByKeyRequest(topic="orders", key="shared")
        )
        assert [m.body for m in by_key.messages] == [b"two", b"one"]  # newest first
        capped = A.QueryMessageByKeyRequest(topic="orders", key="shared", max_messages=1)
        assert len((await caller.call("QueryMessageByKey", capped)).messages) == 1
        # an index entry whose key the message does not carry (what a hash collision gives)
        broker.index.put(
            ["orders#ghost"], results[1].commit_log_offset, results[1].store_timestamp_ms
        )
        ghost = A.QueryMessageByKeyRequest(topic="orders", key="ghost")
        assert code(await caller.call("QueryMessageByKey", ghost)) == errors.Code.MESSAGE_NOT_FOUND
        empty = A.QueryMessageByKeyRequest(topic="orders", key=" ")
        assert code(await caller.call("QueryMessageByKey", empty)) == errors.Code.BAD_REQUEST
        no_name = A.QueryMessageByKeyRequest(key="shared")
        assert code(await caller.call("QueryMessageByKey", no_name)) == errors.Code.ILLEGAL_TOPIC

    run_admin(tmp_path, body)


def test_reset_offset_by_timestamp_earliest_and_latest(tmp_path: pathlib.Path) -> None:
    """A reset moves the committed offsets and restarts the group's POP queues there."""
    time = clock.ManualClock()

    async def body(caller: AdminCaller, broker: runtime.BrokerRuntime) -> None:
        await create_topic(caller, "orders", queues=1)
        await broker.store.put_messages([append_request("orders") for _ in range(2)])
        time.advance_ms(10_000)
        later = time.now_ms()
        await broker.store.put_messages([append_request("orders") for _ in range(3)])
        group = broker.groups.require("billing")
        state = broker.pop_service.state(group)
        broker.pop_service.open_queue(state, ids.TopicName("orders"), ids.QueueId(0))
        state.reserve(
            ids.TopicName("orders"), ids.QueueId(0), ids.QueueOffset(0), invisible_ms=1000
        )

        async def reset(target: int, timestamp_ms: int = 0) -> list[int]:
            request = A.ResetOffsetRequest(
                group="billing",
                topic="orders",
                target=target,  # type: ignore[arg-type]
                timestamp_ms=timestamp_ms,
            )
            answer = await caller.call("ResetOffset", request)
            assert code(answer) == OK, answer.status
            return [o.offset for o in answer.offsets]

        assert await reset(A.ResetTarget.RESET_TARGET_TIMESTAMP, later) == [2]
        assert state.committed_offset(ids.TopicName("orders"), ids.QueueId(0)) == 2
        assert state.in_flight_count(ids.TopicName("orders"), ids.QueueId(0)) == 0
        lag = await caller.call("GetConsumerLag", A.GetConsumerLagRequest(group="billing"))
        assert [(q.consumer_offset, q.lag) for q in lag.queues] == [(2, 3)]
        assert await reset(A.ResetTarget.RESET_TARGET_LATEST) == [5]
        assert await reset(A.ResetTarget.RESET_TARGET_EARLIEST) == [0]
        assert broker.offsets.query(group.group, ids.TopicName("orders"), Q0) == 0
        assert not broker.offsets.dirty  # persisted at once
        vague = A.ResetOffsetRequest(group="billing", topic="orders")
        assert code(await caller.call("ResetOffset", vague)) == errors.Code.BAD_REQUEST
        no_time = A.ResetOffsetRequest(
            group="billing", topic="orders", target=A.ResetTarget.RESET_TARGET_TIMESTAMP
        )
        answer = await caller.call("ResetOffset", no_time)
        assert code(answer) == errors.Code.BAD_REQUEST and "timestamp_ms" in answer.status.message
        nowhere = A.ResetOffsetRequest(
            group="ghost", topic="nope", target=A.ResetTarget.RESET_TARGET_LATEST
        )
        assert code(await caller.call("ResetOffset", nowhere)) == errors.Code.TOPIC_NOT_FOUND
        assert "ghost" not in broker.groups

    run_admin(tmp_path, body, time=time)


def test_wipe_and_add_write_perm_spare_internal_topics(tmp_path: pathlib.Path) -> None:
    """Wiping clears WRITE on ordinary topics only, re-registers, and adding restores it."""

    async def body(caller: AdminCaller, broker: runtime.BrokerRuntime) -> None:
        await create_topic(caller, "orders")
        await create_topic(caller, "events", perm=4)
        broker.topics.ensure_retry_topic(ids.GroupName("billing"))
        broker.route_changed.clear()
        wiped = await caller.call("WipeWritePerm", A.WipeWritePermRequest())
        assert (code(wiped), wiped.topics_changed) == (OK, 1)
        assert broker.route_changed.is_set()
        perms = {t.name: int(t.perm) for t in broker.topics.list_all()}
        assert perms == {"%RETRY%billing": 6, "events": 4, "orders": 4}
        broker.route_changed.clear()
        again = await caller.call("WipeWritePerm", A.WipeWritePermRequest())
        assert again.topics_changed == 0 and not broker.route_changed.is_set()
        added = await caller.call("AddWritePerm", A.AddWritePermRequest())
        assert added.topics_changed == 2
        perms = {t.name: int(t.perm) for t in broker.topics.list_all()}
        assert perms == {"%RETRY%billing": 6, "events": 6, "orders": 6}

    run_admin(tmp_path, body)


def test_runtime_stats_and_unsupported_role_change(tmp_path: pathlib.Path) -> None:
    """Stats report identity, CommitLog offsets and counters; ChangeRole says why it is refused."""

    async def body(caller: AdminCaller, broker: runtime.BrokerRuntime) -> None:
        await create_topic(caller, "orders")
        results = await broker.store.put_messages([append_request("orders") for _ in range(3)])
        broker.counters.messages_in += 3
        stats = await caller.call("GetBrokerRuntimeStats", A.GetBrokerRuntimeStatsRequest())
        assert code(stats) == OK
        assert (stats.cluster_name, stats.broker_name, stats.broker_id) == (
            "DefaultCluster",
            "broker-a",
            0,
        )
        assert stats.role == A.BrokerRole.BROKER_ROLE_ASYNC_MASTER
        end = results[-1].commit_log_offset + results[-1].wrote_bytes
        assert (stats.commit_log_min_offset, stats.commit_log_max_offset) == (0, end)
        assert stats.messages_in_total == 3 and stats.writable
        assert 0.0 < stats.disk_used_ratio <= 1.0
        assert stats.extra["topic_count"] == "1"
        assert stats.extra["flush_disk_type"] == "ASYNC_FLUSH"
        role = await caller.call("ChangeRole", A.ChangeRoleRequest(epoch=1))
        assert code(role) == errors.Code.UNSUPPORTED
        assert "replication" in role.status.message

    run_admin(tmp_path, body)


def test_a_slave_refuses_changes_but_answers_reads(tmp_path: pathlib.Path) -> None:
    """On a broker id above 0, changes answer FORBIDDEN naming the master; reads work."""

    async def body(caller: AdminCaller, broker: runtime.BrokerRuntime) -> None:
        topic = A.CreateTopicRequest(topic=A.Topic(name="orders"))
        group = A.CreateSubscriptionGroupRequest(group=A.SubscriptionGroup(name="g"))
        for rpc_name, request in [
            ("CreateTopic", topic),
            ("CreateSubscriptionGroup", group),
            ("WipeWritePerm", A.WipeWritePermRequest()),
        ]:
            answer = await caller.call(rpc_name, request)
            assert code(answer) == errors.Code.FORBIDDEN and "master" in answer.status.message
        assert code(await caller.call("ListTopics", A.ListTopicsRequest())) == OK
        stats = await caller.call("GetBrokerRuntimeStats", A.GetBrokerRuntimeStatsRequest())
        assert stats.role == A.BrokerRole.BROKER_ROLE_SLAVE and stats.broker_id == 1
        assert len(broker.topics) == 0 and len(broker.groups) == 0

    run_admin(tmp_path, body, broker_id=1)


def test_a_groups_allocation_strategy_is_set_and_listed_over_the_admin_api(
    tmp_path: pathlib.Path,
) -> None:
    """CreateSubscriptionGroup stores a RocketMQ strategy name and CONFIG's queues, lists them
    back, and refuses an unknown name with ILLEGAL_CONSUMER_GROUP."""

    async def body(caller: AdminCaller, broker: runtime.BrokerRuntime) -> None:
        queue = A.QueueRef(topic="orders", broker_name="broker-a", queue_id=2)
        group = A.SubscriptionGroup(
            name="sharers", allocate_strategy="CONFIG", allocate_config_queues=[queue]
        )
        created = await caller.call(
            "CreateSubscriptionGroup", A.CreateSubscriptionGroupRequest(group=group)
        )
        assert code(created) == OK, created.status
        stored = broker.groups.get("sharers")
        assert stored is not None
        assert stored.allocate_strategy is allocate.AllocateStrategy.CONFIG
        assert [q.queue_id for q in stored.allocate_config_queues] == [2]
        plain = A.SubscriptionGroup(name="plain")
        await caller.call("CreateSubscriptionGroup", A.CreateSubscriptionGroupRequest(group=plain))
        listed = await caller.call("ListSubscriptionGroups", A.ListSubscriptionGroupsRequest())
        assert [(g.name, g.allocate_strategy) for g in listed.groups] == [
            ("plain", "AVG"),
            ("sharers", "CONFIG"),
        ]
        bad = A.SubscriptionGroup(name="odd", allocate_strategy="RANDOM")
        refused = await caller.call(
            "CreateSubscriptionGroup", A.CreateSubscriptionGroupRequest(group=bad)
        )
        assert code(refused) == errors.Code.ILLEGAL_CONSUMER_GROUP
        assert "RANDOM" in refused.status.message

    run_admin(tmp_path, body)
