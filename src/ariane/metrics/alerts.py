"""Ariane's Prometheus alert rules: one source for the chart's and the operator's PrometheusRule.

``rules(selector)`` returns the rules as plain dicts (the ``rules:`` list of a rule group), with
``selector`` (PromQL matchers such as ``app_kubernetes_io_name="ariane"``) added to every
selector. The operator scopes them to one Broker; the chart ships ``rules(CHART_SELECTOR)``
(``metrics.chartgen`` writes ``charts/ariane/files/prometheus-rules.json``).
``tests/test_prometheus_rules.py`` checks both renderings with ``promtool check rules`` and
drives every alert with ``promtool test rules``.

The ``app_kubernetes_io_*`` labels are the target labels the operator's ServiceMonitor copies
from the Services (``targetLabels``). Alerts on series Ariane does not export yet (CR readiness)
are left out rather than shipped silent.
"""

from __future__ import annotations

import dataclasses
from typing import Any

CHART_SELECTOR = 'app_kubernetes_io_name="ariane"'
"""The chart's rules watch every Ariane target Prometheus scrapes."""

SLAVE_LAG_SECONDS_MAX = 60
"""A slave whose oldest unacked byte is older than this, s, is out of sync (the broker's own
rule, ``max_gap_not_in_sync_bytes``, counts too)."""

TIMER_LAG_SECONDS_MAX = 60
"""A timer or delay-level message this late, s, means delivery is falling behind."""


@dataclasses.dataclass(frozen=True, slots=True)
class Alert:
    """One alert; ``expr`` has ``{sel}`` where the selector goes.

    Attributes:
        name: the alert name. expr: PromQL with ``{sel}`` placeholders. duration: ``for``.
        severity: ``warning`` or ``critical``. summary: one line for people.
    """

    name: str
    expr: str
    duration: str
    severity: str
    summary: str


ALERTS = (
    Alert("ArianeBrokerDown", 'up{{{sel},app_kubernetes_io_component="broker"}} == 0', "5m",
          "critical", "a broker is not scraped"),
    Alert("ArianeNameServerDown", 'up{{{sel},app_kubernetes_io_component="namesrv"}} == 0',
          "5m", "critical", "a name server is not scraped"),
    Alert("ArianeConsumerLagGrowing",
          "rocketmq_consumer_lag_messages{{{sel}}} > 0"
          " and deriv(rocketmq_consumer_lag_messages{{{sel}}}[15m]) > 0",
          "30m", "warning", "a consumer group's lag has grown for 30 minutes"),
    Alert("ArianeDlqGrowing", "increase(rocketmq_send_to_dlq_messages_total{{{sel}}}[10m]) > 0",
          "10m", "warning", "messages are going to a dead-letter queue"),
    Alert("ArianeDiskAboveCleanWatermark",
          "rocketmq_brokeruntime_commitlog_disk_ratio{{{sel}}}"
          ' >= ignoring(level) ariane_storage_disk_watermark_ratio{{{sel},level="clean"}}',
          "10m", "warning", "disk use is above the watermark where files are deleted early"),
    Alert("ArianeDiskFull",
          "rocketmq_brokeruntime_commitlog_disk_ratio{{{sel}}}"
          ' >= ignoring(level) ariane_storage_disk_watermark_ratio{{{sel},level="reject_writes"}}',
          "1m", "critical", "disk use is above the watermark where writes are refused"),
    Alert("ArianeBrokerGroupWithoutMaster", "ariane_namesrv_broker_group_master{{{sel}}} == 0",
          "2m", "critical", "a broker group has no live master"),
    Alert("ArianeSlaveOutOfSync",
          f"ariane_ha_slave_lag_seconds{{{{{{sel}}}}}} > {SLAVE_LAG_SECONDS_MAX}"
          " or ariane_ha_slave_in_sync{{{sel}}} == 0",
          "5m", "warning", "a slave has been out of sync with its master for 5 minutes"),
    Alert("ArianeSyncMasterWithoutInSyncSlave",
          "ariane_ha_in_sync_slaves{{{sel}}} == 0"
          ' and ignoring(role) ariane_broker_role{{{sel},role="SYNC_MASTER"}} == 1',
          "1m", "critical",
          "a SYNC_MASTER has no in-sync slave: its sends answer SLAVE_NOT_AVAILABLE"),
    Alert("ArianeTimerLag",
          f"rocketmq_timer_dequeue_latency{{{{{{sel}}}}}} > {TIMER_LAG_SECONDS_MAX * 1000}"
          f" or ariane_delay_level_lag_seconds{{{{{{sel}}}}}} > {TIMER_LAG_SECONDS_MAX}",
          "5m", "warning", "timer or delay-level messages are delivered more than a minute late"),
)  # fmt: skip
"""Every alert, in the order they are rendered."""


def rules(selector: str) -> list[dict[str, Any]]:
    """The rules of ``ALERTS`` with ``selector`` in every series selector.

    Args:
        selector: PromQL matchers, at least one of which cannot match the empty string.
    """
    return [
        {
            "alert": a.name,
            "expr": a.expr.format(sel=selector),
            "for": a.duration,
            "labels": {"severity": a.severity},
            "annotations": {"summary": a.summary},
        }
        for a in ALERTS
    ]
