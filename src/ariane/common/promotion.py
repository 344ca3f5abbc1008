"""Whom to promote when a broker group's master is gone: a pure decision, no I/O.

Mirrors RocketMQ 5's controller election (``DefaultElectPolicy``) with unclean election off
(``enableElectUncleanMaster=false``): only a live slave that was in sync may become master, the
most caught-up one wins (highest epoch, then highest CommitLog offset, then lowest broker id),
and the group's epoch grows by one. The operator (for automatic failover) and
``ariane admin broker promote`` (by hand) call it.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True, slots=True)
class Member:
    """What is known of one broker of the group.

    Attributes:
        broker_id: its id (0 = the master's).
        epoch: the epoch of its last CommitLog byte.
        max_offset: its max CommitLog offset, bytes.
        alive: it answers (registration fresh, admin reachable).
        in_sync: (slaves) it was within the in-sync gap of the master when last seen.
    """

    broker_id: int
    epoch: int
    max_offset: int
    alive: bool
    in_sync: bool


@dataclasses.dataclass(frozen=True, slots=True)
class Decision:
    """The outcome: ``broker_id`` to promote with ``new_epoch``, or ``None`` and why not."""

    broker_id: int | None
    new_epoch: int
    reason: str


def choose(members: list[Member], *, master_id: int = 0, force: bool = False) -> Decision:
    """Decide whom to promote.

    Args:
        members: every known member of the group, the master included if known.
        master_id: the current master's broker id.
        force: promote even though the master is alive (a planned switchover).

    Returns:
        the decision; nobody when the master is alive (and not ``force``) or no live in-sync
        slave exists (never an unclean election: it could lose acknowledged messages).
    """
    new_epoch = max((m.epoch for m in members), default=0) + 1
    master = next((m for m in members if m.broker_id == master_id), None)
    if master is not None and master.alive and not force:
        return Decision(None, new_epoch, "the master is alive")
    candidates = [m for m in members if m.broker_id != master_id and m.alive and m.in_sync]
    if not candidates:
        return Decision(None, new_epoch, "no live in-sync slave")
    best = min(candidates, key=lambda m: (-m.epoch, -m.max_offset, m.broker_id))
    return Decision(best.broker_id, new_epoch, f"broker {best.broker_id} is the most caught up")
