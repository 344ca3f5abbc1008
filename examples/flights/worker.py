"""A worker process of the flights job, using the official RocketMQ Python client.

Runs in its own process (the official client's protobuf modules clash with Ariane's).

``produce``: sends this worker's shard of planes; each of ``--threads`` threads owns a set of
planes and sends their flights serially in departure order (FIFO order per message group holds
only for serial sends by one producer, RocketMQ FIFO docs). Prints ``S <flight id>`` after each
acknowledged send.

``consume``: receives with a SimpleConsumer of the FIFO group from ``--threads`` threads, acks
each message and prints ``R <flight id> <tail> <seq> <receive ns>``; stops when stdin closes
(the parent decides when everything arrived) or at ``--deadline-s``.

With ``--access-key``/``--secret-key`` the client signs its requests (ACL 2.0); with ``--tls`` it
dials TLS (``tls_enable=True``), verifying the servers with the roots grpcio reads from
``GRPC_DEFAULT_SSL_ROOTS_FILE_PATH`` (the parent points it at the cluster's CA).
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
import zlib
from typing import Any

from rocketmq import (  # type: ignore[import-untyped]
    ClientConfiguration,
    Credentials,
    FilterExpression,
    Message,
    Producer,
    SimpleConsumer,
)

from examples.flights import dataset

_out_lock = threading.Lock()


def _emit(line: str) -> None:
    with _out_lock:
        sys.stdout.write(line + "\n")


def _shard_of(tail: str, shards: int) -> int:
    return zlib.crc32(tail.encode()) % shards


def _config(args: argparse.Namespace) -> Any:
    """The client configuration: endpoints, and credentials when given."""
    credentials = Credentials(args.access_key, args.secret_key)
    return ClientConfiguration(args.endpoints, credentials, request_timeout=10)


def _send_planes(producer: Any, topic: str, flights: list[dataset.Flight]) -> None:
    for flight in flights:
        msg = Message()
        msg.topic = topic
        msg.body = flight.body
        msg.tag = flight.carrier
        msg.keys = flight.tailnum
        msg.message_group = flight.tailnum
        producer.send(msg)
        _emit(f"S {flight.id}")


def produce(args: argparse.Namespace) -> int:
    """Send this shard's flights with ``--threads`` serial senders."""
    flights = dataset.load_flights()[: args.limit or None]
    mine = [f for f in flights if _shard_of(f.tailnum, args.shards) == args.shard]
    per_thread: list[list[dataset.Flight]] = [[] for _ in range(args.threads)]
    for flight in mine:  # already in departure order; planes stay whole within one thread
        per_thread[_shard_of(flight.tailnum + "#", args.threads)].append(flight)
    producer = Producer(_config(args), (args.topic,), tls_enable=args.tls)
    producer.startup()
    try:
        threads = [
            threading.Thread(target=_send_planes, args=(producer, args.topic, chunk), daemon=True)
            for chunk in per_thread
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.stdout.flush()
        producer.shutdown()
    return 0


def _receive_loop(consumer: Any, stop: threading.Event, deadline: float) -> None:
    while not stop.is_set() and time.monotonic() < deadline:
        for msg in consumer.receive(32, 60):
            flight = json.loads(msg.body)
            _emit(f"R {flight['id']} {msg.message_group} {flight['seq']} {time.time_ns()}")
            consumer.ack(msg)


def consume(args: argparse.Namespace) -> int:
    """Receive and ack until stdin closes or the deadline passes."""
    consumer = SimpleConsumer(
        _config(args),
        args.group,
        {args.topic: FilterExpression()},
        await_duration=args.await_s,
        tls_enable=args.tls,
    )
    consumer.startup()
    stop = threading.Event()
    deadline = time.monotonic() + args.deadline_s
    threads = [
        threading.Thread(target=_receive_loop, args=(consumer, stop, deadline), daemon=True)
        for _ in range(args.threads)
    ]
    for thread in threads:
        thread.start()
    sys.stdin.read()  # the parent closes our stdin when every flight arrived
    stop.set()
    for thread in threads:
        thread.join(timeout=args.await_s + 15)
    sys.stdout.flush()
    consumer.shutdown()
    return 0


def main() -> int:
    """Parse arguments and run ``produce`` or ``consume``."""
    parser = argparse.ArgumentParser(description=__doc__)
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("produce")
    p.add_argument("--shard", type=int, required=True)
    p.add_argument("--shards", type=int, required=True)
    p.add_argument("--limit", type=int, default=0, help="only the first N flights (0 = all)")
    c = sub.add_parser("consume")
    c.add_argument("--group", required=True)
    c.add_argument("--deadline-s", type=float, default=1800)
    c.add_argument("--await-s", type=int, default=5)
    for sp in (p, c):
        sp.add_argument("--endpoints", required=True)
        sp.add_argument("--topic", required=True)
        sp.add_argument("--threads", type=int, default=16)
        sp.add_argument("--access-key", default="", help="ACL 2.0 user (empty: unsigned)")
        sp.add_argument("--secret-key", default="")
        sp.add_argument("--tls", action="store_true", help="dial TLS (tls_enable=True)")
    args = parser.parse_args()
    return produce(args) if args.cmd == "produce" else consume(args)


if __name__ == "__main__":
    sys.exit(main())
