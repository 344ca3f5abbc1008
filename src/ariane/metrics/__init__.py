"""Prometheus metrics of Ariane's processes: RocketMQ 5's names, read at scrape time.

The only package that imports prometheus_client (``.importlinter`` checks it). A process builds
plain ``snapshots`` values from its own state; ``collectors`` turn them into series when
Prometheus scrapes; ``exposition.MetricsServer`` serves ``/metrics``. ``alerts`` and
``dashboard`` are the one source of the rules and the Grafana dashboard the chart ships
(``chartgen`` writes the chart's files). See DESIGN.md §9 and
``specs/rocketmq-reference.md`` §c for the names.
"""

from ariane.metrics import alerts, collectors, dashboard, exposition, operator, snapshots
from ariane.metrics.collectors import BrokerCollector, NameServerCollector
from ariane.metrics.exposition import MetricsServer, loop_source
from ariane.metrics.operator import OperatorMetrics
from ariane.metrics.snapshots import (
    AuthCounts,
    BrokerMemberView,
    BrokerSnapshot,
    DelayLevelBacklog,
    DiskUsage,
    GroupTopicLag,
    HistogramCounts,
    Identity,
    NameServerSnapshot,
    QueueLag,
    Replication,
    ScheduleBacklog,
    SlaveReplication,
    TransactionCounts,
    copy_histograms,
)

__all__ = [
    "AuthCounts",
    "BrokerCollector",
    "BrokerMemberView",
    "BrokerSnapshot",
    "DelayLevelBacklog",
    "DiskUsage",
    "GroupTopicLag",
    "HistogramCounts",
    "Identity",
    "MetricsServer",
    "NameServerCollector",
    "NameServerSnapshot",
    "OperatorMetrics",
    "QueueLag",
    "Replication",
    "ScheduleBacklog",
    "SlaveReplication",
    "TransactionCounts",
    "alerts",
    "collectors",
    "copy_histograms",
    "dashboard",
    "exposition",
    "loop_source",
    "operator",
    "snapshots",
]
