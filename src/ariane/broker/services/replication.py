"""``ReplicationService``: a broker's role in its group, and the HA loops that serve it.

It owns the store's epoch history (``<store>/ha/epochs``), the master side
(``store.ha.service.HAService``, always listening once a role is configured, so a promoted slave
serves at once) and the slave side (``store.ha.client.HAClient``, running while the role is
SLAVE), and installs the ack rule on the store (``MessageStore.replication``). A master starts
epoch 1 the first time it runs. ``promote``/``demote`` are the role changes of the
``ChangeRole`` admin RPC (RocketMQ ``changeToMaster``/``changeToSlave``): a promotion takes a
newer epoch starting at the current CommitLog end (after cutting a record the HA stream left
partial, ``cut_partial_record``: an epoch starts at a record boundary); a demotion follows the
new master, which cuts
a diverged tail through the HA handshake (TRUNCATE), after which the schedule derives its
progress again from the CommitLog (``ScheduleService.replica_truncated``). The schedule needs
nothing else from a role change: it delivers only while the store accepts writes and follows
the replicated progress records otherwise (``broker.schedule.progress``).

What a master owns besides the CommitLog follows the role through ``RoleFollower``s: a promotion
calls each one's ``become_master`` once the replicated records are dispatched (the transaction
service rebuilds its unresolved half messages from them, the POP service its deliveries in
flight and done offsets from the replicated POP journal, ``broker.pop.replica``), a demotion
calls ``become_slave`` once the store is fenced.

Fencing (DESIGN.md §7): a master started with a role and at least one name server keeps a
``store.ha.lease.MasterLease`` (``[ha] lease_ms``) that the registration service renews; a
master learning of a newer epoch of its group (``newer_epoch_seen``, from a name server's
refusal, or a slave's HELLO/REPORT on the HA port) fences itself. Refused by a name server that
names the group's current master and a slave id, it also rejoins the group by itself
(``[ha] rejoin_as_slave``, on by default): ``demote`` to a slave of that master, so a master
restarted with its start-up role after a failover (a pod restarted before the operator's roles
ConfigMap moved, ``ariane dev``, a hand restart) turns into the new master's in-sync slave
instead of leaving a SYNC_MASTER without one. It never does so while its lease is held, never
for an epoch that is not newer than its own, and never promotes itself (RocketMQ 5's
``ReplicasManager`` asks its controller and calls ``changeToSlave`` the same way; here the name
servers' refusal carries the facts). Otherwise it stays fenced until a ``ChangeRole`` demotes it
(or promotes it under a newer epoch still). Slaves renew the lease
too (harmless: a slave refuses writes anyway), so a promoted slave that a majority of name
servers heard within ``lease_ms`` acknowledges at once, and one cut off from them does not.

With ``[auth] inner_client_authentication_credentials`` set, both HA ends prove that credential
(``store.ha.frames`` handshake): the HA port serves only slaves that hold it. With ``[tls]`` the
HA port serves by the process's mode and a slave whose mode is ``enforcing`` dials its master
over TLS (``common.tls.peer_client_context``); the credential handshake runs inside TLS.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Sequence
from typing import Protocol

from ariane.broker import runtime as runtime_mod
from ariane.broker.services import orphan_topics
from ariane.common import ids, tls
from ariane.store import message_store, record_scan
from ariane.store.ha import client as ha_client
from ariane.store.ha import epochs, frames
from ariane.store.ha import lease as lease_mod
from ariane.store.ha import service as ha_service
from ariane.store.ha import settings as ha_settings

_log = logging.getLogger(__name__)

HA_DIR_NAME = "ha"


WILDCARD_HOSTS = frozenset({"0.0.0.0", "::", "[::]", ""})
"""Listen hosts that bind every interface: no peer can dial them."""


def advertised_ha_address(ha_listen: str, client_endpoint: str, port: int) -> str:
    """``HOST:PORT`` slaves dial for the HA port (RocketMQ ``brokerIP2:haListenPort``).

    The listen host, unless it binds every interface (a pod's ``0.0.0.0``): then the host of
    the advertised client endpoint (``brokerIP2`` defaults to ``brokerIP1``), e.g. the pod's DNS
    name.
    """
    host, _ = ha_settings.split_address(ha_listen)
    if host in WILDCARD_HOSTS:
        host, _ = ha_settings.split_address(client_endpoint)
    return f"{host}:{port}"


def cut_partial_record(store: message_store.MessageStore) -> ids.CommitLogOffset | None:
    """A slave becoming master: after every whole record is dispatched
    (``adopt_replicated_queue_offsets``), cut the CommitLog where its last whole record ends
    when the HA stream, which stops at any byte, left part of a record after it (RocketMQ
    ``AutoSwitchHAService.changeToMaster`` → ``truncateInvalidMsg``). Kept, the partial record
    would sit under the records this broker then writes as master, and the next recovery,
    reading it as corrupt, would cut them with it: acknowledged messages lost.

    What is there is decided by the store's one rule (``store.record_scan.look``, as recovery
    and the reput decide it): only a torn tail is cut (a record not whole, or whole damaged
    records nothing sound follows, as recovery cuts them), never a whole damaged record with
    sound records after it (the master's own damaged copy, streamed verbatim): the reput
    dispatches past such a record, its unit placed or its possible queue offsets reserved
    (Ariane's addition: RocketMQ cuts where its dispatch stopped).

    Returns:
        the offset cut at, ``None`` when the CommitLog ended at a record boundary (or, logged
        as an error, the dispatch stopped before a record that is not a torn tail).

    Raises:
        OSError: zeroing or deleting the tail failed.
    """
    end = store.dispatcher.dispatched_offset
    if end >= store.max_commit_log_offset:
        return None
    found = record_scan.look(store.commit_log.reader, end)
    if found.kind not in _TAIL_KINDS:
        _log.error(
            "promotion: records from %d are kept undispatched (%s there)", end, found.kind.value
        )
        return None
    _log.warning(
        "promotion: %d bytes of a partial record from the old master cut at %d (%s)",
        store.max_commit_log_offset - end,
        end,
        found.reason or "no record",
    )
    store.truncate_replica(end)
    return end


_TAIL_KINDS = frozenset({record_scan.Kind.TORN, record_scan.Kind.UNVOUCHED, record_scan.Kind.END})
"""What a promotion cuts at the dispatch's end (END: zeros inside the written data)."""


class RoleFollower(Protocol):
    """State a master owns that changes hands with the role (the transaction service, the
    POP service)."""

    def become_master(self) -> object:
        """Take ownership: rebuild from the replicated CommitLog."""

    def become_slave(self) -> None:
        """Give ownership up: the master now decides."""


class RoleChangeError(ValueError):
    """A role change that would go back in epochs."""


@dataclasses.dataclass(frozen=True, slots=True)
class NewerEpoch:
    """What a name server's refusal of this master for a stale epoch said."""

    group_epoch: int
    """The highest epoch the name server knows in the group."""
    master: str = ""
    """``host:port`` of the group's current master ("" when it named none)."""
    master_ha: str = ""
    """``HOST:PORT`` of that master's HA port ("" when it named none)."""
    rejoin_broker_id: int = 0
    """The slave id to rejoin as (0: not named, an older name server)."""


def rejoin_refusal(seen: NewerEpoch, *, enabled: bool, lease_held: bool) -> str | None:
    """Why a master refused for ``seen`` must not demote itself to a slave now, or ``None``
    when it may (pure; the caller checked that ``seen.group_epoch`` is newer than its own).

    Args:
        seen: the refusal's facts.
        enabled: ``[ha] rejoin_as_slave``.
        lease_held: this master still holds its lease (a majority of its name servers heard
            it at its epoch within ``lease_ms``): it only fences itself now, which revokes the
            lease, and rejoins at a later refusal unless a majority renewed the lease again.
    """
    if not enabled:
        return "[ha] rejoin_as_slave is off"
    if lease_held:
        return "its lease is still held"
    if not seen.master_ha:
        return "the name server named no master HA address"
    if seen.rejoin_broker_id <= 0:
        return "the name server named no broker id to rejoin as (an older name server)"
    return None


class ReplicationService:
    """Role, epoch and HA loops of one broker.

    Args:
        runtime: the broker's state (store, registration identity).
        followers: told of each promotion and demotion, in order.
        server_tls: the process's TLS (``BrokerServer.server_tls``): the HA port serves by its
            mode, and the slave side dials TLS when ``[tls] server_mode`` is ``enforcing``;
            ``None``: plaintext both ways.

    Raises:
        ValueError: the epoch file does not parse.
        OSError: the epoch file cannot be read or written.
    """

    def __init__(
        self,
        runtime: runtime_mod.BrokerRuntime,
        *,
        followers: Sequence[RoleFollower] = (),
        server_tls: tls.ServerTls | None = None,
    ) -> None:
        self._runtime = runtime
        self._followers = tuple(followers)
        config = runtime.settings.ha
        store = runtime.store
        self.history = epochs.EpochHistory(runtime.settings.store_dir / HA_DIR_NAME)
        if config.role.is_master and not self.history.entries:
            self.history.append(1, store.min_commit_log_offset)
        inner = runtime.settings.auth.inner_client_authentication_credentials
        credential = (
            None if inner is None else frames.Credential(inner.access_key, inner.secret_key)
        )
        self.master = ha_service.HAService(
            store, self.history, config, credential, server_tls=server_tls
        )
        tls_settings = runtime.settings.tls
        self.client = ha_client.HAClient(
            store,
            self.history,
            config,
            lambda: runtime.master_ha_address,
            on_truncate=lambda offset: self._truncated(offset),
            credential=credential,
            tls_context=lambda: tls.peer_client_context(tls_settings),
            broker_id=lambda: runtime.broker_id,
        )
        if config.keeps_lease and runtime.settings.namesrv_addrs:
            self.master.lease = lease_mod.MasterLease(lease_ms=config.lease_ms)
        store.replication = self.master
        store.repairs.fetcher = self.master.fetch_record  # a master's damaged record: a slave's
        runtime.master_online = lambda: self.client.connected
        self._client_task: asyncio.Task[None] | None = None

    @property
    def role(self) -> ha_settings.BrokerRole:
        """The current role."""
        return self.master.role

    @property
    def epoch(self) -> int:
        """The newest epoch this broker holds."""
        return self.history.last_epoch

    @property
    def in_sync_replicas(self) -> int:
        """A master: itself plus its connected in-sync slaves (what a SYNC_MASTER compares
        with ``min_in_sync_replicas`` before each append); a slave: 0."""
        return self.master.in_sync_replicas() if self.role.is_master else 0

    @property
    def lease(self) -> lease_mod.MasterLease | None:
        """The master's write lease, or ``None`` when it keeps none."""
        return self.master.lease

    async def newer_epoch_seen(self, seen: NewerEpoch) -> None:
        """A name server refused this master for the newer epoch ``seen.group_epoch``: an
        older master fences itself (writes answer SERVICE_NOT_AVAILABLE from now on) and, when
        ``rejoin_refusal`` finds nothing against it, demotes itself to a slave of the group's
        current master (``demote``, which cuts its diverged tail on connect). A slave, or a
        master at that epoch or newer, changes nothing."""
        if seen.group_epoch <= self.epoch or not self.role.is_master:
            return
        why = (
            f"the name servers know epoch {seen.group_epoch} of this group (master "
            f"{seen.master or 'unknown'}, HA {seen.master_ha or 'unknown'}); this master is at "
            f"epoch {self.epoch}"
        )
        lease = self.lease
        refusal = rejoin_refusal(
            seen,
            enabled=self._runtime.settings.ha.rejoin_as_slave,
            lease_held=lease is not None and lease.held(),
        )
        if refusal is not None:
            if not self.master.fenced and self._runtime.settings.ha.rejoin_as_slave:
                _log.warning("not rejoining as a slave: %s", refusal)
            self.master.fence(why)
            return
        await self.demote(
            epoch=seen.group_epoch,
            broker_id=seen.rejoin_broker_id,
            master_ha=seen.master_ha,
            why=f"rejoined as a slave: {why}",
        )

    async def run(self) -> None:
        """Serve the HA port (and replicate while a slave) until cancelled."""
        runtime = self._runtime
        serving = asyncio.create_task(self.master.run(), name="ha-service")
        try:
            await self.master.listening.wait()
            port = self.master.port
            assert port is not None, "the HA service set listening without a port"
            runtime.ha_address = runtime.settings.ha.ha_advertise or advertised_ha_address(
                runtime.settings.ha.ha_listen, runtime.client_endpoint, port
            )
            runtime.route_changed.set()
            if not self.role.is_master:
                self._start_client()
            await serving
        finally:
            serving.cancel()
            await self._stop_client()

    def _start_client(self) -> None:
        if self._client_task is None:
            self._client_task = asyncio.create_task(self.client.run(), name="ha-client")

    async def _stop_client(self) -> None:
        """Cancel the HA client's task and wait for it; a task that had already ended with an
        error is logged, never raised: a promotion or a stop must not fail on it."""
        task, self._client_task = self._client_task, None
        if task is not None:
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass
            except Exception:  # the old stream's failure is no reason to refuse the new role
                _log.exception("the HA client had ended with an error")

    def _truncated(self, commit_log_offset: int) -> None:
        """The HA handshake cut this slave's diverged tail at ``commit_log_offset``."""
        self._runtime.schedule.replica_truncated(commit_log_offset)
        self._runtime.clamp_offsets("diverged tail cut")

    async def promote(self, *, role: ha_settings.BrokerRole, epoch: int) -> None:
        """Become the group's master under ``epoch`` (registers as broker id 0).

        Raises:
            RoleChangeError: ``epoch`` is not newer than the current one, or ``role`` is SLAVE.
        """
        if not role.is_master or epoch <= self.epoch:
            raise RoleChangeError(f"cannot become {role.value} at epoch {epoch} (now {self.epoch})")
        await self._stop_client()
        store = self._runtime.store
        store.adopt_replicated_queue_offsets()
        cut = cut_partial_record(store)
        if cut is not None:
            self.history.truncate(cut)  # RocketMQ truncateSuffixByOffset
        self._runtime.clamp_offsets("promotion")  # the copied offsets may lead what it holds
        orphan_topics.adopt(self._runtime)  # before it registers: no message without a route
        self.history.append(epoch, store.max_commit_log_offset)
        for follower in self._followers:
            follower.become_master()
        self.master.role, self.master.fenced = role, False
        self._runtime.broker_id = ids.MASTER_BROKER_ID
        self._runtime.route_changed.set()
        _log.warning(
            "promoted to %s at epoch %d, offset %d", role.value, epoch, store.max_commit_log_offset
        )

    async def demote(self, *, epoch: int, broker_id: int, master_ha: str, why: str = "") -> None:
        """Become a slave of ``master_ha`` registering as ``broker_id`` (``why``: said in the
        one WARNING line, else the demotion is a ``ChangeRole``'s).

        Raises:
            RoleChangeError: ``epoch`` is older than the current one or ``broker_id`` is 0.
        """
        if epoch < self.epoch or broker_id <= 0:
            raise RoleChangeError(f"cannot become slave {broker_id} at epoch {epoch}")
        self.master.fence(why or f"demoted at epoch {epoch}", log=not why)  # revokes the lease
        self.master.role = ha_settings.BrokerRole.SLAVE
        for follower in self._followers:
            follower.become_slave()
        if master_ha:
            self._runtime.master_ha_address = master_ha
        self._runtime.broker_id = ids.BrokerId(broker_id)
        self._runtime.route_changed.set()
        self._start_client()
        _log.warning(
            "demoted to slave %d of %s at epoch %d%s",
            broker_id,
            master_ha or "the master the name servers name",
            epoch,
            f" ({why})" if why else "",
        )
