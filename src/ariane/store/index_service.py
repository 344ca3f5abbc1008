"""Query by key: RocketMQ's ``IndexService``, the ordered set of IndexFiles of one store.

The store's dispatcher feeds every message's keys (``topic#KEY`` for each of its KEYS and
``topic#UNIQ_KEY`` for its message id) with the message's commit-log offset and store time;
``IndexService.query`` answers the commit-log offsets of the messages that may carry a key,
newest first. Hash collisions are expected: callers read each message and check its keys.
``MessageStore`` owns the service: it opens it, feeds it, flushes it before each checkpoint,
truncates it to the recovered CommitLog end and deletes its files with the CommitLog's.

Invariants:

- Files live in one directory (``<store root>/index``), named by creation time in UTC as
  ``yyyyMMddHHmmssSSS`` (RocketMQ's format; RocketMQ uses local time). Names strictly increase
  in creation order, and each file indexes commit-log offsets after those of the file before.
- Every byte goes through the store's ``FileLayer`` (creation, mapping, deletion), so the
  in-memory crash model reaches the index.
- No entry at or past the CommitLog's end survives recovery (``truncate_after``): a key never
  points at a record that a cut removed, and offsets reused after the cut are indexed again.
- Re-feeding after recovery is harmless: ``put`` ignores a message below the highest indexed
  offset, and at that offset adds only the keys not already there.
- A file found cut short (``index_file.cut_short_begin_offset``) is deleted at open with every
  newer file, and ``damaged_from`` says where the store re-indexes from
  (``index_repair.repair_on_start``); a file of another geometry is refused (settings changed).
"""

from __future__ import annotations

import calendar
import logging
import pathlib
import re
import threading
import time
from collections.abc import Sequence

from ariane.common import clock, ids
from ariane.store import file_layer, index_codec, index_file

_log = logging.getLogger(__name__)

INDEX_DIR_NAME = index_file.INDEX_DIR_NAME
"""Name of the index directory under the store root."""

_FILE_NAME = re.compile(r"^\d{17}$")
_NAME_TIME_FORMAT = "%Y%m%d%H%M%S"
_SECOND_MS = 1000


class IndexService:
    """All index files of a store, oldest first (RocketMQ ``IndexService``); thread-safe.

    Args:
        directory: the index directory, normally ``<store root>/INDEX_DIR_NAME``; created if
            missing. Existing files are opened; leftover temporary files from a crash during
            file creation are removed.
        settings: file geometry and query limits.
        clock: names new files by its wall time.
        layer: the store's file layer (default: the real file system).

    Raises:
        IndexFileError: if an existing file does not match ``settings``.
        OSError: if the directory or a file cannot be read.
    """

    def __init__(
        self,
        directory: pathlib.Path,
        settings: index_file.IndexSettings,
        *,
        clock: clock.Clock,
        layer: file_layer.FileLayer | None = None,
    ) -> None:
        self._directory = directory
        self._layer: file_layer.FileLayer = layer or file_layer.OsFileLayer()
        self._settings = settings
        self._clock = clock
        self._lock = threading.Lock()
        self._closed = False
        self._layer.make_dirs(directory)
        self.damaged_from: ids.CommitLogOffset | None = None
        """Set when damaged files were dropped: the CommitLog offset to re-index from."""
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
            for ifile in reversed(self._files):
                if len(found) >= limit:
                    break
                if ifile.is_empty:
                    continue
                if ifile.time_overlaps(begin_ms, end_ms):
                    ifile.select(
                        key_hash, max_count=limit, begin_ms=begin_ms, end_ms=end_ms, into=found
                    )
                if ifile.header.begin_timestamp_ms < begin_ms:
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
            for ifile in self._files:
                ifile.flush()
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
            for ifile in self._files[:-1]:
                if ifile.header.end_phy_offset >= commit_log_offset:
                    break
                _log.info("deleting expired index file %s", ifile.path)
                self._delete(ifile)
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
                for ifile in self._files:
                    ifile.flush()
            finally:
                for ifile in self._files:
                    ifile.close()

    def _open_files(self) -> list[index_file.IndexFile]:
        files: list[index_file.IndexFile] = []
        layer = self._layer
        try:
            for name in self._layer.remove_temporaries(self._directory):
                _log.warning("removed %s left by a crash during file creation", name)
            names = []
            for name in self._layer.list_dir(self._directory):
                if _FILE_NAME.match(name) and _name_to_ms(name) is not None:
                    names.append(name)
                else:
                    _log.warning("ignoring %s: not an index file name", self._directory / name)
            for position, name in enumerate(names):
                path = self._directory / name
                try:
                    files.append(index_file.IndexFile.open(path, self._settings, layer=layer))
                except index_file.IndexFileError:
                    begin = index_file.cut_short_begin_offset(path, self._settings, layer=layer)
                    if begin is None:
                        raise
                    self._drop_damaged(names[position:], begin, files)
                    break
        except BaseException:
            for ifile in files:
                ifile.close()
            raise
        return files

    def _drop_damaged(self, names: list[str], begin: int, kept: list[index_file.IndexFile]) -> None:
        """Delete the damaged file (``names[0]``) and every newer one; re-index from its begin
        (from the end of the file before it when its own begin is unknown)."""
        floor = kept[-1].header.end_phy_offset if kept else 0
        _log.error(
            "index file %s is cut short (damaged): deleting it and the %d newer; the keys of "
            "the CommitLog from offset %d are indexed again",
            self._directory / names[0],
            len(names) - 1,
            max(begin, floor) if begin else floor,
        )
        for name in names:
            self._layer.remove(self._directory / name)
        self.damaged_from = ids.CommitLogOffset(max(begin, floor) if begin else floor)

    def newest_entries(self, count: int) -> list[index_codec.IndexEntry]:
        """Up to ``count`` of the newest entries of the newest non-empty file, newest first."""
        with self._lock:
            for ifile in reversed(self._files):
                if not ifile.is_empty:
                    return ifile.newest_entries(count)
            return []

    def drop_newest_file(self) -> ids.CommitLogOffset:
        """Delete the newest non-empty file (damaged: ``index_repair``) and any newer empty
        one; returns the CommitLog offset to re-index from (its begin offset).

        Raises:
            OSError: if a file cannot be deleted.
        """
        with self._lock:
            begin = 0
            while self._files:
                doomed = self._files.pop()
                begin = doomed.header.begin_phy_offset
                _log.error("index file %s is damaged: deleted, to be rebuilt", doomed.path)
                self._delete(doomed)
                if not doomed.is_empty:
                    break
            self._max_offset = self._indexed_max_offset()
            floor = self._max_offset or 0
            return ids.CommitLogOffset(max(begin, floor))

    def _indexed_max_offset(self) -> ids.CommitLogOffset | None:
        for ifile in reversed(self._files):
            if not ifile.is_empty:
                return ids.CommitLogOffset(ifile.header.end_phy_offset)
        return None

    def _contains(self, key_hash: int, commit_log_offset: int) -> bool:
        for ifile in reversed(self._files):
            if ifile.is_empty:
                continue
            if ifile.contains(key_hash, commit_log_offset):
                return True
            if ifile.header.begin_phy_offset < commit_log_offset:
                return False
        return False

    def _writable_file(self) -> index_file.IndexFile:
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
        created = index_file.IndexFile.create(
            path,
            self._settings,
            carry_phy_offset=carry_phy,
            carry_timestamp_ms=carry_ms,
            layer=self._layer,
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

    def _delete(self, doomed: index_file.IndexFile) -> None:
        doomed.close()
        self._layer.remove(doomed.path)


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
