"""``NameServer``: the composition root of a name-server process.

It owns the route tables, the ``grpc.aio`` server (Registry + the access-point part of v2
MessagingService) and the scan loop that drops silent brokers every ``scan_interval_ms`` (5 s,
RocketMQ ``scanNotActiveBrokerInterval``). ``serve`` runs them in one ``TaskGroup`` until its
``stop`` event is set, then stops the gRPC server with a grace period and closes the channels it
opened to brokers. Name servers keep no state on disk and never talk to each other.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging

import grpc

from ariane import metrics
from ariane.common import clock as clock_module
from ariane.grpcwire import pb, rpc
from ariane.grpcwire import server as grpc_server
from ariane.namesrv import forward, service
from ariane.namesrv import route_info_manager as rim

_log = logging.getLogger(__name__)

DEFAULT_LISTEN = "127.0.0.1:9876"
"""Dev default: loopback only. In a pod, listen on ``0.0.0.0:9876`` (RocketMQ's port)."""


@dataclasses.dataclass(frozen=True, slots=True)
class NameServerSettings:
    """Settings of one name-server process."""

    listen: str = DEFAULT_LISTEN
    """``HOST:PORT`` to serve gRPC on; port 0 picks a free port."""

    metrics_listen: str = ""
    """``HOST:PORT`` serving Prometheus ``/metrics`` (RocketMQ's port is 5557); empty = none."""

    scan_interval_ms: int = 5_000
    """Interval of the scan for silent brokers (RocketMQ ``scanNotActiveBrokerInterval``)."""

    forward_timeout_ms: int = 3_000
    """Longest deadline of a call (RecallMessage, QueryAssignment) forwarded to a broker."""

    broker_channels_max: int = 256
    """Channels to brokers kept open for forwarding."""

    route: rim.RouteSettings = dataclasses.field(default_factory=rim.RouteSettings)
    """Bounds and expiry of the route tables."""

    server: grpc_server.ServerSettings = dataclasses.field(
        default_factory=grpc_server.ServerSettings
    )
    """gRPC server options."""

    def __post_init__(self) -> None:
        grpc_server.parse_listen(self.listen)
        if self.metrics_listen:
            grpc_server.parse_listen(self.metrics_listen)
        if not 100 <= self.scan_interval_ms <= 60_000:
            raise ValueError("scan_interval_ms must be 100..60000")
        if not 100 <= self.forward_timeout_ms <= 60_000:
            raise ValueError("forward_timeout_ms must be 100..60000")
        if not 1 <= self.broker_channels_max <= 10_000:
            raise ValueError("broker_channels_max must be 1..10000")


class NameServer:
    """One name server: route tables, gRPC server and scan loop.

    Args:
        settings: validated settings.
        clock: time source of the route tables.
    """

    def __init__(
        self,
        settings: NameServerSettings,
        *,
        clock: clock_module.Clock | None = None,
    ) -> None:
        self._settings = settings
        self._clock = clock or clock_module.SystemClock()
        self.manager = rim.RouteInfoManager(settings=settings.route, clock=self._clock)
        self._channels = rpc.ChannelPool(channels_max=settings.broker_channels_max)
        self._latency = rpc.RpcLatency()
        self._port: int | None = None
        self.metrics_port: int | None = None
        """The bound ``/metrics`` port when ``settings.metrics_listen`` is set and serving."""
        self.started = asyncio.Event()
        """Set once the gRPC server is listening (``port`` is then known)."""

    @property
    def port(self) -> int:
        """The bound port; only valid after ``started`` is set."""
        assert self._port is not None, "the name server has not started"
        return self._port

    def _handlers(self) -> list[grpc.GenericRpcHandler]:
        forwarder = forward.Forwarder(
            self.manager,
            self._channels,
            forward_timeout_s=self._settings.forward_timeout_ms / 1000,
        )
        messaging = service.MessagingService(self.manager, forwarder)
        return [
            rpc.service_handler(
                pb.REGISTRY_SERVICE,
                service.RegistryService(self.manager),
                latency=self._latency,
            ),
            rpc.service_handler(pb.MESSAGING_SERVICE, messaging, latency=self._latency),
        ]

    async def serve(self, stop: asyncio.Event) -> None:
        """Serve until ``stop`` is set, then shut down cleanly.

        Raises:
            OSError: if the listen address cannot be bound.
        """
        server = grpc_server.build(self._settings.server, self._handlers())
        self._port = grpc_server.bind(server, self._settings.listen)
        await server.start()
        _log.info("name server listening on %s (port %d)", self._settings.listen, self._port)
        exposition = metrics.MetricsServer(
            metrics.NameServerCollector(
                metrics.loop_source(asyncio.get_running_loop(), self.metrics_snapshot)
            )
        )
        try:
            if self._settings.metrics_listen:
                self.metrics_port = exposition.start(self._settings.metrics_listen)
                _log.info("metrics on http://%s/metrics", self._settings.metrics_listen)
            self.started.set()
            async with asyncio.TaskGroup() as tasks:
                scan = tasks.create_task(self._scan_loop(), name="scan-not-active-brokers")
                await stop.wait()
                scan.cancel()
        finally:
            _log.info("name server stopping")
            exposition.close()
            await server.stop(self._settings.server.shutdown_grace_ms / 1000)
            await self._channels.close()
            _log.info("name server stopped")

    def metrics_snapshot(self) -> metrics.NameServerSnapshot:
        """What ``/metrics`` shows: live brokers, masters per group, routed topics, call
        latency."""
        groups = self.manager.cluster_info()
        return metrics.NameServerSnapshot(
            identity=metrics.Identity("", "nameserver", self._settings.listen),
            brokers=tuple(
                metrics.BrokerMemberView(g.cluster, g.broker_name, m.broker_id)
                for g in groups
                for m in g.members
            ),
            broker_groups={g.broker_name: g.master() is not None for g in groups},
            topic_count=len(self.manager.topic_names()),
            rpc_latency_ms=metrics.copy_histograms(self._latency.histograms()),
        )

    async def _scan_loop(self) -> None:
        interval_s = self._settings.scan_interval_ms / 1000
        while True:
            await asyncio.sleep(interval_s)
            for broker_name, broker_id in self.manager.scan_not_active_brokers():
                _log.warning("dropped broker %s/%s: silent too long", broker_name, broker_id)
