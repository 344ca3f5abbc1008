"""The operator's HA decisions for one broker group, pure (no I/O, no clock): failover and drain.

``reconcile`` gathers the facts (pods from the apiserver, each member's role, epoch and CommitLog
offset from the brokers' admin API) and acts on what these functions answer:

- ``in_sync_slaves``: the slaves a switchover may promote (live, within the in-sync gap of a
  live master; RocketMQ ``haMaxGapNotInSync``);
- ``failover_step``: when the master has been down for ``masterDownTimeoutSeconds`` and its
  write lease has run out, whom ``common.promotion.choose`` promotes (or nobody; never before
  the group's first master served: a group seen at no epoch but 0);
- ``drain_verdict``: whether broker groups being removed (scale-in) still hold messages some
  consumer group has not consumed (then the scale-in is refused).

**Down is not "unreachable from the operator"** (issue 25; README "A stale master never
acknowledges"). A master keeps its write lease by renewing it through a majority of the name
servers, and each name server knows how long ago it heard the master (``LeaseView``). So:

- a master whose pod is missing, unready or terminating is down (Kubernetes says so);
- a master whose pod is Ready but whose broker does not answer the operator is down only once
  the name servers no longer hold its lease (heard more than ``lease_ms`` + a margin ago), and
  then down since it was last heard; while they hold it, the master is alive behind a partition
  that only cuts the operator off (``Step.HELD``: nothing starts counting, nobody is promoted);
  when the name servers do not answer, nobody can tell (``Step.HELD`` too);
- a master that keeps no lease (``lease_ms = 0``, or no name server lists it) is judged by the
  operator's view alone, as before leases;
- nobody is promoted while the name servers hold a lease for the group's master, whatever the
  pod says (``Step.WAIT``): it may still acknowledge writes.

So a failover happens within ``masterDownTimeoutSeconds`` + the lease (+ one resync) of the
master's death, and never over a master that still acknowledges. RocketMQ's controller counts a
master down when its heartbeats to the controller stop (``controllerHeartBeatTimeoutMills``); it
has no lease, so a master cut off from the controller but not from its clients keeps
acknowledging after the controller elected another.

Invariants: never an unclean election (only a live in-sync slave is promoted, as
``promotion.choose``); never a PROMOTE while the name servers hold the master's lease or do not
answer; a decision depends only on its arguments, so a unit test pins it.
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


@dataclasses.dataclass(frozen=True, slots=True)
class LeaseView:
    """What the name servers say of the group's registered master (broker id 0) and its lease.

    Attributes:
        answered: a majority of the name servers answered (else nothing below is known).
        held_ms: how much longer the master may hold its write lease, ms, as the name server
            that heard it last counts (``lease_ms`` + margin - ``heard_ago_ms``); 0 when run out
            or when no master with a lease is listed.
        heard_ago_ms: how long ago a name server last heard the master, ms; -1 when none lists
            a master that keeps a lease.
        lease_ms: the lease the master keeps, ms (0: none, or no master listed).
    """

    answered: bool
    held_ms: int = 0
    heard_ago_ms: int = -1
    lease_ms: int = 0

    @property
    def vouches(self) -> bool:
        """The name servers can tell whether the master is alive (it keeps a lease there)."""
        return self.answered and self.lease_ms > 0 and self.heard_ago_ms >= 0


NO_LEASE: Final = LeaseView(answered=True)
"""The name servers answered and list no master that keeps a lease."""


class Step(enum.Enum):
    """What ``failover_step`` asks for."""

    NONE = "none"
    """The master is up (or the group has nobody to promote and no master)."""
    HELD = "held"
    """The master does not answer the operator but the name servers hold its lease (or do not
    answer): it is not counted down, nobody is promoted."""
    WAIT = "wait"
    """The master is down, but not yet for the timeout, or its lease has not run out."""
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


def _unreachable_but_held(lease: LeaseView) -> str:
    """Why a Ready master that does not answer the operator is not counted down ("" if it is:
    the name servers no longer hold its lease, or it keeps none)."""
    if not lease.answered:
        return (
            "master does not answer the operator and the name servers do not answer: cannot "
            "tell whether it is down; not failed over"
        )
    if lease.held_ms > 0:
        return (
            f"master does not answer the operator but renews its lease at the name servers "
            f"(heard {lease.heard_ago_ms} ms ago, lease {lease.lease_ms} ms): not down"
        )
    return ""


def failover_step(
    members: Sequence[MemberView],
    master_ordinal: int,
    *,
    down_since: datetime.datetime | None,
    now: datetime.datetime,
    timeout_s: float,
    lease: LeaseView,
    seen_epoch: int | None = None,
) -> FailoverDecision:
    """Whether to promote a slave of a group now (automatic failover; see the module for when
    a master is down).

    Args:
        members: every pod of the group (``MemberView.pod_ready`` False for a missing pod).
        master_ordinal: the ordinal the roles ConfigMap names as master.
        down_since: when the master was first seen down (from status), ``None`` if it was up.
        now: the time of this decision.
        timeout_s: ``spec.failover.masterDownTimeoutSeconds``.
        lease: what the name servers say of the group's master and its lease (read when the
            master does not answer; ``NO_LEASE`` is never read when it does).
        seen_epoch: the highest epoch the group was seen at before (status), ``None`` when
            the caller keeps no record (then only the members' epochs count).

    Returns:
        NONE when the master is up (``down_since`` cleared); WAIT (no ``down_since``) while
        no master has ever served (every epoch 0: RocketMQ's controller elects only from the
        SyncStateSet, which a never-fed slave is not in, and a slave promoted now would take
        the epoch the starting master opens with); HELD when its pod is Ready and the name
        servers hold its lease or do not answer (``down_since`` cleared); WAIT until
        ``timeout_s`` after ``down_since`` (for a lease that ran out: at the latest since the
        master was last heard) and until its lease has run out; then PROMOTE the slave
        ``promotion.choose`` picks (a slave is in sync when it answers: the master cannot be
        asked), or STUCK when it picks nobody.
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
    master = _master(members, master_ordinal)
    if master is not None and master.pod_ready:
        held = _unreachable_but_held(lease)
        if held:
            return FailoverDecision(Step.HELD, None, held)
        if lease.vouches:  # its lease ran out: nobody has heard it since
            last_heard = now - datetime.timedelta(milliseconds=lease.heard_ago_ms)
            down_since = min(down_since or now, last_heard)
    since = down_since or now
    waited_s = (now - since).total_seconds()
    if waited_s < timeout_s:
        return FailoverDecision(
            Step.WAIT, since, f"master down for {waited_s:.0f} s of {timeout_s:.0f} s"
        )
    if not lease.answered or lease.held_ms > 0:
        why = (
            f"the name servers hold its lease {lease.held_ms} ms more (it may still acknowledge)"
            if lease.answered
            else "the name servers do not answer (its lease cannot be checked)"
        )
        return FailoverDecision(Step.WAIT, since, f"master down for {waited_s:.0f} s; {why}")
    return _choose(members, master_ordinal, since, waited_s)


def _choose(
    members: Sequence[MemberView], master_ordinal: int, since: datetime.datetime, waited_s: float
) -> FailoverDecision:
    """PROMOTE whom ``promotion.choose`` picks among the live slaves, or STUCK."""
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
