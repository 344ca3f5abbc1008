"""A state machine drives the store through appends, reads, flushes and crashes against a model.

The store runs on tiny segments (1 KiB CommitLog files, 3-unit ConsumeQueue files) over the
in-memory file layer. A crash loses every unsynced byte except a random torn prefix, and may
flip a byte in what survived unsynced (a damaged record that a sound one follows is kept, and
repaired with its bytes from before the flip as a slave would). After each recovery: every
flushed message is still there byte for byte, the surviving messages are exactly a prefix of
the append order, queue offsets are dense and match the model, no corrupt record is ever
returned, and the key index answers exactly the survivors: each KEYS key (shared by many
messages) and each message id (UNIQ_KEY) finds the surviving messages carrying it, newest
first, and nothing else, so a cut record's key never points at a message written later at its
offset. A kill (the process dies, the page cache survives) keeps every appended message.

A second machine runs the same rules with production record limits (4 MiB bodies, the smallest
write buffer allowed) and adds records sized at and around every read window and buffer of the
store: the 1 MiB scan window, the 4 KiB first read of a lookup, a ConsumeQueue read chunk, the
write buffer, the largest body.
"""

from __future__ import annotations

import dataclasses
import pathlib
import random
from collections.abc import Sequence

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from ariane.common import ids, limits
from ariane.store import (
    FlushDiskType,
    GetMessageStatus,
    LookupStatus,
    PutMessageStatus,
    commit_log,
    consume_queue,
    message_store,
    record_reader,
)
from ariane.store import settings as store_settings
from store_testing import MemoryStore, record_bytes, request, tiny_settings

QUEUES = [
    (ids.TopicName("A"), ids.QueueId(0)),
    (ids.TopicName("A"), ids.QueueId(1)),
    (ids.TopicName("B"), ids.QueueId(0)),
]
"""The (topic, queue id) pairs the model writes to."""


@dataclasses.dataclass(frozen=True)
class Sent:
    """A message the model believes stored."""

    topic: str
    queue_id: int
    queue_offset: int
    commit_log_offset: int
    size: int
    body: bytes
    tag: str
    key: str = ""
    """Its KEYS (one key from ``KEYS``), "" if none."""
    uniq: str = ""
    """Its message id (UNIQ_KEY), "" if none."""


KEYS = [f"k{n}" for n in range(8)]

messages = st.tuples(
    st.sampled_from(QUEUES), st.binary(min_size=1, max_size=120), st.sampled_from(["x", "y"])
)


class StoreMachine(RuleBasedStateMachine):
    """Store vs. an in-memory list of what was appended, in CommitLog order."""

    read_bytes_max = 1 << 20
    """``max_bytes`` of the queue reads: more than ``max_count`` of the largest records."""

    def __init__(self) -> None:
        super().__init__()
        self.mem: MemoryStore | None = None
        self.sent: list[Sent] = []
        self.durable_end = 0
        self.ids_made = 0
        self.corrupt_reads = 0
        """Reads of a damaged record the current store saw (``_repair_kept``)."""
        self.unindexed: set[int] = set()
        """Records recovery kept damaged: the key index may hold their keys, or their
        damaged keys, or neither (``store.recovery``); key checks leave them out."""

    @initialize(sync=st.booleans())
    def open_store(self, sync: bool) -> None:
        flush_type = FlushDiskType.SYNC_FLUSH if sync else FlushDiskType.ASYNC_FLUSH
        config = tiny_settings(
            commit_log_file_size_bytes=1024,
            consume_queue_file_entries=3,
            message_size_bytes_max=200,
            flush_disk_type=flush_type,
        )
        self.mem = MemoryStore.open(config)

    @property
    def store(self) -> message_store.MessageStore:
        assert self.mem is not None
        return self.mem.store

    def _queue(self, topic: str, queue_id: int) -> list[Sent]:
        return [s for s in self.sent if (s.topic, s.queue_id) == (topic, queue_id)]

    @rule(batch=st.lists(messages, min_size=1, max_size=6), data=st.data())
    def put(self, batch: list[tuple[tuple[str, int], bytes, str]], data: st.DataObject) -> None:
        requests = []
        for (topic, queue_id), body, tag in batch:
            key = data.draw(st.sampled_from(KEYS), label="key")
            self.ids_made += 1
            uniq = f"U{self.ids_made}"
            requests.append(
                request(topic, body, queue_id=queue_id, tags=tag, keys=key, UNIQ_KEY=uniq)
            )
        self._append(batch, requests)

    def _append(
        self,
        batch: list[tuple[tuple[str, int], bytes, str]],
        requests: list[commit_log.AppendRequest],
    ) -> None:
        results = self.store.put_messages_sync(requests)
        for ((topic, queue_id), body, tag), sent, result in zip(
            batch, requests, results, strict=True
        ):
            props = sent.message.properties
            assert result.status is PutMessageStatus.PUT_OK
            assert result.queue_offset == len(self._queue(topic, queue_id))
            assert not self.sent or result.commit_log_offset >= (
                self.sent[-1].commit_log_offset + self.sent[-1].size
            )
            self.sent.append(
                Sent(
                    topic,
                    queue_id,
                    result.queue_offset,
                    result.commit_log_offset,
                    result.wrote_bytes,
                    body,
                    tag,
                    props.get("KEYS", ""),
                    props.get("UNIQ_KEY", ""),
                )
            )
        if self.store.settings.flush_disk_type is FlushDiskType.SYNC_FLUSH:
            self.durable_end = int(self.store.commit_log.flushed_offset)
            assert self.durable_end >= self.sent[-1].commit_log_offset + self.sent[-1].size

    @rule()
    def flush_commit_log(self) -> None:
        self.durable_end = int(self.store.commit_log.flush())

    @rule()
    def checkpoint(self) -> None:
        self.store.checkpoint_now()

    @precondition(lambda self: bool(self.sent))
    @rule(data=st.data())
    def read_by_offset(self, data: st.DataObject) -> None:
        sent = data.draw(st.sampled_from(self.sent))
        found = self.store.get_message(ids.CommitLogOffset(sent.commit_log_offset))
        assert found.status is LookupStatus.FOUND and found.message is not None
        assert (found.message.body, found.message.queue_offset) == (sent.body, sent.queue_offset)

    @rule(data=st.data(), max_count=st.integers(1, 5))
    def read_by_queue(self, data: st.DataObject, max_count: int) -> None:
        topic, queue_id = data.draw(st.sampled_from(QUEUES))
        expected = self._queue(topic, queue_id)
        offset = ids.QueueOffset(data.draw(st.integers(0, len(expected))))
        got = self.store.get_messages(
            topic, queue_id, offset, max_count=max_count, max_bytes=self.read_bytes_max
        )
        want = expected[offset : offset + max_count]
        assert [(m.commit_log_offset, m.body) for m in got.messages] == [
            (s.commit_log_offset, s.body) for s in want
        ]
        if want:
            assert got.status is GetMessageStatus.FOUND
            assert got.next_begin_offset == offset + len(want)
            assert [m.message.tags for m in got.messages] == [s.tag for s in want]
        else:
            assert got.status in (
                GetMessageStatus.OFFSET_OVERFLOW_ONE,
                GetMessageStatus.NO_MESSAGE_IN_QUEUE,
                GetMessageStatus.NO_MATCHED_LOGIC_QUEUE,
            )

    @rule(flip=st.booleans(), data=st.data())
    def crash_and_recover(self, flip: bool, data: st.DataObject) -> None:
        assert self.mem is not None
        torn: list[tuple[pathlib.Path, int, int]] = []

        def tear(path: pathlib.Path, low: int, high: int) -> int:
            # Each file keeps its own random prefix of the unsynced bytes (none, all, or a cut).
            kept = data.draw(
                st.one_of(st.just(0), st.just(high - low), st.integers(0, high - low)),
                label=f"kept of {path.name}",
            )
            if "commitlog" in str(path) and kept:
                torn.append((path, low, low + kept))
            return kept

        self.mem.crash(tear)
        flipped: tuple[int, int] | None = None
        if flip and torn:
            path, low, high = data.draw(st.sampled_from(torn))
            position = data.draw(st.integers(low, high - 1))
            old = self.mem.layer.read_durable(path, position, 1)
            self.mem.layer.overwrite(path, position, bytes([old[0] ^ 0x5A]))
            flipped = (int(path.name) + position, old[0])
        self.mem.reopen()
        self.corrupt_reads = 0
        self._repair_kept(flipped)
        self._reconcile()

    def _repair_kept(self, flipped: tuple[int, int] | None) -> None:
        """A master keeps a damaged record that a sound one follows (``store.recovery``): it
        answers CORRUPT until a slave's copy repairs it; the model plays the slave, giving back
        the record's bytes from before the flip (CommitLog offset, old byte)."""
        damaged = self.store.recovery_report.damaged_offsets
        if not damaged:
            return
        assert flipped is not None and len(damaged) == 1, (flipped, damaged)
        offset, (at, byte) = damaged[0], flipped
        whole = self.store.commit_log.read(offset, damaged=True)
        assert whole.message is not None
        size = whole.message.store_size_bytes
        assert offset <= at < offset + size
        segment = self.store.commit_log.log.find(offset)
        assert segment is not None
        record = bytearray(segment.read(offset - segment.start_offset, size) or b"")
        record[at - offset] = byte
        self.store.repairs.fetcher = lambda _: True
        assert self.store.get_message(ids.CommitLogOffset(offset)).status is LookupStatus.CORRUPT
        self.corrupt_reads += 1
        assert self.store.repairs.apply(offset, bytes(record))
        self.store.repairs.fetcher = None
        self.unindexed.add(offset)  # its keys, dispatched again from damaged bytes or not

    @rule()
    def kill_and_recover(self) -> None:
        """SIGKILL: the process dies, every byte it wrote is in the page cache."""
        assert self.mem is not None
        appended = list(self.sent)
        self.mem.crash(lambda path, low, high: high - low)
        self.mem.reopen()
        self.corrupt_reads = 0
        self._reconcile()
        assert self.sent == appended, "a written message was lost without a power loss"

    @rule()
    def close_and_reopen(self) -> None:
        assert self.mem is not None
        before = int(self.store.max_commit_log_offset)
        self.store.close()
        self.mem.reopen()
        self.corrupt_reads = 0
        assert self.store.recovery_report.clean
        assert self.store.recovery_report.scanned_records == 0
        assert self.store.max_commit_log_offset == before
        self.durable_end = before
        self._check_key_index()

    def _reconcile(self) -> None:
        end = int(self.store.max_commit_log_offset)
        assert end >= self.durable_end, "a flushed message was lost"
        survivors = [s for s in self.sent if s.commit_log_offset + s.size <= end]
        last_end = survivors[-1].commit_log_offset + survivors[-1].size if survivors else 0
        segment = self.store.settings.commit_log_file_size_bytes
        assert end == last_end or (end % segment == 0 and end - last_end < segment)
        lost = self.sent[len(survivors) :]
        self.sent = survivors
        self.unindexed = {offset for offset in self.unindexed if offset < end}
        self.durable_end = min(self.durable_end, end)
        for sent in survivors:
            found = self.store.get_message(ids.CommitLogOffset(sent.commit_log_offset))
            assert found.status is LookupStatus.FOUND and found.message is not None
            assert found.message.body == sent.body
        self._check_key_index(lost)

    def _check_key_index(self, lost: Sequence[Sent] = ()) -> None:
        """Query by key and by message id answer exactly the survivors carrying them."""
        index = self.store.key_index

        def query(key: str) -> list[int]:
            found = index.query(key, max_count=1_000, begin_ms=0, end_ms=2**62)
            return [int(o) for o in found if int(o) not in self.unindexed]

        for topic in {t for t, _ in QUEUES}:
            for key in KEYS:
                want = [
                    s.commit_log_offset
                    for s in self.sent
                    if (s.topic, s.key) == (topic, key)
                    and s.commit_log_offset not in self.unindexed
                ]
                assert query(f"{topic}#{key}") == want[::-1], f"{topic}#{key}"
        for sent in [*self.sent, *lost]:
            if sent.uniq:
                kept = sent not in lost and sent.commit_log_offset not in self.unindexed
                want = [sent.commit_log_offset] if kept else []
                assert query(f"{sent.topic}#{sent.uniq}") == want, sent.uniq

    @invariant()
    def queue_offsets_match_the_model(self) -> None:
        if self.mem is None:
            return
        for topic, queue_id in QUEUES:
            assert self.store.max_queue_offset(topic, queue_id) == len(self._queue(topic, queue_id))
        assert self.store.stats().corrupt_read_count == self.corrupt_reads

    def teardown(self) -> None:
        if self.mem is not None:
            self.store.close()


StoreMachine.TestCase.settings = settings(
    max_examples=300,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
TestStoreModel = StoreMachine.TestCase

MIB = 1024 * 1024
LARGE_SEGMENT_BYTES = 12 * MIB
"""Room for two largest records and a smaller one per CommitLog segment."""


def _window_edges() -> list[int]:
    """Record sizes (bytes) at and around every window and buffer a record is read through."""
    windows = [
        record_reader._SCAN_WINDOW_BYTES,
        record_reader._LOOKUP_READ_BYTES,
        consume_queue.READ_CHUNK_UNITS_MAX * consume_queue.UNIT_BYTES,
        2 * record_reader._SCAN_WINDOW_BYTES,
    ]
    return [w + d for w in windows for d in (-1, 0, 1)]


class LargeRecordMachine(StoreMachine):
    """The same model with records larger than every window and buffer of the store."""

    read_bytes_max = 64 * MIB

    @initialize(sync=st.booleans())
    def open_store(self, sync: bool) -> None:
        flush_type = FlushDiskType.SYNC_FLUSH if sync else FlushDiskType.ASYNC_FLUSH
        body_max = limits.MESSAGE_SIZE_BYTES_MAX
        config = tiny_settings(
            commit_log_file_size_bytes=LARGE_SEGMENT_BYTES,
            consume_queue_file_entries=3,
            message_size_bytes_max=body_max,
            # the smallest buffer allowed: a batch of large records takes several writes
            write_buffer_bytes=body_max + store_settings.RECORD_OVERHEAD_BYTES_MAX,
            flush_disk_type=flush_type,
        )
        self.mem = MemoryStore.open(config)
        self.overhead = record_bytes(config, request("A", b"x", tags="x")) - 1

    @rule(
        data=st.data(),
        queue=st.sampled_from(QUEUES),
        count=st.integers(1, 3),
        seed=st.integers(0, 2**32),
    )
    def put_large(self, data: st.DataObject, queue: tuple[str, int], count: int, seed: int) -> None:
        config = self.store.settings
        body_max = config.message_size_bytes_max
        record_sizes = st.sampled_from(
            [*_window_edges(), body_max + self.overhead, config.write_buffer_bytes]
        )
        sizes = [
            min(body_max, data.draw(record_sizes, label="record bytes") - self.overhead)
            for _ in range(count)
        ]
        rng = random.Random(seed)
        batch = [(queue, rng.randbytes(size), "x") for size in sizes]
        topic, queue_id = queue
        self._append(
            batch, [request(topic, body, queue_id=queue_id, tags="x") for _, body, _ in batch]
        )


LargeRecordMachine.TestCase.settings = settings(
    max_examples=25,
    stateful_step_count=20,
    deadline=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.filter_too_much,
        HealthCheck.data_too_large,
    ],
)
TestLargeRecordModel = LargeRecordMachine.TestCase
