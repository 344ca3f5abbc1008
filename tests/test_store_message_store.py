"""MessageStore answers appends and reads with RocketMQ's statuses and keeps its promises."""

from __future__ import annotations

import asyncio
import itertools
import pathlib
import threading
from collections.abc import Callable
from typing import Any

import pytest

from ariane.common import clock, ids, message
from ariane.store import (
    FlushDiskType,
    GetMessageStatus,
    LookupStatus,
    MessageStore,
    PutMessageStatus,
    commit_log,
    message_codec,
)
from store_testing import Q0, MemoryStore, T, read, request, tiny_settings


def test_put_then_read_by_offset_and_by_queue() -> None:
    """A stored message is readable by CommitLog offset and through its ConsumeQueue at once."""
    mem = MemoryStore.open()
    result = mem.store.put_message(request(body=b"hello", tags="TagA", keys="k1 k2"))
    assert result.status is PutMessageStatus.PUT_OK
    assert result.queue_offset == 0
    assert result.message_id == message_codec.create_offset_message_id(
        mem.config.store_host, result.commit_log_offset
    )
    found = mem.store.get_message(result.commit_log_offset)
    assert found.status is LookupStatus.FOUND and found.message is not None
    assert found.message.body == b"hello"
    assert found.message.store_timestamp_ms == mem.clock.now_ms()
    got = read(mem.store, 0, max_count=10, max_bytes=1 << 20)
    assert got.status is GetMessageStatus.FOUND
    assert [m.body for m in got.messages] == [b"hello"]
    assert (got.next_begin_offset, got.min_offset, got.max_offset) == (1, 0, 1)


def test_queue_offsets_are_dense_per_queue_across_a_batch_and_segments() -> None:
    """A batch spanning segments gets dense queue offsets per (topic, queue) and one record each."""
    mem = MemoryStore.open()
    batch = [request(topic=f"T{i % 2}", body=bytes([i]) * 100, queue_id=i % 3) for i in range(60)]
    results = mem.store.put_messages_sync(batch)
    assert all(r.status is PutMessageStatus.PUT_OK for r in results)
    assert len(mem.store.commit_log_segments()) > 2
    for topic in ("T0", "T1"):
        for queue_id in range(3):
            offsets = [
                r.queue_offset
                for r, req in zip(results, batch, strict=True)
                if (req.message.topic, req.queue_id) == (topic, queue_id)
            ]
            assert offsets == list(range(len(offsets)))
            got = read(mem.store, topic=topic, queue_id=queue_id)
            assert [m.queue_offset for m in got.messages] == offsets
    starts = sorted(r.commit_log_offset for r in results)
    assert all(b - a >= 100 for a, b in itertools.pairwise(starts))


def test_get_messages_statuses_follow_rocketmq() -> None:
    """Unknown queue, empty-start, too small, overflow one/badly, found, and max_count/bytes."""
    mem = MemoryStore.open()
    store = mem.store
    assert read(store, 0, max_count=1, max_bytes=1).status is (
        GetMessageStatus.NO_MATCHED_LOGIC_QUEUE
    )
    store.put_messages_sync([request(body=b"x" * 50) for _ in range(6)])
    one = read(store, 6, max_count=1, max_bytes=100)
    assert (one.status, one.next_begin_offset) == (GetMessageStatus.OFFSET_OVERFLOW_ONE, 6)
    badly = read(store, 9, max_count=1, max_bytes=100)
    assert (badly.status, badly.next_begin_offset) == (GetMessageStatus.OFFSET_OVERFLOW_BADLY, 0)
    limited = read(store, 1, max_count=3, max_bytes=1 << 20)
    assert [m.queue_offset for m in limited.messages] == [1, 2, 3]
    assert limited.next_begin_offset == 4
    size = limited.messages[0].store_size_bytes
    by_bytes = read(store, 0, max_count=10, max_bytes=size * 2 + 1)
    assert len(by_bytes.messages) == 2
    at_least_one = read(store, 0, max_count=10, max_bytes=1)
    assert len(at_least_one.messages) == 1
    unmatched = read(store, 0, max_count=10, max_bytes=1 << 20, tag_filter=bool)
    assert (unmatched.status, unmatched.next_begin_offset) == (
        GetMessageStatus.NO_MATCHED_MESSAGE,
        6,
    )


def test_offset_too_small_after_retention_and_tag_filter() -> None:
    """After old segments are deleted, reads below the new min answer OFFSET_TOO_SMALL."""
    mem = MemoryStore.open()
    store = mem.store
    store.put_messages_sync([request(body=b"y" * 200, tags=f"t{i % 2}") for i in range(30)])
    mem.clock.advance_ms(10_000)
    store.put_message(request(body=b"new", tags="t0"))
    deleted = store.delete_expired_commit_log(mem.clock.now_ms(), 5_000)
    assert deleted >= 1
    low = store.min_queue_offset(T, Q0)
    assert low > 0
    small = read(store, 0, max_count=5, max_bytes=1 << 20)
    assert (small.status, small.next_begin_offset) == (GetMessageStatus.OFFSET_TOO_SMALL, low)
    hash_t1 = message_codec.tag_hash_code("t1")
    tagged = read(store, low, max_count=50, max_bytes=1 << 20, tag_filter=lambda h: h == hash_t1)
    assert tagged.messages and all(m.message.tags == "t1" for m in tagged.messages)


def test_queue_offset_by_time_finds_first_message_at_or_after() -> None:
    """Binary search over store timestamps returns the first offset stored at or after a time."""
    mem = MemoryStore.open()
    stamps = []
    for _ in range(9):
        stamps.append(int(mem.clock.now_ms()))
        mem.store.put_message(request(body=b"t"))
        mem.clock.advance_ms(100)
    store = mem.store
    assert store.queue_offset_by_time(T, Q0, 0) == 0
    assert store.queue_offset_by_time(T, Q0, stamps[4]) == 4
    assert store.queue_offset_by_time(T, Q0, stamps[4] + 1) == 5
    assert store.queue_offset_by_time(T, Q0, stamps[-1] + 1) == 9
    assert store.queue_offset_by_time(ids.TopicName("nope"), Q0, 5) == 0


def test_disk_full_switch_refuses_appends_until_cleared() -> None:
    """With disk_full set, appends answer SERVICE_NOT_AVAILABLE and write nothing."""
    mem = MemoryStore.open()
    mem.store.disk_full = True
    before = mem.store.max_commit_log_offset
    assert mem.store.put_message(request()).status is PutMessageStatus.SERVICE_NOT_AVAILABLE
    assert mem.store.max_commit_log_offset == before
    assert mem.store.stats().disk_full
    mem.store.disk_full = False
    assert mem.store.put_message(request()).status is PutMessageStatus.PUT_OK


def test_oversize_and_illegal_messages_get_their_statuses() -> None:
    """Body too large or empty → MESSAGE_ILLEGAL; properties > limit → PROPERTIES_SIZE_EXCEEDED."""
    mem = MemoryStore.open(tiny_settings(message_size_bytes_max=100, properties_size_bytes_max=64))
    store = mem.store
    statuses = [
        r.status
        for r in store.put_messages_sync(
            [
                request(body=b"x" * 101),
                request(body=b""),
                request(body=b"ok", big="v" * 80),
                request(topic="bad/topic"),
                request(body=b"ok", props={"k\x01": "v"}),
                request(body=b"x" * 100),
            ]
        )
    ]
    assert statuses == [
        PutMessageStatus.MESSAGE_ILLEGAL,
        PutMessageStatus.MESSAGE_ILLEGAL,
        PutMessageStatus.PROPERTIES_SIZE_EXCEEDED,
        PutMessageStatus.MESSAGE_ILLEGAL,
        PutMessageStatus.MESSAGE_ILLEGAL,
        PutMessageStatus.PUT_OK,
    ]
    assert store.max_queue_offset(T, Q0) == 1
    assert store.stats().put_message_failure_count == 5


def test_consume_queue_count_bound() -> None:
    """Beyond consume_queue_count_max queues, new queues answer CONSUME_QUEUE_NUM_EXCEEDED."""
    mem = MemoryStore.open(tiny_settings(consume_queue_count_max=2))
    results = mem.store.put_messages_sync([request(queue_id=q) for q in (0, 1, 2, 0)])
    assert [r.status for r in results] == [
        PutMessageStatus.PUT_OK,
        PutMessageStatus.PUT_OK,
        PutMessageStatus.CONSUME_QUEUE_NUM_EXCEEDED,
        PutMessageStatus.PUT_OK,
    ]
    assert mem.store.topic_queues() == [("T", 0), ("T", 1)]


def test_prepared_transaction_halves_take_no_queue_offset() -> None:
    """A PREPARED half message is stored but gets no ConsumeQueue unit (RocketMQ rule)."""
    mem = MemoryStore.open()
    half = commit_log.AppendRequest(
        message=message.Message(ids.TopicName("T"), b"half"),
        queue_id=ids.QueueId(0),
        sys_flag=message.SysFlag.TRANSACTION_PREPARED,
    )
    r_half, r_normal = mem.store.put_messages_sync([half, request(body=b"n")])
    assert r_half.status is PutMessageStatus.PUT_OK and r_half.queue_offset == 0
    assert r_normal.queue_offset == 0
    assert mem.store.get_message(r_half.commit_log_offset).status is LookupStatus.FOUND
    got = read(mem.store, 0, max_count=5, max_bytes=1 << 20)
    assert [m.body for m in got.messages] == [b"n"]


def test_the_store_indexes_topic_keys_and_uniq_key_and_syncs_them_in_the_checkpoint() -> None:
    """The store's own key index answers topic#KEY for each key and topic#UNIQ_KEY as soon as
    put returns, and the checkpoint makes them durable (they survive a power loss)."""
    mem = MemoryStore.open()
    result = mem.store.put_message(request(topic="Orders", keys="a b", UNIQ_KEY="ABC"))
    for key in ("Orders#a", "Orders#b", "Orders#ABC"):
        assert mem.query_key(key) == [result.commit_log_offset]
    assert mem.query_key("Orders#c") == []
    mem.store.commit_log.flush()
    mem.store.checkpoint_now()
    mem.crash()
    mem.reopen()
    assert mem.store.recovery_report.redispatched_records == 0  # nothing re-fed: synced
    assert mem.query_key("Orders#ABC") == [result.commit_log_offset]


def test_schedule_topic_units_carry_the_delivery_time() -> None:
    """SCHEDULE_TOPIC_XXXX units hold store time + level delay as their tag code."""
    mem = MemoryStore.open()
    result = mem.store.put_message(request(topic="SCHEDULE_TOPIC_XXXX", DELAY="3", queue_id=2))
    queue = mem.store.consume_queues.get("SCHEDULE_TOPIC_XXXX", 2)
    assert queue is not None
    unit = queue.unit_at(ids.QueueOffset(0))
    assert unit is not None and unit.tag_hash == result.store_timestamp_ms + 10_000


def _held_commit_log_sync(
    gate: threading.Event, entered: threading.Event
) -> Callable[[pathlib.Path], None]:
    """A ``sync_hook`` that sets ``entered`` in a CommitLog sync and holds it until ``gate``."""

    def slow_sync(path: pathlib.Path) -> None:
        if "commitlog" in str(path):
            entered.set()
            assert gate.wait(10)

    return slow_sync


def test_sync_flush_group_commit_covers_many_waiters_with_one_sync() -> None:
    """Appends arriving while a sync runs are all covered by the next single sync."""
    mem = MemoryStore.open(tiny_settings(flush_disk_type=FlushDiskType.SYNC_FLUSH))
    gate, entered = threading.Event(), threading.Event()
    first = mem.store.submit([request(body=b"first")])
    mem.layer.sync_hook = _held_commit_log_sync(gate, entered)
    second = mem.store.submit([request(body=b"second")])
    assert entered.wait(10)
    futures = [mem.store.submit([request(body=bytes([i]))]) for i in range(20)]
    assert not any(f.done() for f in futures)
    syncs_before = mem.store.stats().flush_count
    gate.set()
    assert all(f.result(10)[0].status is PutMessageStatus.PUT_OK for f in futures)
    assert second.result(10)[0].status is PutMessageStatus.PUT_OK
    assert first.result(10)[0].status is PutMessageStatus.PUT_OK
    assert mem.store.stats().flush_count - syncs_before <= 2
    assert mem.store.stats().flush_behind_bytes == 0


def test_sync_flush_timeout_and_failure_are_reported_not_hidden() -> None:
    """A hanging sync gives FLUSH_DISK_TIMEOUT; a failing one too, and then writes are refused."""
    config = tiny_settings(flush_disk_type=FlushDiskType.SYNC_FLUSH, sync_flush_timeout_ms=50)
    mem = MemoryStore.open(config)
    gate = threading.Event()
    mem.layer.sync_hook = lambda path: None if gate.wait(10) else pytest.fail("gate")
    timed_out = mem.store.put_message(request())
    assert timed_out.status is PutMessageStatus.FLUSH_DISK_TIMEOUT
    assert timed_out.commit_log_offset >= 0
    gate.set()

    def failing(path: pathlib.Path) -> None:
        raise OSError(5, "EIO")

    mem.layer.sync_hook = failing
    assert mem.store.put_message(request()).status is PutMessageStatus.FLUSH_DISK_TIMEOUT
    assert mem.store.put_message(request()).status is PutMessageStatus.SERVICE_NOT_AVAILABLE


def test_async_put_messages_one_await_per_batch() -> None:
    """The asyncio API returns one result per message after the batch is durable."""
    mem = MemoryStore.open(tiny_settings(flush_disk_type=FlushDiskType.SYNC_FLUSH))

    async def main() -> list[commit_log.PutMessageResult]:
        return await mem.store.put_messages([request(body=bytes([i + 1])) for i in range(10)])

    results = asyncio.run(main())
    assert [r.queue_offset for r in results] == list(range(10))
    assert mem.store.commit_log.flushed_offset >= results[-1].commit_log_offset


def test_sync_flush_wakes_a_waiting_event_loop_once_per_group_commit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Coroutines waiting in one group commit are answered after its sync through a single
    wake-up of their event loop (one ``call_soon_threadsafe`` per sync, not one per put)."""
    mem = MemoryStore.open(tiny_settings(flush_disk_type=FlushDiskType.SYNC_FLUSH))
    gate, entered = threading.Event(), threading.Event()

    async def main() -> tuple[int, int, list[commit_log.PutMessageResult]]:
        loop = asyncio.get_running_loop()
        wakeups = 0
        original = loop.call_soon_threadsafe

        def counting(*args: Any, **kwargs: Any) -> asyncio.Handle:
            nonlocal wakeups
            wakeups += 1
            return original(*args, **kwargs)

        monkeypatch.setattr(loop, "call_soon_threadsafe", counting)
        mem.layer.sync_hook = _held_commit_log_sync(gate, entered)
        first = asyncio.create_task(mem.store.put_messages([request(body=b"first")]))
        deadline = loop.time() + 10
        while not entered.is_set():  # the flusher is inside the sync of the first put
            assert loop.time() < deadline, "the group commit never started"
            await asyncio.sleep(0.001)
        puts = [
            asyncio.create_task(mem.store.put_messages([request(body=bytes([i + 1]))]))
            for i in range(20)
        ]
        await asyncio.sleep(0)  # every put appended and waits for the next sync
        assert not any(p.done() for p in [first, *puts])
        syncs_before, wakeups = mem.store.stats().flush_count, 0
        gate.set()
        results = [r for done in await asyncio.gather(first, *puts) for r in done]
        return wakeups, mem.store.stats().flush_count - syncs_before, results

    wakeups, syncs, results = asyncio.run(main())
    assert all(r.status is PutMessageStatus.PUT_OK for r in results)
    assert mem.store.commit_log.flushed_offset >= max(r.commit_log_offset for r in results)
    assert 1 <= syncs <= 2
    assert wakeups <= syncs


def test_async_flush_waits_for_enough_dirty_pages_or_the_thorough_interval() -> None:
    """ASYNC_FLUSH syncs only past flush_least_pages or after flush_thorough_interval_ms."""
    mem = MemoryStore.open(tiny_settings(flush_interval_ms=60_000, flush_least_pages=1))
    service = mem.store._flusher
    mem.store.put_message(request(body=b"small"))
    service.run_once()  # type: ignore[union-attr]
    assert mem.store.stats().flush_behind_bytes > 0
    mem.clock.advance_ms(mem.config.flush_thorough_interval_ms)
    service.run_once()  # type: ignore[union-attr]
    assert mem.store.stats().flush_behind_bytes == 0
    mem.store.put_messages_sync([request(body=b"z" * 500) for _ in range(10)])
    service.run_once()  # type: ignore[union-attr]
    assert mem.store.stats().flush_behind_bytes == 0


def test_closed_store_refuses_appends_and_real_files_reopen(tmp_path: pathlib.Path) -> None:
    """On the real file system a closed store refuses appends and reopens with its data."""
    config = tiny_settings()
    store = MessageStore.open(tmp_path, config, clock=clock.SystemClock())
    results = store.put_messages_sync([request(body=bytes([i + 1]) * 300) for i in range(12)])
    store.close()
    assert store.put_message(request()).status is PutMessageStatus.SERVICE_NOT_AVAILABLE
    assert not (tmp_path / "abort").exists()
    names = sorted(p.name for p in (tmp_path / "commitlog").iterdir())
    assert names[0] == "00000000000000000000" and names[1] == "00000000000000002048"
    again = MessageStore.open(tmp_path, config, clock=clock.SystemClock())
    try:
        assert again.stats().recovery_clean
        for r in results:
            found = again.get_message(r.commit_log_offset)
            assert found.status is LookupStatus.FOUND
        assert again.max_queue_offset(T, Q0) == 12
        assert again.put_message(request()).queue_offset == 12
    finally:
        again.close()


def test_read_of_a_non_record_offset_is_not_found_or_corrupt_never_a_message() -> None:
    """Reading at an offset inside a record never yields a message."""
    mem = MemoryStore.open()
    result = mem.store.put_message(request(body=b"q" * 64))
    for delta in range(1, result.wrote_bytes):
        got = mem.store.get_message(ids.CommitLogOffset(result.commit_log_offset + delta))
        assert got.status is not LookupStatus.FOUND
    assert mem.store.get_message(ids.CommitLogOffset(10**9)).status is LookupStatus.NOT_FOUND


def test_settings_bounds_are_validated() -> None:
    """Out-of-bound settings are refused at construction with the field named."""
    with pytest.raises(ValueError, match="flush_interval_ms"):
        tiny_settings(flush_interval_ms=0)
    with pytest.raises(ValueError, match="write_buffer_bytes"):
        tiny_settings(message_size_bytes_max=1024 * 1024, write_buffer_bytes=4096)
