"""Reading CommitLog records: one by offset, or a scan from a record boundary (recovery, reput).

A ``RecordReader`` reads the segments of one ``MappedFileQueue`` without any lock: it never
looks past the queue's ``max_offset`` (the written data), so it runs concurrently with the one
appending thread of ``commit_log.CommitLog``. Every record it returns passed its checks
(``message_codec.decode``: sizes, magic code, CRCs when asked, PHYSICALOFFSET equal to where the
record sits); one that fails is reported CORRUPT, never returned as a message. Expected outcomes
are ``LookupStatus`` values and scan items, never exceptions (RocketMQ
``CommitLog.checkMessageAndReturnSize`` / ``getMessage``).
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Generator, Iterator

from ariane.common import message as message_mod
from ariane.store import mapped_file, mapped_file_queue, message_codec

_SCAN_WINDOW_BYTES = 1024 * 1024
"""Bytes a scan reads at once; a record longer than this is read whole (``_read_whole``)."""
_LOOKUP_READ_BYTES = 4096
"""First read of a lookup by offset whose size is unknown; a longer record is read again."""


class LookupStatus(enum.Enum):
    """Outcome of reading one record by CommitLog offset."""

    FOUND = "FOUND"
    NOT_FOUND = "NOT_FOUND"
    """Outside the stored range, or not the start of a message record."""
    CORRUPT = "CORRUPT"
    """The bytes there fail their checks; never returned as a message."""


@dataclasses.dataclass(frozen=True, slots=True)
class LookupResult:
    """A record read by offset: the message when FOUND, and its bytes as stored.

    Attributes:
        status: the outcome.
        message: the decoded message (FOUND only).
        reason: why not FOUND, for logs.
        record: the record's bytes exactly as the CommitLog holds them (TOTALSIZE long,
            record-CRC property included; FOUND only): a pull sends them without re-encoding.
    """

    status: LookupStatus
    message: message_mod.StoredMessage | None = None
    reason: str = ""
    record: memoryview | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class ScanItem:
    """One step of a scan: a record (OK) or where and why the scan stopped (END, CORRUPT)."""

    offset: int
    result: message_codec.DecodeResult


class RecordReader:
    """Reads the records of one CommitLog.

    Args:
        log: the CommitLog's segments.
        record_bytes_max: the largest record believed when reading, bytes (a larger TOTALSIZE
            is CORRUPT).
    """

    def __init__(self, log: mapped_file_queue.MappedFileQueue, *, record_bytes_max: int) -> None:
        self.log = log
        self._record_bytes_max = record_bytes_max

    @property
    def min_offset(self) -> int:
        """First offset still stored."""
        return self.log.min_offset

    @property
    def max_offset(self) -> int:
        """Offset just past the last written record."""
        return self.log.max_offset

    @property
    def record_bytes_max(self) -> int:
        """The largest record believed when reading, bytes."""
        return self._record_bytes_max

    def read(self, offset: int, size_bytes: int = 0, *, damaged: bool = False) -> LookupResult:
        """The message whose record starts at ``offset``, with its CRCs checked.

        Args:
            offset: a CommitLog offset.
            size_bytes: the record size if known (from a ConsumeQueue unit), else 0.
            damaged: read a record that failed its CRCs for what its structure tells
                (``message_codec.decode``'s ``damaged``): recovery tells a damaged record
                from a torn or misplaced one with it; such a message is never served.

        Returns:
            FOUND with the message and its stored bytes; NOT_FOUND outside the stored range
            or on a non-record; CORRUPT if the bytes fail their checks.
        """
        if not self.min_offset <= offset < self.max_offset:
            return LookupResult(LookupStatus.NOT_FOUND, reason="outside the stored range")
        segment = self.log.find(offset)
        if segment is None:
            return LookupResult(LookupStatus.NOT_FOUND, reason="segment deleted")
        want = size_bytes if 0 < size_bytes <= self._record_bytes_max else _LOOKUP_READ_BYTES
        data = self._read_whole(segment, offset - segment.start_offset, want)
        if data is None:
            return LookupResult(LookupStatus.NOT_FOUND, reason="segment deleted")
        view = memoryview(data)
        decoded = self._decode(view, offset, check_crc=True, damaged=damaged)
        if decoded.status is message_codec.DecodeStatus.OK:
            assert decoded.message is not None
            return LookupResult(LookupStatus.FOUND, decoded.message, record=view[: decoded.size])
        if decoded.status is message_codec.DecodeStatus.CORRUPT:
            return LookupResult(LookupStatus.CORRUPT, reason=decoded.reason)
        return LookupResult(LookupStatus.NOT_FOUND, reason="no message record here")

    def peek(
        self, offset: int, *, check_crc: bool = True, damaged: bool = False
    ) -> message_codec.DecodeResult:
        """What starts at ``offset``, as one step of a scan would say (``record_scan.look``).

        Args:
            offset: a CommitLog offset (a record boundary, as far as the caller knows).
            check_crc: verify the CRCs.
            damaged: read a record failing its CRCs for its structure (as ``read``).

        Returns:
            OK (a record at its own PHYSICALOFFSET), BLANK (one that ends its segment: its
            ``size`` is the bytes to the next segment), END (at or past the written data,
            outside the stored range, or zeros), or CORRUPT with a reason (a BLANK that does
            not end its segment is CORRUPT, as in ``scan``).
        """
        segment = self.log.find(offset)
        end = message_codec.DecodeResult(message_codec.DecodeStatus.END)
        if segment is None or not self.min_offset <= offset < self.max_offset:
            return end
        position = offset - segment.start_offset
        data = self._read_whole(segment, position, _LOOKUP_READ_BYTES)
        if data is None:
            return end
        decoded = self._decode(memoryview(data), offset, check_crc=check_crc, damaged=damaged)
        if decoded.status is message_codec.DecodeStatus.BLANK and (
            offset + decoded.size != segment.end_offset
        ):
            return message_codec.DecodeResult(
                message_codec.DecodeStatus.CORRUPT, reason="BLANK does not end the segment"
            )
        return decoded

    def _decode(
        self, view: memoryview, offset: int, *, check_crc: bool, damaged: bool
    ) -> message_codec.DecodeResult:
        """``message_codec.decode``, and a record not at its own PHYSICALOFFSET is CORRUPT."""
        decoded = message_codec.decode(
            view, record_bytes_max=self._record_bytes_max, check_crc=check_crc, damaged=damaged
        )
        if decoded.message is not None and decoded.message.commit_log_offset != offset:
            return message_codec.DecodeResult(
                message_codec.DecodeStatus.CORRUPT, reason="PHYSICALOFFSET mismatch"
            )
        return decoded

    def store_timestamp_at(self, offset: int, size_bytes: int) -> int | None:
        """STORETIMESTAMP of the record at ``offset`` (header only), ``None`` if unreadable."""
        segment = self.log.find(offset)
        if segment is None or not self.min_offset <= offset < self.max_offset:
            return None
        data = segment.read(offset - segment.start_offset, 96)
        return None if data is None else message_codec.peek_store_timestamp(memoryview(data))

    def scan(self, start_offset: int, *, check_crc: bool) -> Iterator[ScanItem]:
        """Decode records from ``start_offset`` (a record boundary) until END or CORRUPT.

        Yields every OK record, then one final item whose status is END or CORRUPT (its
        ``offset`` is where valid data ends). BLANK records are followed to the next segment;
        a BLANK not reaching its segment's end, or a record whose PHYSICALOFFSET is not where
        it sits, is CORRUPT. Reads in windows of 1 MiB, and any longer record whole: only a
        record that ends beyond the written data is a torn tail.
        """
        offset = start_offset
        while True:
            segment = self.log.find(offset)
            if segment is None:
                yield ScanItem(offset, message_codec.DecodeResult(message_codec.DecodeStatus.END))
                return
            offset = yield from self._scan_segment(segment, offset, check_crc)
            if offset < 0:
                return

    def _scan_segment(
        self, segment: mapped_file.MappedFile, offset: int, check_crc: bool
    ) -> Generator[ScanItem, None, int]:
        # Returns the next segment's start after a BLANK, or -1 after the final item.
        window_start, window = offset, b""
        while True:
            window_start, window = self._window_for(segment, offset, window_start, window)
            view = memoryview(window)[offset - window_start :]
            result = message_codec.decode(
                view, record_bytes_max=self._record_bytes_max, check_crc=check_crc
            )
            status = result.status
            if status is message_codec.DecodeStatus.BLANK:
                if offset + result.size == segment.end_offset:
                    return segment.end_offset
                result = message_codec.DecodeResult(
                    message_codec.DecodeStatus.CORRUPT, reason="BLANK does not end the segment"
                )
            elif status is message_codec.DecodeStatus.OK:
                assert result.message is not None
                if result.message.commit_log_offset == offset:
                    yield ScanItem(offset, result)
                    offset += result.size
                    continue
                result = message_codec.DecodeResult(
                    message_codec.DecodeStatus.CORRUPT, reason="PHYSICALOFFSET mismatch"
                )
            yield ScanItem(offset, result)
            return -1

    def _window_for(
        self, segment: mapped_file.MappedFile, offset: int, window_start: int, window: bytes
    ) -> tuple[int, bytes]:
        # Keep the window while it holds the whole record at ``offset`` (or its TOTALSIZE is
        # unbelievable, for ``decode`` to reject); else read afresh from ``offset``, whole.
        position = offset - window_start
        have = len(window) - position
        if have >= message_codec.END_FILE_MIN_BLANK_BYTES:
            total = int.from_bytes(window[position : position + 4], "big", signed=True)
            if total <= have or total > self._record_bytes_max or total <= 0:
                return window_start, window
        readable_end = segment.start_offset + segment.wrote_position
        if window and window_start + len(window) >= readable_end:
            return window_start, window  # nothing more was written: a short record is torn
        data = self._read_whole(segment, offset - segment.start_offset, _SCAN_WINDOW_BYTES)
        return offset, data or b""

    def _read_whole(
        self, segment: mapped_file.MappedFile, position: int, want_bytes: int
    ) -> bytes | None:
        """At least ``want_bytes`` from ``position``, and the whole record starting there.

        A record's TOTALSIZE may exceed any fixed window (records reach ``record_bytes_max``,
        over 4 MiB): when the header read says the record is longer than what was read and the
        size is believable, the record is read again whole. Only a record that ends beyond the
        segment's written data comes back short, and ``decode`` then calls it truncated.

        Returns:
            the bytes (capped at the written data), or ``None`` if the segment was destroyed.
        """
        data = segment.read(position, want_bytes)
        if data is None or len(data) < 4:
            return data
        total = int.from_bytes(data[:4], "big", signed=True)
        if len(data) < total <= self._record_bytes_max:
            return segment.read(position, total)
        return data
