"""Lite-topic benchmark (not a test): memory per idle lite topic, send/receive msgs/s and the
table's rebuild at a restart with 10^5 lite topics on one broker, in-process.

Run ``python -m bench.lite_topics [--lite-topics N] [--messages M] [--subscribed S] [--dir DIR]
[--rebuild-only]`` from the repository root (``--rebuild-only``: no receive figures). It opens
a broker's runtime and processors exactly as the server does (``broker.assembly.build``,
ASYNC_FLUSH, a fresh store under ``--dir`` with 64 MiB segments), a LITE parent with 8 queues,
and measures:

- ``bytes per idle lite topic``: ``tracemalloc`` growth of the lite-topic table (names
  included, made inside the measured region as a send's request would) while N lite topics are
  created through ``LiteTopicTable.touch_all``, divided by N (the layout of
  ``broker.tables.lite_topics``: no queue, no file, no offset table per lite topic);
- ``send``: ``SendProcessor.send`` of M LITE messages of 256 B in requests of 64, spread
  round-robin over the N lite topics (each lite topic gets M/N messages), msgs/s wall clock;
- ``receive all``: one consumer group whose clients subscribe all N lite topics (N/1000
  clients of 1000 each, under the per-client quota) receives and acks the M messages through
  ``ConsumeProcessor.receive`` with the group's ``LiteFilter`` (32 per receive), msgs/s;
- ``receive 1 %``: a second group subscribing S lite topics (default N/100) reads the same
  queues and gets only their messages: the filter prefilters on the ConsumeQueue tag slot, so
  the other 99 % are skipped without reading the CommitLog; msgs/s delivered and units
  scanned/s.
- ``rebuild``: the broker is closed and its store reopened (a restart), and the lite-topic
  table is rebuilt from it into an empty table (``broker.tables.lite_rebuild``: each parent
  queue's ConsumeQueue read backwards, one CommitLog read per lite topic): seconds, lite
  topics restored, ConsumeQueue units and CommitLog records read. The reopen itself (recovery,
  ConsumeQueue load, and the runtime's own rebuild) is reported as ``reopen_s``.

The machine is shared (2 cores, other engineers' tests): figures are indicative. Results go to
``bench/results/lite_topics-<date>T<time>.{json,md}``.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import gc
import json
import pathlib
import shutil
import tempfile
import time
import tracemalloc
from typing import Any

from ariane.broker import assembly, filters, runtime
from ariane.broker import settings as broker_settings
from ariane.broker.grpc import lite_rpc
from ariane.broker.processors import consume
from ariane.broker.tables import (
    lite_rebuild,
    lite_settings,
    lite_topics,
    subscriptions,
    topic_config,
)
from ariane.common import clock, errors, ids, message
from ariane.store import settings as store_settings

PARENT = ids.TopicName("sessions")
QUEUES = 8
BATCH = 64
BODY = b"x" * 256
RESULTS = pathlib.Path(__file__).resolve().parent / "results"


def _open(root: pathlib.Path, lite_topics_max: int) -> tuple[runtime.BrokerRuntime, Any]:
    settings = broker_settings.BrokerSettings(
        store_dir=root / "store",
        store=store_settings.StoreSettings(commit_log_file_size_bytes=64 * 1024 * 1024),
        lite=lite_settings.LiteSettings(lite_topics_max=lite_topics_max),
    )
    broker = runtime.BrokerRuntime(settings, time=clock.SystemClock())
    processors = assembly.build(broker, time=clock.SystemClock())
    processors.admin.create_topic(
        topic_config.TopicConfig(
            PARENT,
            read_queue_nums=QUEUES,
            write_queue_nums=QUEUES,
            message_type=message.MessageType.LITE,
        )
    )
    return broker, processors


def rebuild(root: pathlib.Path, lite_topics_max: int) -> dict[str, Any]:
    """Reopen the broker's store as a restart does, then time one rebuild of the lite-topic
    table into an empty table."""
    settings = broker_settings.BrokerSettings(
        store_dir=root / "store",
        store=store_settings.StoreSettings(commit_log_file_size_bytes=64 * 1024 * 1024),
        lite=lite_settings.LiteSettings(lite_topics_max=lite_topics_max),
    )
    started = time.perf_counter()
    broker = runtime.BrokerRuntime(settings, time=clock.SystemClock())
    reopen_s = time.perf_counter() - started
    try:
        assert len(broker.lite_topics) == lite_topics_max, len(broker.lite_topics)
        table = lite_topics.LiteTopicTable.of(settings.lite)
        started = time.perf_counter()
        report = lite_rebuild.rebuild(
            table, broker.store, [PARENT], ttl_ms=settings.lite.ttl_ms,
            units_max=settings.lite.rebuild_units_max, time=clock.SystemClock(),
        )  # fmt: skip
        rebuild_s = time.perf_counter() - started
    finally:
        broker.close()
    return {
        "reopen_s": round(reopen_s, 2),
        "rebuild_s": round(rebuild_s, 2),
        "rebuild_lite_topics": report.restored,
        "rebuild_units_read": report.units_read,
        "rebuild_records_read": report.records_read,
    }


def _names(count: int) -> list[str]:
    return [f"session-{i:07d}" for i in range(count)]


def memory_per_lite_topic(count: int) -> float:
    """Bytes the table grows by per lite topic created (names included)."""
    table = lite_topics.LiteTopicTable(
        lite_topics_max=count, subscription_quota=1_200, name_bytes_max=64
    )
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    entries = [(PARENT, f"session-{i:07d}", i % QUEUES) for i in range(count)]
    table.touch_all(entries, 0)
    del entries
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    assert len(table) == count
    return (after - before) / count


def _message(i: int, name: str) -> message.IncomingMessage:
    return message.IncomingMessage(
        topic=PARENT, body=BODY, gzip=False, user_properties={}, tag=None, keys=(),
        message_id=f"LITE{i:028X}", message_type="LITE", message_group=None,
        delivery_timestamp_ms=None, born_timestamp_ms=1_700_000_000_000, born_host="bench",
        trace_context=None, lite_topic=name,
    )  # fmt: skip


async def send(processors: Any, names: list[str], messages: int) -> float:
    """msgs/s of LITE sends in requests of ``BATCH``, round-robin over ``names``."""
    batches = [
        [_message(i, names[i % len(names)]) for i in range(start, min(start + BATCH, messages))]
        for start in range(0, messages, BATCH)
    ]
    started = time.perf_counter()
    for batch in batches:
        outcomes = await processors.sender.send(batch, born_ip="10.0.0.1")
        assert all(o.code is errors.Code.OK for o in outcomes), outcomes[0]
    return messages / (time.perf_counter() - started)


def _subscribe(broker: runtime.BrokerRuntime, group: str, names: list[str]) -> None:
    broker.groups.create_or_update(subscriptions.SubscriptionGroupConfig(ids.GroupName(group)))
    for k in range(0, len(names), 1_000):
        broker.lite_topics.sync(
            ids.ClientId(f"{group}-client-{k}"), ids.GroupName(group), PARENT,
            lite_topics.SyncAction.COMPLETE_ADD, names[k : k + 1_000],
        )  # fmt: skip


async def receive(
    broker: runtime.BrokerRuntime, processors: Any, group: str, expected: int
) -> tuple[float, int]:
    """msgs/s received and acked by ``group`` until ``expected`` arrived or a pass is empty."""
    request = consume.ReceiveRequest(
        group=ids.GroupName(group), topic=PARENT, queue_id=-1,
        message_filter=lite_rpc.receive_filter(broker.lite_topics, ids.GroupName(group), PARENT),
        batch_size=32, invisible_ms=60_000, poll_s=0.0,
    )  # fmt: skip
    assert isinstance(request.message_filter, filters.LiteFilter)
    got = empty = 0
    started = time.perf_counter()
    while got < expected and empty < 3 * QUEUES:
        received = await processors.consumer.receive(request)
        empty = 0 if received else empty + 1
        with processors.consumer.ack_batch():
            for item in received:
                processors.consumer.ack(request.group, PARENT, item.delivery.receipt_handle)
        got += len(received)
    return got / (time.perf_counter() - started), got


async def _receives(
    broker: runtime.BrokerRuntime, processors: Any, names: list[str], args: argparse.Namespace
) -> dict[str, Any]:
    """The two receive figures (module docstring)."""
    _subscribe(broker, "all", names)
    all_rate, all_got = await receive(broker, processors, "all", args.messages)
    few = names[:: max(1, len(names) // args.subscribed)][: args.subscribed]
    _subscribe(broker, "few", few)
    expected = sum(1 for i in range(args.messages) if names[i % len(names)] in set(few))
    started = time.perf_counter()
    few_rate, few_got = await receive(broker, processors, "few", expected)
    scanned_rate = args.messages / (time.perf_counter() - started)
    return {
        "receive_all_msgs_per_s": round(all_rate),
        "receive_all_got": all_got,
        "receive_few_msgs_per_s": round(few_rate),
        "receive_few_got": few_got,
        "receive_few_expected": expected,
        "receive_few_units_scanned_per_s": round(scanned_rate),
    }


async def run(args: argparse.Namespace, root: pathlib.Path) -> dict[str, Any]:
    broker, processors = _open(root, args.lite_topics)
    try:
        names = _names(args.lite_topics)
        send_rate = await send(processors, names, args.messages)
        assert len(broker.lite_topics) == args.lite_topics
        received = {} if args.rebuild_only else await _receives(broker, processors, names, args)
    finally:
        broker.close()
    return {"send_msgs_per_s": round(send_rate), **received, **rebuild(root, args.lite_topics)}


def main() -> None:
    """Parse, run, print the table and record it."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lite-topics", type=int, default=100_000)
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--subscribed", type=int, default=1_000)
    parser.add_argument("--dir", type=pathlib.Path, default=None)
    parser.add_argument("--rebuild-only", action="store_true", help="skip the receive figures")
    args = parser.parse_args()
    bytes_each = memory_per_lite_topic(args.lite_topics)
    root = pathlib.Path(tempfile.mkdtemp(prefix="lite-bench-", dir=args.dir))
    try:
        figures = asyncio.run(run(args, root))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    figures = {"bytes_per_idle_lite_topic": round(bytes_each), **figures}
    command = (
        f"python -m bench.lite_topics --lite-topics {args.lite_topics} --messages "
        f"{args.messages} --subscribed {args.subscribed}"
        + (" --rebuild-only" if args.rebuild_only else "")
    )
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H%M%SZ")
    lines = [
        "# Lite topics: memory per idle lite topic, send/receive msgs/s, rebuild (in-process)",
        "",
        f"`{command}` ({stamp})",
        "",
        "| figure | value |",
        "|---|---|",
        *(f"| {k} | {v} |" for k, v in figures.items()),
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"lite_topics-{stamp}.md").write_text(text)
    (RESULTS / f"lite_topics-{stamp}.json").write_text(
        json.dumps({"command": command, **figures}, indent=2) + "\n"
    )


if __name__ == "__main__":
    main()
