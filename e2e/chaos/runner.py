"""One chaos run: network and cluster up, workload on, nemesis, heal, drain, check, report.

The workload is Ariane's own client: one producer task per message group sending FIFO messages
(key = ``<group>-<seq>``, the id the checker follows; body = ``body_for(key)``, which the checker
compares with what is delivered under that key) to a FIFO topic, and consumers of an
orderly group receiving and acking, all dialing the name server as the clients' node of the
network (through their proxy when the run has a network). Every send attempt (invoked and ended,
with its outcome: ``ok``, a definite ``fail``, or an indeterminate ``info`` for timeouts and
transport errors) and every delivery is recorded with a monotonic timestamp. After the last
fault everything is healed (``Nemesis.heal_all``), the producers stop (their sends in flight
end), and the consumers drain
until every acknowledged message arrived or nothing new arrived for ``Workload.drain_quiet_s``
(bounded by ``drain_max_s``). The report (JSON) holds the settings, the faults as injected (each
with its RTO) and the checker's figures; ``write_history`` writes the OpenChaos history file;
``render`` prints them as rich tables.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import json
import pathlib
import time
from collections.abc import Sequence
from typing import Any

from rich import console as rich_console
from rich import table as rich_table

from ariane import client
from ariane.client import session, transport
from ariane.common import errors, message
from e2e.chaos import (
    checker,
    disk_faults,  # noqa: F401  (registers the disk fault kinds)
    powerloss,
)
from e2e.chaos import cluster as cluster_mod
from e2e.chaos import nemesis as nemesis_mod
from e2e.chaos import network as network_mod

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
    recover_max_s: float = 30.0
    """After the final heal the producers go on until a send invoked after it is acknowledged
    (so the last faults' RTO is measured), at most this long, s."""


@dataclasses.dataclass
class History:
    """What the clients saw."""

    started: float = dataclasses.field(default_factory=time.monotonic)
    started_wall_ms: int = dataclasses.field(default_factory=lambda: time.time_ns() // 1_000_000)
    sends: list[checker.Send] = dataclasses.field(default_factory=list)
    deliveries: list[checker.Delivery] = dataclasses.field(default_factory=list)

    def now_ms(self) -> int:
        """Milliseconds since the run started."""
        return int((time.monotonic() - self.started) * 1000)


def body_for(key: str) -> str:
    """The body sent under ``key``: the key, then 192 hex digits drawn from it (a bit flip
    anywhere in a record's body changes it)."""
    return f"{key}|" + hashlib.sha256(key.encode()).hexdigest() * 3


def _connection() -> session.ConnectionSettings:
    return session.ConnectionSettings(request_timeout_s=3.0, route_refresh_interval_s=1.0)


_INDETERMINATE = (
    transport.BrokerUnreachableError,  # no gRPC answer: the request may have been stored
    errors.PersistenceTimeoutError,
    errors.SlavePersistenceTimeoutError,
    errors.RequestTimeoutError,
    errors.ProxyTimeoutError,
)


def outcome(exc: BaseException) -> str:
    """A failed send's outcome: ``info`` when it may have been stored (a timeout, a transport
    error, anything but a broker's definite answer), else ``fail``."""
    if isinstance(exc, _INDETERMINATE) or not isinstance(exc, errors.ArianeError):
        return checker.INFO
    return checker.FAIL


async def _produce(
    endpoint: str, process: int, history: History, stop: asyncio.Event, pause_s: float
) -> None:
    group = f"g{process}"
    # One attempt per send: a failure's outcome is then that attempt's (a retry after a timeout
    # that stored the message would turn a stored message into a definite-looking failure).
    settings = client.ProducerSettings(connection=_connection(), send_attempts=1)
    async with client.Producer(endpoint, settings=settings) as producer:
        seq = 0
        while not stop.is_set():
            key = f"{group}-{seq}"
            body = body_for(key)
            invoked = history.now_ms()
            result, error = checker.OK, ""
            try:
                await producer.send(TOPIC, body.encode(), message_group=group, keys=(key,))
            except Exception as exc:  # any failure: not acknowledged
                result, error = outcome(exc), type(exc).__name__
            acked = result == checker.OK
            history.sends.append(
                checker.Send(
                    key, group, seq, acked, history.now_ms(), invoked, result, process, error, body
                )
            )
            seq += 1
            await asyncio.sleep(pause_s if acked else max(pause_s, 0.1))


async def _consume(endpoint: str, process: int, history: History, stop: asyncio.Event) -> None:
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
                body = received.body.decode(errors="replace")
                key = received.keys[0] if received.keys else body.partition("|")[0]
                history.deliveries.append(checker.Delivery(key, history.now_ms(), process, body))
            with contextlib.suppress(Exception):  # unacked messages come back: duplicates
                await consumer.ack(got)


async def _create(endpoint: str) -> None:
    async with client.AdminClient(endpoint) as admin:
        await admin.create_topic(
            TOPIC, read_queue_nums=4, write_queue_nums=4, message_type=message.MessageType.FIFO
        )
        await admin.create_group(CONSUMER_GROUP, consume_orderly=True)


async def _recover(history: History, workload: Workload) -> None:
    healed_ms = history.now_ms()
    deadline = time.monotonic() + workload.recover_max_s
    while time.monotonic() < deadline:
        if any(s.acked and s.started_ms >= healed_ms for s in history.sends[-64:]):
            return
        await asyncio.sleep(0.2)


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
    network: bool = True,
    power_loss: bool = True,
    history_path: pathlib.Path | None = None,
) -> dict[str, Any]:
    """Run one chaos experiment in ``work``; returns the report (see the module).

    Args:
        network: put Toxiproxy between every two nodes (needs Go to build it once); without
            it only process and clock faults can be drawn.
        power_loss: put each broker's store on a power-loss layer (``powerloss``, FUSE;
            installs ``fuse3`` when missing); without it no power-loss kind can be drawn.
        history_path: write the OpenChaos history file there.
    """
    workload = workload or Workload()
    if power_loss:
        await asyncio.to_thread(powerloss.ensure_fuse)
    net = None
    if network:
        net = network_mod.Network(work, await asyncio.to_thread(network_mod.build))
        await asyncio.to_thread(net.start)
    cluster = cluster_mod.Cluster(
        work, role=role, flush_disk_type=flush_disk_type, network=net, power_loss=power_loss
    )
    history = History()
    nemesis = nemesis_mod.Nemesis(cluster, schedule)
    try:
        await asyncio.to_thread(cluster.start)
        await nemesis.control.wait_in_sync()
        await _create(cluster.namesrv_endpoint)
        await nemesis.control.wait_synced(TOPIC)  # a failover before the slave has it loses it
        history.started = time.monotonic()
        history.started_wall_ms = time.time_ns() // 1_000_000
        await _workload(cluster.client_namesrv_endpoint, history, nemesis, workload)
        elapsed_s = round(time.monotonic() - history.started, 1)
    finally:
        await nemesis.close()
        await asyncio.to_thread(cluster.stop)
        if net is not None:
            await asyncio.to_thread(net.stop)
    spans = [
        checker.FaultSpan(f.kind, int(f.at_s * 1000), int((f.at_s + f.healed_s) * 1000))
        for f in nemesis.faults
    ]
    found = checker.check(history.sends, history.deliveries, spans)
    if history_path is not None:
        write_history(history, spans, workload, history_path)
    faults = [dataclasses.asdict(f) for f in nemesis.faults]
    for fault, rto in zip(faults, found.rto_ms, strict=True):
        fault["rto_ms"] = rto
    return {
        "settings": {
            "role": role,
            "flush_disk_type": flush_disk_type,
            "network": network,
            "power_loss": power_loss,
            "schedule": dataclasses.asdict(schedule),
            "workload": dataclasses.asdict(workload),
        },
        "elapsed_s": elapsed_s,
        "faults": faults,
        "result": dataclasses.asdict(found),
    }


async def _workload(
    endpoint: str, history: History, nemesis: nemesis_mod.Nemesis, workload: Workload
) -> None:
    stop_producers, stop_consumers = asyncio.Event(), asyncio.Event()
    async with asyncio.TaskGroup() as tasks:
        producers = [
            tasks.create_task(
                _produce(endpoint, i, history, stop_producers, workload.send_interval_s)
            )
            for i in range(workload.message_groups)
        ]
        for i in range(workload.consumers):
            tasks.create_task(_consume(endpoint, i, history, stop_consumers))
        try:
            await nemesis.run(history.started)
            await nemesis.heal_all()
            await _recover(history, workload)
            stop_producers.set()
            # A send in flight when the producers are told to stop may still be acknowledged:
            # the drain waits for it too (else it reads as lost).
            await asyncio.wait(producers)
            await _drain(history, workload)
        finally:
            stop_producers.set()
            stop_consumers.set()


def write_history(
    history: History,
    faults: Sequence[checker.FaultSpan],
    workload: Workload,
    path: pathlib.Path,
) -> None:
    """Write the OpenChaos history file (``checker.history_lines``): producers are processes
    0..groups-1, consumers the next ones."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = checker.history_lines(
        history.sends,
        history.deliveries,
        faults,
        history.started_wall_ms,
        consumer_process_base=workload.message_groups,
    )
    path.write_text("".join(lines))


def write(report: dict[str, Any], path: pathlib.Path) -> None:
    """Write ``report`` as indented JSON."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2) + "\n")


def render(report: dict[str, Any], out: rich_console.Console) -> None:
    """Print the faults and the checker's figures as tables."""
    settings = report["settings"]
    faults = rich_table.Table(title=f"faults ({settings['role']} + {settings['flush_disk_type']})")
    for column in ("kind", "at s", "hold s", "healed s", "rto ms", "in sync", "note"):
        faults.add_column(column)
    for f in report["faults"]:
        in_sync = {None: "", True: "yes", False: "NO"}[f["in_sync"]]
        rto = "-" if f["rto_ms"] is None else str(f["rto_ms"])
        faults.add_row(
            f["kind"], str(f["at_s"]), str(f["hold_s"]), str(f["healed_s"]), rto, in_sync, f["note"]
        )
    out.print(faults)
    result = rich_table.Table(title=f"checker ({report['elapsed_s']} s)")
    result.add_column("figure")
    result.add_column("value", justify="right")
    for key, value in report["result"].items():
        if key not in ("lost_ids", "corrupt_ids", "rto_ms", "unavailable_windows_ms"):
            result.add_row(key, str(value))
    out.print(result)
    if report["result"]["lost_ids"]:
        out.print("lost (first): " + " ".join(report["result"]["lost_ids"]))
    if report["result"].get("corrupt_ids"):
        out.print("corrupt (first): " + " ".join(report["result"]["corrupt_ids"]))
