"""Commit-log retention and disk watermarks: RocketMQ's ``CleanCommitLogService`` as a policy.

``plan`` is pure: from the time, the local hour, the commit-log segments and the disk usage it
decides which segments to delete, whether deletion is forced, and whether writes must be
refused. The caller (a periodic service, every ``clean_resource_interval_ms``) carries the plan
out, then removes consume-queue and index files below ``RetentionPlan.min_offset_after``.
``disk_used_ratio`` is the probe, with ``shutil.disk_usage`` as an injectable seam.

Watermarks (ratios of the file system holding the commit log, checked with ``>=``)::

    used >= disk_max_used_space_ratio        (0.75)  delete expired segments at any hour
    used >= disk_space_clean_forcibly_ratio  (0.85)  delete even unexpired ones (forced)
    used >= disk_space_warning_level_ratio   (0.90)  disk full: reject writes, forced deletion

Invariants of every plan:

- the newest segment (highest start offset, the one being written) is never deleted;
- the deleted segments are the oldest ones, with no gap: a segment is never deleted while an
  older one is kept; at most ``delete_file_batch_max`` per plan;
- without force, only expired segments are deleted (last modified at least
  ``file_reserved_hours`` ago, or, with per-topic retention, the longest retention of the
  topics it holds: ``plan``'s ``reserved_ms_of``), and only when triggered (a ``delete_when``
  hour, the disk above ``disk_max_used_space_ratio``, or a manual request);
- forced deletion (of an unexpired segment) never takes a segment that still holds a message a
  subscribed consumer group has not consumed, unless ``force_delete_unconsumed`` is set: the
  caller passes ``unconsumed_from``, the lowest commit-log offset of such a message, and the
  plan stops before the segment holding it (``StopReason.UNCONSUMED``). RocketMQ deletes them
  (it lost 63,845 of 81,734 acknowledged, unconsumed messages on a full disk); Ariane rejects
  writes with the disk-full code instead until consumers catch up, segments expire or space
  frees. Which messages count as unconsumed is the caller's rule (the broker's: every group
  with a committed offset on the topic; a topic no group consumes protects nothing). Deletion
  by age is RocketMQ's: ``file_reserved_hours`` is the operator's retention contract, so a
  group that lags by more than that loses the expired messages, as in RocketMQ, and a stale
  group can never keep a broker read-only for longer than the retention period;
- ``reject_writes`` depends on the current usage alone, so writes resume as soon as usage falls
  below the warning level. RocketMQ keeps a sticky disk-full flag that could leave a broker
  read-only after space was freed (apache/rocketmq#2398).
"""

from __future__ import annotations

import dataclasses
import enum
import logging
import math
import pathlib
import shutil
from collections.abc import Callable, Sequence

from ariane.common import ids
from ariane.store import mapped_file, mapped_file_queue, message_codec
from ariane.store import settings as store_settings

_log = logging.getLogger(__name__)

HOUR_MS = 3_600_000
"""One hour, in milliseconds."""

SEGMENT_SHARE_OF_VOLUME_MAX = 0.10
"""Largest share of the store's volume one new CommitLog segment may take. Segments are
preallocated whole, so usage grows in steps of one segment; steps of at most 10 % let the
usage land between the clean-forcibly (85 %) and warning (90 %) watermarks, where retention can
still free space, instead of jumping from below 75 % straight to an allocation failure."""

SEGMENTS_PER_VOLUME_MIN = 4
"""A volume must hold this many of the smallest usable segments, or the broker refuses to start:
one being written, one to delete, and room for the watermarks in between."""

SEGMENT_SIZE_ALIGN_BYTES = 1024 * 1024
"""A segment sized to the volume is a multiple of this (1 MiB)."""
_PAGE_BYTES = 4096
"""A segment on disk sized neither as configured nor in pages was cut short, not laid out."""


class VolumeTooSmallError(OSError):
    """The store's volume cannot hold enough CommitLog segments of the smallest usable size
    (an ``OSError``: the store cannot be opened there; the broker exits with the message)."""


DiskUsageFn = Callable[[pathlib.Path], tuple[int, int, int]]
"""``shutil.disk_usage``'s shape: ``(total, used, free)`` bytes of the file system at a path."""


def parse_delete_when(text: str) -> frozenset[int]:
    """The hours of day in a RocketMQ ``deleteWhen`` value such as ``"04"`` or ``"04;16"``.

    Raises:
        ValueError: if a part is not an hour ``0 .. 23`` or there is none.
    """
    hours: set[int] = set()
    for part in text.split(";"):
        part = part.strip()
        if not (part.isdigit() and len(part) <= 2 and int(part) <= 23):
            raise ValueError(f"delete_when={text!r}: {part!r} is not an hour 0..23")
        hours.add(int(part))
    return frozenset(hours)


@dataclasses.dataclass(frozen=True, slots=True)
class RetentionSettings:
    """When commit-log segments are deleted and when writes stop (RocketMQ
    ``MessageStoreConfig``). Ratios are fractions of the file system's capacity.

    Raises:
        ValueError: from the constructor, if a field is out of its bounds (ratios outside
            ``[0, 1]`` are refused; inside, they are clamped to RocketMQ's ranges).
    """

    file_reserved_hours: int = 72
    """Age after which a segment expires, in hours since it was last written (RocketMQ
    ``fileReservedTime``), 1 .. 87,600 (ten years)."""

    delete_when: str = "04"
    """Local hours of day at which expired segments are deleted, ``;``-separated (RocketMQ
    ``deleteWhen``): the default deletes at 04:00-04:59, when traffic is usually low."""

    disk_max_used_space_ratio: float = 0.75
    """Usage at which expired segments are deleted at any hour (RocketMQ
    ``diskMaxUsedSpaceRatio``); clamped to 0.10 .. 0.95."""

    disk_space_clean_forcibly_ratio: float = 0.85
    """Usage at which the oldest segments are deleted even if unexpired (RocketMQ
    ``diskSpaceCleanForciblyRatio``); clamped to 0.30 .. 0.85."""

    disk_space_warning_level_ratio: float = 0.90
    """Usage at which the disk counts as full and writes are rejected (RocketMQ
    ``diskSpaceWarningLevelRatio``); clamped to 0.35 .. 0.90."""

    clean_file_forcibly_enabled: bool = True
    """Whether deletion may be forced above the clean-forcibly ratio (RocketMQ
    ``cleanFileForciblyEnable``); without it a full disk waits for segments to expire."""

    delete_file_batch_max: int = 10
    """Most segments deleted by one plan (RocketMQ ``deleteFileBatchMax``), 1 .. 1,000; bounds
    the I/O burst of one run."""

    force_delete_unconsumed: bool = False
    """Whether forced deletion may take segments holding messages a subscribed consumer group
    has not consumed yet (RocketMQ always does). Off by default: the broker keeps them and
    rejects writes with the disk-full code while the disk is above the warning level."""

    clean_resource_interval_ms: int = 10_000
    """Period of the retention service, in ms (RocketMQ ``cleanResourceInterval``),
    100 .. 3,600,000; also how fast a full disk is noticed and writes resume."""

    def __post_init__(self) -> None:
        _check_int("file_reserved_hours", self.file_reserved_hours, 1, 87_600)
        _check_int("delete_file_batch_max", self.delete_file_batch_max, 1, 1_000)
        _check_int("clean_resource_interval_ms", self.clean_resource_interval_ms, 100, 3_600_000)
        parse_delete_when(self.delete_when)
        for name, low, high in (
            ("disk_max_used_space_ratio", 0.10, 0.95),
            ("disk_space_clean_forcibly_ratio", 0.30, 0.85),
            ("disk_space_warning_level_ratio", 0.35, 0.90),
        ):
            value = getattr(self, name)
            if not (math.isfinite(value) and 0.0 <= value <= 1.0):
                raise ValueError(f"{name}={value} is not a ratio in [0, 1]")
            object.__setattr__(self, name, min(max(value, low), high))

    @property
    def delete_hours(self) -> frozenset[int]:
        """The hours of ``delete_when``."""
        return parse_delete_when(self.delete_when)

    @property
    def file_reserved_ms(self) -> int:
        """``file_reserved_hours`` in ms."""
        return self.file_reserved_hours * HOUR_MS


def _check_int(name: str, value: int, low: int, high: int) -> None:
    if not low <= value <= high:
        raise ValueError(f"{name}={value} is outside [{low}, {high}]")


SegmentInfo = mapped_file_queue.SegmentInfo
"""One commit-log segment file as retention sees it (``mapped_file_queue.SegmentInfo``)."""


class DiskState(enum.Enum):
    """Where disk usage stands against the watermarks: the highest one reached, checked from
    the warning level down (the settings do not force the three ratios into order)."""

    OK = "ok"
    """Below ``disk_max_used_space_ratio``."""
    ABOVE_MAX_USED = "above_max_used"
    """At or above ``disk_max_used_space_ratio``: expired segments go at any hour."""
    ABOVE_CLEAN_FORCIBLY = "above_clean_forcibly"
    """At or above ``disk_space_clean_forcibly_ratio``: unexpired segments may go."""
    FULL = "full"
    """At or above ``disk_space_warning_level_ratio``: writes are rejected."""


class Trigger(enum.Enum):
    """A reason for deleting segments in this run."""

    DELETE_HOUR = "delete_hour"
    """The local hour is one of ``delete_when``."""
    DISK_ABOVE_MAX_USED = "disk_above_max_used"
    """Usage reached ``disk_max_used_space_ratio``."""
    DISK_FORCED = "disk_forced"
    """Usage reached the clean-forcibly or warning ratio and forced cleaning is enabled."""
    MANUAL = "manual"
    """An operator asked for a deletion run (RocketMQ ``executeDeleteFilesManually``)."""


class StopReason(enum.Enum):
    """Why the plan deletes no more segments than it does."""

    NOT_TRIGGERED = "not_triggered"
    """Nothing asked for deletion in this run."""
    ONLY_NEWEST_LEFT = "only_newest_left"
    """Every segment but the newest is deleted (or there was none)."""
    NEXT_NOT_EXPIRED = "next_not_expired"
    """The oldest kept segment has not expired and deletion is not forced."""
    BATCH_MAX = "batch_max"
    """``delete_file_batch_max`` segments are deleted; the next run continues."""
    UNCONSUMED = "unconsumed"
    """The oldest kept segment is unexpired and holds messages a subscribed group has not
    consumed; forced deletion may not take it (``force_delete_unconsumed`` is off)."""


@dataclasses.dataclass(frozen=True, slots=True)
class RetentionPlan:
    """What one retention run should do, and why.

    Attributes:
        delete: the segments to delete, oldest first.
        kept: the segments to keep, oldest first (never empty if there was a segment).
        forced: whether unexpired segments may be deleted (disk above clean-forcibly).
        reject_writes: whether appends must be refused now (disk full).
        disk_state: the highest watermark reached.
        disk_used_ratio: the usage the plan was made for.
        triggers: why deletion runs (empty if it does not).
        stop_reason: why no further segment is deleted.
        unconsumed_from: the lowest commit-log offset a subscribed group has not consumed,
            as given to ``plan`` (``None``: nothing is needed).
    """

    delete: tuple[SegmentInfo, ...]
    kept: tuple[SegmentInfo, ...]
    forced: bool
    reject_writes: bool
    disk_state: DiskState
    disk_used_ratio: float
    triggers: frozenset[Trigger]
    stop_reason: StopReason
    unconsumed_from: ids.CommitLogOffset | None = None

    @property
    def delete_bytes(self) -> int:
        """Bytes freed by deleting ``delete``."""
        return sum(segment.size_bytes for segment in self.delete)

    @property
    def min_offset_after(self) -> ids.CommitLogOffset | None:
        """The smallest commit-log offset left once ``delete`` is done (``None``: no segment).

        Consume-queue and index files wholly below it can be deleted afterwards.
        """
        return ids.CommitLogOffset(self.kept[0].start_offset) if self.kept else None

    @property
    def deletes_unconsumed(self) -> tuple[SegmentInfo, ...]:
        """The segments of ``delete`` that hold messages a subscribed group has not consumed."""
        return tuple(s for s in self.delete if _holds_unconsumed(s, self.unconsumed_from))

    def describe(self) -> str:
        """One line for the log: usage, state, triggers, what is deleted and why it stops."""
        triggers = ",".join(sorted(t.value for t in self.triggers)) or "none"
        return (
            f"disk {self.disk_used_ratio:.1%} {self.disk_state.value}; "
            f"triggers {triggers}; forced {self.forced}; reject writes {self.reject_writes}; "
            f"delete {len(self.delete)} segment(s), {self.delete_bytes} bytes; "
            f"stop {self.stop_reason.value}"
        )


ReservedMsOf = Callable[[SegmentInfo], int]
"""The age in ms at which a segment expires (per-topic retention, ``clean_service``)."""


def plan(
    now_ms: int,
    local_hour: int,
    segments: Sequence[SegmentInfo],
    disk_used_ratio: float,
    settings: RetentionSettings,
    *,
    manual: bool = False,
    unconsumed_from: ids.CommitLogOffset | None = None,
    reserved_ms_of: ReservedMsOf | None = None,
) -> RetentionPlan:
    """Decide one retention run (RocketMQ ``CleanCommitLogService.deleteExpiredFiles``).

    Args:
        now_ms: the wall time, ms since the epoch.
        local_hour: the local hour of day, 0 .. 23, matched against ``delete_when``.
        segments: every commit-log segment, in any order, with distinct start offsets.
        disk_used_ratio: used fraction of the commit log's file system, 0.0 .. 1.0.
        settings: the retention settings.
        manual: whether an operator asked for a deletion run now.
        unconsumed_from: the lowest commit-log offset of a message some subscribed consumer
            group has not consumed, ``None`` if there is none; unless
            ``force_delete_unconsumed``, forced deletion stops before the segment holding it.
        reserved_ms_of: the age at which a segment expires, ms (per-topic retention: the
            longest retention of the topics it holds); ``None``: ``file_reserved_ms`` for all.

    Returns:
        The plan; it never lists the newest segment nor a segment newer than a kept one, nor
        (by default) an unexpired segment at or above ``unconsumed_from``.
    """
    assert 0 <= local_hour <= 23, f"local_hour={local_hour}"
    assert math.isfinite(disk_used_ratio) and 0.0 <= disk_used_ratio <= 1.0, disk_used_ratio
    ordered = sorted(segments, key=lambda segment: segment.start_offset)
    assert len({s.start_offset for s in ordered}) == len(ordered), "duplicate segment offsets"
    state = disk_state(disk_used_ratio, settings)
    forced = settings.clean_file_forcibly_enabled and state in (
        DiskState.ABOVE_CLEAN_FORCIBLY,
        DiskState.FULL,
    )
    triggers = _triggers(local_hour, disk_used_ratio, forced, manual, settings)
    protect = None if settings.force_delete_unconsumed else unconsumed_from
    reserved = reserved_ms_of or (lambda segment: settings.file_reserved_ms)
    count, stop = _deletable_prefix(
        now_ms, ordered, forced, bool(triggers), settings, protect, reserved
    )
    return RetentionPlan(
        delete=tuple(ordered[:count]),
        kept=tuple(ordered[count:]),
        forced=forced,
        reject_writes=state is DiskState.FULL,
        disk_state=state,
        disk_used_ratio=disk_used_ratio,
        triggers=triggers,
        stop_reason=stop,
        unconsumed_from=unconsumed_from,
    )


def disk_state(disk_used_ratio: float, settings: RetentionSettings) -> DiskState:
    """The highest watermark ``disk_used_ratio`` reaches (each compared with ``>=``)."""
    if disk_used_ratio >= settings.disk_space_warning_level_ratio:
        return DiskState.FULL
    if disk_used_ratio >= settings.disk_space_clean_forcibly_ratio:
        return DiskState.ABOVE_CLEAN_FORCIBLY
    if disk_used_ratio >= settings.disk_max_used_space_ratio:
        return DiskState.ABOVE_MAX_USED
    return DiskState.OK


def _triggers(
    local_hour: int, ratio: float, forced: bool, manual: bool, settings: RetentionSettings
) -> frozenset[Trigger]:
    triggers: set[Trigger] = set()
    if local_hour in settings.delete_hours:
        triggers.add(Trigger.DELETE_HOUR)
    if ratio >= settings.disk_max_used_space_ratio:
        triggers.add(Trigger.DISK_ABOVE_MAX_USED)
    if forced:
        triggers.add(Trigger.DISK_FORCED)
    if manual:
        triggers.add(Trigger.MANUAL)
    return frozenset(triggers)


def _deletable_prefix(
    now_ms: int,
    ordered: Sequence[SegmentInfo],
    forced: bool,
    triggered: bool,
    settings: RetentionSettings,
    protect_from: ids.CommitLogOffset | None,
    reserved_ms_of: ReservedMsOf,
) -> tuple[int, StopReason]:
    """How many of the oldest segments to delete, and why not more."""
    if not triggered:
        return 0, StopReason.NOT_TRIGGERED
    candidates = ordered[:-1]  # the newest segment is being written
    for count, segment in enumerate(candidates):
        if count >= settings.delete_file_batch_max:
            return count, StopReason.BATCH_MAX
        expired = now_ms - segment.modified_ms >= reserved_ms_of(segment)
        if expired:
            continue
        if not forced:
            return count, StopReason.NEXT_NOT_EXPIRED
        if _holds_unconsumed(segment, protect_from):
            return count, StopReason.UNCONSUMED
    return len(candidates), StopReason.ONLY_NEWEST_LEFT


def _holds_unconsumed(segment: SegmentInfo, unconsumed_from: ids.CommitLogOffset | None) -> bool:
    """Whether ``segment`` ends past the lowest unconsumed offset (so it may hold such data)."""
    return (
        unconsumed_from is not None and segment.start_offset + segment.size_bytes > unconsumed_from
    )


def disk_used_ratio(path: pathlib.Path, *, usage: DiskUsageFn = shutil.disk_usage) -> float:
    """Used fraction of the file system holding ``path``, as ``df`` shows it.

    The ratio is ``used / (used + free)``, where ``free`` is what unprivileged writers can use,
    so blocks reserved for root count as unavailable (RocketMQ
    ``UtilAll.getDiskPartitionSpaceUsedPercent`` counts them as free).

    Args:
        path: a path on the file system to probe (the commit-log directory).
        usage: the ``shutil.disk_usage`` seam, for tests.

    Raises:
        OSError: if ``path`` cannot be probed (for example, it does not exist) or the file
            system reports no capacity; the caller should log it rather than assume a full or
            an empty disk.
    """
    _total, used, free = usage(path)
    capacity = used + free
    if capacity <= 0:
        raise OSError(f"{path}: the file system reports no capacity")
    return min(max(used / capacity, 0.0), 1.0)


def segment_size_for_volume(
    *,
    configured_bytes: int,
    smallest_bytes: int,
    volume_bytes: int,
    existing_bytes: int | None,
) -> int:
    """The CommitLog segment size to use on a volume (pure; see ``store_settings_for_volume``).

    Rule: segments already on disk keep their size when it is at most the configured one (the
    size is part of the on-disk layout, so a resized volume never turns into a layout error;
    a size neither configured nor a page multiple is a truncated file, left to
    ``MappedFileQueue.load``);
    otherwise the configured size (RocketMQ ``mappedFileSizeCommitLog``, 1 GiB) when it is at
    most ``SEGMENT_SHARE_OF_VOLUME_MAX`` of the volume, else that share rounded down to
    ``SEGMENT_SIZE_ALIGN_BYTES`` but never below ``smallest_bytes``.

    Args:
        configured_bytes: ``commit_log_file_size_bytes``.
        smallest_bytes: the smallest segment that holds the largest record, bytes.
        volume_bytes: usable capacity of the file system holding the store, bytes.
        existing_bytes: the size of the segment files already there, ``None`` if none.

    Raises:
        VolumeTooSmallError: if ``SEGMENTS_PER_VOLUME_MIN`` segments of the chosen size do not
            fit on the volume.
    """
    laid_out = existing_bytes is not None and (
        existing_bytes in (configured_bytes, smallest_bytes) or existing_bytes % _PAGE_BYTES == 0
    )  # any other size is a file cut behind the store's back, not a layout
    if laid_out and existing_bytes is not None and existing_bytes <= configured_bytes:
        size = existing_bytes
    else:
        share = int(volume_bytes * SEGMENT_SHARE_OF_VOLUME_MAX)
        fitted = share - share % SEGMENT_SIZE_ALIGN_BYTES
        size = min(configured_bytes, max(fitted, smallest_bytes))
    if size * SEGMENTS_PER_VOLUME_MIN > volume_bytes:
        raise VolumeTooSmallError(
            f"the store's volume holds {volume_bytes} bytes, fewer than "
            f"{SEGMENTS_PER_VOLUME_MIN} CommitLog segments of {size} bytes (the smallest that "
            "holds the largest message); give the store a volume of at least "
            f"{size * SEGMENTS_PER_VOLUME_MIN} bytes, or lower store.message_size_bytes_max"
        )
    return size


def store_settings_for_volume(
    root: pathlib.Path,
    config: store_settings.StoreSettings,
    *,
    usage: DiskUsageFn = shutil.disk_usage,
) -> store_settings.StoreSettings:
    """``config`` with ``commit_log_file_size_bytes`` fitted to the volume holding ``root``.

    RocketMQ writes sparse segments and fills a small disk until writes fail; Ariane
    preallocates every segment, so a 1 GiB segment on a 500 MiB volume could never be created
    (every send failed). A user gets the configured size wherever it fits
    (``segment_size_for_volume`` states the rule), and a warning naming the setting otherwise.

    Args:
        root: the store root (it exists); segments live in ``root / "commitlog"``.
        config: the configured store settings.
        usage: the ``shutil.disk_usage`` seam.

    Raises:
        VolumeTooSmallError: the volume is too small for any usable segment size.
        OSError: the volume cannot be probed.
    """
    _total, used, free = usage(root)
    smallest = min(
        config.commit_log_file_size_bytes,
        _round_up(
            config.record_size_bytes_max + message_codec.END_FILE_MIN_BLANK_BYTES,
            SEGMENT_SIZE_ALIGN_BYTES,
        ),
    )
    size = segment_size_for_volume(
        configured_bytes=config.commit_log_file_size_bytes,
        smallest_bytes=smallest,
        volume_bytes=used + free,
        existing_bytes=_existing_segment_bytes(root / "commitlog"),
    )
    if size == config.commit_log_file_size_bytes:
        return config
    _log.warning(
        "CommitLog segments of %d bytes instead of store.commit_log_file_size_bytes=%d: the "
        "volume holding %s has %d bytes and a new segment takes at most %d%% of it; give the "
        "store a larger volume or set store.commit_log_file_size_bytes to silence this",
        size,
        config.commit_log_file_size_bytes,
        root,
        used + free,
        round(SEGMENT_SHARE_OF_VOLUME_MAX * 100),
    )
    return dataclasses.replace(config, commit_log_file_size_bytes=size)


def _existing_segment_bytes(directory: pathlib.Path) -> int | None:
    """The size of the oldest segment file in ``directory`` (``None`` if there is none)."""
    try:
        names = sorted(
            n for n in directory.iterdir() if mapped_file.start_offset_of(n.name) is not None
        )
    except FileNotFoundError:
        return None
    return names[0].stat().st_size if names else None


def _round_up(value: int, step: int) -> int:
    return -(-value // step) * step
