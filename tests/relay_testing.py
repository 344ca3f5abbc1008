"""Serving a test implementation through the relay, as a broker with front-end workers does.

``with_relayed_server`` runs the owner's ``RelayServer`` and one worker's ``RelayForwarder``
(with its real ``grpc.aio`` server on a free loopback port) in the test's event loop, so a
test can call the worker's port with a real gRPC channel and reach the implementation through
the relay's frames.
"""

from __future__ import annotations

import contextlib
import pathlib
import tempfile
from collections.abc import AsyncIterator, Sequence

import grpc

from ariane.grpcwire import guard, pb, relay, server


@contextlib.asynccontextmanager
async def relayed_server(
    implementations: Sequence[tuple[pb.ServiceDescriptor, object]] | None = None,
    *,
    implementation: object | None = None,
    calls_max: int = 64,
) -> AsyncIterator[tuple[grpc.aio.Channel, relay.RelayServer, relay.RelayForwarder]]:
    """Serve through a relay; yields a channel to the worker's port, the owner and the worker."""
    served = (
        list(implementations)
        if implementations is not None
        else [(pb.MESSAGING_SERVICE, implementation)]
    )
    methods = [m for s, impl in served for m in guard.guarded_methods(s, impl)]
    owner = relay.RelayServer(methods, calls_max=calls_max)
    with tempfile.TemporaryDirectory(prefix="ariane-relay-test-") as directory:
        socket_path = str(pathlib.Path(directory) / "relay.sock")
        await owner.start(socket_path)
        forwarder = await relay.RelayForwarder.connect(socket_path)
        worker = server.build(server.ServerSettings(), forwarder.handlers([s for s, _ in served]))
        port = server.bind(worker, "127.0.0.1:0")
        await worker.start()
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                yield channel, owner, forwarder
        finally:
            await worker.stop(None)
            forwarder.close()
            await owner.close()
