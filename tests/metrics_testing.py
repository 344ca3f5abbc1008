"""Helpers for metrics tests: a real name server and broker with ``--metrics-listen``, load
sent and consumed through ``ariane.client``, and ``/metrics`` scraped over HTTP."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import pathlib
import urllib.request
from collections.abc import Iterator

from e2e.testenv import processes
from prometheus_client import parser

from ariane import client, dev
from ariane.common import message

START_TIMEOUT_S = 60.0
"""Longest wait for a process to listen or register."""


@dataclasses.dataclass(frozen=True)
class Cluster:
    """Addresses of a running name server and broker and their ``/metrics`` URLs."""

    namesrv: str
    broker_metrics: str
    namesrv_metrics: str


_spawn = processes.spawn_ariane  # the one process layer (tracked for log tails)


@contextlib.contextmanager
def cluster(tmp: pathlib.Path, *, workers: int = 1) -> Iterator[Cluster]:
    """A name server and broker ``broker-m`` on free loopback ports, both serving metrics;
    both are stopped by PID on exit (and must exit 0)."""
    ns_port, ns_metrics, br_port, br_metrics = (dev.free_port() for _ in range(4))
    namesrv = f"127.0.0.1:{ns_port}"
    ns_proc = _spawn(
        ["namesrv", "--listen", namesrv, "--metrics-listen", f"127.0.0.1:{ns_metrics}"],
        tmp / "namesrv.log",
    )
    procs = [ns_proc]
    try:
        dev.wait_until_listening("127.0.0.1", ns_port, process=ns_proc, timeout_s=START_TIMEOUT_S)
        br_proc = _spawn(
            ["broker", "--listen", f"127.0.0.1:{br_port}", "--namesrv", namesrv,
             "--store-dir", str(tmp / "store"), "--broker-name", "broker-m",
             "--workers", str(workers), "--metrics-listen", f"127.0.0.1:{br_metrics}"],
            tmp / "broker.log",
        )  # fmt: skip
        procs.append(br_proc)
        dev.wait_until_registered(namesrv, "broker-m", process=br_proc, timeout_s=START_TIMEOUT_S)
        dev.wait_until_listening(
            "127.0.0.1", br_metrics, process=br_proc, timeout_s=START_TIMEOUT_S
        )
        yield Cluster(
            namesrv,
            f"http://127.0.0.1:{br_metrics}/metrics",
            f"http://127.0.0.1:{ns_metrics}/metrics",
        )
    finally:
        for proc in reversed(procs):
            assert dev.stop_process(proc) == 0, f"exit status of {proc.args!r}"


async def load(
    namesrv: str, topic: str, group: str, *, sent: int, consumed: int, queues: int = 2
) -> None:
    """Create ``topic`` and ``group``, send ``sent`` messages and receive and ack ``consumed``."""
    async with client.AdminClient(namesrv) as admin:
        await admin.create_topic(
            topic, write_queue_nums=queues, message_type=message.MessageType.NORMAL
        )
        await admin.create_group(group)
        await _wait_routed(admin, topic)
    async with client.Producer(namesrv) as producer:
        for i in range(sent):
            await producer.send(topic, f"m{i}".encode())
    async with client.SimpleConsumer(namesrv, group, topic) as consumer:
        got = 0
        async with asyncio.timeout(START_TIMEOUT_S):
            while got < consumed:
                received = await consumer.receive(consumed - got, invisible_duration_s=30)
                await consumer.ack(received)
                got += len(received)


async def _wait_routed(admin: client.AdminClient, topic: str) -> None:
    async with asyncio.timeout(START_TIMEOUT_S):
        while True:
            with contextlib.suppress(Exception):
                if await admin.topic_masters(topic):
                    return
            await asyncio.sleep(0.05)


Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]
"""``(series name, labels) -> value`` of one scrape."""


def scrape(url: str) -> Samples:
    """GET ``url`` and parse the Prometheus text format."""
    with urllib.request.urlopen(url, timeout=10) as answer:
        return parse(answer.read().decode())


def parse(text: str) -> Samples:
    """The samples of a Prometheus text exposition."""
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in parser.text_string_to_metric_families(text)
        for s in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    """The one sample of ``name`` whose labels include ``labels``.

    Raises:
        AssertionError: none or several match.
    """
    want = set(labels.items())
    found = [v for (n, got), v in samples.items() if n == name and want <= got]
    assert len(found) == 1, f"{len(found)} samples of {name}{labels}"
    return found[0]
