"""One chaos run: cluster up, workload on, nemesis, heal, drain, check, report.

The workload is Ariane's own client: one producer task per message group sending FIFO messages
(body = ``<group>-<seq>``, the id the checker follows) to a FIFO topic, and consumers of an
orderly group receiving and acking. Every send attempt and every delivery is recorded with a
monotonic timestamp. After the last fault everything is healed, the producers stop, and the
consumers drain until every acknowledged message arrived or nothing new arrived for
``Workload.drain_quiet_s`` (bounded by ``drain_max_s``). The report (JSON) holds the settings,
the faults as injected and the checker's figures; ``render`` prints them as rich tables.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import pathlib
import time
from typing import Any

from rich import console as rich_console
from rich import table as rich_table

from ariane import client
from ariane.client import session
from ariane.common import message
from e2e.chaos import checker
from e2e.chaos import cluster as cluster_mod
from e2e.chaos import nemesis as nemesis_mod

TOPIC = "chaos-fifo"
CONSUMER_GROUP = "chaos-consumer"


@dataclasses.dataclass(frozen=True, slots=True)
class Workload:
    """Producers, consumers and the drain."""

    message_groups: int = 4
    send_interval_s: float = 0.02
    """Pause between two sends of one message group, s."""
    consumers: int = 2
    drain_quiet_s: float = 15.0
    drain_max_s: float = 90.0


@dataclasses.dataclass
class History:
    """What the clients saw."""

    started: float = dataclasses.field(default_factory=time.monotonic)
    sends: list[checker.Send] = dataclasses.field(default_factory=list)
    deliveries: list[checker.Delivery] = dataclasses.field(default_factory=list)

    def now_ms(self) -> int:
        """Milliseconds since the run started."""
        return int((time.monotonic() - self.started) * 1000)


def _connection() -> session.ConnectionSettings:
    return session.ConnectionSettings(request_timeout_s=3.0, route_refresh_interval_s=1.0)


async def _produce(
    endpoint: str, group: str, history: History, stop: asyncio.Event, pause_s: float
) -> None:
    settings = client.ProducerSettings(connection=_connection(), send_attempts=2)
    async with client.Producer(endpoint, settings=settings) as producer:
        seq = 0
        while not stop.is_set():
            body = f"{group}-{seq}"
            try:
                await producer.send(TOPIC, body.encode(), message_group=group)
                acked = True
            except Exception:  # any failure is an unacknowledged send
                acked = False
            history.sends.append(checker.Send(body, group, seq, acked, history.now_ms()))
            seq += 1
            await asyncio.sleep(pause_s if acked else max(pause_s, 0.1))


async def _consume(endpoint: str, history: History, stop: asyncio.Event) -> None:
    settings = client.ConsumerSettings(connection=_connection())
    async with client.SimpleConsumer(
        endpoint, CONSUMER_GROUP, TOPIC, settings=settings
    ) as consumer:
        while not stop.is_set():
            try:
                got = await consumer.receive(32, invisible_duration_s=10)
            except Exception:  # outages: try again
                await asyncio.sleep(0.2)
                continue
            for received in got:
                history.deliveries.append(
                    checker.Delivery(received.body.decode(), history.now_ms())
                )
            with contextlib.suppress(Exception):  # unacked messages come back: duplicates
                await consumer.ack(got)


async def _create(endpoint: str) -> None:
    async with client.AdminClient(endpoint) as admin:
        await admin.create_topic(
            TOPIC, read_queue_nums=4, write_queue_nums=4, message_type=message.MessageType.FIFO
        )
        await admin.create_group(CONSUMER_GROUP, consume_orderly=True)


async def _drain(history: History, workload: Workload) -> None:
    deadline = time.monotonic() + workload.drain_max_s
    acked = {s.message_id for s in history.sends if s.acked}
    seen = -1
    quiet_since = time.monotonic()
    while time.monotonic() < deadline:
        if acked <= {d.message_id for d in history.deliveries}:
            return
        if len(history.deliveries) != seen:
            seen, quiet_since = len(history.deliveries), time.monotonic()
        elif time.monotonic() - quiet_since > workload.drain_quiet_s:
            return
        await asyncio.sleep(0.5)


async def run(
    work: pathlib.Path,
    *,
    schedule: nemesis_mod.Schedule,
    role: str = "SYNC_MASTER",
    flush_disk_type: str = "SYNC_FLUSH",
    workload: Workload | None = None,
) -> dict[str, Any]:
    """Run one chaos experiment in ``work``; returns the report (see the module)."""
    workload = workload or Workload()
    cluster = cluster_mod.Cluster(work, role=role, flush_disk_type=flush_disk_type)
    history = History()
    nemesis = nemesis_mod.Nemesis(cluster, schedule)
    try:
        await asyncio.to_thread(cluster.start)
        await nemesis.wait_in_sync()
        endpoint = cluster.namesrv_endpoint
        await _create(endpoint)
        await nemesis.wait_synced(TOPIC)  # a failover before the slave has the topic loses it
        stop_producers, stop_consumers = asyncio.Event(), asyncio.Event()
        history.started = time.monotonic()
        async with asyncio.TaskGroup() as tasks:
            for i in range(workload.message_groups):
                tasks.create_task(
                    _produce(endpoint, f"g{i}", history, stop_producers, workload.send_interval_s)
                )
            for _ in range(workload.consumers):
                tasks.create_task(_consume(endpoint, history, stop_consumers))
            await nemesis.run(history.started)
            await asyncio.to_thread(cluster.heal)
            await nemesis.wait_in_sync()
            stop_producers.set()
            await _drain(history, workload)
            stop_consumers.set()
        elapsed_s = round(time.monotonic() - history.started, 1)
    finally:
        await nemesis.close()
        await asyncio.to_thread(cluster.stop)
    found = checker.check(history.sends, history.deliveries)
    return {
        "settings": {
            "role": role,
            "flush_disk_type": flush_disk_type,
            "schedule": dataclasses.asdict(schedule),
            "workload": dataclasses.asdict(workload),
        },
        "elapsed_s": elapsed_s,
        "faults": [dataclasses.asdict(f) for f in nemesis.faults],
        "result": dataclasses.asdict(found),
    }


def write(report: dict[str, Any], path: pathlib.Path) -> None:
    """Write ``report`` as indented JSON."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2) + "\n")


def render(report: dict[str, Any], out: rich_console.Console) -> None:
    """Print the faults and the checker's figures as tables."""
    settings = report["settings"]
    faults = rich_table.Table(title=f"faults ({settings['role']} + {settings['flush_disk_type']})")
    for column in ("kind", "at s", "hold s", "healed s", "promoted", "epoch", "in sync"):
        faults.add_column(column)
    for f in report["faults"]:
        faults.add_row(
            f["kind"],
            str(f["at_s"]),
            str(f["hold_s"]),
            str(f["healed_s"]),
            "yes" if f["promoted"] else "",
            str(f["epoch"]),
            "yes" if f["in_sync"] else "NO",
        )
    out.print(faults)
    result = rich_table.Table(title=f"checker ({report['elapsed_s']} s)")
    result.add_column("figure")
    result.add_column("value", justify="right")
    for key, value in report["result"].items():
        if key != "lost_ids":
            result.add_row(key, str(value))
    out.print(result)
    if report["result"]["lost_ids"]:
        out.print("lost (first): " + " ".join(report["result"]["lost_ids"]))
