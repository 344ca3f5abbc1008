"""The broker's metrics snapshot caps per-queue lag series, and the collectors render snapshots
into RocketMQ-named series with the common labels."""

from __future__ import annotations

import asyncio
import pathlib

from prometheus_client import CollectorRegistry, generate_latest

from admin_testing import tiny_settings
from ariane import metrics
from ariane.broker import metrics_view, runtime
from ariane.broker.grpc import frontend
from ariane.broker.tables import clients as clients_mod
from ariane.broker.tables import topic_config
from ariane.common import clock, ids
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
