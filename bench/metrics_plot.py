"""Picture (not a test): throughput, consumer lag and call latency over time, from Prometheus.

Run ``python -m bench.metrics_plot [--seconds S] [--rate N]`` from the repository root. It starts
an ``ariane dev`` cluster (name server + broker, both serving ``/metrics``) and Debian's
Prometheus (``tests/prometheus/install.sh``, cached in ``~/.cache/ariane``; the helper is the
scrape test's ``tests/prometheus_testing.py``) scraping both every second, then for ``S``
seconds sends ``N`` messages/s while one consumer receives and acks at a rate that is lower than
``N`` for the first half of the run (the lag grows) and unthrottled for the second (it drains).
Afterwards it asks Prometheus' ``query_range`` for the dashboard's queries and draws three
panels with matplotlib:

- messages in / out per second: ``rate(rocketmq_messages_in_total[5s])`` and ``..._out_...``;
- consumer lag: ``rocketmq_consumer_lag_messages`` and ``rocketmq_consumer_ready_messages``;
- call latency: ``histogram_quantile(0.99, rate(rocketmq_rpc_latency_bucket[5s]))`` of
  SendMessage and ReceiveMessage (RocketMQ's buckets, so the curve moves in bucket steps).

Writes ``bench/results/metrics_plot-<date>.png`` and ``.json`` (the series and the command).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import pathlib
import sys
import tempfile
import time
from typing import Any
from urllib.parse import urlsplit

import matplotlib

matplotlib.use("Agg")
from matplotlib import pyplot

from ariane import client, dev

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the scrape test's Prometheus helper
import prometheus_testing  # noqa: E402

RESULTS_DIR = ROOT / "bench" / "results"
TOPIC, GROUP = "plotted", "plot-g"
ROUTE_POLLS_MAX = 300
"""Polls (every 0.1 s) for the new topic's route before the load starts anyway."""
SLOW_CONSUMER_SHARE = 0.5
"""During the first half the consumer takes this share of the send rate."""

PANELS: list[tuple[str, str, dict[str, str]]] = [
    (
        "messages per second",
        "msgs/s",
        {
            "in (stored by sends)": "sum(rate(rocketmq_messages_in_total[5s]))",
            "out (delivered)": "sum(rate(rocketmq_messages_out_total[5s]))",
        },
    ),
    (
        f"consumer lag of {GROUP} on {TOPIC}",
        "messages",
        {
            "lag (not acked)": f'sum(rocketmq_consumer_lag_messages{{consumer_group="{GROUP}"}})',
            "ready (never delivered)": (
                f'sum(rocketmq_consumer_ready_messages{{consumer_group="{GROUP}"}})'
            ),
        },
    ),
    (
        "call latency where answered, p99 (rocketmq_rpc_latency)",
        "ms",
        {
            rpc: "histogram_quantile(0.99, sum by (le) (rate(rocketmq_rpc_latency_bucket"
            f'{{request_code="{rpc}",response_code="ok"}}[5s])))'
            for rpc in ("send_message", "receive_message")
        },
    ),
]


async def _load(namesrv: str, seconds: float, rate: int) -> None:
    async with client.AdminClient(namesrv) as admin:
        await admin.create_topic(TOPIC, write_queue_nums=4)
        await admin.create_group(GROUP)
        for _ in range(ROUTE_POLLS_MAX):
            if await admin.topic_masters(TOPIC):
                break
            await asyncio.sleep(0.1)
    loop = asyncio.get_running_loop()
    end = loop.time() + seconds
    async with (
        client.Producer(namesrv) as producer,
        client.SimpleConsumer(namesrv, GROUP, TOPIC) as consumer,
    ):
        await asyncio.gather(_send(producer, rate, end), _consume(consumer, rate, end, seconds))


async def _send(producer: client.Producer, rate: int, end: float) -> None:
    loop = asyncio.get_running_loop()
    sent = 0
    started = loop.time()
    while loop.time() < end:
        await producer.send(TOPIC, b"x" * 512)
        sent += 1
        ahead_s = sent / rate - (loop.time() - started)
        if ahead_s > 0:
            await asyncio.sleep(ahead_s)


async def _consume(consumer: client.SimpleConsumer, rate: int, end: float, seconds: float) -> None:
    loop = asyncio.get_running_loop()
    started = loop.time()
    slow_until = started + seconds / 2
    got = 0
    while loop.time() < end + 5:
        received = await consumer.receive(32, invisible_duration_s=30)
        await consumer.ack(received)
        got += len(received)
        if loop.time() < slow_until:
            ahead_s = got / (rate * SLOW_CONSUMER_SHARE) - (loop.time() - started)
            if ahead_s > 0:
                await asyncio.sleep(ahead_s)


def _series(url: str, query: str, start: float, end: float) -> list[tuple[float, float]]:
    data = prometheus_testing.api(
        url, "query_range", query=query, start=str(start), end=str(end), step="1"
    )
    if not data["result"]:
        return []
    return [(float(t), float(v)) for t, v in data["result"][0]["values"] if v != "NaN"]


def _draw(
    found: dict[str, dict[str, list[tuple[float, float]]]], t0: float, out: pathlib.Path
) -> None:
    figure, axes = pyplot.subplots(len(PANELS), 1, figsize=(9, 9), sharex=True)
    for ax, (title, unit, queries) in zip(axes, PANELS, strict=True):
        for label in queries:
            points = found[title][label]
            ax.plot([t - t0 for t, _ in points], [v for _, v in points], label=label)
        ax.set_title(title)
        ax.set_ylabel(unit)
        ax.legend(loc="upper left")
        ax.grid(alpha=0.3)
    axes[-1].set_xlabel("seconds since the load started")
    figure.tight_layout()
    figure.savefig(out, dpi=100)


def main(argv: list[str] | None = None) -> int:
    """Run the cluster, Prometheus and the load; draw and record the picture."""
    parser = argparse.ArgumentParser(prog="python -m bench.metrics_plot")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--rate", type=int, default=300, help="messages sent per second")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="metrics-plot-") as tmp_name:
        tmp = pathlib.Path(tmp_name)
        with dev.dev_cluster(tmp / "cluster", namesrv_port=0) as ends:
            targets = [
                prometheus_testing.Target(urlsplit(url).netloc, {"component": component})
                for url, component in (
                    (ends.broker_metrics, "broker"),
                    (ends.namesrv_metrics, "namesrv"),
                )
            ]
            with prometheus_testing.prometheus(tmp, targets, []) as url:
                t0 = time.time()
                asyncio.run(_load(ends.namesrv, args.seconds, args.rate))
                time.sleep(3)  # let Prometheus take its last scrapes (not a synchronisation)
                t1 = time.time()
                found = {
                    title: {label: _series(url, q, t0, t1) for label, q in queries.items()}
                    for title, _, queries in PANELS
                }
    RESULTS_DIR.mkdir(exist_ok=True)
    stem = RESULTS_DIR / f"metrics_plot-{datetime.date.today()}"
    _draw(found, t0, stem.with_suffix(".png"))
    command = f"python -m bench.metrics_plot --seconds {args.seconds:g} --rate {args.rate}"
    record: dict[str, Any] = {"command": command, "start_unix_s": t0, "panels": found}
    stem.with_suffix(".json").write_text(json.dumps(record, indent=1))
    print(f"recorded {stem}.png and .json ({command})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
