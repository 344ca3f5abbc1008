"""The official ``rocketmq-python-client`` (5.1.2) as a benchmark load, in its own process.

Run by path (``python -P <this file>``, ``ariane.benchmark.client_bench.driver_command``) by
``ariane bench`` and by the repository's ``bench.compare``; the official client's generated
protobuf modules clash with Ariane's in one interpreter, so this script imports nothing of
Ariane (an import-linter contract says so) and is never imported as a module.

Commands::

    produce --endpoints E --topic T --count N --threads T [--body-bytes B] [--wait-go]
    consume --endpoints E --topic T --group G --count N --threads T [--batch B] [--invisible-s S]
    push    --endpoints E --topic T --group G --count N --threads T
    paced   --endpoints E --topic T --rate R --duration-s D --warmup-s W --threads T [--wait-go]
    e2e     --endpoints E --topic T --group G --mode simple|push --threads T --skip N

``produce``: T threads each call the synchronous ``Producer.send`` (one message per SendMessage
call, as the official clients always do) for their share of N bodies of B random bytes.
``consume``: T threads each call ``SimpleConsumer.receive(batch, invisible)`` and then ``ack``
every message (one AckMessage per message: the official API has no batch ack) until N messages
were acked in all. ``push``: a ``PushConsumer`` with T consumption threads whose listener
returns SUCCESS; its clock runs from the first listener call to the N-th (the client fetches on
its own from ``startup``), so ``messages`` is N - 1 over that span and there are no latencies.
``paced``: ``(W + D) x R`` sends on a fixed schedule (slot k at start + k / R; the T threads
take the next slot, sleep until its time and send, so one slow call does not shift the
schedule); the body starts with ``<k>:<wall-clock ns just before the send>:``; the first
``W x R`` slots are warm-up. Its ``done`` has ``messages`` = measured slots acked, ``seconds``
= from the first measured slot to the last measured ack, and ``late_us`` (how late each
measured send started against its slot). ``e2e``: a SimpleConsumer (T threads of
``receive(32)`` with long polling, then one ack per message) or a PushConsumer (T consumption
threads) that notes, per message with sequence >= N, wall-clock receive time - send time (for
``simple`` when ``receive`` returned, for ``push`` when the listener was called); it reads
``expect <n>`` from stdin and stops once n measured messages arrived or ``E2E_GRACE_S`` after
that line; ``done`` then carries ``latencies_us`` (one per unique measured message) and
``duplicates``.
With ``--wait-go`` the driver reads one line from stdin after ``ready`` and only then starts
its clock and its threads, so that a parent can start several driver processes together.

Protocol on stdout (JSON lines): ``{"event": "ready"}`` once the client started (the parent
starts its clock there), ``{"event": "progress", "done": n}`` about four times a second, then
``{"event": "done", "messages", "bytes", "seconds", "latencies_us", "errors"}`` with one
latency per call (send, or receive for consume). The client is shut down only after the parent
closes stdin, so the parent can read this process's CPU time over exactly the timed window.
Every loop is bounded by ``--deadline-s``.

Against a secured cluster (``ariane dev --secure``): ``RMQ_DRIVER_ACCESS_KEY`` /
``RMQ_DRIVER_SECRET_KEY`` in the environment become the client's ``Credentials`` (it signs every
call), and ``RMQ_DRIVER_TLS=1`` turns its ``tls_enable`` on (it verifies the servers against
``GRPC_DEFAULT_SSL_ROOTS_FILE_PATH`` or the system roots); the same variables as the
conformance driver's.
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
ACCESS_KEY_ENV, SECRET_KEY_ENV, TLS_ENV = (
    "RMQ_DRIVER_ACCESS_KEY",
    "RMQ_DRIVER_SECRET_KEY",
    "RMQ_DRIVER_TLS",
)
"""The environment of a driver against a secured cluster (module docstring)."""
E2E_GRACE_S = 10.0
"""How long ``e2e`` waits for the rest of the expected messages after ``expect <n>``."""


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
    credentials = Credentials(
        os.environ.get(ACCESS_KEY_ENV, ""), os.environ.get(SECRET_KEY_ENV, "")
    )
    return ClientConfiguration(endpoints, credentials, request_timeout=10)


def _tls() -> bool:
    """Whether ``RMQ_DRIVER_TLS`` asks for the client's ``tls_enable``."""
    return os.environ.get(TLS_ENV, "") == "1"


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


def _send_counted(producer: Any, msg: Any, tally: Tally) -> bool:
    """``producer.send(msg)``; a failure is counted in ``tally.errors`` and gives False."""
    try:
        producer.send(msg)
    except Exception:  # counted and reported; the benchmark goes on
        with tally.lock:
            tally.errors += 1
        return False
    return True


def produce(args: argparse.Namespace) -> int:
    """Send ``count`` messages from ``threads`` threads, one per call."""
    producer = Producer(_config(args.endpoints), (args.topic,), tls_enable=_tls())
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
            if not _send_counted(producer, msg, tally):
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
        tls_enable=_tls(),
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
        tls_enable=_tls(),
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


def _paced_body(sequence: int, size: int) -> bytes:
    head = f"{sequence}:{time.time_ns()}:".encode()
    return head + b"x" * max(size - len(head), 0)


def paced(args: argparse.Namespace) -> int:
    """Send on a fixed schedule (``--rate`` per second); see the module docstring."""
    producer = Producer(_config(args.endpoints), (args.topic,), tls_enable=_tls())
    producer.startup()
    warmup = round(args.rate * args.warmup_s)
    total = warmup + round(args.rate * args.duration_s)
    tally = Tally()
    slots = iter(range(total))
    ends: list[float] = []
    emit({"event": "ready"})
    if args.wait_go:
        sys.stdin.readline()
    start = time.perf_counter() + 0.05

    def work(index: int) -> None:
        while True:
            with tally.lock:
                slot = next(slots, None)
            if slot is None:
                return
            due = start + slot / args.rate
            time.sleep(max(due - time.perf_counter(), 0.0))
            late_us = int((time.perf_counter() - due) * 1e6)
            msg = Message()
            msg.topic = args.topic
            msg.body = _paced_body(slot, args.body_bytes)
            if not _send_counted(producer, msg, tally):
                continue
            with tally.lock:
                if slot >= warmup:
                    tally.done += 1
                    tally.bytes += len(msg.body)
                    tally.latencies_us.append(late_us)
                    ends.append(time.perf_counter())

    workers = [threading.Thread(target=work, args=(i,), daemon=True) for i in range(args.threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=args.warmup_s + args.duration_s + args.deadline_s)
    seconds = max(max(ends, default=0.0) - (start + warmup / args.rate), 1e-9)
    return _finish(tally, seconds, producer.shutdown)


class _E2eTally(Tally):
    """Receive - send latencies of the measured messages, one per sequence number."""

    def __init__(self, skip: int) -> None:
        super().__init__()
        self.skip = skip
        self.seen: set[int] = set()
        self.duplicates = 0
        self.expected: int | None = None
        self.complete = threading.Event()

    def note(self, body: bytes, received_ns: int) -> None:
        """Record one delivered message (body ``<seq>:<send ns>:...``)."""
        sequence, sent_ns = (int(part) for part in body.split(b":", 2)[:2])
        if sequence < self.skip:
            return
        with self.lock:
            if sequence in self.seen:
                self.duplicates += 1
                return
            self.seen.add(sequence)
            self.done += 1
            self.bytes += len(body)
            self.latencies_us.append((received_ns - sent_ns) // 1000)
            if self.expected is not None and self.done >= self.expected:
                self.complete.set()


class _E2eListener(MessageListener):  # type: ignore[misc]
    def __init__(self, tally: _E2eTally) -> None:
        self.tally = tally

    def consume(self, message: Any) -> Any:
        self.tally.note(message.body, time.time_ns())
        return ConsumeResult.SUCCESS


def _e2e_start(args: argparse.Namespace, tally: _E2eTally, stop: threading.Event) -> Any:
    """Start the consumer of ``e2e``; returns it (its ``shutdown`` ends it)."""
    subscription = {args.topic: FilterExpression()}
    if args.mode == "push":
        consumer = PushConsumer(
            _config(args.endpoints),
            args.group,
            _E2eListener(tally),
            subscription,
            consumption_thread_count=args.threads,
            tls_enable=_tls(),
        )
        consumer.startup()
        return consumer
    consumer = SimpleConsumer(
        _config(args.endpoints), args.group, subscription, await_duration=5, tls_enable=_tls()
    )
    consumer.startup()

    def work(index: int) -> None:
        while not stop.is_set():
            try:
                received = consumer.receive(args.batch, args.invisible_s)
                now = time.time_ns()
                for message in received:
                    tally.note(message.body, now)
                for message in received:
                    consumer.ack(message)
            except Exception:  # counted and reported; the benchmark goes on
                with tally.lock:
                    tally.errors += 1

    for index in range(args.threads):
        threading.Thread(target=work, args=(index,), daemon=True).start()
    return consumer


def e2e(args: argparse.Namespace) -> int:
    """Note receive - send latency per message until told how many to expect; see above."""
    tally = _E2eTally(args.skip)
    stop = threading.Event()
    consumer = _e2e_start(args, tally, stop)
    emit({"event": "ready"})
    line = sys.stdin.readline().split()  # "expect <n>"
    with tally.lock:
        tally.expected = int(line[1]) if len(line) == 2 else 0
        if tally.done >= tally.expected:
            tally.complete.set()
    tally.complete.wait(E2E_GRACE_S)
    stop.set()
    with tally.lock:
        emit(
            {
                "event": "done",
                "messages": tally.done,
                "bytes": tally.bytes,
                "seconds": 0.0,
                "latencies_us": list(tally.latencies_us),
                "errors": tally.errors,
                "duplicates": tally.duplicates,
            }
        )
    consumer.shutdown()
    return 0


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
    paced_parser = sub.add_parser("paced")
    e2e_parser = sub.add_parser("e2e")
    for p in (paced_parser, e2e_parser):
        p.add_argument("--endpoints", required=True)
        p.add_argument("--topic", required=True)
        p.add_argument("--threads", type=int, default=4)
        p.add_argument("--deadline-s", type=float, default=60)
    paced_parser.add_argument("--rate", type=float, required=True)
    paced_parser.add_argument("--duration-s", type=float, required=True)
    paced_parser.add_argument("--warmup-s", type=float, default=2.0)
    paced_parser.add_argument("--body-bytes", type=int, default=1024)
    paced_parser.add_argument("--wait-go", action="store_true")
    e2e_parser.add_argument("--group", required=True)
    e2e_parser.add_argument("--mode", choices=("simple", "push"), default="simple")
    e2e_parser.add_argument("--skip", type=int, default=0)
    e2e_parser.add_argument("--batch", type=int, default=32)
    e2e_parser.add_argument("--invisible-s", type=int, default=30)
    args = parser.parse_args()
    commands = {"produce": produce, "consume": consume, "push": push, "paced": paced, "e2e": e2e}
    return commands[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
