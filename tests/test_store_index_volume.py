"""The key index on a small volume: IndexFiles sized to it, and a failing index write costs
one log line per interval, never the message."""

from __future__ import annotations

import errno
import logging
import pathlib
from collections.abc import Sequence

import pytest

import store_testing
from ariane.common import ids, log_limits
from ariane.store import index_file

MIB = 1024 * 1024
GIB = 1024 * MIB


def _volume(total_bytes: int) -> index_file.DiskUsageFn:
    """A ``shutil.disk_usage`` stand-in: a volume of ``total_bytes``, a quarter used."""
    return lambda _path: (total_bytes, total_bytes // 4, total_bytes - total_bytes // 4)


def test_index_file_size_follows_the_volume(tmp_path: pathlib.Path) -> None:
    """IndexFiles take at most 10 % of a small volume, never below a minimum, RocketMQ's defaults
    on a large one, and keep the geometry of existing files when the volume grows."""
    default = index_file.IndexSettings()
    assert index_file.settings_for_volume(tmp_path, default, usage=_volume(100 * GIB)) == default

    small = index_file.settings_for_volume(tmp_path, default, usage=_volume(256 * MIB))
    share = 256 * MIB * index_file.INDEX_SHARE_OF_VOLUME_MAX
    assert share * 0.95 <= small.file_size_bytes <= share
    assert small.query_results_max == default.query_results_max
    ratio = default.index_count_max // default.hash_slot_count
    assert small.index_count_max // small.hash_slot_count == ratio  # chains stay as short

    tiny = index_file.settings_for_volume(tmp_path, default, usage=_volume(MIB))
    assert tiny.index_count_max == index_file.INDEX_COUNT_MIN

    # Files written on the small volume keep their geometry after it grows (no layout error).
    (tmp_path / index_file.INDEX_DIR_NAME).mkdir()
    existing = tmp_path / index_file.INDEX_DIR_NAME / "20260101000000000"
    existing.write_bytes(b"\0" * small.file_size_bytes)
    grown = index_file.settings_for_volume(tmp_path, default, usage=_volume(100 * GIB))
    assert grown == small


def _index_lines(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    """The warnings and errors logged so far that mention the index."""
    return [r for r in caplog.records if "index" in r.getMessage() and r.levelno >= logging.WARNING]


def test_failing_index_writes_log_one_line_per_interval_and_keep_the_messages(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Index writes that raise OSError log one line (no traceback) per interval with the count
    of suppressed ones, are counted in the stats, and every message stays stored and readable."""
    mem = store_testing.MemoryStore.open()
    store = mem.store
    now_s = [0.0]
    store.dispatcher.index_failure_log = log_limits.LineLimiter(
        key_interval_s=60.0, clock=lambda: now_s[0]
    )

    def full_disk(_messages: Sequence[tuple[Sequence[str], ids.CommitLogOffset, int]]) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(store.key_index, "put_many", full_disk)
    caplog.set_level(logging.INFO)
    for n in range(20):
        assert store.put_message(store_testing.request(keys=f"k{n}")).status.is_stored
    lines = _index_lines(caplog)
    assert len(lines) == 1, [r.getMessage() for r in lines]
    assert lines[0].exc_info is None
    now_s[0] = 61.0
    assert store.put_message(store_testing.request(keys="k20")).status.is_stored
    lines = _index_lines(caplog)
    assert len(lines) == 2
    assert "19 more" in lines[1].getMessage()
    assert all(r.exc_info is None for r in caplog.records if r.levelno >= logging.WARNING)

    assert store.stats().index_write_failure_count == 21
    read = store_testing.read(store)
    assert [m.message.keys for m in read.messages] == [(f"k{n}",) for n in range(21)]
    store.close()
