"""``NameServer``: the composition root of a name-server process.

It owns the route tables, the KV config, the ``grpc.aio`` server (Registry + the access-point
part of v2 MessagingService), the Remoting server of classic clients (``remoting_service``) and
the scan loop that drops silent brokers every ``scan_interval_ms`` (5 s, RocketMQ
``scanNotActiveBrokerInterval``). ``serve`` runs them in one ``TaskGroup`` until its ``stop``
event is set, then closes the Remoting connections, stops the gRPC server with a grace period and
closes the channels it opened to brokers. Name servers keep no state on disk and never talk to
each other.

Port layout: by default both protocols share ``listen`` (RocketMQ's 9876). A
``remoting.front.SharedPortFront`` listens there, serves Remoting connections itself and splices
the others (HTTP/2) to the gRPC server, which then listens only on a Unix socket in a private
temporary directory. ``remoting_listen`` set to another address serves Remoting there and gRPC
directly on ``listen``, with no extra hop.

TLS: one ``common.tls.ServerTls`` per process (``server_tls``, from ``[tls]`` unless
``disabled``). On the shared port the front terminates TLS for both protocols (gRPC then reaches
the Unix socket in plaintext, inside this process's private directory); with a separate
``remoting_listen`` the Remoting port serves ``[tls]`` itself. Every port has the same mode, so
the broker endpoints QueryRoute hands out (one per broker, all brokers of a cluster sharing a
mode) match the transport the caller used.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import shutil
import tempfile
from collections.abc import Awaitable, Callable

import grpc

from ariane import metrics
from ariane.common import clock as clock_module
from ariane.common import ids, tls
from ariane.grpcwire import channel_pool, guard, pb, rpc_latency
from ariane.grpcwire import ports as grpc_ports
from ariane.grpcwire import server as grpc_server
from ariane.grpcwire import tls as grpc_tls
from ariane.namesrv import forward, inner_auth, kv_config, remoting_service, service, v2_admin
from ariane.namesrv import route_info_manager as rim
from ariane.remoting import front as remoting_front
from ariane.remoting import transport as remoting_transport

_log = logging.getLogger(__name__)

DEFAULT_LISTEN = "127.0.0.1:9876"
"""Dev default: loopback only. In a pod, listen on ``0.0.0.0:9876`` (RocketMQ's port)."""


@dataclasses.dataclass(frozen=True, slots=True)
class NameServerSettings:
    """Settings of one name-server process."""

    listen: str = DEFAULT_LISTEN
    """``HOST:PORT`` to serve gRPC on (and Remoting, unless ``remoting_listen`` is another
    address); port 0 picks a free port."""

    remoting_listen: str = ""
    """``HOST:PORT`` to serve Remoting (classic clients) on; "" or equal to ``listen`` shares
    ``listen``'s port (the first byte tells the protocols apart)."""

    kv_entries_max: int = kv_config.KV_ENTRIES_MAX
    """Entries the KV config holds over all namespaces (PUT_KV_CONFIG beyond: SYSTEM_BUSY)."""

    remoting: remoting_transport.TransportSettings = dataclasses.field(
        default_factory=remoting_transport.TransportSettings
    )
    """Bounds of the Remoting server (connections, requests in flight, idle timeout)."""

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

    auth: inner_auth.NameServerAuthSettings = dataclasses.field(
        default_factory=inner_auth.NameServerAuthSettings
    )
    """``[auth]``: the inner credential brokers must sign registrations with (``inner_auth``)."""

    tls: tls.TlsSettings = dataclasses.field(default_factory=tls.TlsSettings)
    """TLS of the name server's port (``[tls]``; ``common.tls``): gRPC and Remoting alike."""

    def __post_init__(self) -> None:
        grpc_server.parse_listen(self.listen)
        if self.remoting_listen:
            grpc_server.parse_listen(self.remoting_listen)
        if not 1 <= self.kv_entries_max <= 10_000_000:
            raise ValueError("kv_entries_max must be 1..10000000")
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
        self._channels = channel_pool.ChannelPool(  # forwards to brokers: TLS when enforcing
            channels_max=settings.broker_channels_max,
            credentials=grpc_tls.inner_credentials(settings.tls, lambda: self.server_tls),
        )
        self._latency = rpc_latency.RpcLatency()
        self.kv = kv_config.KvConfig(entries_max=settings.kv_entries_max)
        self._port: int | None = None
        self.remoting_port: int | None = None
        """The bound Remoting port once ``started`` is set (``port`` when they share one)."""
        self.metrics_port: int | None = None
        """The bound ``/metrics`` port when ``settings.metrics_listen`` is set and serving."""
        self.started = asyncio.Event()
        """Set once the gRPC server is listening (``port`` is then known)."""
        self.server_tls: tls.ServerTls | None = None
        """The process's one TLS (``[tls]``, built at ``serve`` unless ``disabled``), handed to
        every listener; ``None``: plaintext."""

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
        auth = self._settings.auth
        if auth.enforced:
            _log.info("broker registration requires the inner credential")
        else:
            _log.info("broker registration is open (no [auth] inner credential configured)")
        checker = inner_auth.InnerAuthenticator(auth) if auth.enforced else None
        return [
            guard.service_handler(
                pb.REGISTRY_SERVICE,
                service.RegistryService(self.manager, checker),
                latency=self._latency,
            ),
            guard.service_handler(pb.MESSAGING_SERVICE, messaging, latency=self._latency),
            guard.service_handler(
                pb.V2_ADMIN_SERVICE,
                v2_admin.NamesrvV2Admin(self.manager, forwarder),
                latency=self._latency,
            ),
        ]

    async def _write_perm(self, broker_name: ids.BrokerName, writable: bool) -> int:
        """205/327 of the Remoting port: the group master's write permission, set."""
        forwarder = forward.Forwarder(
            self.manager,
            self._channels,
            forward_timeout_s=self._settings.forward_timeout_ms / 1000,
        )
        return await forwarder.set_write_perm(broker_name, writable=writable)

    def _writers(self) -> inner_auth.InnerAuthenticator | None:
        """The check of Remoting KV writes: the inner credential's, when enforced."""
        auth = self._settings.auth
        return inner_auth.InnerAuthenticator(auth) if auth.enforced else None

    async def serve(self, stop: asyncio.Event) -> None:
        """Serve until ``stop`` is set, then shut down cleanly.

        Raises:
            OSError: if the listen address cannot be bound.
        """
        server = grpc_server.build(self._settings.server, self._handlers())
        remoting = remoting_transport.RemotingServer(
            remoting_service.RemotingNameService(
                self.manager, self.kv, self._writers(), self._write_perm
            ).handlers(),
            settings=self._settings.remoting,
        )
        private_dir = tempfile.mkdtemp(prefix="ariane-namesrv-")
        try:
            self.server_tls = tls.process_server_tls(self._settings.tls)  # loads, or no start
            closer = await self._listen(server, remoting, private_dir)
        except BaseException:
            shutil.rmtree(private_dir, ignore_errors=True)
            raise
        _log.info(
            "name server listening on %s (gRPC port %d, Remoting port %s)",
            self._settings.listen,
            self._port,
            self.remoting_port,
        )
        exposition = metrics.MetricsServer(
            metrics.NameServerCollector(
                metrics.loop_source(asyncio.get_running_loop(), self.metrics_snapshot)
            )
        )
        try:
            if self._settings.metrics_listen:
                self.metrics_port = exposition.start(self._settings.metrics_listen, self.server_tls)
                _log.info("metrics on %s/metrics", exposition.url(self._settings.metrics_listen))
            self.started.set()
            async with asyncio.TaskGroup() as tasks:
                scan = tasks.create_task(self._scan_loop(), name="scan-not-active-brokers")
                await stop.wait()
                scan.cancel()
        finally:
            _log.info("name server stopping")
            exposition.close()
            # gRPC first: its GOAWAY and last answers still pass the front's splices.
            await server.stop(self._settings.server.shutdown_grace_ms / 1000)
            await closer()
            shutil.rmtree(private_dir, ignore_errors=True)
            await self._channels.close()
            _log.info("name server stopped")

    async def _listen(
        self,
        server: grpc.aio.Server,
        remoting: remoting_transport.RemotingServer,
        private_dir: str,
    ) -> Callable[[], Awaitable[None]]:
        """Bind gRPC and Remoting as the port layout says; returns what closes Remoting.

        Raises:
            OSError: an address cannot be bound.
        """
        settings = self._settings
        server_tls = self.server_tls
        if settings.remoting_listen and settings.remoting_listen != settings.listen:
            # gRPC bound directly on ``listen`` (not through the front): grpcio does the TLS
            # of ``[tls]`` itself (``grpcwire.ports``: credentials re-read on rotation, a
            # splicing front for ``permissive``)
            served = grpc_ports.ServedPort(settings.listen, server_tls)
            self._port = await served.start(server)
            self.remoting_port = await _start_listener(
                server,
                lambda host, port: remoting.start(host, port, server_tls),
                settings.remoting_listen,
            )

            async def close_both() -> None:
                served.stop_accepting()
                await remoting.close()
                await served.stop()

            return close_both
        path = os.path.join(private_dir, "grpc.sock")
        if server.add_insecure_port(f"unix:{path}") == 0:
            raise OSError(f"cannot listen on unix:{path}")
        await server.start()
        front = remoting_front.SharedPortFront(remoting, grpc_unix_path=path)
        self._port = self.remoting_port = await _start_listener(
            server, lambda host, port: front.start(host, port, server_tls), settings.listen
        )
        return front.close

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


async def _start_listener(
    server: grpc.aio.Server,
    start: Callable[[str, int], Awaitable[tuple[str, int]]],
    listen: str,
) -> int:
    """Start a listener on ``listen`` and return its port; on failure stop the started gRPC
    server and raise.

    Raises:
        OSError: ``listen`` cannot be bound ("cannot listen on ...", as the gRPC bind says).
    """
    host, port = grpc_server.parse_listen(listen)
    try:
        _, bound = await start(host, port)
    except OSError as exc:
        await server.stop(None)
        raise OSError(f"cannot listen on {listen}: {exc}") from exc
    return bound
