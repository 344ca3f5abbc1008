"""A fake ``Transport`` for client tests without sockets: routes from a table, SendMessage
answered by a coroutine the test supplies, every call recorded."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, cast

from ariane.client import transport
from ariane.common import errors, ids, message
from ariane.grpcwire import codes, convert, pb, rpc

SendAnswer = Callable[
    [str, pb.v2_service.SendMessageRequest], Awaitable[pb.v2_service.SendMessageResponse]
]


def queues(
    topic: str,
    brokers: Sequence[tuple[str, str]],
    *,
    count: int = 4,
    kind: message.MessageType = message.MessageType.NORMAL,
) -> list[pb.v2.MessageQueue]:
    """QueryRoute entries: ``count`` read-write queues on each ``(broker name, endpoint)``."""
    return [
        queue
        for name, endpoint in brokers
        for queue in convert.message_queues(
            topic=convert.resource(topic),
            broker=convert.broker(ids.BrokerName(name), ids.MASTER_BROKER_ID, endpoint),
            read_queue_nums=count,
            write_queue_nums=count,
            perm=6,
            kind=kind,
        )
    ]


async def accept_all(
    endpoint: str, request: pb.v2_service.SendMessageRequest
) -> pb.v2_service.SendMessageResponse:
    """Store every message: OK entries with offsets 0, 1, …"""
    entries = [
        pb.v2_service.SendResultEntry(
            status=codes.ok(), message_id=m.system_properties.message_id, offset=i
        )
        for i, m in enumerate(request.messages)
    ]
    return pb.v2_service.SendMessageResponse(status=codes.ok(), entries=entries)


class FakeTransport(transport.Transport):
    """Answers QueryRoute from ``routes`` and SendMessage with ``answer``; records calls."""

    def __init__(
        self,
        routes: dict[str, list[pb.v2.MessageQueue]],
        answer: SendAnswer = accept_all,
    ) -> None:
        super().__init__(timeout_s=5)
        self.routes = routes
        self.answer = answer
        self.calls: list[tuple[str, str, Any]] = []

    async def unary(
        self,
        endpoint: str,
        rpc_name: str,
        request: Any,
        response_type: type[rpc.M],
        *,
        timeout_s: float | None = None,
    ) -> rpc.M:
        """Answer one call without a network."""
        self.calls.append((endpoint, rpc_name, request))
        if rpc_name == "QueryRoute":
            found = self.routes.get(request.topic.name)
            route = pb.v2_service.QueryRouteResponse(
                status=codes.ok() if found else codes.status(errors.Code.TOPIC_NOT_FOUND),
                message_queues=found or [],
            )
            return cast("rpc.M", route)
        if rpc_name == "SendMessage":
            return cast("rpc.M", await self.answer(endpoint, request))
        if rpc_name == "NotifyClientTermination":
            return cast("rpc.M", pb.v2_service.NotifyClientTerminationResponse(status=codes.ok()))
        raise AssertionError(f"unexpected call {rpc_name}")

    def sent(self) -> list[tuple[str, pb.v2_service.SendMessageRequest]]:
        """The SendMessage calls made, as ``(endpoint, request)``."""
        return [(e, r) for e, name, r in self.calls if name == "SendMessage"]
