"""Make a slave its group's master (switchover or failover): ``ariane admin broker promote`` and
the operator's switchover-first roll and automatic failover.

Mirrors RocketMQ's ``mqadmin electMaster`` (controller mode) on top of ``ChangeRole``
(``changeToMaster``/``changeToSlave``). The steps:

1. read the group's members from the name servers (``GetClusterInfo``);
2. ask every member for ``GetBrokerRuntimeStats`` (role, epoch, max CommitLog offset); a member
   that does not answer within the timeout is down;
3. decide with the pure ``common.promotion.choose`` (never an unclean election: only a live,
   in-sync slave; a slave is in sync when within ``max_gap_not_in_sync_bytes`` of a live master,
   or, with the master down, when the master's last current in-sync report the name servers
   keep, at the group's epoch, lists it in sync and it holds every byte that report says the
   master acknowledged, or does not list it (the master died before reporting it) and it holds
   the master's whole reported CommitLog at the master's epoch (``promotion.in_sync_by_report``;
   no current report: refused unless ``force``, the admin's ``--force``, which the operator
   never gives)); the named broker must be the one chosen;
3b. failover (the master does not answer): wait until its lease has run out (DESIGN.md §7,
   ``store.ha.lease``): every name server is asked when it last heard the group's master (id 0)
   and what lease it keeps; while some name server heard it less than ``lease_ms`` (+
   ``LEASE_MARGIN_MS``) ago it may still acknowledge writes, so nobody is promoted. The wait is
   bounded by ``lease_wait_s``; beyond it the promotion is refused, saying how long until it
   may. At least a majority of the name servers must answer (one of them saw the master's last
   renewal), else the promotion is refused too. After a wait the members are read and decided
   again (a master that resumed meanwhile makes it a switchover); when the lease had already
   run out at the first look, the first reading stands (a master silent past its lease cannot
   have acknowledged since, and reading a paused one again costs a whole call deadline);
4. planned switchover (the master answers): wait until the slave holds every byte the master has
   (``CATCH_UP_TIMEOUT_S``), so a SYNC_MASTER group loses nothing;
5. ``ChangeRole`` on the slave: the master's role (or ``--role``), epoch + 1, broker id 0;
6. ``ChangeRole`` on the old master if it answers: SLAVE under the new epoch, taking the
   promoted broker's id and following its HA address (it cuts any diverged tail on connect).

Errors: ``PreconditionFailedError`` when the decision refuses (the reason says why), the named
broker is not a member, the slave does not catch up, or the old master's lease would outlast
``lease_wait_s``; ``NotFoundError`` for an unknown group; ``ServiceUnavailableError`` when no
name server answers (or, for a failover, fewer than a majority).
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from typing import Any

import grpc

from ariane.client import credentials as client_credentials
from ariane.common import errors, promotion
from ariane.grpcwire import channel_pool, codes, convert, pb, registry_client, rpc
from ariane.grpcwire import tls as grpc_tls

CATCH_UP_TIMEOUT_S = 10.0
"""Longest wait for the slave to hold the live master's bytes before a switchover, s."""

CATCH_UP_POLL_S = 0.05
"""Pause between two offset reads while waiting for the catch-up, s."""

LEASE_WAIT_S_DEFAULT = 30.0
"""Longest a failover waits for the old master's lease to run out by default, s (three default
10 s leases)."""

LEASE_MARGIN_MS = 250
"""Extra wait past the lease as the name servers count it, ms: the name server's answer is a few
ms old when read, and clocks on different machines run at slightly different rates."""

IN_SYNC_GAP_BYTES = 256 * 1024 * 1024
"""A slave further behind a live master than this is not in sync (RocketMQ ``haMaxGapNotInSync``;
the broker's ``[ha] max_gap_not_in_sync_bytes`` default, repeated here: the client never imports
the store)."""
"""A slave further behind a live master than this is not in sync (``haMaxGapNotInSync``)."""

_MASTER_ROLES = ("SYNC_MASTER", "ASYNC_MASTER")


@dataclasses.dataclass(frozen=True, slots=True)
class MemberState:
    """One registered member of the group and what it answered (``None``: down)."""

    broker_id: int
    endpoint: str
    ha_address: str
    stats: pb.admin.GetBrokerRuntimeStatsResponse | None
    registered_epoch: int = 0
    """The epoch it last registered with, as the name server lists it (a master cut off from
    the admin still shows the epoch it holds here)."""
    ha_link_address: str = ""
    """A slave's HA connection's local ``host:port`` as it registered it (matched against
    the master's in-sync report)."""

    @property
    def role(self) -> str:
        """``SYNC_MASTER``, ``ASYNC_MASTER``, ``SLAVE``, or ``""`` when down."""
        if self.stats is None:
            return ""
        return str(pb.admin.BrokerRole.Name(self.stats.role)).removeprefix("BROKER_ROLE_")


@dataclasses.dataclass(frozen=True, slots=True)
class Outcome:
    """What ``promote`` did, for the table."""

    broker_name: str
    promoted_id: int
    endpoint: str
    role: str
    epoch: int
    commit_log_max_offset: int
    old_master: str
    old_master_demoted: bool
    reason: str


class _Calls:
    """The admin and registry calls of one promotion, each signed with ``credentials`` (fresh
    ``Credentials.headers()`` per call) when given."""

    def __init__(
        self,
        channels: channel_pool.ChannelPool,
        timeout_s: float,
        credentials: client_credentials.Credentials | None = None,
    ) -> None:
        self.channels = channels
        self.timeout_s = timeout_s
        self.credentials = credentials

    def headers(self) -> tuple[tuple[str, str], ...]:
        """The signature headers of one call (none without credentials)."""
        return () if self.credentials is None else self.credentials.headers()

    async def registry(self, endpoint: str) -> registry_client.RegistryClient:
        """A signed registry client to the name server at ``endpoint``."""
        channel = await self.channels.get(endpoint)
        signer = None if self.credentials is None else self.headers
        return registry_client.RegistryClient(channel, timeout_s=self.timeout_s, signer=signer)

    async def admin(self, endpoint: str, name: str, request: Any, answer: type[rpc.M]) -> rpc.M:
        channel = await self.channels.get(endpoint)
        response = await rpc.unary_call(
            channel,
            pb.ADMIN_SERVICE,
            name,
            request,
            answer,
            timeout_s=self.timeout_s,
            metadata=self.headers(),
        )
        codes.raise_for_status(response.status)  # type: ignore[attr-defined]
        return response

    async def stats(self, endpoint: str) -> pb.admin.GetBrokerRuntimeStatsResponse | None:
        """The broker's stats, ``None`` when it does not answer.

        Raises:
            UnauthorizedError, ForbiddenError: the broker refused the (unsigned or wrongly
                signed) call: it is up, and counting it down would misreport the group.
        """
        try:
            return await self.admin(
                endpoint,
                "GetBrokerRuntimeStats",
                pb.admin.GetBrokerRuntimeStatsRequest(),
                pb.admin.GetBrokerRuntimeStatsResponse,
            )
        except (errors.UnauthorizedError, errors.ForbiddenError) as error:
            raise type(error)(
                f"{endpoint} refused GetBrokerRuntimeStats: {error} (ACL 2.0 is on: sign the "
                "calls with a Super user's access and secret keys)"
            ) from None
        except (grpc.aio.AioRpcError, errors.ArianeError):
            return None

    async def change_role(
        self, endpoint: str, role: str, *, epoch: int, broker_id: int, master_ha: str = ""
    ) -> pb.admin.ChangeRoleResponse:
        request = pb.admin.ChangeRoleRequest(
            role=f"BROKER_ROLE_{role}",
            epoch=epoch,
            broker_id=broker_id,
            master_ha_address=master_ha,
        )
        return await self.admin(endpoint, "ChangeRole", request, pb.admin.ChangeRoleResponse)


async def group_members(
    calls: _Calls, namesrv_endpoints: tuple[str, ...], broker_name: str
) -> list[MemberState]:
    """The registered members of ``broker_name`` with their stats (``None`` when down).

    Raises:
        ServiceUnavailableError: no name server answered.
        NotFoundError: the group is not registered.
    """
    for endpoint in namesrv_endpoints:
        registry = await calls.registry(endpoint)
        try:
            info = await registry.get_cluster_info()
        except grpc.aio.AioRpcError:
            continue
        group = next((g for g in info.broker_groups if g.broker_name == broker_name), None)
        if group is None:
            raise errors.NotFoundError(f"broker group {broker_name!r} is not registered")
        addresses = [(m, convert.address_text(m.client_endpoint)) for m in group.members]
        found = await asyncio.gather(*(calls.stats(endpoint) for _, endpoint in addresses))
        return [
            MemberState(
                int(m.broker_id), endpoint, m.ha_address, stats, int(m.epoch), m.ha_link_address
            )
            for (m, endpoint), stats in zip(addresses, found, strict=True)
        ]
    names = ", ".join(namesrv_endpoints)
    raise errors.ServiceUnavailableError(f"no name server of {names} answered")


@dataclasses.dataclass(frozen=True, slots=True)
class MasterLease:
    """The group's master (id 0) and its write lease as the answering name servers see it.

    Attributes:
        remaining_ms: the longest ``lease_ms + LEASE_MARGIN_MS - heard_ago_ms`` any answering
            name server reports, ms (0 when none lists a master that keeps a lease, or all
            have run out).
        heard_ago_ms: the least time since a name server last heard that master, ms (-1 when
            none lists a master that keeps a lease).
        lease_ms: the lease that master keeps, ms (0: none listed).
        endpoint: that master's client endpoint (``""``: none listed).
    """

    remaining_ms: int = 0
    heard_ago_ms: int = -1
    lease_ms: int = 0
    endpoint: str = ""


async def _cluster_infos(
    calls: _Calls, namesrv_endpoints: tuple[str, ...]
) -> list[pb.registry.GetClusterInfoResponse]:
    """``GetClusterInfo`` of every name server that answers (the others left out)."""

    async def one(endpoint: str) -> pb.registry.GetClusterInfoResponse | None:
        registry = await calls.registry(endpoint)
        try:
            return await registry.get_cluster_info()
        except grpc.aio.AioRpcError:
            return None

    return [a for a in await asyncio.gather(*map(one, namesrv_endpoints)) if a is not None]


async def _master_lease(
    calls: _Calls, namesrv_endpoints: tuple[str, ...], broker_name: str
) -> MasterLease:
    answers = await _cluster_infos(calls, namesrv_endpoints)
    if len(answers) < len(namesrv_endpoints) // 2 + 1:
        raise errors.ServiceUnavailableError(
            f"only {len(answers)} of {len(namesrv_endpoints)} name servers answered: cannot tell "
            f"whether the master of {broker_name} still holds its lease; not promoted"
        )
    listed = [
        m
        for info in answers
        for group in info.broker_groups
        if group.broker_name == broker_name
        for m in group.members
        if m.broker_id == 0 and m.lease_ms > 0
    ]
    if not listed:
        return MasterLease()
    freshest = min(listed, key=lambda m: int(m.heard_ago_ms))
    return MasterLease(
        max(max(0, int(m.lease_ms) + LEASE_MARGIN_MS - int(m.heard_ago_ms)) for m in listed),
        int(freshest.heard_ago_ms),
        int(freshest.lease_ms),
        convert.address_text(freshest.client_endpoint),
    )


def report_of(
    answers: list[pb.registry.GetClusterInfoResponse], broker_name: str
) -> promotion.InSyncReport | None:
    """The freshest current in-sync report of the group's master among the name servers'
    answers (the highest epoch, then the least ``heard_ago_ms``); a report older than the
    master's lease before the same name server last heard the master is left out
    (``promotion.report_is_current``). ``None`` when no answer has a current one."""
    reports = []
    for info in answers:
        for group in info.broker_groups:
            if group.broker_name != broker_name or not group.HasField("in_sync_report"):
                continue
            report = convert.in_sync_report_value(group.in_sync_report)
            master = next((m for m in group.members if m.broker_id == 0), None)
            heard_ago_ms = None if master is None else int(master.heard_ago_ms)
            lease_ms = 0 if master is None else int(master.lease_ms)
            if promotion.report_is_current(
                report, master_heard_ago_ms=heard_ago_ms, lease_ms=lease_ms
            ):
                reports.append(report)
    return min(reports, key=lambda r: (-r.epoch, r.heard_ago_ms), default=None)


async def in_sync_report(
    calls: _Calls, namesrv_endpoints: tuple[str, ...], broker_name: str
) -> promotion.InSyncReport | None:
    """The freshest current in-sync report of the group's master any name server keeps
    (``report_of``); ``None`` when none answers with one."""
    return report_of(await _cluster_infos(calls, namesrv_endpoints), broker_name)


async def last_in_sync_report(
    namesrv_endpoints: tuple[str, ...],
    broker_name: str,
    *,
    timeout_s: float = 3.0,
    tls: grpc_tls.ClientTls | None = None,
) -> promotion.InSyncReport | None:
    """The freshest in-sync report of the group's master the name servers keep (``None``:
    none), as a failover reads it (``in_sync_report``)."""
    channels = channel_pool.ChannelPool(
        channels_max=len(namesrv_endpoints) + 1, credentials=_tls(tls)
    )
    try:
        calls = _Calls(channels, timeout_s)
        return await in_sync_report(calls, tuple(namesrv_endpoints), broker_name)
    finally:
        await channels.close()


async def master_lease_remaining_ms(
    calls: _Calls, namesrv_endpoints: tuple[str, ...], broker_name: str
) -> tuple[int, str]:
    """How long the group's master (id 0) may still hold its write lease, by the name servers.

    Returns:
        (ms left, the master's endpoint): see ``MasterLease.remaining_ms``.

    Raises:
        ServiceUnavailableError: fewer than a majority of the name servers answered.
    """
    found = await _master_lease(calls, namesrv_endpoints, broker_name)
    return found.remaining_ms, found.endpoint


async def master_lease(
    namesrv_endpoints: tuple[str, ...],
    broker_name: str,
    *,
    timeout_s: float = 3.0,
    tls: grpc_tls.ClientTls | None = None,
    credentials: client_credentials.Credentials | None = None,
) -> MasterLease:
    """The group's master and its lease as the name servers see it (the operator's check that
    a master it cannot reach is really down).

    Raises:
        ServiceUnavailableError: fewer than a majority of the name servers answered.
    """
    channels = channel_pool.ChannelPool(
        channels_max=len(namesrv_endpoints) + 1, credentials=_tls(tls)
    )
    try:
        calls = _Calls(channels, timeout_s, credentials)
        return await _master_lease(calls, tuple(namesrv_endpoints), broker_name)
    finally:
        await channels.close()


async def wait_for_master_lease(
    calls: _Calls, namesrv_endpoints: tuple[str, ...], broker_name: str, *, wait_s: float
) -> float:
    """Wait until no name server heard the group's master within its lease (+ margin).

    Returns:
        how long it slept waiting, s (0.0: the lease had already run out at the first look).

    Raises:
        PreconditionFailedError: the lease would outlast ``wait_s`` (the message says how long).
        ServiceUnavailableError: fewer than a majority of the name servers answered.
    """
    start, slept_s = time.monotonic(), 0.0
    while True:
        remaining_ms, master = await master_lease_remaining_ms(
            calls, namesrv_endpoints, broker_name
        )
        waited_s = time.monotonic() - start
        if remaining_ms <= 0:
            return slept_s
        if waited_s + remaining_ms / 1000 > wait_s:
            raise errors.PreconditionFailedError(
                f"the master {master} of {broker_name} was heard by a name server within its "
                f"lease: it may acknowledge writes for {remaining_ms / 1000:.1f} s more; not "
                f"promoted (promote again then, or allow a longer lease wait)"
            )
        await asyncio.sleep(remaining_ms / 1000)
        slept_s += remaining_ms / 1000


def decide(
    members: list[MemberState],
    broker_id: int,
    *,
    report: promotion.InSyncReport | None = None,
    force: bool = False,
) -> tuple[MemberState | None, int]:
    """Who is the master now (``None``: none answers) and the new epoch (above every epoch a
    member reports or registered with), after checking with ``promotion.choose`` that
    ``broker_id`` is the slave to promote.

    Args:
        members: the group's members (``group_members``).
        broker_id: the slave to promote.
        report: the master's last current in-sync report (``in_sync_report``); with no master
            answering, only a slave it lists in sync and that holds what it acknowledged, or
            one it does not list that holds the master's whole reported CommitLog at its
            epoch, counts (``promotion.in_sync_by_report``; never one below what the master
            reported acknowledged).
        force: with no master answering, count every live slave in sync (an unclean election
            by hand, ``--force``: it may lose acknowledged messages).

    Raises:
        PreconditionFailedError: ``broker_id`` is not a live in-sync slave, or another slave is
            more caught up (the decision names it).
    """
    master = next((m for m in members if m.role in _MASTER_ROLES), None)
    master_end = master.stats.commit_log_max_offset if master and master.stats else None
    group_epoch = max((m.registered_epoch for m in members), default=0)
    facts, why_not = [], ""
    for member in members:
        if member is master or member.stats is None:
            facts.append(_fact(member, in_sync=member is master))
            continue
        offset = member.stats.commit_log_max_offset
        if master_end is not None:
            in_sync = master_end - offset <= IN_SYNC_GAP_BYTES
        elif force:
            in_sync = True
        else:
            link = member.ha_link_address
            in_sync, why = promotion.in_sync_by_report(
                report,
                epoch=group_epoch,
                broker_id=member.broker_id,
                link_address=link,
                max_offset=offset,
                slave_epoch=member.stats.epoch,
            )
            why_not = why if member.broker_id == broker_id else why_not
        facts.append(_fact(member, in_sync=in_sync))
    master_id = master.broker_id if master is not None else -1
    decision = promotion.choose(facts, master_id=master_id, force=master is not None)
    if decision.broker_id != broker_id:
        raise errors.PreconditionFailedError(
            f"will not promote broker {broker_id}: {decision.reason}"
            + (f"; broker {broker_id}: {why_not}" if why_not else "")
            + " (members: "
            + ", ".join(f"{m.broker_id}={m.role or 'down'}" for m in members)
            + ")"
            + (
                "; --force promotes anyway, at the risk of losing acknowledged messages"
                if why_not
                else ""
            )
        )
    # Above every epoch registered too: a slave reports the epoch of its last CommitLog byte,
    # and an unreachable master may hold a newer epoch that wrote nothing it received yet.
    registered = max((m.registered_epoch for m in members), default=0)
    return master, max(decision.new_epoch, registered + 1)


def _fact(member: MemberState, *, in_sync: bool) -> promotion.Member:
    stats = member.stats
    return promotion.Member(
        broker_id=member.broker_id,
        epoch=stats.epoch if stats else 0,
        max_offset=stats.commit_log_max_offset if stats else 0,
        alive=stats is not None,
        in_sync=in_sync,
    )


async def _catch_up(calls: _Calls, slave: MemberState, master: MemberState) -> None:
    deadline = time.monotonic() + CATCH_UP_TIMEOUT_S
    while True:
        master_stats = await calls.stats(master.endpoint)
        slave_stats = await calls.stats(slave.endpoint)
        if master_stats is None or slave_stats is None:
            return  # one went away: promote what the slave has (the decision allowed it)
        if slave_stats.commit_log_max_offset >= master_stats.commit_log_max_offset:
            return
        if time.monotonic() > deadline:
            behind = master_stats.commit_log_max_offset - slave_stats.commit_log_max_offset
            raise errors.PreconditionFailedError(
                f"broker {slave.broker_id} is {behind} bytes behind after "
                f"{CATCH_UP_TIMEOUT_S:.0f} s; not promoted"
            )
        await asyncio.sleep(CATCH_UP_POLL_S)


@dataclasses.dataclass(frozen=True, slots=True)
class BrokerState:
    """What one broker answered to ``GetBrokerRuntimeStats`` (the operator's view of a pod)."""

    endpoint: str
    broker_id: int
    role: str
    """``SYNC_MASTER``, ``ASYNC_MASTER`` or ``SLAVE``."""
    epoch: int
    commit_log_max_offset: int
    ha_lag_bytes: int
    writable: bool


def _tls(tls: grpc_tls.ClientTls | None) -> grpc.ChannelCredentials | None:
    return None if tls is None else tls.credentials()


async def broker_states(
    endpoints: list[str],
    *,
    timeout_s: float = 3.0,
    tls: grpc_tls.ClientTls | None = None,
    credentials: client_credentials.Credentials | None = None,
) -> list[BrokerState | None]:
    """Ask each broker at ``endpoints`` for its role, epoch and offsets, at once (over TLS
    with ``tls``, each call signed with ``credentials`` when given).

    Returns:
        One entry per endpoint, in order; ``None`` for a broker that did not answer within
        ``timeout_s`` (down, as ``promote`` counts it).

    Raises:
        UnauthorizedError, ForbiddenError: a broker refused the call (ACL 2.0 on).
    """
    channels = channel_pool.ChannelPool(channels_max=len(endpoints) + 1, credentials=_tls(tls))
    try:
        calls = _Calls(channels, timeout_s, credentials)
        found = await asyncio.gather(*(calls.stats(e) for e in endpoints))
    finally:
        await channels.close()
    states: list[BrokerState | None] = []
    for endpoint, stats in zip(endpoints, found, strict=True):
        member = MemberState(-1, endpoint, "", stats)
        states.append(
            None
            if stats is None
            else BrokerState(
                endpoint,
                int(stats.broker_id),
                member.role,
                int(stats.epoch),
                int(stats.commit_log_max_offset),
                int(stats.ha_lag_bytes),
                bool(stats.writable),
            )
        )
    return states


async def _demote(calls: _Calls, master: MemberState, slave: MemberState, epoch: int) -> bool:
    """``ChangeRole`` the old master to SLAVE of ``slave`` under ``epoch``, taking the promoted
    broker's id; False when it cannot be told (it meets the newer epoch when it connects)."""
    if not slave.ha_address:
        return False
    try:
        await calls.change_role(
            master.endpoint,
            "SLAVE",
            epoch=epoch,
            broker_id=slave.broker_id,
            master_ha=slave.ha_address,
        )
    except (grpc.aio.AioRpcError, errors.ArianeError):
        return False
    return True


async def _look(
    calls: _Calls, namesrv_endpoints: tuple[str, ...], broker_name: str
) -> tuple[list[MemberState], promotion.InSyncReport | None]:
    """The group's members and its master's last in-sync report."""
    members = await group_members(calls, namesrv_endpoints, broker_name)
    return members, await in_sync_report(calls, namesrv_endpoints, broker_name)


async def promote(
    namesrv_endpoints: tuple[str, ...],
    broker_name: str,
    broker_id: int,
    *,
    role: str = "",
    timeout_s: float = 3.0,
    lease_wait_s: float = LEASE_WAIT_S_DEFAULT,
    tls: grpc_tls.ClientTls | None = None,
    credentials: client_credentials.Credentials | None = None,
    force: bool = False,
) -> Outcome:
    """Promote slave ``broker_id`` of ``broker_name`` (see the module for the steps).

    Args:
        namesrv_endpoints: the name servers.
        broker_name: the broker group.
        broker_id: the slave to promote (its registered id, above 0).
        role: ``SYNC_MASTER``/``ASYNC_MASTER``; empty = the old master's, else SYNC_MASTER.
        timeout_s: deadline of each call, s (a member slower than this counts as down).
        lease_wait_s: failover: longest wait for the old master's lease to run out, s (0 =
            refuse at once while it may be held).
        tls: TLS to the name servers and brokers (``None``: plaintext).
        credentials: what every call is signed with (a Super user's keys when the brokers
            enforce ACL 2.0, as ``mqadmin -ak/-sk`` does); ``None``: unsigned.
        force: failover: promote a live slave even though the master's last in-sync report
            does not show it holding what the master acknowledged, or there is none (an
            unclean election by hand; the operator never forces).

    Raises:
        PreconditionFailedError, NotFoundError, ServiceUnavailableError: see the module.
        UnauthorizedError, ForbiddenError: a broker refused the calls (ACL 2.0 on, unsigned
            or not a Super user); nothing was changed when the stats were refused.
    """
    channels = channel_pool.ChannelPool(
        channels_max=len(namesrv_endpoints) + 16, credentials=_tls(tls)
    )
    try:
        calls = _Calls(channels, timeout_s, credentials)
        members, report = await _look(calls, namesrv_endpoints, broker_name)
        master, epoch = decide(members, broker_id, report=report, force=force)
        if master is None:
            slept_s = await wait_for_master_lease(
                calls, namesrv_endpoints, broker_name, wait_s=lease_wait_s
            )
            if slept_s > 0:  # the master may have resumed meanwhile: look again
                members, report = await _look(calls, namesrv_endpoints, broker_name)
                master, epoch = decide(members, broker_id, report=report, force=force)
        slave = next(m for m in members if m.broker_id == broker_id)
        if master is not None:
            await _catch_up(calls, slave, master)
        new_role = role or (master.role if master is not None else "SYNC_MASTER")
        answer = await calls.change_role(slave.endpoint, new_role, epoch=epoch, broker_id=0)
        demoted = master is not None and await _demote(calls, master, slave, epoch)
        return Outcome(
            broker_name,
            broker_id,
            slave.endpoint,
            new_role,
            int(answer.epoch),
            int(answer.commit_log_max_offset),
            master.endpoint if master is not None else "",
            demoted,
            "switchover" if master is not None else "failover (no master answered)",
        )
    finally:
        await channels.close()
