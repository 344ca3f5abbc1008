"""The broker's ``/metrics`` snapshot, built from its runtime at scrape time.

``snapshot`` reads the store's ``stats()``, the broker's plain counters, the topic, group and
offset tables, the client sessions, the front end's per-worker call counts, the replication
service (live role, epoch, slaves), the schedule service's timer wheel and delay-level
progress, and the transaction table, and returns a ``metrics.BrokerSnapshot``; the hot paths
are not touched. It runs on the broker's event loop (``metrics.loop_source``), like every other
reader of the runtime.

Invariants: at most ``snapshots.GROUP_TOPIC_QUEUE_SERIES_MAX`` group x topic pairs get
per-queue detail, a lag latency and a queueing latency (each latency reads one message per
lagging queue); the rest are summed per pair only and counted as truncated. The role is the
replication service's live one (a broker without HA: ASYNC_MASTER at broker id 0, else SLAVE).
Timer, delay and transaction series are a master's only: a slave holds the same parked
messages but never delivers or checks them until it is promoted.
"""

from __future__ import annotations

import logging

from ariane import metrics
from ariane.broker import runtime as runtime_mod
from ariane.broker.grpc import frontend
from ariane.broker.services import replication as replication_mod
from ariane.broker.services import write_timeline
from ariane.broker.tables import clients
from ariane.broker.transaction import processor as transaction
from ariane.common import ids, topics
from ariane.grpcwire import rpc_latency
from ariane.security import audit
from ariane.store import retention

_log = logging.getLogger(__name__)


def snapshot(
    runtime: runtime_mod.BrokerRuntime,
    client_registry: clients.ClientRegistry,
    front: frontend.FrontEnd,
    latency: rpc_latency.RpcLatency | None = None,
    *,
    ha: replication_mod.ReplicationService | None = None,
    timeline: write_timeline.WriteTimelineService | None = None,
    transactions: transaction.TransactionalMessageService | None = None,
    auth: audit.AuthAudit | None = None,
) -> metrics.BrokerSnapshot:
    """Everything the broker's ``/metrics`` shows, now.

    Args:
        latency: the calls its gRPC guard timed, none when ``None``.
        ha: the replication service (``None``: a broker without an HA port).
        timeline: the CommitLog's write times, for slave lag in seconds (0 without it).
        transactions: the half-message table (``None``: no transaction series).
        auth: the gRPC gate's decision counts (``None``: authentication off, no series).
    """
    settings = runtime.settings
    stats = runtime.store.stats()
    counters = runtime.counters
    sessions = client_registry.sessions()
    lags = _lags(runtime)
    master = ha.role.is_master if ha is not None else runtime.broker_id == ids.MASTER_BROKER_ID
    return metrics.BrokerSnapshot(
        identity=metrics.Identity(
            settings.cluster, "broker", f"{settings.broker_name}-{settings.broker_id}"
        ),
        role=_role(runtime, ha),
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
        commit_log_max_offset=stats.max_commit_log_offset,
        replication=_replication(runtime, ha, timeline) if ha is not None else None,
        schedule=_schedule(runtime) if master else None,
        transactions=_transactions(transactions) if master and transactions else None,
        auth=_auth(auth) if auth is not None else None,
    )


def _auth(audit_log: audit.AuthAudit) -> metrics.AuthCounts:
    """Copies of the decision counters (read on the serving loop)."""
    return metrics.AuthCounts(dict(audit_log.authentications), dict(audit_log.authorizations))


def _role(runtime: runtime_mod.BrokerRuntime, ha: replication_mod.ReplicationService | None) -> str:
    """The live role: the replication service's, else by the broker id now."""
    if ha is not None:
        return ha.role.value
    return "ASYNC_MASTER" if runtime.broker_id == ids.MASTER_BROKER_ID else "SLAVE"


def _replication(
    runtime: runtime_mod.BrokerRuntime,
    ha: replication_mod.ReplicationService,
    timeline: write_timeline.WriteTimelineService | None,
) -> metrics.Replication:
    """Epoch, fencing, and each connected slave against this CommitLog's end (RocketMQ
    ``DefaultHAService.getRuntimeInfo``)."""
    end = runtime.store.max_commit_log_offset
    slaves = tuple(
        metrics.SlaveReplication(
            address=s.address,
            acked_offset=s.acked_offset,
            lag_bytes=max(0, end - s.acked_offset),
            lag_seconds=timeline.lag_seconds(s.acked_offset) if timeline else 0.0,
            in_sync=ha.master.in_sync(s),
        )
        for s in sorted(ha.master.slaves(), key=lambda s: s.address)
    )
    is_master = ha.role.is_master
    return metrics.Replication(
        epoch=ha.epoch,
        fenced=ha.master.fenced,
        in_sync_slaves=sum(s.in_sync for s in slaves) if is_master else 0,
        slaves=slaves,
        master_connected=None if is_master else ha.client.connected,
    )


def _schedule(runtime: runtime_mod.BrokerRuntime) -> metrics.ScheduleBacklog:
    """The timer wheel's backlog and lag, and per used delay level its backlog and lag
    (RocketMQ ``TimerMessageStore`` enqueue/dequeue behind; one message read per lagging
    level and one for the timer topic)."""
    schedule, store = runtime.schedule, runtime.store
    stats = schedule.stats()
    now_ms = runtime.clock.now_ms()
    timer_queue = ids.QueueId(0)
    cursor = ids.QueueOffset(stats.timer_cursor)
    behind = max(0, store.max_queue_offset(topics.TIMER_TOPIC, timer_queue) - cursor)
    due_ms = schedule.next_timer_due_ms()
    level_offsets = schedule.level_offsets()
    levels: list[metrics.DelayLevelBacklog] = []
    for level, delay_ms in enumerate(runtime.settings.schedule.delay_levels_ms, start=1):
        queue_id = ids.QueueId(level - 1)
        end = store.max_queue_offset(topics.SCHEDULE_TOPIC, queue_id)
        if end == 0:
            continue  # never used
        at = level_offsets.get(level, ids.QueueOffset(0))
        waiting = max(0, end - at)
        stored_ms = _store_time_ms(runtime, topics.SCHEDULE_TOPIC, queue_id, at) if waiting else 0
        late_ms = max(0, now_ms - stored_ms - delay_ms) if stored_ms else 0
        levels.append(metrics.DelayLevelBacklog(level, waiting, late_ms / 1000))
    return metrics.ScheduleBacklog(
        timer_pending=stats.timer_pending,
        timer_enqueue_behind=behind,
        timer_enqueue_latency_ms=(
            _age_ms(runtime, topics.TIMER_TOPIC, [(timer_queue, cursor)]) if behind else 0
        ),
        timer_dequeue_latency_ms=max(0, now_ms - due_ms) if due_ms is not None else 0,
        delivered_total=stats.delivered,
        recalled_total=stats.recalled,
        levels=tuple(levels),
    )


def _transactions(service: transaction.TransactionalMessageService) -> metrics.TransactionCounts:
    stats = service.stats
    return metrics.TransactionCounts(
        half_messages=len(service),
        committed_total=stats.committed,
        rolled_back_total=stats.rolled_back,
        checks_total=stats.checks,
        discarded_total=stats.given_up,
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
