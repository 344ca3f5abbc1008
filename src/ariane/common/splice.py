"""A byte splice between two asyncio transports: what the name server's shared-port front
(``remoting.front``) and the broker's permissive gRPC front (``grpcwire.ports``) forward raw
connections with.

Each ``Splice`` is one side's receiving end: bytes received are written to its ``peer``'s
transport, with flow control (a peer whose buffer is full pauses reading here), half-closes
passed on (the other direction stays open, except on a TLS transport, which asyncio closes
after EOF), and either side's close closing the other. Bytes that arrive before ``attach`` are
kept and flushed then.

Ownership: every live splice is in the ``live`` set its owner passes in (the owner closes them
on shutdown and bounds their count); a splice removes itself when its connection is lost.
"""

from __future__ import annotations

import asyncio

from ariane.common import event_loop


class Splice(asyncio.Protocol):
    """One side of a spliced connection.

    Args:
        live: the owner's set of open splices (this one is added on connect, removed on loss).
    """

    def __init__(self, live: set[Splice]) -> None:
        self.live = live
        self.transport: asyncio.Transport | None = None
        self.peer: Splice | None = None
        self.pending: list[bytes] = []

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = event_loop.stream_transport(transport)
        self.live.add(self)

    def attach(self, peer: Splice) -> None:
        """Forward to ``peer`` from now on (flushing what arrived before it existed)."""
        self.peer = peer
        assert peer.transport is not None
        for chunk in self.pending:
            peer.transport.write(chunk)
        self.pending.clear()

    def data_received(self, data: bytes) -> None:
        if self.peer is None or self.peer.transport is None:
            self.pending.append(data)
            return
        self.peer.transport.write(data)

    def eof_received(self) -> bool:
        peer_transport = None if self.peer is None else self.peer.transport
        if peer_transport is not None and peer_transport.can_write_eof():
            peer_transport.write_eof()
            # Keep the other direction open until it ends too, where the transport can: a TLS
            # transport closes after EOF whatever this returns (and asyncio logs a WARNING
            # for every such connection when it says True).
            return self.transport is None or self.transport.get_extra_info("sslcontext") is None
        return False

    def pause_writing(self) -> None:
        # Our transport's buffer is full: stop reading from the side that fills it.
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.pause_reading()

    def resume_writing(self) -> None:
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.resume_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        self.live.discard(self)
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.close()
