"""Send-path benchmark (not a test): broker CPU per message of the send processor, in-process.

Run ``python -m bench.send_core [--baseline-src DIR] [--messages N] [--rounds R] [--dir DIR]``
from the repository root. Each run is a child process (``--child``) that opens a broker's
runtime and processors exactly as the server does (``broker.assembly.build``, ASYNC_FLUSH, a
fresh store under ``--dir`` with 64 MiB segments) and times, on the loop thread's CPU clock
(``time.thread_time``), what the broker does for a send once the request is decoded off the
wire, per message, in slices of 256 messages, and keeps each row's least CPU per message over
its slices (CPU time inflates with the neighbours' contention: the least disturbed slice is
the code's cost):

- ``v2 x1``: ``SendProcessor.send`` of one v2 message per call (what the gRPC adapter calls);
- ``classic x1``: the Remoting adapter (``remoting.sending.SendHandler.handle``) for one
  ``SEND_MESSAGE_V2`` as the Java client 5.3.3 writes it (header letters, TAGS, KEYS,
  UNIQ_KEY, WAIT and four user properties, 1 KiB body);
- ``classic batch 64``: the same adapter for ``SEND_BATCH_MESSAGE`` of 64 such messages.

With ``--baseline-src`` (the ``src`` directory of another checkout, e.g. a ``git worktree`` of
an older commit) every round runs the baseline's code and then this checkout's (alternating
which goes first), under the same interpreter; the table gives medians and current/baseline.
The machine is shared: figures are indicative, compare rows of one run. Results go to
``bench/results/send_core-<date>T<time>.{json,md}``.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import datetime
import json
import os
import pathlib
import pstats
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

import bench

BODY_BYTES = 1024
BATCH = 64
TOPIC = "SendBench"
ROWS = ("v2 x1", "classic x1", "classic batch 64")
SLICE_MESSAGES = 256
"""Messages per timed slice; a row's figure is its least disturbed slice."""


def _java_properties(i: int) -> dict[str, str]:
    return {
        "TAGS": "TagA",
        "KEYS": f"key-{i}",
        "UNIQ_KEY": f"7F00000100002A9F0000{i:012X}",
        "WAIT": "true",
        **{f"user-{k}": f"value-{k}" for k in range(4)},
    }


def _child(root: pathlib.Path, messages: int, *, calls: bool = False) -> dict[str, float]:
    """CPU µs per message of each row on this interpreter's ``ariane`` (module docstring), or
    with ``calls`` the Python and C function calls per message (``cProfile``'s count: the
    same on a quiet and a loaded machine)."""
    from ariane.broker import assembly, runtime
    from ariane.broker import settings as broker_settings
    from ariane.broker.remoting import sending
    from ariane.broker.tables import topic_config
    from ariane.common import clock, ids, message
    from ariane.remoting import codes, command, message_codec
    from ariane.store import settings as store_settings

    settings = broker_settings.BrokerSettings(
        store_dir=root / "store",
        store=store_settings.StoreSettings(commit_log_file_size_bytes=64 << 20),
    )
    broker = runtime.BrokerRuntime(settings, time=clock.SystemClock())
    processors = assembly.build(broker, time=clock.SystemClock())
    processors.admin.create_topic(
        topic_config.TopicConfig(ids.TopicName(TOPIC), read_queue_nums=4, write_queue_nums=4)
    )
    sender = processors.sender
    classic = getattr(processors, "classic_sender", None) or sender  # before: two processors
    handler = sending.SendHandler(classic, processors.retry)
    host = message.HostAddress("10.1.2.3", 5000)
    body = os.urandom(BODY_BYTES)

    def header(i: int, batch: bool) -> dict[str, str]:
        props = {} if batch else _java_properties(i)
        fields = {"a": "bench", "b": TOPIC, "c": "TBW102", "d": "4", "e": str(i % 4)}
        fields.update({"f": "0", "g": "1700000000000", "h": "0", "j": "0", "k": "false"})
        fields.update({"i": message_codec.encode_properties(props).decode()})
        fields["m"] = "true" if batch else "false"
        return fields

    def v2(i: int) -> message.IncomingMessage:
        return message.IncomingMessage(
            topic=TOPIC,
            body=body,
            gzip=False,
            user_properties={f"user-{k}": f"value-{k}" for k in range(4)},
            tag="TagA",
            keys=(f"key-{i}",),
            message_id=f"7F00000100002A9F0000{i:012X}",
            message_type="NORMAL",
            message_group=None,
            delivery_timestamp_ms=None,
            born_timestamp_ms=1_700_000_000_000,
            born_host="10.1.2.3",
            trace_context="",
        )

    def batch_body(i: int) -> bytes:
        return message_codec.encode_batch(
            [
                message_codec.BatchMessage(body=body, properties=_java_properties(i + k))
                for k in range(BATCH)
            ]
        )

    async def call(name: str, item: Any) -> None:
        if name == "v2 x1":
            (outcome,) = await sender.send(item, born_ip="10.1.2.3")
            assert outcome.code.name == "OK", outcome
        else:
            reply = await handler.handle(host, item)
            assert reply is not None and reply.code == 0, reply

    def work(name: str, calls: int) -> list[Any]:
        if name == "v2 x1":
            return [[v2(i)] for i in range(calls)]
        if name == "classic batch 64":
            code = codes.RequestCode.SEND_BATCH_MESSAGE
            return [command.request(code, header(i, True), batch_body(i)) for i in range(calls)]
        code = codes.RequestCode.SEND_MESSAGE_V2
        return [command.request(code, header(i, False), body) for i in range(calls)]

    async def row(name: str) -> float:
        """The least CPU µs per message over slices of ``SLICE_MESSAGES`` (the slice least
        disturbed by the neighbours: CPU time inflates with contention)."""
        per = BATCH if name == "classic batch 64" else 1
        calls_per_slice = max(1, SLICE_MESSAGES // per)
        items = work(name, max(calls_per_slice, messages // per))
        if calls:
            profile = cProfile.Profile()
            profile.enable()
            for item in items:
                await call(name, item)
            profile.disable()
            return float(pstats.Stats(profile).total_calls) / (len(items) * per)  # type: ignore[attr-defined]
        best = float("inf")
        for start in range(0, len(items), calls_per_slice):
            chunk = items[start : start + calls_per_slice]
            t0 = time.thread_time()
            for item in chunk:
                await call(name, item)
            best = min(best, (time.thread_time() - t0) * 1e6 / (len(chunk) * per))
        return best

    async def main() -> dict[str, float]:
        for name in ROWS:  # warm-up
            await row(name)
        return {name: await row(name) for name in ROWS}

    try:
        return asyncio.run(main())
    finally:
        broker.close()


def _run(src: pathlib.Path, root: pathlib.Path, messages: int, calls: bool) -> dict[str, float]:
    env = dict(os.environ, PYTHONPATH=f"{src}{os.pathsep}{bench.REPO}")
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench.send_core",
            "--child",
            "--messages",
            str(messages),
            "--dir",
            str(root),
            *(["--calls"] if calls else []),
        ],
        env=env,
        cwd=bench.REPO,
        capture_output=True,
        text=True,
        timeout=900,
        check=True,
    )
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=4_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--dir", default=tempfile.gettempdir())
    parser.add_argument("--baseline-src", type=pathlib.Path)
    parser.add_argument("--child", action="store_true")
    parser.add_argument("--calls", action="store_true", help="count function calls per message")
    args = parser.parse_args(argv)
    root = pathlib.Path(tempfile.mkdtemp(prefix="send-core-bench-", dir=args.dir))
    try:
        if args.child:
            print(json.dumps(_child(root, args.messages, calls=args.calls)))
            return 0
        trees = {"current": bench.REPO / "src"}
        if args.baseline_src is not None:
            trees = {"baseline": args.baseline_src.resolve(), **trees}
        samples: dict[str, dict[str, list[float]]] = {t: {r: [] for r in ROWS} for t in trees}
        loads: list[float] = []
        for r in range(args.rounds):
            loads.append(os.getloadavg()[0])
            order = list(trees) if r % 2 == 0 else list(reversed(trees))
            for tree in order:
                for name, value in _run(trees[tree], root, args.messages, args.calls).items():
                    samples[tree][name].append(value)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    _report(args, samples, loads)
    return 0


def _report(
    args: argparse.Namespace, samples: dict[str, dict[str, list[float]]], loads: list[float]
) -> None:
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H%M%SZ")
    command = "python -m bench.send_core " + " ".join(sys.argv[1:])
    trees = list(samples)
    unit = "calls/msg" if args.calls else "µs/msg (least disturbed slice)"
    lines = [
        f"# Send processor {'function calls' if args.calls else 'CPU'} per message, in-process "
        f"({stamp})",
        "",
        f"`{command}`: {args.messages} messages of {BODY_BYTES} B per row and run, "
        f"{args.rounds} rounds, ASYNC_FLUSH; load average 1 min at each round: "
        + ", ".join(f"{x:.1f}" for x in loads)
        + " (shared 2-core machine: indicative only).",
        "",
        "| row | "
        + " | ".join(f"{t} {unit} median [min-max] of rounds" for t in trees)
        + (" | current/baseline |" if len(trees) > 1 else " |"),
        "|---|" + "---|" * len(trees) + ("---|" if len(trees) > 1 else ""),
    ]
    for name in ROWS:
        cells = []
        for tree in trees:
            v = samples[tree][name]
            cells.append(f"{statistics.median(v):.1f} [{min(v):.1f}-{max(v):.1f}]")
        line = f"| {name} | " + " | ".join(cells) + " |"
        if len(trees) > 1:
            ratio = statistics.median(samples["current"][name]) / statistics.median(
                samples["baseline"][name]
            )
            line += f" {ratio:.2f}x |"
        lines.append(line)
    text = "\n".join(lines) + "\n"
    print(text)
    out = bench.RESULTS_DIR / f"send_core-{stamp}"
    out.with_suffix(".md").write_text(text)
    record: dict[str, Any] = {"command": command, "samples_us": samples, "load_avg_1m": loads}
    out.with_suffix(".json").write_text(json.dumps(record, indent=2) + "\n")


if __name__ == "__main__":
    sys.exit(main())
