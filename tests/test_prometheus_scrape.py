"""A real Prometheus scraping real ``ariane namesrv`` and ``ariane broker`` processes sees the
key RocketMQ series with non-zero values, and Ariane's consumer-lag alert (from
``ariane.metrics.alerts``, its ``for`` shortened) goes to ``firing`` while a group falls behind.
"""

from __future__ import annotations

import asyncio
import pathlib
import time
from typing import Any
from urllib.parse import urlsplit

import pytest

from ariane import client
from ariane.metrics import alerts
from metrics_testing import Cluster, cluster, load
from prometheus_testing import Target, api, prometheus

pytestmark = pytest.mark.slow

TOPIC, GROUP = "scraped", "scrape-idle"
LAG_ALERT = "ArianeConsumerLagGrowing"
LAG_ALERT_FOR = "2s"
"""The lag alert's ``for``, shortened from 30 minutes so that it fires within the test."""
DEADLINE_S = 45.0
"""Longest wait for every series and the alert, with Prometheus scraping every second."""
SEL = alerts.CHART_SELECTOR

EXPECTED: dict[str, str] = {
    "messages in": f"rocketmq_messages_in_total{{{SEL}}} > 0",
    "bytes in": f"rocketmq_throughput_in_total{{{SEL}}} > 0",
    "messages out": f"rocketmq_messages_out_total{{{SEL}}} > 0",
    "lag": f'rocketmq_consumer_lag_messages{{{SEL},consumer_group="{GROUP}",topic="{TOPIC}"}} > 0',
    "lag latency": f'rocketmq_consumer_lag_latency{{{SEL},consumer_group="{GROUP}"}} > 0',
    "topic throughput": f'rocketmq_producer_offset{{{SEL},topic="{TOPIC}"}} > 0',
    "storage": f"rocketmq_storage_size{{{SEL}}} > 0",
    "master": f'ariane_namesrv_broker_group_master{{{SEL},broker_name="broker-m"}} == 1',
    "broker up": f'up{{{SEL},app_kubernetes_io_component="broker"}} == 1',
    "namesrv up": f'up{{{SEL},app_kubernetes_io_component="namesrv"}} == 1',
}
"""What must be true in Prometheus (each query must return at least one series)."""


def _lag_rules() -> list[dict[str, Any]]:
    """The chart's lag rule, generated (not copied) with its ``for`` shortened."""
    rules = [r for r in alerts.rules(SEL) if r["alert"] == LAG_ALERT]
    assert len(rules) == 1
    return [{"name": "ariane-scrape-test", "rules": [{**rules[0], "for": LAG_ALERT_FOR}]}]


def _targets(running: Cluster) -> list[Target]:
    def target(url: str, component: str) -> Target:
        labels = {"app_kubernetes_io_name": "ariane", "app_kubernetes_io_component": component}
        return Target(urlsplit(url).netloc, labels)

    return [target(running.broker_metrics, "broker"), target(running.namesrv_metrics, "namesrv")]


def _missing(url: str) -> set[str]:
    """What Prometheus does not show yet: names of ``EXPECTED`` and ``LAG_ALERT``."""
    missing = {
        name for name, query in EXPECTED.items() if not api(url, "query", query=query)["result"]
    }
    firing = [
        a for a in api(url, "alerts")["alerts"]
        if a["labels"]["alertname"] == LAG_ALERT and a["state"] == "firing"
        and a["labels"]["consumer_group"] == GROUP
    ]  # fmt: skip
    return missing if firing else missing | {LAG_ALERT}


async def _produce_until_seen(namesrv: str, url: str) -> set[str]:
    """Send to ``TOPIC`` (nobody consumes) until Prometheus shows everything; what it lacks."""
    missing = {"not polled"}
    deadline = time.monotonic() + DEADLINE_S
    async with client.Producer(namesrv) as producer:
        while missing and time.monotonic() < deadline:
            for i in range(10):
                await producer.send(TOPIC, f"late-{i}".encode())
            missing = await asyncio.to_thread(_missing, url)
    return missing


def test_real_prometheus_sees_the_series_and_fires_the_lag_alert(tmp_path: pathlib.Path) -> None:
    """Under load with an idle group, every expected series is non-zero and the lag alert fires
    within ``DEADLINE_S``."""
    with cluster(tmp_path) as running:
        # The group receives and acks one message, then stops: its lag only grows from here.
        asyncio.run(load(running.namesrv, TOPIC, GROUP, sent=10, consumed=1))
        with prometheus(tmp_path, _targets(running), _lag_rules()) as url:
            missing = asyncio.run(_produce_until_seen(running.namesrv, url))
    assert not missing, f"Prometheus never showed: {sorted(missing)}"
