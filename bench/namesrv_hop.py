"""What the name server's shared port costs a gRPC client: QueryRoute through the first-byte
sniffer and its splice (``ariane namesrv --listen P``) against gRPC served directly
(``--listen P --remoting-listen Q``).

Run: ``python -m bench.namesrv_hop [--calls N] [--rounds R]``. Starts two ``ariane namesrv``
processes on free loopback ports, registers one broker with both (a gRPC RegisterBroker, so no
broker process runs), then, per round and layout, times ``--calls`` sequential route queries of
the official ``rocketmq-python-client`` (``Producer.route_manager.update_topic_route``, the call
the client makes every 30 s per topic) in a child process (``bench/namesrv_route_driver.py``).
It also times the same QueryRoute from a bare ``grpc.aio`` stub, whose own cost per call is
lower, so the hop's share shows better. Prints one row per round, client and layout: µs per
call (mean, p50, p99), the name server's CPU time per call (``/proc/<pid>/stat``; less
sensitive to a loaded machine than latency) and the queues the route had.
A benchmark, not a test: nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import pathlib
import signal
import subprocess
import sys
import tempfile
import time

import grpc

from ariane import dev
from ariane.grpcwire import pb, registry_client

DRIVER = pathlib.Path(__file__).with_name("namesrv_route_driver.py")
STARTUP_S = 30.0


_free_port = dev.free_port


def _ariane() -> list[str]:
    return [str(pathlib.Path(sys.executable).with_name("ariane"))]


async def _register(address: str) -> None:
    deadline = time.monotonic() + STARTUP_S
    async with grpc.aio.insecure_channel(address) as channel:
        while True:
            try:
                await registry_client.RegistryClient(channel, timeout_s=1).get_cluster_info()
                break
            except grpc.aio.AioRpcError:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.05)
        request = pb.registry.RegisterBrokerRequest(
            cluster_name="DefaultCluster",
            broker_name="broker-a",
            broker_id=0,
            client_endpoint=pb.v2.Address(host="127.0.0.1", port=_free_port()),
            data_version=1,
            topic_configs=[
                pb.topic.TopicConfig(
                    topic="bench",
                    read_queue_nums=8,
                    write_queue_nums=8,
                    perm=6,
                    message_type=pb.topic.TopicMessageType.TOPIC_MESSAGE_TYPE_NORMAL,
                )
            ],
            remoting_address="127.0.0.1:10911",
        )
        stub = pb.registry_grpc.RegistryStub(channel)
        await stub.RegisterBroker(request, timeout=10)


def _drive(endpoint: str, calls: int) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, "-P", str(DRIVER), endpoint, "bench", str(calls)],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


async def _grpc_aio_loop(endpoint: str, calls: int) -> dict[str, float]:
    # The same QueryRoute from a bare grpc.aio stub: far less client overhead per call than
    # the official client, so the hop's share is easier to see.
    request = pb.v2_service.QueryRouteRequest(topic=pb.v2.Resource(name="bench"))
    headers = (("x-mq-client-id", "bench@1"), ("x-mq-language", "PYTHON"))
    async with grpc.aio.insecure_channel(endpoint) as channel:
        stub = pb.v2_service_grpc.MessagingServiceStub(channel)
        for _ in range(200):
            await stub.QueryRoute(request, metadata=headers, timeout=10)
        latencies = []
        start = time.perf_counter()
        for _ in range(calls):
            t0 = time.perf_counter()
            await stub.QueryRoute(request, metadata=headers, timeout=10)
            latencies.append(time.perf_counter() - t0)
        seconds = time.perf_counter() - start
    latencies.sort()
    return {
        "calls": calls,
        "us_per_call": round(seconds / calls * 1e6, 1),
        "p50_us": round(latencies[len(latencies) // 2] * 1e6, 1),
        "p99_us": round(latencies[int(len(latencies) * 0.99)] * 1e6, 1),
        "queues": 8,
    }


def _cpu_s(pid: int) -> float:
    # utime + stime of the process (fields 14, 15 of /proc/<pid>/stat), seconds.
    fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> int:
    """Run the rounds and print the table."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    shared = f"127.0.0.1:{_free_port()}"
    direct = f"127.0.0.1:{_free_port()}"
    remoting = f"127.0.0.1:{_free_port()}"
    logs = tempfile.mkdtemp(prefix="namesrv-hop-")
    processes = [
        subprocess.Popen(
            [*_ariane(), "namesrv", "--listen", shared, "--log-level", "WARNING"],
            stdout=open(os.path.join(logs, "shared.log"), "wb"),  # noqa: SIM115
            stderr=subprocess.STDOUT,
        ),
        subprocess.Popen(
            [
                *_ariane(),
                "namesrv",
                "--listen",
                direct,
                "--remoting-listen",
                remoting,
                "--log-level",
                "WARNING",
            ],
            stdout=open(os.path.join(logs, "direct.log"), "wb"),  # noqa: SIM115
            stderr=subprocess.STDOUT,
        ),
    ]
    try:
        for address in (shared, direct):
            asyncio.run(_register(address))
        print(
            "| round | client | layout | calls | µs/call | p50 µs | p99 µs | namesrv CPU µs/call"
            " | queues |"
        )
        print("|---|---|---|---|---|---|---|---|---|")
        pids = {shared: processes[0].pid, direct: processes[1].pid}
        for round_no in range(1, args.rounds + 1):
            for layout, endpoint in (("direct gRPC", direct), ("shared port", shared)):
                for client in ("official Python 5.1.2", "grpc.aio stub"):
                    cpu_before = _cpu_s(pids[endpoint])
                    if client == "grpc.aio stub":
                        r = asyncio.run(_grpc_aio_loop(endpoint, args.calls))
                    else:
                        r = _drive(endpoint, args.calls)
                    # Includes the warm-up calls and the client's startup/heartbeat calls.
                    calls_made = r["calls"] + min(200, r["calls"])
                    cpu_us = (_cpu_s(pids[endpoint]) - cpu_before) / calls_made * 1e6
                    print(
                        f"| {round_no} | {client} | {layout} | {r['calls']} | "
                        f"{r['us_per_call']} | {r['p50_us']} | {r['p99_us']} | {cpu_us:.0f} | "
                        f"{r['queues']} |"
                    )
    finally:
        for process in processes:
            os.kill(process.pid, signal.SIGTERM)
            process.wait(timeout=30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
