"""Disk faults for the nemesis: power loss and bit flips of one broker's store.

Registered in ``nemesis.REGISTRY`` on import (``runner`` imports this module), each holding the
``brokers`` resource (it stops, restarts or promotes a broker):

* ``power_loss_master`` / ``power_loss_slave`` (only on a cluster with power-loss layers,
  ``cluster.Cluster(power_loss=True)``): SIGKILL the broker and drop every write its store
  never synced, keeping a random prefix of each file's unsynced writes (torn), then mount the
  layer again (``Cluster.power_off``). The heal of a slave restarts it as the slave. A master
  that lost power is failed over as ``kill_master`` is: its group cannot wait for it, so the
  heal promotes the slave (``ariane admin broker promote``'s failover, after the lease) and
  restarts the old master as the new master's slave, where it cuts a tail the new master never
  had and fetches the rest. If the promotion is refused, the old master restarts as master.
* ``bitflip_master`` / ``bitflip_slave``: stop the broker (a clean stop or a SIGKILL, drawn),
  damage its store with one injector of ``corruption`` drawn from ``MASTER_DAMAGE`` /
  ``SLAVE_DAMAGE`` (a CommitLog or ConsumeQueue bit flip or truncation), restart it in its role.
  The store repairs itself: a slave cuts its CommitLog at the damage and re-fetches from its
  master; a master fetches a damaged record back from its slave when a read meets it; a
  ConsumeQueue is rebuilt from the CommitLog. A master whose CommitLog was cut refuses to start
  (as RocketMQ does), so that injector on a master is healed by a failover as above; so is any
  master that does not come back listening.

Invariant: every inject returns a heal that leaves both brokers running (a broker that cannot
start raises from the heal, and the run fails loudly rather than going on with one broker).
"""

from __future__ import annotations

import asyncio
import json
import pathlib
import random
from collections.abc import Callable
from typing import Any

from e2e.chaos import cluster as cluster_mod
from e2e.chaos import corruption, nemesis

Damage = Callable[[pathlib.Path, random.Random], dict[str, Any]]

SLAVE_DAMAGE: dict[str, Damage] = {
    "flip_commit_log_record": corruption.flip_commit_log_record,
    "truncate_commit_log": corruption.truncate_commit_log,
    "flip_consume_queue_unit": corruption.flip_consume_queue_unit,
    "truncate_consume_queue": corruption.truncate_consume_queue,
}
"""What a slave's store may suffer (every injector)."""

MASTER_DAMAGE = SLAVE_DAMAGE
"""What a master's store may suffer (every injector; a cut CommitLog means a failover)."""

_FAILS_OVER = frozenset({"truncate_commit_log"})
"""Injectors after which a master refuses to start."""


def _power_loss(role: str) -> nemesis.Inject:
    async def inject(cluster: cluster_mod.Cluster, rng: random.Random) -> nemesis.Heal:
        node = cluster.master if role == "master" else cluster.slave
        dropped = await asyncio.to_thread(cluster.power_off, node, rng.getrandbits(32))

        async def heal() -> str:
            what = f"power loss of {node.name} ({dropped} unsynced writes undone)"
            if role == "master" and node is cluster.master:
                return f"{what}; {await nemesis.fail_over(cluster, node)}"
            await asyncio.to_thread(cluster.start_broker, node)
            return what

        return heal

    return inject


def _damage(cluster: cluster_mod.Cluster, node: cluster_mod.Node, name: str, seed: int) -> str:
    """Apply injector ``name`` to ``node``'s (stopped) store; a JSON note of what it did."""
    damage = SLAVE_DAMAGE[name]
    try:
        done = damage(cluster.store_dir(node), random.Random(seed))
    except (ValueError, FileNotFoundError) as exc:  # an early store: too few records or units
        return f"{name}: nothing to damage ({exc})"
    return json.dumps(done, sort_keys=True)


def _bitflip(role: str) -> nemesis.Inject:
    async def inject(cluster: cluster_mod.Cluster, rng: random.Random) -> nemesis.Heal:
        node = cluster.master if role == "master" else cluster.slave
        kill = rng.random() < 0.5
        name = rng.choice(sorted(MASTER_DAMAGE if role == "master" else SLAVE_DAMAGE))
        await asyncio.to_thread(node.kill if kill else node.stop)
        done = await asyncio.to_thread(_damage, cluster, node, name, rng.getrandbits(32))

        async def heal() -> str:
            what = f"{'killed' if kill else 'stopped'} {node.name}, {done}"
            if node is not cluster.master:
                await asyncio.to_thread(cluster.start_broker, node)
                return what
            if name not in _FAILS_OVER or "nothing to damage" in done:
                try:
                    await asyncio.to_thread(cluster.start_broker, node)
                    return what
                except (RuntimeError, TimeoutError) as exc:  # it exited: fail over
                    node.kill()
                    what += f"; restart failed ({type(exc).__name__})"
            return f"{what}; {await nemesis.fail_over(cluster, node)}"

        return heal

    return inject


nemesis.register(
    "power_loss_master", _power_loss("master"), resources=("brokers",), needs_power_loss=True
)
nemesis.register(
    "power_loss_slave", _power_loss("slave"), resources=("brokers",), needs_power_loss=True
)
nemesis.register("bitflip_master", _bitflip("master"), resources=("brokers",))
nemesis.register("bitflip_slave", _bitflip("slave"), resources=("brokers",))
