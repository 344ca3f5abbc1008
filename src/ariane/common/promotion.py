"""Whom to promote when a broker group's master is gone: a pure decision, no I/O.

Mirrors RocketMQ 5's controller election (``DefaultElectPolicy``) with unclean election off
(``enableElectUncleanMaster=false``): only a live slave that was in sync may become master, the
most caught-up one wins (highest epoch, then highest CommitLog offset, then lowest broker id),
and the group's epoch grows by one. The operator (for automatic failover) and
``ariane admin broker promote`` (by hand) call it.

Who counts as in sync when the master does not answer (issue 25; the chaos run promoted a slave
that had cut its own CommitLog and was 903,685 bytes behind, losing acknowledged messages):
the master registers its ``InSyncReport`` with the name servers at its first registration,
with every heartbeat (about 1 s) and at once when a slave connects, and ``in_sync_by_report``
lets a slave count only against the latest report at the master's current epoch:

* listed in sync there: its own max CommitLog offset must be at least both the acked offset
  the master reported for it and the highest end the master acknowledged to a client as
  replicated;
* not listed in sync (the master died before a report named it, or it was between two
  connections when the master last reported): its last CommitLog byte must be of the master's
  epoch (it took bytes from this master, so the HA handshake cut any diverged tail) and its
  max offset must be at least the master's CommitLog end in the report — it provably holds
  every byte the master had when last heard (a master that held nothing: any slave). One byte
  short, it is refused, even if it holds every byte acknowledged as replicated: an
  ASYNC_MASTER acknowledges every byte it appends.

Never a slave below the master's reported acknowledged offset. No report at the current epoch
(an older master) → nobody, unless forced by hand. A report must be the master's last word:
one that reached a name server more than the master's lease (``REPORT_LEASE_MS_DEFAULT`` when
it keeps none) before that name server last heard the master describes an older state, and is
as good as none (``report_is_current``). (Every report comes with a heartbeat, so the
report's age *at failover* is always past the lease: the failover waits the lease out.)
RocketMQ 5 keeps the same SyncStateSet in its controller (the master alters it, the controller
elects only from it; a master that dies before adding a slave leaves it unelectable, and
RocketMQ's way out is ``enableElectUncleanMaster``, which may lose messages); Ariane has no
controller, so the name servers carry the master's last word, and the slave's own offset is
checked against it too (a slave that cut its tail after the report is refused), which gives
the provably lossless way out above instead of an unclean election.
Residual window, stated honestly: a report is up to one heartbeat old, and the master may
still acknowledge for its lease after its last renewal; what it acked after the report is held
by the slaves that were in sync then, and ``choose`` takes the most caught up live one.
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
class InSyncReport:
    """A master's in-sync set as it registers it with the name servers.

    Attributes:
        epoch: the master's epoch when it reported.
        master_max_offset: its max CommitLog offset, bytes.
        replicated_offset: the highest CommitLog end it acknowledged to a client as replicated
            (SYNC_MASTER), bytes, at most ``master_max_offset``; 0 when none (ASYNC_MASTER).
        replicas: per connected slave: (its HA connection's peer ``host:port``, the broker id
            it named on the stream (0: none), in sync, the CommitLog offset it acknowledged in
            bytes); at most ``REPLICAS_MAX``.
        heard_ago_ms: how long ago the name server received it, ms (0 on the master).
    """

    epoch: int
    master_max_offset: int
    replicated_offset: int
    replicas: tuple[tuple[str, int, bool, int], ...]
    heard_ago_ms: int = 0


REPLICAS_MAX = 64
"""Most slaves one report lists (the master's HA connections, ``store.ha.service``)."""


REPORT_LEASE_MS_DEFAULT = 10_000
"""How much older than the master's last heartbeat its report may be when it keeps no lease,
ms (the default ``[ha] lease_ms``)."""


def report_is_current(
    report: InSyncReport, *, master_heard_ago_ms: int | None, lease_ms: int
) -> bool:
    """Whether ``report`` (as one name server keeps it) may stand for its master's last word.

    Args:
        report: the report, with ``heard_ago_ms`` as that name server counts it.
        master_heard_ago_ms: how long ago the same name server last heard the group's master
            (id 0), ms; ``None`` when it no longer lists one (its last report is its last word).
        lease_ms: the master's registered lease, ms (0: ``REPORT_LEASE_MS_DEFAULT``).

    Returns:
        False when the report reached the name server more than the lease before the master
        was last heard there: the master went on heartbeating (and acknowledging) without
        reporting, so the report may miss what it acknowledged since.
    """
    if master_heard_ago_ms is None:
        return True
    allowed_ms = lease_ms if lease_ms > 0 else REPORT_LEASE_MS_DEFAULT
    return report.heard_ago_ms - master_heard_ago_ms <= allowed_ms


def in_sync_by_report(
    report: InSyncReport | None,
    *,
    epoch: int,
    broker_id: int,
    link_address: str,
    max_offset: int,
    slave_epoch: int,
) -> tuple[bool, str]:
    """Whether a slave may be promoted in place of a master that does not answer (the rule is
    the module's).

    Args:
        report: the master's latest current report from the name servers (``None``: none).
        epoch: the master's current (registered) epoch; an older report does not count.
        broker_id: the slave's broker id (matched with the id its HA stream named).
        link_address: the slave's HA connection's local ``host:port`` as it registered it
            (matched when the stream named no id: a slave of an older build).
        max_offset: the slave's own max CommitLog offset, bytes.
        slave_epoch: the epoch of the slave's last CommitLog byte (0: it holds none).

    Returns:
        (eligible, why not: "" when eligible).
    """
    if report is None or report.epoch < epoch:
        return False, "its master left no current in-sync report at the group's epoch"
    acked = next(
        (
            a
            for link, named, ok, a in report.replicas
            if ok and (named == broker_id > 0 or (named == 0 and link == link_address != ""))
        ),
        None,
    )
    if acked is not None:
        needed = max(acked, report.replicated_offset)
        if max_offset < needed:
            return False, f"it holds {max_offset} bytes, below the {needed} its master acknowledged"
        return True, ""
    unlisted = "its master's last report does not list it in sync"
    if report.master_max_offset == 0:
        return True, ""  # the master held nothing: nothing to lose
    if slave_epoch != report.epoch:
        return False, (
            f"{unlisted}, and its last byte is of epoch {slave_epoch}, not its master's "
            f"{report.epoch} (its bytes may not be its master's)"
        )
    if max_offset < report.master_max_offset:
        return False, (
            f"{unlisted}, and it holds {max_offset} bytes, below the {report.master_max_offset} "
            "its master held when last heard"
        )
    return True, ""


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
