"""Issue 11's "Done when": a broker implements every ``apache.rocketmq.v2.MessagingService`` RPC
the official clients call, so none answers NOT_IMPLEMENTED (``grpcwire.guard`` answers that for
an RPC without a snake-case handler)."""

from __future__ import annotations

from ariane.broker.grpc import messaging
from ariane.grpcwire import guard, pb

NOT_CALLED_BY_THE_CLIENTS = frozenset({"SyncLiteSubscription"})
"""RPCs of the proto no official client of the pinned versions calls on a normal or FIFO
consumer: SyncLiteSubscription is only the Python client's LitePushConsumer's (lite topics)."""


def test_every_rpc_the_official_clients_call_has_a_broker_handler() -> None:
    """Each MessagingService RPC but SyncLiteSubscription has a handler on the broker's
    MessagingService, and the proto lists no RPC this audit does not know."""
    names = {method.name for method in pb.MESSAGING_SERVICE.methods}
    assert names >= NOT_CALLED_BY_THE_CLIENTS
    missing = sorted(
        name
        for name in names - NOT_CALLED_BY_THE_CLIENTS
        if not callable(getattr(messaging.MessagingService, guard.snake_case(name), None))
    )
    assert missing == []
    assert len(names) == 17, sorted(names)
