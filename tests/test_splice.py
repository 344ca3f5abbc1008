"""``common.splice.Splice`` passes a half-close on, keeping the other direction open only where
the transport can (plaintext); a TLS transport's EOF is not answered with a request asyncio
ignores (and warns about on every closed TLS connection)."""

from __future__ import annotations

import asyncio
import ssl
from typing import Any

from ariane.common.splice import Splice


class _Transport(asyncio.Transport):
    """A transport that records writes and half-closes; TLS when it has an ``sslcontext``."""

    def __init__(self, tls: bool) -> None:
        super().__init__()
        self.extra: dict[str, Any] = {"sslcontext": ssl.create_default_context()} if tls else {}
        self.written: list[bytes] = []
        self.eof_written = False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self.extra.get(name, default)

    def can_write_eof(self) -> bool:
        return True

    def write_eof(self) -> None:
        self.eof_written = True

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.written.append(bytes(data))


def _pair(tls_inbound: bool) -> tuple[Splice, _Transport]:
    """A spliced pair: the inbound side (TLS or not) and the plaintext outbound transport."""
    live: set[Splice] = set()
    inbound, outbound = Splice(live), Splice(live)
    inbound.connection_made(_Transport(tls_inbound))
    peer_transport = _Transport(tls=False)
    outbound.connection_made(peer_transport)
    inbound.attach(outbound)
    outbound.attach(inbound)
    return inbound, peer_transport


def test_a_tls_sides_eof_is_passed_on_and_lets_the_transport_close() -> None:
    """EOF from a TLS client half-closes the inner connection and returns False: asyncio's TLS
    transport closes after EOF whatever the protocol says, and logs a WARNING ("returning true
    from eof_received() has no effect when using ssl") when it says True."""
    inbound, peer = _pair(tls_inbound=True)

    keep_open = inbound.eof_received()

    assert peer.eof_written
    assert keep_open is False


def test_a_plaintext_sides_eof_keeps_the_other_direction_open() -> None:
    """EOF from a plaintext client half-closes the inner connection and keeps the transport
    open for the answer still coming back (True)."""
    inbound, peer = _pair(tls_inbound=False)

    keep_open = inbound.eof_received()

    assert peer.eof_written
    assert keep_open is True
