"""Official-client side of ``bench/namesrv_hop.py``: time QueryRoute calls of the official
``rocketmq-python-client`` against one endpoint. Imports nothing of Ariane (its protobuf
modules clash with the official client's); run with ``python -P``.

Usage: ``namesrv_route_driver.py ENDPOINT TOPIC CALLS``; prints one JSON line
``{"calls", "seconds", "us_per_call", "p50_us", "p99_us", "queues"}``.
"""

from __future__ import annotations

import json
import sys
import time

from rocketmq import ClientConfiguration, Credentials, Producer  # type: ignore[import-untyped]


def main() -> int:
    """Start a producer on the endpoint, then time sequential route queries."""
    endpoint, topic, calls = sys.argv[1], sys.argv[2], int(sys.argv[3])
    producer = Producer(ClientConfiguration(endpoint, Credentials(), request_timeout=10))
    producer.startup()
    try:
        route = producer.route_manager.update_topic_route(topic)
        queues = len(route.message_queues) if route is not None else 0
        for _ in range(min(200, calls)):  # warm-up: channel, caches
            producer.route_manager.update_topic_route(topic)
        latencies: list[float] = []
        start = time.perf_counter()
        for _ in range(calls):
            t0 = time.perf_counter()
            producer.route_manager.update_topic_route(topic)
            latencies.append(time.perf_counter() - t0)
        seconds = time.perf_counter() - start
    finally:
        producer.shutdown()
    latencies.sort()
    print(
        json.dumps(
            {
                "calls": calls,
                "seconds": round(seconds, 4),
                "us_per_call": round(seconds / calls * 1e6, 1),
                "p50_us": round(latencies[len(latencies) // 2] * 1e6, 1),
                "p99_us": round(latencies[int(len(latencies) * 0.99)] * 1e6, 1),
                "queues": queues,
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
