"""Per-topic and per-group message rates, RocketMQ's ``BrokerStatsManager`` for ``mqadmin``.

RocketMQ counts, per stats name and key, a value and a number of calls ("times"), and answers
``VIEW_BROKER_STATS_DATA`` (315, ``mqadmin statsAll``), ``topicStatus``'s ``topicPutTps`` and
``consumerProgress``'s ``consumeTps`` from three windows of them: about the last minute, hour
and day, each as ``sum`` (the value's growth in the window), ``tps`` (sum per second) and
``avgpt`` (sum per call). The names and keys Ariane counts here (``KEYED_STATS``):

================  ===============  =============================================================
name              key              value, counted at
================  ===============  =============================================================
TOPIC_PUT_NUMS    topic            messages stored by one send (the send core, both protocols)
TOPIC_PUT_SIZE    topic            their body bytes
GROUP_GET_NUMS    topic@group      messages one pull or POP receive handed to the group
GROUP_GET_SIZE    topic@group      their body bytes
SNDBCK_PUT_NUMS   topic@group      1 per classic send-back (``CONSUMER_SEND_MSG_BACK``) of a
                                   message of ``topic`` (its origin topic)
================  ===============  =============================================================

``BROKER_PUT_NUMS`` and ``BROKER_GET_NUMS`` (key: the cluster name) are not kept here: they are
the broker's message totals (``runtime.Counters.messages_in``/``messages_out``, the very counters
``/metrics`` exports), sampled by ``remoting.rates.TpsSampler``: one source of truth.

RocketMQ samples every item's cumulative value every 10 s, 10 min and 1 h into lists it keeps
forever (no cap on keys; items of deleted topics and groups are dropped), so a figure is up
to 10 s old and a new item reads 0 until its first sample. Here each item holds fixed rings of
buckets instead (``WINDOWS``: 6 x 10 s, 6 x 10 min, 24 x 1 h), added to as traffic happens, so a
figure includes the message stored a moment ago, and nothing runs in the background.

Invariants: a table holds at most ``KEYS_MAX`` keys, each a fixed ``array`` of
``(columns + 1) x 36`` int64 cells plus three bucket epochs (about 1.4 KiB with its key), so
a table never exceeds ~1.4 MiB and the three tables ~4 MiB; adding a key to a full table
evicts the least recently updated one, and items idle longer than the day window (all of
whose buckets are then zero) go first, whatever the size. A ring only moves forward: a bucket
is zeroed when its time comes round again. Counting never raises and never blocks; everything
runs on the broker's event loop.
"""

from __future__ import annotations

import array
import collections
import dataclasses
import enum
import time
from collections.abc import Callable

KEYS_MAX = 1024
"""Most keys per table (topics, or topic@group pairs); the least recently updated one goes."""


@dataclasses.dataclass(frozen=True, slots=True)
class Window:
    """One of RocketMQ's three windows, as a ring of buckets.

    Attributes:
        bucket_ms: the time one bucket covers, ms.
        buckets: how many buckets the ring holds (the window is ``bucket_ms * buckets``).
    """

    bucket_ms: int
    buckets: int

    @property
    def span_ms(self) -> int:
        """The time the whole ring covers, ms."""
        return self.bucket_ms * self.buckets


WINDOWS = (Window(10_000, 6), Window(600_000, 6), Window(3_600_000, 24))
"""RocketMQ's minute, hour and day windows (``StatsItem.getStatsDataInMinute/Hour/Day``)."""

_BUCKETS_TOTAL = sum(w.buckets for w in WINDOWS)
_BASES = tuple(sum(w.buckets for w in WINDOWS[:index]) for index in range(len(WINDOWS)))
"""Where each window's ring starts in an item's cells, in buckets."""
_RINGS = tuple(
    (index, base, w.bucket_ms, w.buckets)
    for index, (base, w) in enumerate(zip(_BASES, WINDOWS, strict=True))
)
"""(index, base, bucket_ms, buckets) per window, for the counting loop."""
_IDLE_MS = WINDOWS[-1].span_ms
"""An item not updated for this long has only zero buckets left: it may go."""


class StatsName(enum.StrEnum):
    """The stats names of ``BrokerStatsManager`` that Ariane answers (``Stats`` in RocketMQ)."""

    TOPIC_PUT_NUMS = "TOPIC_PUT_NUMS"
    TOPIC_PUT_SIZE = "TOPIC_PUT_SIZE"
    GROUP_GET_NUMS = "GROUP_GET_NUMS"
    GROUP_GET_SIZE = "GROUP_GET_SIZE"
    SNDBCK_PUT_NUMS = "SNDBCK_PUT_NUMS"
    BROKER_PUT_NUMS = "BROKER_PUT_NUMS"
    BROKER_GET_NUMS = "BROKER_GET_NUMS"


@dataclasses.dataclass(frozen=True, slots=True)
class Snapshot:
    """One window of one item (RocketMQ ``StatsSnapshot``, ``BrokerStatsItem``).

    Attributes:
        sum: the value's growth over the window (messages, or bytes for ``*_SIZE``).
        tps: ``sum`` per second over the time the window covers (at least one bucket).
        avgpt: ``sum`` per call counted in the window (0.0 without calls).
    """

    sum: int
    tps: float
    avgpt: float


ZERO = Snapshot(0, 0.0, 0.0)


@dataclasses.dataclass(frozen=True, slots=True)
class StatsData:
    """The three windows of one item (RocketMQ ``BrokerStatsData``)."""

    minute: Snapshot
    hour: Snapshot
    day: Snapshot


def stats_key(topic: str, group: str) -> str:
    """RocketMQ's ``buildStatsKey(topic, group)``: ``topic@group`` (names never hold ``@``)."""
    return f"{topic}@{group}"


class _Item:
    """One key's rings: per bucket ``columns`` values and the call count, flat in ``cells``."""

    __slots__ = ("cells", "created_ms", "epochs", "touched_ms")

    def __init__(self, stride: int, now_ms: int) -> None:
        self.cells = array.array("q", bytes(8 * stride * _BUCKETS_TOTAL))
        self.epochs = [now_ms // w.bucket_ms for w in WINDOWS]
        self.created_ms = now_ms
        self.touched_ms = now_ms


class StatsTable:
    """Windowed counts of ``columns`` values per key, at most ``KEYS_MAX`` keys.

    Args:
        columns: how many values each call adds (e.g. messages and bytes).
        now_ms: a monotonic clock in ms (tests pass their own).
    """

    def __init__(self, columns: int, now_ms: Callable[[], int]) -> None:
        self._columns = columns
        self._stride = columns + 1  # the values, then the call count
        self._now_ms = now_ms
        self._items: collections.OrderedDict[str, _Item] = collections.OrderedDict()

    def __len__(self) -> int:
        return len(self._items)

    def add(self, key: str, *values: int) -> None:
        """Count one call that added ``values`` (one per column) under ``key``."""
        now_ms = self._now_ms()
        item = self._items.get(key)
        if item is None:
            item = self._create(key, now_ms)
        else:
            self._items.move_to_end(key)
            item.touched_ms = now_ms
        cells, stride, epochs = item.cells, self._stride, item.epochs
        for index, base, bucket_ms, buckets in _RINGS:
            epoch = now_ms // bucket_ms
            if epoch != epochs[index]:
                self._advance(item, index, now_ms)
            at = (base + epoch % buckets) * stride
            for column, value in enumerate(values):
                cells[at + column] += value
            cells[at + self._columns] += 1

    def _create(self, key: str, now_ms: int) -> _Item:
        items = self._items
        while items and (
            len(items) >= KEYS_MAX or now_ms - next(iter(items.values())).touched_ms > _IDLE_MS
        ):
            items.popitem(last=False)
        item = items[key] = _Item(self._stride, now_ms)
        return item

    def _advance(self, item: _Item, index: int, now_ms: int) -> None:
        """Move window ``index``'s ring to now, zeroing the buckets whose time came round
        again."""
        window = WINDOWS[index]
        epoch = now_ms // window.bucket_ms
        last = item.epochs[index]
        if epoch > last:
            base = _BASES[index]
            stride = self._stride
            for passed in range(last + 1, min(epoch, last + window.buckets) + 1):
                at = (base + passed % window.buckets) * stride
                item.cells[at : at + stride] = array.array("q", bytes(8 * stride))
            item.epochs[index] = epoch

    def view(self, key: str, column: int) -> StatsData | None:
        """The three windows of ``column`` under ``key``; ``None`` for an unknown key."""
        item = self._items.get(key)
        if item is None:
            return None
        now_ms = self._now_ms()
        found = [self._window(item, index, column, now_ms) for index in range(len(WINDOWS))]
        return StatsData(*found)

    def _window(self, item: _Item, index: int, column: int, now_ms: int) -> Snapshot:
        window = WINDOWS[index]
        self._advance(item, index, now_ms)
        base = _BASES[index]
        stride, cells = self._stride, item.cells
        total = calls = 0
        for slot in range(window.buckets):
            at = (base + slot) * stride
            total += cells[at + column]
            calls += cells[at + self._columns]
        oldest_start_ms = (now_ms // window.bucket_ms - window.buckets + 1) * window.bucket_ms
        lived_ms = max(window.bucket_ms, now_ms - item.created_ms)
        span_ms = max(1, min(now_ms - oldest_start_ms, lived_ms))
        return Snapshot(total, total * 1000.0 / span_ms, total / calls if calls else 0.0)

    def forget(self, matches: Callable[[str], bool]) -> int:
        """Drop the keys ``matches`` accepts (a deleted topic's or group's); how many."""
        gone = [key for key in self._items if matches(key)]
        for key in gone:
            del self._items[key]
        return len(gone)


def monotonic_ms() -> int:
    """``time.monotonic`` in whole ms."""
    return time.monotonic_ns() // 1_000_000


class TrafficStats:
    """The keyed stats of one broker (``BrokerStatsManager`` without the broker totals).

    Args:
        now_ms: a monotonic clock in ms (tests pass their own).
    """

    def __init__(self, now_ms: Callable[[], int] = monotonic_ms) -> None:
        self._puts = StatsTable(2, now_ms)
        self._gets = StatsTable(2, now_ms)
        self._send_backs = StatsTable(1, now_ms)

    def put(self, topic: str, messages: int, size_bytes: int) -> None:
        """One send stored ``messages`` of ``size_bytes`` body bytes in ``topic``."""
        if messages > 0:
            self._puts.add(topic, messages, size_bytes)

    def got(self, group: str, topic: str, messages: int, size_bytes: int) -> None:
        """One pull or receive of ``group`` handed out ``messages`` of ``topic``."""
        if messages > 0:
            self._gets.add(stats_key(topic, group), messages, size_bytes)

    def sent_back(self, group: str, topic: str) -> None:
        """``group`` sent a message of ``topic`` back for a retry."""
        self._send_backs.add(stats_key(topic, group), 1)

    def view(self, name: str, key: str) -> StatsData | None:
        """The windows of stats ``name`` under ``key`` (``VIEW_BROKER_STATS_DATA``); ``None``
        for a name not kept here or a key never counted (RocketMQ: "not exist")."""
        table, column = self._table_of(name)
        return None if table is None else table.view(key, column)

    def _table_of(self, name: str) -> tuple[StatsTable | None, int]:
        match name:
            case StatsName.TOPIC_PUT_NUMS | StatsName.TOPIC_PUT_SIZE:
                return self._puts, 0 if name == StatsName.TOPIC_PUT_NUMS else 1
            case StatsName.GROUP_GET_NUMS | StatsName.GROUP_GET_SIZE:
                return self._gets, 0 if name == StatsName.GROUP_GET_NUMS else 1
            case StatsName.SNDBCK_PUT_NUMS:
                return self._send_backs, 0
        return None, 0

    def topic_put_tps(self, topic: str) -> float:
        """Messages stored in ``topic`` per second over about the last minute
        (``BrokerStatsManager.tpsTopicPutNums``)."""
        found = self._puts.view(topic, 0)
        return found.minute.tps if found is not None else 0.0

    def group_get_tps(self, group: str, topic: str) -> float:
        """Messages of ``topic`` handed to ``group`` per second over about the last minute
        (``tpsGroupGetNums``)."""
        found = self._gets.view(stats_key(topic, group), 0)
        return found.minute.tps if found is not None else 0.0

    def forget_topic(self, topic: str) -> None:
        """Drop a deleted topic's items (``onTopicDeleted``): a topic created again under the
        name starts from zero."""
        self._puts.forget(lambda key: key == topic)
        prefix = f"{topic}@"
        self._gets.forget(lambda key: key.startswith(prefix))
        self._send_backs.forget(lambda key: key.startswith(prefix))

    def forget_group(self, group: str) -> None:
        """Drop a deleted group's items (``onGroupDeleted``)."""
        suffix = f"@{group}"
        self._gets.forget(lambda key: key.endswith(suffix))
        self._send_backs.forget(lambda key: key.endswith(suffix))
