"""``BrokerServer``: the composition root of a broker process.

It opens the ``BrokerRuntime`` (store recovery happens here), builds the processors and the gRPC
services (v2 MessagingService, ``ariane.admin.v1.Admin``), serves them through its front end
(``broker.frontend``: in this process, or N worker processes sharing the port), and runs its
background services in one ``TaskGroup``: registration with the name servers, consumer-offset
persistence, client-session expiry and retention (RocketMQ ``CleanCommitLogService``). ``serve``
returns after ``stop`` is set: it unregisters, stops the gRPC server with a grace period and
closes the store cleanly (so the next start needs no recovery scan).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
import time

from ariane import metrics
from ariane.broker import config, metrics_view
from ariane.broker import runtime as runtime_mod
from ariane.broker.grpc import admin_service, frontend, messaging, routes
from ariane.broker.pop import service as pop_service
from ariane.broker.processors import consume, send
from ariane.broker.services import registration, replication
from ariane.broker.tables import clients
from ariane.common import clock as clock_mod
from ariane.common import ids
from ariane.remoting import pb, rpc
from ariane.store import retention

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
        self, settings: config.BrokerSettings, *, clock: clock_mod.Clock | None = None
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
        channels = rpc.ChannelPool(channels_max=len(self.settings.namesrv_addrs) + 8)
        client_registry = clients.ClientRegistry(time=self.clock)
        lookup = routes.RouteLookup(runtime, channels)
        consumer = consume.ConsumeProcessor(
            pop_service=runtime.pop_service,
            store=runtime.store,
            topic_table=runtime.topics,
            group_table=runtime.groups,
            polling=runtime.polling,
            counters=runtime.counters,
            route_changed=runtime.route_changed,
            receive=self.settings.receive,
            broker_name=runtime.broker_name,
            time=self.clock,
        )
        sender = send.SendProcessor(
            store=runtime.store,
            topics=runtime.topics,
            polling=runtime.polling,
            counters=runtime.counters,
            store_settings=self.settings.store,
        )
        service = messaging.MessagingService(runtime, sender, consumer, lookup, client_registry)
        self.replication = (
            replication.ReplicationService(runtime) if self.settings.ha.replicates else None
        )
        implementations = [
            (pb.MESSAGING_SERVICE, service),
            (pb.ADMIN_SERVICE, admin_service.AdminService(runtime, roles=self.replication)),
            (pb.INGEST_SERVICE, messaging.IngestService(service)),
        ]
        assert tuple(s for s, _ in implementations) == frontend.SERVED_SERVICES
        front = frontend.build(self.settings, implementations)
        self.front_end = front
        registrar = registration.RegistrationService(runtime, channels)
        exposition = metrics.MetricsServer(
            metrics.BrokerCollector(
                metrics.loop_source(
                    asyncio.get_running_loop(),
                    lambda: metrics_view.snapshot(runtime, client_registry, front),
                )
            )
        )
        try:
            self._port = await front.start()
            if self.settings.metrics_listen:
                self.metrics_port = exposition.start(self.settings.metrics_listen)
                _log.info("metrics on http://%s/metrics", self.settings.metrics_listen)
            runtime.client_endpoint = self.settings.client_endpoint(self._port)
            _log.info(
                "broker %s/%d serving on %s (advertised %s) with %d front-end workers",
                self.settings.broker_name,
                self.settings.broker_id,
                self.settings.listen,
                runtime.client_endpoint,
                front.workers,
            )
            self.started.set()
            await self._run_services(stop, runtime, registrar, client_registry, consumer, front)
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
    ) -> None:
        async with asyncio.TaskGroup() as tasks:
            loops = [
                tasks.create_task(front.run(), name="front-end"),
                tasks.create_task(registrar.run(), name="registration"),
                tasks.create_task(self._persist_offsets(runtime), name="offset-persist"),
                tasks.create_task(self._expire_clients(client_registry), name="client-expiry"),
                tasks.create_task(self._retention(runtime), name="retention"),
                tasks.create_task(self._reviver(runtime, consumer).run(), name="pop-revive"),
            ]
            if self.replication is not None:
                loops.append(tasks.create_task(self.replication.run(), name="replication"))
            await stop.wait()
            for loop in loops:
                loop.cancel()

    async def _persist_offsets(self, runtime: runtime_mod.BrokerRuntime) -> None:
        interval_s = self.settings.offset_persist_interval_ms / 1000
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
        while True:
            await asyncio.sleep(policy.clean_resource_interval_ms / 1000)
            run_retention_once(runtime, policy, clock=self.clock)


def run_retention_once(
    runtime: runtime_mod.BrokerRuntime,
    policy: retention.RetentionSettings,
    *,
    clock: clock_mod.Clock,
    disk_usage: retention.DiskUsageFn = shutil.disk_usage,
) -> retention.RetentionPlan:
    """One retention run: plan, delete CommitLog/ConsumeQueue/index files, set disk-full.

    Mirrors RocketMQ ``CleanCommitLogService`` + ``CleanConsumeQueueService``; the decisions
    are ``store.retention.plan``'s, given the lowest CommitLog offset a subscribed group has
    not consumed (``BrokerRuntime.unconsumed_positions``), so forced deletion keeps those
    messages unless ``force_delete_unconsumed``. What forced deletion removed is logged and
    counted in the store's stats.

    Args:
        runtime: the broker.
        policy: the retention settings.
        clock: the wall clock.
        disk_usage: the ``shutil.disk_usage`` seam of the disk probe.

    Raises:
        OSError: the disk cannot be probed or a file cannot be deleted.
    """
    store = runtime.store
    now_ms = clock.now_ms()
    segments = [
        retention.SegmentInfo(ids.CommitLogOffset(s.start_offset), s.size_bytes, s.modified_ms)
        for s in store.commit_log_segments()
    ]
    ratio = retention.disk_used_ratio(runtime.settings.store_dir, usage=disk_usage)
    consumed = runtime.unconsumed_positions()
    decided = retention.plan(
        now_ms,
        time.localtime(now_ms / 1000).tm_hour,
        segments,
        ratio,
        policy,
        unconsumed_from=store.unconsumed_from(consumed),
    )
    if decided.delete:
        _carry_out(runtime, decided, consumed)
    elif decided.stop_reason is retention.StopReason.UNCONSUMED:
        _log.warning("retention: %s; unconsumed messages kept", decided.describe())
    if store.disk_full != decided.reject_writes:
        _log.warning(
            "disk %.0f%% used: writes %s",
            ratio * 100,
            "rejected" if decided.reject_writes else "accepted again",
        )
        store.disk_full = decided.reject_writes
    return decided


def _carry_out(
    runtime: runtime_mod.BrokerRuntime,
    decided: retention.RetentionPlan,
    consumed: dict[tuple[ids.TopicName, ids.QueueId], ids.QueueOffset],
) -> None:
    """Delete what ``decided`` lists; log and count what went unconsumed."""
    store = runtime.store
    lows_before = {key: store.min_queue_offset(*key) for key in consumed}
    deleted = store.delete_commit_log_segments([s.start_offset for s in decided.delete])
    runtime.index.delete_files_before(store.min_commit_log_offset)
    unconsumed = sum(
        max(0, store.min_queue_offset(*key) - max(offset, lows_before[key]))
        for key, offset in consumed.items()
    )
    forced = decided.delete[:deleted] if decided.forced else ()
    store.count_retention(
        forced_segments=len(forced),
        forced_bytes=sum(s.size_bytes for s in forced),
        unconsumed_messages=unconsumed,
    )
    log = _log.warning if unconsumed else _log.info
    log(
        "retention: %s; deleted %d CommitLog segments, %d messages subscribed groups had not "
        "consumed",
        decided.describe(),
        deleted,
        unconsumed,
    )
