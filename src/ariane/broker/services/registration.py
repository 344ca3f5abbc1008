"""Registration with every name server (RocketMQ ``BrokerController.registerBrokerAll``).

Every ``register_interval_ms`` (30 s) and at once when ``runtime.route_changed`` is set (topic
created/updated/deleted, write permission changed), the broker sends ``RegisterBroker`` with its
full topic config to each name server, independently: one unreachable name server never delays
the others.

A name server that restarted has forgotten the broker, and new clients get no route from it
until the broker registers again; 30 s is too long to wait. So between registrations the broker
sends the lightweight ``BrokerHeartbeat`` every ``HEARTBEAT_INTERVAL_S`` (RocketMQ 5's
``brokerHeartbeatInterval``, 1 s): a name server that answers NOT_FOUND (it restarted) or asks
for the registration (another data version), or cannot be reached, triggers a registration at
once. A failed registration is retried after ``RETRY_BACKOFF_S_FIRST``, doubling up to
``RETRY_BACKOFF_S_MAX`` (3 s), so a name server that comes back is registered with within about
3 s; once all accept, the 30 s period is the steady state again.

With ``[auth] inner_client_authentication_credentials`` set, every RegisterBroker,
BrokerHeartbeat and UnregisterBroker is signed with that credential (as a v5 client signs:
``security.signing.sign_grpc`` over the current UTC date-time); a name server configured with
the same credential refuses unsigned ones (``namesrv.inner_auth``), RocketMQ's
``innerClientAuthenticationCredentials`` on calls RocketMQ's own name server never checks.

TLS: the channels come from the broker's pool, which dials TLS exactly when the broker's own
``[tls] server_mode`` is ``enforcing`` (``grpcwire.tls.inner_credentials``: verifying the name
server against ``trust_cert_path``, presenting the broker's certificate for mTLS), as RocketMQ's
``NettyClientConfig.useTLS = tls.enable || enforcing``; a ``permissive`` broker dials plaintext.
A target ``namesrv_resolve_all`` resolved from a DNS name is verified against that name
(``named_targets``, ``ChannelPool.get(server_name=)``), not its IP: the operator's name-server
certificate names the headless Service (``*.<svc>.<ns>.svc``), never the pods' addresses.

In-sync reports (issue 25): a master's registrations and heartbeats carry its in-sync set
(``HAService.in_sync_report``), a slave's its HA link address, so that the name servers hold
the master's last word on whom a failover may promote (``common.promotion``). A master
heartbeats at once when a slave connects or comes in sync (``HAService.replicas_changed``), so
a master that dies right after a slave joined has most likely reported it.

On clean shutdown it sends ``UnregisterBroker`` so clients stop being routed to it before the
120 s expiry.

Epochs and the master lease (DESIGN.md §7, ``store.ha.lease``): every registration and heartbeat
carries the broker's epoch (and its ``lease_ms``). A name server refusing a master for a stale
epoch (PRECONDITION_FAILED with a newer ``group_epoch``) makes it fence itself at once and,
the refusal naming the current master's HA address and a slave id, rejoin the group as that
master's slave (``ReplicationService.newer_epoch_seen``; its next registration then goes out
with that id and the slave role). Each round of registrations or heartbeats is a lease
renewal: the round's send time is taken first, and as soon as a majority of the name servers of
the round answered OK the lease is extended to that time + ``lease_ms``. While a lease is kept,
heartbeats go every ``min(1 s, lease_ms / 3)`` with a deadline of ``min(5 s, lease_ms / 3)``,
and failed registrations are retried at least every ``min(1 s, lease_ms / 3)``, so a healthy
master renews several times per lease; a paused master's first renewal after it resumes is
refused if the group moved on. A round waits for every name server of it, so one hung name
server (a registration's deadline is 5 s) spaces renewals up to about 5 s + the retry apart:
within the default 10 s lease, but a lease much shorter than 10 s wants healthy name servers.
"""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import logging
import socket
from collections.abc import Awaitable, Callable, Sequence

import grpc

from ariane.broker import runtime as runtime_mod
from ariane.broker.services import replication as replication_mod
from ariane.common import errors, log_limits
from ariane.grpcwire import channel_pool, codes, convert, pb, registry_client
from ariane.security import signing
from ariane.store.ha import lease as lease_mod

_log = logging.getLogger(__name__)

CALL_TIMEOUT_S = 5.0
"""Deadline of one registration call (RocketMQ allows 24 s; a dead name server should not stall
shutdown that long)."""


HEARTBEAT_INTERVAL_S = 1.0
"""Period of the BrokerHeartbeat probe between registrations, s (``brokerHeartbeatInterval``)."""

RETRY_BACKOFF_S_FIRST = 0.5
"""Wait before retrying a failed registration the first time, s (doubles per failure)."""

RETRY_BACKOFF_S_MAX = 3.0
"""Longest wait between retries of a failed registration, s."""

FAILURE_LOG_INTERVAL_S = 30.0
"""Least time between two "registration failed" warnings for one name server, s (retries come
every <= 3 s during an outage; the warning keeps RocketMQ's 30 s pace)."""


NAMESRV_ADDRESSES_MAX = 64
"""Most name-server addresses one broker registers with (a resolved name beyond it is cut)."""

Resolver = Callable[[str, int], Awaitable[list[str]]]
"""``(host, port)`` → the IP addresses of ``host`` (the DNS seam)."""


async def resolve_host(host: str, port: int) -> list[str]:
    """Every IP address of ``host`` (``getaddrinfo``, TCP), sorted, without duplicates.

    Raises:
        OSError: the name does not resolve.
    """
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return sorted({str(info[4][0]) for info in infos})


async def name_server_targets(
    addrs: Sequence[str], *, resolve_all: bool, resolver: Resolver = resolve_host
) -> list[str]:
    """The ``HOST:PORT`` endpoints to register with: ``addrs`` as given, or (``resolve_all``)
    each host expanded to every address it resolves to (an unresolvable one kept as given),
    at most ``NAMESRV_ADDRESSES_MAX``."""
    return list(await named_targets(addrs, resolve_all=resolve_all, resolver=resolver))


async def named_targets(
    addrs: Sequence[str], *, resolve_all: bool, resolver: Resolver = resolve_host
) -> dict[str, str]:
    """``name_server_targets``, each with the host name it was resolved from (``""`` when
    dialled as given): over TLS the name server's certificate is verified against that name,
    not the pod IP (a certificate names the headless Service, never its pods' addresses)."""
    if not resolve_all:
        return dict.fromkeys(addrs, "")
    targets: dict[str, str] = {}
    for addr in addrs:
        host, _, port_text = addr.rpartition(":")
        try:
            found = await resolver(host.strip("[]"), int(port_text))
        except OSError as exc:
            _log.warning("name server %s does not resolve (%s); dialling it as given", addr, exc)
            found = []
        name = host.strip("[]") if found and host.strip("[]") not in found else ""
        for ip in found or [host]:
            literal = f"[{ip}]" if _is_ipv6(ip) else ip
            targets.setdefault(f"{literal}:{port_text}", name)
    return dict(list(targets.items())[:NAMESRV_ADDRESSES_MAX])


def _is_ipv6(text: str) -> bool:
    try:
        return isinstance(ipaddress.ip_address(text), ipaddress.IPv6Address)
    except ValueError:
        return False


def majority(count: int) -> int:
    """Answers a renewal needs from ``count`` name servers (more than half; 1 of 1 or 2 of 3)."""
    return count // 2 + 1


class _Renewal:
    """One round's lease renewal: extends the lease once ``needed`` name servers answered OK."""

    def __init__(self, lease: lease_mod.MasterLease | None, needed: int) -> None:
        self._lease = lease
        self._sent_ms = lease.now_ms() if lease is not None else 0
        self._needed = needed

    def acknowledged(self) -> None:
        self._needed -= 1
        if self._needed == 0 and self._lease is not None:
            self._lease.extend(self._sent_ms)


def _master_text(
    answer: pb.registry.RegisterBrokerResponse | pb.registry.BrokerHeartbeatResponse,
) -> str:
    """``host:port`` of the master a name server answered, or "" when it named none."""
    if not answer.HasField("master_client_endpoint"):
        return ""
    return convert.address_text(answer.master_client_endpoint)


def retry_backoff_s(failures: int) -> float:
    """Wait before the next registration after ``failures`` (≥ 1) failed rounds in a row, s."""
    assert failures >= 1, "a backoff follows a failure"
    doublings = min(failures - 1, 16)
    return min(RETRY_BACKOFF_S_MAX, RETRY_BACKOFF_S_FIRST * float(1 << doublings))


class RegistrationService:
    """Keeps this broker registered with every name server.

    Args:
        runtime: the broker's state (topics, endpoint, identity).
        channels: the pool of channels to name servers.
        resolver: the DNS seam (``namesrv_resolve_all``).
        replication: the broker's role and epoch (``None`` without replication: epoch 0, no
            lease).
    """

    def __init__(
        self,
        runtime: runtime_mod.BrokerRuntime,
        channels: channel_pool.ChannelPool,
        resolver: Resolver = resolve_host,
        replication: replication_mod.ReplicationService | None = None,
    ) -> None:
        self._runtime = runtime
        self._channels = channels
        self._resolver = resolver
        self._replication = replication
        self.targets: list[str] = list(runtime.settings.namesrv_addrs)
        """The name-server endpoints of the current round (``name_server_targets``)."""
        self._server_names: dict[str, str] = {}
        """Target → the DNS name it was resolved from (TLS verifies that name)."""
        self.registrations_ok = 0
        """Successful RegisterBroker calls since start (for tests and stats)."""
        self._failure_lines = log_limits.LineLimiter(key_interval_s=FAILURE_LOG_INTERVAL_S)

    async def _channel(self, addr: str) -> grpc.aio.Channel:
        """The pooled channel to name server ``addr`` (TLS verifies its resolved-from name)."""
        return await self._channels.get(addr, server_name=self._server_names.get(addr, ""))

    def _registry(
        self, channel: grpc.aio.Channel, timeout_s: float
    ) -> registry_client.RegistryClient:
        """A registry client on ``channel`` that signs with the inner credential, if any."""
        inner = self._runtime.settings.auth.inner_client_authentication_credentials
        if inner is None:
            return registry_client.RegistryClient(channel, timeout_s=timeout_s)

        def sign() -> tuple[tuple[str, str], ...]:
            now = signing.grpc_date_time(datetime.datetime.now(datetime.UTC))
            return signing.sign_grpc(
                access_key=inner.access_key, secret_key=inner.secret_key, date_time=now
            )

        return registry_client.RegistryClient(channel, timeout_s=timeout_s, signer=sign)

    @property
    def _lease(self) -> lease_mod.MasterLease | None:
        return None if self._replication is None else self._replication.lease

    @property
    def _epoch(self) -> int:
        return 0 if self._replication is None else self._replication.epoch

    def _add_in_sync(
        self, request: pb.registry.RegisterBrokerRequest | pb.registry.BrokerHeartbeatRequest
    ) -> None:
        """Add a master's ``in_sync_report`` or a slave's ``ha_link_address`` to ``request``
        (nothing without replication): what a failover checks a slave against
        (``client.failover.decide``)."""
        replication = self._replication
        if replication is None:
            return
        if not replication.role.is_master:
            request.ha_link_address = replication.client.link_address
            return
        report = replication.master.in_sync_report()
        request.in_sync_report.CopyFrom(convert.in_sync_report(report))

    def renew_interval_s(self) -> float:
        """Longest pause between two renewal rounds, s: ``HEARTBEAT_INTERVAL_S``, or a third of
        the lease when that is shorter."""
        lease = self._lease
        if lease is None:
            return HEARTBEAT_INTERVAL_S
        return min(HEARTBEAT_INTERVAL_S, lease.lease_ms / 3000)

    def _renewal(self) -> _Renewal:
        return _Renewal(self._lease, majority(len(self.targets)))

    async def _newer_epoch(
        self, answer: pb.registry.RegisterBrokerResponse | pb.registry.BrokerHeartbeatResponse
    ) -> None:
        """Fence this master (and let it rejoin as a slave) when a name server refused it for a
        newer epoch."""
        refused = codes.code_of(answer.status) == errors.Code.PRECONDITION_FAILED
        if refused and self._replication is not None and answer.group_epoch > self._epoch:
            seen = replication_mod.NewerEpoch(
                group_epoch=answer.group_epoch,
                master=_master_text(answer),
                master_ha=answer.master_ha_address,
                rejoin_broker_id=answer.rejoin_broker_id,
            )
            await self._replication.newer_epoch_seen(seen)

    def _request(self) -> pb.registry.RegisterBrokerRequest:
        runtime = self._runtime
        settings = runtime.settings
        host, port = convert.split_host_port(runtime.client_endpoint)
        lease = self._lease
        request = pb.registry.RegisterBrokerRequest(
            cluster_name=settings.cluster,
            broker_name=settings.broker_name,
            broker_id=runtime.broker_id,
            client_endpoint=convert.address(host, port),
            ha_address=runtime.ha_address,
            remoting_address=runtime.remoting_address,
            epoch=self._epoch,
            lease_ms=0 if lease is None else lease.lease_ms,
            data_version=runtime.topics.data_version.counter,
            topic_configs=[
                pb.topic.TopicConfig(
                    topic=config.name,
                    read_queue_nums=config.read_queue_nums,
                    write_queue_nums=config.write_queue_nums,
                    perm=int(config.perm),
                    message_type=convert.topic_message_type(config.message_type),
                )
                for config in runtime.topics.list_all()
            ],
        )
        self._add_in_sync(request)
        return request

    async def register_all(self) -> int:
        """Register with every name server at once; returns how many accepted."""
        settings = self._runtime.settings
        self._server_names = await named_targets(
            settings.namesrv_addrs,
            resolve_all=settings.namesrv_resolve_all,
            resolver=self._resolver,
        )
        self.targets = list(self._server_names)
        request = self._request()
        renewal = self._renewal()
        results = await asyncio.gather(
            *(self._register_one(addr, request, renewal) for addr in self.targets)
        )
        return sum(results)

    async def _register_one(
        self, addr: str, request: pb.registry.RegisterBrokerRequest, renewal: _Renewal
    ) -> bool:
        try:
            client = self._registry(await self._channel(addr), CALL_TIMEOUT_S)
            answer = await client.register_broker(request)
            await self._newer_epoch(answer)
            codes.raise_for_status(answer.status)
        except (grpc.aio.AioRpcError, errors.ArianeError, ValueError) as exc:
            if self._failure_lines.allow(addr):  # retries come every <= 3 s during an outage
                _log.warning("registration with name server %s failed: %s", addr, exc)
            return False
        renewal.acknowledged()
        self.registrations_ok += 1
        if answer.HasField("master_ha_address") and not self._runtime.settings.ha.master_ha:
            self._runtime.master_ha_address = answer.master_ha_address  # RocketMQ haServerAddr
        return True

    async def run(self) -> None:
        """Register now, then every interval, whenever the route changes and whenever a name
        server lost the registration (heartbeat probe), retrying failures with backoff; runs
        until cancelled."""
        interval_s = self._runtime.settings.register_interval_ms / 1000
        changed = self._runtime.route_changed
        loop = asyncio.get_running_loop()
        failures = 0
        while True:
            changed.clear()
            accepted = await self.register_all()
            failures = 0 if accepted == len(self.targets) else failures + 1
            if failures:
                wait_s = retry_backoff_s(failures)
                if self._lease is not None:  # the retry is the next renewal
                    wait_s = min(wait_s, self.renew_interval_s())
                _log.info("registration retried in %.1f s (%d failed rounds)", wait_s, failures)
            else:
                wait_s = interval_s
            await self._watch(loop.time() + wait_s, probe=failures == 0)

    async def _watch(self, deadline_s: float, *, probe: bool) -> None:
        """Return at ``deadline_s`` (loop time), when the route changes, or (``probe``) when a
        name server's heartbeat answer says the broker must register again; heartbeats every
        renewal interval, and at once when a master's in-sync set changed."""
        loop = asyncio.get_running_loop()
        interval_s = self.renew_interval_s()
        while (remaining_s := deadline_s - loop.time()) > 0:
            if await self._wait_for_change(min(remaining_s, interval_s)):
                return
            if probe and not await self.heartbeat_all():
                return

    async def _wait_for_change(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` for the route to change (True) or for a master's
        ``HAService.replicas_changed`` (False, the event cleared: the caller heartbeats with
        the new in-sync report, so the name servers know a newly connected slave within a
        round trip rather than a heartbeat period)."""
        changed = self._runtime.route_changed
        replicas = None if self._replication is None else self._replication.master.replicas_changed
        waits = [asyncio.ensure_future(changed.wait())]
        if replicas is not None:
            waits.append(asyncio.ensure_future(replicas.wait()))
        try:
            await asyncio.wait(waits, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for wait in waits:
                wait.cancel()
        if replicas is not None:
            replicas.clear()
        return changed.is_set()

    async def heartbeat_all(self) -> bool:
        """Send BrokerHeartbeat to every name server; ``False`` if any needs a registration
        (unreachable, NOT_FOUND after a restart, or ``registration_required``)."""
        settings = self._runtime.settings
        request = pb.registry.BrokerHeartbeatRequest(
            cluster_name=settings.cluster,
            broker_name=settings.broker_name,
            broker_id=self._runtime.broker_id,
            data_version=self._runtime.topics.data_version.counter,
            epoch=self._epoch,
        )
        self._add_in_sync(request)
        renewal = self._renewal()
        results = await asyncio.gather(
            *(self._heartbeat_one(addr, request, renewal) for addr in self.targets)
        )
        return all(results)

    async def _heartbeat_one(
        self, addr: str, request: pb.registry.BrokerHeartbeatRequest, renewal: _Renewal
    ) -> bool:
        lease = self._lease  # a hung name server must not hold up the next renewal past a third
        timeout_s = CALL_TIMEOUT_S if lease is None else min(CALL_TIMEOUT_S, lease.lease_ms / 3000)
        try:
            client = self._registry(await self._channel(addr), timeout_s)
            answer = await client.broker_heartbeat(request)
            await self._newer_epoch(answer)
            codes.raise_for_status(answer.status)
        except (grpc.aio.AioRpcError, errors.ArianeError, ValueError) as exc:
            _log.info("name server %s needs a registration (heartbeat: %s)", addr, exc)
            return False
        if answer.registration_required:
            return False
        renewal.acknowledged()
        return True

    async def unregister_all(self) -> None:
        """Tell every name server this broker is leaving (best effort, bounded)."""
        settings = self._runtime.settings
        request = pb.registry.UnregisterBrokerRequest(
            cluster_name=settings.cluster,
            broker_name=settings.broker_name,
            broker_id=self._runtime.broker_id,
            epoch=self._epoch,
        )

        async def one(addr: str) -> None:
            try:
                client = self._registry(await self._channel(addr), 2.0)
                await client.unregister_broker(request)
            except grpc.aio.AioRpcError as exc:
                _log.warning("unregister from %s failed: %s", addr, exc.code())

        await asyncio.gather(*(one(addr) for addr in self.targets))
