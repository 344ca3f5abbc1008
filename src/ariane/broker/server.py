"""``BrokerServer``: the composition root of a broker process.

It opens the ``BrokerRuntime`` (store recovery happens here), builds the processors and the gRPC
services (v2 MessagingService, ``ariane.admin.v1.Admin``), serves them through its front end
(``grpc.frontend``: in this process, or N worker processes sharing the port), and runs its
background services in one ``TaskGroup`` (``_run_services``): each a ``…Service`` whose
``run`` loops until cancelled, listed in ``broker.services`` (registration with the name
servers, consumer-offset persistence, client-session expiry, retention, POP revive, scheduled
delivery, transaction check-backs, receipt renewal, lite-topic expiry, and with a broker role
replication and the slave's metadata sync). ``serve`` returns after ``stop`` is set: it
unregisters, stops the gRPC server with a grace period and closes the store cleanly (so the
next start needs no recovery scan).

TLS: one ``common.tls.ServerTls`` per process (``server_tls``, from ``[tls]`` unless
``disabled``) is handed to every listener (Remoting, HA); every port of the process has the same
mode, so the endpoints it registers match the transport its callers use.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Sequence
from typing import Protocol

from ariane import metrics
from ariane.broker import assembly, metrics_view
from ariane.broker import runtime as runtime_mod
from ariane.broker import settings as broker_settings
from ariane.broker.grpc import (
    admin_service,
    auth_gate,
    frontend,
    lite_rpc,
    messaging,
    producer_streams,
    receive_rpc,
    routes,
    v2_admin,
)
from ariane.broker.pop import service as pop_service
from ariane.broker.processors import consume, renewal
from ariane.broker.remoting import broker_config as remoting_broker_config
from ariane.broker.remoting import rates as remoting_rates
from ariane.broker.remoting import service as remoting_service
from ariane.broker.remoting import transactions as remoting_transactions
from ariane.broker.services import (
    client_housekeeping,
    lite_expiry,
    offset_persist,
    receipt_renewal,
    registration,
    replication,
    retention,
    slave_sync,
    write_timeline,
)
from ariane.broker.tables import clients, consumers, lite_rebuild, queue_locks
from ariane.broker.transaction import check_service
from ariane.common import clock as clock_mod
from ariane.common import tls
from ariane.grpcwire import channel_pool, pb, rpc_latency
from ariane.grpcwire import server as grpc_server
from ariane.grpcwire import tls as grpc_tls
from ariane.store import clean_service

_log = logging.getLogger(__name__)


class BrokerServer:
    """One broker: runtime, gRPC server and background services.

    Args:
        settings: validated broker settings.
        clock: the time source (defaults to the system clock).

    Raises:
        OSError: ``[tls]`` files that do not read or load (named).
    """

    def __init__(
        self, settings: broker_settings.BrokerSettings, *, clock: clock_mod.Clock | None = None
    ) -> None:
        self.settings = settings
        self.clock = clock or clock_mod.SystemClock()
        self.started = asyncio.Event()
        """Set once the port is bound and the broker serves (``port`` is then valid)."""
        self.runtime: runtime_mod.BrokerRuntime | None = None
        self.front_end: frontend.FrontEnd | None = None
        """How gRPC is served (in this process, or by front-end workers); set by ``serve``."""
        self._port: int | None = None
        self.replication: replication.ReplicationService | None = None
        self.slave_sync: slave_sync.SlaveSyncService | None = None
        """Role and HA loops, when a broker role is configured; set by ``serve``."""
        self.metrics_port: int | None = None
        """The bound ``/metrics`` port when ``settings.metrics_listen`` is set and serving."""
        self.consumers: consumers.ConsumerRegistry | None = None
        self.queue_locks: queue_locks.RebalanceLockManager | None = None
        """The live consumer groups and the queue lock table (every protocol adapter shares
        them); set by ``serve``."""
        self.remoting: remoting_service.RemotingService | None = None
        self.auth_stores = auth_gate.AuthStores(settings)
        """The users and ACLs (``[auth]``), opened at ``serve`` when authentication is on."""
        self.server_tls = tls.process_server_tls(settings.tls)
        """The process's one TLS (``[tls]``, unless ``disabled``), handed to every listener;
        ``None``: plaintext everywhere."""
        self.remoting_address: str = ""
        """``HOST:PORT`` the classic protocol is served on ("" when it is not); set by
        ``serve`` once bound."""

    @property
    def port(self) -> int:
        """The bound gRPC port; valid after ``started``."""
        assert self._port is not None, "the broker has not started"
        return self._port

    async def serve(self, stop: asyncio.Event) -> None:
        """Open, serve until ``stop`` is set, then shut down cleanly.

        Raises:
            OSError: the store cannot be opened or the listen address cannot be bound.
        """
        runtime = runtime_mod.BrokerRuntime(self.settings, time=self.clock)
        self.runtime = runtime
        self.auth_stores.use(runtime.auth_metadata)  # one user table for gRPC and Remoting
        channels = self._channel_pool()
        client_registry, consumer_registry = self._client_tables()
        lookup = routes.RouteLookup(runtime, channels)
        processors = assembly.build(runtime, time=self.clock)
        streams = producer_streams.ProducerStreams(client_registry)
        self.replication, self.slave_sync = self._ha_services(runtime, channels, processors)
        renewals = receive_rpc.new_renewals(runtime, processors.consumer, client_registry)
        implementations = _services(
            runtime,
            processors,
            lookup,
            (client_registry, consumer_registry),
            streams,
            renewals,
            owner=self,
        )
        latency = rpc_latency.RpcLatency()
        front = self._front_end(implementations, latency)
        self.front_end = front
        ha = self.replication
        registrar = registration.RegistrationService(runtime, channels, replication=ha)
        timeline = self._write_timeline(runtime)
        exposition = _exposition(
            lambda: metrics_view.snapshot(
                runtime, client_registry, front, latency, ha=ha,
                timeline=timeline, transactions=processors.transactions,
                auth=self.auth_stores.audit,
            )
        )  # fmt: skip
        try:
            self._port = await front.start()
            if self.settings.metrics_listen:
                self.metrics_port = exposition.start(self.settings.metrics_listen, self.server_tls)
                _log.info("metrics on %s/metrics", exposition.url(self.settings.metrics_listen))
            runtime.advertise(self.settings.client_endpoint(self._port))
            self.remoting = await self._start_remoting(processors, runtime)
            _log.info(
                "broker %s/%d serving on %s (advertised %s) with %d front-end workers",
                self.settings.broker_name, self.settings.broker_id, self.settings.listen,
                runtime.client_endpoint, front.workers,
            )  # fmt: skip
            self.started.set()
            await _run_services(stop, [
                ("front-end", front), ("registration", registrar),
                *self._housekeeping(runtime, client_registry, processors.consumer),
                *self._client_services(runtime, client_registry, processors, streams, renewals),
                *self._role_services(timeline),
            ])  # fmt: skip
        finally:
            _log.info("broker stopping")
            exposition.close()
            with contextlib.suppress(Exception):
                await registrar.unregister_all()
            if self.remoting is not None:
                await self.remoting.close()
            await front.stop()
            await channels.close()
            runtime.close()
            _log.info("broker stopped")

    def _front_end(
        self,
        implementations: Sequence[tuple[pb.ServiceDescriptor, object]],
        latency: rpc_latency.RpcLatency,
    ) -> frontend.FrontEnd:
        """How gRPC is served: checked by the gate, in the ``[tls]`` mode (``server_tls``)."""
        return frontend.build(
            self.settings, implementations, latency=latency, gate=self._gate(),
            server_tls=self.server_tls,
        )  # fmt: skip

    def _gate(self) -> auth_gate.GrpcAuthGate | None:
        """The gRPC services' authentication + authorization step (``None``: auth off)."""
        return self.auth_stores.gate(cluster=self.settings.cluster)

    def _channel_pool(self) -> channel_pool.ChannelPool:
        """Channels to every name server (all addresses a resolved name lists) and a few more
        (the master, other brokers), TLS when this broker is ``enforcing``."""
        namesrv_max = (
            registration.NAMESRV_ADDRESSES_MAX
            if self.settings.namesrv_resolve_all
            else len(self.settings.namesrv_addrs)
        )
        return channel_pool.ChannelPool(
            channels_max=namesrv_max + 8,
            credentials=grpc_tls.inner_credentials(self.settings.tls, lambda: self.server_tls),
        )

    def _ha_services(
        self,
        runtime: runtime_mod.BrokerRuntime,
        channels: channel_pool.ChannelPool,
        processors: assembly.Processors,
    ) -> tuple[replication.ReplicationService | None, slave_sync.SlaveSyncService | None]:
        """The master's replication service (the transaction and POP services and the lite
        topics follow its role) and the slave's metadata sync (``None`` without HA)."""
        if not self.settings.ha.replicates:
            return None, None
        pop = runtime.pop_service
        if self.settings.ha.role.is_master:
            pop.start_replicating()  # the POP journal goes into the CommitLog too (pop.replica)
        else:
            pop.become_slave()  # the master owns the POP state; drop any stale local journal
        roles = replication.ReplicationService(
            runtime,
            followers=(
                processors.transactions,
                pop,
                lite_rebuild.RoleFollower(runtime.rebuild_lite_topics),
            ),
            server_tls=self.server_tls,
        )
        return roles, slave_sync.SlaveSyncService(runtime, channels)

    def _write_timeline(
        self, runtime: runtime_mod.BrokerRuntime
    ) -> write_timeline.WriteTimelineService | None:
        """The CommitLog's write times, for the slaves' lag in seconds (``None`` without HA)."""
        if self.replication is None:
            return None
        return write_timeline.WriteTimelineService(
            lambda: runtime.store.max_commit_log_offset, self.clock
        )

    def _client_tables(self) -> tuple[clients.ClientRegistry, consumers.ConsumerRegistry]:
        """The client sessions, the consumer registry over them and the queue lock table."""
        limits = self.settings.core.consumers
        client_registry = clients.ClientRegistry(
            time=self.clock, expired_ms=limits.channel_expired_ms
        )
        self.queue_locks = queue_locks.RebalanceLockManager(
            time=self.clock, expiry_ms=limits.lock_expiry_ms, locks_max=limits.locks_max
        )
        self.consumers = consumers.ConsumerRegistry(
            client_registry, locks=self.queue_locks, limits=limits
        )
        return client_registry, self.consumers

    def _housekeeping(
        self,
        runtime: runtime_mod.BrokerRuntime,
        client_registry: clients.ClientRegistry,
        consumer: consume.ConsumeProcessor,
    ) -> list[tuple[str, _Service]]:
        """Consumer-offset persistence, client-session expiry, retention, POP revive and
        scheduled delivery."""
        cleaner = clean_service.CleanCommitLogService(
            runtime.store,
            self.settings.retention,
            clock=self.clock,
            unconsumed=runtime.unconsumed_positions,
            topic_retention_hours=runtime.topic_retention_hours,
        )
        return [
            (
                "offset-persist",
                offset_persist.ConsumerOffsetPersistService(
                    runtime.persist_offsets,
                    interval_ms=self.settings.core.offsets.persist_interval_ms,
                ),
            ),
            (
                "client-expiry",
                client_housekeeping.ClientHousekeepingService(
                    client_registry, self.queue_locks, self.settings.core.consumers
                ),
            ),
            (
                "retention",
                retention.RetentionService(
                    cleaner, interval_ms=self.settings.retention.clean_resource_interval_ms
                ),
            ),
            ("pop-revive", self._reviver(runtime, consumer)),
            ("schedule", runtime.schedule),
        ]

    def _client_services(
        self,
        runtime: runtime_mod.BrokerRuntime,
        client_registry: clients.ClientRegistry,
        processors: assembly.Processors,
        streams: producer_streams.ProducerStreams,
        renewals: renewal.ReceiptRenewals,
    ) -> list[tuple[str, _Service]]:
        """The loops that reach clients: transaction check-backs, the renewal of push
        consumers' invisible time (the proxy's receipt manager) and lite-topic expiry."""
        renewal_service = receipt_renewal.ReceiptRenewalService(
            renewals, period_ms=self.settings.renewal.renew_period_ms
        )
        return [
            ("transaction-check", self._check_service(processors, streams)),
            ("receipt-renewal", renewal_service),
            ("lite-expiry", _lite_expiry(runtime, client_registry, streams, self.clock)),
        ]

    def _role_services(
        self, timeline: write_timeline.WriteTimelineService | None
    ) -> list[tuple[str, _Service]]:
        """The services that run only in some brokers: the HA ones (with a broker role) and
        the classic protocol (when it is served)."""
        optional: list[tuple[str, _Service | None]] = [
            ("write-timeline", timeline),
            ("replication", self.replication),
            ("remoting", self.remoting),
            ("slave-sync", self.slave_sync),
        ]
        return [(name, service) for name, service in optional if service is not None]

    def _check_service(
        self, processors: assembly.Processors, streams: producer_streams.ProducerStreams
    ) -> check_service.TransactionCheckService:
        """Check-backs go to gRPC producer streams first, then to classic producers."""
        listeners: list[check_service.CheckListener] = [streams]
        if self.remoting is not None:
            listeners.append(self.remoting.check_listener)
        return check_service.TransactionCheckService(
            transactions=processors.transactions,
            listener=remoting_transactions.CheckListeners(listeners),
            time=self.clock,
        )

    async def _start_remoting(
        self, processors: assembly.Processors, runtime: runtime_mod.BrokerRuntime
    ) -> remoting_service.RemotingService | None:
        """Serve the classic protocol on ``remoting_listen`` and make STOREHOST name it.

        Raises:
            OSError: an explicitly set address cannot be bound.
        """
        listen = self.settings.remoting_listen
        if not listen:
            return None
        host, port = grpc_server.parse_listen(listen)
        service = remoting_service.RemotingService(
            processors,
            time=self.clock,
            locks=self.queue_locks,
            auth_store=runtime.auth_metadata,
            auth=self.settings.auth,
            cluster=self.settings.cluster,
            audit_log=self.auth_stores.audit,  # the gRPC gate's: one set of counters
            config=remoting_broker_config.BrokerConfigHandler(runtime),
            tps=remoting_rates.TpsSampler(
                lambda: (runtime.counters.messages_in, runtime.counters.messages_out)
            ),
            traffic=runtime.counters.traffic,
        )
        try:
            bound_host, bound_port = await service.start(host, port, self.server_tls)
        except OSError as exc:
            if self.settings.remoting_listen_explicit:
                raise
            _log.warning("classic protocol not served: %s is taken (%s)", listen, exc)
            return None
        advertised_host, _ = grpc_server.parse_listen(runtime.client_endpoint)
        self.remoting_address = f"{advertised_host}:{bound_port}"
        runtime.remoting_address = self.remoting_address  # registered with the name servers
        runtime.advertise_store_host(self.remoting_address)
        _log.info("classic protocol (Remoting) on %s (bound %s)", listen, bound_host)
        return service

    def _reviver(
        self, runtime: runtime_mod.BrokerRuntime, consumer: consume.ConsumeProcessor
    ) -> pop_service.PopReviveService:
        return pop_service.PopReviveService(
            pop_service=runtime.pop_service,
            group_table=runtime.groups,
            reviver=consumer.revive,
            interval_ms=self.settings.receive.poll_slice_ms,
        )


class _Service(Protocol):
    """A background loop of the broker: ``run`` until cancelled."""

    async def run(self) -> None: ...


async def _run_services(stop: asyncio.Event, services: Sequence[tuple[str, _Service]]) -> None:
    """Run every service's ``run`` in one task group (a task named by the service) until
    ``stop`` is set, then cancel them all; a service that fails ends the group, and so the
    broker (``TaskGroup`` semantics)."""
    async with asyncio.TaskGroup() as tasks:
        loops = [tasks.create_task(service.run(), name=name) for name, service in services]
        await stop.wait()
        for loop in loops:
            loop.cancel()


def _services(
    runtime: runtime_mod.BrokerRuntime,
    processors: assembly.Processors,
    lookup: routes.RouteLookup,
    client_tables: tuple[clients.ClientRegistry, consumers.ConsumerRegistry],
    streams: producer_streams.ProducerStreams,
    renewals: renewal.ReceiptRenewals,
    *,
    owner: BrokerServer,
) -> list[tuple[pb.ServiceDescriptor, object]]:
    """The gRPC services over the processors, in ``frontend.SERVED_SERVICES`` order (the
    broker's role changes and users/ACLs come from ``owner``)."""
    client_registry, consumer_registry = client_tables
    service = messaging.MessagingService(
        runtime,
        processors.sender,
        processors.consumer,
        lookup,
        client_registry,
        processors.puller,
        transactions=processors.transactions,
        streams=streams,
        consumer_registry=consumer_registry,
        renewals=renewals,
    )
    implementations: list[tuple[pb.ServiceDescriptor, object]] = [
        (pb.MESSAGING_SERVICE, service),
        (
            pb.ADMIN_SERVICE,
            admin_service.AdminService(
                runtime,
                processors.admin,
                roles=owner.replication,
                dead_letters=processors.retry,
                auth_stores=owner.auth_stores,
            ),
        ),
        (pb.INGEST_SERVICE, messaging.IngestService(service)),
        (
            pb.V2_ADMIN_SERVICE,
            v2_admin.V2AdminService(
                runtime,
                processors.admin,
                client_registry,
                consumer_registry,
                streams,
                sender=processors.sender,
            ),
        ),
    ]
    assert tuple(s for s, _ in implementations) == frontend.SERVED_SERVICES
    return implementations


def _lite_expiry(
    runtime: runtime_mod.BrokerRuntime,
    client_registry: clients.ClientRegistry,
    streams: producer_streams.ProducerStreams,
    time: clock_mod.Clock,
) -> lite_expiry.LiteExpiryService:
    """The TTL loop of lite topics, telling subscribers on their Telemetry streams; a client
    that goes away loses its lite subscriptions."""
    table = runtime.lite_topics
    client_registry.add_removal_listener(table.drop_client)
    return lite_expiry.LiteExpiryService(
        table=table,
        settings=runtime.settings.lite,
        lagging=lite_expiry.pop_lag(runtime.pop_service),
        notify=lambda client_id, name: streams.push(client_id, lite_rpc.unsubscribe_command(name)),
        time=time,
    )


def _exposition(source: Callable[[], metrics.BrokerSnapshot]) -> metrics.MetricsServer:
    """The ``/metrics`` server over snapshots taken by ``source`` on the broker's event loop."""
    return metrics.MetricsServer(
        metrics.BrokerCollector(metrics.loop_source(asyncio.get_running_loop(), source))
    )
