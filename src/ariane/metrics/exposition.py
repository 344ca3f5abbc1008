"""Serve ``/metrics`` over HTTP for one process, collecting on its event loop.

``MetricsServer.start`` binds ``HOST:PORT`` (port 0 picks a free one) with prometheus_client's
threaded HTTP server and a private ``CollectorRegistry`` (no process-wide default registry, no
globals). A scrape runs in the HTTP thread, but the snapshot it needs is built on the owner's
event loop (``loop_source``), because the broker's and name server's tables are single-threaded:
the HTTP thread waits at most ``SCRAPE_TIMEOUT_S`` for it.

Invariants: the server is owned by one composition root, which calls ``close`` before it tears
down what the collectors read.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import TypeVar
from wsgiref import simple_server

import prometheus_client
from prometheus_client import registry

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
        self._thread: threading.Thread | None = None

    def start(self, listen: str) -> int:
        """Bind ``HOST:PORT`` and serve in a daemon thread; returns the bound port.

        Raises:
            ValueError: ``listen`` is not ``HOST:PORT``.
            OSError: the address cannot be bound.
        """
        host, port = grpc_server.parse_listen(listen)
        self._server, self._thread = prometheus_client.start_http_server(
            port, addr=host, registry=self.registry
        )
        return int(self._server.server_port)

    def close(self) -> None:
        """Stop serving and wait for the HTTP thread to end."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(SCRAPE_TIMEOUT_S)
