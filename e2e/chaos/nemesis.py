"""The nemesis: seeded random faults on the network, the name server, the master and the slave.

A fault kind is an ``inject(cluster, rng) -> heal`` coroutine registered in ``REGISTRY`` with
``register`` (a few lines per kind; other modules add theirs the same way), with the
``resources`` it needs alone: faults sharing a resource never overlap (``brokers`` for anything
that stops, restarts or promotes a broker, ``namesrv``, ``clock``). ``heal`` undoes the fault
and returns a short note of what happened (``"promoted ..."`` when a promotion took place).

Process faults (the cluster's processes):

* ``kill_master``: SIGKILL the master; at heal ``ariane admin broker promote``'s logic makes the
  slave master with epoch + 1 (a failover: it waits for the old master's lease), and the old
  master restarts as its slave (it cuts a diverged tail on connect);
* ``kill_slave`` / ``kill_namesrv``: SIGKILL, then restart on the same port and store;
* ``pause_master`` / ``pause_slave``: SIGSTOP, then SIGCONT (no promotion: a short stall);
* ``restart_master`` / ``restart_slave``: clean stop (SIGTERM), then start in the same role.

Network faults (``network.Network``, Toxiproxy; only with a network), each cut either refusing
or silently dropping (drawn per fault):

* ``partition_isolate``: one node (clients, name server, master or slave) cut from all others;
* ``partition_halves``: the four nodes split two against two;
* ``partition_bridge``: two halves that cannot talk, one node talking to both;
* ``partition_failover``: the master cut from every other node; once its lease ran out the
  slave is promoted behind its back (``ariane admin broker promote``: a failover); at heal the
  stale master meets the new epoch and is demoted in place. Once promoted, the old master's own
  ``writable`` (read on its real port) is noted: its lease ran out, so it must say ``False``.
  Under SYNC_MASTER no acknowledged message may be lost by it, under ASYNC_MASTER what the
  stale master acknowledged before its lease ran out may be;
* ``partition_failover_clients``: the same with the clients (and the admin, which dials as they
  do) still reaching the old master: the admin sees it alive, so the promotion is a switchover
  that waits for the slave to catch up and refuses (noted) when it cannot;
* ``net_slow`` (latency 100-400 ms with jitter) and ``net_loss`` (a third of the connections
  stall and close after 1 s) on every link of one node.

Clock faults: ``clock_jump``: one broker's wall clock steps 5-60 s forward or back
(``cluster.Cluster.jump_clock``); heal steps it back.

Disk faults (``disk_faults``, registered when it is imported): ``power_loss_master`` /
``power_loss_slave`` (only on a cluster with power-loss layers) and ``bitflip_master`` /
``bitflip_slave``.

Schedule: kinds are drawn as shuffled rounds of every kind (each kind occurs nearly equally
often), gaps and holds from ``random.Random(seed)``, and each fault gets its own generator from
it: the same seed injects the same faults in the same order (the times the cluster needs vary).
``Schedule.overlap`` (the default) starts the next fault after its gap whether or not the
previous ones healed, at most ``concurrency_max`` at once (a fault waiting for a resource still
counts); without it every fault is healed and the group waited back in sync before the next
(the comparison mode: each fault hits a healthy group).

Invariant: every fault injected is healed (its heal runs even when the run is cancelled:
``Nemesis.run`` heals what is in force before it returns or raises).
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
import time
from collections.abc import Awaitable, Callable

from e2e.chaos import cluster as cluster_mod
from e2e.chaos import control as control_mod
from e2e.chaos import network as network_mod

Heal = Callable[[], Awaitable[str]]
Inject = Callable[[cluster_mod.Cluster, random.Random], Awaitable[Heal]]


@dataclasses.dataclass(frozen=True, slots=True)
class FaultKind:
    """One kind of fault: how to inject it, and what it must hold alone."""

    name: str
    inject: Inject
    resources: frozenset[str]
    needs_network: bool = False
    needs_power_loss: bool = False


REGISTRY: dict[str, FaultKind] = {}
"""Every fault kind by name (``register`` adds one)."""


def register(
    name: str,
    inject: Inject,
    *,
    resources: tuple[str, ...] = (),
    needs_network: bool = False,
    needs_power_loss: bool = False,
) -> None:
    """Add a fault kind (see the module); ``needs_*``: drawn only on a cluster with a network
    or power-loss layers."""
    REGISTRY[name] = FaultKind(name, inject, frozenset(resources), needs_network, needs_power_loss)


@dataclasses.dataclass(frozen=True, slots=True)
class Fault:
    """One injected fault as it happened."""

    kind: str
    at_s: float
    """Seconds since the run started when it was injected."""
    hold_s: float
    healed_s: float
    """Seconds from injection until healed (and, waiting for a healed group, back in sync)."""
    promoted: bool
    epoch: int
    """The group's epoch after the fault (read from the master; waiting mode only)."""
    in_sync: bool | None
    """Back in sync within the heal timeout (waiting mode only; ``None`` when overlapping)."""
    note: str = ""


@dataclasses.dataclass(frozen=True, slots=True)
class Schedule:
    """How many faults and how long the gaps and holds are, seconds."""

    faults: int
    seed: int
    gap_s: tuple[float, float] = (1.0, 3.0)
    hold_s: tuple[float, float] = (1.0, 4.0)
    kinds: tuple[str, ...] = ()
    """Kinds to draw from; empty = every registered kind the cluster supports."""
    overlap: bool = True
    concurrency_max: int = 2
    """Most faults in force at once when overlapping."""


# --- process faults ---------------------------------------------------------------------------


def _node(cluster: cluster_mod.Cluster, role: str) -> cluster_mod.Node:
    return {"master": cluster.master, "slave": cluster.slave, "namesrv": cluster.namesrv}[role]


def _pause(role: str) -> Inject:
    async def inject(cluster: cluster_mod.Cluster, rng: random.Random) -> Heal:
        node = _node(cluster, role)
        node.pause()

        async def heal() -> str:
            node.resume()
            return f"paused {node.name}"

        return heal

    return inject


def _restart(role: str, *, kill: bool) -> Inject:
    async def inject(cluster: cluster_mod.Cluster, rng: random.Random) -> Heal:
        node = _node(cluster, role)
        await asyncio.to_thread(node.kill if kill else node.stop)

        async def heal() -> str:
            if node is cluster.namesrv:
                await asyncio.to_thread(cluster.start_namesrv)
            else:
                await asyncio.to_thread(cluster.start_broker, node)
            return f"{'killed' if kill else 'restarted'} {node.name}"

        return heal

    return inject


async def fail_over(cluster: cluster_mod.Cluster, old: cluster_mod.Node) -> str:
    """Promote the slave (the master ``old`` is down) and restart ``old`` as its slave (as
    master again if the promotion was refused); returns the promotion's note."""
    control = control_mod.Control(cluster)
    try:
        note = await control.promote()
        await asyncio.to_thread(cluster.start_broker, old)  # as slave if promoted
        await control.reconcile()
    finally:
        await control.close()
    return note


async def _kill_master(cluster: cluster_mod.Cluster, rng: random.Random) -> Heal:
    old = cluster.master
    await asyncio.to_thread(old.kill)

    async def heal() -> str:
        return f"killed {old.name}; {await fail_over(cluster, old)}"

    return heal


# --- network and clock faults -----------------------------------------------------------------


def _network(cluster: cluster_mod.Cluster) -> network_mod.Network:
    assert cluster.network is not None, "a network fault needs the cluster's network"
    return cluster.network


def _cut(
    describe: Callable[[cluster_mod.Cluster, random.Random], tuple[str, set[frozenset[str]]]],
) -> Inject:
    async def inject(cluster: cluster_mod.Cluster, rng: random.Random) -> Heal:
        what, pairs = describe(cluster, rng)
        drop = rng.random() < 0.5
        heal_net = await _network(cluster).cut(pairs, drop=drop)

        async def heal() -> str:
            await heal_net()
            return f"{what} ({'drop' if drop else 'refuse'})"

        return heal

    return inject


def _isolate(cluster: cluster_mod.Cluster, rng: random.Random) -> tuple[str, set[frozenset[str]]]:
    node = rng.choice(cluster.nodes)
    return f"isolated {node}", network_mod.isolate(node, cluster.nodes)


def _halves(cluster: cluster_mod.Cluster, rng: random.Random) -> tuple[str, set[frozenset[str]]]:
    side = rng.sample(cluster.nodes, 2)
    return f"split {'+'.join(sorted(side))} | rest", network_mod.split(side, cluster.nodes)


def _bridge(cluster: cluster_mod.Cluster, rng: random.Random) -> tuple[str, set[frozenset[str]]]:
    middle = rng.choice(cluster.nodes)
    left = rng.choice([n for n in cluster.nodes if n != middle])
    pairs = network_mod.bridge(middle, cluster.nodes, [left])
    return f"bridge via {middle}, {left} | rest", pairs


def _partition_failover(*, with_clients: bool) -> Inject:
    async def inject(cluster: cluster_mod.Cluster, rng: random.Random) -> Heal:
        return await _failover_behind(cluster, rng, with_clients=with_clients)

    return inject


async def _failover_behind(
    cluster: cluster_mod.Cluster, rng: random.Random, *, with_clients: bool
) -> Heal:
    old = cluster.master
    others = [cluster.namesrv.name, cluster.slave.name]
    if not with_clients:
        others.append(network_mod.CLIENT)
    pairs = {frozenset((old.name, other)) for other in others}
    heal_net = await _network(cluster).cut(pairs, drop=rng.random() < 0.5)
    control = control_mod.Control(cluster)
    try:
        note = await control.promote(retry_s=0.0)  # a refusal (the master answers) is final
        writable = "n/a (not promoted)"
        if note.startswith("promoted"):  # its lease ran out: it must refuse writes by now
            stale = await control.stats(old)
            writable = "no answer" if stale is None else str(stale.writable)
    finally:
        await control.close()

    async def heal() -> str:
        await heal_net()
        control = control_mod.Control(cluster)
        try:
            await control.reconcile()
        finally:
            await control.close()
        seen = "clients still reach it" if with_clients else "isolated"
        return f"cut {old.name} ({seen}); {note}; stale master writable: {writable}"

    return heal


def _toxic(
    kind: str, attributes: Callable[[random.Random], dict[str, int]], share: float
) -> Inject:
    async def inject(cluster: cluster_mod.Cluster, rng: random.Random) -> Heal:
        node = rng.choice(cluster.nodes)
        given = attributes(rng)
        heal_net = await _network(cluster).toxic(node, kind, given, toxicity=share)

        async def heal() -> str:
            await heal_net()
            return f"{kind} {given} on {node}"

        return heal

    return inject


async def _clock_jump(cluster: cluster_mod.Cluster, rng: random.Random) -> Heal:
    node = rng.choice((cluster.master, cluster.slave))
    offset_ms = rng.choice((-1, 1)) * rng.randint(5_000, 60_000)
    cluster.jump_clock(node, offset_ms)

    async def heal() -> str:
        cluster.jump_clock(node, 0)
        return f"{node.name} clock {offset_ms:+d} ms"

    return heal


register("kill_master", _kill_master, resources=("brokers",))
register("kill_slave", _restart("slave", kill=True), resources=("brokers",))
register("pause_master", _pause("master"), resources=("brokers",))
register("pause_slave", _pause("slave"), resources=("brokers",))
register("restart_master", _restart("master", kill=False), resources=("brokers",))
register("restart_slave", _restart("slave", kill=False), resources=("brokers",))
register("kill_namesrv", _restart("namesrv", kill=True), resources=("namesrv",))
register("partition_isolate", _cut(_isolate), needs_network=True)
register("partition_halves", _cut(_halves), needs_network=True)
register("partition_bridge", _cut(_bridge), needs_network=True)
register(
    "partition_failover",
    _partition_failover(with_clients=False),
    resources=("brokers",),
    needs_network=True,
)
register(
    "partition_failover_clients",
    _partition_failover(with_clients=True),
    resources=("brokers",),
    needs_network=True,
)
register(
    "net_slow",
    _toxic("latency", lambda rng: {"latency": rng.randint(100, 400), "jitter": 100}, 1.0),
    needs_network=True,
)
register("net_loss", _toxic("timeout", lambda rng: {"timeout": 1_000}, 0.33), needs_network=True)
register("clock_jump", _clock_jump, resources=("clock",))

PROCESS_KINDS = tuple(k for k in REGISTRY if not k.startswith(("partition", "net_", "clock")))
"""The kinds of the first chaos runs (issue 13): processes only (registered above: the disk
faults register later)."""


def kinds_for(cluster: cluster_mod.Cluster) -> tuple[str, ...]:
    """Every registered kind ``cluster`` supports (network kinds need its network, power-loss
    kinds its power-loss layers)."""
    return tuple(
        k
        for k, v in REGISTRY.items()
        if (cluster.network is not None or not v.needs_network)
        and (cluster.power_loss or not v.needs_power_loss)
    )


# --- the scheduler ----------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class _Planned:
    kind: str
    gap_s: float
    hold_s: float
    seed: int


class Nemesis:
    """Injects ``schedule`` into ``cluster``; ``faults`` records what happened.

    Args:
        cluster: the running cluster.
        schedule: the faults to inject.
    """

    def __init__(self, cluster: cluster_mod.Cluster, schedule: Schedule) -> None:
        self._cluster = cluster
        self._schedule = schedule
        self._kinds = schedule.kinds or kinds_for(cluster)
        unknown = set(self._kinds) - set(kinds_for(cluster))
        if unknown:
            raise ValueError(f"fault kinds {sorted(unknown)} are unknown or need the network")
        self._rng = random.Random(schedule.seed)
        self._locks: dict[str, asyncio.Lock] = {}
        self._in_force: dict[int, Heal] = {}
        self.control = control_mod.Control(cluster)
        self.faults: list[Fault] = []

    def plan(self) -> list[_Planned]:
        """The schedule drawn from the seed (kinds in shuffled rounds, gaps, holds)."""
        kinds: list[str] = []
        while len(kinds) < self._schedule.faults:
            round_ = list(self._kinds)
            self._rng.shuffle(round_)
            kinds += round_
        return [
            _Planned(
                kind,
                self._rng.uniform(*self._schedule.gap_s),
                self._rng.uniform(*self._schedule.hold_s),
                self._rng.getrandbits(32),
            )
            for kind in kinds[: self._schedule.faults]
        ]

    async def run(self, started: float) -> None:
        """Inject every fault of the schedule (overlapping or one at a time)."""
        try:
            if self._schedule.overlap:
                await self._run_overlapping(started)
            else:
                for planned in self.plan():
                    await asyncio.sleep(planned.gap_s)
                    await self._one(planned, started, wait_healed=True)
        finally:
            await self._heal_in_force()

    async def _run_overlapping(self, started: float) -> None:
        slots = asyncio.Semaphore(self._schedule.concurrency_max)

        async def one(planned: _Planned) -> None:
            try:
                await self._one(planned, started, wait_healed=False)
            finally:
                slots.release()

        async with asyncio.TaskGroup() as tasks:
            for planned in self.plan():
                await asyncio.sleep(planned.gap_s)
                await slots.acquire()
                tasks.create_task(one(planned))

    async def _one(self, planned: _Planned, started: float, *, wait_healed: bool) -> None:
        kind = REGISTRY[planned.kind]
        locks = [self._locks.setdefault(r, asyncio.Lock()) for r in sorted(kind.resources)]
        for lock in locks:
            await lock.acquire()
        try:
            at = time.monotonic()
            heal = await kind.inject(self._cluster, random.Random(planned.seed))
            token = id(heal)
            self._in_force[token] = heal
            await asyncio.sleep(planned.hold_s)
            del self._in_force[token]
            note = await heal()
            epoch, in_sync = 0, None
            if wait_healed:
                epoch, in_sync = await self.control.wait_in_sync()
        finally:
            for lock in reversed(locks):
                lock.release()
        self.faults.append(
            Fault(
                planned.kind,
                round(at - started, 2),
                round(planned.hold_s, 2),
                round(time.monotonic() - at, 2),
                "promoted" in note,
                epoch,
                in_sync,
                note,
            )
        )

    async def _heal_in_force(self) -> None:
        for token, heal in list(self._in_force.items()):
            self._in_force.pop(token, None)
            await heal()

    async def heal_all(self) -> tuple[int, bool]:
        """After the run: every proxy and clock back, every process running and resumed, the
        roles as the brokers say (a stale master demoted), then wait until in sync; returns
        (epoch, in sync)."""
        c = self._cluster
        if c.network is not None:
            await c.network.reset()
        for node in (c.master, c.slave):
            c.jump_clock(node, 0)
        await asyncio.to_thread(c.heal)
        await self.control.reconcile()
        return await self.control.wait_in_sync()

    async def close(self) -> None:
        """Close the control channels (after the run and the last waits)."""
        await self.control.close()
