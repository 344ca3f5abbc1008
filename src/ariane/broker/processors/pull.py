"""Pull by offset: non-destructive range reads of one queue, and consumer offsets per queue.

Mirrors RocketMQ 5.3's ``PullMessageProcessor`` (range read with long polling and filters),
``ConsumerOffsetManager`` (``QUERY_CONSUMER_OFFSET`` / ``UPDATE_CONSUMER_OFFSET``) and
``getOffsetInQueueByTime`` / ``GET_MIN_OFFSET`` / ``GET_MAX_OFFSET`` (``QueryOffset``), as the
v2 ``PullMessage``, ``GetOffset``, ``UpdateOffset`` and ``QueryOffset`` RPCs serve them:

* a pull reads ``[offset, next_offset)`` of one queue and changes nothing on the broker: the
  same offset read again returns the same messages (retention aside). Offsets whose message
  the filter rejects (tag hash first, then the full tag/SQL92 filter) are skipped, and
  ``next_offset`` still moves past them, so a filtered read never stalls;
* a pull at the queue's max offset (nothing new) parks on the topic (``LongPolling``) in slices
  of ``poll_slice_ms`` until a send wakes it or ``poll_s`` ends, then answers NO_NEW_MESSAGE
  with ``next_offset`` = the offset asked for;
* an offset below the queue's min offset or above its max offset answers OFFSET_ILLEGAL
  (RocketMQ ``PULL_OFFSET_MOVED`` for ``OFFSET_TOO_SMALL`` / ``OFFSET_OVERFLOW_BADLY`` /
  ``NO_MESSAGE_IN_QUEUE``) with ``next_offset`` corrected to the min (too small) or the max
  (too big), as RocketMQ 5's ``nextOffsetCorrection`` does; the caller decides whether to
  jump (no silent rewind to 0);
* one pull scans at most ``PULL_SCAN_UNITS_MAX`` ConsumeQueue units and returns at most
  ``batch_size`` (≤ ``PULL_BATCH_SIZE_MAX``) messages and about ``message_bytes_max`` body
  bytes (at least one message when any matches);
* committed offsets live in the broker's ``ConsumerOffsetManager``, the same table POP
  consumption commits to; an update is checked against the queue's [min, max] and also moves
  the group's POP progress on that queue when it tracks it (as an admin reset does).

Time comes from the injected clock only (long-poll deadlines use its monotonic time).
"""

from __future__ import annotations

import dataclasses
import enum

from ariane.broker import filters, settings
from ariane.broker.pop import service as pop_service_mod
from ariane.broker.processors import consume, long_polling, slave_read
from ariane.broker.tables import offsets, subscriptions, topic_config
from ariane.common import clock, errors, ids, message
from ariane.store import message_store

GMS = message_store.GetMessageStatus

PULL_BATCH_SIZE_MAX = 1_024
"""Most messages one pull returns (the store's ``get_message_count_max`` may lower it)."""

PULL_SCAN_UNITS_MAX = 64_000
"""Most ConsumeQueue units one pull scans past filtered-out or removed offsets before it
answers with what it has (RocketMQ ``maxFilterMessageCount`` is 16,000 per store read)."""


class PullStatus(enum.Enum):
    """Outcome of a pull (RocketMQ ``PullStatus``)."""

    FOUND = "FOUND"
    """Messages follow; ``next_offset`` is past the last one read or skipped."""
    NO_NEW_MESSAGE = "NO_NEW_MESSAGE"
    """Nothing matched before the poll time ended (``PULL_NOT_FOUND`` / ``NO_MATCHED_MSG``)."""
    OFFSET_ILLEGAL = "OFFSET_ILLEGAL"
    """The offset is outside [min, max]; ``next_offset`` is the corrected one."""


class OffsetPolicy(enum.Enum):
    """Which offset ``query_offset`` answers (v2 ``QueryOffsetPolicy``)."""

    BEGINNING = "BEGINNING"
    """The queue's min offset (``GET_MIN_OFFSET``)."""
    END = "END"
    """The queue's max offset, the next to be written (``GET_MAX_OFFSET``)."""
    TIMESTAMP = "TIMESTAMP"
    """The first offset stored at or after a time (``SEARCH_OFFSET_BY_TIMESTAMP``)."""


@dataclasses.dataclass(frozen=True, slots=True)
class PullRequest:
    """A validated pull.

    Attributes:
        group: the consumer group, or ``None`` to read without one.
        topic: the topic.
        queue_id: the queue.
        offset: the first queue offset wanted.
        message_filter: the subscription's filter.
        batch_size: most messages wanted, 1 .. ``PULL_BATCH_SIZE_MAX``.
        poll_s: how long to wait when nothing is new, seconds (0: answer at once).
    """

    group: ids.GroupName | None
    topic: ids.TopicName
    queue_id: ids.QueueId
    offset: ids.QueueOffset
    message_filter: filters.MessageFilter
    batch_size: int
    poll_s: float


@dataclasses.dataclass(frozen=True, slots=True)
class PullResult:
    """What a pull read (RocketMQ ``PullResult``).

    Attributes:
        status: the outcome.
        messages: the messages, in queue-offset order.
        next_offset: where the next pull should start.
        min_offset: the queue's min offset when it was read.
        max_offset: the queue's max offset (next to be written) when it was read.
        cold: the pull read data outside the in-memory window (RocketMQ
            ``suggestPullingFromSlave``; ``slave_read.suggest_pulling_from_slave``).
        records: the stored bytes of each message, same order (``GetMessageResult.records``):
            what a classic pull sends.
    """

    status: PullStatus
    messages: tuple[message.StoredMessage, ...]
    next_offset: ids.QueueOffset
    min_offset: ids.QueueOffset
    max_offset: ids.QueueOffset
    cold: bool = False
    records: tuple[memoryview, ...] = ()


@dataclasses.dataclass(frozen=True, slots=True)
class QueueRange:
    """What one queue holds (admin ``TopicOffset`` + ``GET_EARLIEST_MSG_STORETIME``).

    Attributes:
        min_offset: the first readable queue offset.
        max_offset: the next queue offset to be written.
        earliest_store_timestamp_ms: store time of the message at ``min_offset``, ms since the
            epoch; ``None`` when the queue is empty or that message is unreadable.
    """

    min_offset: ids.QueueOffset
    max_offset: ids.QueueOffset
    earliest_store_timestamp_ms: int | None


class PullProcessor:
    """Pulls, offset queries and committed offsets for every queue of one broker.

    Args:
        store: queue reads, min/max offsets, time search.
        topic_table: topic configs (``require``).
        group_table: subscription group configs (``require``).
        offset_table: committed offsets (``ConsumerOffsetManager``).
        pop_service: moves a group's POP progress when an update names a queue it tracks.
        polling: long polling (pulls park on their topic; sends wake them).
        counters: totals for the admin API (``messages_out``, ``bytes_out``).
        receive: ``poll_slice_ms`` and ``message_bytes_max``.
        time: the clock (long-poll deadlines use its monotonic time).
        in_memory_window_bytes: how far behind the CommitLog's end a pull still reads "in
            memory" (``slave_read.in_memory_window_bytes``); further back, ``PullResult.cold``.
    """

    def __init__(
        self,
        *,
        store: message_store.MessageStore,
        topic_table: topic_config.TopicConfigManager,
        group_table: subscriptions.SubscriptionGroupManager,
        offset_table: offsets.ConsumerOffsetManager,
        pop_service: pop_service_mod.PopService,
        polling: long_polling.LongPolling,
        counters: consume.ConsumeCounters,
        receive: settings.ReceiveSettings,
        time: clock.Clock,
        in_memory_window_bytes: int,
    ) -> None:
        self._window_bytes = in_memory_window_bytes
        self._store = store
        self._topics = topic_table
        self._groups = group_table
        self._offsets = offset_table
        self._pop = pop_service
        self._polling = polling
        self._counters = counters
        self._receive = receive
        self._clock = time

    def _queue(self, topic: str, queue_id: int) -> topic_config.TopicConfig:
        """The topic's config once ``queue_id`` is one of its read queues.

        Raises:
            TopicNotFoundError: unknown topic.
            ForbiddenError: the topic is not readable on this broker.
            BadRequestError: ``queue_id`` is not one of its read queues.
        """
        found = self._topics.require(topic)
        if not found.readable:
            raise errors.ForbiddenError(f"topic {topic!r} is not readable on this broker")
        if not 0 <= queue_id < found.read_queue_nums:
            raise errors.BadRequestError(
                f"queue id {queue_id} of topic {topic!r} is outside 0..{found.read_queue_nums - 1}"
            )
        return found

    # -- pull --------------------------------------------------------------------------------

    async def pull(self, request: PullRequest) -> PullResult:
        """Read messages of one queue from ``request.offset``, long polling when none are new.

        Raises:
            TopicNotFoundError, ForbiddenError, BadRequestError: as ``_queue`` says; also
                ForbiddenError when the group may not consume.
            ConsumerGroupNotFoundError: unknown group and auto-create is off.
            TooManyRequestsError: too many requests are parked already.
        """
        if request.group is not None:
            group = self._groups.require(request.group)
            if not group.consume_enable:
                raise errors.ForbiddenError(f"consumer group {group.group!r} may not consume")
        self._queue(request.topic, request.queue_id)
        deadline_ms = self._clock.monotonic_ms() + round(request.poll_s * 1000)
        offset = request.offset
        while True:
            since = self._polling.snapshot()
            result = self._read(request, offset)
            remaining_ms = deadline_ms - self._clock.monotonic_ms()
            caught_up = result.next_offset >= result.max_offset
            if result.status is not PullStatus.NO_NEW_MESSAGE or not caught_up:
                break
            offset = result.next_offset
            if remaining_ms <= 0:
                break
            hold_s = min(self._receive.poll_slice_ms, remaining_ms) / 1000
            await self._polling.hold(request.topic, hold_s, since=since)
        size_bytes = sum(len(m.body) for m in result.messages)
        self._counters.messages_out += len(result.messages)
        self._counters.bytes_out += size_bytes
        if request.group is not None:
            traffic = self._counters.traffic
            traffic.got(request.group, request.topic, len(result.messages), size_bytes)
        cold = slave_read.suggest_pulling_from_slave(
            commit_log_max_offset=self._store.max_commit_log_offset,
            pulled_commit_log_offset=(
                result.messages[-1].commit_log_offset if result.messages else None
            ),
            window_bytes=self._window_bytes,
        )
        return dataclasses.replace(result, cold=cold) if cold else result

    def _read(self, request: PullRequest, offset: ids.QueueOffset) -> PullResult:
        """One pass over the queue from ``offset``: until messages are found, the max offset is
        reached or ``PULL_SCAN_UNITS_MAX`` units were scanned."""
        message_filter = request.message_filter
        prefilter = (
            message_filter.matches_tag_hash
            if isinstance(message_filter, filters.TagFilter) and not message_filter.matches_all
            else None
        )
        start = offset
        while True:
            result = self._store.get_messages(
                request.topic,
                request.queue_id,
                offset,
                max_count=request.batch_size,
                max_bytes=self._receive.message_bytes_max,
                tag_filter=prefilter,
            )
            low, high = result.min_offset, result.max_offset
            moved = _moved(result.status, offset, low, high)
            if moved is not None:
                return PullResult(PullStatus.OFFSET_ILLEGAL, (), moved, low, high)
            kept = [
                (m, r)
                for m, r in zip(result.messages, result.records, strict=True)
                if message_filter.matches(m.message.tags, m.properties)
            ]
            next_offset = max(offset, result.next_begin_offset)
            if kept:
                found = tuple(m for m, _ in kept)
                records = tuple(r for _, r in kept)
                return PullResult(PullStatus.FOUND, found, next_offset, low, high, records=records)
            done = next_offset >= high or next_offset - start >= PULL_SCAN_UNITS_MAX
            if done or next_offset == offset:
                return PullResult(PullStatus.NO_NEW_MESSAGE, (), next_offset, low, high)
            offset = next_offset

    # -- offsets -----------------------------------------------------------------------------

    def query_offset(
        self,
        topic: ids.TopicName,
        queue_id: ids.QueueId,
        policy: OffsetPolicy,
        timestamp_ms: int | None = None,
    ) -> ids.QueueOffset:
        """The queue's min or max offset, or the first offset stored at or after a time.

        TIMESTAMP mirrors RocketMQ ``getOffsetInQueueByTime`` (a binary search over the
        ConsumeQueue's store times): before the first message → the min offset; after the last
        → the max offset.

        Raises:
            TopicNotFoundError, ForbiddenError, BadRequestError: as ``_queue`` says; also
                BadRequestError for TIMESTAMP without a timestamp.
        """
        self._queue(topic, queue_id)
        if policy is OffsetPolicy.BEGINNING:
            return self._store.min_queue_offset(topic, queue_id)
        if policy is OffsetPolicy.END:
            return self._store.max_queue_offset(topic, queue_id)
        if timestamp_ms is None:
            raise errors.BadRequestError("QueryOffset TIMESTAMP needs a timestamp")
        return self._store.queue_offset_by_time(topic, queue_id, timestamp_ms)

    def queue_range(self, topic: ids.TopicName, queue_id: ids.QueueId) -> QueueRange:
        """Min and max offset and the earliest store time of one queue.

        Raises:
            TopicNotFoundError, ForbiddenError, BadRequestError: as ``_queue`` says.
        """
        self._queue(topic, queue_id)
        low = self._store.min_queue_offset(topic, queue_id)
        high = self._store.max_queue_offset(topic, queue_id)
        earliest = None
        if low < high:
            read = self._store.get_messages(topic, queue_id, low, max_count=1, max_bytes=1)
            if read.messages:
                earliest = read.messages[0].store_timestamp_ms
        return QueueRange(low, high, earliest)

    def get_offset(
        self, group: ids.GroupName, topic: ids.TopicName, queue_id: ids.QueueId
    ) -> ids.QueueOffset:
        """The group's committed offset on one queue (RocketMQ ``QUERY_CONSUMER_OFFSET``).

        Raises:
            TopicNotFoundError, ForbiddenError, BadRequestError: as ``_queue`` says.
            OffsetNotFoundError: the group never committed on that queue.
        """
        self._queue(topic, queue_id)
        found = self._offsets.query(group, topic, queue_id)
        if found is None:
            raise errors.OffsetNotFoundError(
                f"group {group!r} has no committed offset on {topic}/{queue_id}"
            )
        return found

    def update_offset(
        self,
        group: ids.GroupName,
        topic: ids.TopicName,
        queue_id: ids.QueueId,
        offset: ids.QueueOffset,
    ) -> None:
        """Commit the group's offset on one queue (RocketMQ ``UPDATE_CONSUMER_OFFSET``); it
        is persisted with the table (every ``persist_interval_ms`` and at shutdown).

        Raises:
            TopicNotFoundError, ForbiddenError, BadRequestError: as ``_queue`` says.
            ConsumerGroupNotFoundError: unknown group and auto-create is off.
            IllegalOffsetError: ``offset`` is outside the queue's [min, max].
            TooManyRequestsError: the offset table is full.
        """
        self._queue(topic, queue_id)
        name = self._groups.require(group).group
        low = self._store.min_queue_offset(topic, queue_id)
        high = self._store.max_queue_offset(topic, queue_id)
        if not low <= offset <= high:
            raise errors.IllegalOffsetError(
                f"offset {offset} of {topic}/{queue_id} is outside its range {low}..{high}"
            )
        self._offsets.commit(name, topic, queue_id, offset)
        state = self._pop.existing_state(name)
        if (
            state is not None
            and state.is_open(topic, queue_id)
            and state.committed_offset(topic, queue_id) != offset
        ):
            self._pop.reset_queues(name, topic, {queue_id: offset})


def _moved(
    status: message_store.GetMessageStatus, offset: int, low: int, high: int
) -> ids.QueueOffset | None:
    """The corrected offset when ``offset`` is out of range (RocketMQ ``PULL_OFFSET_MOVED``),
    else ``None``."""
    if status is GMS.OFFSET_TOO_SMALL:
        return ids.QueueOffset(low)
    if status is GMS.OFFSET_OVERFLOW_BADLY:
        return ids.QueueOffset(high)
    if status in (GMS.NO_MESSAGE_IN_QUEUE, GMS.NO_MATCHED_LOGIC_QUEUE) and offset > 0:
        return ids.QueueOffset(high)
    return None
