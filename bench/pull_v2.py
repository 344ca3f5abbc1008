"""v2 pull benchmark (not a test): CPU per pulled message of a ``PullMessage`` answer.

Run ``python -m bench.pull_v2 [--messages N] [--rounds R] [--dir DIR]`` from the repository
root. The store of ``bench.pull_body`` (N messages of a 1 KiB body with the properties the
official Java client sets) is read whole by ``MessageStore.get_messages`` in batches of 32;
every round, interleaved, each row builds the wire bytes of each message's
``PullMessageResponse`` (what gRPC sends; serialization included):

- ``read only``: the store read alone (decode and CRC checks of every record included);
- ``pb.Message (served)``: read + ``outgoing_into`` a fresh ``PullMessageResponse`` from the
  decoded ``StoredMessage`` + ``SerializeToString``: what the broker's v2 pull does;
- ``wire from record (alternative)``: read + ``bench.pull_v2_wire.message_response`` of each
  stored record (one pass over the record's bytes, no protobuf object), the alternative issue
  26 asked to measure; it is not cheaper, so the broker does not use it.

Figures are the loop thread's CPU time per message, µs: median and [min-max] over the rounds,
with the 1-minute load average at each round (shared machine: compare rows of one run).
Results go to ``bench/results/pull_v2-<date>T<time>.{json,md}``.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import pathlib
import shutil
import statistics
import sys
import tempfile

import bench
from ariane.common import clock as clock_mod
from ariane.common import ids
from ariane.common import message as message_mod
from ariane.grpcwire import messages, pb
from ariane.store import message_store, settings
from bench import pull_body
from bench import pull_v2_wire as pull_wire

Build = pull_body.Build


def _protobuf(result: message_store.GetMessageResult) -> bytes:
    out = []
    for stored in result.messages:
        response = pb.v2_service.PullMessageResponse()
        delivery = message_mod.Delivery("", 0, stored.reconsume_times + 1)
        messages.outgoing_into(response.message, stored, delivery, "")
        out.append(response.SerializeToString())
    return b"".join(out)


def _wire(result: message_store.GetMessageResult) -> bytes:
    return b"".join(pull_wire.message_response(r) or b"" for r in result.records)


ROWS: dict[str, Build] = {
    "read only": lambda r: b"",
    "pb.Message (served)": _protobuf,
    "wire from record (alternative)": _wire,
}


def _check(store: message_store.MessageStore) -> None:
    """Both builders answer the same messages (the rows compare like with like)."""
    first = store.get_messages(
        pull_body.TOPIC, pull_body.QUEUE, ids.QueueOffset(0), max_count=32, max_bytes=4 << 20
    )
    parse = pb.v2_service.PullMessageResponse.FromString
    for stored, record in zip(first.messages, first.records, strict=True):
        reference = _protobuf(dataclasses.replace(first, messages=(stored,)))
        assert parse(pull_wire.message_response(record) or b"") == parse(reference)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--dir", default=tempfile.gettempdir())
    args = parser.parse_args(argv)
    root = pathlib.Path(tempfile.mkdtemp(prefix="pull-v2-bench-", dir=args.dir))
    samples: dict[str, list[float]] = {name: [] for name in ROWS}
    loads: list[float] = []
    try:
        config = settings.StoreSettings(commit_log_file_size_bytes=64 << 20)
        store = message_store.MessageStore.open(root, config, clock=clock_mod.SystemClock())
        try:
            pull_body._fill(store, args.messages)
            _check(store)
            for build in ROWS.values():  # warm-up: page cache and caches
                pull_body._drain(store, min(args.messages, 2_000), build)
            for r in range(args.rounds):
                loads.append(os.getloadavg()[0])
                names = list(ROWS) if r % 2 == 0 else list(reversed(ROWS))
                for name in names:
                    samples[name].append(pull_body._drain(store, args.messages, ROWS[name]))
        finally:
            store.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    _report(args, samples, loads)
    return 0


def _report(args: argparse.Namespace, samples: dict[str, list[float]], loads: list[float]) -> None:
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H%M%SZ")
    command = "python -m bench.pull_v2 " + " ".join(sys.argv[1:])
    lines = [
        f"# v2 PullMessage answer CPU per message ({stamp})",
        "",
        f"`{command}`: {args.messages} messages of {pull_body.BODY_BYTES} B, batches of "
        f"{pull_body.BATCH}, {args.rounds} rounds; load average 1 min at each round: "
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
    out = bench.RESULTS_DIR / f"pull_v2-{stamp}"
    out.with_suffix(".md").write_text(text)
    record = {"command": command, "samples_us": samples, "load_avg_1m": loads}
    out.with_suffix(".json").write_text(json.dumps(record, indent=2) + "\n")


if __name__ == "__main__":
    sys.exit(main())
