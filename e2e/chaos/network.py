"""Network faults for the chaos runs: a Toxiproxy in front of every port a peer dials.

Technique: Toxiproxy (``e2e/chaos/toxiproxy.sh`` builds its server from the Go module proxy,
pinned, cached by a stamp) runs as one process on ``127.0.0.1``; every connection between two
nodes of the run crosses one of its proxies, one proxy per (dialer, port): a broker dials the
name server through its own proxy (``--namesrv``), the clients through theirs; the slave dials
the master's HA port through the master's HA proxy (``--master-ha`` and the master's
``--ha-advertise``); clients dial a broker through its gRPC proxy, which is what the broker
advertises (``--advertise``), so the routes the name server hands out lead through it. The
peer broker's metadata sync (``SlaveSyncService``) finds the master's gRPC address in those
routes too, so it rides the clients' proxy: a partition cuts it when it cuts the clients from
that broker. The classic protocol (Remoting) is off in the chaos cluster: no peer dials it
there. Only addresses of 127.0.0.0/8 are used; nothing is installed system-wide.

The nodes are ``client`` (every producer and consumer, and the admin that promotes), ``namesrv``
and the two brokers by name (``broker-a``, ``broker-b``; which one is master changes). A
partition is a set of node pairs that cannot talk: every proxy whose dialer and target node form
such a pair is cut, either *refused* (the proxy is disabled: connections are closed and new ones
refused) or *dropped* (a ``timeout`` toxic with timeout 0 on both directions: connections stay
open and carry nothing, like packets dropped on the wire, until the toxic is removed). Cuts are
counted per proxy, so overlapping partitions heal independently: a proxy carries traffic again
when the last cut over it heals. Delay and loss are toxics (``latency`` with jitter; ``timeout``
on a random share of the connections) on every proxy of one node.

Invariants: the nemesis (the control plane: health checks, process signals) talks to the real
ports, never through a proxy, like Jepsen's control node; every cut and toxic added is removed
by the heal callable returned with it (or by ``reset``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import json
import pathlib
import subprocess
import urllib.request
from collections.abc import Awaitable, Callable, Iterable

from ariane import dev
from e2e.testenv import processes

CLIENT = "client"
NAMESRV = "namesrv"
BUILD_SCRIPT = pathlib.Path(__file__).with_name("toxiproxy.sh")
API_TIMEOUT_S = 5.0
"""Deadline of one call to Toxiproxy's HTTP API, s."""
START_TIMEOUT_S = 30.0

Heal = Callable[[], Awaitable[None]]
Pair = frozenset[str]


def build() -> pathlib.Path:
    """Build (or find in the cache) Toxiproxy's server; returns the binary.

    Raises:
        subprocess.CalledProcessError: no Go toolchain, or the build failed.
    """
    out = subprocess.run(
        ["bash", str(BUILD_SCRIPT)], check=True, capture_output=True, text=True, timeout=600
    )
    return pathlib.Path(out.stdout.strip().splitlines()[-1])


def isolate(node: str, nodes: Iterable[str]) -> set[Pair]:
    """The pairs that cut ``node`` from every other node."""
    return {frozenset((node, other)) for other in nodes if other != node}


def split(side: Iterable[str], nodes: Iterable[str]) -> set[Pair]:
    """The pairs that cut ``side`` from the rest of ``nodes`` (two halves)."""
    inside = set(side)
    outside = set(nodes) - inside
    return {frozenset(p) for p in itertools.product(inside, outside)}


def bridge(middle: str, nodes: Iterable[str], left: Iterable[str]) -> set[Pair]:
    """Two halves that cannot talk, ``middle`` talking to both (Jepsen's bridge): ``left`` and
    the others but ``middle``."""
    rest = set(nodes) - {middle}
    inside = set(left) - {middle}
    return split(inside, rest)


@dataclasses.dataclass(frozen=True, slots=True)
class Proxy:
    """One Toxiproxy proxy: ``dialer`` reaches ``target``'s port ``upstream_port`` through
    ``127.0.0.1:listen_port``."""

    name: str
    dialer: str
    target: str
    listen_port: int
    upstream_port: int

    @property
    def address(self) -> str:
        """``127.0.0.1:PORT`` the dialer uses."""
        return f"127.0.0.1:{self.listen_port}"


class Network:
    """The Toxiproxy process, its proxies, and the cuts and toxics in force.

    Args:
        work: where its log goes.
        binary: the server (``build()``).
    """

    def __init__(self, work: pathlib.Path, binary: pathlib.Path) -> None:
        self._log = work / "toxiproxy.log"
        self._binary = binary
        self._api_port = dev.free_port()
        self._process: subprocess.Popen[bytes] | None = None
        self.proxies: dict[str, Proxy] = {}
        self._cuts: dict[str, int] = {}
        self._cut_mode: dict[str, str] = {}
        self._toxic_ids = itertools.count()
        self._generation = 0
        """Bumped by ``reset``: heals of cuts made before it do nothing."""

    def start(self) -> None:
        """Start the server and wait for its API."""
        self._log.parent.mkdir(parents=True, exist_ok=True)
        with self._log.open("ab") as out:
            self._process = subprocess.Popen(
                [str(self._binary), "-host", "127.0.0.1", "-port", str(self._api_port)],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        processes.track(self._process, self._log)
        dev.wait_until_listening(
            "127.0.0.1", self._api_port, process=self._process, timeout_s=START_TIMEOUT_S
        )

    def stop(self) -> None:
        """Stop the server (by its PID)."""
        if self._process is not None:
            self._process.terminate()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        self._process = None

    def _call(self, method: str, path: str, body: object | None = None) -> None:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            f"http://127.0.0.1:{self._api_port}{path}", data=data, method=method
        )
        request.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(request, timeout=API_TIMEOUT_S) as answer:
            answer.read()

    def add(self, dialer: str, target: str, port_name: str, upstream_port: int) -> str:
        """Put a proxy between ``dialer`` and ``target``'s ``upstream_port``; returns the
        address the dialer must use."""
        name = f"{dialer}-{target}.{port_name}"
        proxy = Proxy(name, dialer, target, dev.free_port(), upstream_port)
        self._call(
            "POST",
            "/proxies",
            {
                "name": name,
                "listen": proxy.address,
                "upstream": f"127.0.0.1:{upstream_port}",
                "enabled": True,
            },
        )
        self.proxies[name] = proxy
        return proxy.address

    def address(self, dialer: str, target: str, port_name: str) -> str:
        """The address ``dialer`` uses for ``target``'s ``port_name``."""
        return self.proxies[f"{dialer}-{target}.{port_name}"].address

    def crossing(self, pairs: set[Pair]) -> list[Proxy]:
        """The proxies a partition of ``pairs`` cuts."""
        return [p for p in self.proxies.values() if frozenset((p.dialer, p.target)) in pairs]

    def touching(self, node: str) -> list[Proxy]:
        """The proxies ``node`` dials or is dialed through."""
        return [p for p in self.proxies.values() if node in (p.dialer, p.target)]

    async def cut(self, pairs: set[Pair], *, drop: bool) -> Heal:
        """Partition: cut every proxy between the pairs (``drop``: blackhole, else refuse);
        returns the heal."""
        names = [p.name for p in self.crossing(pairs)]
        generation = self._generation
        for name in names:
            self._cuts[name] = self._cuts.get(name, 0) + 1
            if self._cuts[name] == 1:
                self._cut_mode[name] = "drop" if drop else "refuse"
                await asyncio.to_thread(self._cut_one, name, drop)

        async def heal() -> None:
            if generation != self._generation:
                return
            for name in names:
                self._cuts[name] -= 1
                if self._cuts[name] == 0:
                    await asyncio.to_thread(self._restore_one, name)

        return heal

    def _cut_one(self, name: str, drop: bool) -> None:
        if not drop:
            self._call("POST", f"/proxies/{name}", {"enabled": False})
            return
        for stream in ("upstream", "downstream"):
            self._call(
                "POST",
                f"/proxies/{name}/toxics",
                {
                    "name": f"cut-{stream}",
                    "type": "timeout",
                    "stream": stream,
                    "toxicity": 1.0,
                    "attributes": {"timeout": 0},
                },
            )

    def _restore_one(self, name: str) -> None:
        if self._cut_mode.pop(name) == "refuse":
            self._call("POST", f"/proxies/{name}", {"enabled": True})
            return
        for stream in ("upstream", "downstream"):
            self._call("DELETE", f"/proxies/{name}/toxics/cut-{stream}")

    async def toxic(
        self, node: str, kind: str, attributes: dict[str, int], *, toxicity: float = 1.0
    ) -> Heal:
        """Add a toxic of ``kind`` (``latency``, ``timeout``, ...) both ways on every proxy of
        ``node``; returns the heal that removes them."""
        added: list[tuple[str, str]] = []
        for proxy in self.touching(node):
            for stream in ("upstream", "downstream"):
                toxic = f"{kind}-{next(self._toxic_ids)}"
                body = {
                    "name": toxic,
                    "type": kind,
                    "stream": stream,
                    "toxicity": toxicity,
                    "attributes": attributes,
                }
                await asyncio.to_thread(self._call, "POST", f"/proxies/{proxy.name}/toxics", body)
                added.append((proxy.name, toxic))

        generation = self._generation

        async def heal() -> None:
            if generation != self._generation:
                return
            for name, toxic in added:
                await asyncio.to_thread(self._call, "DELETE", f"/proxies/{name}/toxics/{toxic}")

        return heal

    async def reset(self) -> None:
        """Heal everything: every proxy enabled, every toxic removed."""
        await asyncio.to_thread(self._call, "POST", "/reset")
        self._cuts.clear()
        self._cut_mode.clear()
        self._generation += 1
