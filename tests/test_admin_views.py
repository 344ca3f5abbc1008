"""``ariane admin cluster|brokers|topics|groups|lag|top``: the one-word views for people, run as
real processes against a real name server and broker carrying real traffic."""

from __future__ import annotations

import asyncio
import json
import os
import pathlib
import sys
from typing import Any

import pytest

from ariane import client
from ariane.admin_cli import top as admin_top
from metrics_testing import cluster, load

pytestmark = pytest.mark.slow

REPO = pathlib.Path(__file__).resolve().parents[1]
TOPIC, GROUP = "viewed", "viewers"
SENT, CONSUMED = 12, 2


async def ariane_admin(namesrv: str, *argv: str) -> tuple[int, str, str]:
    """Run ``python -m ariane admin --endpoints <namesrv> …`` as a process (not a terminal)."""
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "COLUMNS": "200"}
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "ariane", "admin", "--endpoints", namesrv, *argv,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env,
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(), timeout=60)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def _views(namesrv: str) -> None:
    status, out, err = await ariane_admin(namesrv, "--json", "lag")
    assert status == 0, err
    rows = [r for r in json.loads(out) if r["group"] == GROUP]
    assert [(r["topic"], r["lag"], r["consumer_offset"]) for r in rows] == [
        (TOPIC, SENT - CONSUMED, CONSUMED)
    ]
    status, out, err = await ariane_admin(namesrv, "cluster", "--json")
    assert status == 0, err
    (row,) = json.loads(out)
    assert (row["cluster"], row["broker_groups"], row["writable"]) == ("DefaultCluster", 1, True)
    assert row["topics"] >= 1 and row["groups"] >= 1 and row["messages_in_total"] >= SENT
    for noun, expected in [
        ("brokers", "broker-m"),
        ("topics", TOPIC),
        ("groups", GROUP),
        ("lag", f"total lag {SENT - CONSUMED}"),
        ("cluster", "DefaultCluster"),
    ]:
        status, out, err = await ariane_admin(namesrv, noun)
        assert status == 0 and expected in out, (noun, out, err)  # fmt: skip


async def _top_while_sending(namesrv: str) -> tuple[list[dict[str, Any]], str]:
    """``top --json`` and a plain ``top`` run while a producer keeps sending to ``TOPIC``."""
    stop = asyncio.Event()

    async def send() -> None:
        async with client.Producer(namesrv) as producer:
            while not stop.is_set():
                await producer.send(TOPIC, b"more")

    sender = asyncio.create_task(send())
    try:
        as_json = ariane_admin(namesrv, "top", "--json", "--iterations", "2", "--interval-s", "1")
        plain = ariane_admin(namesrv, "top", "--iterations", "2", "--interval-s", "0.5")
        (status, out, err), (status2, text, err2) = await asyncio.gather(as_json, plain)
    finally:
        stop.set()
        await sender
    assert status == 0 and status2 == 0, err + err2
    return json.loads(out), text


def test_views_and_top_show_the_cluster_traffic_and_lag(tmp_path: pathlib.Path) -> None:
    """After 12 sends and 2 acks the views agree with the load, and ``top`` measures the rate
    of a producer that keeps sending (and draws both of its tables on every refresh)."""
    with cluster(tmp_path) as running:
        asyncio.run(load(running.namesrv, TOPIC, GROUP, sent=SENT, consumed=CONSUMED))
        asyncio.run(_views(running.namesrv))
        rates, text = asyncio.run(_top_while_sending(running.namesrv))
    (rate,) = [r for r in rates if r["topic"] == TOPIC]
    assert rate["in_per_s"] > 0 and rate["out_per_s"] == 0
    assert text.count("topics (messages/s)") == 2 and text.count("consumer groups") == 2
    assert GROUP in text


def test_rates_are_differences_over_the_elapsed_seconds() -> None:
    """``in`` follows the stored offsets, ``out`` the groups' committed offsets summed per topic;
    a topic first seen in the later sample counts from zero growth, never negative."""
    before = [
        admin_top.GroupTopicLag("g1", "t", 2, 100, 40, 60, 0),
        admin_top.GroupTopicLag("g2", "t", 2, 100, 10, 90, 0),
    ]
    after = [admin_top.GroupTopicLag("g1", "t", 2, 120, 50, 70, 0),
             admin_top.GroupTopicLag("g2", "t", 2, 120, 30, 90, 0),
             admin_top.GroupTopicLag("g1", "new", 1, 5, 0, 5, 0)]  # fmt: skip
    assert admin_top.rates(before, after, 2.0) == [
        admin_top.TopicRate("new", 0.0, 0.0),
        admin_top.TopicRate("t", 10.0, 15.0),
    ]
