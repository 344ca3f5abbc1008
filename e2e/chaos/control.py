"""The control plane of a chaos run: health checks, promotion and demotion of the brokers.

Like Jepsen's control node it stands outside every partition: it reads each broker's
``GetBrokerRuntimeStats`` and sends ``ChangeRole`` on the brokers' real ports, never through a
proxy. The promotion itself is ``ariane admin broker promote``'s (``client.failover.promote``):
it reads the group from the name server and dials the brokers at their registered addresses, so
it sees the network as the clients do (a failover waits for the old master's lease).

``reconcile`` makes the cluster's notion of master and slave match what the brokers say after a
promotion that may have half-happened (an answer lost in a partition): the broker with a master
role at the highest epoch is the master; the other is demoted in place (``ChangeRole`` to SLAVE
following the master's HA address as it dials it), or restarted as a slave if that fails.

Invariant: every call has a deadline; nothing here waits longer than its ``*_TIMEOUT_S``.
"""

from __future__ import annotations

import asyncio
import time

import grpc

from ariane.client import failover as admin_failover
from ariane.common import errors
from ariane.grpcwire import channel_pool, pb, rpc
from e2e.chaos import cluster as cluster_mod

IN_SYNC_GAP_BYTES = 1 << 20
"""The slave counts as back in sync within this many bytes of the master, bytes."""

HEAL_TIMEOUT_S = 60.0
"""Longest wait for the group to be back in sync after a fault, s."""

PROMOTE_TIMEOUT_S = 30.0
"""Longest time promotion is retried (the name server may be restarting), s."""

CALL_TIMEOUT_S = 2.0
"""Deadline of one control call, s."""

SLAVE = pb.admin.BrokerRole.BROKER_ROLE_SLAVE


class Control:
    """Control calls to ``cluster``'s brokers (one channel pool; ``close`` it)."""

    def __init__(self, cluster: cluster_mod.Cluster) -> None:
        self.cluster = cluster
        self._channels = channel_pool.ChannelPool(channels_max=16)

    async def close(self) -> None:
        """Close the channels."""
        await self._channels.close()

    async def stats(self, node: cluster_mod.Node) -> pb.admin.GetBrokerRuntimeStatsResponse | None:
        """``node``'s runtime stats, or ``None`` when it does not answer in time."""
        if not node.running or node.paused:
            return None
        try:
            return await rpc.unary_call(
                await self._channels.get(node.endpoint),
                pb.ADMIN_SERVICE,
                "GetBrokerRuntimeStats",
                pb.admin.GetBrokerRuntimeStatsRequest(),
                pb.admin.GetBrokerRuntimeStatsResponse,
                timeout_s=CALL_TIMEOUT_S,
            )
        except grpc.aio.AioRpcError:
            return None

    async def promote(self, *, retry_s: float = PROMOTE_TIMEOUT_S) -> str:
        """Fail over to the slave (``admin_failover.promote``, retried for ``retry_s``), then
        ``reconcile`` without demoting; returns a note of what happened."""
        c = self.cluster
        deadline = time.monotonic() + retry_s
        note = ""
        while True:
            try:
                outcome = await admin_failover.promote(
                    (c.namesrv_endpoint,), cluster_mod.GROUP_NAME, 1, role=c.role
                )
                note = f"promoted {c.slave.name} to epoch {outcome.epoch}"
                break
            except (errors.ArianeError, grpc.aio.AioRpcError) as exc:
                if time.monotonic() > deadline:
                    note = f"promotion failed: {type(exc).__name__}: {exc}"[:200]
                    break
                await asyncio.sleep(0.5)
        await self.reconcile(demote=False)
        return note

    async def reconcile(self, *, demote: bool = True) -> None:
        """Name the master after what the brokers say, and (``demote``) make the other its
        slave (see the module); without ``demote`` a stale master stays as it is (a partition
        still hides the promotion from it)."""
        c = self.cluster
        master, slave = await self.stats(c.master), await self.stats(c.slave)
        newer = slave is not None and (
            master is None or master.role == SLAVE or slave.epoch > master.epoch
        )
        if slave is not None and slave.role != SLAVE and newer:
            c.swap_roles()
            master, slave = slave, master
        if not demote or master is None or master.role == SLAVE:
            return
        if c.slave.running and (slave is None or slave.role != SLAVE):
            await self.demote(c.slave, int(master.epoch))

    async def demote(self, node: cluster_mod.Node, epoch: int) -> None:
        """Make ``node`` a slave of the master at ``epoch``: ``ChangeRole`` in place, else a
        restart as slave."""
        c = self.cluster
        request = pb.admin.ChangeRoleRequest(
            role=pb.admin.BrokerRole.Name(SLAVE),
            epoch=epoch,
            broker_id=1,
            master_ha_address=c.master_ha_for(node),
        )
        try:
            await rpc.unary_call(
                await self._channels.get(node.endpoint),
                pb.ADMIN_SERVICE,
                "ChangeRole",
                request,
                pb.admin.ChangeRoleResponse,
                timeout_s=CALL_TIMEOUT_S,
            )
        except (grpc.aio.AioRpcError, errors.ArianeError):
            await asyncio.to_thread(node.stop)
            await asyncio.to_thread(c.start_broker, node)

    async def wait_synced(self, topic: str) -> None:
        """Wait until the slave's metadata sync copied ``topic`` (``HEAL_TIMEOUT_S`` at most).

        Raises:
            TimeoutError: it did not.
        """
        deadline = time.monotonic() + HEAL_TIMEOUT_S
        while time.monotonic() < deadline:
            try:
                listed = await rpc.unary_call(
                    await self._channels.get(self.cluster.slave.endpoint),
                    pb.ADMIN_SERVICE,
                    "ListTopics",
                    pb.admin.ListTopicsRequest(),
                    pb.admin.ListTopicsResponse,
                    timeout_s=CALL_TIMEOUT_S,
                )
                if topic in {t.name for t in listed.topics}:
                    return
            except grpc.aio.AioRpcError:
                pass
            await asyncio.sleep(0.2)
        raise TimeoutError(f"the slave did not copy topic {topic} in {HEAL_TIMEOUT_S} s")

    async def wait_in_sync(self, timeout_s: float = HEAL_TIMEOUT_S) -> tuple[int, bool]:
        """Wait until the master answers as master and the slave as its caught-up slave;
        returns (the master's epoch, whether that happened within ``timeout_s``)."""
        deadline = time.monotonic() + timeout_s
        epoch = 0
        while time.monotonic() < deadline:
            master = await self.stats(self.cluster.master)
            slave = await self.stats(self.cluster.slave)
            if master is not None and slave is not None:
                epoch = int(master.epoch)
                caught_up = master.commit_log_max_offset - slave.commit_log_max_offset
                if slave.role == SLAVE and master.role != SLAVE and caught_up <= IN_SYNC_GAP_BYTES:
                    return epoch, True
            await asyncio.sleep(0.2)
        return epoch, False
