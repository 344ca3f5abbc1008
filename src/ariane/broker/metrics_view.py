"""The broker's ``/metrics`` snapshot, built from its runtime at scrape time.

``snapshot`` reads the store's ``stats()``, the broker's plain counters, the topic, group and
offset tables, the client sessions and the front end's per-worker call counts, and returns a
``metrics.BrokerSnapshot``; the hot paths are not touched. It runs on the broker's event loop
(``metrics.loop_source``), like every other reader of the runtime.

Invariants: at most ``snapshots.GROUP_TOPIC_QUEUE_SERIES_MAX`` group x topic pairs get
per-queue detail, a lag latency and a queueing latency (each latency reads one message per
lagging queue); the rest are summed per pair only and counted as truncated.
"""

from __future__ import annotations

import logging

from ariane import metrics
from ariane.broker import runtime as runtime_mod
from ariane.broker.grpc import frontend
from ariane.broker.tables import clients
from ariane.common import ids
from ariane.grpcwire import rpc
from ariane.store import retention

_log = logging.getLogger(__name__)


def snapshot(
    runtime: runtime_mod.BrokerRuntime,
    client_registry: clients.ClientRegistry,
    front: frontend.FrontEnd,
    latency: rpc.RpcLatency | None = None,
) -> metrics.BrokerSnapshot:
    """Everything the broker's ``/metrics`` shows, now (``latency``: the calls its gRPC guard
    timed, none when ``None``)."""
    settings = runtime.settings
    stats = runtime.store.stats()
    counters = runtime.counters
    sessions = client_registry.sessions()
    lags = _lags(runtime)
    return metrics.BrokerSnapshot(
        identity=metrics.Identity(
            settings.cluster, "broker", f"{settings.broker_name}-{settings.broker_id}"
        ),
        role="ASYNC_MASTER" if settings.broker_id == ids.MASTER_BROKER_ID else "SLAVE",
        writable=not stats.disk_full,
        messages_in_total=counters.messages_in,
        bytes_in_total=counters.bytes_in,
        messages_out_total=counters.messages_out,
        bytes_out_total=counters.bytes_out,
        send_to_dlq_total=counters.sent_to_dlq,
        topic_max_offsets=_topic_max_offsets(runtime),
        group_count=len(runtime.groups),
        producer_connections=sum(1 for s in sessions if s.client_type == "PRODUCER"),
        consumer_connections=sum(1 for s in sessions if s.group is not None),
        lags=tuple(lags),
        lag_pairs_truncated=max(0, len(lags) - metrics.snapshots.GROUP_TOPIC_QUEUE_SERIES_MAX),
        storage_size_bytes=sum(s.size_bytes for s in runtime.store.commit_log_segments()),
        flush_behind_bytes=stats.flush_behind_bytes,
        dispatch_behind_bytes=stats.dispatch_behind_bytes,
        disk=_disk(runtime),
        frontend_calls=front.calls_by_worker(),
        rpc_latency_ms=metrics.copy_histograms(latency.histograms() if latency else {}),
        message_size_bytes=metrics.copy_histograms(
            {kind.value.lower(): h for kind, h in counters.message_size_bytes.items()}
        ),
    )


def _topic_max_offsets(runtime: runtime_mod.BrokerRuntime) -> dict[str, int]:
    store = runtime.store
    return {
        t.name: sum(
            store.max_queue_offset(t.name, q)
            for q in map(ids.QueueId, range(max(t.read_queue_nums, t.write_queue_nums)))
        )
        for t in runtime.topics.list_all()
    }


def _pairs(runtime: runtime_mod.BrokerRuntime) -> list[tuple[ids.TopicName, ids.GroupName]]:
    """Group x topic pairs with committed offsets or POP state here, sorted."""
    pairs = set(runtime.offsets.pairs())
    for state in runtime.pop_service.states():
        pairs.update((topic, state.group) for topic, _ in state.open_queues())
    return sorted(pairs)


def _lags(runtime: runtime_mod.BrokerRuntime) -> list[metrics.GroupTopicLag]:
    found: list[metrics.GroupTopicLag] = []
    for topic, group in _pairs(runtime):
        config = runtime.topics.get(topic)
        if config is None:
            continue  # offsets of a deleted topic, not yet removed
        detailed = len(found) < metrics.snapshots.GROUP_TOPIC_QUEUE_SERIES_MAX
        progress = [
            (queue_id, runtime.queue_progress(group, topic, queue_id))
            for queue_id in map(ids.QueueId, range(config.read_queue_nums))
        ]
        queues = tuple(metrics.QueueLag(q, p.lag, p.inflight) for q, p in progress)
        found.append(
            metrics.GroupTopicLag(
                group=group,
                topic=topic,
                lag_messages=sum(q.lag_messages for q in queues),
                inflight_messages=sum(q.inflight_messages for q in queues),
                lag_latency_ms=_age_ms(
                    runtime, topic, [(q, p.consumer_offset) for q, p in progress if p.lag]
                )
                if detailed
                else 0,
                consumer_offset=sum(p.consumer_offset for _, p in progress),
                queues=queues if detailed else (),
                ready_messages=sum(p.ready for _, p in progress),
                queueing_latency_ms=_age_ms(
                    runtime, topic, [(q, p.scan_offset) for q, p in progress if p.ready]
                )
                if detailed
                else 0,
            )
        )
    return found


def _age_ms(
    runtime: runtime_mod.BrokerRuntime,
    topic: ids.TopicName,
    positions: list[tuple[ids.QueueId, ids.QueueOffset]],
) -> int:
    """Age (now - store time) of the oldest message at ``(queue_id, offset)`` positions, ms;
    0 when there are none (RocketMQ ``ConsumerLagCalculator``: lag latency from the consumer
    offsets, queueing latency from the first offsets never pulled)."""
    stored = [_store_time_ms(runtime, topic, q, offset) for q, offset in positions]
    oldest_ms = min((t for t in stored if t), default=0)
    return max(0, runtime.clock.now_ms() - oldest_ms) if oldest_ms else 0


def _store_time_ms(
    runtime: runtime_mod.BrokerRuntime,
    topic: ids.TopicName,
    queue_id: ids.QueueId,
    offset: ids.QueueOffset,
) -> int:
    """Store time of the message at ``offset`` (0 if it cannot be read)."""
    got = runtime.store.get_messages(topic, queue_id, offset, max_count=1, max_bytes=1)
    return got.messages[0].store_timestamp_ms if got.messages else 0


def _disk(runtime: runtime_mod.BrokerRuntime) -> metrics.DiskUsage | None:
    policy = runtime.settings.retention
    try:
        used = retention.disk_used_ratio(runtime.settings.store_dir)
    except OSError as exc:
        _log.warning("cannot probe the disk of %s: %s", runtime.settings.store_dir, exc)
        return None
    return metrics.DiskUsage(
        used_ratio=used,
        clean_ratio=policy.disk_max_used_space_ratio,
        force_clean_ratio=policy.disk_space_clean_forcibly_ratio,
        reject_writes_ratio=policy.disk_space_warning_level_ratio,
    )
