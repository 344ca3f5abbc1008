"""A bounded pool of client channels to the cluster's other servers, plaintext or TLS.

``ChannelPool`` keeps at most ``channels_max`` ``grpc.aio`` channels keyed by ``host:port``
(brokers to name servers, the access point to brokers, slaves to their master, the admin
client), closing the least recently used one when full. Invariants: one event loop uses a
pool; channels reconnect within ``RECONNECT_BACKOFF_MS_MAX``; with a ``CredentialsSource`` a
rotated client certificate retires every open channel (closed ``RETIRED_CHANNEL_GRACE_S``
later), so no reconnect presents an old certificate.
"""

from __future__ import annotations

import asyncio
import collections
from typing import Protocol, runtime_checkable

import grpc

CLIENT_MESSAGE_BYTES_MAX = 130 * 1024 * 1024
"""Largest message a pooled channel sends or receives (matches the server side)."""

RECONNECT_BACKOFF_MS_MAX = 1_000
"""Longest wait of a pooled channel between two connection attempts, ms. Pooled channels link
the cluster's own processes (broker -> name server, name server -> broker); gRPC's default grows
to 120 s, so a peer restarted after a SIGKILL stayed unreachable for tens of seconds. RocketMQ's
gRPC client reconnects on the next request."""


CONNECT_TIMEOUT_MS = 20_000
"""Least time a pooled channel's connection attempt (TCP connect, then the server's HTTP/2
SETTINGS) gets, ms: gRPC's own MIN_CONNECT_TIMEOUT (doc/connection-backoff.md). gRPC core reads
it from ``grpc.min_reconnect_backoff_ms``, which whatever its name is not a backoff
(``Subchannel``: attempt deadline = max(next backoff, now + that)). It used to be 100 ms here,
so a server process that took longer to answer a new connection on a loaded machine failed the
call at once: "connection attempt timed out before receiving SETTINGS frame"."""


@runtime_checkable
class CredentialsSource(Protocol):
    """Channel credentials that may change over a process's life (a rotated client
    certificate): ``current()`` answers ``(generation, credentials)``, the generation growing
    with each change (``grpcwire.tls.InnerCredentials``)."""

    def current(self) -> tuple[int, grpc.ChannelCredentials]:
        """The credentials for a new channel and their generation."""
        ...


RETIRED_CHANNEL_GRACE_S = 60.0
"""How long a channel replaced because the pool's credentials changed keeps serving the calls
already on it (a long-polling call lasts up to 30 s) before it is closed, s."""


class ChannelPool:
    """A bounded set of ``grpc.aio`` channels keyed by ``host:port``, plaintext or TLS.

    The least recently used channel is closed when a new address would exceed
    ``channels_max``. Not thread-safe: use it from one event loop.

    With a ``CredentialsSource``, each ``get`` asks it for the current credentials; when their
    generation changed (a client certificate rotated on disk), every open channel is retired:
    new calls get new channels made with the new credentials, calls already on the old ones
    finish, and the old channels are closed ``RETIRED_CHANNEL_GRACE_S`` later (or by
    ``close``). A channel's own reconnects would otherwise present the old certificate forever.

    Args:
        channels_max: most channels kept open at once (retired ones not counted).
        credentials: TLS for every channel (``grpcwire.tls``), fixed or from a source;
            ``None``: plaintext.
    """

    def __init__(
        self,
        *,
        channels_max: int = 64,
        credentials: grpc.ChannelCredentials | CredentialsSource | None = None,
    ) -> None:
        if not 1 <= channels_max <= 100_000:
            raise ValueError(f"channels_max must be 1..100000, not {channels_max}")
        self._channels_max = channels_max
        self._source: CredentialsSource | None = None
        self._credentials: grpc.ChannelCredentials | None = None
        if isinstance(credentials, CredentialsSource):
            self._source = credentials
        else:
            self._credentials = credentials
        self._generation = 0
        self._channels: collections.OrderedDict[str, grpc.aio.Channel] = collections.OrderedDict()
        self._retiring: set[asyncio.Task[None]] = set()
        self.retired_channels = 0
        """Channels replaced because the credentials changed."""

    def __len__(self) -> int:
        return len(self._channels)

    def _follow_source(self) -> None:
        """Take the source's credentials; retire every channel when they changed."""
        assert self._source is not None
        generation, credentials = self._source.current()
        if generation == self._generation:
            return
        if self._channels:
            retired = list(self._channels.values())
            self._channels.clear()
            self.retired_channels += len(retired)
            task = asyncio.get_running_loop().create_task(self._close_later(retired))
            self._retiring.add(task)
            task.add_done_callback(self._retiring.discard)
        self._generation, self._credentials = generation, credentials

    @staticmethod
    async def _close_later(channels: list[grpc.aio.Channel]) -> None:
        try:
            await asyncio.sleep(RETIRED_CHANNEL_GRACE_S)
        finally:
            for channel in channels:
                await channel.close()

    async def get(self, address: str, *, server_name: str = "") -> grpc.aio.Channel:
        """The channel to ``host:port``, opened on first use (with the source's current
        credentials).

        ``server_name``: over TLS, the name the server's certificate is verified against
        instead of ``address``'s host (``grpc.ssl_target_name_override``): an address
        resolved from a DNS name (a headless Service's pod IPs) is checked against that name.
        """
        if self._source is not None:
            self._follow_source()
        key = f"{address}#{server_name}" if server_name else address
        channel = self._channels.get(key)
        if channel is not None:
            self._channels.move_to_end(key)
            return channel
        while len(self._channels) >= self._channels_max:
            _, oldest = self._channels.popitem(last=False)
            await oldest.close()
        options: list[tuple[str, int | str]] = [
            ("grpc.max_receive_message_length", CLIENT_MESSAGE_BYTES_MAX),
            ("grpc.max_send_message_length", CLIENT_MESSAGE_BYTES_MAX),
            ("grpc.initial_reconnect_backoff_ms", 100),
            ("grpc.min_reconnect_backoff_ms", CONNECT_TIMEOUT_MS),
            ("grpc.max_reconnect_backoff_ms", RECONNECT_BACKOFF_MS_MAX),
        ]
        if server_name and self._credentials is not None:
            options.append(("grpc.ssl_target_name_override", server_name))
        channel = (
            grpc.aio.insecure_channel(address, options=options)
            if self._credentials is None
            else grpc.aio.secure_channel(address, self._credentials, options=options)
        )
        self._channels[key] = channel
        return channel

    async def close(self) -> None:
        """Close every channel, the retired ones too."""
        while self._channels:
            _, channel = self._channels.popitem(last=False)
            await channel.close()
        for task in list(self._retiring):
            task.cancel()  # closes its channels now
        await asyncio.gather(*self._retiring, return_exceptions=True)
