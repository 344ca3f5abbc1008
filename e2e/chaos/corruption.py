"""Bit flips and truncation of one replica's store files (the broker stopped or SIGKILLed).

Faults, each an ``inject(store_dir, rng)`` returning a description (JSON-able) of what it did;
the heal is restarting the broker on the damaged store, then waiting for it to match its peer:

- ``flip_commit_log_record``: one bit inside a record in the middle of the CommitLog. The
  record's CRCs catch it: a slave restarted on it cuts its CommitLog at that record and
  re-fetches the rest from its master (``store.recovery``); a master keeps the record and
  answers CORRUPT to reads of it (never its bytes).
- ``truncate_commit_log``: the newest CommitLog segment cut in the middle of a record (as a
  lost tail of a file would be). A slave pads the segment, rescans and re-fetches; a master
  refuses to start (``StoreLayoutError``), as RocketMQ does, so that a failover to its slave
  keeps what it had.

- ``flip_consume_queue_unit``: one bit of the CommitLog-offset field of a unit in the middle
  of a ConsumeQueue (units carry no CRC, as in RocketMQ): the unit then points outside the
  CommitLog, into the middle of a record or at another record. A read checks the record
  against the unit (topic, queue id, queue offset, size) and rebuilds the queue's units from
  the CommitLog (``store.queue_repair``) instead of serving a wrong message or skipping one.
- ``truncate_consume_queue``: the newest file of a ConsumeQueue cut in the middle of a unit:
  it is padded on load and its units rebuilt from the CommitLog at start-up.

Only the files of the store given are touched; nothing runs in the background.
"""

from __future__ import annotations

import pathlib
import random
import struct
from typing import Any

from ariane.store import message_codec

_SIZE_MAGIC = struct.Struct(">ii")
_UNIT_BYTES = 20


def commit_log_records(store_dir: pathlib.Path) -> list[tuple[pathlib.Path, int, int]]:
    """(segment file, position in it, TOTALSIZE) of every message record of the CommitLog,
    walked by TOTALSIZE from each segment's start (up to its BLANK or zeros)."""
    found: list[tuple[pathlib.Path, int, int]] = []
    for segment in sorted((store_dir / "commitlog").iterdir()):
        if not segment.name.isdigit():
            continue
        data = segment.read_bytes()
        at = 0
        while at + _SIZE_MAGIC.size <= len(data):
            total, magic = _SIZE_MAGIC.unpack_from(data, at)
            if total <= 0 or magic not in (
                message_codec.MAGIC_CODE_V1,
                message_codec.MAGIC_CODE_V2,
            ):
                break
            found.append((segment, at, total))
            at += total
    return found


def flip_bit(path: pathlib.Path, position: int, bit: int) -> None:
    """XOR bit ``bit`` (0-7) of the byte at ``position`` of ``path``, in place."""
    with path.open("r+b") as handle:
        handle.seek(position)
        byte = handle.read(1)[0]
        handle.seek(position)
        handle.write(bytes([byte ^ (1 << bit)]))


def flip_commit_log_record(store_dir: pathlib.Path, rng: random.Random) -> dict[str, Any]:
    """Flip one random bit in the second half of a record from the middle of the CommitLog
    (past its fixed header: body, topic or properties)."""
    records = commit_log_records(store_dir)
    if len(records) < 3:
        raise ValueError(f"{store_dir}: {len(records)} records, too few to damage one inside")
    index = rng.randrange(len(records) // 3, 2 * len(records) // 3)
    segment, at, total = records[index]
    position = at + rng.randrange(total // 2, total)
    bit = rng.randrange(8)
    flip_bit(segment, position, bit)
    offset = int(segment.name) + at
    return {"kind": "flip_commit_log_record", "record_offset": offset, "byte": position, "bit": bit}


def truncate_commit_log(store_dir: pathlib.Path, rng: random.Random) -> dict[str, Any]:
    """Cut the newest CommitLog segment file in the middle of one of its later records."""
    records = commit_log_records(store_dir)
    newest = max(path for path, _, _ in records)
    mine = [(at, total) for path, at, total in records if path == newest]
    at, total = mine[rng.randrange(len(mine) // 2, len(mine))]
    size = at + rng.randrange(1, total)
    with newest.open("r+b") as handle:
        handle.truncate(size)
    return {"kind": "truncate_commit_log", "file": newest.name, "size": size}


def consume_queue_files(store_dir: pathlib.Path) -> list[pathlib.Path]:
    """Every ConsumeQueue segment file of the store (``consumequeue/<topic>/<id>/<offset>``)
    that holds at least one unit, sorted."""
    root = store_dir / "consumequeue"
    return sorted(
        path for path in root.glob("*/*/*") if path.name.isdigit() and any(path.read_bytes()[8:12])
    )


def _units(path: pathlib.Path) -> int:
    data = path.read_bytes()
    count = 0
    while count * _UNIT_BYTES + _UNIT_BYTES <= len(data) and any(
        data[count * _UNIT_BYTES + 8 : count * _UNIT_BYTES + 12]
    ):
        count += 1
    return count


def flip_consume_queue_unit(store_dir: pathlib.Path, rng: random.Random) -> dict[str, Any]:
    """Flip one bit in the low 3 bytes of the CommitLog-offset field of a unit from the middle
    of the fullest ConsumeQueue file (a flip there keeps the offset near the real data)."""
    path = max(consume_queue_files(store_dir), key=_units)
    count = _units(path)
    if count < 3:
        raise ValueError(f"{path}: {count} units, too few to damage one inside")
    unit = rng.randrange(count // 3, 2 * count // 3)
    position = unit * _UNIT_BYTES + rng.randrange(5, 8)
    bit = rng.randrange(8)
    flip_bit(path, position, bit)
    queue = f"{path.parent.parent.name}/{path.parent.name}"
    return {"kind": "flip_consume_queue_unit", "queue": queue, "unit": unit, "bit": bit}


def truncate_consume_queue(store_dir: pathlib.Path, rng: random.Random) -> dict[str, Any]:
    """Cut the fullest ConsumeQueue file in the middle of one of its later units."""
    path = max(consume_queue_files(store_dir), key=_units)
    count = _units(path)
    unit = rng.randrange(count // 2, count)
    size = unit * _UNIT_BYTES + rng.randrange(1, _UNIT_BYTES)
    with path.open("r+b") as handle:
        handle.truncate(size)
    queue = f"{path.parent.parent.name}/{path.parent.name}"
    return {"kind": "truncate_consume_queue", "queue": queue, "size": size}
