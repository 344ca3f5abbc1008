"""Plain values a process hands to its metrics collectors at scrape time.

The broker and the name server build these from their own state (``stats()``-style reads, no
locks) each time Prometheus scrapes; ``metrics.collectors`` turns them into series. Nothing here
imports prometheus_client, so a process could also log or test them directly.

Invariants: every count is a whole number >= 0; ``*_total`` fields only grow while the process
lives (they restart at 0 with it, as Prometheus counters may); a snapshot holds at most
``GROUP_TOPIC_QUEUE_SERIES_MAX`` group x topic pairs with per-queue detail.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TypeVar

from ariane.common import histogram

K = TypeVar("K")

GROUP_TOPIC_QUEUE_SERIES_MAX = 200
"""Most consumer-group x topic pairs whose lag is exported per queue (the pairs beyond it are
still exported per group and topic, and counted in ``ariane_metrics_lag_pairs_truncated``).
With the default 8 queues per topic this caps the per-queue lag series near 1,600 per broker."""


@dataclasses.dataclass(frozen=True, slots=True)
class Identity:
    """The labels every series of a process carries (RocketMQ's common labels).

    Attributes:
        cluster: the cluster name (``brokerClusterName``), "" for a name server.
        node_type: ``broker`` or ``nameserver``, as RocketMQ labels it.
        node_id: ``<broker name>-<broker id>`` for a broker, the listen address for a name
            server.
    """

    cluster: str
    node_type: str
    node_id: str


@dataclasses.dataclass(frozen=True, slots=True)
class HistogramCounts:
    """A copy of a ``common.histogram.Histogram`` taken on the owner's loop.

    Attributes:
        bounds: bucket upper bounds, increasing (unit of the metric: ms, bytes).
        bucket_counts: per bucket (not cumulative), ``len(bounds) + 1`` with the ``+Inf`` one.
        sum: the sum of the observed values.
    """

    bounds: tuple[float, ...]
    bucket_counts: tuple[int, ...]
    sum: float

    @classmethod
    def of(cls, source: histogram.Histogram) -> HistogramCounts:
        """A frozen copy of ``source``."""
        return cls(source.bounds, tuple(source.bucket_counts), source.sum)


def copy_histograms(live: Mapping[K, histogram.Histogram]) -> dict[K, HistogramCounts]:
    """Frozen copies of live histograms, same keys (taken on the loop that updates them)."""
    return {key: HistogramCounts.of(h) for key, h in live.items()}


@dataclasses.dataclass(frozen=True, slots=True)
class QueueLag:
    """One queue's progress for one group.

    Attributes:
        queue_id: the queue number.
        lag_messages: max queue offset minus the group's committed offset (>= 0).
        inflight_messages: received but not yet acked or expired.
    """

    queue_id: int
    lag_messages: int
    inflight_messages: int


@dataclasses.dataclass(frozen=True, slots=True)
class GroupTopicLag:
    """A consumer group's progress on one topic of this broker.

    Attributes:
        group: the consumer group.
        topic: the topic.
        lag_messages: the sum of its queues' lag.
        inflight_messages: the sum of its queues' in-flight messages.
        lag_latency_ms: age (now - store time) of the oldest unconsumed message over its
            queues, 0 when nothing is behind.
        consumer_offset: the sum of its committed queue offsets (``rocketmq_consumer_offset``).
        queues: per-queue detail, empty for pairs beyond ``GROUP_TOPIC_QUEUE_SERIES_MAX``.
        ready_messages: stored but never delivered to the group yet (max offset minus its
            POP scan offset, summed; ``rocketmq_consumer_ready_messages``).
        queueing_latency_ms: age of the oldest message never delivered to the group, over its
            queues (``rocketmq_consumer_queueing_latency``), 0 when none waits; like the lag
            latency, read only for pairs within the cap.
    """

    group: str
    topic: str
    lag_messages: int
    inflight_messages: int
    lag_latency_ms: int
    consumer_offset: int
    queues: tuple[QueueLag, ...] = ()
    ready_messages: int = 0
    queueing_latency_ms: int = 0


@dataclasses.dataclass(frozen=True, slots=True)
class DiskUsage:
    """Disk use of the store's file system against the retention watermarks (ratios 0..1).

    Attributes:
        used_ratio: used / total of the file system holding the store.
        clean_ratio: above it expired files are deleted (``diskMaxUsedSpaceRatio``).
        force_clean_ratio: above it unexpired files are deleted too
            (``diskSpaceCleanForciblyRatio``).
        reject_writes_ratio: above it writes are refused (``diskSpaceWarningLevelRatio``).
    """

    used_ratio: float
    clean_ratio: float
    force_clean_ratio: float
    reject_writes_ratio: float


@dataclasses.dataclass(frozen=True, slots=True)
class SlaveReplication:
    """One slave connected to this master, as it last reported (RocketMQ
    ``HARuntimeInfo.HAConnectionRuntimeInfo``).

    Attributes:
        address: the slave's HA connection ``HOST:PORT`` as the master sees it (a reconnect
            opens a new one, so the series of a dropped connection ends with it).
        acked_offset: the CommitLog offset the slave holds and reported (``slaveAckOffset``).
        lag_bytes: the master's max CommitLog offset minus ``acked_offset`` (``diff``), >= 0.
        lag_seconds: seconds since the master wrote the oldest byte the slave has not acked,
            rounded down to the write-time sampling; 0 when it acked everything.
        in_sync: within ``max_gap_not_in_sync_bytes`` of the master's end (``inSync``): it
            counts for a SYNC_MASTER's acks.
    """

    address: str
    acked_offset: int
    lag_bytes: int
    lag_seconds: float
    in_sync: bool


@dataclasses.dataclass(frozen=True, slots=True)
class Replication:
    """This broker's place in its replication group, now (RocketMQ ``HARuntimeInfo``).

    Attributes:
        epoch: the newest epoch this broker's CommitLog holds (it grows with each promotion).
        fenced: a master that met a newer epoch and refuses writes until it is demoted.
        in_sync_slaves: slaves that count for acks (``inSyncSlaveNums``); 0 on a slave.
        slaves: the connected slaves (empty on a slave), at most one per HA connection.
        master_connected: on a slave, whether its HA stream from the master is up
            (``HAClientRuntimeInfo.isActivated``); ``None`` on a master.
    """

    epoch: int
    fenced: bool
    in_sync_slaves: int
    slaves: tuple[SlaveReplication, ...] = ()
    master_connected: bool | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class DelayLevelBacklog:
    """Messages parked under one delay level (RocketMQ ``ScheduleMessageService``).

    Attributes:
        level: the delay level, 1-based. messages: stored at the level but not yet delivered.
        lag_seconds: how late the oldest of them is (now minus its due time), 0 when none
            is due yet.
    """

    level: int
    messages: int
    lag_seconds: float


@dataclasses.dataclass(frozen=True, slots=True)
class ScheduleBacklog:
    """Timer and delay-level messages waiting for their time (RocketMQ ``TimerMessageStore``).

    Attributes:
        timer_pending: timer messages in the wheel (``rocketmq_timing_messages``).
        timer_enqueue_behind: timer messages stored but not yet read into the wheel
            (``rocketmq_timer_enqueue_lag``; they wait while the wheel is full).
        timer_enqueue_latency_ms: age of the oldest of those, ms, 0 when none.
        timer_dequeue_latency_ms: how late the earliest due wheel entry is, ms, 0 when none
            is due (``rocketmq_timer_dequeue_latency``).
        delivered_total: timer and delay-level messages written to their topic since start.
        recalled_total: timer messages cancelled by RecallMessage since start.
        levels: per delay level with messages stored under it, by level.
    """

    timer_pending: int
    timer_enqueue_behind: int
    timer_enqueue_latency_ms: int
    timer_dequeue_latency_ms: int
    delivered_total: int
    recalled_total: int
    levels: tuple[DelayLevelBacklog, ...] = ()


@dataclasses.dataclass(frozen=True, slots=True)
class TransactionCounts:
    """Half messages and their outcomes (RocketMQ ``TransactionalMessageService`` metrics).

    Attributes:
        half_messages: unresolved half messages now (``rocketmq_half_messages``).
        committed_total / rolled_back_total: resolved by commit / rollback since start.
        checks_total: check-backs sent to producers since start.
        discarded_total: given up after ``transaction_check_max`` checks since start.
    """

    half_messages: int
    committed_total: int
    rolled_back_total: int
    checks_total: int
    discarded_total: int


@dataclasses.dataclass(frozen=True, slots=True)
class AuthCounts:
    """Authentication and authorization decisions since start (``security.audit``).

    Attributes:
        authentications: result (``ok``, ``missing``, ``bad_signature`` ...) -> requests.
        authorizations: result (``allowed``, ``no_match``, ``denied`` ...) -> requests.
    """

    authentications: dict[str, int]
    authorizations: dict[str, int]


@dataclasses.dataclass(frozen=True, slots=True)
class BrokerSnapshot:
    """What one broker's ``/metrics`` shows.

    Attributes:
        identity: the common labels.
        role: ``ASYNC_MASTER``, ``SYNC_MASTER`` or ``SLAVE``, the live role (it changes with
            a promotion or a demotion).
        writable: the store accepts writes (not disk-full).
        messages_in_total / bytes_in_total: messages / body bytes stored by sends since start.
        messages_out_total / bytes_out_total: messages / body bytes delivered since start.
        send_to_dlq_total: messages moved to a DLQ since start.
        topic_max_offsets: topic -> sum of its queues' max offsets (grows with every stored
            message; ``rocketmq_producer_offset``).
        group_count: subscription groups configured.
        producer_connections / consumer_connections: live client sessions by kind.
        lags: per group and topic progress.
        lag_pairs_truncated: group x topic pairs exported without per-queue detail.
        storage_size_bytes: CommitLog bytes on disk.
        flush_behind_bytes / dispatch_behind_bytes: CommitLog bytes not yet flushed / not yet
            dispatched to ConsumeQueues.
        disk: disk use and watermarks, ``None`` if the disk could not be probed.
        frontend_calls: worker index -> calls it forwarded since start (empty without
            front-end workers).
        rpc_latency_ms: ``(request_code, response_code)`` -> latency of the calls answered
            by this process (``grpcwire.rpc_latency.RpcLatency``), ms.
        message_size_bytes: message type (``normal``, ``fifo``) -> body sizes of the
            messages stored by sends, bytes.
        commit_log_max_offset: the CommitLog's end, bytes (a slave's replicated offset).
        replication: role, epoch and slaves; ``None`` for a broker without an HA port.
        schedule: timer and delay-level backlog; ``None`` when not read.
        transactions: half messages and their outcomes; ``None`` when not read.
        auth: authentication/authorization decisions; ``None`` with authentication off.
    """

    identity: Identity
    role: str
    writable: bool
    messages_in_total: int
    bytes_in_total: int
    messages_out_total: int
    bytes_out_total: int
    send_to_dlq_total: int
    topic_max_offsets: dict[str, int]
    group_count: int
    producer_connections: int
    consumer_connections: int
    lags: tuple[GroupTopicLag, ...]
    lag_pairs_truncated: int
    storage_size_bytes: int
    flush_behind_bytes: int
    dispatch_behind_bytes: int
    disk: DiskUsage | None
    frontend_calls: dict[int, int] = dataclasses.field(default_factory=dict)
    rpc_latency_ms: dict[tuple[str, str], HistogramCounts] = dataclasses.field(default_factory=dict)
    message_size_bytes: dict[str, HistogramCounts] = dataclasses.field(default_factory=dict)
    commit_log_max_offset: int = 0
    replication: Replication | None = None
    schedule: ScheduleBacklog | None = None
    transactions: TransactionCounts | None = None
    auth: AuthCounts | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class BrokerMemberView:
    """One registered broker as a name server sees it.

    Attributes:
        cluster: its cluster. broker_name: its group. broker_id: 0 = master.
    """

    cluster: str
    broker_name: str
    broker_id: int


@dataclasses.dataclass(frozen=True, slots=True)
class NameServerSnapshot:
    """What one name server's ``/metrics`` shows.

    Attributes:
        identity: the common labels.
        brokers: every live registered broker.
        broker_groups: broker group name -> whether it has a live master.
        topic_count: topics with a route.
        rpc_latency_ms: as ``BrokerSnapshot.rpc_latency_ms``, for the name server's calls.
    """

    identity: Identity
    brokers: tuple[BrokerMemberView, ...]
    broker_groups: dict[str, bool]
    topic_count: int
    rpc_latency_ms: dict[tuple[str, str], HistogramCounts] = dataclasses.field(default_factory=dict)
