"""RPC latency of one process: RocketMQ's ``rocketmq_rpc_latency`` histograms.

``RpcLatency`` keeps one histogram per (RPC, answered code); the status guard
(``grpcwire.guard``) observes every call it answers, the metrics collector reads
``histograms()`` at scrape time. Invariants: the table is bounded (RPC names come from the
served services, codes are ``Code`` members or ``OTHER_RESPONSE_CODE``); buckets are
RocketMQ's bounds in ms (``common.histogram.RPC_LATENCY_BOUNDS_MS``); no locks: one event loop
owns it. Imports no gRPC.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from ariane.common import errors, histogram

OTHER_RESPONSE_CODE = -1
"""The ``response_code`` key of a status code that is not a ``Code`` member (bounds the
table)."""


class RpcLatency:
    """Per (RPC, answered code) latency histograms of one process (``rocketmq_rpc_latency``).

    Plain int buckets (``common.histogram``, ms, RocketMQ's bounds); the metrics collector
    reads ``histograms()`` at scrape time. The table is bounded: RPC names come from the
    served services and codes are ``Code`` members or ``OTHER_RESPONSE_CODE``. Not
    thread-safe: use it from the serving event loop.

    Args:
        timer: seconds from an arbitrary origin (``time.perf_counter``; tests inject one).
    """

    __slots__ = ("_histograms", "timer")

    def __init__(self, *, timer: Callable[[], float] = time.perf_counter) -> None:
        self.timer = timer
        self._histograms: dict[tuple[str, int], histogram.Histogram] = {}

    def observe(self, rpc: str, code: int, started_s: float) -> None:
        """Count one answer of ``rpc`` with ``code``, begun at ``started_s`` (a ``timer``
        reading)."""
        key = (rpc, code if code in _KNOWN_CODES else OTHER_RESPONSE_CODE)
        found = self._histograms.get(key)
        if found is None:
            found = self._histograms[key] = histogram.Histogram(histogram.RPC_LATENCY_BOUNDS_MS)
        found.observe((self.timer() - started_s) * 1000.0)

    def histograms(self) -> dict[tuple[str, str], histogram.Histogram]:
        """``(request_code, response_code) -> histogram``: the snake-case RPC name and the
        lower-case ``Code`` name (``other`` for a code outside it), as RocketMQ labels
        ``rocketmq_rpc_latency``. Live objects: read them on the serving loop."""
        return {
            (rpc, _CODE_NAMES.get(code, "other")): found
            for (rpc, code), found in self._histograms.items()
        }


_CODE_NAMES = {int(c): c.name.lower() for c in errors.Code}
_KNOWN_CODES = frozenset(_CODE_NAMES)
