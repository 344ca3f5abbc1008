"""Serve ``/metrics`` over HTTP for one process, collecting on its event loop.

``MetricsServer.start`` binds ``HOST:PORT`` (port 0 picks a free one) with prometheus_client's
threaded HTTP server and a private ``CollectorRegistry`` (no process-wide default registry, no
globals). A scrape runs in the HTTP thread, but the snapshot it needs is built on the owner's
event loop (``loop_source``), because the broker's and name server's tables are single-threaded:
the HTTP thread waits at most ``SCRAPE_TIMEOUT_S`` for it.

TLS: given the process's ``common.tls.ServerTls`` (the broker and name server pass it when
``[tls] server_mode = "enforcing"``; permissive and disabled processes serve plain HTTP, which
Prometheus scrapes by default), every accepted connection is wrapped with the metrics context in
service (``ServerTls.metrics_context``: the process's certificate, *no client certificate asked
for* even under ``need_client_auth = "require"``, so a scraper needs only the CA bundle, as the
operator's ServiceMonitor gives it) *in its own handler thread*, bounded by
``handshake_timeout_ms``. prometheus_client's own
``certfile``/``keyfile`` option loads the files once and shakes hands inside ``accept`` on the
one serving thread (a silent client stalls every scrape); this one follows a rotated certificate
within the ``ServerTls`` check interval and a slow handshake holds only its own thread.

Invariants: the server is owned by one composition root, which calls ``close`` before it tears
down what the collectors read.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Callable
from typing import Any, TypeVar
from wsgiref import simple_server

import prometheus_client
from prometheus_client import exposition, registry

from ariane.common import tls
from ariane.grpcwire import server as grpc_server

T = TypeVar("T")

SCRAPE_TIMEOUT_S = 10.0
"""Longest a scrape waits for the event loop to build a snapshot (Prometheus' default scrape
timeout is 10 s)."""


def loop_source(loop: asyncio.AbstractEventLoop, build: Callable[[], T]) -> Callable[[], T]:
    """``build`` wrapped so that any thread may call it: it runs on ``loop``.

    Raises (from the wrapper):
        TimeoutError: the loop did not run ``build`` within ``SCRAPE_TIMEOUT_S``.
    """

    async def on_loop() -> T:
        return build()

    def call() -> T:
        return asyncio.run_coroutine_threadsafe(on_loop(), loop).result(SCRAPE_TIMEOUT_S)

    return call


class _QuietHandler(simple_server.WSGIRequestHandler):
    """No access log line per scrape (as prometheus_client's handler)."""

    def log_message(self, format: str, *args: Any) -> None:
        pass


class _TlsWsgiServer(exposition.ThreadingWSGIServer):
    """A threaded WSGI server that shakes hands per connection in its handler thread."""

    server_tls: tls.ServerTls | None = None

    def finish_request(self, request: Any, client_address: Any) -> None:
        server_tls = self.server_tls
        if server_tls is None:
            super().finish_request(request, client_address)
            return
        request.settimeout(server_tls.settings.handshake_timeout_ms / 1000)
        try:
            wrapped = server_tls.metrics_context().wrap_socket(request, server_side=True)
        except OSError:  # ssl.SSLError, a timeout, a reset: this connection only
            request.close()
            return
        try:
            super().finish_request(wrapped, client_address)
        finally:
            wrapped.close()


class _TlsWsgiServer6(_TlsWsgiServer):
    address_family = socket.AF_INET6


class MetricsServer:
    """An HTTP ``/metrics`` endpoint serving the given collectors.

    Args:
        collectors: what to expose (``collectors.BrokerCollector`` …).
    """

    def __init__(self, *collectors: registry.Collector) -> None:
        self.registry = registry.CollectorRegistry(auto_describe=False)
        for collector in collectors:
            self.registry.register(collector)
        self._server: simple_server.WSGIServer | None = None
        self.secure = False
        """Whether ``start`` serves HTTPS."""
        self._thread: threading.Thread | None = None

    def start(self, listen: str, server_tls: tls.ServerTls | None = None) -> int:
        """Bind ``HOST:PORT`` and serve in a daemon thread; returns the bound port.

        ``server_tls``: the process's TLS; HTTPS when its mode is ``enforcing`` (no client
        certificate asked for, whatever ``need_client_auth`` says), plain HTTP otherwise (and
        when ``None``).

        Raises:
            ValueError: ``listen`` is not ``HOST:PORT``.
            OSError: the address cannot be bound.
        """
        host, port = grpc_server.parse_listen(listen)
        if server_tls is None or server_tls.mode is not tls.TlsMode.ENFORCING:
            self.secure = False
            self._server, self._thread = prometheus_client.start_http_server(
                port, addr=host, registry=self.registry
            )
            return int(self._server.server_port)
        server_class = _TlsWsgiServer6 if ":" in host else _TlsWsgiServer
        httpd = simple_server.make_server(
            host.strip("[]"),
            port,
            prometheus_client.make_wsgi_app(self.registry),
            server_class,
            handler_class=_QuietHandler,
        )
        assert isinstance(httpd, _TlsWsgiServer)
        httpd.server_tls = server_tls
        self.secure = True
        self._server = httpd
        self._thread = threading.Thread(target=httpd.serve_forever, name="metrics", daemon=True)
        self._thread.start()
        return int(httpd.server_port)

    def url(self, listen: str) -> str:
        """``http(s)://listen`` as ``start`` serves it (for log lines)."""
        return f"{'https' if self.secure else 'http'}://{listen}"

    def close(self) -> None:
        """Stop serving and wait for the HTTP thread to end."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(SCRAPE_TIMEOUT_S)
