"""Query by key: RocketMQ's IndexFile, one memory-mapped hash file (``index_service`` owns them).

A file maps key hashes to the commit-log offsets of the messages carrying them (hash slots
heading chains of entries); the byte layout lives in ``index_codec``. The file is created and
mapped through the store's ``FileLayer``, never with ``os``/``mmap`` directly.

Invariants:

- A file appears under its final name only fully allocated and with a valid header
  (``FileLayer.create_file``: a hidden temporary file, preallocated, synced, renamed; the
  header is written and synced before the file is mapped).
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

import dataclasses
import logging
import pathlib
import re
import shutil
from collections.abc import Callable, Iterator

from ariane.common import ids, limits
from ariane.store import file_layer, index_codec

_log = logging.getLogger(__name__)

INDEX_DIR_NAME = "index"
"""Name of the index directory under the store root (RocketMQ ``StorePathConfigHelper``)."""

FILE_SIZE_BYTES_MAX = 2**31 - 1
"""Largest index file, in bytes: RocketMQ sizes index files with a Java ``int``."""

_SECOND_MS = 1000

INDEX_SHARE_OF_VOLUME_MAX = 0.10
"""Largest share of the store's volume one IndexFile may take. Index files are preallocated
whole (RocketMQ's default geometry is a 420 MB file), so on a small volume the configured
geometry is scaled down to this share (``settings_for_volume``)."""

INDEX_COUNT_MIN = 10_000
"""Fewest entries of an IndexFile scaled to a small volume (a file of about 210 KB)."""

DiskUsageFn = Callable[[pathlib.Path], tuple[int, int, int]]
"""``shutil.disk_usage``'s shape (``os.statvfs``): ``(total, used, free)`` bytes at a path."""

_FILE_NAME = re.compile(r"^\d{17}$")


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
    shorter collision chains; each costs 4 bytes of file. On a volume where a file of the
    configured geometry exceeds ``INDEX_SHARE_OF_VOLUME_MAX`` (10 %) of it, the broker scales
    this and ``index_count_max`` down together (``settings_for_volume``)."""

    index_count_max: int = 20_000_000
    """Entry capacity per file, counting the unused entry 0 (RocketMQ ``maxIndexNum``),
    2 .. 100,000,000; a file holds ``index_count_max - 1`` keys, then a new file is created.
    Each entry costs 20 bytes of file. Scaled down on a small volume to at most 10 % of it,
    never below ``INDEX_COUNT_MIN`` (``settings_for_volume``)."""

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


def settings_for_volume(
    root: pathlib.Path, config: IndexSettings, *, usage: DiskUsageFn = shutil.disk_usage
) -> IndexSettings:
    """``config`` with its geometry fitted to the volume holding the store root ``root``.

    RocketMQ's 420 MB default file cannot be preallocated on a small volume (every index write
    then failed). Rule, decided once at open: existing files under ``root / INDEX_DIR_NAME``
    keep their geometry when it is ``config``'s or a scaled-down version of it (the geometry is
    part of the on-disk layout); otherwise ``config`` when one file takes at most
    ``INDEX_SHARE_OF_VOLUME_MAX`` of the volume, else both counts scaled by the same factor
    (the slots-per-entry ratio, hence chain lengths, unchanged) to the largest file within
    that share, with at least ``INDEX_COUNT_MIN`` entries (or ``config``'s count, if fewer).
    A scaled geometry is logged once, as a warning naming the settings.

    Args:
        root: the store root (it exists).
        config: the configured index settings.
        usage: the ``shutil.disk_usage`` seam (``os.statvfs``), for tests.

    Raises:
        OSError: the volume cannot be probed.
    """
    _total, used, free = usage(root)
    volume_bytes = used + free
    existing = _existing_file_bytes(root / INDEX_DIR_NAME)
    if existing is not None:
        fitted = _geometry_of_size(config, existing)
        if fitted is not None:
            return fitted
    share = int(volume_bytes * INDEX_SHARE_OF_VOLUME_MAX)
    if config.file_size_bytes <= share:
        return config
    floor = min(INDEX_COUNT_MIN, config.index_count_max)
    per_entry = 20 + 4 * config.hash_slot_count / config.index_count_max
    count = max(floor, min(config.index_count_max, int(share / per_entry)))
    while count > floor and _scaled(config, count).file_size_bytes > share:
        count -= 1
    fitted = _scaled(config, count)
    _log.warning(
        "IndexFiles of %d bytes (index.hash_slot_count=%d, index.index_count_max=%d) instead of "
        "%d: the volume holding %s has %d bytes and one index file takes at most %d%% of it; "
        "give the store a larger volume or set both settings to silence this",
        fitted.file_size_bytes,
        fitted.hash_slot_count,
        fitted.index_count_max,
        config.file_size_bytes,
        root,
        volume_bytes,
        round(INDEX_SHARE_OF_VOLUME_MAX * 100),
    )
    return fitted


def _scaled(config: IndexSettings, index_count_max: int) -> IndexSettings:
    """``config`` with ``index_count_max`` entries and slots in the configured proportion."""
    slots = max(1, index_count_max * config.hash_slot_count // config.index_count_max)
    return dataclasses.replace(config, hash_slot_count=slots, index_count_max=index_count_max)


def _geometry_of_size(config: IndexSettings, size_bytes: int) -> IndexSettings | None:
    """The scaled ``config`` (``_scaled``) whose files are ``size_bytes``, if there is one.

    The file size strictly increases with the entry count, so a binary search finds it.
    """
    low, high = 2, config.index_count_max
    while low <= high:
        middle = (low + high) // 2
        candidate = _scaled(config, middle)
        if candidate.file_size_bytes == size_bytes:
            return candidate
        if candidate.file_size_bytes < size_bytes:
            low = middle + 1
        else:
            high = middle - 1
    return None


def cut_short_begin_offset(
    path: pathlib.Path, settings: IndexSettings, *, layer: file_layer.FileLayer
) -> int | None:
    """Where the entries of a file shorter than ``settings``' geometry begin, if the file was
    written under that geometry and then cut short (damaged: the store re-indexes from there),
    or ``None`` if it was written under another geometry (the settings changed: refused).

    The evidence is the file's first entry: under the geometry it was written with, entry 1
    sits right after the slots, heads its chain (``prev_index`` 0), has time diff 0 and holds
    the header's ``begin_phy_offset``. A file too short for its header, or with no entry yet,
    lost nothing that cannot be re-indexed and counts as cut short (from offset 0: the store
    starts from the file before it or the CommitLog's start).

    Raises:
        OSError: if the file cannot be read.
    """
    if layer.file_size(path) >= settings.file_size_bytes:
        return None
    handle = layer.open_file(path)
    try:
        head = handle.pread(index_codec.HEADER_SIZE_BYTES, 0)
        if len(head) < index_codec.HEADER_SIZE_BYTES:
            return 0
        header = index_codec.decode_header(head)
        if header.index_count <= 1:
            return max(0, header.begin_phy_offset)
        position = index_codec.entry_position(settings.hash_slot_count, 1)
        raw = handle.pread(index_codec.ENTRY_SIZE_BYTES, position)
    finally:
        handle.close()
    if len(raw) < index_codec.ENTRY_SIZE_BYTES:
        return max(0, header.begin_phy_offset)
    first = index_codec.decode_entry(raw, 0)
    ours = (first.commit_log_offset, first.time_diff_s, first.prev_index) == (
        header.begin_phy_offset,
        0,
        index_codec.NO_ENTRY,
    )
    return header.begin_phy_offset if ours and first.key_hash else None


def _existing_file_bytes(directory: pathlib.Path) -> int | None:
    """The size of the oldest index file in ``directory`` (``None`` if there is none)."""
    try:
        names = sorted(n for n in directory.iterdir() if _FILE_NAME.match(n.name))
    except FileNotFoundError:
        return None
    return names[0].stat().st_size if names else None


_INDEX_COUNT = 5
"""Position of ``index_count`` in ``IndexFile._fields`` (``IndexHeader`` field order)."""


class IndexFile:
    """One memory-mapped index file (RocketMQ ``IndexFile``); not thread-safe on its own.

    Build with ``IndexFile.create`` or ``IndexFile.open``; ``IndexService`` owns the files and
    serialises access to them.
    """

    def __init__(
        self, path: pathlib.Path, mapping: file_layer.MappedBuffer, settings: IndexSettings
    ) -> None:
        self._path = path
        self._mapping = mapping
        self._map = mapping.data
        self._closed = False
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
        layer: file_layer.FileLayer,
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
        handle = layer.create_file(path, settings.file_size_bytes)
        try:
            handle.pwrite(index_codec.encode_header(header), 0)
            handle.sync()
        finally:
            handle.close()
        return cls.open(path, settings, layer=layer)

    @classmethod
    def open(
        cls, path: pathlib.Path, settings: IndexSettings, *, layer: file_layer.FileLayer
    ) -> IndexFile:
        """Map the existing file at ``path``.

        Raises:
            IndexFileError: if the file's size is not ``settings.file_size_bytes`` (the
                settings changed since it was written).
            OSError: if the file cannot be opened or mapped.
        """
        size = layer.file_size(path)
        if size != settings.file_size_bytes:
            raise IndexFileError(
                f"{path} is {size} bytes but the index settings give "
                f"{settings.file_size_bytes}; hash_slot_count or index_count_max changed"
            )
        return cls(path, layer.map_file(path), settings)

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
            self._mapping.flush()
            self._dirty = False

    def close(self) -> None:
        """Flush and unmap the file; idempotent."""
        if not self._closed:
            self._closed = True
            try:
                self.flush()
            finally:
                self._mapping.close()

    def __repr__(self) -> str:
        return f"IndexFile({self._path.name}, index_count={self.header.index_count})"

    def newest_entries(self, count: int) -> list[index_codec.IndexEntry]:
        """Up to ``count`` of the newest counted entries, newest first."""
        newest = self._fields[_INDEX_COUNT] - 1
        return [self._entry(i) for i in range(newest, max(0, newest - count), -1)]

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
