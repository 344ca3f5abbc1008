"""The guard times each call once where it is answered (a request stream once per answer), into
RocketMQ's ``rocketmq_rpc_latency`` buckets, and histograms count values Prometheus' way."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from ariane import metrics
from ariane.common import errors, histogram
from ariane.grpcwire import guard, pb, rpc_latency
from metrics_testing import parse, value

V2 = pb.v2
SVC = pb.v2_service


class SteppingTimer:
    """A timer the test advances by hand, s."""

    def __init__(self) -> None:
        self.now_s = 100.0

    def __call__(self) -> float:
        return self.now_s


class Context:
    """The parts of a call context the guard reads."""

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return (("x-mq-client-id", "c1"),)

    def peer(self) -> str:
        return "ipv4:127.0.0.1:1"

    def time_remaining(self) -> float | None:
        return None

    async def abort(self, code: Any, details: str = "") -> Any:
        raise AssertionError(f"aborted: {code} {details}")


class Messaging:
    """SendMessage takes 4 ms (or fails), ReceiveMessage streams for 40 ms."""

    def __init__(self, timer: SteppingTimer) -> None:
        self.timer = timer

    async def send_message(self, request: Any, context: Any) -> Any:
        self.timer.now_s += 0.004
        if not request.messages:
            raise errors.BadRequestError("no messages")
        return SVC.SendMessageResponse(status=V2.Status(code=V2.Code.OK))

    async def receive_message(self, request: Any, context: Any) -> AsyncIterator[Any]:
        self.timer.now_s += 0.020
        yield SVC.ReceiveMessageResponse(message=V2.Message())
        self.timer.now_s += 0.020
        yield SVC.ReceiveMessageResponse(status=V2.Status(code=V2.Code.MESSAGE_NOT_FOUND))


class Ingest:
    """SendStream answers each request 2 ms after reading it, whatever the client's pauses."""

    def __init__(self, timer: SteppingTimer) -> None:
        self.timer = timer

    async def send_stream(self, requests: AsyncIterator[Any], context: Any) -> AsyncIterator[Any]:
        async for _ in requests:
            self.timer.now_s += 0.002
            yield SVC.SendMessageResponse(status=V2.Status(code=V2.Code.OK))


def _methods(
    service: pb.ServiceDescriptor, impl: object, latency: rpc_latency.RpcLatency
) -> dict[str, guard.GuardedMethod]:
    return {
        m.path.rpartition("/")[2]: m for m in guard.guarded_methods(service, impl, latency=latency)
    }


def test_unary_and_server_streaming_calls_are_timed_once_with_their_answered_code() -> None:
    """Two sends (one refused) and one receive land in their code's 5 ms / 100 ms buckets."""
    timer = SteppingTimer()
    latency = rpc_latency.RpcLatency(timer=timer)
    methods = _methods(pb.MESSAGING_SERVICE, Messaging(timer), latency)

    async def calls() -> None:
        send = methods["SendMessage"].call
        await send(SVC.SendMessageRequest(messages=[V2.Message()]), Context())
        await send(SVC.SendMessageRequest(), Context())
        async for _ in methods["ReceiveMessage"].call(SVC.ReceiveMessageRequest(), Context()):
            pass

    asyncio.run(calls())
    found = latency.histograms()
    assert set(found) == {
        ("send_message", "ok"),
        ("send_message", "bad_request"),
        ("receive_message", "message_not_found"),
    }
    bounds = histogram.RPC_LATENCY_BOUNDS_MS
    assert found[("send_message", "ok")].bucket_counts[bounds.index(5)] == 1
    assert found[("receive_message", "message_not_found")].bucket_counts[bounds.index(100)] == 1
    assert found[("receive_message", "message_not_found")].sum == pytest.approx(40.0)


def test_a_request_stream_is_timed_per_answer_from_the_read_of_its_request() -> None:
    """Three requests on one SendStream, the client pausing 1 s between them: three 2 ms
    answers, none of the pauses counted."""
    timer = SteppingTimer()
    latency = rpc_latency.RpcLatency(timer=timer)
    methods = _methods(pb.INGEST_SERVICE, Ingest(timer), latency)

    async def requests() -> AsyncIterator[Any]:
        for _ in range(3):
            timer.now_s += 1.0  # the client takes its time
            yield SVC.SendMessageRequest(messages=[V2.Message()])

    async def call() -> None:
        async for _ in methods["SendStream"].call(requests(), Context()):
            pass

    asyncio.run(call())
    timed = latency.histograms()[("send_stream", "ok")]
    assert timed.count == 3
    assert timed.sum == pytest.approx(6.0)


def test_histograms_render_cumulative_le_buckets() -> None:
    """A value on a bound counts in that bound's bucket (``le``), one above every bound only
    in +Inf; the collector renders the copy with RocketMQ's labels."""
    sizes = histogram.Histogram(histogram.MESSAGE_SIZE_BOUNDS_BYTES)
    for size in (1, 1024, 1025, 5 * 1024 * 1024):
        sizes.observe(size)
    assert sizes.cumulative()[:2] == [(1024, 2), (4096, 3)]
    assert sizes.cumulative()[-1] == (float("inf"), 4)
    with pytest.raises(ValueError, match="increasing"):
        histogram.Histogram((1, 1))
    snap = metrics.NameServerSnapshot(
        identity=metrics.Identity("", "nameserver", "ns"),
        brokers=(),
        broker_groups={},
        topic_count=0,
        rpc_latency_ms=metrics.copy_histograms({("query_route", "ok"): sizes}),
    )
    registry = CollectorRegistry(auto_describe=False)
    registry.register(metrics.NameServerCollector(lambda: snap))
    samples = parse(generate_latest(registry).decode())
    route = {"protocol_type": "grpc", "request_code": "query_route", "response_code": "ok"}
    assert value(samples, "rocketmq_rpc_latency_bucket", **route, le="1024.0") == 2
    assert value(samples, "rocketmq_rpc_latency_bucket", **route, le="4194304.0") == 3
    assert value(samples, "rocketmq_rpc_latency_bucket", **route, le="+Inf") == 4
    assert value(samples, "rocketmq_rpc_latency_count", **route) == 4
