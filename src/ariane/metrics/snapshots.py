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
class BrokerSnapshot:
    """What one broker's ``/metrics`` shows.

    Attributes:
        identity: the common labels.
        role: ``ASYNC_MASTER`` or ``SLAVE`` (until replication lands, by broker id).
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
            by this process (``grpcwire.rpc.RpcLatency``), ms.
        message_size_bytes: message type (``normal``, ``fifo``) -> body sizes of the
            messages stored by sends, bytes.
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
