"""Benchmark (not a test): scheduled messages, how fast they are put and how late they arrive.

Run ``python -m bench.scheduled [--messages N] [--single-messages S] [--batch B]
[--lead-s L] [--spread-s W] [--level-messages M] [--levels 1,2] [--no-record]`` from the
repository root. Two parts:

- **timer (v2 ``delivery_timestamp``, over gRPC)** against a fresh ``ariane dev`` cluster
  (name server + broker processes, the broker's default front-end workers): DELAY messages
  with delivery times spread evenly over ``[t0 + lead, t0 + lead + spread]``, sent with raw
  SendMessage calls (``--batch`` messages per call, then ``--single-messages`` one per call as
  the official clients send them). An ``ariane.client.SimpleConsumer`` receives from the start;
  lateness = receive time - delivery time (what a consumer sees) and, separately, the
  delivered record's store time - delivery time (the broker's part).
- **delay levels (in-process)**: v2 has no delay level (only the classic protocol sends one),
  so this part drives a ``BrokerRuntime`` in this process: messages parked with
  ``ScheduleService.park_level`` (levels ``--levels``, RocketMQ's 1 s, 5 s, …) and put with
  ``MessageStore.put_messages`` in batches of ``--batch``, delivered by the service's own loop;
  lateness = the delivered record's store time - (the put's start + the level's delay), an
  upper bound by up to one batch's put time.

Put rates are messages / wall time of the sending loop. Lateness is reported as p50/p99/max in
ms (nearest rank) plus the count delivered early (must be 0). The machine is a shared 2-core
VM: the outside load (``ext_cores``) over each part is recorded next to it, and the run does
not wait for a quiet machine. Results: ``bench/results/scheduled-<stamp>.md`` and ``.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import datetime
import pathlib
import tempfile
import time
from typing import Any

import grpc

from ariane import client, dev
from ariane.benchmark import machine, measure, report
from ariane.broker import runtime as runtime_mod
from ariane.broker import settings as broker_settings
from ariane.common import clock, errors, ids, message
from ariane.grpcwire import convert, messages, pb
from ariane.store import commit_log
from ariane.store import settings as store_settings

RESULTS_DIR = pathlib.Path(__file__).parent / "results"
REPO = pathlib.Path(__file__).resolve().parents[1]
TOPIC = "bench-scheduled"
GROUP = "bench-scheduled-group"
HEADERS = (("x-mq-client-id", "bench-scheduled@1@0@t"), ("x-mq-language", "PYTHON"))
RECEIVE_GRACE_S = 30.0
"""How long past the last delivery time the consumer keeps waiting for stragglers."""


@dataclasses.dataclass(frozen=True, slots=True)
class Lateness:
    """Lateness of delivered messages against their delivery times, ms."""

    delivered: int
    expected: int
    early: int
    p50_ms: float
    p99_ms: float
    max_ms: float

    @staticmethod
    def of(late_ms: list[float], expected: int) -> Lateness:
        """Summarise per-message lateness samples (negative = early)."""
        ordered = sorted(late_ms)
        return Lateness(
            delivered=len(ordered),
            expected=expected,
            early=sum(1 for v in ordered if v < 0),
            p50_ms=measure.percentile(ordered, 50),
            p99_ms=measure.percentile(ordered, 99),
            max_ms=ordered[-1] if ordered else float("nan"),
        )


def _delay_message(message_id: str, delivery_ms: int) -> pb.v2.Message:
    msg = pb.v2.Message(topic=convert.resource(TOPIC), body=message_id.encode())
    system = msg.system_properties
    system.message_id = message_id
    system.message_type = pb.v2.MessageType.DELAY
    system.body_encoding = pb.v2.Encoding.IDENTITY
    system.born_timestamp.CopyFrom(messages.timestamp(int(time.time() * 1000)))
    system.delivery_timestamp.CopyFrom(messages.timestamp(delivery_ms))
    return msg


async def _send_all(broker: str, due: dict[str, int], batch: int) -> float:
    """Send DELAY messages ``batch`` per SendMessage call; returns msgs/s of the loop."""
    items = list(due.items())
    async with grpc.aio.insecure_channel(broker) as channel:
        stub = pb.v2_service_grpc.MessagingServiceStub(channel)
        started = time.perf_counter()
        for at in range(0, len(items), batch):
            part = [_delay_message(mid, ms) for mid, ms in items[at : at + batch]]
            request = pb.v2_service.SendMessageRequest(messages=part)
            answer = await stub.SendMessage(request, timeout=30, metadata=HEADERS)
            if answer.status.code != errors.Code.OK:
                raise RuntimeError(f"SendMessage refused: {answer.status}")
        return len(items) / max(time.perf_counter() - started, 1e-9)


async def _receive_all(namesrv: str, due: dict[str, int], until: float) -> dict[str, Any]:
    """Receive and ack until every message of ``due`` arrived or ``until`` (monotonic s):
    message id → (receive ms, store ms)."""
    got: dict[str, tuple[int, int]] = {}
    duplicates = 0
    async with client.SimpleConsumer(namesrv, GROUP, TOPIC) as consumer:
        while len(got) < len(due) and time.monotonic() < until:
            with contextlib.suppress(errors.ServiceUnavailableError, errors.RequestTimeoutError):
                received = await consumer.receive(32, invisible_duration_s=30)
                now_ms = int(time.time() * 1000)
                for m in received:
                    if m.message_id in got:
                        duplicates += 1
                    got.setdefault(m.message_id, (now_ms, m.store_timestamp_ms))
                await consumer.ack(received)
    return {"got": got, "duplicates": duplicates}


async def _timer_part(args: argparse.Namespace, namesrv: str, broker: str) -> dict[str, Any]:
    async with client.AdminClient(namesrv) as admin:
        await admin.create_topic(TOPIC, write_queue_nums=4, message_type=message.MessageType.DELAY)
        await admin.create_group(GROUP)
    await asyncio.sleep(1.0)  # let the name server route the new topic to the consumer
    t0 = int(time.time() * 1000) + round(args.lead_s * 1000)
    total = args.messages + args.single_messages
    step_ms = args.spread_s * 1000 / max(total - 1, 1)
    due = {f"T{i:06d}": t0 + round(i * step_ms) for i in range(total)}
    batched = dict(list(due.items())[: args.messages])
    single = dict(list(due.items())[args.messages :])
    until = time.monotonic() + args.lead_s + args.spread_s + RECEIVE_GRACE_S
    receiving = asyncio.create_task(_receive_all(namesrv, due, until))
    with machine.LoadMeter(machine.disk_of(REPO)) as meter:
        batch_rate = await _send_all(broker, batched, args.batch)
        single_rate = await _send_all(broker, single, 1)
        sent_ms = int(time.time() * 1000)
        received = await receiving
    got: dict[str, tuple[int, int]] = received["got"]
    return {
        "put_batch_msgs_per_s": batch_rate,
        "put_single_msgs_per_s": single_rate,
        "sends_done_before_first_due": sent_ms <= t0,
        "duplicates": received["duplicates"],
        "consumer": Lateness.of([r - due[m] for m, (r, _) in got.items()], total),
        "store": Lateness.of([s - due[m] for m, (_, s) in got.items()], total),
        "load": meter.result(),
    }


async def _level_part(args: argparse.Namespace, store_dir: pathlib.Path) -> dict[str, Any]:
    settings = broker_settings.BrokerSettings(
        store_dir=store_dir,
        store=store_settings.StoreSettings(commit_log_file_size_bytes=64 * 1024 * 1024),
    )
    broker = runtime_mod.BrokerRuntime(settings, time=clock.SystemClock())
    levels: list[int] = args.levels
    delays_ms = settings.schedule.delay_levels_ms
    due: dict[str, float] = {}
    try:
        deliver = asyncio.create_task(broker.schedule.run())
        with machine.LoadMeter(machine.disk_of(REPO)) as meter:
            started = time.perf_counter()
            for at in range(0, args.level_messages, args.batch):
                put_ms = time.time() * 1000
                requests = []
                for i in range(at, min(at + args.batch, args.level_messages)):
                    level = levels[i % len(levels)]
                    due[f"L{i:06d}"] = put_ms + delays_ms[level - 1]
                    requests.append(_level_request(broker, f"L{i:06d}", level))
                results = await broker.store.put_messages(requests)
                if not all(r.status.is_stored for r in results):
                    raise RuntimeError("a delay-level put was refused")
            rate = args.level_messages / max(time.perf_counter() - started, 1e-9)
            late = await _level_arrivals(broker, due, max(delays_ms[lv - 1] for lv in levels))
        deliver.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await deliver
    finally:
        broker.close()
    return {"put_msgs_per_s": rate, "lateness": late, "load": meter.result()}


def _level_request(
    broker: runtime_mod.BrokerRuntime, message_id: str, level: int
) -> commit_log.AppendRequest:
    request = commit_log.AppendRequest(
        message=message.Message(
            ids.TopicName(TOPIC),
            message_id.encode(),
            {message.Property.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: message_id},
        ),
        queue_id=ids.QueueId(0),
        born_timestamp_ms=ids.TimestampMs(int(time.time() * 1000)),
    )
    return broker.schedule.park_level(request, level)


async def _level_arrivals(
    broker: runtime_mod.BrokerRuntime, due: dict[str, float], longest_ms: int
) -> Lateness:
    """Poll the real topic until every parked message arrived (or the grace passed)."""
    until = time.monotonic() + longest_ms / 1000 + RECEIVE_GRACE_S
    late: dict[str, float] = {}
    offset = 0
    while len(late) < len(due) and time.monotonic() < until:
        found = broker.store.get_messages(
            ids.TopicName(TOPIC),
            ids.QueueId(0),
            ids.QueueOffset(offset),
            max_count=1024,
            max_bytes=64 * 1024 * 1024,
        )
        for stored in found.messages:
            mid = stored.body.decode()
            late.setdefault(mid, stored.store_timestamp_ms - due[mid])
        offset = found.next_begin_offset
        if not found.messages:
            await asyncio.sleep(0.05)
    return Lateness.of(list(late.values()), len(due))


def _lateness_cells(late: Lateness) -> list[str]:
    return [
        f"{late.delivered}/{late.expected}",
        str(late.early),
        f"{late.p50_ms:.0f}",
        f"{late.p99_ms:.0f}",
        f"{late.max_ms:.0f}",
    ]


def _markdown(args: argparse.Namespace, timer: dict[str, Any], level: dict[str, Any]) -> str:
    t_cores, l_cores = f"{timer['load'].ext_cores:.2f}", f"{level['load'].ext_cores:.2f}"
    rates = (
        timer["put_batch_msgs_per_s"],
        timer["put_single_msgs_per_s"],
        level["put_msgs_per_s"],
    )
    names = (
        f"timer, gRPC, {args.batch} per SendMessage",
        "timer, gRPC, 1 per SendMessage",
        f"delay levels {args.levels}, in-process, {args.batch} per put",
    )
    counts = (args.messages, args.single_messages, args.level_messages)
    puts = [
        [name, f"{rate:.0f}", str(count), cores]
        for name, rate, count, cores in zip(
            names, rates, counts, (t_cores, t_cores, l_cores), strict=True
        )
    ]
    lateness = [
        ["timer: consumer receive - delivery time", *_lateness_cells(timer["consumer"])],
        ["timer: broker store - delivery time", *_lateness_cells(timer["store"])],
        ["delay levels: store - (put + delay)", *_lateness_cells(level["lateness"])],
    ]
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        f"`{report.command_line('bench.scheduled')}` ({stamp}). Shared 2-core VM, run as "
        "found (no quiet-machine wait): read each row with its `ext_cores` (other load).",
        "",
        report.markdown_table(["put", "msgs/s", "messages", "ext_cores"], puts),
        "",
        report.markdown_table(
            ["delivered on time", "delivered", "early", "p50 ms", "p99 ms", "max ms"], lateness
        ),
        "",
        f"Timer: due evenly over {args.spread_s:g} s from {args.lead_s:g} s after the start; "
        f"every send done before the first was due: {timer['sends_done_before_first_due']}; "
        f"duplicates received: {timer['duplicates']}. Delay levels: v2 has no delay level, so "
        "they are parked with `ScheduleService.park_level` and put in-process; their lateness "
        "is an upper bound by up to one batch's put time.",
    ]
    return "\n".join(lines)


def _payload(
    args: argparse.Namespace, timer: dict[str, Any], level: dict[str, Any]
) -> dict[str, Any]:
    def plain(value: Any) -> Any:
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            return dataclasses.asdict(value)
        return value

    return {
        "command": report.command_line("bench.scheduled"),
        "args": {k: str(v) if isinstance(v, pathlib.Path) else v for k, v in vars(args).items()},
        "timer": {k: plain(v) for k, v in timer.items()},
        "levels": {k: plain(v) for k, v in level.items()},
        "machine": machine.machine_info(pathlib.Path(__file__).parent, REPO),
    }


def _run(args: argparse.Namespace) -> tuple[dict[str, Any], dict[str, Any]]:
    """Both parts, each on its own fresh store under a temporary directory of the checkout
    (the file system under test), removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="bench-scheduled-", dir=REPO) as tmp:
        root = pathlib.Path(tmp)
        with dev.dev_cluster(root / "cluster", namesrv_port=0) as endpoints:
            timer = asyncio.run(_timer_part(args, endpoints.namesrv, endpoints.broker))
        level = asyncio.run(_level_part(args, root / "levels"))
    return timer, level


def _levels(text: str) -> list[int]:
    levels = [int(part) for part in text.split(",") if part.strip()]
    if not levels or any(not 1 <= lv <= 18 for lv in levels):
        raise argparse.ArgumentTypeError("levels are 1..18, comma-separated")
    return levels


def main() -> None:
    """Parse the command line, run both parts, print and record the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=2000, help="timer messages, batched")
    parser.add_argument("--single-messages", type=int, default=300, help="timer, one per call")
    parser.add_argument("--batch", type=int, default=64, help="messages per SendMessage / put")
    parser.add_argument("--lead-s", type=float, default=10.0, help="first delivery after start")
    parser.add_argument("--spread-s", type=float, default=10.0, help="delivery times span")
    parser.add_argument("--level-messages", type=int, default=2000, help="delay-level messages")
    parser.add_argument("--levels", type=_levels, default=[1, 2], help="delay levels, e.g. 1,2")
    parser.add_argument("--no-record", action="store_true", help="print only")
    parser.add_argument("--results-dir", type=pathlib.Path, default=RESULTS_DIR)
    args = parser.parse_args()
    timer, level = _run(args)
    text = _markdown(args, timer, level)
    print(text)
    if not args.no_record:
        stamp = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H%M%SZ")
        paths = report.write_results(
            "scheduled", stamp, _payload(args, timer, level), text, args.results_dir
        )
        print(f"recorded {paths[1]}")


if __name__ == "__main__":
    main()
