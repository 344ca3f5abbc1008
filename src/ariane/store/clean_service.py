"""``CleanCommitLogService``: the store's retention run (RocketMQ ``CleanCommitLogService`` and
``CleanConsumeQueueService``).

One ``run_once`` probes the disk, asks ``retention.plan`` which CommitLog segments go, deletes
them with the ConsumeQueue and index files wholly below the new min offset, counts what forced
deletion removed in the store's stats and sets the store's disk-full switch. The broker runs it
every ``clean_resource_interval_ms``.

The store decides and deletes; the broker only says which messages its consumers still need:
``unconsumed`` returns, per queue of a subscribed topic, the lowest queue offset some group
has not consumed (``BrokerRuntime.unconsumed_positions``), and which topics keep their
messages for another time than ``file_reserved_hours`` (``Topic.retentionHours``). Invariants:
unless ``force_delete_unconsumed``, forced deletion keeps every segment at or above the lowest
CommitLog offset of those messages (``retention`` explains why Ariane differs from RocketMQ);
a segment expires by age only once every topic with a message in it is past its own
retention (topics without one: ``file_reserved_hours``), so a short-lived topic does not
shorten a long-lived one's, and the other rules (trigger hours, watermarks, oldest first)
are unchanged. RocketMQ 5's ``reserve.time`` topic attribute only reaches its tiered store
(``TieredMessageStore`` metadata); its local ``CleanCommitLogService`` is global.
"""

from __future__ import annotations

import logging
import shutil
import time
from collections.abc import Callable, Mapping

from ariane.common import clock as clock_mod
from ariane.common import ids
from ariane.store import message_store, retention

_log = logging.getLogger(__name__)

UnconsumedPositions = Mapping[tuple[ids.TopicName, ids.QueueId], ids.QueueOffset]
"""Per queue, the lowest queue offset a subscribed consumer group has not consumed."""

TopicRetentionHours = Mapping[str, int]
"""Topics with their own retention, in hours (absent topics: ``file_reserved_hours``)."""


class CleanCommitLogService:
    """Retention of one store.

    Args:
        store: the store to clean.
        policy: the retention settings.
        clock: the wall clock (segment ages, the ``delete_when`` hour).
        unconsumed: what subscribed groups still need (called once per run).
        disk_usage: the ``shutil.disk_usage`` seam of the disk probe.
        topic_retention_hours: per-topic retention (called once per run; none by default).
    """

    def __init__(
        self,
        store: message_store.MessageStore,
        policy: retention.RetentionSettings,
        *,
        clock: clock_mod.Clock,
        unconsumed: Callable[[], UnconsumedPositions],
        disk_usage: retention.DiskUsageFn = shutil.disk_usage,
        topic_retention_hours: Callable[[], TopicRetentionHours] = dict,
    ) -> None:
        self._store = store
        self._policy = policy
        self._clock = clock
        self._unconsumed = unconsumed
        self._disk_usage = disk_usage
        self._topic_retention_hours = topic_retention_hours

    def run_once(self) -> retention.RetentionPlan:
        """Plan, delete CommitLog/ConsumeQueue/index files, set disk-full.

        Raises:
            OSError: the disk cannot be probed or a file cannot be deleted.
        """
        store = self._store
        now_ms = self._clock.now_ms()
        ratio = retention.disk_used_ratio(store.root, usage=self._disk_usage)
        consumed = self._unconsumed()
        decided = retention.plan(
            now_ms,
            time.localtime(now_ms / 1000).tm_hour,
            store.commit_log_segments(),
            ratio,
            self._policy,
            unconsumed_from=store.unconsumed_from(consumed),
            reserved_ms_of=self._reserved_ms_of(),
        )
        if decided.delete:
            self._carry_out(decided, consumed)
        elif decided.stop_reason is retention.StopReason.UNCONSUMED:
            _log.warning("retention: %s; unconsumed messages kept", decided.describe())
        if store.disk_full != decided.reject_writes:
            _log.warning(
                "disk %.0f%% used: writes %s",
                ratio * 100,
                "rejected" if decided.reject_writes else "accepted again",
            )
            store.disk_full = decided.reject_writes
        return decided

    def _reserved_ms_of(self) -> retention.ReservedMsOf | None:
        """Per segment, the longest retention of the topics it holds, ms; ``None`` when no
        topic has its own retention (every segment: ``file_reserved_ms``)."""
        hours_of = self._topic_retention_hours()
        if not hours_of:
            return None
        default_hours = self._policy.file_reserved_hours
        queues = self._store.consume_queues

        def reserved_ms(segment: retention.SegmentInfo) -> int:
            end = segment.start_offset + segment.size_bytes
            held = queues.topics_between(segment.start_offset, end)
            hours = max((hours_of.get(t, default_hours) for t in held), default=default_hours)
            return hours * retention.HOUR_MS

        return reserved_ms

    def _carry_out(self, decided: retention.RetentionPlan, consumed: UnconsumedPositions) -> None:
        """Delete what ``decided`` lists; log and count what went unconsumed."""
        store = self._store
        lows_before = {key: store.min_queue_offset(*key) for key in consumed}
        deleted = store.delete_commit_log_segments(
            [ids.CommitLogOffset(s.start_offset) for s in decided.delete]
        )
        unconsumed = sum(
            max(0, store.min_queue_offset(*key) - max(offset, lows_before[key]))
            for key, offset in consumed.items()
        )
        forced = decided.delete[:deleted] if decided.forced else ()
        store.count_retention(
            forced_segments=len(forced),
            forced_bytes=sum(s.size_bytes for s in forced),
            unconsumed_messages=unconsumed,
        )
        log = _log.warning if unconsumed else _log.info
        log(
            "retention: %s; deleted %d CommitLog segments, %d messages subscribed groups had "
            "not consumed",
            decided.describe(),
            deleted,
            unconsumed,
        )
