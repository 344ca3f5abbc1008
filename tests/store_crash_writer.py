"""A SYNC_FLUSH writer for the kill tests: prints each message's key once its append is durable.

Run as ``python -m store_crash_writer <store root> <message count> [<run tag> [small|mixed]]``
with ``tests/`` on the path. Four asyncio producers append small batches concurrently (so group
commit covers several waiters); a line ``ACK <key> <commit-log offset> <queue id> <queue offset>
<body bytes>`` is printed only after ``put_messages`` answered PUT_OK, i.e. after the bytes were
synced. ``small`` bodies are a few dozen bytes on 64 KiB segments; ``mixed`` bodies are random
(incompressible) 1 KiB, 2 MiB and 4 MiB ones (the largest allowed) on 64 MiB segments. Keys
carry the run tag, so several runs on one store never repeat a key.
"""

from __future__ import annotations

import asyncio
import os
import pathlib
import sys

from ariane.common import clock, ids, limits, message
from ariane.store import AppendRequest, FlushDiskType, MessageStore, PutMessageStatus, StoreSettings

PRODUCERS = 4
KIB = 1024
MIB = 1024 * KIB


def settings_for(mix: str) -> StoreSettings:
    """The store settings of a body mix (the checker opens the store with the same ones)."""
    if mix == "mixed":
        return StoreSettings(
            commit_log_file_size_bytes=64 * MIB,
            consume_queue_file_entries=64,
            message_size_bytes_max=limits.MESSAGE_SIZE_BYTES_MAX,
            flush_disk_type=FlushDiskType.SYNC_FLUSH,
        )
    return StoreSettings(
        commit_log_file_size_bytes=64 * KIB,
        consume_queue_file_entries=64,
        message_size_bytes_max=4096,
        write_buffer_bytes=256 * KIB,
        flush_disk_type=FlushDiskType.SYNC_FLUSH,
    )


def body_of(key: str, n: int, mix: str) -> bytes:
    """The body of message ``key``, the ``n``-th of its producer: 1 KiB, 2 MiB or 4 MiB."""
    if mix != "mixed":
        return key.encode() * 8
    size = (KIB, limits.MESSAGE_SIZE_BYTES_MAX, KIB, 2 * MIB, KIB, 2 * MIB)[n % 6]
    return os.urandom(size)


async def _produce(store: MessageStore, producer: int, count: int, tag: str, mix: str) -> None:
    for n in range(count):
        keys = [f"{tag}p{producer}-{n}-{j}" for j in range(1 + n % 3)]
        bodies = [body_of(key, producer + n + j, mix) for j, key in enumerate(keys)]
        batch = [
            AppendRequest(
                message=message.Message(ids.TopicName("Crash"), body, {message.Property.KEYS: key}),
                queue_id=ids.QueueId(producer % 2),
            )
            for key, body in zip(keys, bodies, strict=True)
        ]
        results = await store.put_messages(batch)
        for key, body, result in zip(keys, bodies, results, strict=True):
            assert result.status is PutMessageStatus.PUT_OK, result
            print(
                "ACK", key, result.commit_log_offset, producer % 2, result.queue_offset, len(body)
            )
        sys.stdout.flush()


async def _main(root: pathlib.Path, count: int, tag: str, mix: str) -> None:
    store = MessageStore.open(root, settings_for(mix), clock=clock.SystemClock())
    print("READY", flush=True)
    await asyncio.gather(*(_produce(store, p, count, tag, mix) for p in range(PRODUCERS)))
    store.close()
    print("DONE", flush=True)


if __name__ == "__main__":
    assert __debug__, "refusing to run under python -O"
    args = sys.argv[1:]
    run_tag = args[2] if len(args) > 2 else ""
    body_mix = args[3] if len(args) > 3 else "small"
    asyncio.run(_main(pathlib.Path(args[0]), int(args[1]), run_tag, body_mix))
