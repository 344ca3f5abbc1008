"""What every producer or consumer instance holds: its name servers, transport and routes.

``ConnectionSettings`` groups the settings the two share (deadline, route refresh, bounds).
``Session`` owns one ``Transport`` (channels and the ``x-mq-client-id``) and one ``RouteCache``
fed by QueryRoute on the name servers, remembers which brokers it talked to, and on ``close()``
tells them the client is gone (NotifyClientTermination, best effort, as the official clients do
on shutdown) before closing its channels.

Invariants: the set of brokers remembered is bounded by ``channels_max``; ``close()`` is
idempotent.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from collections.abc import Sequence

from ariane.client import credentials as credentials_mod
from ariane.client import route_cache
from ariane.client import transport as transport_mod
from ariane.common import clock, errors, ids
from ariane.grpcwire import convert, pb
from ariane.grpcwire import tls as grpc_tls

_log = logging.getLogger(__name__)

CLOSE_TIMEOUT_S = 2.0
"""Deadline of the NotifyClientTermination calls made on close, seconds."""


@dataclasses.dataclass(frozen=True, slots=True)
class ConnectionSettings:
    """How a client instance talks to the cluster."""

    request_timeout_s: float = transport_mod.DEFAULT_TIMEOUT_S
    """Deadline of each call, seconds (0.1 .. 600). The official clients use 3 s; ours carry
    batches of up to megabytes, so the default is larger."""

    route_refresh_interval_s: float = route_cache.REFRESH_INTERVAL_MS_DEFAULT / 1000
    """Age after which a topic route is fetched again, seconds (1 .. 3600; the clients: 30)."""

    topics_max: int = route_cache.TOPICS_MAX_DEFAULT
    """Most topic routes held (1 .. 100 000)."""

    channels_max: int = 64
    """Most gRPC channels kept open, name servers and brokers together (1 .. 100 000)."""

    credentials: credentials_mod.Credentials | None = None
    """What every call is signed with when the brokers enforce ACL 2.0 (RocketMQ
    ``SessionCredentialsProvider``); ``None``: unsigned."""

    tls: grpc_tls.ClientTls | None = None
    """TLS to name servers and brokers (the CA file that verifies them, an optional client
    certificate); ``None``: plaintext (the official Python client's ``tls_enable``)."""

    def __post_init__(self) -> None:
        transport_mod.check_timeout_s("request_timeout_s", self.request_timeout_s)
        if not 1 <= self.route_refresh_interval_s <= 3600:
            raise ValueError(
                f"route_refresh_interval_s must be 1..3600, not {self.route_refresh_interval_s}"
            )


class Session:
    """Transport, routes and broker bookkeeping of one client instance.

    Args:
        namesrv_endpoints: ``host:port`` of the name servers (sequence or ``;``-separated).
        settings: connection settings.
        time: the clock that ages routes.
        transport: the transport to use (tests pass a fake); a new one when ``None``.

    Raises:
        ValueError: for malformed endpoints or settings out of range.
    """

    def __init__(
        self,
        namesrv_endpoints: str | Sequence[str],
        settings: ConnectionSettings,
        *,
        time: clock.Clock | None = None,
        transport: transport_mod.Transport | None = None,
    ) -> None:
        self.namesrv_endpoints = transport_mod.parse_endpoints(namesrv_endpoints)
        self.settings = settings
        self.transport = transport or transport_mod.Transport(
            timeout_s=settings.request_timeout_s,
            channels_max=settings.channels_max,
            credentials=settings.credentials,
            tls=settings.tls,
        )
        self.routes = route_cache.RouteCache(
            self._query_route,
            refresh_interval_ms=int(settings.route_refresh_interval_s * 1000),
            topics_max=settings.topics_max,
            time=time,
        )
        self._brokers: set[str] = set()
        self._closed = False

    @property
    def client_id(self) -> ids.ClientId:
        """The ``x-mq-client-id`` of this client instance."""
        return self.transport.client_id

    @property
    def closed(self) -> bool:
        """Whether ``close()`` was called."""
        return self._closed

    def check_open(self) -> None:
        """Refuse calls after ``close()``.

        Raises:
            ArianeError: the client is closed (a programming error of the caller).
        """
        if self._closed:
            raise errors.ArianeError("this client is closed; make a new one")

    async def _query_route(self, topic: str) -> route_cache.TopicRoute:
        return await route_cache.query_route(self.transport, self.namesrv_endpoints, topic)

    def used(self, endpoint: str) -> None:
        """Remember that a call went to broker ``endpoint`` (told about ``close()``)."""
        if len(self._brokers) < self.settings.channels_max:
            self._brokers.add(endpoint)

    async def close(self, group: str | None = None) -> None:
        """Tell every broker used that the client is gone, then close the channels.

        Args:
            group: the consumer group of a consumer (``None`` for producers).
        """
        if self._closed:
            return
        self._closed = True
        request = pb.v2_service.NotifyClientTerminationRequest()
        if group is not None:
            request.group.CopyFrom(convert.resource(group))
        for endpoint in sorted(self._brokers):
            with contextlib.suppress(errors.ArianeError):
                await self.transport.unary(
                    endpoint,
                    "NotifyClientTermination",
                    request,
                    pb.v2_service.NotifyClientTerminationResponse,
                    timeout_s=CLOSE_TIMEOUT_S,
                )
        await self.transport.close()
