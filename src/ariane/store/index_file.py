"""Query by key: RocketMQ's IndexFile and IndexService over memory-mapped hash files.

The dispatcher feeds every message's keys (``topic#KEY`` for each of its KEYS and
``topic#UNIQ_KEY`` for its message id) with the message's commit-log offset and store time;
``IndexService.query`` answers the commit-log offsets of the messages that may carry a key,
newest first. Hash collisions are expected: callers read each message and check its keys. The
byte layout lives in ``index_codec``.

Invariants:

- Files live in one directory (``<store root>/index``), named by creation time in UTC as
  ``yyyyMMddHHmmssSSS`` (RocketMQ's format; RocketMQ uses local time). Names strictly increase
  in creation order, and each file indexes commit-log offsets after those of the file before.
- A file appears under its final name only fully allocated and with a valid header: it is
  created as a hidden temporary file, preallocated, synced, then renamed.
- Entries are appended in non-decreasing commit-log offset order; a slot and every
  ``prev_index`` point to an older entry, so chains strictly decrease.
- ``put`` writes the entry, then the slot, then the header. A process crash between those
  writes leaves at most one uncounted entry (number ``index_count``), which reads skip over.
- Reads trust nothing on disk: a walk follows only strictly decreasing entry numbers below
  ``index_count`` (so it ends within ``index_count_max`` steps) and stops at any entry whose
  commit-log offset lies outside the file's ``[begin_phy_offset, end_phy_offset]``. A crash can
  lose index entries, never make a query loop or return an offset outside that range.
- Re-feeding after recovery is harmless: ``put`` ignores a message below the highest indexed
  offset, and at that offset adds only the keys not already there.
"""

from __future__ import annotations

import calendar
import dataclasses
import errno
import logging
import mmap
import os
import pathlib
import re
import threading
import time
from collections.abc import Iterator, Sequence

from ariane.common import clock, ids, limits
from ariane.store import index_codec, metadata

_log = logging.getLogger(__name__)

INDEX_DIR_NAME = "index"
"""Name of the index directory under the store root (RocketMQ ``StorePathConfigHelper``)."""

FILE_SIZE_BYTES_MAX = 2**31 - 1
"""Largest index file, in bytes: RocketMQ sizes index files with a Java ``int``."""

_FILE_NAME = re.compile(r"^\d{17}$")
_NAME_TIME_FORMAT = "%Y%m%d%H%M%S"
_SECOND_MS = 1000


class IndexFileError(Exception):
    """An index file on disk cannot be used with the current settings (its size differs)."""


@dataclasses.dataclass(frozen=True, slots=True)
class IndexSettings:
    """Geometry and limits of the key index (RocketMQ ``MessageStoreConfig``).

    Raises:
        ValueError: from the constructor, if a field is out of its bounds or the resulting file
            would exceed ``FILE_SIZE_BYTES_MAX``.
    """

    hash_slot_count: int = 5_000_000
    """Hash slots per file (RocketMQ ``maxHashSlotNum``), 1 .. 100,000,000. More slots mean
    shorter collision chains; each costs 4 bytes of file."""

    index_count_max: int = 20_000_000
    """Entry capacity per file, counting the unused entry 0 (RocketMQ ``maxIndexNum``),
    2 .. 100,000,000; a file holds ``index_count_max - 1`` keys, then a new file is created.
    Each entry costs 20 bytes of file."""

    query_results_max: int = 64
    """Most offsets one query returns (RocketMQ ``maxMsgsNumBatch``), 1 .. 10,000; larger
    requests are clamped to it."""

    def __post_init__(self) -> None:
        limits.check_range("hash_slot_count", self.hash_slot_count, 1, 100_000_000)
        limits.check_range("index_count_max", self.index_count_max, 2, 100_000_000)
        limits.check_range("query_results_max", self.query_results_max, 1, 10_000)
        if self.file_size_bytes > FILE_SIZE_BYTES_MAX:
            raise ValueError(
                f"an index file of {self.file_size_bytes} bytes exceeds {FILE_SIZE_BYTES_MAX}"
            )

    @property
    def file_size_bytes(self) -> int:
        """Size of one index file, in bytes (420,000,040 with the defaults)."""
        return index_codec.file_size_bytes(self.hash_slot_count, self.index_count_max)


_INDEX_COUNT = 5
"""Position of ``index_count`` in ``IndexFile._fields`` (``IndexHeader`` field order)."""


class IndexFile:
    """One memory-mapped index file (RocketMQ ``IndexFile``); not thread-safe on its own.

    Build with ``IndexFile.create`` or ``IndexFile.open``; ``IndexService`` owns the files and
    serialises access to them.
    """

    def __init__(self, path: pathlib.Path, mapping: mmap.mmap, settings: IndexSettings) -> None:
        self._path = path
        self._map = mapping
        self._slots = settings.hash_slot_count
        self._capacity = settings.index_count_max
        self._fields: list[int] = list(dataclasses.astuple(self._load_header()))
        """The header's fields in layout order (``IndexHeader``), updated in place by ``put``."""
        self._dirty = False
        self._repair_uncounted_entry()

    @classmethod
    def create(
        cls,
        path: pathlib.Path,
        settings: IndexSettings,
        *,
        carry_phy_offset: int,
        carry_timestamp_ms: int,
    ) -> IndexFile:
        """Create and map a new, empty, fully preallocated file at ``path``.

        The header starts with the previous file's end offset and time, as RocketMQ does, so
        an empty file still says where the index stands.

        Raises:
            OSError: if the file cannot be created, allocated, synced or renamed.
        """
        header = index_codec.IndexHeader(
            begin_timestamp_ms=carry_timestamp_ms,
            end_timestamp_ms=carry_timestamp_ms,
            begin_phy_offset=carry_phy_offset,
            end_phy_offset=carry_phy_offset,
            hash_slot_count=0,
            index_count=1,
        )
        temporary = path.with_name(f".{path.name}.tmp")
        fd = os.open(temporary, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            _preallocate(fd, settings.file_size_bytes)
            os.pwrite(fd, index_codec.encode_header(header), 0)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temporary, path)
        metadata.fsync_directory(path.parent)
        return cls.open(path, settings)

    @classmethod
    def open(cls, path: pathlib.Path, settings: IndexSettings) -> IndexFile:
        """Map the existing file at ``path``.

        Raises:
            IndexFileError: if the file's size is not ``settings.file_size_bytes`` (the
                settings changed since it was written).
            OSError: if the file cannot be opened or mapped.
        """
        fd = os.open(path, os.O_RDWR)
        try:
            size = os.fstat(fd).st_size
            if size != settings.file_size_bytes:
                raise IndexFileError(
                    f"{path} is {size} bytes but the index settings give "
                    f"{settings.file_size_bytes}; hash_slot_count or index_count_max changed"
                )
            mapping = mmap.mmap(fd, size, access=mmap.ACCESS_WRITE)
        finally:
            os.close(fd)
        return cls(path, mapping, settings)

    @property
    def path(self) -> pathlib.Path:
        """Where the file lives."""
        return self._path

    @property
    def header(self) -> index_codec.IndexHeader:
        """The current header (as written to the mapping)."""
        return index_codec.IndexHeader(*self._fields)

    @property
    def is_empty(self) -> bool:
        """Whether no entry has been written."""
        return self._fields[_INDEX_COUNT] <= 1

    @property
    def is_full(self) -> bool:
        """Whether the file has no room for another entry (RocketMQ ``isWriteFull``)."""
        return self._fields[_INDEX_COUNT] >= self._capacity

    def time_overlaps(self, begin_ms: int, end_ms: int) -> bool:
        """Whether ``[begin_ms, end_ms]`` overlaps the file's store-time range."""
        return self.header.begin_timestamp_ms <= end_ms and begin_ms <= (
            self.header.end_timestamp_ms
        )

    def put(self, key_hash: int, commit_log_offset: int, store_timestamp_ms: int) -> bool:
        """Append one entry; ``False`` if the file is full (RocketMQ ``IndexFile.putKey``).

        Unlike RocketMQ, the first entry sets the begin timestamp before its time diff is
        computed, so its diff is 0 rather than relative to the previous file's end.
        """
        fields = self._fields
        begin_ms, end_ms, begin_phy, _, slot_count, index = fields
        if index >= self._capacity:
            return False
        slot = key_hash % self._slots
        prev = self._chain_head(slot)
        if index <= 1:  # the first entry
            begin_ms = end_ms = store_timestamp_ms
            begin_phy = commit_log_offset
        elif store_timestamp_ms > end_ms:
            end_ms = store_timestamp_ms
        # Entry, slot, header: the order ``_repair_uncounted_entry`` relies on after a crash.
        # Plain ints, no IndexEntry/IndexHeader objects: this runs for every key of every message.
        index_codec.write_entry_fields(
            self._map,
            index_codec.entry_position(self._slots, index),
            key_hash,
            commit_log_offset,
            index_codec.time_diff_s(store_timestamp_ms, begin_ms),
            prev,
        )
        index_codec.write_slot(self._map, slot, index)
        fields[:] = (
            begin_ms,
            end_ms,
            begin_phy,
            commit_log_offset,
            slot_count + (prev == index_codec.NO_ENTRY),
            index + 1,
        )
        index_codec.write_header_fields(self._map, *fields)
        self._dirty = True
        return True

    def select(
        self,
        key_hash: int,
        *,
        max_count: int,
        begin_ms: int,
        end_ms: int,
        into: list[ids.CommitLogOffset],
    ) -> None:
        """Append to ``into`` the offsets stored under ``key_hash`` in the time range, newest first.

        Stops once ``into`` holds ``max_count`` offsets (RocketMQ ``selectPhyOffset``). An
        entry's store time is known to the second: it matches if its second
        ``[t, t + 999]`` overlaps ``[begin_ms, end_ms]`` (RocketMQ tests ``t`` alone, which can
        miss a message stored late in the first second of the range).
        """
        base_ms = self.header.begin_timestamp_ms
        for entry in self._walk(key_hash):
            if len(into) >= max_count:
                return
            second_ms = base_ms + entry.time_diff_s * _SECOND_MS
            if second_ms + _SECOND_MS - 1 < begin_ms:
                return
            if entry.key_hash == key_hash and second_ms <= end_ms:
                into.append(ids.CommitLogOffset(entry.commit_log_offset))

    def contains(self, key_hash: int, commit_log_offset: int) -> bool:
        """Whether an entry for ``key_hash`` at ``commit_log_offset`` exists.

        Walks only the entries at or after ``commit_log_offset``, so it is cheap for the newest
        offsets (the recovery case).
        """
        for entry in self._walk(key_hash):
            if entry.commit_log_offset < commit_log_offset:
                return False
            if entry.commit_log_offset == commit_log_offset and entry.key_hash == key_hash:
                return True
        return False

    def truncate(self, commit_log_end: int) -> None:
        """Remove every entry at ``commit_log_end`` or beyond; the file may become empty.

        Chains are restored by walking the removed entries newest first and pointing each
        slot back at the older entry. If the removed entries do not match the slots (a crash
        left garbage), every slot is scanned and those pointing at removed entries cleared.
        """
        header = self.header
        keep = self._first_index_at_or_after(commit_log_end)
        if keep >= header.index_count:
            return
        freed, consistent = self._unlink_entries(keep, header.index_count)
        if not consistent:
            _log.warning("%s: index chains inconsistent after a crash; rescanning slots", self)
            freed = self._clear_slots_from(keep)
        if keep <= 1:
            end_phy, end_ms = header.begin_phy_offset, header.begin_timestamp_ms
        else:
            last = self._entry(keep - 1)
            end_phy = last.commit_log_offset
            end_ms = min(
                header.end_timestamp_ms,
                header.begin_timestamp_ms + (last.time_diff_s + 1) * _SECOND_MS - 1,
            )
        self._set_header(
            dataclasses.replace(
                header,
                end_timestamp_ms=end_ms,
                end_phy_offset=end_phy,
                hash_slot_count=max(header.hash_slot_count - freed, 0),
                index_count=keep,
            )
        )
        self.flush()

    def flush(self) -> None:
        """Write the file's changes to disk (``msync``), if it has any.

        Raises:
            OSError: if the sync fails.
        """
        if self._dirty:
            self._map.flush()
            self._dirty = False

    def close(self) -> None:
        """Flush and unmap the file; idempotent."""
        if not self._map.closed:
            self.flush()
            self._map.close()

    def __repr__(self) -> str:
        return f"IndexFile({self._path.name}, index_count={self.header.index_count})"

    def _load_header(self) -> index_codec.IndexHeader:
        header = index_codec.decode_header(self._map)
        if header.index_count <= 0:  # never written (RocketMQ IndexHeader.load does the same)
            return dataclasses.replace(header, index_count=1)
        if header.index_count > self._capacity:
            _log.warning(
                "%s: header index_count %d exceeds capacity %d; treating the file as full",
                self._path,
                header.index_count,
                self._capacity,
            )
            return dataclasses.replace(header, index_count=self._capacity)
        return header

    def _set_header(self, header: index_codec.IndexHeader) -> None:
        index_codec.write_header(self._map, header)
        self._fields = list(dataclasses.astuple(header))
        self._dirty = True

    def _entry(self, index: int) -> index_codec.IndexEntry:
        return index_codec.decode_entry(self._map, index_codec.entry_position(self._slots, index))

    def _chain_head(self, slot: int) -> int:
        """The newest counted entry of ``slot``'s chain, or ``NO_ENTRY``."""
        value = index_codec.read_slot(self._map, slot)
        if index_codec.NO_ENTRY < value < self._fields[_INDEX_COUNT]:
            return value
        return index_codec.NO_ENTRY

    def _repair_uncounted_entry(self) -> None:
        """Unlink the entry a crash left written and linked but not counted in the header.

        ``put`` writes entry, slot, header; a crash after the slot leaves slot ->
        ``index_count``. Pointing the slot back at the entry's predecessor restores the chain
        before the next ``put`` reuses that entry number for another key.
        """
        count = self.header.index_count
        if count >= self._capacity:
            return
        entry = self._entry(count)
        if entry.key_hash < 0:
            return
        slot = entry.key_hash % self._slots
        if index_codec.read_slot(self._map, slot) != count:
            return
        prev = entry.prev_index
        if not index_codec.NO_ENTRY <= prev < count:
            prev = index_codec.NO_ENTRY
        _log.warning("%s: unlinking uncounted entry %d left by a crash", self._path, count)
        index_codec.write_slot(self._map, slot, prev)
        self._dirty = True

    def _walk(self, key_hash: int) -> Iterator[index_codec.IndexEntry]:
        """The plausible entries of ``key_hash``'s slot chain, newest first; bounded."""
        header = self.header
        index = self._chain_head(key_hash % self._slots)
        while index != index_codec.NO_ENTRY:
            entry = self._entry(index)
            plausible = (
                header.begin_phy_offset <= entry.commit_log_offset <= header.end_phy_offset
                and entry.time_diff_s >= 0
            )
            if not plausible:
                _log.warning("%s: entry %d is corrupt (%s); chain cut", self, index, entry)
                return
            yield entry
            if not index_codec.NO_ENTRY <= entry.prev_index < index:
                _log.warning(
                    "%s: entry %d links forward to %d; chain cut", self, index, entry.prev_index
                )
                return
            index = entry.prev_index

    def _first_index_at_or_after(self, commit_log_offset: int) -> int:
        """The first entry number whose offset is ``>= commit_log_offset`` (binary search)."""
        low, high = 1, self.header.index_count
        while low < high:
            middle = (low + high) // 2
            if self._entry(middle).commit_log_offset < commit_log_offset:
                low = middle + 1
            else:
                high = middle
        return low

    def _unlink_entries(self, keep: int, count: int) -> tuple[int, bool]:
        """Point slots past entries ``keep .. count - 1``; (slots emptied, consistent)."""
        freed = 0
        consistent = True
        for index in range(count - 1, keep - 1, -1):
            entry = self._entry(index)
            slot = entry.key_hash % self._slots
            if entry.key_hash < 0 or index_codec.read_slot(self._map, slot) != index:
                consistent = False
                continue
            prev = entry.prev_index
            if not index_codec.NO_ENTRY <= prev < index:
                consistent = False
                prev = index_codec.NO_ENTRY
            index_codec.write_slot(self._map, slot, prev)
            freed += prev == index_codec.NO_ENTRY
        return freed, consistent

    def _clear_slots_from(self, keep: int) -> int:
        """Empty every slot naming an entry ``>= keep`` or a negative one; returns how many."""
        cleared = 0
        for slot, value in enumerate(index_codec.slot_values(self._map, self._slots)):
            if value >= keep or value < index_codec.NO_ENTRY:
                index_codec.write_slot(self._map, slot, index_codec.NO_ENTRY)
                cleared += 1
        return cleared


class IndexService:
    """All index files of a store, oldest first (RocketMQ ``IndexService``); thread-safe.

    Args:
        directory: the index directory, normally ``<store root>/INDEX_DIR_NAME``; created if
            missing. Existing files are opened; leftover temporary files from a crash during
            file creation are removed.
        settings: file geometry and query limits.
        clock: names new files by its wall time.

    Raises:
        IndexFileError: if an existing file does not match ``settings``.
        OSError: if the directory or a file cannot be read.
    """

    def __init__(
        self, directory: pathlib.Path, settings: IndexSettings, *, clock: clock.Clock
    ) -> None:
        self._directory = directory
        self._settings = settings
        self._clock = clock
        self._lock = threading.Lock()
        self._closed = False
        directory.mkdir(parents=True, exist_ok=True)
        self._files = self._open_files()
        self._max_offset = self._indexed_max_offset()

    @property
    def file_paths(self) -> tuple[pathlib.Path, ...]:
        """The index files, oldest first."""
        with self._lock:
            return tuple(f.path for f in self._files)

    @property
    def max_commit_log_offset(self) -> ids.CommitLogOffset | None:
        """The highest commit-log offset indexed, or ``None`` if nothing is indexed.

        The dispatcher re-feeds messages from its checkpoint after recovery; ``put`` skips
        those below this offset.
        """
        with self._lock:
            return self._max_offset

    def put(
        self,
        keys: Sequence[str],
        commit_log_offset: ids.CommitLogOffset,
        store_timestamp_ms: int,
    ) -> None:
        """Index one message's keys (RocketMQ ``IndexService.buildIndex``).

        Empty keys are skipped and keys sharing a hash are indexed once. A message below the
        highest indexed offset is ignored; at that offset only missing keys are added, so a
        re-fed message is never indexed twice. Rolls to a new file when the current one is full.

        Args:
            keys: the index keys of one message, already ``topic#KEY`` / ``topic#UNIQ_KEY``.
            commit_log_offset: where the message's record starts in the commit log.
            store_timestamp_ms: the message's store time, ms since the epoch.

        Raises:
            OSError: if a new file cannot be created.
        """
        self.put_many([(keys, commit_log_offset, store_timestamp_ms)])

    def put_many(self, messages: Sequence[tuple[Sequence[str], ids.CommitLogOffset, int]]) -> None:
        """``put`` for several messages in CommitLog order, under one lock hold.

        Args:
            messages: ``(keys, commit_log_offset, store_timestamp_ms)`` per message, as ``put``.

        Raises:
            OSError: if a new file cannot be created.
        """
        key_hash = index_codec.key_hash
        with self._lock:
            assert not self._closed, "IndexService used after close()"
            for keys, commit_log_offset, store_timestamp_ms in messages:
                if len(keys) == 1:  # the common case: the UNIQ_KEY alone
                    hashes = [key_hash(keys[0])] if keys[0] else []
                else:
                    hashes = list(dict.fromkeys(key_hash(key) for key in keys if key))
                self._put_locked(hashes, commit_log_offset, store_timestamp_ms)

    def _put_locked(
        self, hashes: list[int], commit_log_offset: ids.CommitLogOffset, store_timestamp_ms: int
    ) -> None:
        last = self._max_offset
        if not hashes or (last is not None and commit_log_offset < last):
            return
        if commit_log_offset == last:
            hashes = [h for h in hashes if not self._contains(h, commit_log_offset)]
        for key_hash in hashes:
            written = self._writable_file().put(key_hash, commit_log_offset, store_timestamp_ms)
            assert written, "a writable index file refused an entry"
        self._max_offset = commit_log_offset

    def query(
        self, key: str, *, max_count: int, begin_ms: int, end_ms: int
    ) -> list[ids.CommitLogOffset]:
        """Commit-log offsets of messages that may carry ``key``, newest first.

        Mirrors RocketMQ ``IndexService.queryOffset``: files are searched newest first and only
        those whose time range overlaps the query. Offsets whose hash merely collides with the
        key's may be returned; the caller must read each message and check its keys.

        Args:
            key: the index key, ``topic#KEY`` or ``topic#UNIQ_KEY``.
            max_count: most offsets wanted; clamped to ``settings.query_results_max``.
            begin_ms: earliest store time, ms since the epoch, inclusive.
            end_ms: latest store time, ms since the epoch, inclusive.
        """
        limit = min(max_count, self._settings.query_results_max)
        found: list[ids.CommitLogOffset] = []
        if limit <= 0 or begin_ms > end_ms:
            return found
        key_hash = index_codec.key_hash(key)
        with self._lock:
            assert not self._closed, "IndexService used after close()"
            for index_file in reversed(self._files):
                if len(found) >= limit:
                    break
                if index_file.is_empty:
                    continue
                if index_file.time_overlaps(begin_ms, end_ms):
                    index_file.select(
                        key_hash, max_count=limit, begin_ms=begin_ms, end_ms=end_ms, into=found
                    )
                if index_file.header.begin_timestamp_ms < begin_ms:
                    break
        return found

    def flush(self) -> ids.CommitLogOffset | None:
        """Write every file's changes to disk; returns the highest offset now durable.

        The returned offset (``None`` if nothing is indexed) is what a checkpoint may record.

        Raises:
            OSError: if a sync fails.
        """
        with self._lock:
            durable = self._max_offset
            for index_file in self._files:
                index_file.flush()
            return durable

    def truncate_after(self, commit_log_end: ids.CommitLogOffset) -> None:
        """Forget every entry at ``commit_log_end`` or beyond (recovery of a truncated log).

        ``commit_log_end`` is the recovered end of the commit log, where the next record will
        be written; records at or past it no longer exist. Files wholly beyond it are deleted
        (RocketMQ deletes index files newer than the checkpoint after an abnormal stop); the
        file straddling it is truncated in place.

        Raises:
            OSError: if a file cannot be synced or deleted.
        """
        with self._lock:
            assert not self._closed, "IndexService used after close()"
            while self._files:
                newest = self._files[-1]
                header = newest.header
                if max(header.begin_phy_offset, header.end_phy_offset) < commit_log_end:
                    break
                if header.begin_phy_offset < commit_log_end and not newest.is_empty:
                    newest.truncate(commit_log_end)
                    if not newest.is_empty and newest.header.end_phy_offset < commit_log_end:
                        break
                _log.info(
                    "deleting index file %s beyond commit-log end %d", newest.path, commit_log_end
                )
                self._delete(newest)
                self._files.pop()
            self._max_offset = self._indexed_max_offset()

    def delete_files_before(self, commit_log_offset: ids.CommitLogOffset) -> int:
        """Delete the oldest files whose entries all lie below ``commit_log_offset``.

        Mirrors RocketMQ ``IndexService.deleteExpiredFile``: called after commit-log retention
        with the new minimum commit-log offset; the newest file is never deleted.

        Returns:
            The number of files deleted.

        Raises:
            OSError: if a file cannot be deleted.
        """
        with self._lock:
            assert not self._closed, "IndexService used after close()"
            doomed = 0
            for index_file in self._files[:-1]:
                if index_file.header.end_phy_offset >= commit_log_offset:
                    break
                _log.info("deleting expired index file %s", index_file.path)
                self._delete(index_file)
                doomed += 1
            del self._files[:doomed]
            return doomed

    def close(self) -> None:
        """Flush and unmap every file; idempotent. The service cannot be used afterwards.

        Raises:
            OSError: if a sync fails (the files are unmapped all the same).
        """
        with self._lock:
            if self._closed:
                return
            self._closed = True
            try:
                for index_file in self._files:
                    index_file.flush()
            finally:
                for index_file in self._files:
                    index_file.close()

    def _open_files(self) -> list[IndexFile]:
        files: list[IndexFile] = []
        try:
            for path in sorted(self._directory.iterdir()):
                if path.name.startswith(".") and path.name.endswith(".tmp"):
                    _log.warning("removing %s left by a crash during file creation", path)
                    path.unlink()
                elif _FILE_NAME.match(path.name) and _name_to_ms(path.name) is not None:
                    files.append(IndexFile.open(path, self._settings))
                else:
                    _log.warning("ignoring %s: not an index file name", path)
        except BaseException:
            for index_file in files:
                index_file.close()
            raise
        return files

    def _indexed_max_offset(self) -> ids.CommitLogOffset | None:
        for index_file in reversed(self._files):
            if not index_file.is_empty:
                return ids.CommitLogOffset(index_file.header.end_phy_offset)
        return None

    def _contains(self, key_hash: int, commit_log_offset: int) -> bool:
        for index_file in reversed(self._files):
            if index_file.is_empty:
                continue
            if index_file.contains(key_hash, commit_log_offset):
                return True
            if index_file.header.begin_phy_offset < commit_log_offset:
                return False
        return False

    def _writable_file(self) -> IndexFile:
        if self._files and not self._files[-1].is_full:
            return self._files[-1]
        carry_phy, carry_ms = 0, 0
        if self._files:
            previous = self._files[-1]
            previous.flush()
            carry_phy = previous.header.end_phy_offset
            carry_ms = previous.header.end_timestamp_ms
        path = self._directory / self._next_file_name()
        _log.info("creating index file %s", path)
        created = IndexFile.create(
            path, self._settings, carry_phy_offset=carry_phy, carry_timestamp_ms=carry_ms
        )
        self._files.append(created)
        return created

    def _next_file_name(self) -> str:
        now_ms = int(self._clock.now_ms())
        if self._files:
            last_ms = _name_to_ms(self._files[-1].path.name)
            if last_ms is not None:
                now_ms = max(now_ms, last_ms + 1)
        return _ms_to_name(now_ms)

    @staticmethod
    def _delete(index_file: IndexFile) -> None:
        index_file.close()
        index_file.path.unlink(missing_ok=True)


def _ms_to_name(epoch_ms: int) -> str:
    """``yyyyMMddHHmmssSSS`` in UTC for ``epoch_ms`` (RocketMQ ``timeMillisToHumanString``)."""
    seconds, millis = divmod(epoch_ms, _SECOND_MS)
    return time.strftime(_NAME_TIME_FORMAT, time.gmtime(seconds)) + f"{millis:03d}"


def _name_to_ms(name: str) -> int | None:
    """The UTC epoch ms a file name encodes, or ``None`` if it is not a valid time."""
    try:
        parsed = time.strptime(name[:14], _NAME_TIME_FORMAT)
    except ValueError:
        return None
    return calendar.timegm(parsed) * _SECOND_MS + int(name[14:])


def _preallocate(fd: int, size_bytes: int) -> None:
    """Reserve ``size_bytes`` on disk for ``fd`` so writes through the mapping cannot hit ENOSPC
    (which would kill the process with SIGBUS); falls back to a sparse file where the file
    system cannot reserve space."""
    try:
        os.posix_fallocate(fd, 0, size_bytes)
    except OSError as error:
        if error.errno not in (errno.EOPNOTSUPP, errno.EINVAL):
            raise
        os.ftruncate(fd, size_bytes)
