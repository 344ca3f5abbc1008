"""Collectors: turn a snapshot into Prometheus metric families, at scrape time.

``BrokerCollector`` and ``NameServerCollector`` wrap a ``source`` callable that returns a fresh
``snapshots.BrokerSnapshot`` / ``snapshots.NameServerSnapshot``; nothing is counted here, so
the processes' hot paths keep their plain int counters and pay nothing per message for metrics.
Names and labels are RocketMQ 5's where RocketMQ has one (``specs/rocketmq-reference.md`` §c:
``BrokerMetricsConstant``, ``DefaultStoreMetricsConstant``; ``rocketmq-exporter`` for the
offsets and the disk ratio); Ariane's own series start with ``ariane_``.

Invariants: every series carries ``cluster``, ``node_type`` and ``node_id``; label values come
only from bounded tables (topics, groups, queues capped by
``snapshots.GROUP_TOPIC_QUEUE_SERIES_MAX``, workers, broker groups).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from prometheus_client import registry
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from ariane.metrics import snapshots

BASE_LABELS = ("cluster", "node_type", "node_id")
"""RocketMQ's common labels, on every series."""


class _Families:
    """Builds families that all carry the identity labels."""

    def __init__(self, identity: snapshots.Identity) -> None:
        self._base = [identity.cluster, identity.node_type, identity.node_id]

    def counter(self, name: str, doc: str, value: float) -> CounterMetricFamily:
        family = CounterMetricFamily(name, doc, labels=BASE_LABELS)
        family.add_metric(self._base, value)
        return family

    def gauge(self, name: str, doc: str, value: float) -> GaugeMetricFamily:
        family = GaugeMetricFamily(name, doc, labels=BASE_LABELS)
        family.add_metric(self._base, value)
        return family

    def labelled(
        self,
        kind: type[GaugeMetricFamily] | type[CounterMetricFamily],
        name: str,
        doc: str,
        labels: Sequence[str],
        rows: Sequence[tuple[Sequence[str], float]],
    ) -> Metric:
        family = kind(name, doc, labels=[*BASE_LABELS, *labels])
        for values, value in rows:
            family.add_metric([*self._base, *values], value)
        return family

    def histogram(
        self,
        name: str,
        doc: str,
        labels: Sequence[str],
        rows: Sequence[tuple[Sequence[str], snapshots.HistogramCounts]],
    ) -> HistogramMetricFamily:
        """Cumulative ``le`` buckets, ``_count`` and ``_sum`` per labelled histogram."""
        family = HistogramMetricFamily(name, doc, labels=[*BASE_LABELS, *labels])
        for values, counts in rows:
            buckets: list[tuple[str, float]] = []
            total = 0
            for bound, n in zip((*counts.bounds, float("inf")), counts.bucket_counts, strict=True):
                total += n
                buckets.append(("+Inf" if bound == float("inf") else repr(float(bound)), total))
            family.add_metric([*self._base, *values], buckets, counts.sum)
        return family


RPC_LATENCY_LABELS = ("protocol_type", "request_code", "response_code")
"""``rocketmq_rpc_latency``'s labels (RocketMQ also has ``is_long_polling`` and ``result``,
which Ariane's gRPC guard does not distinguish)."""
PROTOCOL_TYPE = "grpc"
"""``protocol_type`` of every Ariane call (RocketMQ's remoting server says ``grpcwire``)."""


def _rpc_latency(
    f: _Families, histograms: dict[tuple[str, str], snapshots.HistogramCounts]
) -> HistogramMetricFamily:
    return f.histogram(
        "rocketmq_rpc_latency",
        "time to answer a call where it is handled, ms (per RPC and answered code)",
        RPC_LATENCY_LABELS,
        [([PROTOCOL_TYPE, rpc, code], h) for (rpc, code), h in sorted(histograms.items())],
    )


class BrokerCollector(registry.Collector):
    """The broker's series, read from ``source()`` at every scrape.

    Args:
        source: returns a fresh snapshot; called once per scrape.
    """

    def __init__(self, source: Callable[[], snapshots.BrokerSnapshot]) -> None:
        self._source = source

    def collect(self) -> Iterator[Metric]:
        """Every broker series of one snapshot."""
        snap = self._source()
        f = _Families(snap.identity)
        yield from _traffic(f, snap)
        yield from _consumers(f, snap)
        yield from _storage(f, snap)
        yield f.labelled(
            GaugeMetricFamily,
            "ariane_broker_role",
            "1 for the broker's role now (it changes with a promotion or a demotion)",
            ["role"],
            [([snap.role], 1)],
        )
        if snap.replication is not None:
            yield from _replication(f, snap.replication)
        if snap.schedule is not None:
            yield from _schedule(f, snap.schedule)
        if snap.transactions is not None:
            yield from _transactions(f, snap.transactions)
        if snap.auth is not None:
            yield from _auth(f, snap.auth)
        yield f.gauge("ariane_broker_writable", "1 while the store accepts writes", snap.writable)
        yield f.labelled(
            CounterMetricFamily,
            "ariane_frontend_calls_total",
            "calls forwarded by each front-end worker process since the broker started",
            ["worker"],
            [([str(w)], n) for w, n in sorted(snap.frontend_calls.items())],
        )
        yield _rpc_latency(f, snap.rpc_latency_ms)


def _traffic(f: _Families, snap: snapshots.BrokerSnapshot) -> Iterator[Metric]:
    yield f.counter(
        "rocketmq_messages_in_total", "messages stored by sends", snap.messages_in_total
    )
    yield f.counter(
        "rocketmq_messages_out_total", "messages delivered to consumers", snap.messages_out_total
    )
    yield f.counter(
        "rocketmq_throughput_in_total", "message body bytes stored by sends", snap.bytes_in_total
    )
    yield f.counter(
        "rocketmq_throughput_out_total", "message body bytes delivered", snap.bytes_out_total
    )
    yield f.counter(
        "rocketmq_send_to_dlq_messages_total",
        "messages moved to a dead-letter queue",
        snap.send_to_dlq_total,
    )
    yield f.labelled(
        GaugeMetricFamily,
        "rocketmq_producer_offset",
        "sum of the topic's max queue offsets (grows by one per stored message)",
        ["topic"],
        [([t], n) for t, n in sorted(snap.topic_max_offsets.items())],
    )
    yield f.gauge("rocketmq_topic_number", "topics on this broker", len(snap.topic_max_offsets))
    yield f.histogram(
        "rocketmq_message_size",
        "body sizes of the messages stored by sends, bytes",
        ["message_type"],
        [([kind], h) for kind, h in sorted(snap.message_size_bytes.items())],
    )


def _consumers(f: _Families, snap: snapshots.BrokerSnapshot) -> Iterator[Metric]:
    yield f.gauge("rocketmq_consumer_group_number", "consumer groups", snap.group_count)
    yield f.gauge("rocketmq_producer_connections", "live producers", snap.producer_connections)
    yield f.gauge("rocketmq_consumer_connections", "live consumers", snap.consumer_connections)
    pair = ["topic", "consumer_group"]

    def rows(value: Callable[[snapshots.GroupTopicLag], int]) -> list[tuple[list[str], float]]:
        return [([lag.topic, lag.group], value(lag)) for lag in snap.lags]

    yield f.labelled(
        GaugeMetricFamily,
        "rocketmq_consumer_lag_messages",
        "messages stored but not yet acknowledged by the group",
        pair,
        rows(lambda lag: lag.lag_messages),
    )
    yield f.labelled(
        GaugeMetricFamily,
        "rocketmq_consumer_inflight_messages",
        "messages received by the group and not yet acknowledged",
        pair,
        rows(lambda lag: lag.inflight_messages),
    )
    yield f.labelled(
        GaugeMetricFamily,
        "rocketmq_consumer_lag_latency",
        "age in ms of the group's oldest unconsumed message (0 when caught up)",
        pair,
        rows(lambda lag: lag.lag_latency_ms),
    )
    yield f.labelled(
        GaugeMetricFamily,
        "rocketmq_consumer_ready_messages",
        "messages stored but never delivered to the group yet",
        pair,
        rows(lambda lag: lag.ready_messages),
    )
    yield f.labelled(
        GaugeMetricFamily,
        "rocketmq_consumer_queueing_latency",
        "age in ms of the group's oldest message never delivered yet (0 when none waits)",
        pair,
        rows(lambda lag: lag.queueing_latency_ms),
    )
    yield f.labelled(
        GaugeMetricFamily,
        "rocketmq_consumer_offset",
        "sum of the group's committed queue offsets on the topic",
        pair,
        rows(lambda lag: lag.consumer_offset),
    )
    yield f.labelled(
        GaugeMetricFamily,
        "ariane_consumer_queue_lag_messages",
        "per-queue lag (the first GROUP_TOPIC_QUEUE_SERIES_MAX group x topic pairs only)",
        [*pair, "queue_id"],
        [
            ([lag.topic, lag.group, str(q.queue_id)], q.lag_messages)
            for lag in snap.lags
            for q in lag.queues
        ],
    )
    yield f.gauge(
        "ariane_metrics_lag_pairs_truncated",
        "group x topic pairs exported without per-queue lag (over the cap)",
        snap.lag_pairs_truncated,
    )


def _storage(f: _Families, snap: snapshots.BrokerSnapshot) -> Iterator[Metric]:
    yield f.gauge("rocketmq_storage_size", "CommitLog bytes on disk", snap.storage_size_bytes)
    yield f.gauge(
        "rocketmq_storage_flush_behind_bytes",
        "CommitLog bytes written but not yet flushed",
        snap.flush_behind_bytes,
    )
    yield f.gauge(
        "rocketmq_storage_dispatch_behind_bytes",
        "CommitLog bytes not yet dispatched to ConsumeQueues",
        snap.dispatch_behind_bytes,
    )
    yield f.gauge(
        "rocketmq_brokeruntime_commitlog_maxoffset",
        "CommitLog end offset, bytes (on a slave: what it replicated)",
        snap.commit_log_max_offset,
    )
    if snap.disk is None:
        return
    yield f.gauge(
        "rocketmq_brokeruntime_commitlog_disk_ratio",
        "used / total of the store's file system",
        snap.disk.used_ratio,
    )
    yield f.labelled(
        GaugeMetricFamily,
        "ariane_storage_disk_watermark_ratio",
        "retention watermarks: clean expired files, clean forcibly, reject writes",
        ["level"],
        [
            (["clean"], snap.disk.clean_ratio),
            (["force_clean"], snap.disk.force_clean_ratio),
            (["reject_writes"], snap.disk.reject_writes_ratio),
        ],
    )


def _replication(f: _Families, ha: snapshots.Replication) -> Iterator[Metric]:
    """RocketMQ 5 exports no HA series (its ``HARuntimeInfo`` is an admin call): Ariane's own,
    named after that structure's fields."""
    yield f.gauge("ariane_ha_epoch", "newest epoch of this broker's CommitLog", ha.epoch)
    yield f.gauge("ariane_ha_fenced", "1 while a master refuses writes: it met a newer epoch",
                  ha.fenced)  # fmt: skip
    if ha.master_connected is None:
        yield f.gauge(
            "ariane_ha_in_sync_slaves",
            "connected slaves within max_gap_not_in_sync_bytes (they count for SYNC acks)",
            ha.in_sync_slaves,
        )
    else:
        yield f.gauge(
            "ariane_ha_master_connected",
            "1 while this slave's HA stream from its master is up",
            ha.master_connected,
        )

    def rows(value: Callable[[snapshots.SlaveReplication], float]) -> list[tuple[list[str], float]]:
        return [([s.address], value(s)) for s in ha.slaves]

    for name, doc, value in (
        ("ariane_ha_slave_ack_offset", "CommitLog offset the slave holds, as it reported",
         lambda s: s.acked_offset),
        ("ariane_ha_slave_lag_bytes", "CommitLog bytes the slave has not acked yet",
         lambda s: s.lag_bytes),
        ("ariane_ha_slave_lag_seconds",
         "seconds since the master wrote the oldest byte the slave has not acked (0: none)",
         lambda s: s.lag_seconds),
        ("ariane_ha_slave_in_sync", "1 while the slave counts for SYNC_MASTER acks",
         lambda s: s.in_sync),
    ):  # fmt: skip
        yield f.labelled(GaugeMetricFamily, name, doc, ["slave"], rows(value))


def _schedule(f: _Families, sched: snapshots.ScheduleBacklog) -> Iterator[Metric]:
    """RocketMQ's timer series (``DefaultStoreMetricsConstant``; no ``topic`` label: the wheel
    does not index by topic), Ariane's for the delay levels."""
    yield f.gauge("rocketmq_timing_messages", "timer messages waiting in the wheel",
                  sched.timer_pending)  # fmt: skip
    yield f.gauge(
        "rocketmq_timer_enqueue_lag",
        "timer messages stored but not yet read into the wheel",
        sched.timer_enqueue_behind,
    )
    yield f.gauge(
        "rocketmq_timer_enqueue_latency",
        "age in ms of the oldest timer message not yet read into the wheel",
        sched.timer_enqueue_latency_ms,
    )
    yield f.gauge(
        "rocketmq_timer_dequeue_latency",
        "ms the earliest due timer message is late (0 when none is due)",
        sched.timer_dequeue_latency_ms,
    )
    yield f.counter(
        "ariane_schedule_delivered_messages_total",
        "timer and delay-level messages written to their topic",
        sched.delivered_total,
    )
    yield f.counter("ariane_timer_recalled_messages_total", "timer messages recalled",
                    sched.recalled_total)  # fmt: skip
    level = ["delay_level"]
    yield f.labelled(
        GaugeMetricFamily,
        "ariane_delay_level_messages",
        "messages parked under the delay level, not yet delivered",
        level,
        [([str(b.level)], b.messages) for b in sched.levels],
    )
    yield f.labelled(
        GaugeMetricFamily,
        "ariane_delay_level_lag_seconds",
        "seconds the level's oldest due message is late (0 when none is due)",
        level,
        [([str(b.level)], b.lag_seconds) for b in sched.levels],
    )


def _auth(f: _Families, auth: snapshots.AuthCounts) -> Iterator[Metric]:
    """Authentication and authorization decisions by result (RocketMQ has no auth metric;
    the names follow its ``rocketmq_`` family, issue 21)."""
    yield f.labelled(
        CounterMetricFamily,
        "rocketmq_authentication_total",
        "requests authenticated, by result (ok, missing, malformed, unknown_user, disabled, "
        "bad_signature)",
        ["result"],
        [([r], n) for r, n in sorted(auth.authentications.items())],
    )
    yield f.labelled(
        CounterMetricFamily,
        "rocketmq_authorization_total",
        "requests authorized, by result (allowed, no_subject, unknown_user, disabled, "
        "no_match, denied)",
        ["result"],
        [([r], n) for r, n in sorted(auth.authorizations.items())],
    )


def _transactions(f: _Families, tx: snapshots.TransactionCounts) -> Iterator[Metric]:
    """RocketMQ's ``rocketmq_half_messages`` and commit/rollback counters (``BrokerMetrics
    Constant``; without its ``topic`` label), Ariane's for check-backs and discards."""
    yield f.gauge("rocketmq_half_messages", "unresolved half (prepared) messages",
                  tx.half_messages)  # fmt: skip
    yield f.counter("rocketmq_commit_messages_total", "transactions committed",
                    tx.committed_total)  # fmt: skip
    yield f.counter("rocketmq_rollback_messages_total", "transactions rolled back",
                    tx.rolled_back_total)  # fmt: skip
    yield f.counter(
        "ariane_transaction_checks_total", "check-backs sent to producers", tx.checks_total
    )
    yield f.counter(
        "ariane_transaction_discarded_total",
        "half messages given up after transaction_check_max check-backs",
        tx.discarded_total,
    )


class NameServerCollector(registry.Collector):
    """The name server's series, read from ``source()`` at every scrape.

    Args:
        source: returns a fresh snapshot; called once per scrape.
    """

    def __init__(self, source: Callable[[], snapshots.NameServerSnapshot]) -> None:
        self._source = source

    def collect(self) -> Iterator[Metric]:
        """Route-table counts and, per broker group, whether it has a live master."""
        snap = self._source()
        f = _Families(snap.identity)
        per_cluster: dict[str, int] = {}
        for member in snap.brokers:
            per_cluster[member.cluster] = per_cluster.get(member.cluster, 0) + 1
        yield f.labelled(
            GaugeMetricFamily,
            "ariane_namesrv_brokers",
            "live registered brokers per broker cluster",
            ["broker_cluster"],
            [([c], n) for c, n in sorted(per_cluster.items())],
        )
        yield f.labelled(
            GaugeMetricFamily,
            "ariane_namesrv_broker_group_master",
            "1 when the broker group has a live master, 0 when it has none",
            ["broker_name"],
            [([g], has) for g, has in sorted(snap.broker_groups.items())],
        )
        yield f.gauge("ariane_namesrv_topics", "topics with a route", snap.topic_count)
        yield _rpc_latency(f, snap.rpc_latency_ms)
