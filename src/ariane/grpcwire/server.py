"""Build the ``grpc.aio`` server every Ariane process serves on, with DESIGN §4's options.

* Max receive size above a 4 MiB body plus headers: 130 MiB as the Java proxy (grpcio's 4 MiB
  default rejects a 4 MiB message, grpc-v2.md §7.8).
* Keepalive pings from clients without calls are permitted down to every 10 s, so Java clients
  pinging every 30 s are never sent GOAWAY ``too_many_pings`` (§7.14).
* Bounded concurrency: at most ``concurrent_rpcs_max`` calls at once (later ones fail fast with
  RESOURCE_EXHAUSTED) and ``streams_per_connection_max`` streams per connection.
* No ``SO_REUSEPORT``: starting a second server on a port in use fails instead of sharing it,
  except for a broker's front-end workers, which share the port its owner reserved
  (``reserve_port``: checked free without ``SO_REUSEPORT`` first, then held with it).
* Plaintext, or TLS with ``credentials`` (``grpcwire.tls``); ``grpcwire.ports`` picks by the
  ``[tls]`` mode (``permissive`` binds Unix sockets behind a splicing front).
"""

from __future__ import annotations

import dataclasses
import socket
from collections.abc import Sequence

import grpc

from ariane.grpcwire import convert

MIB = 1024 * 1024


@dataclasses.dataclass(frozen=True, slots=True)
class ServerSettings:
    """Options of a ``grpc.aio`` server."""

    receive_message_bytes_max: int = 130 * MIB
    """Largest request accepted (Java proxy ``grpcMaxInboundMessageSize``: 130 MiB)."""

    send_message_bytes_max: int = 130 * MIB
    """Largest response sent."""

    client_ping_interval_ms_min: int = 10_000
    """Shortest interval between client keepalive pings without data that is not a strike."""

    concurrent_rpcs_max: int = 4096
    """Calls served at once; more fail with RESOURCE_EXHAUSTED (telemetry streams count)."""

    streams_per_connection_max: int = 1024
    """Concurrent HTTP/2 streams one client connection may open."""

    shutdown_grace_ms: int = 5_000
    """How long a stopping server lets calls in flight finish."""

    def __post_init__(self) -> None:
        if not 4 * MIB < self.receive_message_bytes_max <= 1024 * MIB:
            raise ValueError("receive_message_bytes_max must be above 4 MiB and at most 1 GiB")
        if not 4 * MIB < self.send_message_bytes_max <= 1024 * MIB:
            raise ValueError("send_message_bytes_max must be above 4 MiB and at most 1 GiB")
        if not 1_000 <= self.client_ping_interval_ms_min <= 30_000:
            raise ValueError("client_ping_interval_ms_min must be 1000..30000 (Java pings at 30 s)")
        if not 1 <= self.concurrent_rpcs_max <= 1_000_000:
            raise ValueError("concurrent_rpcs_max must be 1..1000000")
        if not 1 <= self.streams_per_connection_max <= 65_536:
            raise ValueError("streams_per_connection_max must be 1..65536")
        if not 0 <= self.shutdown_grace_ms <= 600_000:
            raise ValueError("shutdown_grace_ms must be 0..600000")


def grpc_options(settings: ServerSettings, *, reuse_port: bool = False) -> list[tuple[str, int]]:
    """The grpc channel arguments of ``settings``; ``reuse_port`` joins a reserved port."""
    return [
        ("grpc.max_receive_message_length", settings.receive_message_bytes_max),
        ("grpc.max_send_message_length", settings.send_message_bytes_max),
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.min_ping_interval_without_data_ms", settings.client_ping_interval_ms_min),
        ("grpc.http2.max_ping_strikes", 0),
        ("grpc.max_concurrent_streams", settings.streams_per_connection_max),
        # a second server on a taken port must fail, not share it (front-end workers excepted)
        ("grpc.so_reuseport", 1 if reuse_port else 0),
    ]


def build(
    settings: ServerSettings,
    handlers: Sequence[grpc.GenericRpcHandler],
    *,
    reuse_port: bool = False,
) -> grpc.aio.Server:
    """A ``grpc.aio`` server with ``handlers`` and the options of ``settings`` (not started);
    ``reuse_port`` lets it share a port held by ``reserve_port`` (front-end workers)."""
    server = grpc.aio.server(
        options=grpc_options(settings, reuse_port=reuse_port),
        maximum_concurrent_rpcs=settings.concurrent_rpcs_max,
    )
    server.add_generic_rpc_handlers(tuple(handlers))
    return server


def parse_listen(text: str) -> tuple[str, int]:
    """Split a ``HOST:PORT`` listen address (port 0 picks a free port).

    Raises:
        ValueError: if ``text`` is not ``HOST:PORT`` with a port in 0..65535.
    """
    host, sep, port_text = text.rpartition(":")
    if not sep or not host or not port_text.isdigit() or int(port_text) > convert.PORT_MAX:
        raise ValueError(f"listen address {text!r} is not HOST:PORT (e.g. 127.0.0.1:9876)")
    return host.strip("[]"), int(port_text)


def bind(
    server: grpc.aio.Server,
    listen: str,
    *,
    credentials: grpc.ServerCredentials | None = None,
) -> int:
    """Listen on ``HOST:PORT``, in plaintext or with TLS ``credentials``; returns the bound
    port.

    Raises:
        ValueError: for a malformed address.
        OSError: if the address cannot be bound (in use, not local).
    """
    host, port = parse_listen(listen)
    return _add_port(server, convert.join_host_port(host, port), credentials, listen)


def bind_unix_abstract(
    server: grpc.aio.Server, name: str, credentials: grpc.ServerCredentials | None
) -> None:
    """Listen on the Linux abstract Unix socket ``name`` (no NUL; gRPC's ``unix-abstract:``
    address) as well, in plaintext or with TLS ``credentials``. Clients reach it at the path
    ``"\\0" + name``; it vanishes with the process.

    Raises:
        OSError: if the socket cannot be created (e.g. the name is taken).
    """
    _add_port(server, f"unix-abstract:{name}", credentials, f"@{name}")


def _add_port(
    server: grpc.aio.Server,
    target: str,
    credentials: grpc.ServerCredentials | None,
    shown: str,
) -> int:
    try:
        if credentials is None:
            bound = server.add_insecure_port(target)
        else:
            bound = server.add_secure_port(target, credentials)
    except RuntimeError as exc:  # grpcio raises RuntimeError when binding fails
        raise OSError(f"cannot listen on {shown}: {exc}") from exc
    if bound == 0:
        raise OSError(f"cannot listen on {shown}")
    return bound


def reserve_port(listen: str) -> tuple[socket.socket, int]:
    """Check that ``HOST:PORT`` is free and hold it for ``SO_REUSEPORT`` servers to share.

    The address is first bound without ``SO_REUSEPORT``, which fails if a socket holds it (so
    two brokers never share a port by accident); then a socket with ``SO_REUSEPORT`` is bound to
    the same port and kept, not listening, until the caller closes it. Servers built with
    ``reuse_port=True`` then listen on that port and the kernel spreads new connections over
    them (nginx/Envoy workers do the same). Port 0 picks a free port.

    Returns:
        ``(holder socket, port)``; close the socket when the servers have stopped.

    Raises:
        ValueError: for a malformed address.
        OSError: if the address is in use or not local.
    """
    host, port = parse_listen(listen)
    family, kind, proto, _, address = socket.getaddrinfo(
        host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    with socket.socket(family, kind, proto) as probe:
        # SO_REUSEADDR as gRPC's own listeners: TIME_WAIT connections of a previous run of the
        # same broker do not block the port, a socket bound or listening there does
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as exc:
            raise OSError(f"cannot listen on {listen}: {exc.strerror}") from exc
        port = probe.getsockname()[1]
    holder = socket.socket(family, kind, proto)
    try:
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        holder.bind((address[0], port, *address[2:]))
    except OSError as exc:
        holder.close()
        raise OSError(f"cannot hold {listen} for the front-end workers: {exc.strerror}") from exc
    return holder, port
