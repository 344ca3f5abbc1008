"""``ScheduleService``: delay levels and timer messages, parked until due, then written to
their real topic.

Two mechanisms, as RocketMQ 5 has them:

* **Delay levels** (RocketMQ ``ScheduleMessageService``): a message with delay level n is
  stored in ``SCHEDULE_TOPIC_XXXX`` queue n-1 with ``REAL_TOPIC``/``REAL_QID``/``DELAY``
  properties. Every level's queue is in due order (same delay, stored in time order), so each
  level keeps one progress offset (``config/delayOffset.json``, as RocketMQ's
  ``delayOffset.json``) and delivers from it while the head is due.
* **Timer messages** (RocketMQ 5 ``TimerMessageStore``): a DELAY message with any delivery time
  up to ``timer_delay_ms_max`` is stored in the system topic ``rmq_sys_wheel_timer`` (queue 0)
  with ``TIMER_DELIVER_MS``. This service reads that queue from its cursor into a bounded
  in-memory ``TimerWheel`` and records each step in the timer log (``timer_log``): ENQUEUED,
  then DELIVERED or RECALLED. At start-up the log is replayed to rebuild the wheel, and the
  queue is read on from the log's cursor, so schedules survive a restart or a SIGKILL.

A due message is rewritten to ``REAL_TOPIC``/``REAL_QID`` with every property kept (its
``UNIQ_KEY`` message id too, so consumers see the id the producer got).

**Progress travels in the CommitLog** (``progress``; the design and why): each delivery batch
is one store append of a progress record (system topic ``rmq_sys_schedule_progress``) followed
by the delivered messages, so a replica at any offset holds progress consistent with the
deliveries it holds. The service *follows* those records into its local state (level offsets,
wheel, timer log): on a broker that refuses writes (a SLAVE, a fenced or demoted old master)
it only follows and reads the replicated timer topic into its wheel, never delivers; once the
broker accepts writes (started as a master, or promoted) every round first follows the records
to the end of the CommitLog, settling a batch a replica holds only part of (what it holds is
delivered, the rest is still parked), then delivers. Local state that may describe bytes the
CommitLog no longer holds is dropped and derived again from the CommitLog (``reset``): when
the HA handshake cut a diverged tail (``replica_truncated``), or at open when the CommitLog
ends below what the files had seen (recovery cut a torn tail).

Crash order on one broker: the batch (record + messages) is written first, then the timer log
and ``delayOffset.json``; a crash in between is repaired at the next start, which follows the
record again, so a message is delivered exactly once as long as the CommitLog kept the batch (a
SIGKILL keeps it; a machine crash under ASYNC_FLUSH may lose the batch and the record together,
and the message is then delivered again, never lost).

``RecallMessage`` (RocketMQ 5.3) removes a timer message from the wheel before it is due, and
appends a RECALLED progress record so that a promoted replica does not deliver it either.

Invariants: used from the broker's one event loop; a wheel entry handed out for delivery is
either written (DELIVERED logged) or put back into the wheel; a message is never written to its
topic before its delivery time (``TimerWheel.take_due``); nothing is delivered while the store
refuses writes; applying a progress record twice changes nothing (offsets only move forward, a
finished timer entry stays finished), so following from an older point is always safe.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import itertools
import logging
import pathlib
from collections.abc import Callable, Iterable

from ariane.broker.schedule import (
    offsets_file,
    progress,
    progress_codec,
    timer_codec,
    timers,
    wheel,
)
from ariane.broker.schedule import settings as schedule_settings
from ariane.common import clock, errors, ids, message, topics
from ariane.store import commit_log, message_store, record_reader

_log = logging.getLogger(__name__)

P = message.Property
K = timer_codec.Kind
Origin = progress_codec.Origin
OriginKind = progress_codec.Kind
S = commit_log.PutMessageStatus

READ_BYTES_MAX = 4 * 1024 * 1024
"""Most bytes read from one schedule or timer queue per scan."""

FOLLOW_READS_PER_ROUND_MAX = 16
"""Most reads of ``progress.RECORDS_PER_READ_MAX`` progress records one round follows, a
count: a replica catching up on a long history keeps the event loop responsive."""

PERSIST_INTERVAL_MS = 1_000
"""Least time between two writes of ``delayOffset.json`` while the progress moves, ms:
following from an older point is safe, so after a crash the next start only follows (at most)
this much more of the progress again."""

_PREPARE_REFUSALS = frozenset({S.MESSAGE_ILLEGAL, S.PROPERTIES_SIZE_EXCEEDED})


@dataclasses.dataclass(frozen=True, slots=True)
class ScheduleStats:
    """A snapshot for metrics and tests.

    Attributes:
        timer_pending: timer messages in the wheel (RocketMQ ``rocketmq_timing_messages``).
        timer_cursor: next timer-topic queue offset to read into the wheel.
        delivered: messages written to their real topic since start.
        recalled: timer messages cancelled since start.
        progress_offset: next progress record to follow (queue offset).
    """

    timer_pending: int
    timer_cursor: int
    delivered: int
    recalled: int
    progress_offset: int = 0


class ScheduleService:
    """Parks DELAY messages and writes them to their topic when due. Use ``open``.

    Args:
        root: the store root (``timer/timerlog``, ``config/delayOffset.json``).
        store: the message store the parked and the delivered messages live in.
        settings: the delay levels and timer bounds.
        time: the clock deciding what is due.
        notify: called with the topics that got due messages (wakes long polling).
    """

    def __init__(
        self,
        *,
        root: pathlib.Path,
        store: message_store.MessageStore,
        settings: schedule_settings.ScheduleSettings,
        time: clock.Clock,
        notify: Callable[[Iterable[str]], object],
    ) -> None:
        self._store = store
        self._settings = settings
        self._clock = time
        self._notify = notify
        self._timers = timers.TimerState(root, settings.timer_pending_max)
        self._offsets_path = offsets_file.path_under(root)
        saved = offsets_file.load(self._offsets_path)
        self._level_offsets = saved.levels
        self._follow_offset = saved.progress_offset
        self._seen_offset = saved.commit_log_offset
        self._dirty = False
        self._persisted_ms: int | None = None
        self.delivered = 0
        self.recalled = 0

    @classmethod
    def open(
        cls,
        root: pathlib.Path,
        *,
        store: message_store.MessageStore,
        settings: schedule_settings.ScheduleSettings,
        time: clock.Clock,
        notify: Callable[[Iterable[str]], object],
    ) -> ScheduleService:
        """Replay the timer log, load the level offsets, read the timer topic on; derive it all
        again if the CommitLog ends below what they were derived from.

        Raises:
            OSError: the timer log cannot be opened.
            CorruptMetadataError: ``delayOffset.json`` does not parse.
        """
        service = cls(root=root, store=store, settings=settings, time=time, notify=notify)
        if service._seen_offset > store.max_commit_log_offset:
            service.reset(
                f"the CommitLog ends at {store.max_commit_log_offset}, below the "
                f"{service._seen_offset} the schedule files were derived from"
            )
        service.enqueue_timer_messages()
        _log.info(
            "schedule: %d timer messages pending, timer cursor %d, level offsets %s, "
            "progress offset %d",
            len(service._timers.wheel),
            service._timers.cursor,
            service._level_offsets,
            service._follow_offset,
        )
        return service

    # -- the send path ---------------------------------------------------------------------

    def park(
        self,
        request: commit_log.AppendRequest,
        *,
        delivery_ms: int | None,
        now_ms: int | None = None,
    ) -> commit_log.AppendRequest:
        """Rewrite a DELAY message bound for its topic into the timer topic.

        Mirrors the proxy's ``SendMessageActivity`` (TIMER_DELIVER_MS) and the broker's
        ``HookUtils.handleScheduleMessage``: a time closer than ``timer_precision_ms`` (or
        past) is stored in its topic at once. ``now_ms`` is the wall time ``delivery_ms`` was
        computed from (the clock is read here when ``None``): a caller that adds a delay of
        exactly ``timer_precision_ms`` must not see it delivered at once because the clock
        ticked in between.

        Raises:
            IllegalDeliveryTimeError: no delivery time, or more than ``timer_delay_ms_max``
                ahead (ILLEGAL_DELIVERY_TIME, as the proxy's ``maxDelayTimeMills``).
            TooManyRequestsError: the wheel holds ``timer_pending_max`` messages.
        """
        if delivery_ms is None:
            raise errors.IllegalDeliveryTimeError("a DELAY message needs a delivery timestamp")
        ahead_ms = delivery_ms - (self._clock.now_ms() if now_ms is None else now_ms)
        limit_ms = self._settings.timer_delay_ms_max
        if ahead_ms > limit_ms:
            raise errors.IllegalDeliveryTimeError(
                f"delivery time is {ahead_ms} ms ahead; the limit is {limit_ms} ms"
            )
        props = dict(request.message.properties)
        props[P.TIMER_DELIVER_MS] = str(delivery_ms)
        if ahead_ms < self._settings.timer_precision_ms:
            return _with(request, request.message.topic, request.queue_id, props)
        if self._timers.wheel.full:
            raise errors.TooManyRequestsError(
                f"{len(self._timers.wheel)} timer messages are pending, the limit; retry later"
            )
        return _parked(request, topics.TIMER_TOPIC, timers.QUEUE, props)

    def park_level(self, request: commit_log.AppendRequest, level: int) -> commit_log.AppendRequest:
        """Rewrite a message with delay level ``level`` into ``SCHEDULE_TOPIC_XXXX``.

        Mirrors ``ScheduleMessageService``: the level is clamped to the configured count;
        level <= 0 means no delay (the request comes back unchanged).
        """
        level = min(level, len(self._settings.delay_levels_ms))
        if level <= 0:
            return request
        props = dict(request.message.properties)
        props[P.DELAY_TIME_LEVEL] = str(level)
        return _parked(request, topics.SCHEDULE_TOPIC, ids.QueueId(level - 1), props)

    # -- recall ------------------------------------------------------------------------------

    def recall(self, message_id: str, delivery_ms: int) -> None:
        """Cancel the timer message ``message_id`` due at ``delivery_ms`` (RocketMQ 5.3
        ``RecallMessage``); reads the timer topic first, so a message just sent is found.
        A RECALLED progress record goes to the CommitLog (not awaited), so a replica promoted
        later does not deliver it either.

        Raises:
            NotFoundError: no such message is waiting (unknown, delivered or recalled).
            ServiceUnavailableError: this broker is a slave (recall at its master).
        """
        if self.follows:
            raise errors.ServiceUnavailableError(
                "this broker replicates its master's schedule; recall the message there"
            )
        self.enqueue_timer_messages()
        removed = self._timers.wheel.cancel(message_id, delivery_ms)
        if not removed:
            raise errors.NotFoundError(
                f"no scheduled message {message_id} due at {delivery_ms} is waiting: it was "
                "delivered, recalled, or never scheduled here"
            )
        self._timers.log.append([timers.record(K.RECALLED, e) for e in removed])
        self.recalled += len(removed)
        origins = [Origin(OriginKind.RECALLED, 0, e.queue_offset) for e in removed]
        written = self._store.submit([progress.record_request(origins, self._clock.now_ms())])
        written.add_done_callback(_warn_if_not_stored)

    # -- the loop ----------------------------------------------------------------------------

    @property
    def follows(self) -> bool:
        """Whether the store refuses writes (a SLAVE, a fenced old master, a SYNC_MASTER short of
        in-sync replicas): then the service only follows the progress records and delivers
        nothing."""
        gate = self._store.replication
        return gate is not None and gate.refusal() is not None

    async def run(self) -> None:
        """Deliver due messages every ``tick_ms`` until cancelled (the server's task group)."""
        while True:
            try:
                await self.run_once()
            except (OSError, errors.ArianeError):
                _log.exception("schedule: delivery round failed; retrying")
            await asyncio.sleep(self._settings.tick_ms / 1000)

    async def run_once(self) -> int:
        """One round: read new timer messages, follow the progress records, and (unless the
        store refuses writes) deliver what is due once every record is followed. Returns how
        many were delivered."""
        self.enqueue_timer_messages()
        active = not self.follows
        count = 0
        if self._follow(settle=active) and active:
            count = await self._deliver_timers()
            count += await self._deliver_levels()
        self._persist()
        if self._timers.log.size_bytes > self._settings.timer_log_bytes_max:
            self._timers.compact()
        return count

    def stats(self) -> ScheduleStats:
        """Counts for metrics and tests."""
        return ScheduleStats(
            len(self._timers.wheel),
            self._timers.cursor,
            self.delivered,
            self.recalled,
            self._follow_offset,
        )

    def level_offsets(self) -> dict[int, ids.QueueOffset]:
        """Delay level -> queue offset of its next undelivered message (a copy, for metrics)."""
        return dict(self._level_offsets)

    def next_timer_due_ms(self) -> int | None:
        """Delivery time of the earliest timer message in the wheel, ms since the epoch;
        ``None`` when the wheel is empty (for metrics)."""
        return self._timers.wheel.next_due_ms()

    def close(self) -> None:
        """Persist the level offsets and close the timer log."""
        self._persist(force=True)
        self._timers.log.close()

    def replica_truncated(self, commit_log_offset: int) -> None:
        """The HA handshake cut this broker's CommitLog at ``commit_log_offset`` (a diverged
        tail, e.g. of a demoted old master): derive the schedule progress again."""
        self.reset(f"the CommitLog was cut at {commit_log_offset} to follow a new master")

    def reset(self, reason: str) -> None:
        """Drop the local progress (wheel, timer log, level offsets) and derive it again from
        the CommitLog: every queue from its first retained offset, every progress record on.

        Raises:
            OSError: the timer log or ``delayOffset.json`` cannot be rewritten.
        """
        store = self._store
        self._timers.reset(store.min_queue_offset(topics.TIMER_TOPIC, timers.QUEUE))
        self._level_offsets = {
            level: store.min_queue_offset(topics.SCHEDULE_TOPIC, ids.QueueId(level - 1))
            for level in range(1, len(self._settings.delay_levels_ms) + 1)
        }
        self._follow_offset = store.min_queue_offset(topics.SCHEDULE_PROGRESS_TOPIC, progress.QUEUE)
        self._dirty = True
        self._persist(force=True)
        _log.warning("schedule: progress derived again from the CommitLog: %s", reason)

    # -- following the progress records -----------------------------------------------------

    def _follow(self, *, settle: bool) -> bool:
        """Apply the progress records from the follow offset on; ``True`` once nothing more
        can be applied now. ``settle``: the CommitLog will not grow under a batch any more
        (this broker writes): a batch it holds only part of is applied as it is."""
        for _ in range(FOLLOW_READS_PER_ROUND_MAX):
            result = self._store.get_messages(
                topics.SCHEDULE_PROGRESS_TOPIC,
                progress.QUEUE,
                self._follow_offset,
                max_count=progress.RECORDS_PER_READ_MAX,
                max_bytes=READ_BYTES_MAX,
            )
            if not result.messages:
                self._set_follow_offset(max(self._follow_offset, result.next_begin_offset))
                return True
            for record in result.messages:
                followed = progress.written_after(self._store, record)
                self._apply(followed)
                if not (followed.complete or settle):
                    return True  # the rest of the batch has not arrived yet
                self._set_follow_offset(ids.QueueOffset(record.queue_offset + 1))
        return False

    def _apply(self, followed: progress.Followed) -> None:
        """Finish the origins ``followed`` shows written; a level moves only over the
        delivered prefix of its run in the batch, as its master moved it."""
        blocked: set[int] = set()
        finished: list[timer_codec.TimerRecord] = []
        for origin, present in zip(followed.origins, followed.present, strict=True):
            if origin.kind is OriginKind.LEVEL:
                if not present or origin.level in blocked:
                    blocked.add(origin.level)
                    continue
                current = self._level_offsets.get(origin.level, ids.QueueOffset(0))
                self._advance(origin.level, max(current, ids.QueueOffset(origin.queue_offset + 1)))
            elif present:
                kind = K.RECALLED if origin.kind is OriginKind.RECALLED else K.DELIVERED
                record = self._timers.finish(origin.queue_offset, kind)
                if record is not None:
                    finished.append(record)
        if finished:
            self._timers.log.append(finished)
            self._dirty = True

    def _set_follow_offset(self, offset: ids.QueueOffset) -> None:
        if offset != self._follow_offset:
            self._follow_offset = offset
            self._dirty = True

    # -- timer messages ----------------------------------------------------------------------

    def enqueue_timer_messages(self) -> int:
        """Read the timer topic from the cursor into the wheel while it has room (RocketMQ's
        ``TimerEnqueueGetService``; ``TimerState.enqueue``). Returns how many were added."""
        before = self._timers.cursor
        added = self._timers.enqueue(
            self._store, batch_max=self._settings.deliver_batch_max, read_bytes_max=READ_BYTES_MAX
        )
        self._dirty |= self._timers.cursor != before
        return added

    async def _deliver_timers(self) -> int:
        now_ms = self._clock.now_ms()
        due = self._timers.wheel.take_due(now_ms, self._settings.deliver_batch_max)
        if not due:
            return 0
        items: list[tuple[int, message.StoredMessage]] = []
        kept: list[wheel.WheelEntry] = []
        finished: list[wheel.WheelEntry] = []  # delivered, or unreadable (logged): done with
        for entry in due:
            parked = self._parked(entry.commit_log_offset, entry.size_bytes)
            if parked is None:  # a replica reads the same bytes: it finishes it as well
                finished.append(entry)
            else:
                items.append((entry.queue_offset, parked))
                kept.append(entry)
        done = await self._deliver(OriginKind.TIMER, 0, items)
        for entry, ok in zip(kept, done, strict=True):
            if ok:
                finished.append(entry)
            else:
                self._timers.wheel.add(entry)  # still due: retried next round
        self._timers.log.append([timers.record(K.DELIVERED, e) for e in finished])
        return done.count(True)

    def _parked(self, commit_log_offset: int, size_bytes: int) -> message.StoredMessage | None:
        found = self._store.get_message(ids.CommitLogOffset(commit_log_offset), size_bytes)
        if found.status is not record_reader.LookupStatus.FOUND or found.message is None:
            _log.error(
                "schedule: parked message at %d is unreadable (%s); it cannot be delivered",
                commit_log_offset,
                found.status.value,
            )
            return None
        return found.message

    async def _deliver(
        self, kind: OriginKind, level: int, items: list[tuple[int, message.StoredMessage]]
    ) -> list[bool]:
        """Write the parked ``items`` (their queue offset, the message) to their topics after
        one progress record, in one atomic append; per item whether it was stored."""
        if not items:
            return []
        requests = [restore(parked) for _, parked in items]
        origins = [
            Origin(kind, level, offset, progress.parked_key(parked, request))
            for (offset, parked), request in zip(items, requests, strict=True)
        ]
        record = progress.record_request(origins, self._clock.now_ms())
        results = await self._store.put_messages([record, *requests], atomic=True)
        head, tail = results[0], results[1:]
        if head.status in _PREPARE_REFUSALS and len(items) > 1:
            # One message the CommitLog refuses fails the atomic batch: one by one instead.
            return [ok for item in items for ok in await self._deliver(kind, level, [item])]
        if head.status.is_stored and head.queue_offset == self._follow_offset:
            self._set_follow_offset(ids.QueueOffset(head.queue_offset + 1))
        elif not head.status.is_stored and any(r.status.is_stored for r in tail):
            _log.error(
                "schedule: progress record refused (%s); a replica may deliver this batch again",
                head.status.value,
            )
        return self._delivered([r.status for r in tail], requests)

    def _delivered(
        self, statuses: list[commit_log.PutMessageStatus], requests: list[commit_log.AppendRequest]
    ) -> list[bool]:
        done = [status.is_stored for status in statuses]
        failed = done.count(False)
        if failed:
            _log.warning(
                "schedule: %d due messages not stored (%s); retrying",
                failed,
                next(s.value for s in statuses if not s.is_stored),
            )
        stored_topics = {q.message.topic for q, ok in zip(requests, done, strict=True) if ok}
        self.delivered += len(requests) - failed
        if stored_topics:
            self._notify(stored_topics)
        return done

    # -- delay levels ------------------------------------------------------------------------

    async def _deliver_levels(self) -> int:
        now_ms = self._clock.now_ms()
        count = 0
        for level, delay_ms in enumerate(self._settings.delay_levels_ms, start=1):
            queue_id = ids.QueueId(level - 1)
            offset = self._level_offsets.get(level, ids.QueueOffset(0))
            result = self._store.get_messages(
                topics.SCHEDULE_TOPIC,
                queue_id,
                offset,
                max_count=self._settings.deliver_batch_max,
                max_bytes=READ_BYTES_MAX,
            )
            due = _due_prefix(result.messages, delay_ms, now_ms)
            if not result.messages:
                self._advance(level, max(offset, result.next_begin_offset))
                continue
            if not due:
                continue
            done = await self._deliver(OriginKind.LEVEL, level, [(m.queue_offset, m) for m in due])
            ok_prefix = done.index(False) if False in done else len(done)
            if ok_prefix:
                self._advance(level, ids.QueueOffset(due[ok_prefix - 1].queue_offset + 1))
            count += ok_prefix
        return count

    def _advance(self, level: int, offset: ids.QueueOffset) -> None:
        if self._level_offsets.get(level, 0) != offset:
            self._level_offsets[level] = offset
            self._dirty = True

    def _persist(self, *, force: bool = False) -> None:
        now_ms = self._clock.monotonic_ms()
        recent = (
            self._persisted_ms is not None and now_ms - self._persisted_ms < PERSIST_INTERVAL_MS
        )
        if self._dirty and (force or not recent):
            self._seen_offset = self._store.max_commit_log_offset
            saved = offsets_file.SavedOffsets(
                dict(self._level_offsets), self._follow_offset, self._seen_offset
            )
            offsets_file.save(self._offsets_path, saved)
            self._dirty, self._persisted_ms = False, now_ms


def _warn_if_not_stored(
    written: concurrent.futures.Future[list[commit_log.PutMessageResult]],
) -> None:
    results = written.result() if not written.cancelled() else []
    if results and not results[0].status.is_stored:
        _log.warning(
            "schedule: RECALLED progress record not stored (%s); a replica promoted later "
            "may deliver the recalled message",
            results[0].status.value,
        )


def restore(stored: message.StoredMessage) -> commit_log.AppendRequest:
    """The append request that writes a parked message to ``REAL_TOPIC``/``REAL_QID``.

    Every property stays (``UNIQ_KEY``, ``TIMER_DELIVER_MS``, ``REAL_TOPIC``, …) except the
    delay level, as RocketMQ's ``ScheduleMessageService.messageTimeUp`` and
    ``TimerMessageStore.convertMessage`` do; body, flag, born time and host are kept.
    """
    props = dict(stored.properties)
    props.pop(P.DELAY_TIME_LEVEL, None)
    topic = ids.TopicName(props.get(P.REAL_TOPIC, stored.topic))
    queue_id = ids.QueueId(int(props.get(P.REAL_QUEUE_ID, "0")))
    return commit_log.AppendRequest(
        message=message.Message(
            topic=topic, body=stored.body, properties=props, flag=stored.message.flag
        ),
        queue_id=queue_id,
        sys_flag=int(stored.sys_flag & message.SysFlag.COMPRESSED),
        born_timestamp_ms=stored.born_timestamp_ms,
        born_host=stored.born_host,
        reconsume_times=stored.reconsume_times,
    )


def _due_prefix(
    stored: Iterable[message.StoredMessage], delay_ms: int, now_ms: int
) -> list[message.StoredMessage]:
    """The leading messages of a level's queue that are due at ``now_ms``."""
    return list(itertools.takewhile(lambda m: m.store_timestamp_ms + delay_ms <= now_ms, stored))


def _parked(
    request: commit_log.AppendRequest,
    system_topic: ids.TopicName,
    queue_id: ids.QueueId,
    props: dict[str, str],
) -> commit_log.AppendRequest:
    props[P.REAL_TOPIC] = request.message.topic
    props[P.REAL_QUEUE_ID] = str(request.queue_id)
    return _with(request, system_topic, queue_id, props)


def _with(
    request: commit_log.AppendRequest,
    topic: ids.TopicName,
    queue_id: ids.QueueId,
    props: dict[str, str],
) -> commit_log.AppendRequest:
    parked = dataclasses.replace(request.message, topic=topic, properties=props)
    return dataclasses.replace(request, message=parked, queue_id=queue_id)
