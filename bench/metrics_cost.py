"""Micro-benchmark (not a test): what the hot-path metrics cost per call, against a call's cost.

Run ``python -m bench.metrics_cost [--calls N] [--no-record]`` from the repository root.

Rows (median of 5 rounds, each ``timeit`` of ``--calls`` operations):

- ``rpc timing``: what the guard adds to one call for ``rocketmq_rpc_latency``: two timer
  readings and ``RpcLatency.observe`` (dict lookup, ``bisect``, two additions).
- ``size observe``: what the send path adds per stored message for ``rocketmq_message_size``.
- ``unary call``: one guarded ``SendMessage`` round trip over loopback gRPC to a handler that
  does nothing (client and server on one event loop, so it is the CPU of both ends; the
  server's share is taken as half of it, which makes the ratio conservative).

The ratio row divides (rpc timing + size observe) by the server's share of a call: it must be
well under 1 % (issue 15). Results go to ``bench/results/metrics_cost-<date>.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import pathlib
import statistics
import sys
import timeit
from typing import Any

import grpc

from ariane.common import errors, histogram
from ariane.grpcwire import guard, pb, rpc, rpc_latency
from ariane.grpcwire import server as grpc_server

ROUNDS = 5
RESULTS_DIR = pathlib.Path(__file__).parent / "results"


class _Quiet:
    async def send_message(self, request: Any, context: Any) -> Any:
        return pb.v2_service.SendMessageResponse(status=pb.v2.Status(code=pb.v2.Code.OK))


def _per_op_us(statement: Any, number: int) -> float:
    runs = [timeit.timeit(statement, number=number) / number * 1e6 for _ in range(ROUNDS)]
    return statistics.median(runs)


def rpc_timing_us(calls: int) -> float:
    """Two timer readings and one ``observe``, µs."""
    latency = rpc_latency.RpcLatency()
    timer = latency.timer
    ok = int(errors.Code.OK)

    def once() -> None:
        latency.observe("send_message", ok, timer())

    return _per_op_us(once, calls)


def size_observe_us(calls: int) -> float:
    """One ``Histogram.observe`` of a 1 KiB body, µs."""
    sizes = histogram.Histogram(histogram.MESSAGE_SIZE_BOUNDS_BYTES)
    return _per_op_us(lambda: sizes.observe(1024), calls)


async def _unary_call_us(calls: int) -> float:
    server = grpc_server.build(
        grpc_server.ServerSettings(), [guard.service_handler(pb.MESSAGING_SERVICE, _Quiet())]
    )
    port = grpc_server.bind(server, "127.0.0.1:0")
    await server.start()
    request = pb.v2_service.SendMessageRequest(messages=[pb.v2.Message()])
    loop = asyncio.get_running_loop()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            rounds: list[float] = []
            for _ in range(ROUNDS):
                started = loop.time()
                for _ in range(calls):
                    await rpc.unary_call(
                        channel,
                        pb.MESSAGING_SERVICE,
                        "SendMessage",
                        request,
                        pb.v2_service.SendMessageResponse,
                        timeout_s=10,
                    )
                rounds.append((loop.time() - started) / calls * 1e6)
            return statistics.median(rounds)
    finally:
        await server.stop(0)


def main(argv: list[str] | None = None) -> int:
    """Measure, print the table and record it."""
    parser = argparse.ArgumentParser(prog="python -m bench.metrics_cost")
    parser.add_argument("--calls", type=int, default=2000, help="operations per round")
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args(argv)
    timing = rpc_timing_us(args.calls * 50)
    size = size_observe_us(args.calls * 50)
    call = asyncio.run(_unary_call_us(args.calls))
    ratio = (timing + size) / (call / 2) * 100
    lines = [
        f"`python -m bench.metrics_cost --calls {args.calls}` "
        f"({datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC, Python "
        f"{sys.version.split()[0]}, median of {ROUNDS} rounds)",
        "",
        "| row | µs per op |",
        "|---|---|",
        f"| rpc timing (2 timer reads + RpcLatency.observe) | {timing:.3f} |",
        f"| size observe (Histogram.observe per message) | {size:.3f} |",
        f"| unary call (guarded SendMessage round trip, both ends) | {call:.1f} |",
        f"| metrics / server's share of a call (half the round trip) | {ratio:.3f} % |",
    ]
    print("\n".join(lines))
    if not args.no_record:
        RESULTS_DIR.mkdir(exist_ok=True)
        out = RESULTS_DIR / f"metrics_cost-{datetime.date.today()}.md"
        out.write_text("\n".join(lines) + "\n")
        print(f"recorded in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
