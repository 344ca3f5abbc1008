"""A SYNC_FLUSH writer for the kill test: prints each message's key once its append is durable.

Run as ``python -m store_crash_writer <store root> <message count>`` with ``tests/`` on the path.
Four asyncio producers append small batches concurrently (so group commit covers several
waiters); a line ``ACK <key> <commit-log offset> <queue id> <queue offset>`` is printed only
after ``put_messages`` answered PUT_OK, i.e. after the bytes were synced.
"""

from __future__ import annotations

import asyncio
import pathlib
import sys

from ariane.common import clock, ids, message
from ariane.store import AppendRequest, FlushDiskType, MessageStore, PutMessageStatus, StoreSettings

PRODUCERS = 4


async def _produce(store: MessageStore, producer: int, count: int) -> None:
    for n in range(count):
        keys = [f"p{producer}-{n}-{j}" for j in range(1 + n % 3)]
        batch = [
            AppendRequest(
                message=message.Message(
                    ids.TopicName("Crash"), key.encode() * 8, {message.Property.KEYS: key}
                ),
                queue_id=ids.QueueId(producer % 2),
            )
            for key in keys
        ]
        results = await store.put_messages(batch)
        for key, result in zip(keys, results, strict=True):
            assert result.status is PutMessageStatus.PUT_OK, result
            print("ACK", key, result.commit_log_offset, producer % 2, result.queue_offset)
        sys.stdout.flush()


async def _main(root: pathlib.Path, count: int) -> None:
    config = StoreSettings(
        commit_log_file_size_bytes=64 * 1024,
        consume_queue_file_entries=64,
        message_size_bytes_max=4096,
        write_buffer_bytes=256 * 1024,
        flush_disk_type=FlushDiskType.SYNC_FLUSH,
    )
    store = MessageStore.open(root, config, clock=clock.SystemClock())
    print("READY", flush=True)
    await asyncio.gather(*(_produce(store, p, count) for p in range(PRODUCERS)))
    store.close()
    print("DONE", flush=True)


if __name__ == "__main__":
    assert __debug__, "refusing to run under python -O"
    asyncio.run(_main(pathlib.Path(sys.argv[1]), int(sys.argv[2])))
