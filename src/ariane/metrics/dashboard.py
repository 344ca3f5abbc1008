"""Ariane's Grafana dashboard, as a plain dict built from the series ``collectors`` export.

The chart ships it (``charts/ariane/files/grafana-dashboard.json``, written by
``metrics.chartgen``) in a ConfigMap the Grafana sidecar picks up. Five rows: cluster overview,
per-topic throughput, per-group lag, storage, and replication, timers and transactions.

Invariants: every query selects series by name with a ``{…}`` matcher (so a test can read the
names back and check each against what the broker and name server really export); every
query is scoped by the ``$cluster`` variable or the name server's ``node_type``; panels are laid
out on Grafana's 24-column grid without overlap.
"""

from __future__ import annotations

import dataclasses
from typing import Any

UID = "ariane-overview"
"""The dashboard's stable uid (links to it survive re-imports)."""

SCHEMA_VERSION = 39
"""Grafana's dashboard JSON schema version the layout follows (Grafana 10.x/11.x)."""

RATE_WINDOW = "1m"
"""Window of every ``rate()``: four scrapes at Prometheus' default 15 s interval."""

GRID_COLUMNS = 24
"""Width of Grafana's grid, in columns."""

PANEL_HEIGHT = 8
"""Height of a time series panel, in grid rows (a stat is half of it)."""

_B = 'cluster=~"$cluster",node_type="broker"'
_NS = 'node_type="nameserver"'


@dataclasses.dataclass(frozen=True, slots=True)
class Panel:
    """One panel: a title, its PromQL queries and how to show them.

    Attributes:
        title: shown above the panel. exprs: (PromQL, legend) pairs. unit: Grafana unit id.
        kind: ``timeseries`` or ``stat``.
    """

    title: str
    exprs: tuple[tuple[str, str], ...]
    unit: str = "short"
    kind: str = "timeseries"


ROWS: tuple[tuple[str, tuple[Panel, ...]], ...] = (
    ("Cluster overview", (
        Panel("Brokers registered", ((f"sum(ariane_namesrv_brokers{{{_NS}}})", ""),), kind="stat"),
        Panel("Broker groups without a master",
              ((f"count(ariane_namesrv_broker_group_master{{{_NS}}} == 0) or vector(0)", ""),),
              kind="stat"),
        Panel("Topics", ((f"max(rocketmq_topic_number{{{_B}}})", ""),), kind="stat"),
        Panel("Consumer groups", ((f"max(rocketmq_consumer_group_number{{{_B}}})", ""),),
              kind="stat"),
        Panel("Producers", ((f"sum(rocketmq_producer_connections{{{_B}}})", ""),), kind="stat"),
        Panel("Consumers", ((f"sum(rocketmq_consumer_connections{{{_B}}})", ""),), kind="stat"),
        Panel("Messages in / out per broker", (
            (f"rate(rocketmq_messages_in_total{{{_B}}}[{RATE_WINDOW}])", "in {{node_id}}"),
            (f"rate(rocketmq_messages_out_total{{{_B}}}[{RATE_WINDOW}])", "out {{node_id}}"),
        ), unit="ops"),
        Panel("Bytes in / out per broker", (
            (f"rate(rocketmq_throughput_in_total{{{_B}}}[{RATE_WINDOW}])", "in {{node_id}}"),
            (f"rate(rocketmq_throughput_out_total{{{_B}}}[{RATE_WINDOW}])", "out {{node_id}}"),
        ), unit="Bps"),
    )),
    ("Per-topic throughput", (
        Panel("Messages stored per topic", (
            (f"sum by (topic) (rate(rocketmq_producer_offset{{{_B}}}[{RATE_WINDOW}]))",
             "{{topic}}"),
        ), unit="ops"),
        Panel("Messages sent to dead-letter queues", (
            (f"rate(rocketmq_send_to_dlq_messages_total{{{_B}}}[{RATE_WINDOW}])", "{{node_id}}"),
        ), unit="ops"),
    )),
    ("Per-group lag", (
        Panel("Lag (messages)", (
            (f"sum by (consumer_group, topic) (rocketmq_consumer_lag_messages{{{_B}}})",
             "{{consumer_group}} / {{topic}}"),
        )),
        Panel("Lag (age of the oldest unconsumed message)", (
            (f"max by (consumer_group, topic) (rocketmq_consumer_lag_latency{{{_B}}})",
             "{{consumer_group}} / {{topic}}"),
        ), unit="ms"),
        Panel("Consumed per group", (
            (f"sum by (consumer_group, topic) "
             f"(rate(rocketmq_consumer_offset{{{_B}}}[{RATE_WINDOW}]))",
             "{{consumer_group}} / {{topic}}"),
        ), unit="ops"),
        Panel("In flight (received, not acked)", (
            (f"sum by (consumer_group, topic) (rocketmq_consumer_inflight_messages{{{_B}}})",
             "{{consumer_group}} / {{topic}}"),
        )),
    )),
    ("Storage", (
        Panel("CommitLog size", ((f"rocketmq_storage_size{{{_B}}}", "{{node_id}}"),),
              unit="bytes"),
        Panel("Disk use against the watermarks", (
            (f"rocketmq_brokeruntime_commitlog_disk_ratio{{{_B}}}", "used {{node_id}}"),
            (f"max by (level) (ariane_storage_disk_watermark_ratio{{{_B}}})", "{{level}}"),
        ), unit="percentunit"),
        Panel("Flush / dispatch behind", (
            (f"rocketmq_storage_flush_behind_bytes{{{_B}}}", "flush {{node_id}}"),
            (f"rocketmq_storage_dispatch_behind_bytes{{{_B}}}", "dispatch {{node_id}}"),
        ), unit="bytes"),
        Panel("Writable", ((f"ariane_broker_writable{{{_B}}}", "{{node_id}}"),)),
    )),
    ("Replication, timers and transactions", (
        Panel("Roles", ((f"ariane_broker_role{{{_B}}} == 1", "{{node_id}} {{role}}"),),
              kind="stat"),
        Panel("Epoch", ((f"max(ariane_ha_epoch{{{_B}}})", ""),), kind="stat"),
        Panel("Fenced masters", ((f"sum(ariane_ha_fenced{{{_B}}}) or vector(0)", ""),),
              kind="stat"),
        Panel("Half messages", ((f"sum(rocketmq_half_messages{{{_B}}})", ""),), kind="stat"),
        Panel("In-sync slaves per master", (
            (f"ariane_ha_in_sync_slaves{{{_B}}}", "{{node_id}}"),
        )),
        Panel("CommitLog end (master written, slave replicated)", (
            (f"rocketmq_brokeruntime_commitlog_maxoffset{{{_B}}}", "{{node_id}}"),
        ), unit="bytes"),
        Panel("Slave lag (bytes)", (
            (f"ariane_ha_slave_lag_bytes{{{_B}}}", "{{node_id}} to {{slave}}"),
        ), unit="bytes"),
        Panel("Slave lag (age of the oldest unacked byte)", (
            (f"ariane_ha_slave_lag_seconds{{{_B}}}", "{{node_id}} to {{slave}}"),
        ), unit="s"),
        Panel("Timer and delay backlog", (
            (f"rocketmq_timing_messages{{{_B}}}", "wheel {{node_id}}"),
            (f"rocketmq_timer_enqueue_lag{{{_B}}}", "not in the wheel {{node_id}}"),
            (f"sum by (node_id) (ariane_delay_level_messages{{{_B}}})", "delay levels {{node_id}}"),
        )),
        Panel("Timer and delay lag", (
            (f"rocketmq_timer_dequeue_latency{{{_B}}} / 1000", "timer {{node_id}}"),
            (f"max by (node_id) (ariane_delay_level_lag_seconds{{{_B}}})",
             "delay levels {{node_id}}"),
        ), unit="s"),
        Panel("Transactions", (
            (f"rate(rocketmq_commit_messages_total{{{_B}}}[{RATE_WINDOW}])", "commit {{node_id}}"),
            (f"rate(rocketmq_rollback_messages_total{{{_B}}}[{RATE_WINDOW}])",
             "rollback {{node_id}}"),
            (f"rate(ariane_transaction_checks_total{{{_B}}}[{RATE_WINDOW}])",
             "check-back {{node_id}}"),
        ), unit="ops"),
    )),
)  # fmt: skip
"""The dashboard's rows and their panels, top to bottom, left to right."""


def _panel(panel: Panel, panel_id: int, x: int, y: int, width: int) -> dict[str, Any]:
    height = PANEL_HEIGHT // 2 if panel.kind == "stat" else PANEL_HEIGHT
    return {
        "id": panel_id,
        "type": panel.kind,
        "title": panel.title,
        "datasource": {"type": "prometheus", "uid": "${datasource}"},
        "gridPos": {"h": height, "w": width, "x": x, "y": y},
        "fieldConfig": {"defaults": {"unit": panel.unit}, "overrides": []},
        "options": {},
        "targets": [
            {
                "refId": chr(ord("A") + i),
                "expr": expr,
                "legendFormat": legend or "__auto",
                "datasource": {"type": "prometheus", "uid": "${datasource}"},
            }
            for i, (expr, legend) in enumerate(panel.exprs)
        ],
    }


def _layout() -> list[dict[str, Any]]:
    """Rows then their panels: stats six to a line, time series two to a line."""
    panels: list[dict[str, Any]] = []
    y = 0
    for title, row in ROWS:
        panels.append(
            {
                "id": len(panels) + 1,
                "type": "row",
                "title": title,
                "collapsed": False,
                "gridPos": {"h": 1, "w": GRID_COLUMNS, "x": 0, "y": y},
                "panels": [],
            }
        )
        y += 1
        for kind, per_line in (("stat", 6), ("timeseries", 2)):
            width = GRID_COLUMNS // per_line
            of_kind = [p for p in row if p.kind == kind]
            for i, panel in enumerate(of_kind):
                x = (i % per_line) * width
                panels.append(_panel(panel, len(panels) + 1, x, y, width))
                if i % per_line == per_line - 1 or i == len(of_kind) - 1:
                    y += PANEL_HEIGHT // 2 if kind == "stat" else PANEL_HEIGHT
    return panels


def dashboard() -> dict[str, Any]:
    """The Grafana dashboard model (import it, or mount it through the sidecar)."""
    variable = {"type": "prometheus", "uid": "${datasource}"}
    cluster = {"name": "cluster", "label": "Cluster", "type": "query", "datasource": variable,
               "query": "label_values(rocketmq_topic_number, cluster)",
               "includeAll": True, "multi": True, "allValue": ".*", "refresh": 2}  # fmt: skip
    source = {"name": "datasource", "label": "Data source", "type": "datasource"}
    return {
        "uid": UID,
        "title": "Ariane",
        "description": "RocketMQ-compatible brokers: traffic, consumer lag, storage",
        "tags": ["ariane", "rocketmq"],
        "schemaVersion": SCHEMA_VERSION,
        "editable": True,
        "refresh": "30s",
        "time": {"from": "now-1h", "to": "now"},
        "timezone": "",
        "templating": {"list": [{**source, "query": "prometheus"}, cluster]},
        "panels": _layout(),
    }
