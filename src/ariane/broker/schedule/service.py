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
``UNIQ_KEY`` message id too, so consumers see the id the producer got), then the progress is
recorded. Crash order: the write to the real topic comes before the progress record, so a
crash in between delivers that message again (at-least-once), never loses it.

``RecallMessage`` (RocketMQ 5.3) removes a timer message from the wheel before it is due.

Invariants: used from the broker's one event loop; a wheel entry handed out for delivery is
either written (DELIVERED logged) or put back into the wheel; a message is never written to its
topic before its delivery time (``TimerWheel.take_due``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import logging
import pathlib
from collections.abc import Callable, Iterable

from ariane.broker import schedule_settings
from ariane.broker.schedule import timer_codec, timer_log, wheel
from ariane.broker.tables import persistence
from ariane.common import clock, errors, ids, message, topics
from ariane.store import commit_log, message_store, record_reader

_log = logging.getLogger(__name__)

P = message.Property
K = timer_codec.Kind

OFFSETS_FILE_NAME = "delayOffset.json"
"""Per-level progress offsets under ``<store>/config`` (RocketMQ's file name)."""

READ_BYTES_MAX = 4 * 1024 * 1024
"""Most bytes read from one schedule or timer queue per scan."""

_TIMER_QUEUE = ids.QueueId(0)


@dataclasses.dataclass(frozen=True, slots=True)
class ScheduleStats:
    """A snapshot for metrics and tests.

    Attributes:
        timer_pending: timer messages in the wheel (RocketMQ ``rocketmq_timing_messages``).
        timer_cursor: next timer-topic queue offset to read into the wheel.
        delivered: messages written to their real topic since start.
        recalled: timer messages cancelled since start.
    """

    timer_pending: int
    timer_cursor: int
    delivered: int
    recalled: int


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
        self._wheel = wheel.TimerWheel(settings.timer_pending_max)
        self._log, records = timer_log.TimerLog.open(root)
        self._cursor = self._replay(records)
        self._offsets_path = persistence.config_path(root, OFFSETS_FILE_NAME)
        self._level_offsets = _load_level_offsets(self._offsets_path)
        self._offsets_dirty = False
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
        """Replay the timer log, load the level offsets, read the timer topic on.

        Raises:
            OSError: the timer log cannot be opened.
            CorruptMetadataError: ``delayOffset.json`` does not parse.
        """
        service = cls(root=root, store=store, settings=settings, time=time, notify=notify)
        service.enqueue_timer_messages()
        _log.info(
            "schedule: %d timer messages pending, timer cursor %d, level offsets %s",
            len(service._wheel),
            service._cursor,
            service._level_offsets,
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
        if self._wheel.full:
            raise errors.TooManyRequestsError(
                f"{len(self._wheel)} timer messages are pending, the limit; retry later"
            )
        return _parked(request, topics.TIMER_TOPIC, _TIMER_QUEUE, props)

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

        Raises:
            NotFoundError: no such message is waiting (unknown, delivered or recalled).
        """
        self.enqueue_timer_messages()
        removed = self._wheel.cancel(message_id, delivery_ms)
        if not removed:
            raise errors.NotFoundError(
                f"no scheduled message {message_id} due at {delivery_ms} is waiting: it was "
                "delivered, recalled, or never scheduled here"
            )
        self._log.append([_record(K.RECALLED, e) for e in removed])
        self.recalled += len(removed)

    # -- the loop ----------------------------------------------------------------------------

    async def run(self) -> None:
        """Deliver due messages every ``tick_ms`` until cancelled (the server's task group)."""
        while True:
            try:
                await self.run_once()
            except (OSError, errors.ArianeError):
                _log.exception("schedule: delivery round failed; retrying")
            await asyncio.sleep(self._settings.tick_ms / 1000)

    async def run_once(self) -> int:
        """One round: read new timer messages, deliver what is due. Returns how many."""
        self.enqueue_timer_messages()
        count = await self._deliver_timers()
        count += await self._deliver_levels()
        self._persist_level_offsets()
        if self._log.size_bytes > self._settings.timer_log_bytes_max:
            self._compact()
        return count

    def stats(self) -> ScheduleStats:
        """Counts for metrics and tests."""
        return ScheduleStats(len(self._wheel), self._cursor, self.delivered, self.recalled)

    def level_offsets(self) -> dict[int, ids.QueueOffset]:
        """Delay level -> queue offset of its next undelivered message (a copy, for metrics)."""
        return dict(self._level_offsets)

    def next_timer_due_ms(self) -> int | None:
        """Delivery time of the earliest timer message in the wheel, ms since the epoch;
        ``None`` when the wheel is empty (for metrics)."""
        return self._wheel.next_due_ms()

    def close(self) -> None:
        """Persist the level offsets and close the timer log."""
        self._persist_level_offsets()
        self._log.close()

    # -- timer messages ----------------------------------------------------------------------

    def _replay(self, records: list[timer_codec.TimerRecord]) -> ids.QueueOffset:
        live: dict[int, timer_codec.TimerRecord] = {}
        cursor = 0
        for record in records:
            if record.kind is K.CURSOR:
                cursor = max(cursor, record.queue_offset)
            elif record.kind is K.ENQUEUED:
                live[record.queue_offset] = record
                cursor = max(cursor, record.queue_offset + 1)
            else:
                live.pop(record.queue_offset, None)
        for offset in sorted(live):
            r = live[offset]
            entry = wheel.WheelEntry(
                r.delivery_ms, offset, r.commit_log_offset, r.size_bytes, r.message_id
            )
            if not self._wheel.add(entry):  # a smaller wheel than before: read the rest again
                return ids.QueueOffset(offset)
        return ids.QueueOffset(cursor)

    def enqueue_timer_messages(self) -> int:
        """Read the timer topic from the cursor into the wheel while it has room.

        Mirrors RocketMQ's ``TimerEnqueueGetService``. Returns how many were added.
        """
        added: list[timer_codec.TimerRecord] = []
        while not self._wheel.full:
            room = self._wheel.capacity - len(self._wheel)
            result = self._store.get_messages(
                topics.TIMER_TOPIC,
                _TIMER_QUEUE,
                self._cursor,
                max_count=min(room, self._settings.deliver_batch_max),
                max_bytes=READ_BYTES_MAX,
            )
            for stored in result.messages:
                entry = _wheel_entry(stored)
                if entry is not None and self._wheel.add(entry):
                    added.append(_record(K.ENQUEUED, entry))
            if result.next_begin_offset <= self._cursor:
                break
            self._cursor = result.next_begin_offset
            if not result.messages:
                break
        if added:
            self._log.append(added)
        return len(added)

    async def _deliver_timers(self) -> int:
        now_ms = self._clock.now_ms()
        due = self._wheel.take_due(now_ms, self._settings.deliver_batch_max)
        if not due:
            return 0
        requests: list[commit_log.AppendRequest] = []
        kept: list[wheel.WheelEntry] = []
        finished: list[wheel.WheelEntry] = []  # delivered, or unreadable (logged): done with
        for entry in due:
            request = self._restored(entry.commit_log_offset, entry.size_bytes)
            if request is None:
                finished.append(entry)
            else:
                requests.append(request)
                kept.append(entry)
        done = await self._write(requests)
        for entry, ok in zip(kept, done, strict=True):
            if ok:
                finished.append(entry)
            else:
                self._wheel.add(entry)  # still due: retried next round
        self._log.append([_record(K.DELIVERED, e) for e in finished])
        return done.count(True)

    def _restored(self, commit_log_offset: int, size_bytes: int) -> commit_log.AppendRequest | None:
        found = self._store.get_message(ids.CommitLogOffset(commit_log_offset), size_bytes)
        if found.status is not record_reader.LookupStatus.FOUND or found.message is None:
            _log.error(
                "schedule: parked message at %d is unreadable (%s); it cannot be delivered",
                commit_log_offset,
                found.status.value,
            )
            return None
        return restore(found.message)

    async def _write(self, requests: list[commit_log.AppendRequest]) -> list[bool]:
        """Store due messages in their topics; per request whether it was stored."""
        if not requests:
            return []
        results = await self._store.put_messages(requests)
        done = [r.status.is_stored for r in results]
        failed = done.count(False)
        if failed:
            _log.warning(
                "schedule: %d due messages not stored (%s); retrying",
                failed,
                next(r.status.value for r in results if not r.status.is_stored),
            )
        stored_topics = {q.message.topic for q, ok in zip(requests, done, strict=True) if ok}
        self.delivered += len(requests) - failed
        if stored_topics:
            self._notify(stored_topics)
        return done

    def _compact(self) -> None:
        records = [timer_codec.TimerRecord(K.CURSOR, 0, self._cursor)]
        records += [_record(K.ENQUEUED, e) for e in self._wheel.entries()]
        self._log.rewrite(records)
        _log.info("timer log compacted to %d bytes", self._log.size_bytes)

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
            done = await self._write([restore(m) for m in due])
            ok_prefix = done.index(False) if False in done else len(done)
            if ok_prefix:
                self._advance(level, ids.QueueOffset(due[ok_prefix - 1].queue_offset + 1))
            count += ok_prefix
        return count

    def _advance(self, level: int, offset: ids.QueueOffset) -> None:
        if self._level_offsets.get(level, 0) != offset:
            self._level_offsets[level] = offset
            self._offsets_dirty = True

    def _persist_level_offsets(self) -> None:
        if self._offsets_dirty:
            table = {str(level): o for level, o in sorted(self._level_offsets.items())}
            persistence.save_json(self._offsets_path, {"offsetTable": table})
            self._offsets_dirty = False


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


def _wheel_entry(stored: message.StoredMessage) -> wheel.WheelEntry | None:
    raw = stored.properties.get(P.TIMER_DELIVER_MS, "")
    if not raw.isdigit():
        _log.error("timer message at %d has no TIMER_DELIVER_MS", stored.commit_log_offset)
        return None
    return wheel.WheelEntry(
        delivery_ms=int(raw),
        queue_offset=stored.queue_offset,
        commit_log_offset=stored.commit_log_offset,
        size_bytes=stored.store_size_bytes,
        message_id=message.message_id_of(stored),
    )


def _record(kind: timer_codec.Kind, entry: wheel.WheelEntry) -> timer_codec.TimerRecord:
    return timer_codec.TimerRecord(
        kind,
        entry.delivery_ms,
        entry.queue_offset,
        entry.commit_log_offset,
        entry.size_bytes,
        entry.message_id,
    )


def _load_level_offsets(path: pathlib.Path) -> dict[int, ids.QueueOffset]:
    raw = persistence.load_json(path)
    if raw is None:
        return {}
    table = persistence.expect_object(raw.get("offsetTable", {}), "delayOffset.offsetTable")
    return {
        int(level): ids.QueueOffset(persistence.expect_int(o, f"delayOffset.offsetTable.{level}"))
        for level, o in table.items()
        if level.isdigit()
    }
