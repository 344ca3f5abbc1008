"""The CommitLog: one append-only log of message records for every topic (RocketMQ ``CommitLog``).

Appending assigns each message its CommitLog offset (where its record starts), its store
timestamp and its queue offset, from the per (topic, queue id) next-queue-offset table kept
here, as RocketMQ's ``topicQueueTable``. A batch is encoded into one reusable buffer and handed
to the OS with one write per segment touched; a record never spans segments: when it does not
fit, the segment is closed with a BLANK record and the next one starts.

High-water mark (``high_water``): before any byte is written at or past the persisted mark, it
is raised ``HIGH_WATER_STEP_BYTES`` beyond the write and synced (one small fsync per 16 MiB
written). So every CommitLog byte at or past the mark is zero, whatever a crash kept or lost, and
recovery zeroes a cut tail only up to the mark: its cost follows the data written since the
checkpoint, not the 1 GiB segment. Without the file (a store older than it) the whole tail is
zeroed. Zeroing is needed at all because a torn or stale record beyond the cut must never be
read as valid when later appends end exactly where it starts.

Threading: ``prepare`` is pure and runs outside any lock; ``append`` must be called by one
thread at a time (the store's put lock); ``read``/``scan`` (``record_reader.RecordReader``) run
concurrently and never see bytes past ``max_offset``. Expected outcomes (bad message, disk
full) are ``PutMessageStatus`` values in results, never exceptions.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import logging
import pathlib
import re
from collections.abc import Iterator, Sequence
from typing import NamedTuple

from ariane.common import clock as clock_mod
from ariane.common import delay, ids, message_id, topics
from ariane.common import message as message_mod
from ariane.store import (
    file_layer,
    high_water,
    mapped_file,
    mapped_file_queue,
    message_codec,
    record_reader,
    settings,
)

_log = logging.getLogger(__name__)

_TOPIC_PATTERN = re.compile(r"^[%a-zA-Z0-9_-]{1,255}$")
_ZERO_MS = ids.TimestampMs(0)
_ZERO_OFFSET = ids.CommitLogOffset(0)
_NO_OFFSET = ids.CommitLogOffset(-1)
_NO_QUEUE_OFFSET = ids.QueueOffset(-1)
NOT_IN_CONSUME_QUEUE = frozenset(
    {int(message_mod.SysFlag.TRANSACTION_PREPARED), int(message_mod.SysFlag.TRANSACTION_ROLLBACK)}
)
"""SYSFLAG transaction types (``& TRANSACTION_TYPE_MASK``) whose records get no ConsumeQueue unit:
prepared and rolled-back halves (RocketMQ ``CommitLogDispatcherBuildConsumeQueue``)."""


@functools.lru_cache(maxsize=4096)
def _legal_topic(topic: str) -> bool:
    # Once per topic rather than a regex match per appended message.
    return _TOPIC_PATTERN.match(topic) is not None


class PutMessageStatus(enum.Enum):
    """Outcome of an append (RocketMQ ``PutMessageStatus``)."""

    PUT_OK = "PUT_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    """Stored, but SYNC_FLUSH did not confirm durability within ``sync_flush_timeout_ms``."""
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"
    IN_SYNC_REPLICAS_NOT_ENOUGH = "IN_SYNC_REPLICAS_NOT_ENOUGH"
    SERVICE_NOT_AVAILABLE = "SERVICE_NOT_AVAILABLE"
    """Disk full, store closed or failed: not stored; retry later or elsewhere."""
    CREATE_MAPPED_FILE_FAILED = "CREATE_MAPPED_FILE_FAILED"
    MESSAGE_ILLEGAL = "MESSAGE_ILLEGAL"
    """Empty or oversize body, bad topic, separator in a property, record larger than a segment."""
    PROPERTIES_SIZE_EXCEEDED = "PROPERTIES_SIZE_EXCEEDED"
    OS_PAGE_CACHE_BUSY = "OS_PAGE_CACHE_BUSY"
    """Too many appends wait for the flusher (``sync_flush_waiters_max``)."""
    CONSUME_QUEUE_NUM_EXCEEDED = "CONSUME_QUEUE_NUM_EXCEEDED"
    """The (topic, queue id) would exceed ``consume_queue_count_max`` (LMQ_..._NUM_EXCEEDED)."""
    UNKNOWN_ERROR = "UNKNOWN_ERROR"
    """An I/O error while writing; the message is not stored."""

    @property
    def is_stored(self) -> bool:
        """Whether the message is in the CommitLog (RocketMQ ``PutMessageResult.isOk``)."""
        return self in _STORED


_STORED = frozenset(
    {
        PutMessageStatus.PUT_OK,
        PutMessageStatus.FLUSH_DISK_TIMEOUT,
        PutMessageStatus.FLUSH_SLAVE_TIMEOUT,
        PutMessageStatus.SLAVE_NOT_AVAILABLE,
    }
)


@dataclasses.dataclass(frozen=True, slots=True)
class AppendRequest:
    """One message to append and the header fields a broker sets (``MessageExtBrokerInner``).

    Attributes:
        message: topic, body, properties, flag.
        queue_id: the target queue.
        sys_flag: SYSFLAG bits (host-kind bits are set by the store).
        born_timestamp_ms: when the producer made it.
        born_host: the producer's address.
        reconsume_times: redelivery count (retry topics).
        prepared_transaction_offset: CommitLog offset of the half message (transaction ops).
    """

    message: message_mod.Message
    queue_id: ids.QueueId
    sys_flag: int = 0
    born_timestamp_ms: ids.TimestampMs = _ZERO_MS
    born_host: message_mod.HostAddress = message_mod.LOOPBACK
    reconsume_times: int = 0
    prepared_transaction_offset: ids.CommitLogOffset = _ZERO_OFFSET


@dataclasses.dataclass(frozen=True, slots=True)
class PutMessageResult:
    """What happened to one appended message.

    Attributes:
        status: the outcome; only ``status.is_stored`` results carry offsets.
        commit_log_offset: where the record starts (-1 if not stored).
        queue_offset: its queue offset (-1 if not stored; 0 for prepared/rolled-back halves).
        wrote_bytes: record size, bytes.
        store_timestamp_ms: STORETIMESTAMP.
        message_id: the offset message id (store host + CommitLog offset), "" if not stored.
    """

    status: PutMessageStatus
    commit_log_offset: ids.CommitLogOffset = _NO_OFFSET
    queue_offset: ids.QueueOffset = _NO_QUEUE_OFFSET
    wrote_bytes: int = 0
    store_timestamp_ms: ids.TimestampMs = _ZERO_MS
    message_id: str = ""


class DispatchRequest(NamedTuple):
    """What the dispatcher needs of a stored record (RocketMQ ``DispatchRequest``).

    A NamedTuple rather than a dataclass: one is built per appended message."""

    topic: ids.TopicName
    queue_id: ids.QueueId
    commit_log_offset: ids.CommitLogOffset
    size_bytes: int
    tags_code: int
    store_timestamp_ms: ids.TimestampMs
    queue_offset: ids.QueueOffset
    keys: tuple[str, ...]
    uniq_key: str | None
    sys_flag: int

    @property
    def to_consume_queue(self) -> bool:
        """Whether the record gets a ConsumeQueue unit (not prepared or rolled-back halves)."""
        return (self.sys_flag & message_mod.TRANSACTION_TYPE_MASK) not in NOT_IN_CONSUME_QUEUE

    @property
    def end_offset(self) -> int:
        """CommitLog offset just past the record."""
        return self.commit_log_offset + self.size_bytes


def tags_code_of(message: message_mod.Message, store_timestamp_ms: int) -> int:
    """The ConsumeQueue tag code: the TAGS hash, or the delivery time of a delay-level message,
    or the hash of a lite message's lite topic.

    Mirrors RocketMQ ``CommitLog.checkMessageAndReturnSize`` (SCHEDULE_TOPIC_XXXX units hold
    the time a message is due instead of its tag hash). A lite message (``__LITE_TOPIC``, in
    its LITE parent's queue) holds the Java hash of its lite topic, so a lite consumer's
    receive skips other lite topics' units without reading them (``broker.tables.lite_topics``;
    RocketMQ gives each lite topic its own queue instead).
    """
    lite = message.properties.get(message_mod.Property.LITE_TOPIC)
    if lite is not None:
        return message_codec.tag_hash_code(lite)
    if message.topic == topics.SCHEDULE_TOPIC:
        level = message.properties.get(message_mod.Property.DELAY_TIME_LEVEL, "")
        if level.isdigit() and int(level) > 0:
            return store_timestamp_ms + delay.delay_ms_of_level(int(level))
    tags = message.tags
    return message_codec.tag_hash_code(tags) if tags else 0


def dispatch_request_of(stored: message_mod.StoredMessage) -> DispatchRequest:
    """The DispatchRequest of a decoded record (re-dispatch, recovery)."""
    return DispatchRequest(
        topic=stored.topic,
        queue_id=stored.queue_id,
        commit_log_offset=stored.commit_log_offset,
        size_bytes=stored.store_size_bytes,
        tags_code=tags_code_of(stored.message, stored.store_timestamp_ms),
        store_timestamp_ms=stored.store_timestamp_ms,
        queue_offset=stored.queue_offset,
        keys=stored.message.keys,
        uniq_key=stored.message.uniq_key,
        sys_flag=int(stored.sys_flag),
    )


class PreparedAppend(NamedTuple):
    """An append request with everything computed that does not need the put lock.

    ``record`` is ``None`` when the message cannot be stored: ``status`` says how the store
    answers it and ``problem`` why (a sender turns it into its request's error)."""

    request: AppendRequest
    fields: message_codec.RecordFields
    record: message_codec.PreparedRecord | None
    status: PutMessageStatus
    problem: message_codec.PrepareProblem | None = None


_Problem = message_codec.PrepareProblem
_PROBLEM_STATUS = {
    message_codec.PrepareProblem.PROPERTIES_TOO_LARGE: PutMessageStatus.PROPERTIES_SIZE_EXCEEDED,
}


class CommitLog:
    """The CommitLog of one store.

    Args:
        directory: the ``commitlog`` directory.
        config: store settings.
        layer: the file layer.
        clock: source of store timestamps.
    """

    def __init__(
        self,
        directory: pathlib.Path,
        config: settings.StoreSettings,
        layer: file_layer.FileLayer,
        clock: clock_mod.Clock,
    ) -> None:
        self.settings = config
        self.log = mapped_file_queue.MappedFileQueue(
            directory, config.commit_log_file_size_bytes, layer
        )
        self.disk_full = False
        """The switch a disk-watermark policy sets: appends answer SERVICE_NOT_AVAILABLE."""
        self.writable = True
        """False once closed or after a failed fsync; appends answer SERVICE_NOT_AVAILABLE."""
        self.high_water = high_water.HighWaterMark(
            layer, directory / high_water.HIGH_WATER_FILE_NAME
        )
        self.store_host = config.store_host
        """STOREHOST of new records and the address of their offset message ids; the broker
        sets its advertised address once its port is bound (``MessageStore.set_store_host``)."""
        self._clock = clock
        self._buffer = bytearray(config.write_buffer_bytes)
        self._queue_offsets: dict[tuple[ids.TopicName, ids.QueueId], int] = {}
        self._record_bytes_max = min(
            config.record_size_bytes_max,
            config.commit_log_file_size_bytes - message_codec.END_FILE_MIN_BLANK_BYTES,
        )
        self.reader = record_reader.RecordReader(self.log, record_bytes_max=self._record_bytes_max)
        """Reads records by offset and scans them (lock-free, bounded by ``max_offset``)."""

    @property
    def min_offset(self) -> ids.CommitLogOffset:
        """First offset still stored."""
        return ids.CommitLogOffset(self.log.min_offset)

    @property
    def max_offset(self) -> ids.CommitLogOffset:
        """Offset just past the last written record."""
        return ids.CommitLogOffset(self.log.max_offset)

    @property
    def flushed_offset(self) -> ids.CommitLogOffset:
        """Offset just past the last durable byte."""
        return ids.CommitLogOffset(self.log.flushed_offset)

    @property
    def record_bytes_max(self) -> int:
        """Largest record this CommitLog writes or believes when reading, bytes."""
        return self._record_bytes_max

    def set_queue_offset_table(self, table: dict[tuple[ids.TopicName, ids.QueueId], int]) -> None:
        """Replace the next-queue-offset table (recovery rebuilds it from the ConsumeQueues)."""
        self._queue_offsets = dict(table)

    def prepare(
        self, request: AppendRequest, *, properties_bytes: bytes | None = None
    ) -> PreparedAppend:
        """Validate and pre-encode one request; pure, needs no lock.

        ``properties_bytes``: the message's properties already encoded (see
        ``message_codec.prepare``), so they are not encoded again."""
        msg = request.message
        fields = message_codec.RecordFields(  # positional, in field order (once per message)
            request.queue_id,
            msg.flag,
            request.sys_flag,
            request.born_timestamp_ms,
            request.born_host,
            self.store_host,
            request.reconsume_times,
            request.prepared_transaction_offset,
        )
        illegal = PutMessageStatus.MESSAGE_ILLEGAL
        if not _legal_topic(msg.topic):
            return PreparedAppend(request, fields, None, illegal, _Problem.TOPIC_ILLEGAL)
        if not 0 <= request.queue_id < 2**31:
            return PreparedAppend(request, fields, None, illegal, _Problem.FIELD_OUT_OF_RANGE)
        record = message_codec.prepare(
            msg.topic,
            msg.body,
            msg.properties,
            fields,
            body_bytes_max=self.settings.message_size_bytes_max,
            properties_bytes_max=self.settings.properties_size_bytes_max,
            properties_bytes=properties_bytes,
        )
        if isinstance(record, message_codec.PrepareProblem):
            status = _PROBLEM_STATUS.get(record, illegal)
            return PreparedAppend(request, fields, None, status, record)
        if record.total_size > self._record_bytes_max:
            return PreparedAppend(request, fields, None, illegal, _Problem.RECORD_TOO_LARGE)
        return PreparedAppend(request, fields, record, PutMessageStatus.PUT_OK)

    def append(
        self, batch: Sequence[PreparedAppend], *, new_queues_allowed: int
    ) -> tuple[list[PutMessageResult], list[DispatchRequest]]:
        """Write prepared messages; one thread at a time.

        Args:
            batch: from ``prepare``; ones with a problem status are answered with it.
            new_queues_allowed: how many (topic, queue id) pairs not yet in the table may
                still be created; further ones answer CONSUME_QUEUE_NUM_EXCEEDED.

        Returns:
            one result per message, in order, and the DispatchRequests of stored messages.
        """
        if self.disk_full or not self.writable:
            return [PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE) for _ in batch], []
        writer = _BatchWriter(self, self._clock.now_ms())
        for item in batch:
            if item.record is None:
                writer.reject(item.status)
                continue
            key = (item.request.message.topic, item.request.queue_id)
            if key not in self._queue_offsets and key not in writer.next_offsets:
                if new_queues_allowed <= 0:
                    writer.reject(PutMessageStatus.CONSUME_QUEUE_NUM_EXCEEDED)
                    continue
                new_queues_allowed -= 1
            writer.add(item, key)
        writer.finish()
        return writer.final_results(), writer.dispatches

    def forget_queue_offsets(self, topic: ids.TopicName) -> None:
        """Restart every queue of ``topic`` at queue offset 0 (the topic was deleted; RocketMQ
        ``removeQueueFromTopicQueueTable``). Called under the put lock."""
        for key in [k for k in self._queue_offsets if k[0] == topic]:
            del self._queue_offsets[key]

    def _commit_queue_offsets(self, updates: dict[tuple[ids.TopicName, ids.QueueId], int]) -> None:
        self._queue_offsets.update(updates)

    def read(
        self, offset: int, size_bytes: int = 0, *, damaged: bool = False
    ) -> record_reader.LookupResult:
        """The message whose record starts at ``offset``, CRC-checked unless read as
        ``damaged`` (``RecordReader.read``)."""
        return self.reader.read(offset, size_bytes, damaged=damaged)

    def store_timestamp_at(self, offset: int, size_bytes: int) -> int | None:
        """STORETIMESTAMP of the record at ``offset`` (``RecordReader.store_timestamp_at``)."""
        return self.reader.store_timestamp_at(offset, size_bytes)

    def scan(self, start_offset: int, *, check_crc: bool) -> Iterator[record_reader.ScanItem]:
        """Decode records from ``start_offset`` until END or CORRUPT (``RecordReader.scan``)."""
        return self.reader.scan(start_offset, check_crc=check_crc)

    def flush(self) -> int:
        """Sync everything written; returns the flushed offset.

        Raises:
            OSError: if a sync fails.
        """
        return self.log.flush()


class _BatchWriter:
    """Encodes one append call into the reusable buffer and writes it segment by segment."""

    def __init__(self, commit_log: CommitLog, store_timestamp_ms: int) -> None:
        self.log = commit_log
        self.now = ids.TimestampMs(store_timestamp_ms)
        self.results: list[PutMessageResult | None] = []  # None: written when flushed
        self.dispatches: list[DispatchRequest] = []
        self.next_offsets: dict[tuple[ids.TopicName, ids.QueueId], int] = {}
        self._buffer = commit_log._buffer
        self._used = 0
        self._segment: mapped_file.MappedFile | None = None
        self._pending: list[tuple[int, DispatchRequest]] = []  # (result index, request)
        self._failed: PutMessageStatus | None = None
        self._queue_offsets = commit_log._queue_offsets

    def reject(self, status: PutMessageStatus) -> None:
        self.results.append(PutMessageResult(status))

    def add(self, item: PreparedAppend, key: tuple[ids.TopicName, ids.QueueId]) -> None:
        """Encode one message (rejected with the failure status once an I/O error happened)."""
        record = item.record
        assert record is not None
        if self._failed is not None or not self._make_room(record.total_size):
            assert self._failed is not None
            self.reject(self._failed)
            return
        segment = self._segment
        assert segment is not None
        offset = segment.start_offset + segment.wrote_position + self._used
        sys_flag = record.sys_flag
        to_cq = (sys_flag & message_mod.TRANSACTION_TYPE_MASK) not in NOT_IN_CONSUME_QUEUE
        next_offsets = self.next_offsets
        queue_offset = next_offsets.get(key)
        if queue_offset is None:
            queue_offset = self._queue_offsets.get(key, 0)
        if not to_cq:
            queue_offset = 0
        now = self.now
        self._used = message_codec.encode_into(
            self._buffer,
            self._used,
            record,
            item.fields,
            queue_offset=queue_offset,
            commit_log_offset=offset,
            store_timestamp_ms=now,
        )
        if to_cq:
            next_offsets[key] = queue_offset + 1
        msg = item.request.message
        properties = msg.properties
        keys = properties.get(message_mod.Property.KEYS)
        self._pending.append(
            (
                len(self.results),
                DispatchRequest(
                    msg.topic,
                    key[1],
                    ids.CommitLogOffset(offset),
                    record.total_size,
                    tags_code_of(msg, now),
                    now,
                    ids.QueueOffset(queue_offset),
                    msg.keys if keys else (),
                    msg.uniq_key,
                    sys_flag,
                ),
            )
        )
        self.results.append(None)

    def _make_room(self, size: int) -> bool:
        file_size = self.log.settings.commit_log_file_size_bytes
        if self._segment is None and not self._open_segment():
            return False
        segment = self._segment
        assert segment is not None
        blank_bytes = message_codec.END_FILE_MIN_BLANK_BYTES
        if segment.wrote_position + self._used + size + blank_bytes > file_size:
            # The BLANK header goes into the buffer too: write what fills it first.
            if self._used + blank_bytes > len(self._buffer) and not self._write(end_segment=False):
                return False
            remaining = file_size - segment.wrote_position - self._used
            self._used = message_codec.encode_blank(self._buffer, self._used, remaining)
            if not self._write(end_segment=True) or not self._open_segment():
                return False
        elif self._used + size > len(self._buffer) and not self._write(end_segment=False):
            return False
        return True

    def _open_segment(self) -> bool:
        try:
            self._segment = self.log.log.segment_for_append()
        except mapped_file_queue.DiskFullError:  # logged (rate-limited) where it is raised
            self._fail_rest(PutMessageStatus.SERVICE_NOT_AVAILABLE)
            return False
        except OSError:
            _log.exception("cannot create a CommitLog segment")
            self._fail_rest(PutMessageStatus.CREATE_MAPPED_FILE_FAILED)
            return False
        return True

    def _write(self, *, end_segment: bool) -> bool:
        segment = self._segment
        assert segment is not None
        try:
            if self._used:
                end = segment.start_offset + segment.wrote_position + self._used
                self.log.high_water.cover(end)
                segment.append(memoryview(self._buffer)[: self._used])
        except OSError:
            _log.exception("CommitLog write failed at %d", segment.start_offset)
            self._fail_rest(PutMessageStatus.UNKNOWN_ERROR)
            return False
        if end_segment:
            segment.wrote_position = segment.size_bytes  # the rest of the BLANK is zeros
        self._used = 0
        updates: dict[tuple[ids.TopicName, ids.QueueId], int] = {}
        results = self.results
        # Looked up once per write and only for stored messages (a store host that is not a
        # literal IP makes every message illegal in ``prepare``, so none is pending then).
        host = self.log.store_host
        prefix = message_id.offset_message_id_prefix(host) if self._pending else ""
        for index, request in self._pending:
            results[index] = _ok_result(request, prefix)
            if request.to_consume_queue:
                updates[(request.topic, request.queue_id)] = request.queue_offset + 1
        self.dispatches.extend(request for _, request in self._pending)
        self.log._commit_queue_offsets(updates)
        self._pending.clear()
        return True

    def _fail_rest(self, status: PutMessageStatus) -> None:
        self._failed = status
        for index, _ in self._pending:
            self.results[index] = PutMessageResult(status)
        self._pending.clear()
        self._used = 0

    def final_results(self) -> list[PutMessageResult]:
        """One result per message (``finish`` has run, so none is pending)."""
        return [r if r is not None else _UNKNOWN for r in self.results]

    def finish(self) -> None:
        """Write what is buffered."""
        if self._pending and self._segment is not None:
            self._write(end_segment=False)


_UNKNOWN = PutMessageResult(PutMessageStatus.UNKNOWN_ERROR)


def _ok_result(request: DispatchRequest, message_id_prefix: str) -> PutMessageResult:
    # message_id_prefix: ``message_codec.offset_message_id_prefix`` of the store host, looked
    # up once per segment write.
    offset = request.commit_log_offset
    return PutMessageResult(
        PutMessageStatus.PUT_OK,
        offset,
        request.queue_offset,
        request.size_bytes,
        request.store_timestamp_ms,
        message_id_prefix + format(offset, "016X"),
    )
