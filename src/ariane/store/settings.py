"""Settings of the storage engine: one frozen dataclass, validated once, passed explicitly.

Every field names its unit last and says which RocketMQ ``MessageStoreConfig`` field it mirrors
and that field's default. ``StoreSettings.validate`` is called by ``__post_init__``, so an
instance that exists is within bounds: sizes and counts are positive and bounded, a record of the
largest allowed message fits in one CommitLog segment and in the write buffer.
"""

from __future__ import annotations

import dataclasses
import enum

from ariane.common import limits, message

_check_range = limits.check_range  # the one range check, short at its many call sites

PAGE_SIZE_BYTES = 4096
"""OS page size used to express ``flush_least_pages`` in bytes (RocketMQ ``OS_PAGE_SIZE``)."""

RECORD_OVERHEAD_BYTES_MAX = 64 * 1024 + 512
"""Room reserved around a body for header, topic and properties (RocketMQ reserves 64 KiB)."""

GIB = 1024 * 1024 * 1024

DEFAULT_STORE_HOST = message.HostAddress("127.0.0.1", 10911)
"""STOREHOST when none is configured (RocketMQ ``brokerIP1`` and ``listenPort`` 10911)."""


class FlushDiskType(enum.Enum):
    """When an append counts as done (RocketMQ ``FlushDiskType``).

    ASYNC_FLUSH acknowledges once the bytes are in the page cache and flushes on an interval;
    SYNC_FLUSH acknowledges only after an fsync covered the bytes (group commit).
    """

    ASYNC_FLUSH = "ASYNC_FLUSH"
    SYNC_FLUSH = "SYNC_FLUSH"


@dataclasses.dataclass(frozen=True, slots=True)
class StoreSettings:
    """Settings of one broker's store (a subset of RocketMQ ``MessageStoreConfig``).

    Raises:
        ValueError: from construction, if a field is out of its bounds (see ``validate``).
    """

    commit_log_file_size_bytes: int = GIB
    """Size of one CommitLog segment file, bytes (``mappedFileSizeCommitLog`` = 1 GiB)."""

    consume_queue_file_entries: int = 300_000
    """ConsumeQueue units per segment file (``mappedFileSizeConsumeQueue`` = 300000 x 20 B)."""

    message_size_bytes_max: int = limits.MESSAGE_SIZE_BYTES_MAX
    """Largest body accepted, bytes (``maxMessageSize`` = 4 MiB); larger → MESSAGE_ILLEGAL."""

    properties_size_bytes_max: int = limits.PROPERTIES_SIZE_BYTES_MAX
    """Largest encoded properties string, bytes (``Short.MAX_VALUE`` = 32767)."""

    flush_disk_type: FlushDiskType = FlushDiskType.ASYNC_FLUSH
    """ASYNC_FLUSH or SYNC_FLUSH (``flushDiskType`` = ASYNC_FLUSH)."""

    flush_interval_ms: int = 500
    """Period of the asynchronous CommitLog flush, ms (``flushIntervalCommitLog`` = 500)."""

    flush_least_pages: int = 4
    """Dirty pages needed before an interval flush runs (``flushCommitLogLeastPages`` = 4)."""

    flush_thorough_interval_ms: int = 10_000
    """Flush whatever is dirty at least this often, ms (``flushCommitLogThoroughInterval``)."""

    flush_consume_queue_interval_ms: int = 1_000
    """Period of the ConsumeQueue flush and checkpoint write, ms (``flushIntervalConsumeQueue``)."""

    sync_flush_timeout_ms: int = 5_000
    """SYNC_FLUSH wait for durability in ms, then FLUSH_DISK_TIMEOUT (``syncFlushTimeout``)."""

    sync_flush_waiters_max: int = 65_536
    """SYNC_FLUSH: most appends waiting for the next fsync; beyond → OS_PAGE_CACHE_BUSY (Ariane)."""

    max_recovery_commit_log_files: int = 30
    """Most newest segments rescanned after an unclean stop (``maxRecoveryCommitlogFiles`` = 30)."""

    check_crc_on_recover: bool = True
    """Verify body and record CRCs in the rescan after an unclean stop (``checkCRCOnRecover``)."""

    verify_segments_on_clean_start: int = 3
    """Newest CommitLog segments whose records a slave's store (``repair_from_master``)
    CRC-checks on a clean start too (RocketMQ ``recoverNormally`` rescans from the third-newest
    file, on any broker); 0 trusts the checkpoint alone. Costs a scan of up to that many
    segments at start-up (about 40 MB/s here); a master skips it."""

    repair_from_master: bool = False
    """A slave's store (the broker sets it for the SLAVE role): a corrupt record found by that
    check cuts the CommitLog there, and a truncated newest segment is padded and rescanned,
    the HA client then re-fetching the rest from the master. RocketMQ cuts at a corrupt record
    on any broker and refuses a short segment; a master here keeps the record (reads of it
    answer CORRUPT) and refuses a short segment (StoreLayoutError), cutting no acknowledged
    message."""

    write_buffer_bytes: int = 8 * 1024 * 1024
    """Reusable encode buffer; a batch larger than this is written in several calls (Ariane)."""

    consume_queue_count_max: int = 100_000
    """Most (topic, queue id) pairs; beyond → CONSUME_QUEUE_NUM_EXCEEDED (Ariane bound)."""

    get_message_scan_units_max: int = 16_000
    """Most ConsumeQueue units one get_messages call scans (``maxFilterMessageCount`` = 16000)."""

    get_message_count_max: int = 1_024
    """Most messages one get_messages call returns (Ariane bound on ``max_count``)."""

    store_host: message.HostAddress = DEFAULT_STORE_HOST
    """The broker address written as STOREHOST and into offset message ids (``brokerIP1:port``)."""

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Check every bound.

        Raises:
            ValueError: naming the first field that is out of bounds.
        """
        _check_range("commit_log_file_size_bytes", self.commit_log_file_size_bytes, 1024, 64 * GIB)
        _check_range("consume_queue_file_entries", self.consume_queue_file_entries, 2, 10_000_000)
        _check_range("message_size_bytes_max", self.message_size_bytes_max, 1, 512 * 1024 * 1024)
        _check_range("properties_size_bytes_max", self.properties_size_bytes_max, 64, 32_767)
        _check_range("flush_interval_ms", self.flush_interval_ms, 1, 60_000)
        _check_range("flush_least_pages", self.flush_least_pages, 0, 1_000_000)
        _check_range("flush_thorough_interval_ms", self.flush_thorough_interval_ms, 1, 3_600_000)
        _check_range(
            "flush_consume_queue_interval_ms", self.flush_consume_queue_interval_ms, 1, 60_000
        )
        _check_range("sync_flush_timeout_ms", self.sync_flush_timeout_ms, 1, 600_000)
        _check_range("sync_flush_waiters_max", self.sync_flush_waiters_max, 1, 10_000_000)
        _check_range("max_recovery_commit_log_files", self.max_recovery_commit_log_files, 1, 10_000)
        _check_range("verify_segments_on_clean_start", self.verify_segments_on_clean_start, 0, 1000)
        _check_range("write_buffer_bytes", self.write_buffer_bytes, 1024, 1024 * 1024 * 1024)
        _check_range("consume_queue_count_max", self.consume_queue_count_max, 1, 10_000_000)
        _check_range("get_message_scan_units_max", self.get_message_scan_units_max, 1, 1_000_000)
        _check_range("get_message_count_max", self.get_message_count_max, 1, 100_000)
        _check_range("store_host.port", self.store_host.port, 0, 65_535)
        record_bytes_max = self.record_size_bytes_max
        if record_bytes_max > self.write_buffer_bytes:
            raise ValueError(
                f"write_buffer_bytes={self.write_buffer_bytes} cannot hold the largest record "
                f"({record_bytes_max} bytes); raise it or lower message_size_bytes_max"
            )

    @property
    def record_size_bytes_max(self) -> int:
        """Largest CommitLog record the store writes: body bound plus header room, bytes."""
        return self.message_size_bytes_max + RECORD_OVERHEAD_BYTES_MAX

    @property
    def flush_least_bytes(self) -> int:
        """``flush_least_pages`` in bytes."""
        return self.flush_least_pages * PAGE_SIZE_BYTES
