"""Pull-path benchmark (not a test): CPU per pulled message of a classic pull's body.

Run ``python -m bench.pull_body [--messages N] [--rounds R] [--dir DIR]`` from the repository
root. One store in a fresh directory under ``--dir`` is filled with N messages of a 1 KiB body
and the properties the official Java client sets (TAGS, KEYS, UNIQ_KEY, WAIT and four user
properties); then, in every round and interleaved, each row reads the whole queue by
``MessageStore.get_messages`` in batches of 32 (``PULL_MESSAGES_MAX``) and builds what a
``PULL_MESSAGE`` reply carries:

- ``read only``: the store read alone (decode and CRC checks of every record included);
- ``re-encode (before)``: read + ``b"".join(encode_stored(m) ...)``, the body before issue 26;
- ``stored bytes (after)``: read + ``stored_records_body(result.records)``, the body now.

Figures are the loop thread's CPU time (``time.thread_time``) per message, µs: median and
[min-max] over the rounds, with the 1-minute load average at the start of each round (the
machine is shared: numbers are noisy, compare rows of the same run). Results go to
``bench/results/pull_body-<date>T<time>.{json,md}``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import pathlib
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable

import bench
from ariane.common import clock as clock_mod
from ariane.common import ids
from ariane.common import message as message_mod
from ariane.remoting import message_codec
from ariane.store import commit_log, message_store, settings

TOPIC = ids.TopicName("PullBench")
QUEUE = ids.QueueId(0)
BATCH = 32
BODY_BYTES = 1024

Build = Callable[[message_store.GetMessageResult], bytes]
ROWS: dict[str, Build] = {
    "read only": lambda r: b"",
    "re-encode (before)": lambda r: b"".join(message_codec.encode_stored(m) for m in r.messages),
    "stored bytes (after)": lambda r: message_codec.stored_records_body(r.records),
}


def _fill(store: message_store.MessageStore, count: int) -> None:
    for i in range(count):
        properties = {
            "TAGS": "TagA",
            "KEYS": f"key-{i}",
            "UNIQ_KEY": f"7F00000100002A9F0000{i:012X}",
            "WAIT": "true",
            **{f"user-{k}": f"value-{k}" for k in range(4)},
        }
        message = message_mod.Message(
            topic=TOPIC, body=os.urandom(BODY_BYTES), properties=properties
        )
        result = store.put_message(commit_log.AppendRequest(message=message, queue_id=QUEUE))
        assert result.status.is_stored, result.status


def _drain(store: message_store.MessageStore, count: int, build: Build) -> float:
    """CPU µs per message to read the whole queue and build each pull body."""
    offset, sent = 0, 0
    t0 = time.thread_time()
    while offset < count:
        result = store.get_messages(
            TOPIC, QUEUE, ids.QueueOffset(offset), max_count=BATCH, max_bytes=4 << 20
        )
        sent += len(build(result))
        offset = result.next_begin_offset
    return (time.thread_time() - t0) * 1e6 / count


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--dir", default=tempfile.gettempdir())
    args = parser.parse_args(argv)
    root = pathlib.Path(tempfile.mkdtemp(prefix="pull-bench-", dir=args.dir))
    samples: dict[str, list[float]] = {name: [] for name in ROWS}
    loads: list[float] = []
    try:
        config = settings.StoreSettings(commit_log_file_size_bytes=64 << 20)
        store = message_store.MessageStore.open(root, config, clock=clock_mod.SystemClock())
        try:
            _fill(store, args.messages)
            for build in ROWS.values():  # warm-up: page cache and caches
                _drain(store, min(args.messages, 2_000), build)
            for r in range(args.rounds):
                loads.append(os.getloadavg()[0])
                names = list(ROWS) if r % 2 == 0 else list(reversed(ROWS))
                for name in names:
                    samples[name].append(_drain(store, args.messages, ROWS[name]))
        finally:
            store.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    _report(args, samples, loads)
    return 0


def _report(args: argparse.Namespace, samples: dict[str, list[float]], loads: list[float]) -> None:
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H%M%SZ")
    command = "python -m bench.pull_body " + " ".join(sys.argv[1:])
    lines = [
        f"# Pull body CPU per message ({stamp})",
        "",
        f"`{command}`: {args.messages} messages of {BODY_BYTES} B, batches of {BATCH}, "
        f"{args.rounds} rounds; load average 1 min at each round: "
        + ", ".join(f"{x:.1f}" for x in loads)
        + " (shared 2-core machine: noisy).",
        "",
        "| row | CPU µs/msg median | [min-max] |",
        "|---|---|---|",
    ]
    for name, values in samples.items():
        lines.append(
            f"| {name} | {statistics.median(values):.2f} | [{min(values):.2f}-{max(values):.2f}] |"
        )
    text = "\n".join(lines) + "\n"
    print(text)
    out = bench.RESULTS_DIR / f"pull_body-{stamp}"
    out.with_suffix(".md").write_text(text)
    record = {"command": command, "samples_us": samples, "load_avg_1m": loads}
    out.with_suffix(".json").write_text(json.dumps(record, indent=2) + "\n")


if __name__ == "__main__":
    sys.exit(main())
