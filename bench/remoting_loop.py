"""``python -m bench.remoting_loop``: the Remoting transport's CPU per request on asyncio's loop
and on uvloop, interleaved, in processes of their own.

What it isolates: the part of a classic request that is the transport and the event loop (read
the frame, decode the header, one task, encode and write the reply), with a handler that only
answers, so the store's cost and the client's are out. Each round starts one server process per
loop (``--child``: ``transport.RemotingServer`` on 127.0.0.1, the loop picked by
``common.event_loop``), and this process sends it ``--requests`` ``SEND_BATCH_MESSAGE`` frames
carrying ``--body-bytes`` each, one in flight at a time (as ``java batch 64`` does), over one
connection with a blocking socket. The server reports its own CPU (``getrusage``, user +
system) from the first request to the last: µs per request. CPU time rather than wall time, so
the figure moves less with the neighbours' load than msgs/s do (not at all free of it: a loaded
machine makes every instruction dearer, for both loops alike when interleaved).

Results: ``bench/results/remoting_loop-<UTC stamp>.json`` and ``.md`` (unless ``--no-record``).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import resource
import socket
import statistics
import struct
import subprocess
import sys
from collections.abc import Sequence
from typing import Any

import bench
from ariane.benchmark import machine, report
from ariane.common import event_loop
from ariane.remoting import codes, command, transport

LOOPS = ("asyncio", "uvloop")
RESULTS_NAME = "remoting_loop"
CHILD_TIMEOUT_S = 300.0
"""Longest one server process may take (start, every request, its report)."""
REPLY_EXT = {"msgId": "7F000001000000000000000000000001", "queueId": "0", "queueOffset": "1"}
"""The reply's header fields: what a classic send reply carries."""


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def _serve(requests: int) -> dict[str, float]:
    """Serve until ``requests`` requests were answered; the CPU spent from the first."""
    done = asyncio.Event()
    state = {"seen": 0, "cpu0": 0.0}

    async def handle(
        _conn: transport.Connection, request: command.RemotingCommand
    ) -> command.RemotingCommand:
        state["seen"] += 1
        if state["seen"] == 1:
            state["cpu0"] = _cpu_s()
        if state["seen"] >= requests:
            done.set()
        return command.response(request, codes.ResponseCode.SUCCESS, ext_fields=REPLY_EXT)

    server = transport.RemotingServer({codes.RequestCode.SEND_BATCH_MESSAGE: handle})
    _, port = await server.start("127.0.0.1", 0)
    print(json.dumps({"port": port}), flush=True)
    await done.wait()
    cpu = _cpu_s() - state["cpu0"]
    await asyncio.sleep(0.1)  # the last reply leaves before the server closes
    await server.close()
    return {"cpu_s": cpu, "requests": state["seen"]}


def child(loop_name: str, requests: int) -> int:
    """The server process: print its port, serve, print its CPU report."""
    factory, name = event_loop.loop_factory(event_loop.EventLoop(loop_name))
    with asyncio.Runner(loop_factory=factory) as runner:
        result = runner.run(_serve(requests))
    print(json.dumps({**result, "loop": name}), flush=True)
    return 0


def _read_exactly(sock: socket.socket, n: int) -> bytes:
    chunks, got = [], 0
    while got < n:
        chunk = sock.recv(n - got)
        if not chunk:
            raise ConnectionError("server closed")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def run_one(loop_name: str, requests: int, body_bytes: int) -> dict[str, Any]:
    """One server process on ``loop_name``; ``requests`` frames, one in flight."""
    argv = [sys.executable, "-m", "bench.remoting_loop", "--child", loop_name]
    argv += ["--requests", str(requests)]
    with subprocess.Popen(argv, stdout=subprocess.PIPE, text=True) as proc:
        assert proc.stdout is not None
        port = int(json.loads(proc.stdout.readline())["port"])
        ext = {"a": "g", "b": "T", "c": "TBW102", "d": "8", "e": "0", "f": "0"}
        ext |= {"g": "0", "h": "0", "i": "", "j": "0", "k": "false", "m": "true"}
        body = bytes(body_bytes)
        with socket.create_connection(("127.0.0.1", port)) as sock:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            for opaque in range(requests):
                code = codes.RequestCode.SEND_BATCH_MESSAGE
                sock.sendall(command.encode(command.request(code, ext, body, opaque=opaque)))
                (length,) = struct.unpack(">i", _read_exactly(sock, 4))
                _read_exactly(sock, length)
        report_line = json.loads(proc.stdout.readline())
        proc.wait(timeout=CHILD_TIMEOUT_S)
    return {**report_line, "us_per_request": report_line["cpu_s"] * 1e6 / requests}


def markdown(recorded: dict[str, Any]) -> str:
    """The table: per loop the median and [min-max] µs per request, and uvloop/asyncio."""
    by = {
        loop: [r["us_per_request"] for r in recorded["runs"] if r["loop"] == loop] for loop in LOOPS
    }
    rows = []
    for loop in LOOPS:
        values = by[loop]
        if values:
            cells = [f"{statistics.median(values):.1f}", f"{min(values):.1f}-{max(values):.1f}"]
            rows.append([loop, *cells, str(len(values))])
    ratio = ""
    if by["asyncio"] and by["uvloop"]:
        ratio = f"{statistics.median(by['uvloop']) / statistics.median(by['asyncio']):.2f}"
    info, settings = recorded["machine"], recorded["settings"]
    return "\n".join(
        [
            "# Remoting transport CPU per request: asyncio's loop against uvloop",
            "",
            f"Written by `bench/remoting_loop.py`. Command: `{recorded['command']}`",
            "",
            f"- {recorded['started_utc']}, commit {info['git_commit'][:12]}, load average at "
            f"start {info['load_average_at_start']}; {settings['requests']} requests of "
            f"{settings['body_bytes']} bytes per run, one in flight, rounds interleaved.",
            "- Cells: the server process's CPU (user + system) per request, µs.",
            "",
            report.markdown_table(["loop", "median µs/request", "min-max", "runs"], rows),
            "",
            f"uvloop / asyncio (medians): {ratio or '-'}",
        ]
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Parse, run the interleaved rounds (or one child), print and record the table."""
    parser = argparse.ArgumentParser(prog="python -m bench.remoting_loop", description=__doc__)
    parser.add_argument("--child", choices=LOOPS, help=argparse.SUPPRESS)
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--body-bytes", type=int, default=64 * 1100)
    parser.add_argument("--rounds", type=int, default=5, choices=range(1, 21))
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args(argv)
    if not 1 <= args.requests <= 100_000 or not 0 <= args.body_bytes <= 4_000_000:
        parser.error("--requests 1..100000, --body-bytes 0..4000000")
    if args.child:
        return child(args.child, args.requests)
    started = datetime.datetime.now(datetime.UTC)
    info = machine.machine_info(bench.REPO, bench.REPO)
    runs = []
    for round_index in range(args.rounds):
        for loop in LOOPS if round_index % 2 == 0 else LOOPS[::-1]:
            result = {**run_one(loop, args.requests, args.body_bytes), "round": round_index}
            print(
                f"round {round_index} {loop}: {result['us_per_request']:.1f} µs/request", flush=True
            )
            runs.append(result)
    recorded: dict[str, object] = {
        "command": report.command_line("bench.remoting_loop"),
        "started_utc": started.isoformat(timespec="seconds"),
        "settings": {
            "requests": args.requests,
            "body_bytes": args.body_bytes,
            "rounds": args.rounds,
        },
        "machine": info,
        "runs": runs,
    }
    page = markdown(recorded)
    print(page)
    if not args.no_record:
        stamp = started.strftime("%Y-%m-%dT%H%M%SZ")
        paths = report.write_results(RESULTS_NAME, stamp, recorded, page, bench.RESULTS_DIR)
        print(f"recorded {paths[0]} and {paths[1]}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
