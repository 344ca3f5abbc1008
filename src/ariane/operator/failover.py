"""The operator's HA decisions for one broker group, pure (no I/O, no clock): failover and drain.

``reconcile`` gathers the facts (pods from the apiserver, each member's role, epoch and CommitLog
offset from the brokers' admin API) and acts on what these functions answer:

- ``in_sync_slaves``: the slaves a switchover may promote (live, within the in-sync gap of a
  live master; RocketMQ ``haMaxGapNotInSync``);
- ``failover_step``: when the master's pod has been gone or unready, or its broker silent,
  for ``masterDownTimeoutSeconds``, whom ``common.promotion.choose`` promotes (or nobody;
  never before the group's first master served: a group seen at no epoch but 0);
- ``drain_verdict``: whether broker groups being removed (scale-in) still hold messages some
  consumer group has not consumed (then the scale-in is refused).

Invariants: never an unclean election (only a live in-sync slave is promoted, as
``promotion.choose``); a decision depends only on its arguments, so a unit test pins it.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
from collections.abc import Mapping, Sequence
from typing import Final

from ariane.common import promotion

MASTER_ROLES: Final = frozenset({"SYNC_MASTER", "ASYNC_MASTER"})
IN_SYNC_GAP_BYTES: Final = 256 * 1024 * 1024
"""A slave further behind a live master than this is not in sync (``haMaxGapNotInSync``)."""
DEFAULT_MASTER_DOWN_TIMEOUT_S: Final = 30
"""``spec.failover.masterDownTimeoutSeconds`` default (the CRD repeats it)."""


@dataclasses.dataclass(frozen=True, slots=True)
class MemberView:
    """One pod of a group as its broker answered (``role`` empty: it did not answer).

    Attributes:
        ordinal: the pod's StatefulSet ordinal.
        broker_id: the id it registered with (0 = master), -1 when unknown.
        role: ``SYNC_MASTER``, ``ASYNC_MASTER``, ``SLAVE``, or ``""`` when down.
        epoch: the newest epoch it holds.
        max_offset: its max CommitLog offset, bytes.
        pod_ready: its pod exists, is Ready and is not terminating.
    """

    ordinal: int
    broker_id: int
    role: str
    epoch: int
    max_offset: int
    pod_ready: bool

    @property
    def alive(self) -> bool:
        """The pod is ready and the broker answers."""
        return self.pod_ready and bool(self.role)


def _master(members: Sequence[MemberView], master_ordinal: int) -> MemberView | None:
    return next((m for m in members if m.ordinal == master_ordinal), None)


def in_sync_slaves(members: Sequence[MemberView], master_ordinal: int) -> list[int]:
    """Ordinals of the live slaves within ``IN_SYNC_GAP_BYTES`` of the live master, most caught
    up first (none when the master is not alive: a switchover needs it)."""
    master = _master(members, master_ordinal)
    if master is None or not master.alive:
        return []
    slaves = [
        m
        for m in members
        if m.ordinal != master_ordinal
        and m.alive
        and m.role == "SLAVE"
        and master.max_offset - m.max_offset <= IN_SYNC_GAP_BYTES
    ]
    return [m.ordinal for m in sorted(slaves, key=lambda m: (-m.max_offset, m.ordinal))]


class Step(enum.Enum):
    """What ``failover_step`` asks for."""

    NONE = "none"
    """The master is up (or the group has nobody to promote and no master)."""
    WAIT = "wait"
    """The master is down, but not yet for the timeout."""
    PROMOTE = "promote"
    """Promote ``ordinal`` (broker id ``broker_id``) with ``epoch``."""
    STUCK = "stuck"
    """The master is down past the timeout and no live in-sync slave exists."""


@dataclasses.dataclass(frozen=True, slots=True)
class FailoverDecision:
    """``failover_step``'s answer, with the time the master was first seen down (to keep)."""

    step: Step
    down_since: datetime.datetime | None
    message: str
    ordinal: int = -1
    broker_id: int = -1
    epoch: int = 0


def master_is_down(members: Sequence[MemberView], master_ordinal: int) -> bool:
    """The master's pod is missing, unready or terminating, or its broker does not answer as a
    master."""
    master = _master(members, master_ordinal)
    return master is None or not master.alive or master.role not in MASTER_ROLES


def failover_step(
    members: Sequence[MemberView],
    master_ordinal: int,
    *,
    down_since: datetime.datetime | None,
    now: datetime.datetime,
    timeout_s: float,
    seen_epoch: int | None = None,
) -> FailoverDecision:
    """Whether to promote a slave of a group now (automatic failover).

    Args:
        members: every pod of the group (``MemberView.pod_ready`` False for a missing pod).
        master_ordinal: the ordinal the roles ConfigMap names as master.
        down_since: when the master was first seen down (from status), ``None`` if it was up.
        now: the time of this decision.
        timeout_s: ``spec.failover.masterDownTimeoutSeconds``.
        seen_epoch: the highest epoch the group was seen at before (status), ``None`` when
            the caller keeps no record (then only the members' epochs count).

    Returns:
        NONE when the master is up (``down_since`` cleared); WAIT (no ``down_since``) while
        no master has ever served (every epoch 0: RocketMQ's controller elects only from the
        SyncStateSet, which a never-fed slave is not in, and a slave promoted now would take
        the epoch the starting master opens with); WAIT until ``timeout_s`` after
        ``down_since``; then PROMOTE the slave ``promotion.choose`` picks (a slave is in sync
        when it answers: the master cannot be asked), or STUCK when it picks nobody.
    """
    if not master_is_down(members, master_ordinal):
        return FailoverDecision(Step.NONE, None, f"master ordinal {master_ordinal} is up")
    if seen_epoch is not None and max((seen_epoch, *(m.epoch for m in members))) == 0:
        return FailoverDecision(
            Step.WAIT,
            None,
            f"no master has served yet (every epoch 0): waiting for master ordinal "
            f"{master_ordinal} to start, nothing to fail over from",
        )
    since = down_since or now
    waited_s = (now - since).total_seconds()
    if waited_s < timeout_s:
        return FailoverDecision(
            Step.WAIT, since, f"master down for {waited_s:.0f} s of {timeout_s:.0f} s"
        )
    facts = [
        promotion.Member(
            broker_id=m.ordinal,  # ordinals identify pods; broker ids move with promotions
            epoch=m.epoch,
            max_offset=m.max_offset,
            alive=m.alive and m.ordinal != master_ordinal,
            in_sync=m.alive and m.role == "SLAVE",
        )
        for m in members
    ]
    decision = promotion.choose(facts, master_id=master_ordinal)
    if decision.broker_id is None:
        return FailoverDecision(Step.STUCK, since, f"master down, {decision.reason}")
    chosen = next(m for m in members if m.ordinal == decision.broker_id)
    return FailoverDecision(
        Step.PROMOTE,
        since,
        f"master down for {waited_s:.0f} s; {decision.reason}",
        ordinal=chosen.ordinal,
        broker_id=chosen.broker_id,
        epoch=decision.new_epoch,
    )


@dataclasses.dataclass(frozen=True, slots=True)
class DrainVerdict:
    """Whether groups being removed may go: ``safe``, with what blocks them."""

    safe: bool
    message: str
    unconsumed: int


def drain_verdict(groups: Sequence[str], lag_by_consumer_group: Mapping[str, int]) -> DrainVerdict:
    """May broker ``groups`` be deleted (scale-in)? Only when no consumer group has messages
    left on them (RocketMQ ``TopicTransfer``: wipe write permission, wait for lag 0).

    Args:
        groups: the broker groups being removed.
        lag_by_consumer_group: consumer group → messages it has not consumed on ``groups``.
    """
    names = ", ".join(groups)
    behind = {g: lag for g, lag in sorted(lag_by_consumer_group.items()) if lag > 0}
    total = sum(behind.values())
    if not behind:
        return DrainVerdict(True, f"{names} drained: every consumer group caught up", 0)
    detail = ", ".join(f"{g}={lag}" for g, lag in behind.items())
    return DrainVerdict(
        False,
        f"scale-in of {names} refused: {total} unconsumed messages ({detail}); write "
        "permission is off, waiting for the consumers",
        total,
    )
