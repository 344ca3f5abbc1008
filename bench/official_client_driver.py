"""The official ``rocketmq-python-client`` (5.1.2) as a benchmark load, in its own process.

Run by ``bench/client_bench.py`` (``ariane bench``); the official client's generated protobuf
modules clash with Ariane's in one interpreter, so this script imports nothing of Ariane.

Commands::

    produce --endpoints E --topic T --count N --threads T [--body-bytes B] [--wait-go]
    consume --endpoints E --topic T --group G --count N --threads T [--batch B] [--invisible-s S]
    push    --endpoints E --topic T --group G --count N --threads T

``produce``: T threads each call the synchronous ``Producer.send`` (one message per SendMessage
call, as the official clients always do) for their share of N bodies of B random bytes.
``consume``: T threads each call ``SimpleConsumer.receive(batch, invisible)`` and then ``ack``
every message (one AckMessage per message: the official API has no batch ack) until N messages
were acked in all. ``push``: a ``PushConsumer`` with T consumption threads whose listener
returns SUCCESS; its clock runs from the first listener call to the N-th (the client fetches on
its own from ``startup``), so ``messages`` is N - 1 over that span and there are no latencies.
With ``--wait-go`` the driver reads one line from stdin after ``ready`` and only then starts
its clock and its threads, so that a parent can start several driver processes together.

Protocol on stdout (JSON lines): ``{"event": "ready"}`` once the client started (the parent
starts its clock there), ``{"event": "progress", "done": n}`` about four times a second, then
``{"event": "done", "messages", "bytes", "seconds", "latencies_us", "errors"}`` with one
latency per call (send, or receive for consume). The client is shut down only after the parent
closes stdin, so the parent can read this process's CPU time over exactly the timed window.
Every loop is bounded by ``--deadline-s``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from rocketmq import (  # type: ignore[import-untyped]
    ClientConfiguration,
    ConsumeResult,
    Credentials,
    FilterExpression,
    Message,
    MessageListener,
    Producer,
    PushConsumer,
    SimpleConsumer,
)

PROGRESS_INTERVAL_S = 0.25


class Tally:
    """Counts shared by the worker threads."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.done = 0
        self.bytes = 0
        self.errors = 0
        self.latencies_us: list[int] = []


def emit(event: dict[str, Any]) -> None:
    """Print one JSON line and flush it."""
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


def _config(endpoints: str) -> Any:
    return ClientConfiguration(endpoints, Credentials(), request_timeout=10)


def _run_threads(
    count: int,
    threads: int,
    work: Callable[[int], None],
    tally: Tally,
    deadline_s: float,
    wait_go: bool = False,
) -> float:
    """Run ``work(thread index)`` on ``threads`` threads, report progress, return seconds."""
    emit({"event": "ready"})
    if wait_go:
        sys.stdin.readline()
    started = time.perf_counter()
    workers = [threading.Thread(target=work, args=(i,), daemon=True) for i in range(threads)]
    for worker in workers:
        worker.start()
    deadline = started + deadline_s
    while any(w.is_alive() for w in workers) and time.perf_counter() < deadline:
        time.sleep(PROGRESS_INTERVAL_S)
        with tally.lock:
            emit({"event": "progress", "done": min(tally.done, count)})
    return time.perf_counter() - started


def _finish(tally: Tally, seconds: float, shutdown: Callable[[], None]) -> int:
    emit(
        {
            "event": "done",
            "messages": tally.done,
            "bytes": tally.bytes,
            "seconds": seconds,
            "latencies_us": tally.latencies_us,
            "errors": tally.errors,
        }
    )
    sys.stdin.readline()  # the parent closes stdin after reading our CPU time
    shutdown()
    return 0


def produce(args: argparse.Namespace) -> int:
    """Send ``count`` messages from ``threads`` threads, one per call."""
    producer = Producer(_config(args.endpoints), (args.topic,))
    producer.startup()
    body = os.urandom(args.body_bytes)
    tally = Tally()
    deadline = time.perf_counter() + args.deadline_s + (3600 if args.wait_go else 0)

    def work(index: int) -> None:
        share = args.count // args.threads + (1 if index < args.count % args.threads else 0)
        for _ in range(share):
            if time.perf_counter() > deadline:
                return
            msg = Message()
            msg.topic = args.topic
            msg.body = body
            t0 = time.perf_counter_ns()
            try:
                producer.send(msg)
            except Exception:  # counted and reported; the benchmark goes on
                with tally.lock:
                    tally.errors += 1
                continue
            elapsed_us = (time.perf_counter_ns() - t0) // 1000
            with tally.lock:
                tally.done += 1
                tally.bytes += len(body)
                tally.latencies_us.append(elapsed_us)

    seconds = _run_threads(args.count, args.threads, work, tally, args.deadline_s, args.wait_go)
    return _finish(tally, seconds, producer.shutdown)


def consume(args: argparse.Namespace) -> int:
    """Receive and ack ``count`` messages from ``threads`` threads."""
    consumer = SimpleConsumer(
        _config(args.endpoints),
        args.group,
        {args.topic: FilterExpression()},
        await_duration=5,
    )
    consumer.startup()
    tally = Tally()
    deadline = time.perf_counter() + args.deadline_s

    def work(index: int) -> None:
        while time.perf_counter() < deadline:
            with tally.lock:
                if tally.done >= args.count:
                    return
            t0 = time.perf_counter_ns()
            try:
                received = consumer.receive(args.batch, args.invisible_s)
                elapsed_us = (time.perf_counter_ns() - t0) // 1000
                for message in received:
                    consumer.ack(message)
            except Exception:  # counted and reported; the benchmark goes on
                with tally.lock:
                    tally.errors += 1
                continue
            with tally.lock:
                tally.done += len(received)
                tally.bytes += sum(len(m.body) for m in received)
                tally.latencies_us.append(elapsed_us)

    seconds = _run_threads(args.count, args.threads, work, tally, args.deadline_s)
    return _finish(tally, seconds, consumer.shutdown)


class _CountingListener(MessageListener):  # type: ignore[misc]
    """Counts consumed messages and notes when the first and the ``count``-th arrived."""

    def __init__(self, count: int, tally: Tally) -> None:
        self.count = count
        self.tally = tally
        self.first = 0.0
        self.last = 0.0
        self.finished = threading.Event()

    def consume(self, message: Any) -> Any:
        now = time.perf_counter()
        with self.tally.lock:
            if self.tally.done == 0:
                self.first = now
            self.tally.done += 1
            self.tally.bytes += len(message.body)
            if self.tally.done == self.count:
                self.last = now
                self.finished.set()
        return ConsumeResult.SUCCESS


def push(args: argparse.Namespace) -> int:
    """Consume ``count`` messages with a PushConsumer; clock from first to last message."""
    tally = Tally()
    listener = _CountingListener(args.count, tally)
    consumer = PushConsumer(
        _config(args.endpoints),
        args.group,
        listener,
        {args.topic: FilterExpression()},
        consumption_thread_count=args.threads,
    )
    consumer.startup()
    emit({"event": "ready"})
    deadline = time.perf_counter() + args.deadline_s
    while not listener.finished.wait(PROGRESS_INTERVAL_S) and time.perf_counter() < deadline:
        with tally.lock:
            emit({"event": "progress", "done": min(tally.done, args.count)})
    with tally.lock:
        end = listener.last if listener.finished.is_set() else time.perf_counter()
        seconds = max(end - listener.first, 1e-9) if tally.done else 0.0
        tally.done = max(min(tally.done, args.count) - 1, 0)
        tally.bytes = tally.done * args.body_bytes
    return _finish(tally, seconds, consumer.shutdown)


def main() -> int:
    """Parse the command line and run one command."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="cmd", required=True)
    for name in ("produce", "consume", "push"):
        p = sub.add_parser(name)
        p.add_argument("--endpoints", required=True)
        p.add_argument("--topic", required=True)
        p.add_argument("--count", type=int, required=True)
        p.add_argument("--threads", type=int, default=8)
        p.add_argument("--deadline-s", type=float, default=300)
        p.add_argument("--body-bytes", type=int, default=1024)
        p.add_argument("--wait-go", action="store_true")
        if name != "produce":
            p.add_argument("--group", required=True)
            p.add_argument("--batch", type=int, default=32)
            p.add_argument("--invisible-s", type=int, default=30)
    args = parser.parse_args()
    return {"produce": produce, "consume": consume, "push": push}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
