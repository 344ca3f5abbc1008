"""The operator's pure helpers: the name-server address seam, lag per topic, readiness."""

from __future__ import annotations

import asyncio
import datetime
import json
from typing import Any

import pytest

from ariane.client import admin_types
from ariane.operator import metadata, reconcile
from ariane.operator import settings as operator_settings


def test_override_most_specific_key_wins_and_default_is_service_dns() -> None:
    """``ns/name`` beats ``name`` beats ``*``; with no override the Service DNS name is used."""
    overrides = {"ns1/demo": "127.0.0.1:1", "demo": "127.0.0.1:2", "*": "127.0.0.1:3"}

    assert metadata.namesrv_endpoint("ns1", "demo", overrides) == "127.0.0.1:1"
    assert metadata.namesrv_endpoint("ns2", "demo", overrides) == "127.0.0.1:2"
    assert metadata.namesrv_endpoint("ns2", "other", overrides) == "127.0.0.1:3"
    assert metadata.namesrv_endpoint("ns2", "other", {}) == "other-namesrv.ns2.svc:9876"


def test_overrides_come_from_the_environment_and_bad_ones_are_refused() -> None:
    """The override map is read from JSON; anything but an object of strings is refused."""
    name = operator_settings.NAMESRV_OVERRIDES_ENV
    read = operator_settings.OperatorSettings.from_env

    assert read({name: json.dumps({"*": "127.0.0.1:9876"})}).namesrv_overrides == {
        "*": "127.0.0.1:9876"
    }
    assert read({}).namesrv_overrides == {}
    with pytest.raises(ValueError, match="JSON object of strings"):
        read({name: '{"*": 9876}'})


def _lag(topic: str, queue_id: int, lag: int, inflight: int) -> admin_types.QueueLag:
    return admin_types.QueueLag("broker-a", topic, queue_id, lag + 5, 5, lag, inflight)


def test_lag_is_summed_per_topic_in_topic_order() -> None:
    """Queue lags add up per topic; the list is sorted by topic."""
    queues = [_lag("b", 0, 3, 1), _lag("a", 0, 1, 0), _lag("b", 1, 4, 2)]

    assert metadata.lag_by_topic(queues) == [
        {"topic": "a", "lag": 1, "inflight": 0},
        {"topic": "b", "lag": 7, "inflight": 3},
    ]


def _workload(
    kind: str, name: str, replicas: int, ready: int, stale: bool = False
) -> dict[str, Any]:
    return {
        "kind": kind,
        "metadata": {"name": name, "generation": 2},
        "spec": {"replicas": replicas},
        "status": {"observedGeneration": 1 if stale else 2, "readyReplicas": ready},
    }


def test_ready_only_when_every_workload_reports_all_replicas_at_its_generation() -> None:
    """Readiness needs every replica ready, counted only at the workload's current generation."""
    deployment = _workload("Deployment", "demo-namesrv", 1, 1)
    full = _workload("StatefulSet", "demo-a", 2, 2)

    assert reconcile.observe([deployment, full]) == (
        [{"name": "demo-a", "statefulSet": "demo-a", "readyPods": 2}],
        True,
    )
    assert not reconcile.observe([deployment, _workload("StatefulSet", "demo-a", 2, 1)])[1]
    assert not reconcile.observe([deployment, _workload("StatefulSet", "demo-a", 2, 2, True)])[1]
    assert not reconcile.observe([_workload("Deployment", "n", 1, 0), full])[1]


class _GroupAdmin:
    """The two AdminClient calls ``reconcile_group`` makes, recorded."""

    def __init__(self) -> None:
        self.created: dict[str, Any] = {}

    async def create_group(self, name: str, **settings: Any) -> list[admin_types.GroupInfo]:
        self.created = {"name": name, **settings}
        return []

    async def consumer_lag(self, name: str) -> list[admin_types.QueueLag]:
        return []


def test_a_consumer_groups_allocate_strategy_reaches_the_brokers() -> None:
    """spec.allocateStrategy is passed to CreateSubscriptionGroup; absent, it is AVG."""
    now = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    for spec, wanted in (({"allocateStrategy": "CONSISTENT_HASH"}, "CONSISTENT_HASH"), ({}, "AVG")):
        fake = _GroupAdmin()
        body = {"metadata": {"name": "readers", "generation": 1}, "spec": spec}
        asyncio.run(metadata.reconcile_group(fake, body, now))  # type: ignore[arg-type]
        assert fake.created["allocate_strategy"] == wanted
