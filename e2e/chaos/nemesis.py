"""The nemesis: seeded random faults on the name server, the master and the slave.

Each fault is injected, held for a random time, then healed, and the group is waited back in
sync before the next one (so every fault hits a healthy group and the faults are countable):

* ``kill_master``: SIGKILL the master; after the hold, ``ariane admin broker promote`` logic
  (``ariane.client.failover.promote``) makes the slave master with epoch + 1, and the old master
  restarts as its slave (it cuts a diverged tail on connect);
* ``kill_slave`` / ``kill_namesrv``: SIGKILL, then restart on the same port and store;
* ``pause_master`` / ``pause_slave``: SIGSTOP, then SIGCONT (no promotion: a short stall);
* ``restart_master`` / ``restart_slave``: clean stop (SIGTERM), then start in the same role.

The schedule (which fault, gaps and holds) comes from ``random.Random(seed)``: the same seed
injects the same faults in the same order (the times the cluster needs to heal vary). Kinds are
drawn as shuffled rounds of every kind, so each kind occurs (nearly) equally often and a run of
``len(kinds)`` faults or more has each at least once.
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
import time

import grpc

from ariane.client import failover as admin_failover
from ariane.common import errors
from ariane.grpcwire import pb, rpc
from e2e.chaos import cluster as cluster_mod

KINDS = (
    "kill_master",
    "kill_slave",
    "pause_master",
    "pause_slave",
    "restart_master",
    "restart_slave",
    "kill_namesrv",
)

IN_SYNC_GAP_BYTES = 1 << 20
"""The slave counts as back in sync within this many bytes of the master, bytes."""

HEAL_TIMEOUT_S = 60.0
"""Longest wait for the group to be back in sync after a fault, s."""

PROMOTE_TIMEOUT_S = 30.0
"""Longest time promotion is retried (the name server may be restarting), s."""


@dataclasses.dataclass(frozen=True, slots=True)
class Fault:
    """One injected fault as it happened."""

    kind: str
    at_s: float
    """Seconds since the run started when it was injected."""
    hold_s: float
    healed_s: float
    """Seconds from injection until the group was back in sync (or the heal timed out)."""
    promoted: bool
    epoch: int
    """The group's epoch after the fault (read from the master)."""
    in_sync: bool


@dataclasses.dataclass(frozen=True, slots=True)
class Schedule:
    """How many faults and how long the gaps and holds are, seconds."""

    faults: int
    seed: int
    gap_s: tuple[float, float] = (1.0, 3.0)
    hold_s: tuple[float, float] = (1.0, 4.0)
    kinds: tuple[str, ...] = KINDS


async def _stats(
    channels: rpc.ChannelPool, endpoint: str
) -> pb.admin.GetBrokerRuntimeStatsResponse | None:
    try:
        return await rpc.unary_call(
            await channels.get(endpoint),
            pb.ADMIN_SERVICE,
            "GetBrokerRuntimeStats",
            pb.admin.GetBrokerRuntimeStatsRequest(),
            pb.admin.GetBrokerRuntimeStatsResponse,
            timeout_s=2.0,
        )
    except grpc.aio.AioRpcError:
        return None


class Nemesis:
    """Injects ``schedule`` into ``cluster``; ``faults`` records what happened.

    Args:
        cluster: the running cluster.
        schedule: the faults to inject.
    """

    def __init__(self, cluster: cluster_mod.Cluster, schedule: Schedule) -> None:
        self._cluster = cluster
        self._schedule = schedule
        self._rng = random.Random(schedule.seed)
        self._channels = rpc.ChannelPool(channels_max=16)
        self.faults: list[Fault] = []

    async def run(self, started: float) -> None:
        """Inject every fault of the schedule, one at a time."""
        for kind in self._kinds():
            await asyncio.sleep(self._rng.uniform(*self._schedule.gap_s))
            hold_s = self._rng.uniform(*self._schedule.hold_s)
            at = time.monotonic()
            promoted = await self._inject(kind, hold_s)
            epoch, in_sync = await self.wait_in_sync()
            self.faults.append(
                Fault(
                    kind,
                    round(at - started, 2),
                    round(hold_s, 2),
                    round(time.monotonic() - at, 2),
                    promoted,
                    epoch,
                    in_sync,
                )
            )

    async def close(self) -> None:
        """Close the channels to the brokers (after the run and the last waits)."""
        await self._channels.close()

    def _kinds(self) -> list[str]:
        kinds: list[str] = []
        while len(kinds) < self._schedule.faults:
            round_ = list(self._schedule.kinds)
            self._rng.shuffle(round_)
            kinds += round_
        return kinds[: self._schedule.faults]

    async def _inject(self, kind: str, hold_s: float) -> bool:
        c = self._cluster
        target = {"master": c.master, "slave": c.slave, "namesrv": c.namesrv}[kind.split("_")[1]]
        action = kind.split("_")[0]
        if action == "pause":
            target.pause()
            await asyncio.sleep(hold_s)
            target.resume()
            return False
        await asyncio.to_thread(target.kill if action == "kill" else target.stop)
        await asyncio.sleep(hold_s)
        if kind == "kill_master":
            await self._promote()
            c.swap_roles()
            await asyncio.to_thread(c.start_broker, c.slave)
            return True
        if target is c.namesrv:
            await asyncio.to_thread(c.start_namesrv)
        else:
            await asyncio.to_thread(c.start_broker, target)
        return False

    async def _promote(self) -> None:
        deadline = time.monotonic() + PROMOTE_TIMEOUT_S
        while True:
            try:
                await admin_failover.promote(
                    (self._cluster.namesrv_endpoint,), cluster_mod.GROUP_NAME, 1
                )
                return
            except (errors.ArianeError, grpc.aio.AioRpcError):
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.5)

    async def wait_synced(self, topic: str) -> None:
        """Wait until the slave's metadata sync copied ``topic`` (``HEAL_TIMEOUT_S`` at most).

        Raises:
            TimeoutError: it did not.
        """
        deadline = time.monotonic() + HEAL_TIMEOUT_S
        while time.monotonic() < deadline:
            try:
                listed = await rpc.unary_call(
                    await self._channels.get(self._cluster.slave.endpoint),
                    pb.ADMIN_SERVICE,
                    "ListTopics",
                    pb.admin.ListTopicsRequest(),
                    pb.admin.ListTopicsResponse,
                    timeout_s=2.0,
                )
                if topic in {t.name for t in listed.topics}:
                    return
            except grpc.aio.AioRpcError:
                pass
            await asyncio.sleep(0.2)
        raise TimeoutError(f"the slave did not copy topic {topic} in {HEAL_TIMEOUT_S} s")

    async def wait_in_sync(self) -> tuple[int, bool]:
        """Wait until the master answers as master and the slave as its caught-up slave;
        returns (the master's epoch, whether that happened within ``HEAL_TIMEOUT_S``)."""
        deadline = time.monotonic() + HEAL_TIMEOUT_S
        epoch = 0
        while time.monotonic() < deadline:
            master = await _stats(self._channels, self._cluster.master.endpoint)
            slave = await _stats(self._channels, self._cluster.slave.endpoint)
            if master is not None and slave is not None:
                epoch = int(master.epoch)
                caught_up = master.commit_log_max_offset - slave.commit_log_max_offset
                if slave.role == pb.admin.BrokerRole.BROKER_ROLE_SLAVE and (
                    master.role != pb.admin.BrokerRole.BROKER_ROLE_SLAVE
                    and caught_up <= IN_SYNC_GAP_BYTES
                ):
                    return epoch, True
            await asyncio.sleep(0.2)
        return epoch, False
