"""``BrokerServer``: the composition root of a broker process.

It opens the ``BrokerRuntime`` (store recovery happens here), builds the processors and the gRPC
services (v2 MessagingService, ``ariane.admin.v1.Admin``), serves them through its front end
(``broker.frontend``: in this process, or N worker processes sharing the port), and runs its
background services in one ``TaskGroup``: registration with the name servers, consumer-offset
persistence, client-session expiry, retention (RocketMQ ``CleanCommitLogService``) and
transaction check-backs (``TransactionalMessageCheckService``). ``serve``
returns after ``stop`` is set: it unregisters, stops the gRPC server with a grace period and
closes the store cleanly (so the next start needs no recovery scan).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from ariane import metrics
from ariane.broker import assembly, metrics_view
from ariane.broker import runtime as runtime_mod
from ariane.broker import settings as broker_settings
from ariane.broker.grpc import (
    admin_service,
    frontend,
    messaging,
    producer_streams,
    routes,
    slave_sync,
)
from ariane.broker.pop import service as pop_service
from ariane.broker.processors import consume, transaction_check
from ariane.broker.services import registration, replication
from ariane.broker.tables import clients
from ariane.common import clock as clock_mod
from ariane.grpcwire import pb, rpc
from ariane.store import clean_service

_log = logging.getLogger(__name__)

CLIENT_EXPIRY_INTERVAL_S = 10.0
"""How often silent client sessions are dropped."""


class BrokerServer:
    """One broker: runtime, gRPC server and background services.

    Args:
        settings: validated broker settings.
        clock: the time source (defaults to the system clock).
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
        namesrv_max = (
            registration.NAMESRV_ADDRESSES_MAX
            if self.settings.namesrv_resolve_all
            else len(self.settings.namesrv_addrs)
        )
        channels = rpc.ChannelPool(channels_max=namesrv_max + 8)
        client_registry = clients.ClientRegistry(time=self.clock)
        lookup = routes.RouteLookup(runtime, channels)
        processors = assembly.build(runtime, time=self.clock)
        streams = producer_streams.ProducerStreams(client_registry)
        self.replication = (
            replication.ReplicationService(runtime) if self.settings.ha.replicates else None
        )
        self.slave_sync = (
            slave_sync.SlaveSyncService(runtime, channels) if self.settings.ha.replicates else None
        )
        implementations = _services(
            runtime, processors, lookup, client_registry, streams, roles=self.replication
        )
        latency = rpc.RpcLatency()
        front = frontend.build(self.settings, implementations, latency=latency)
        self.front_end = front
        registrar = registration.RegistrationService(runtime, channels)
        exposition = metrics.MetricsServer(
            metrics.BrokerCollector(
                metrics.loop_source(
                    asyncio.get_running_loop(),
                    lambda: metrics_view.snapshot(runtime, client_registry, front, latency),
                )
            )
        )
        try:
            self._port = await front.start()
            if self.settings.metrics_listen:
                self.metrics_port = exposition.start(self.settings.metrics_listen)
                _log.info("metrics on http://%s/metrics", self.settings.metrics_listen)
            runtime.advertise(self.settings.client_endpoint(self._port))
            _log.info(
                "broker %s/%d serving on %s (advertised %s) with %d front-end workers",
                self.settings.broker_name,
                self.settings.broker_id,
                self.settings.listen,
                runtime.client_endpoint,
                front.workers,
            )
            self.started.set()
            checker = transaction_check.TransactionCheckService(
                transactions=processors.transactions, listener=streams, time=self.clock
            )
            await self._run_services(
                stop, runtime, registrar, client_registry, processors.consumer, front, checker
            )
        finally:
            _log.info("broker stopping")
            exposition.close()
            with contextlib.suppress(Exception):
                await registrar.unregister_all()
            await front.stop()
            await channels.close()
            runtime.close()
            _log.info("broker stopped")

    async def _run_services(
        self,
        stop: asyncio.Event,
        runtime: runtime_mod.BrokerRuntime,
        registrar: registration.RegistrationService,
        client_registry: clients.ClientRegistry,
        consumer: consume.ConsumeProcessor,
        front: frontend.FrontEnd,
        checker: transaction_check.TransactionCheckService,
    ) -> None:
        async with asyncio.TaskGroup() as tasks:
            loops = [
                tasks.create_task(front.run(), name="front-end"),
                tasks.create_task(registrar.run(), name="registration"),
                tasks.create_task(self._persist_offsets(runtime), name="offset-persist"),
                tasks.create_task(self._expire_clients(client_registry), name="client-expiry"),
                tasks.create_task(self._retention(runtime), name="retention"),
                tasks.create_task(self._reviver(runtime, consumer).run(), name="pop-revive"),
                tasks.create_task(runtime.schedule.run(), name="schedule"),
                tasks.create_task(checker.run(), name="transaction-check"),
            ]
            if self.replication is not None:
                loops.append(tasks.create_task(self.replication.run(), name="replication"))
            if self.slave_sync is not None:
                loops.append(tasks.create_task(self.slave_sync.run(), name="slave-sync"))
            await stop.wait()
            for loop in loops:
                loop.cancel()

    async def _persist_offsets(self, runtime: runtime_mod.BrokerRuntime) -> None:
        interval_s = self.settings.core.offsets.persist_interval_ms / 1000
        while True:
            await asyncio.sleep(interval_s)
            runtime.persist_offsets()

    async def _expire_clients(self, client_registry: clients.ClientRegistry) -> None:
        while True:
            await asyncio.sleep(CLIENT_EXPIRY_INTERVAL_S)
            for client_id in client_registry.expire():
                _log.info("client %s expired after silence", client_id)

    def _reviver(
        self, runtime: runtime_mod.BrokerRuntime, consumer: consume.ConsumeProcessor
    ) -> pop_service.PopReviveService:
        return pop_service.PopReviveService(
            pop_service=runtime.pop_service,
            group_table=runtime.groups,
            dead_letter=consumer.send_to_dlq,
            interval_ms=self.settings.receive.poll_slice_ms,
        )

    async def _retention(self, runtime: runtime_mod.BrokerRuntime) -> None:
        policy = self.settings.retention
        cleaner = clean_service.CleanCommitLogService(
            runtime.store, policy, clock=self.clock, unconsumed=runtime.unconsumed_positions
        )
        while True:
            await asyncio.sleep(policy.clean_resource_interval_ms / 1000)
            cleaner.run_once()


def _services(
    runtime: runtime_mod.BrokerRuntime,
    processors: assembly.Processors,
    lookup: routes.RouteLookup,
    client_registry: clients.ClientRegistry,
    streams: producer_streams.ProducerStreams,
    *,
    roles: replication.ReplicationService | None,
) -> list[tuple[rpc.ServiceDescriptor, object]]:
    """The gRPC services over the processors, in ``frontend.SERVED_SERVICES`` order."""
    service = messaging.MessagingService(
        runtime,
        processors.sender,
        processors.consumer,
        lookup,
        client_registry,
        processors.puller,
        transactions=processors.transactions,
        streams=streams,
    )
    implementations: list[tuple[rpc.ServiceDescriptor, object]] = [
        (pb.MESSAGING_SERVICE, service),
        (pb.ADMIN_SERVICE, admin_service.AdminService(runtime, processors.admin, roles=roles)),
        (pb.INGEST_SERVICE, messaging.IngestService(service)),
    ]
    assert tuple(s for s, _ in implementations) == frontend.SERVED_SERVICES
    return implementations
