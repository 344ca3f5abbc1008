"""Retention plans delete the right commit-log segments and gate writes on the disk watermarks.

Own cluster: the broker runs on a small volume whose disk watermarks are the subject."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import pathlib
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import admin_testing
import live_testing
import store_testing
from ariane import client, dev
from ariane.broker import assembly, runtime
from ariane.broker.tables import topic_config
from ariane.common import clock, errors, ids, message
from ariane.store import clean_service, commit_log, retention
from ariane.store import settings as store_settings

NOW_MS = 1_700_000_000_000
DAY_MS = 24 * retention.HOUR_MS
DEFAULTS = retention.RetentionSettings()
DELETE_HOUR = 4
OTHER_HOUR = 13


def _segments(*ages_days: float) -> list[retention.SegmentInfo]:
    """Segments oldest first, 100 bytes each, last written ``ages_days`` ago."""
    return [
        retention.SegmentInfo(
            start_offset=n * 100,
            size_bytes=100,
            modified_ms=int(NOW_MS - age * DAY_MS),
            path=pathlib.Path(f"/commitlog/{n * 100:020d}"),
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
        assert all(NOW_MS - s.modified_ms >= config.file_reserved_ms for s in result.delete)
    assert result.reject_writes == (ratio >= config.disk_space_warning_level_ratio)


def test_forced_cleaning_keeps_segments_a_subscribed_group_has_not_consumed() -> None:
    """Above the warning level, forced deletion stops before the segment holding the lowest
    unconsumed message and writes are refused instead; with force_delete_unconsumed it goes on."""
    segments = _segments(1, 0.5, 0.1, 0)
    kept = _plan_unconsumed(segments, unconsumed_from=150, config=DEFAULTS)
    assert _deleted(kept) == [0]
    assert kept.stop_reason is retention.StopReason.UNCONSUMED
    assert kept.forced and kept.reject_writes
    assert kept.deletes_unconsumed == ()
    forcing = retention.RetentionSettings(force_delete_unconsumed=True)
    forced = _plan_unconsumed(segments, unconsumed_from=150, config=forcing)
    assert _deleted(forced) == [0, 100, 200]
    assert [s.start_offset for s in forced.deletes_unconsumed] == [100, 200]
    everything_consumed = _plan_unconsumed(segments, unconsumed_from=None, config=DEFAULTS)
    assert _deleted(everything_consumed) == [0, 100, 200]


def test_expired_segments_go_by_age_even_if_unconsumed() -> None:
    """Deletion by age ignores consumers, as RocketMQ's file_reserved_hours does."""
    result = _plan(_segments(5, 4, 0), hour=DELETE_HOUR, ratio=0.5)
    with_group = retention.plan(
        NOW_MS,
        DELETE_HOUR,
        _segments(5, 4, 0),
        0.5,
        DEFAULTS,
        unconsumed_from=ids.CommitLogOffset(0),
    )
    assert _deleted(with_group) == _deleted(result) == [0, 100]
    assert len(with_group.deletes_unconsumed) == 2


def _plan_unconsumed(
    segments: list[retention.SegmentInfo],
    *,
    unconsumed_from: int | None,
    config: retention.RetentionSettings,
) -> retention.RetentionPlan:
    offset = None if unconsumed_from is None else ids.CommitLogOffset(unconsumed_from)
    return retention.plan(NOW_MS, OTHER_HOUR, segments, 0.92, config, unconsumed_from=offset)


@settings(max_examples=200, deadline=None)
@given(
    ages=SEGMENT_AGES,
    ratio=st.floats(min_value=0.0, max_value=1.0),
    unconsumed_from=st.none() | st.integers(0, 1600),
    force=st.booleans(),
)
def test_forced_deletion_never_takes_unconsumed_data_unless_told(
    ages: list[float], ratio: float, unconsumed_from: int | None, force: bool
) -> None:
    """Every deleted segment holding unconsumed data has expired, unless the flag is set."""
    config = retention.RetentionSettings(force_delete_unconsumed=force)
    offset = None if unconsumed_from is None else ids.CommitLogOffset(unconsumed_from)
    result = retention.plan(
        NOW_MS, OTHER_HOUR, _segments(*ages), ratio, config, unconsumed_from=offset
    )
    if not force:
        assert all(
            NOW_MS - s.modified_ms >= config.file_reserved_ms for s in result.deletes_unconsumed
        )


MIB = 1024 * 1024
G, T, Q = ids.GroupName, ids.TopicName, ids.QueueId


def _fit(volume_mib: int, existing_mib: int | None = None) -> int:
    """The segment size, in MiB, for a 1 GiB setting and a 5 MiB largest record."""
    size = retention.segment_size_for_volume(
        configured_bytes=1024 * MIB,
        smallest_bytes=5 * MIB,
        volume_bytes=volume_mib * MIB,
        existing_bytes=None if existing_mib is None else existing_mib * MIB,
    )
    return size // MIB


def test_segments_are_sized_to_the_volume() -> None:
    """The configured size is kept where it fits in 10 % of the volume, shrunk (1 MiB aligned,
    never below the largest record) where it does not, and existing segments keep their size."""
    assert _fit(20_000) == 1024
    assert _fit(1000) == 100
    assert _fit(64) == 6
    assert _fit(30) == 5
    assert _fit(99_000, existing_mib=6) == 6
    with pytest.raises(retention.VolumeTooSmallError, match="message_size_bytes_max"):
        _fit(19)


def test_store_settings_follow_the_volume_and_its_segments(tmp_path: pathlib.Path) -> None:
    """The store settings get the fitted size; a segment already on disk fixes it."""
    config = store_settings.StoreSettings()
    small = retention.store_settings_for_volume(
        tmp_path, config, usage=lambda _p: (0, 0, 1000 * MIB)
    )
    assert small.commit_log_file_size_bytes == 100 * MIB
    big = retention.store_settings_for_volume(
        tmp_path, config, usage=lambda _p: (0, 0, 20_000 * MIB)
    )
    assert big is config
    (tmp_path / "commitlog").mkdir()
    (tmp_path / "commitlog" / ("0" * 20)).write_bytes(bytes(64 * 1024))
    kept = retention.store_settings_for_volume(
        tmp_path, config, usage=lambda _p: (0, 0, 20_000 * MIB)
    )
    assert kept.commit_log_file_size_bytes == 64 * 1024


def _runtime_with_messages(tmp_path: pathlib.Path, count: int) -> runtime.BrokerRuntime:
    """A broker runtime (64 KiB segments) holding ``count`` 8 KB messages in queue T-0."""
    broker = runtime.BrokerRuntime(admin_testing.tiny_settings(tmp_path), time=clock.SystemClock())
    requests = [
        admin_testing.append_request("T", body=bytes([n % 251]) * 8000) for n in range(count)
    ]
    assert all(r.status.is_stored for r in broker.store.put_messages_sync(requests))
    return broker


FULL_DISK = (100, 95, 5)


def _clean(
    broker: runtime.BrokerRuntime,
    policy: retention.RetentionSettings,
    disk_usage: retention.DiskUsageFn,
) -> retention.RetentionPlan:
    """One run of the store's retention with what the broker knows of its consumers."""
    cleaner = clean_service.CleanCommitLogService(
        broker.store,
        policy,
        clock=clock.SystemClock(),
        unconsumed=broker.unconsumed_positions,
        disk_usage=disk_usage,
    )
    return cleaner.run_once()


def test_broker_keeps_unconsumed_segments_on_a_full_disk(tmp_path: pathlib.Path) -> None:
    """A full disk rejects writes but deletes nothing a group still needs; with the flag it
    deletes, and the store's stats count the segments, bytes and unconsumed messages lost."""
    broker = _runtime_with_messages(tmp_path, 40)
    try:
        broker.offsets.commit(G("G"), T("T"), Q(0), ids.QueueOffset(2))
        before = len(broker.store.commit_log_segments())
        plan = _clean(broker, DEFAULTS, lambda _p: FULL_DISK)
        assert plan.stop_reason is retention.StopReason.UNCONSUMED and plan.delete == ()
        assert len(broker.store.commit_log_segments()) == before > 2
        assert broker.store.disk_full
        read = store_testing.read(broker.store, 2, max_count=100, max_bytes=1 << 30)
        assert len(read.messages) == 38
        forcing = retention.RetentionSettings(force_delete_unconsumed=True)
        _clean(broker, forcing, lambda _p: FULL_DISK)
        stats = broker.store.stats()
        assert stats.commit_log_segment_count == 1
        assert stats.forced_deleted_segment_count == before - 1
        assert stats.forced_deleted_bytes == (before - 1) * 64 * 1024
        lost = broker.store.min_queue_offset(store_testing.T, store_testing.Q0) - 2
        assert stats.unconsumed_deleted_message_count == lost > 20
    finally:
        broker.close()


def test_broker_deletes_topics_nobody_consumes_and_accepts_writes_once_space_frees(
    tmp_path: pathlib.Path,
) -> None:
    """Without a consuming group the full disk is cleaned as RocketMQ does (nothing counted as
    unconsumed), and writes resume as soon as usage drops below the warning level."""
    broker = _runtime_with_messages(tmp_path, 40)
    try:
        _clean(broker, DEFAULTS, lambda _p: FULL_DISK)
        stats = broker.store.stats()
        assert stats.commit_log_segment_count == 1 and stats.disk_full
        assert stats.unconsumed_deleted_message_count == 0
        _clean(broker, DEFAULTS, lambda _p: (100, 50, 50))
        assert not broker.store.disk_full
        put = broker.store.put_message(admin_testing.append_request("T"))
        assert put.status is commit_log.PutMessageStatus.PUT_OK
    finally:
        broker.close()


def test_no_room_for_a_segment_answers_the_disk_full_code_without_tracebacks(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """ENOSPC while creating a segment fails each request once with SERVICE_NOT_AVAILABLE and
    logs one warning without a traceback, however many requests fail."""
    mem = store_testing.MemoryStore.open(store_testing.tiny_settings())

    def no_space(path: pathlib.Path) -> None:
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    mem.layer.create_hook = no_space
    with caplog.at_level(logging.WARNING):
        for _ in range(20):
            results = mem.store.put_messages_sync(
                [store_testing.request(), store_testing.request()]
            )
            statuses = {r.status for r in results}
            assert statuses == {commit_log.PutMessageStatus.SERVICE_NOT_AVAILABLE}
    warnings = [r for r in caplog.records if "cannot allocate segment" in r.getMessage()]
    assert len(warnings) == 1 and warnings[0].exc_info is None
    assert not any(r.exc_info for r in caplog.records)
    mem.layer.create_hook = None
    assert mem.store.put_message(store_testing.request()).status.is_stored


VOLUME_BYTES = 64 * MIB
BROKER_TOML = """\
workers = 0
[store]
consume_queue_file_entries = 1000
[index]
hash_slot_count = 1000
index_count_max = 4000
[retention]
clean_resource_interval_ms = 200
"""
"""A broker on a small volume: the CommitLog segment size is left at its 1 GiB default."""


@contextlib.contextmanager
def _tmpfs(where: pathlib.Path) -> Iterator[pathlib.Path]:
    """A real 64 MiB file system (tmpfs; the tests run as root), unmounted afterwards."""
    where.mkdir()
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={VOLUME_BYTES}", "tmpfs", str(where)], check=True
    )
    try:
        yield where
    finally:
        subprocess.run(["umount", str(where)], check=True)


@contextlib.contextmanager
def _child(args: list[str], log: pathlib.Path, port: int) -> Iterator[None]:
    with log.open("ab") as out:
        proc = subprocess.Popen([sys.executable, "-m", "ariane", *args], stdout=out, stderr=out)
    try:
        dev.wait_until_listening("127.0.0.1", port, process=proc, timeout_s=30)
        yield
    finally:
        assert dev.stop_process(proc) == 0


def _segment_count(store: pathlib.Path) -> int:
    return sum(1 for p in (store / "commitlog").iterdir() if p.name.isdigit())


def _ballast(volume: pathlib.Path, ratio: float) -> pathlib.Path:
    """Fill ``volume`` up to ``ratio`` used with a file; returns it."""
    usage = shutil.disk_usage(volume)
    path = volume / "ballast"
    with path.open("wb") as out:
        out.write(bytes(max(0, int((usage.used + usage.free) * ratio) - usage.used)))
    return path


@pytest.mark.slow
def test_broker_on_a_small_volume_stores_and_never_drops_unconsumed_messages(
    tmp_path: pathlib.Path,
) -> None:
    """A real broker on a 64 MiB volume with default settings stores messages; when the disk
    fills it answers the disk-full code and deletes no segment a group still needs; once space
    frees writes resume and the group receives every message."""
    with _tmpfs(tmp_path / "volume") as volume, contextlib.ExitStack() as stack:
        (tmp_path / "broker.toml").write_text(BROKER_TOML)
        namesrv_port, broker_port = dev.free_port(), dev.free_port()
        namesrv = f"127.0.0.1:{namesrv_port}"
        stack.enter_context(
            _child(["namesrv", "--listen", namesrv], tmp_path / "namesrv.log", namesrv_port)
        )
        broker_args = ["broker", "--config", str(tmp_path / "broker.toml"), "--listen"]
        broker_args += [f"127.0.0.1:{broker_port}", "--namesrv", namesrv]
        broker_args += ["--store-dir", str(volume / "store")]
        stack.enter_context(_child(broker_args, tmp_path / "broker.log", broker_port))
        asyncio.run(_fill_and_drain(namesrv, volume))
    log = (tmp_path / "broker.log").read_text()
    assert "Traceback" not in log and "CommitLog segments of 6291456 bytes" in log


async def _fill_and_drain(namesrv: str, volume: pathlib.Path) -> None:
    bodies = [os.urandom(64 * 1024) for _ in range(200)]
    async with client.AdminClient(namesrv) as admin, client.Producer(namesrv) as producer:
        await live_testing.make_topic(admin, "small", message.MessageType.NORMAL)
        await admin.reset_offset("G", "small", client.ResetTarget.EARLIEST)
        sent = [await producer.send("small", body) for body in bodies]
        segments = _segment_count(volume / "store")
        assert segments >= 3
        ballast = _ballast(volume, 0.95)

        async def refused() -> bool:
            try:
                await producer.send("small", b"more")
            except errors.ArianeError as exc:
                assert exc.code is errors.Code.INTERNAL_SERVER_ERROR, exc
                return True
            return False

        await live_testing.eventually(refused)
        assert _segment_count(volume / "store") == segments
        ballast.unlink()

        async def accepted() -> bool:
            try:
                await producer.send("small", b"again")
            except errors.ArianeError:
                return False
            return True

        await live_testing.eventually(accepted)
    async with client.SimpleConsumer(namesrv, "G", "small") as consumer:
        got = await live_testing.drain(consumer, len(sent))
    received = {m.message_id for m in got}
    assert {r.message_id for r in sent} <= received


def test_per_topic_reserved_time_decides_expiry() -> None:
    """With ``reserved_ms_of``, a 2-hour-old segment expires when its topics keep 1 h, not
    when they keep 3 h (and nothing newer than a kept segment goes)."""
    segments = _segments(2 / 24, 2 / 24, 0)
    hours = {0: 1, 100: 3}

    def reserved_ms(segment: retention.SegmentInfo) -> int:
        return hours[segment.start_offset] * retention.HOUR_MS

    result = retention.plan(
        NOW_MS, DELETE_HOUR, segments, 0.5, DEFAULTS, reserved_ms_of=reserved_ms
    )
    assert _deleted(result) == [0]
    assert result.stop_reason is retention.StopReason.NEXT_NOT_EXPIRED


def test_topic_retention_hours_reach_the_clean_service(tmp_path: pathlib.Path) -> None:
    """A topic created with ``retention_hours`` 1 through the admin processor loses its
    segments 2 h later, while the segments holding a default-retention topic (72 h) stay:
    a segment goes only when every topic in it is past its own retention."""
    broker = runtime.BrokerRuntime(admin_testing.tiny_settings(tmp_path), time=clock.SystemClock())
    try:
        admin = assembly.admin_processor(broker)
        for name, hours in (("short", 1), ("long", topic_config.RETENTION_BROKER_DEFAULT)):
            admin.create_topic(topic_config.TopicConfig(T(name), retention_hours=hours))
        assert broker.topic_retention_hours() == {"short": 1}
        for topic in ("short", "long"):
            requests = [admin_testing.append_request(topic, body=b"x" * 8000) for _ in range(20)]
            assert all(r.status.is_stored for r in broker.store.put_messages_sync(requests))
        before = len(broker.store.commit_log_segments())
        later = clock.ManualClock(start_ms=int(time.time() * 1000) + 2 * retention.HOUR_MS)
        every_hour = retention.RetentionSettings(delete_when=";".join(map(str, range(24))))
        cleaner = clean_service.CleanCommitLogService(
            broker.store,
            every_hour,
            clock=later,
            unconsumed=broker.unconsumed_positions,
            disk_usage=lambda _p: (100, 50, 50),
            topic_retention_hours=broker.topic_retention_hours,
        )
        plan = cleaner.run_once()
        assert plan.stop_reason is retention.StopReason.NEXT_NOT_EXPIRED
        assert 0 < len(plan.delete) < before - 1
        assert broker.store.min_queue_offset(T("short"), Q(0)) > 0
        long_left = store_testing.read(
            broker.store, topic=T("long"), max_count=100, max_bytes=1 << 30
        )
        assert len(long_left.messages) == 20
    finally:
        broker.close()
