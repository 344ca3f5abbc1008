"""A command-line driver around the official ``rocketmq-python-client`` (PyPI, 5.1.2).

It runs in its own process (the official client's generated protobuf modules clash with ours in
one interpreter, grpc-v2.md §1) and speaks JSON lines on stdout, one event per line, so tests
and the flights job can assert on what a real user of the official client would see.

Commands::

    produce        --endpoints E --topic T --count N [--tag X] [--keys-prefix K]
                   [--groups G] [--body-size B] [--prefix P] [--delay-s S] [--recall I]
                   [--priorities P0,P1,...]
    simple-consume --endpoints E --group G --topic T --count N [--invisible-s S]
                   [--no-ack] [--deadline-s D] [--filter EXPR] [--batch B]
    push-consume   --endpoints E --group G --topic T --count N [--fail] [--deadline-s D]
                   [--sleep-s S] [--linger-s L]
    push-watch     --endpoints E --group G --topic T [--deadline-s D]
    transaction    --endpoints E --topic T --count N --end commit|rollback|none
                   --checker commit|rollback|unknown [--checks C] [--hold] [--deadline-s D]
    lite           --endpoints E --topic T --group G --consumer push|simple --subscribe L1,..
                   --send L1,.. --count N [--deadline-s D]

Every loop is bounded by ``--deadline-s``; the driver exits 0 when it reached ``--count`` and 3
when the deadline passed first (printing what it saw so far); a client exception is printed as
an ``error`` event (class name and message) and exits 4. ``RMQ_DRIVER_ACCESS_KEY`` and
``RMQ_DRIVER_SECRET_KEY`` in the environment become the client's ``Credentials``;
``RMQ_DRIVER_TLS=1`` turns the client's ``tls_enable`` on (it verifies the servers against the
system roots, or ``GRPC_DEFAULT_SSL_ROOTS_FILE_PATH``). ``produce --interval-s S`` paces the
sends (a producer that keeps sending while something else happens). ``produce --priorities``
gives message i the priority ``P[i % len(P)]`` (``Message.priority``, a PRIORITY message).
``push-watch`` has no count: it prints its client id, then every message with its receipt
handle, until its stdin closes (then it shuts down cleanly: NotifyClientTermination) or the
deadline passes. ``lite`` (RocketMQ 5.5 lite topics) starts a ``LitePushConsumer`` or
``LiteSimpleConsumer`` bound to ``--topic``, subscribes each ``--subscribe`` lite topic
(``subscribed`` lists the set the client holds after the broker's answers, once the client's
complete set was synced: 5.1.2's ``subscribe_lite`` sends a name's characters; a refusal the
client raises itself is an ``error`` event), sends one message per ``--send`` entry with that
``lite_topic`` (``sent``, or an ``error`` event with the refusal's class and code), then
consumes until ``--count`` messages arrived (``received``, acked, with their ``lite_topic``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from typing import Any

from rocketmq import (  # type: ignore[import-untyped]
    ClientConfiguration,
    ConsumeResult,
    Credentials,
    FilterExpression,
    LitePushConsumer,
    LiteSimpleConsumer,
    Message,
    MessageListener,
    Producer,
    PushConsumer,
    SimpleConsumer,
    TransactionChecker,
)
from rocketmq.grpc_protocol import TransactionResolution  # type: ignore[import-untyped]
from rocketmq.v5.exception import ClientException  # type: ignore[import-untyped]

_print_lock = threading.Lock()


def emit(event: dict[str, Any]) -> None:
    """Print one JSON event line and flush, so a parent reading the pipe sees it at once."""
    with _print_lock:
        sys.stdout.write(json.dumps(event, sort_keys=True) + "\n")
        sys.stdout.flush()


def _config(endpoints: str) -> Any:
    credentials = Credentials(
        os.environ.get("RMQ_DRIVER_ACCESS_KEY", ""), os.environ.get("RMQ_DRIVER_SECRET_KEY", "")
    )
    return ClientConfiguration(endpoints, credentials, request_timeout=10)


def _tls() -> bool:
    """Whether ``RMQ_DRIVER_TLS`` asks for the client's ``tls_enable``."""
    return os.environ.get("RMQ_DRIVER_TLS", "") == "1"


def _view(msg: Any) -> dict[str, Any]:
    return {
        "received_ms": int(time.time() * 1000),
        "delivery_timestamp": msg.delivery_timestamp,
        "message_id": msg.message_id,
        "body": msg.body.decode("utf-8", "replace"),
        "tag": msg.tag,
        "keys": sorted(msg.keys),
        "group": msg.message_group,
        "attempt": msg.delivery_attempt,
        "topic": msg.topic,
        "properties": dict(msg.properties),
        "corrupted": bool(msg.corrupted),
        "priority": msg.priority,
        "lite_topic": msg.lite_topic,
    }


def produce(args: argparse.Namespace) -> int:
    """Send ``count`` messages one by one with the official Producer; print each receipt."""
    producer = Producer(_config(args.endpoints), (args.topic,), tls_enable=_tls())
    producer.startup()
    try:
        for i in range(args.count):
            msg = Message()
            msg.topic = args.topic
            body = f"{args.prefix}-{i}"
            msg.body = (body + "x" * max(0, args.body_size - len(body))).encode()
            if args.tag:
                msg.tag = args.tag
            if args.keys_prefix:
                msg.keys = f"{args.keys_prefix}-{i}"
            if args.groups:
                msg.message_group = f"g{i % args.groups}"
            if args.delay_s:  # the client sends whole seconds (grpc-v2.md §5.3)
                msg.delivery_timestamp = int(time.time()) + args.delay_s
            if args.priorities:
                levels = [int(p) for p in args.priorities.split(",")]
                msg.priority = levels[i % len(levels)]
            receipt = producer.send(msg)
            emit(
                {
                    "event": "sent",
                    "i": i,
                    "message_id": receipt.message_id,
                    "body": body,
                    "group": msg.message_group,
                    "delivery_s": msg.delivery_timestamp,
                    "recall_handle": receipt.recall_handle,
                    "priority": msg.priority,
                }
            )
            if args.interval_s:
                time.sleep(args.interval_s)  # pacing, not waiting for anything
            if args.recall == i:
                recalled = producer.recall_message(args.topic, receipt.recall_handle)
                emit({"event": "recalled", "message_id": str(recalled)})
    finally:
        producer.shutdown()
    return 0


def simple_consume(args: argparse.Namespace) -> int:
    """Receive until ``count`` messages were handled (acked unless ``--no-ack``)."""
    expression = FilterExpression(args.filter) if args.filter else FilterExpression()
    consumer = SimpleConsumer(
        _config(args.endpoints),
        args.group,
        {args.topic: expression},
        await_duration=args.await_s,
        tls_enable=_tls(),
    )
    consumer.startup()
    handled = 0
    deadline = time.monotonic() + args.deadline_s
    try:
        while handled < args.count and time.monotonic() < deadline:
            for msg in consumer.receive(args.batch, args.invisible_s):
                emit({"event": "received", **_view(msg)})
                if not args.no_ack:
                    consumer.ack(msg)
                    emit({"event": "acked", "message_id": msg.message_id})
                handled += 1
    finally:
        consumer.shutdown()
    return 0 if handled >= args.count else 3


class _Listener(MessageListener):  # type: ignore[misc]
    def __init__(self, *, fail: bool, sleep_s: float = 0.0) -> None:
        self.fail = fail
        self.sleep_s = sleep_s
        self.count = 0
        self.lock = threading.Lock()

    def consume(self, message: Any) -> Any:
        emit({"event": "consumed", **_view(message)})
        if self.sleep_s:  # a long-running listener (server-side renewal keeps it invisible)
            time.sleep(self.sleep_s)
            emit({"event": "finished", "message_id": message.message_id})
        with self.lock:
            self.count += 1
        return ConsumeResult.FAILURE if self.fail else ConsumeResult.SUCCESS


def push_consume(args: argparse.Namespace) -> int:
    """Run a PushConsumer until its listener returned ``count`` times or the deadline, then
    ``--linger-s`` longer (redeliveries show up as more ``consumed`` events)."""
    listener = _Listener(fail=args.fail, sleep_s=args.sleep_s)
    consumer = PushConsumer(
        _config(args.endpoints),
        args.group,
        listener,
        {args.topic: FilterExpression()},
        tls_enable=_tls(),
    )
    consumer.startup()
    emit({"event": "started"})
    deadline = time.monotonic() + args.deadline_s
    try:
        while time.monotonic() < deadline:
            with listener.lock:
                if listener.count >= args.count:
                    break
            time.sleep(0.1)
        time.sleep(args.linger_s)
    finally:
        consumer.shutdown()
    return 0 if listener.count >= args.count else 3


class _Watcher(MessageListener):  # type: ignore[misc]
    def consume(self, message: Any) -> Any:
        emit({"event": "consumed", "receipt_handle": message.receipt_handle, **_view(message)})
        return ConsumeResult.SUCCESS


def push_watch(args: argparse.Namespace) -> int:
    """Run a PushConsumer until stdin closes or the deadline, printing what it consumes."""
    consumer = PushConsumer(
        _config(args.endpoints),
        args.group,
        _Watcher(),
        {args.topic: FilterExpression()},
        tls_enable=_tls(),
    )
    consumer.startup()
    emit({"event": "started", "client_id": consumer.client_id})
    closed = threading.Event()

    def watch_stdin() -> None:
        sys.stdin.read()
        closed.set()

    threading.Thread(target=watch_stdin, daemon=True).start()
    try:
        closed.wait(args.deadline_s)
    finally:
        consumer.shutdown()
        emit({"event": "stopped"})
    return 0 if closed.is_set() else 3


class _Checker(TransactionChecker):  # type: ignore[misc]
    def __init__(self, answer: str) -> None:
        self.answer = answer
        self.count = 0
        self.lock = threading.Lock()

    def check(self, message: Any) -> Any:
        emit({"event": "checked", "answer": self.answer, **_view(message)})
        with self.lock:
            self.count += 1
        resolutions = {
            "commit": TransactionResolution.COMMIT,
            "rollback": TransactionResolution.ROLLBACK,
        }
        return resolutions.get(
            self.answer, TransactionResolution.TRANSACTION_RESOLUTION_UNSPECIFIED
        )


def transaction(args: argparse.Namespace) -> int:
    """Send ``count`` half messages, end each with ``--end`` (or leave them open), then stay
    until the checker was asked ``--checks`` times or the deadline; with ``--hold`` keep the
    producer (and its checker) running until stdin closes."""
    checker = _Checker(args.checker)
    producer = Producer(_config(args.endpoints), (args.topic,), checker, tls_enable=_tls())
    producer.startup()
    deadline = time.monotonic() + args.deadline_s
    try:
        for i in range(args.count):
            msg = Message()
            msg.topic = args.topic
            msg.body = f"{args.prefix}-{i}".encode()
            msg.tag = "tx"
            txn = producer.begin_transaction()
            receipt = producer.send(msg, txn)
            emit(
                {
                    "event": "sent",
                    "i": i,
                    "message_id": receipt.message_id,
                    "transaction_id": receipt.transaction_id,
                }
            )
            if args.end != "none":
                txn.commit() if args.end == "commit" else txn.rollback()
                emit({"event": "ended", "message_id": receipt.message_id, "end": args.end})
        while time.monotonic() < deadline:
            with checker.lock:
                if checker.count >= args.checks:
                    break
            time.sleep(0.1)
        emit({"event": "checks", "count": checker.count})
        if args.hold:
            sys.stdin.read()  # the parent closes stdin once it has seen the outcome
    finally:
        producer.shutdown()
    return 0 if checker.count >= args.checks else 3


def _error(exc: ClientException, **extra: Any) -> dict[str, Any]:
    return {"event": "error", "type": type(exc).__name__, "message": str(exc), **extra}


def _lite_send(args: argparse.Namespace) -> None:
    producer = Producer(_config(args.endpoints), (args.topic,), tls_enable=_tls())
    producer.startup()
    try:
        for i, name in enumerate(n for n in args.send.split(",") if n):
            msg = Message()
            msg.topic = args.topic
            msg.body = f"{name}-{i}".encode()
            msg.lite_topic = name
            try:
                receipt = producer.send(msg)
            except ClientException as exc:
                emit(_error(exc, lite_topic=name))
                continue
            emit({"event": "sent", "i": i, "lite_topic": name, "message_id": receipt.message_id})
    finally:
        producer.shutdown()


def lite(args: argparse.Namespace) -> int:
    """A lite consumer subscribes, a producer sends to lite topics, the consumer consumes
    (module docstring)."""
    config = _config(args.endpoints)
    listener = _Listener(fail=False)
    if args.consumer == "push":
        consumer = LitePushConsumer(config, args.group, args.topic, listener, tls_enable=_tls())
    else:
        consumer = LiteSimpleConsumer(args.topic, config, args.group, 5, tls_enable=_tls())
    consumer.startup()
    held = getattr(consumer, f"_{type(consumer).__name__}__subscription_manager")
    handled = 0
    try:
        # A LiteSimpleConsumer's startup does not wait for the settings reply (5.1.2), and
        # until it has one its quota is 0: wait for the announced quota (10 s deadline).
        settled = time.monotonic() + 10
        while held.lite_subscription_quota == 0 and time.monotonic() < settled:
            time.sleep(0.05)  # polling the client's state with a deadline
        emit({"event": "quota", "quota": held.lite_subscription_quota})
        for name in (n for n in args.subscribe.split(",") if n):
            try:
                consumer.subscribe_lite(name)
            except ClientException as exc:
                emit(_error(exc, lite_topic=name))
        # 5.1.2's subscribe_lite sends PARTIAL_ADD with lite_topic_set.extend(name): one
        # entry per *character* of the name (its scheduler's COMPLETE_ADD of the real names
        # repairs that every 30 s). Send that complete set now rather than wait for it.
        held.sync_all_lite_subscription()
        emit({"event": "subscribed", "lite_topics": sorted(held.lite_topics)})
        _lite_send(args)
        deadline = time.monotonic() + args.deadline_s
        while handled < args.count and time.monotonic() < deadline:
            if args.consumer == "push":
                with listener.lock:
                    handled = listener.count
                time.sleep(0.1)  # polling the listener's count with a deadline
                continue
            for msg in consumer.receive(16, 15):
                emit({"event": "received", **_view(msg)})
                consumer.ack(msg)
                handled += 1
    finally:
        consumer.shutdown()
    return 0 if handled >= args.count else 3


def main() -> int:
    """Parse the command line and run one command."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("produce")
    p.add_argument("--endpoints", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--count", type=int, required=True)
    p.add_argument("--tag", default="")
    p.add_argument("--keys-prefix", default="")
    p.add_argument("--groups", type=int, default=0)
    p.add_argument("--body-size", type=int, default=0)
    p.add_argument("--prefix", default="m")
    p.add_argument("--delay-s", type=int, default=0)
    p.add_argument("--recall", type=int, default=-1)
    p.add_argument("--interval-s", type=float, default=0.0)
    p.add_argument("--priorities", default="")
    s = sub.add_parser("simple-consume")
    s.add_argument("--endpoints", required=True)
    s.add_argument("--group", required=True)
    s.add_argument("--topic", required=True)
    s.add_argument("--count", type=int, required=True)
    s.add_argument("--invisible-s", type=int, default=15)
    s.add_argument("--await-s", type=int, default=5)
    s.add_argument("--batch", type=int, default=16)
    s.add_argument("--no-ack", action="store_true")
    s.add_argument("--deadline-s", type=float, default=60)
    s.add_argument("--filter", default="")
    q = sub.add_parser("push-consume")
    q.add_argument("--endpoints", required=True)
    q.add_argument("--group", required=True)
    q.add_argument("--topic", required=True)
    q.add_argument("--count", type=int, required=True)
    q.add_argument("--fail", action="store_true")
    q.add_argument("--deadline-s", type=float, default=60)
    q.add_argument("--sleep-s", type=float, default=0.0)
    q.add_argument("--linger-s", type=float, default=0.0)
    w = sub.add_parser("push-watch")
    w.add_argument("--endpoints", required=True)
    w.add_argument("--group", required=True)
    w.add_argument("--topic", required=True)
    w.add_argument("--deadline-s", type=float, default=300)
    t = sub.add_parser("transaction")
    t.add_argument("--endpoints", required=True)
    t.add_argument("--topic", required=True)
    t.add_argument("--count", type=int, required=True)
    t.add_argument("--end", choices=["commit", "rollback", "none"], required=True)
    t.add_argument("--checker", choices=["commit", "rollback", "unknown"], default="unknown")
    t.add_argument("--checks", type=int, default=0)
    t.add_argument("--prefix", default="tx")
    t.add_argument("--hold", action="store_true")
    t.add_argument("--deadline-s", type=float, default=60)
    lt = sub.add_parser("lite")
    lt.add_argument("--endpoints", required=True)
    lt.add_argument("--topic", required=True)
    lt.add_argument("--group", required=True)
    lt.add_argument("--consumer", choices=["push", "simple"], required=True)
    lt.add_argument("--subscribe", default="")
    lt.add_argument("--send", default="")
    lt.add_argument("--count", type=int, required=True)
    lt.add_argument("--deadline-s", type=float, default=60)
    args = parser.parse_args()
    handlers = {
        "produce": produce,
        "simple-consume": simple_consume,
        "push-consume": push_consume,
        "push-watch": push_watch,
        "transaction": transaction,
        "lite": lite,
    }
    try:
        return handlers[args.cmd](args)
    except ClientException as exc:
        emit({"event": "error", "type": type(exc).__name__, "message": str(exc)})
        return 4


if __name__ == "__main__":
    sys.exit(main())
