"""The operator's admin-API I/O for HA: each pod's broker state, promotion, drain (``GroupAdmin``).

``reconcile`` runs in kopf's thread pool, so each call here is one ``asyncio.run`` of an
``ariane.client`` coroutine with a bounded deadline (``ADMIN_TIMEOUT_S``); the decisions are in
``failover`` (pure). ``GroupAdmin`` is the seam: ``reconcile`` takes any object with its methods,
so the e2e tests and a future fake can stand in.

The **pod address seam**: a broker pod is dialled at ``<pod>.<group>.<ns>.svc:8081`` (the
endpoint it advertises), unless ``settings.POD_OVERRIDES_ENV`` (JSON ``{"<ns>/<pod>" | "<pod>":
"host:port"}``) names another, as tests do to reach a loopback ``ariane broker`` standing in
for a pod (the cluster's pod IPs are never dialled).

Invariants: a broker that does not answer has no role here (never an error); whether that makes
a master down is ``failover``'s decision, with what ``master_lease`` says (the name servers'
view of its lease); write permission is only ever changed on the broker groups named (never
cluster-wide).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from typing import Final, Protocol

from ariane.client import admin
from ariane.client import credentials as client_credentials
from ariane.client import failover as client_failover
from ariane.common import errors
from ariane.grpcwire import tls as grpc_tls
from ariane.operator import failover, model, resources, roller

_log = logging.getLogger(__name__)

ADMIN_TIMEOUT_S: Final = 3.0
"""Deadline of each broker call, in seconds (a broker slower than this does not answer)."""

PROMOTE_LEASE_WAIT_S: Final = 3.0
"""Longest a failover's promote call waits for the old master's lease, s: ``failover_step``
asks only once the name servers no longer hold it, so a wait means the master renewed since
(the promotion is refused and decided again at the next reconcile, never a blocked worker)."""


def pod_endpoint(namespace: str, group: str, pod: str, overrides: Mapping[str, str]) -> str:
    """``host:port`` of the broker in ``pod`` (override, else the pod's DNS name)."""
    for key in (f"{namespace}/{pod}", pod):
        if key in overrides:
            return overrides[key]
    return f"{pod}.{group}.{namespace}.svc:{model.BROKER_PORT}"


class GroupAdmin(Protocol):
    """What ``reconcile`` needs from the brokers of one Broker CR."""

    def members(
        self, namespace: str, group: str, pods: Sequence[resources.Manifest], replicas: int
    ) -> list[failover.MemberView]:
        """Every ordinal ``0..replicas-1`` of ``group`` with what its broker answered."""

    def master_lease(self, group: str) -> failover.LeaseView:
        """The name servers' view of ``group``'s master and its lease (``answered`` False when
        they do not answer)."""

    def promote(self, group: str, broker_id: int) -> tuple[str, int]:
        """Promote the slave registered as ``broker_id``; returns what was done and the epoch."""

    def set_write_perm(self, groups: Sequence[str], *, writable: bool) -> None:
        """Wipe or restore the write permission of ``groups``."""

    def unconsumed(self, groups: Sequence[str]) -> dict[str, int]:
        """Consumer group → messages it has not consumed on ``groups``."""


class AdminSeam:
    """``GroupAdmin`` over ``ariane.client`` (the name server of one Broker, pods by address).

    Args:
        namesrv: ``host:port`` of the Broker's name server (``metadata.namesrv_endpoint``).
        pod_overrides: ``OperatorSettings.pod_overrides``.
        credentials: the operator's Super user of this Broker (``spec.auth.enabled``, the
            ``<broker>-operator-auth`` Secret): every call (stats, ChangeRole, write permission,
            lag) is signed with it; ``None``: unsigned.
        tls: the TLS of every call (``certs.client_tls``: the Broker's trust bundle and the
            operator's client certificate); ``None``: plaintext.
    """

    def __init__(
        self,
        namesrv: str,
        pod_overrides: Mapping[str, str],
        credentials: client_credentials.Credentials | None = None,
        tls: grpc_tls.ClientTls | None = None,
    ) -> None:
        self._namesrv = namesrv
        self._overrides = dict(pod_overrides)
        self._credentials = credentials
        self._tls = tls
        """TLS of the admin calls (the Broker's, ``certs.client_tls``), or ``None``."""

    def members(
        self, namespace: str, group: str, pods: Sequence[resources.Manifest], replicas: int
    ) -> list[failover.MemberView]:
        """See ``GroupAdmin``; a missing pod or a silent broker is a member with no role (so is
        every broker when they refuse the operator's calls: logged, never a failover)."""
        by_ordinal = {roller.ordinal(p): p for p in pods}
        names = [f"{group}-{o}" for o in range(replicas)]
        endpoints = [pod_endpoint(namespace, group, n, self._overrides) for n in names]
        try:
            states = asyncio.run(
                client_failover.broker_states(
                    endpoints,
                    timeout_s=ADMIN_TIMEOUT_S,
                    tls=self._tls,
                    credentials=self._credentials,
                )
            )
        except (errors.UnauthorizedError, errors.ForbiddenError) as error:
            _log.warning("%s: no HA decision: %s", group, error)  # never a failover on this
            states = [None] * len(endpoints)
        views = []
        for ordinal, state in enumerate(states):
            pod = by_ordinal.get(ordinal)
            views.append(
                failover.MemberView(
                    ordinal=ordinal,
                    broker_id=state.broker_id if state else -1,
                    role=state.role if state else "",
                    epoch=state.epoch if state else 0,
                    max_offset=state.commit_log_max_offset if state else 0,
                    pod_ready=pod is not None and roller.ready(pod),
                )
            )
        return views

    def master_lease(self, group: str) -> failover.LeaseView:
        """See ``GroupAdmin`` (the Broker's name server; a failed call: not answered)."""
        try:
            found = asyncio.run(
                client_failover.master_lease(
                    (self._namesrv,),
                    group,
                    timeout_s=ADMIN_TIMEOUT_S,
                    tls=self._tls,
                    credentials=self._credentials,
                )
            )
        except errors.ArianeError as error:
            _log.warning("%s: the name servers' view of the master lease: %s", group, error)
            return failover.LeaseView(answered=False)
        return failover.LeaseView(
            answered=True,
            held_ms=found.remaining_ms,
            heard_ago_ms=found.heard_ago_ms,
            lease_ms=found.lease_ms,
        )

    def promote(self, group: str, broker_id: int) -> tuple[str, int]:
        """See ``GroupAdmin``.

        Raises:
            ariane.common.errors.ArianeError: the promotion was refused or not possible.
        """
        outcome = asyncio.run(
            client_failover.promote(
                (self._namesrv,),
                group,
                broker_id,
                timeout_s=ADMIN_TIMEOUT_S,
                lease_wait_s=PROMOTE_LEASE_WAIT_S,
                tls=self._tls,
                credentials=self._credentials,
            )
        )
        text = (
            f"{outcome.reason}: broker {broker_id} of {group} is {outcome.role} at epoch "
            f"{outcome.epoch}" + (", old master demoted" if outcome.old_master_demoted else "")
        )
        return text, outcome.epoch

    def _client(self) -> admin.AdminClient:
        return admin.AdminClient(
            self._namesrv,
            timeout_s=ADMIN_TIMEOUT_S,
            tls=self._tls,
            credentials=self._credentials,
        )

    def set_write_perm(self, groups: Sequence[str], *, writable: bool) -> None:
        """See ``GroupAdmin``.

        Raises:
            ariane.common.errors.ArianeError: a master refused or did not answer.
        """

        async def call() -> None:
            async with self._client() as client:
                await client.set_write_perm(groups, writable=writable)

        asyncio.run(call())

    def unconsumed(self, groups: Sequence[str]) -> dict[str, int]:
        """See ``GroupAdmin`` (every consumer group any master knows, lag on ``groups``).

        Raises:
            ariane.common.errors.ArianeError: a master or the name server did not answer.
        """

        async def call() -> dict[str, int]:
            async with self._client() as client:
                names = sorted({g.name for g in await client.list_groups()})
                lag: dict[str, int] = {}
                for name in names:
                    try:
                        queues = await client.consumer_lag(name)
                    except errors.ConsumerGroupNotFoundError:
                        continue
                    lag[name] = sum(q.lag for q in queues if q.broker_name in groups)
                return lag

        return asyncio.run(call())
