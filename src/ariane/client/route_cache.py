"""Topic routes for producers and consumers: QueryRoute on the name servers, cached, refreshed.

A route lists every queue of a topic with its broker group, the master's gRPC endpoint and what
the queue accepts (grpc-v2.md §5.1, §6.1). Like the official clients, only entries of masters
(broker id 0) are kept; producers send to writable queues, consumers receive from readable ones.

``RouteCache`` answers from memory while a route is younger than ``refresh_interval_ms``
(RocketMQ's clients refresh every 30 s), fetches it otherwise, and keeps serving the old route
when the name servers cannot be reached (logged), as the clients do. Fetches run one at a time
(they are rare); a topic unknown to the name servers raises ``TopicNotFoundError``.

Invariants: at most ``topics_max`` routes are held (least recently used dropped first); a route
is never mutated once built; the fetch is a seam (``fetch`` callable) so the cache is tested
without sockets.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import logging
from collections.abc import Awaitable, Callable, Sequence

from ariane.client import transport as transport_mod
from ariane.common import clock, errors, ids
from ariane.grpcwire import codes, convert, pb

_log = logging.getLogger(__name__)

REFRESH_INTERVAL_MS_DEFAULT = 30_000
"""How old a route may get before it is fetched again (the clients' 30 s route refresh)."""

TOPICS_MAX_DEFAULT = 1024
"""Most topic routes one cache holds."""

_READABLE = (pb.v2.Permission.READ, pb.v2.Permission.READ_WRITE)
_WRITABLE = (pb.v2.Permission.WRITE, pb.v2.Permission.READ_WRITE)


@dataclasses.dataclass(frozen=True, slots=True)
class QueueRoute:
    """One queue of a topic on one broker group's master.

    Attributes:
        broker_name: the broker group.
        queue_id: the queue id on that broker.
        endpoint: ``host:port`` of the master's gRPC endpoint.
        readable: consumers may receive from it.
        writable: producers may send to it.
        accepted_types: the ``pb.v2.MessageType`` values it accepts.
        message_queue: the route entry as the name server sent it (what ReceiveMessage names);
            never mutated.
    """

    broker_name: ids.BrokerName
    queue_id: ids.QueueId
    endpoint: str
    readable: bool
    writable: bool
    accepted_types: frozenset[int]
    message_queue: pb.v2.MessageQueue


@dataclasses.dataclass(frozen=True, slots=True)
class TopicRoute:
    """Where a topic lives (RocketMQ ``TopicRouteData`` as a v2 client sees it).

    Attributes:
        topic: the topic.
        writable: the masters' writable queues, in route order.
        readable: the masters' readable queues, in route order.
    """

    topic: str
    writable: tuple[QueueRoute, ...]
    readable: tuple[QueueRoute, ...]

    @property
    def endpoints(self) -> frozenset[str]:
        """Every broker endpoint of the route."""
        return frozenset(q.endpoint for q in (*self.writable, *self.readable))


def route_of(topic: str, queues: Sequence[pb.v2.MessageQueue]) -> TopicRoute:
    """The route of ``topic`` from the entries of a QueryRoute answer (masters only).

    Raises:
        ValueError: if a master entry carries no usable endpoint.
    """
    found: list[QueueRoute] = []
    for queue in queues:
        if queue.broker.id != ids.MASTER_BROKER_ID:
            continue
        found.append(
            QueueRoute(
                broker_name=ids.BrokerName(queue.broker.name),
                queue_id=ids.QueueId(queue.id),
                endpoint=convert.first_address(queue.broker.endpoints),
                readable=queue.permission in _READABLE,
                writable=queue.permission in _WRITABLE,
                accepted_types=frozenset(int(t) for t in queue.accept_message_types),
                message_queue=queue,
            )
        )
    return TopicRoute(
        topic=topic,
        writable=tuple(q for q in found if q.writable),
        readable=tuple(q for q in found if q.readable),
    )


async def query_route(
    transport: transport_mod.Transport, namesrv_endpoints: Sequence[str], topic: str
) -> TopicRoute:
    """QueryRoute of ``topic`` on the name servers, tried in order until one answers.

    Raises:
        TopicNotFoundError: no broker group serves the topic.
        IllegalTopicError: the name breaks RocketMQ's rules.
        NameServerUnreachableError: no name server answered.
    """
    failures: list[str] = []
    for endpoint in namesrv_endpoints:
        request = pb.v2_service.QueryRouteRequest(
            topic=convert.resource(topic), endpoints=convert.endpoints(endpoint)
        )
        try:
            response = await transport.unary(
                endpoint, "QueryRoute", request, pb.v2_service.QueryRouteResponse
            )
        except (transport_mod.BrokerUnreachableError, errors.RequestTimeoutError) as exc:
            failures.append(exc.message)
            continue
        codes.raise_for_status(response.status)
        return route_of(topic, response.message_queues)
    raise transport_mod.NameServerUnreachableError(
        "no name server answered QueryRoute (" + "; ".join(failures) + "); check the endpoints "
        "and that `ariane namesrv` runs there"
    )


class RouteCache:
    """Topic routes by name, fetched on first use and again when older than the interval.

    Args:
        fetch: gets a topic's route (e.g. ``query_route`` bound to a transport).
        refresh_interval_ms: age after which a route is fetched again, ms (1 s .. 1 h).
        topics_max: most routes held (1 .. 100 000).
        time: the clock that ages routes.

    Raises:
        ValueError: for bounds outside their ranges.
    """

    def __init__(
        self,
        fetch: Callable[[str], Awaitable[TopicRoute]],
        *,
        refresh_interval_ms: int = REFRESH_INTERVAL_MS_DEFAULT,
        topics_max: int = TOPICS_MAX_DEFAULT,
        time: clock.Clock | None = None,
    ) -> None:
        if not 1_000 <= refresh_interval_ms <= 3_600_000:
            raise ValueError(
                f"refresh_interval_ms must be 1000..3600000, not {refresh_interval_ms}"
            )
        if not 1 <= topics_max <= 100_000:
            raise ValueError(f"topics_max must be 1..100000, not {topics_max}")
        self._fetch = fetch
        self._refresh_interval_ms = refresh_interval_ms
        self._topics_max = topics_max
        self._clock = time or clock.SystemClock()
        self._routes: collections.OrderedDict[str, tuple[int, TopicRoute]] = (
            collections.OrderedDict()
        )
        self._lock = asyncio.Lock()

    def __len__(self) -> int:
        return len(self._routes)

    def _fresh(self, topic: str) -> TopicRoute | None:
        held = self._routes.get(topic)
        if held is None:
            return None
        fetched_ms, found = held
        if self._clock.monotonic_ms() - fetched_ms >= self._refresh_interval_ms:
            return None
        self._routes.move_to_end(topic)
        return found

    async def get(self, topic: str) -> TopicRoute:
        """The route of ``topic``, from memory while fresh.

        Raises:
            TopicNotFoundError, IllegalTopicError, NameServerUnreachableError: as the fetch
                raises them (the last only when no older route is held).
        """
        found = self._fresh(topic)
        if found is not None:
            return found
        async with self._lock:
            found = self._fresh(topic)  # fetched by another caller while this one waited
            return found if found is not None else await self._refresh(topic)

    async def _refresh(self, topic: str) -> TopicRoute:
        stale = self._routes.get(topic)
        try:
            found = await self._fetch(topic)
        except (errors.ServiceUnavailableError, errors.RequestTimeoutError) as exc:
            if stale is None:
                raise
            _log.warning("keeping the old route of %s: %s", topic, exc.message)
            found = stale[1]
        self._routes[topic] = (self._clock.monotonic_ms(), found)
        self._routes.move_to_end(topic)
        while len(self._routes) > self._topics_max:
            self._routes.popitem(last=False)
        return found

    def invalidate(self, topic: str) -> None:
        """Make the next ``get`` of ``topic`` fetch its route again (after a broker failed); the
        old route is still served if the name servers cannot be reached."""
        held = self._routes.get(topic)
        if held is not None:
            self._routes[topic] = (held[0] - self._refresh_interval_ms, held[1])
