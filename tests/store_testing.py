"""Helpers shared by the store tests: tiny settings, request factories, in-memory stores."""

from __future__ import annotations

import dataclasses
import pathlib
from collections.abc import Callable, Mapping
from typing import Any

from ariane.common import clock, ids, message
from ariane.store import commit_log, file_layer, index_file, message_store, settings

ROOT = pathlib.Path("/store")

T = ids.TopicName("T")
"""The topic ``request`` writes to by default."""
Q0 = ids.QueueId(0)
"""The queue ``request`` writes to by default."""

TINY_INDEX = index_file.IndexSettings(hash_slot_count=16, index_count_max=64)
"""A key index of ~1.7 KiB files (63 keys each), so tests roll over files."""


def tiny_settings(**overrides: Any) -> settings.StoreSettings:
    """Settings with 2 KiB CommitLog segments and 4-unit ConsumeQueue files."""
    base = settings.StoreSettings(
        commit_log_file_size_bytes=2048,
        consume_queue_file_entries=4,
        message_size_bytes_max=512,
        write_buffer_bytes=128 * 1024,
        flush_interval_ms=60_000,
        flush_consume_queue_interval_ms=60_000,
        max_recovery_commit_log_files=1_000,
    )
    return dataclasses.replace(base, **overrides)


def request(
    topic: str = "T",
    body: bytes = b"body",
    *,
    queue_id: int = 0,
    tags: str | None = None,
    keys: str | None = None,
    props: Mapping[str, str] | None = None,
    **properties: str,
) -> commit_log.AppendRequest:
    """An append request for a message with optional TAGS, KEYS and other properties."""
    props = {**(props or {}), **properties}
    if tags is not None:
        props[message.Property.TAGS] = tags
    if keys is not None:
        props[message.Property.KEYS] = keys
    return commit_log.AppendRequest(
        message=message.Message(ids.TopicName(topic), body, props),
        queue_id=ids.QueueId(queue_id),
        born_timestamp_ms=ids.TimestampMs(1),
    )


def read(
    store: message_store.MessageStore,
    offset: int = 0,
    *,
    topic: str = "T",
    queue_id: int = 0,
    max_count: int = 100,
    max_bytes: int = 1 << 20,
    tag_filter: Callable[[int], bool] | None = None,
) -> message_store.GetMessageResult:
    """``store.get_messages`` of a queue from ``offset``, ids typed here (as ``request`` does)."""
    return store.get_messages(
        ids.TopicName(topic),
        ids.QueueId(queue_id),
        ids.QueueOffset(offset),
        max_count=max_count,
        max_bytes=max_bytes,
        tag_filter=tag_filter,
    )


def record_bytes(config: settings.StoreSettings, append: commit_log.AppendRequest) -> int:
    """Size of the CommitLog record ``append`` becomes under ``config``, bytes."""
    log = commit_log.CommitLog(
        pathlib.Path("/unused"), config, file_layer.MemoryFileLayer(), clock.ManualClock()
    )
    prepared = log.prepare(append)
    assert prepared.record is not None, prepared.status
    return prepared.record.total_size


@dataclasses.dataclass
class MemoryStore:
    """A store on an in-memory file layer with a manual clock; reopen after a crash."""

    config: settings.StoreSettings
    layer: file_layer.MemoryFileLayer
    clock: clock.ManualClock
    store: message_store.MessageStore

    @classmethod
    def open(cls, config: settings.StoreSettings | None = None) -> MemoryStore:
        """A fresh store."""
        manual = clock.ManualClock()
        layer = file_layer.MemoryFileLayer(clock=manual)
        config = config or tiny_settings()
        store = message_store.MessageStore.open(
            ROOT, config, clock=manual, layer=layer, index=TINY_INDEX
        )
        return cls(config, layer, manual, store)

    def reopen(self, config: settings.StoreSettings | None = None) -> message_store.MessageStore:
        """Open the same files again (after ``close`` or a simulated crash)."""
        self.config = config or self.config
        self.store = message_store.MessageStore.open(
            ROOT, self.config, clock=self.clock, layer=self.layer, index=TINY_INDEX
        )
        return self.store

    def query_key(self, key: str) -> list[int]:
        """CommitLog offsets of the stored messages carrying ``key`` (``topic#KEY``), newest
        first: the index's candidates, each read and checked as the admin API does."""
        found: list[int] = []
        for offset in self.store.key_index.query(key, max_count=1_000, begin_ms=0, end_ms=2**62):
            read = self.store.get_message(offset)
            if read.message is not None and key in keys_of(read.message):
                found.append(int(offset))
        return found

    def crash(self, tear: file_layer.TearFunction | None = None) -> None:
        """Stop the store's threads without a clean close, then lose unsynced bytes."""
        abandon(self.store)
        self.layer.crash(tear)


def abandon(store: message_store.MessageStore) -> None:
    """Stop background threads as a killed process would: no flush, no checkpoint, abort stays."""
    store._queue_flusher.stop()
    store._flusher.stop()
    store._closed = True


def keys_of(stored: message.StoredMessage) -> set[str]:
    """``topic#KEY`` for each key and ``topic#UNIQ_KEY`` of a stored message."""
    sent = stored.message
    uniq = [sent.uniq_key] if sent.uniq_key else []
    return {f"{stored.topic}#{key}" for key in [*sent.keys, *uniq]}
