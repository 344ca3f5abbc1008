"""Retention plans delete the right commit-log segments and gate writes on the disk watermarks."""

from __future__ import annotations

import pathlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ariane.common import ids
from ariane.store import retention

NOW_MS = 1_700_000_000_000
DAY_MS = 24 * retention.HOUR_MS
DEFAULTS = retention.RetentionSettings()
DELETE_HOUR = 4
OTHER_HOUR = 13


def _segments(*ages_days: float) -> list[retention.SegmentInfo]:
    """Segments oldest first, 100 bytes each, last written ``ages_days`` ago."""
    return [
        retention.SegmentInfo(
            start_offset=ids.CommitLogOffset(n * 100),
            size_bytes=100,
            last_modified_ms=int(NOW_MS - age * DAY_MS),
        )
        for n, age in enumerate(ages_days)
    ]


def _plan(
    segments: list[retention.SegmentInfo],
    *,
    hour: int = OTHER_HOUR,
    ratio: float = 0.5,
    config: retention.RetentionSettings = DEFAULTS,
    manual: bool = False,
) -> retention.RetentionPlan:
    return retention.plan(NOW_MS, hour, segments, ratio, config, manual=manual)


def _deleted(result: retention.RetentionPlan) -> list[int]:
    return [segment.start_offset for segment in result.delete]


def test_expired_segments_go_at_the_delete_hour() -> None:
    """At 04h, segments older than 72 h are deleted oldest first, up to the first unexpired one."""
    result = _plan(_segments(5, 4, 3.1, 2, 4, 0), hour=DELETE_HOUR)
    assert _deleted(result) == [0, 100, 200]
    assert result.triggers == {retention.Trigger.DELETE_HOUR}
    assert result.stop_reason is retention.StopReason.NEXT_NOT_EXPIRED
    assert not result.forced and not result.reject_writes
    assert result.min_offset_after == 300
    assert result.delete_bytes == 300
    assert "delete 3 segment(s)" in result.describe()


def test_nothing_goes_at_other_hours_with_room_on_disk() -> None:
    """Outside delete_when and below 75 % nothing is deleted, however old."""
    result = _plan(_segments(30, 20, 10, 0), hour=OTHER_HOUR, ratio=0.74)
    assert result.delete == ()
    assert result.triggers == frozenset()
    assert result.stop_reason is retention.StopReason.NOT_TRIGGERED
    assert result.disk_state is retention.DiskState.OK


def test_several_delete_hours_are_honoured() -> None:
    """``delete_when`` may list several hours separated by ``;``."""
    config = retention.RetentionSettings(delete_when="04; 16")
    assert config.delete_hours == {4, 16}
    assert _deleted(_plan(_segments(5, 0), hour=16, config=config)) == [0]
    assert _deleted(_plan(_segments(5, 0), hour=15, config=config)) == []


def test_above_max_used_expired_segments_go_at_any_hour() -> None:
    """At 75 % usage expired segments are deleted at any hour, unexpired ones kept."""
    result = _plan(_segments(5, 4, 1, 0), hour=OTHER_HOUR, ratio=0.75)
    assert _deleted(result) == [0, 100]
    assert result.triggers == {retention.Trigger.DISK_ABOVE_MAX_USED}
    assert result.disk_state is retention.DiskState.ABOVE_MAX_USED
    assert not result.forced


def test_above_clean_forcibly_unexpired_segments_go_too() -> None:
    """At 85 % the oldest segments go even if unexpired; writes still pass."""
    result = _plan(_segments(1, 0.5, 0.1, 0), ratio=0.85)
    assert _deleted(result) == [0, 100, 200]
    assert result.forced
    assert retention.Trigger.DISK_FORCED in result.triggers
    assert result.stop_reason is retention.StopReason.ONLY_NEWEST_LEFT
    assert not result.reject_writes
    assert result.disk_state is retention.DiskState.ABOVE_CLEAN_FORCIBLY


def test_forced_cleaning_can_be_disabled() -> None:
    """Without clean_file_forcibly_enabled a nearly full disk only loses expired segments."""
    config = retention.RetentionSettings(clean_file_forcibly_enabled=False)
    result = _plan(_segments(4, 1, 0), ratio=0.95, config=config)
    assert _deleted(result) == [0]
    assert not result.forced
    assert result.reject_writes


def test_writes_are_rejected_at_the_warning_level_and_resume_below_it() -> None:
    """At 90 % writes are refused; as soon as usage falls below 90 % they are accepted again."""
    segments = _segments(1, 0)
    full = _plan(segments, ratio=0.90)
    assert full.reject_writes and full.forced
    assert full.disk_state is retention.DiskState.FULL
    assert "reject writes True" in full.describe()
    freed = _plan(segments, ratio=0.8999)
    assert not freed.reject_writes
    assert freed.disk_state is retention.DiskState.ABOVE_CLEAN_FORCIBLY
    assert not _plan(segments, ratio=0.10).reject_writes


def test_batch_max_bounds_one_run() -> None:
    """One plan deletes at most delete_file_batch_max segments; the next run continues."""
    config = retention.RetentionSettings(delete_file_batch_max=2)
    result = _plan(_segments(9, 8, 7, 6, 0), hour=DELETE_HOUR, config=config)
    assert _deleted(result) == [0, 100]
    assert result.stop_reason is retention.StopReason.BATCH_MAX
    next_run = _plan(list(result.kept), hour=DELETE_HOUR, config=config)
    assert _deleted(next_run) == [200, 300]


def test_newest_segment_is_never_deleted() -> None:
    """Even forced, expired and manual, the newest segment (being written) stays."""
    result = _plan(_segments(100, 90), hour=DELETE_HOUR, ratio=1.0, manual=True)
    assert _deleted(result) == [0]
    assert [s.start_offset for s in result.kept] == [100]
    assert _plan(_segments(100), hour=DELETE_HOUR, ratio=1.0).delete == ()
    empty = _plan([], hour=DELETE_HOUR, ratio=1.0)
    assert empty.delete == () and empty.min_offset_after is None
    assert empty.stop_reason is retention.StopReason.ONLY_NEWEST_LEFT


def test_manual_request_deletes_expired_segments() -> None:
    """An operator's request triggers a run outside the delete hour (expired segments only)."""
    result = _plan(_segments(5, 1, 0), manual=True)
    assert _deleted(result) == [0]
    assert result.triggers == {retention.Trigger.MANUAL}


def test_segment_order_does_not_matter() -> None:
    """Segments given in any order are planned by start offset."""
    segments = _segments(9, 8, 0)
    assert _deleted(_plan(segments[::-1], hour=DELETE_HOUR)) == [0, 100]


def test_ratios_are_clamped_and_bad_settings_refused() -> None:
    """Watermarks are clamped to RocketMQ's ranges; out-of-range values raise ValueError."""
    clamped = retention.RetentionSettings(
        disk_max_used_space_ratio=0.99,
        disk_space_clean_forcibly_ratio=0.95,
        disk_space_warning_level_ratio=0.10,
    )
    assert clamped.disk_max_used_space_ratio == 0.95
    assert clamped.disk_space_clean_forcibly_ratio == 0.85
    assert clamped.disk_space_warning_level_ratio == 0.35
    assert (
        retention.RetentionSettings(
            disk_space_clean_forcibly_ratio=0.1
        ).disk_space_clean_forcibly_ratio
        == 0.30
    )
    for bad in (
        {"disk_max_used_space_ratio": 1.5},
        {"disk_space_warning_level_ratio": float("nan")},
        {"delete_when": "25"},
        {"delete_when": ""},
        {"delete_when": "4;x"},
        {"file_reserved_hours": 0},
        {"delete_file_batch_max": 0},
        {"clean_resource_interval_ms": 10},
    ):
        with pytest.raises(ValueError):
            retention.RetentionSettings(**bad)


def test_disk_probe_reports_used_over_usable_capacity(tmp_path: pathlib.Path) -> None:
    """The probe divides used bytes by used plus free bytes, and refuses a zero-size file system."""
    assert retention.disk_used_ratio(tmp_path, usage=lambda _p: (1000, 600, 300)) == 600 / 900
    with pytest.raises(OSError, match="no capacity"):
        retention.disk_used_ratio(tmp_path, usage=lambda _p: (0, 0, 0))
    real = retention.disk_used_ratio(tmp_path)
    assert 0.0 <= real <= 1.0
    with pytest.raises(OSError):
        retention.disk_used_ratio(tmp_path / "missing")


SEGMENT_AGES = st.lists(st.floats(min_value=0, max_value=10, allow_nan=False), max_size=15)


@settings(max_examples=200, deadline=None)
@given(
    ages=SEGMENT_AGES,
    hour=st.integers(0, 23),
    ratio=st.floats(min_value=0.0, max_value=1.0),
    batch=st.integers(1, 5),
    forcibly_enabled=st.booleans(),
    manual=st.booleans(),
)
def test_plan_never_deletes_the_newest_nor_skips_an_older_segment(
    ages: list[float],
    hour: int,
    ratio: float,
    batch: int,
    forcibly_enabled: bool,
    manual: bool,
) -> None:
    """Any plan deletes an oldest-first prefix, never the newest, bounded, expired unless forced."""
    config = retention.RetentionSettings(
        delete_file_batch_max=batch, clean_file_forcibly_enabled=forcibly_enabled
    )
    segments = _segments(*ages)
    result = _plan(segments, hour=hour, ratio=ratio, config=config, manual=manual)
    deleted = _deleted(result)
    assert deleted == [s.start_offset for s in segments[: len(deleted)]]
    assert list(result.delete) + list(result.kept) == segments
    if segments:
        assert segments[-1] not in result.delete
    assert len(deleted) <= batch
    if not result.triggers:
        assert deleted == []
    if not result.forced:
        assert all(NOW_MS - s.last_modified_ms >= config.file_reserved_ms for s in result.delete)
    assert result.reject_writes == (ratio >= config.disk_space_warning_level_ratio)
