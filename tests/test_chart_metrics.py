"""The chart's alert rules and Grafana dashboard come from ``ariane.metrics`` and are sound:
the committed chart files are what ``metrics.chartgen`` renders, the rules pass ``promtool check
rules``, the dashboard is valid Grafana JSON on a non-overlapping grid, and every panel queries
only series a broker or name server really exports."""

from __future__ import annotations

import dataclasses
import json
import pathlib
import re
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest

from ariane import metrics
from ariane.metrics import alerts, chartgen, dashboard
from metrics_testing import parse
from prometheus_testing import check_rules

CHART = pathlib.Path(__file__).resolve().parents[1] / "charts" / "ariane"
FILES = CHART / "files"
SELECTED_NAME = re.compile(r"([A-Za-z_:][\w:]*)\{")
PROMETHEUS_OWN = {"up"}
"""Series Prometheus itself records for every target."""


def test_committed_chart_files_are_what_chartgen_renders() -> None:
    """Edit ``ariane.metrics`` and run ``make chart-metrics``: the chart never gets a hand copy."""
    committed = {p.name: p.read_text() for p in FILES.iterdir()}
    assert committed == chartgen.files()


def test_chart_rules_are_the_alerts_with_the_chart_selector() -> None:
    """The PrometheusRule spec holds every alert of ``metrics.alerts`` and nothing else."""
    spec = json.loads((FILES / chartgen.RULES_FILE).read_text())
    assert spec["groups"][0]["rules"] == alerts.rules(alerts.CHART_SELECTOR)
    assert len(spec["groups"]) == 1


def test_chart_rules_pass_promtool_check(tmp_path: pathlib.Path) -> None:
    """``promtool check rules`` accepts the spec the chart's PrometheusRule carries."""
    check_rules(tmp_path, json.loads((FILES / chartgen.RULES_FILE).read_text())["groups"])


def test_templates_ship_the_files_behind_their_toggles() -> None:
    """Each template reads its generated file and renders only when its value is on."""
    rule = (CHART / "templates" / "prometheusrule.yaml").read_text()
    board = (CHART / "templates" / "grafana-dashboard.yaml").read_text()
    assert f'.Files.Get "files/{chartgen.RULES_FILE}"' in rule
    assert "if .Values.metrics.prometheusRule.enabled" in rule
    assert f'.Files.Get "files/{chartgen.DASHBOARD_FILE}"' in board
    assert "if .Values.metrics.dashboard.enabled" in board


def _panels() -> list[dict[str, Any]]:
    model = json.loads((FILES / chartgen.DASHBOARD_FILE).read_text())
    return [p for p in model["panels"] if p["type"] != "row"]


def test_dashboard_is_a_grafana_model_on_a_grid_without_overlap() -> None:
    """Unique ids, a uid, the two variables, and panels inside 24 columns, never overlapping."""
    model = json.loads((FILES / chartgen.DASHBOARD_FILE).read_text())
    assert model["uid"] == dashboard.UID and model["schemaVersion"] == dashboard.SCHEMA_VERSION
    ids = [p["id"] for p in model["panels"]]
    assert len(ids) == len(set(ids))
    assert [r["title"] for r in model["panels"] if r["type"] == "row"] == [
        "Cluster overview",
        "Per-topic throughput",
        "Per-group lag",
        "Storage",
        "Replication, timers and transactions",
    ]
    cells: set[tuple[int, int]] = set()
    for panel in model["panels"]:
        grid = panel["gridPos"]
        assert grid["x"] >= 0 and grid["x"] + grid["w"] <= dashboard.GRID_COLUMNS
        mine = {
            (x, y)
            for x in range(grid["x"], grid["x"] + grid["w"])
            for y in range(grid["y"], grid["y"] + grid["h"])
        }
        assert not mine & cells, panel["title"]
        cells |= mine
    assert {v["name"] for v in model["templating"]["list"]} == {"datasource", "cluster"}


def _exported_names() -> set[str]:
    """Series names of a broker and a name server snapshot with every table filled."""
    lag = metrics.GroupTopicLag("g", "t", 3, 1, 50, 7, queues=(metrics.QueueLag(0, 3, 1),))
    broker = metrics.BrokerSnapshot(
        identity=metrics.Identity("c", "broker", "b-0"),
        role="ASYNC_MASTER", writable=True, messages_in_total=1, bytes_in_total=1,
        messages_out_total=1, bytes_out_total=1, send_to_dlq_total=1,
        topic_max_offsets={"t": 10}, group_count=1, producer_connections=1,
        consumer_connections=1, lags=(lag,), lag_pairs_truncated=0, storage_size_bytes=1,
        flush_behind_bytes=0, dispatch_behind_bytes=0,
        disk=metrics.DiskUsage(0.5, 0.75, 0.85, 0.9), frontend_calls={0: 1},
        commit_log_max_offset=10,
        replication=metrics.Replication(
            3, False, 1, (metrics.SlaveReplication("s:1", 9, 1, 0.0, True),)
        ),
        schedule=metrics.ScheduleBacklog(
            1, 1, 5, 5, 1, 0, (metrics.DelayLevelBacklog(1, 1, 0.5),)
        ),
        transactions=metrics.TransactionCounts(1, 1, 1, 1, 0),
    )  # fmt: skip
    slave = dataclasses.replace(
        broker, replication=metrics.Replication(3, False, 0, master_connected=True)
    )
    namesrv = metrics.NameServerSnapshot(
        identity=metrics.Identity("", "nameserver", "ns"),
        brokers=(metrics.BrokerMemberView("c", "b", 0),),
        broker_groups={"b": True},
        topic_count=1,
    )
    registry = CollectorRegistry(auto_describe=False)
    registry.register(metrics.NameServerCollector(lambda: namesrv))
    names = {name for name, _ in parse(generate_latest(registry).decode())}
    for snap in (broker, slave):
        one = CollectorRegistry(auto_describe=False)
        one.register(metrics.BrokerCollector(lambda snap=snap: snap))  # type: ignore[misc]
        names |= {name for name, _ in parse(generate_latest(one).decode())}
    return names


def test_every_panel_queries_series_that_are_exported() -> None:
    """Each query names at least one series, and every name is one Ariane or Prometheus makes."""
    exported = _exported_names() | PROMETHEUS_OWN
    queried: set[str] = set()
    for panel in _panels():
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            names = set(SELECTED_NAME.findall(target["expr"]))
            assert names, target["expr"]
            assert names <= exported, (panel["title"], names - exported)
            queried |= names
    assert {"rocketmq_consumer_lag_messages", "rocketmq_messages_in_total"} <= queried
    assert {"ariane_ha_slave_lag_seconds", "rocketmq_timer_dequeue_latency"} <= queried


def test_the_name_check_catches_a_misspelt_series() -> None:
    """The check above would fail on a query of a series nobody exports."""
    names = set(SELECTED_NAME.findall('sum(rate(rocketmq_message_in_total{cluster="c"}[1m]))'))
    assert not names <= _exported_names()
