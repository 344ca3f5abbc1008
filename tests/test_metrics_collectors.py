"""The broker's metrics snapshot caps per-queue lag series and reads the timer wheel and delay
levels, the write timeline dates unacked bytes, and the collectors render snapshots (traffic,
replication, timers, transactions) into RocketMQ-named series with the common labels."""

from __future__ import annotations

import asyncio
import pathlib

from prometheus_client import CollectorRegistry, generate_latest

from admin_testing import tiny_settings
from ariane import metrics
from ariane.broker import metrics_view, runtime
from ariane.broker.grpc import frontend
from ariane.broker.services import write_timeline
from ariane.broker.tables import clients as clients_mod
from ariane.broker.tables import topic_config
from ariane.common import clock, ids, message
from ariane.store import commit_log
from metrics_testing import parse, value


def test_per_queue_lag_stops_at_the_group_topic_cap(tmp_path: pathlib.Path) -> None:
    """With one pair more than ``GROUP_TOPIC_QUEUE_SERIES_MAX``, every pair keeps its summed
    lag but the last one has no per-queue series, and the truncation is counted."""
    cap = metrics.snapshots.GROUP_TOPIC_QUEUE_SERIES_MAX
    broker = runtime.BrokerRuntime(tiny_settings(tmp_path), time=clock.SystemClock())
    try:
        for i in range(cap + 1):
            topic = ids.TopicName(f"t{i:04d}")
            broker.topics.create_or_update(
                topic_config.TopicConfig(topic, read_queue_nums=2, write_queue_nums=2)
            )
            broker.offsets.commit(ids.GroupName("g"), topic, ids.QueueId(0), ids.QueueOffset(0))
        snap = asyncio.run(_snapshot(broker))
    finally:
        broker.close()
    assert len(snap.lags) == cap + 1
    assert [len(lag.queues) for lag in snap.lags] == [2] * cap + [0]
    assert snap.lag_pairs_truncated == 1
    rendered = _render(metrics.BrokerCollector(lambda: snap))
    assert rendered.count("ariane_consumer_queue_lag_messages{") == 2 * cap
    assert rendered.count("rocketmq_consumer_lag_messages{") == cap + 1


async def _snapshot(broker: runtime.BrokerRuntime) -> metrics.BrokerSnapshot:
    front = frontend.InProcessFrontEnd(broker.settings, [])  # a grpc.aio server needs a loop
    return metrics_view.snapshot(broker, clients_mod.ClientRegistry(time=broker.clock), front)


def test_name_server_series_say_which_groups_lack_a_master() -> None:
    """A group with only a slave shows 0 for ``ariane_namesrv_broker_group_master``."""
    snap = metrics.NameServerSnapshot(
        identity=metrics.Identity("", "nameserver", "127.0.0.1:9876"),
        brokers=(
            metrics.BrokerMemberView("c", "a", 0),
            metrics.BrokerMemberView("c", "b", 1),
        ),
        broker_groups={"a": True, "b": False},
        topic_count=3,
    )
    samples = parse(_render(metrics.NameServerCollector(lambda: snap)))
    base = {"cluster": "", "node_type": "nameserver", "node_id": "127.0.0.1:9876"}
    assert value(samples, "ariane_namesrv_broker_group_master", **base, broker_name="b") == 0
    assert value(samples, "ariane_namesrv_broker_group_master", **base, broker_name="a") == 1
    assert value(samples, "ariane_namesrv_brokers", **base, broker_cluster="c") == 2
    assert value(samples, "ariane_namesrv_topics", **base) == 3


def _render(collector: metrics.BrokerCollector | metrics.NameServerCollector) -> str:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    return generate_latest(registry).decode()


BASE = {"cluster": "c", "node_type": "broker", "node_id": "b-0"}


def _broker_snapshot(role: str = "SYNC_MASTER", **fields: object) -> metrics.BrokerSnapshot:
    return metrics.BrokerSnapshot(
        identity=metrics.Identity("c", "broker", "b-0"),
        role=role, writable=True, messages_in_total=0, bytes_in_total=0,
        messages_out_total=0, bytes_out_total=0, send_to_dlq_total=0, topic_max_offsets={},
        group_count=0, producer_connections=0, consumer_connections=0, lags=(),
        lag_pairs_truncated=0, storage_size_bytes=0, flush_behind_bytes=0,
        dispatch_behind_bytes=0, disk=None, **fields,  # type: ignore[arg-type]
    )  # fmt: skip


def test_replication_series_show_each_slave_and_the_master_view() -> None:
    """A master's snapshot renders its role, epoch, in-sync count and per-slave ack, lag in
    bytes and seconds and in-sync flag, one series per slave; no slave-only series."""
    ha = metrics.Replication(
        epoch=3,
        fenced=False,
        in_sync_slaves=1,
        slaves=(
            metrics.SlaveReplication("10.0.0.1:5000", 900, 100, 2.0, True),
            metrics.SlaveReplication("10.0.0.2:5000", 0, 1000, 61.0, False),
        ),
    )
    snap = _broker_snapshot(commit_log_max_offset=1000, replication=ha)
    samples = parse(_render(metrics.BrokerCollector(lambda: snap)))
    assert value(samples, "ariane_broker_role", **BASE, role="SYNC_MASTER") == 1
    assert value(samples, "ariane_ha_epoch", **BASE) == 3
    assert value(samples, "ariane_ha_fenced", **BASE) == 0
    assert value(samples, "ariane_ha_in_sync_slaves", **BASE) == 1
    assert value(samples, "rocketmq_brokeruntime_commitlog_maxoffset", **BASE) == 1000
    one, two = {"slave": "10.0.0.1:5000"}, {"slave": "10.0.0.2:5000"}
    assert value(samples, "ariane_ha_slave_ack_offset", **one) == 900
    assert value(samples, "ariane_ha_slave_lag_bytes", **one) == 100
    assert value(samples, "ariane_ha_slave_lag_seconds", **two) == 61
    assert value(samples, "ariane_ha_slave_in_sync", **one) == 1
    assert value(samples, "ariane_ha_slave_in_sync", **two) == 0
    assert not any(name == "ariane_ha_master_connected" for name, _ in samples)


def test_a_slave_says_whether_its_master_stream_is_up_and_has_no_slave_series() -> None:
    """A slave's snapshot renders ``ariane_ha_master_connected`` and no in-sync count."""
    ha = metrics.Replication(epoch=2, fenced=False, in_sync_slaves=0, master_connected=True)
    snap = _broker_snapshot(role="SLAVE", replication=ha)
    samples = parse(_render(metrics.BrokerCollector(lambda: snap)))
    assert value(samples, "ariane_broker_role", role="SLAVE") == 1
    assert value(samples, "ariane_ha_master_connected") == 1
    assert not any(name == "ariane_ha_in_sync_slaves" for name, _ in samples)
    assert not any(name == "ariane_ha_slave_lag_bytes" for name, _ in samples)


def test_schedule_and_transaction_series_render_their_counts() -> None:
    """The timer, delay-level and transaction values reach their RocketMQ / Ariane series."""
    schedule = metrics.ScheduleBacklog(
        timer_pending=4, timer_enqueue_behind=2, timer_enqueue_latency_ms=1500,
        timer_dequeue_latency_ms=700, delivered_total=9, recalled_total=1,
        levels=(metrics.DelayLevelBacklog(3, 5, 12.5),),
    )  # fmt: skip
    tx = metrics.TransactionCounts(6, 7, 8, 9, 1)
    snap = _broker_snapshot(schedule=schedule, transactions=tx)
    samples = parse(_render(metrics.BrokerCollector(lambda: snap)))
    assert value(samples, "rocketmq_timing_messages") == 4
    assert value(samples, "rocketmq_timer_enqueue_lag") == 2
    assert value(samples, "rocketmq_timer_enqueue_latency") == 1500
    assert value(samples, "rocketmq_timer_dequeue_latency") == 700
    assert value(samples, "ariane_schedule_delivered_messages_total") == 9
    assert value(samples, "ariane_timer_recalled_messages_total") == 1
    assert value(samples, "ariane_delay_level_messages", delay_level="3") == 5
    assert value(samples, "ariane_delay_level_lag_seconds", delay_level="3") == 12.5
    assert value(samples, "rocketmq_half_messages") == 6
    assert value(samples, "rocketmq_commit_messages_total") == 7
    assert value(samples, "rocketmq_rollback_messages_total") == 8
    assert value(samples, "ariane_transaction_checks_total") == 9
    assert value(samples, "ariane_transaction_discarded_total") == 1


def test_write_timeline_dates_the_oldest_unacked_byte_to_the_second() -> None:
    """The lag of an ack is the age of the first sample past it: 0 when every later byte is
    newer than the newest sample, the history's age when it is older than the history, and a
    CommitLog that went backwards (a demoted master cut) starts the history anew."""
    manual = clock.ManualClock()
    end = [0]
    timeline = write_timeline.WriteTimelineService(lambda: end[0], manual)
    for offset in (100, 100, 250, 400):  # one sample a second
        end[0] = offset
        timeline.sample()
        manual.advance_ms(1000)
    assert timeline.lag_seconds(400) == 0  # acked everything
    assert timeline.lag_seconds(250) == 1  # byte 250 was there by the last sample, 1 s ago
    assert timeline.lag_seconds(100) == 2
    assert timeline.lag_seconds(99) == 4  # older than the history: its whole length
    end[0] = 50
    timeline.sample()
    assert timeline.lag_seconds(0) == 0


def test_schedule_snapshot_reads_the_wheel_the_timer_topic_and_the_levels(
    tmp_path: pathlib.Path,
) -> None:
    """With two timer messages in the wheel 3 s overdue, one more not yet read into it, and a
    level-2 (5 s) message 10 s old, the snapshot says so, and a master's role is live."""
    manual = clock.ManualClock()
    broker = runtime.BrokerRuntime(tiny_settings(tmp_path), time=manual)
    try:
        schedule = broker.schedule
        now = manual.now_ms()

        def put(parked: commit_log.AppendRequest) -> None:
            [result] = broker.store.put_messages_sync([parked])
            assert result.status.is_stored

        for i in range(2):
            put(schedule.park(_request(f"t{i}"), delivery_ms=now + 7_000))
        put(schedule.park_level(_request("lvl"), 2))
        schedule.enqueue_timer_messages()
        put(schedule.park(_request("unread"), delivery_ms=now + 60_000))
        manual.advance_ms(10_000)
        snap = asyncio.run(_snapshot(broker))
    finally:
        broker.close()
    assert snap.role == "ASYNC_MASTER"
    assert snap.schedule == metrics.ScheduleBacklog(
        timer_pending=2,
        timer_enqueue_behind=1,
        timer_enqueue_latency_ms=10_000,
        timer_dequeue_latency_ms=3_000,
        delivered_total=0,
        recalled_total=0,
        levels=(metrics.DelayLevelBacklog(2, 1, 5.0),),
    )
    assert snap.replication is None


def _request(body: str) -> commit_log.AppendRequest:
    return commit_log.AppendRequest(
        message=message.Message(ids.TopicName("Real"), body.encode(), {"UNIQ_KEY": body}),
        queue_id=ids.QueueId(0),
    )
