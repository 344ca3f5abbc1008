"""Ariane's alert rules are valid for Prometheus and fire when they should: ``promtool check
rules`` accepts the operator's and the chart's rendering, and ``promtool test rules`` drives
every alert from quiet to firing on synthetic series (Debian's prometheus package, fetched by
``tests/prometheus/install.sh``)."""

from __future__ import annotations

import json
import pathlib
import subprocess

import pytest

from ariane.metrics import alerts
from ariane.operator import model
from prometheus_testing import check_rules, promtool

SEL = alerts.CHART_SELECTOR
BROKER = 'app_kubernetes_io_name="ariane",app_kubernetes_io_component="broker",node_id="b-0"'
NAMESRV = 'app_kubernetes_io_name="ariane",app_kubernetes_io_component="namesrv"'
SLAVE = f'{BROKER},slave="10.0.0.2:40000"'


def test_operator_rendered_rules_pass_promtool_check(tmp_path: pathlib.Path) -> None:
    """The operator's PrometheusRule groups are valid rule files."""
    rule = model.prometheus_rule(model.Owner("demo", "mq", "uid-1"))
    check_rules(tmp_path, rule["spec"]["groups"])


def test_chart_selector_rules_pass_promtool_check(tmp_path: pathlib.Path) -> None:
    """The rules with the chart's selector are valid rule files."""
    check_rules(tmp_path, [{"name": "ariane", "rules": alerts.rules(SEL)}])


# (alert, input series, minutes to evaluate at, labels of the firing alert)
CASES: list[tuple[str, list[dict[str, str]], int, dict[str, str]]] = [
    ("ArianeBrokerDown", [{"series": f"up{{{BROKER}}}", "values": "0x10"}], 6,
     {"node_id": "b-0"}),
    ("ArianeNameServerDown", [{"series": f"up{{{NAMESRV}}}", "values": "0x10"}], 6, {}),
    ("ArianeConsumerLagGrowing",
     [{"series": f"rocketmq_consumer_lag_messages{{{BROKER},consumer_group=\"g\"}}",
       "values": "0+10x60"}], 50, {"consumer_group": "g"}),
    ("ArianeDlqGrowing",
     [{"series": f"rocketmq_send_to_dlq_messages_total{{{BROKER}}}", "values": "0+1x30"}],
     25, {}),
    ("ArianeDiskAboveCleanWatermark",
     [{"series": f"rocketmq_brokeruntime_commitlog_disk_ratio{{{BROKER}}}", "values": "0.8x20"},
      {"series": f"ariane_storage_disk_watermark_ratio{{{BROKER},level=\"clean\"}}",
       "values": "0.75x20"}], 15, {}),
    ("ArianeDiskFull",
     [{"series": f"rocketmq_brokeruntime_commitlog_disk_ratio{{{BROKER}}}", "values": "0.95x5"},
      {"series": f"ariane_storage_disk_watermark_ratio{{{BROKER},level=\"reject_writes\"}}",
       "values": "0.9x5"}], 3, {}),
    ("ArianeBrokerGroupWithoutMaster",
     [{"series": f"ariane_namesrv_broker_group_master{{{NAMESRV},broker_name=\"a\"}}",
       "values": "0x10"}], 5, {"broker_name": "a"}),
    ("ArianeSlaveOutOfSync",
     [{"series": f"ariane_ha_slave_lag_seconds{{{SLAVE}}}", "values": "0+60x20"}], 10,
     {"slave": "10.0.0.2:40000"}),
    ("ArianeSlaveOutOfSync",
     [{"series": f"ariane_ha_slave_in_sync{{{SLAVE}}}", "values": "0x10"}], 6,
     {"slave": "10.0.0.2:40000"}),
    ("ArianeSyncMasterWithoutInSyncSlave",
     [{"series": f"ariane_ha_in_sync_slaves{{{BROKER}}}", "values": "0x10"},
      {"series": f"ariane_broker_role{{{BROKER},role=\"SYNC_MASTER\"}}", "values": "1x10"}],
     3, {}),
    ("ArianeTimerLag",
     [{"series": f"rocketmq_timer_dequeue_latency{{{BROKER}}}", "values": "0+60000x20"}], 10,
     {}),
    ("ArianeTimerLag",
     [{"series": f"ariane_delay_level_lag_seconds{{{BROKER},delay_level=\"3\"}}",
       "values": "0+60x20"}], 10, {"delay_level": "3"}),
]  # fmt: skip


def test_every_alert_has_a_case() -> None:
    """No alert goes without a ``promtool test rules`` case (an alert whose expression has
    several branches has a case for each)."""
    assert {c[0] for c in CASES} == {a.name for a in alerts.ALERTS}


@pytest.mark.parametrize(
    ("alert", "series", "minutes", "labels"),
    CASES,
    ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)],
)
def test_alert_fires_on_its_series_and_not_before(
    tmp_path: pathlib.Path,
    alert: str,
    series: list[dict[str, str]],
    minutes: int,
    labels: dict[str, str],
) -> None:
    """The alert is quiet at minute 0 and firing at ``minutes`` (its ``for`` elapsed)."""
    rules = tmp_path / "rules.yaml"
    rules.write_text(json.dumps({"groups": [{"name": "ariane", "rules": alerts.rules(SEL)}]}))
    expected = {**dict(_labels_of(series[0]["series"])), **labels, "alertname": alert}
    expected["severity"] = next(a.severity for a in alerts.ALERTS if a.name == alert)
    expected.pop("__name__", None)
    summary = next(a.summary for a in alerts.ALERTS if a.name == alert)
    firing = {"exp_labels": {k: v for k, v in expected.items() if k != "alertname"},
              "exp_annotations": {"summary": summary}}  # fmt: skip
    firing["exp_labels"].pop("level", None)
    test = {
        "rule_files": [str(rules)],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": series,
                "alert_rule_test": [
                    {"eval_time": "0m", "alertname": alert, "exp_alerts": []},
                    {"eval_time": f"{minutes}m", "alertname": alert, "exp_alerts": [firing]},
                ],
            }
        ],
    }
    test_file = tmp_path / "test.yaml"
    test_file.write_text(json.dumps(test))
    done = subprocess.run(
        [promtool(), "test", "rules", str(test_file)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stdout + done.stderr


def _labels_of(series: str) -> list[tuple[str, str]]:
    inner = series[series.index("{") + 1 : series.rindex("}")]
    pairs = [p.split("=", 1) for p in inner.split(",")]
    return [(k, v.strip('"')) for k, v in pairs]
