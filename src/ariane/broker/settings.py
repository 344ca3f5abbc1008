"""Settings of the broker's pure core: topics, groups, offsets, pop bookkeeping, filters, polling.

Each group is a frozen dataclass with a docstring per field giving its unit and the RocketMQ
setting (and default) it mirrors; every count, size and interval has a bound. ``__post_init__``
refuses values outside their bounds with ``ValueError`` so a bad configuration fails once, at
load time, in the composition root. ``CoreSettings`` bundles the groups; the broker's full
settings compose it.
"""

from __future__ import annotations

import dataclasses

from ariane.common import limits


@dataclasses.dataclass(frozen=True, slots=True)
class TopicSettings:
    """Topic table limits and auto-create (RocketMQ ``BrokerConfig``/``TopicValidator``)."""

    queue_nums_max: int = 1024
    """Most read or write queues one topic may have on this broker, a count (RocketMQ has no
    hard limit; 1024 keeps the per-queue tables small)."""

    topic_count_max: int = 10_000
    """Most topics (including ``%RETRY%``/``%DLQ%`` topics) the table holds, a count."""

    auto_create_topic_enable: bool = False
    """Create an unknown topic when a producer sends to it (RocketMQ ``autoCreateTopicEnable``,
    default true there; off in Ariane so a typo is a TOPIC_NOT_FOUND, not a new topic)."""

    default_queue_nums: int = limits.DEFAULT_TOPIC_QUEUE_NUMS
    """Read and write queues of an auto-created topic (``defaultTopicQueueNums`` = 8)."""

    def __post_init__(self) -> None:
        limits.check_range("queue_nums_max", self.queue_nums_max, 1, 65_536)
        limits.check_range("topic_count_max", self.topic_count_max, 1, 1_000_000)
        limits.check_range("default_queue_nums", self.default_queue_nums, 1, self.queue_nums_max)


@dataclasses.dataclass(frozen=True, slots=True)
class SubscriptionSettings:
    """Subscription-group table limits (RocketMQ ``SubscriptionGroupManager``)."""

    auto_create_subscription_group: bool = True
    """Create a group's config with defaults on its first use (RocketMQ
    ``autoCreateSubscriptionGroup``, default true)."""

    group_count_max: int = 10_000
    """Most subscription groups the table holds, a count."""

    def __post_init__(self) -> None:
        limits.check_range("group_count_max", self.group_count_max, 1, 1_000_000)


@dataclasses.dataclass(frozen=True, slots=True)
class OffsetSettings:
    """Consumer-offset table (RocketMQ ``ConsumerOffsetManager``)."""

    offset_entries_max: int = 1_000_000
    """Most (group, topic, queue id) entries in the table, a count."""

    persist_interval_ms: int = 5_000
    """How often the server calls ``persist()``, in ms (``flushConsumerOffsetInterval`` = 5 s)."""

    def __post_init__(self) -> None:
        limits.check_range("offset_entries_max", self.offset_entries_max, 1, 100_000_000)
        limits.check_range("persist_interval_ms", self.persist_interval_ms, 100, 3_600_000)


@dataclasses.dataclass(frozen=True, slots=True)
class PopSettings:
    """Per-group bounds of invisible-time bookkeeping (RocketMQ 5 POP consumption)."""

    inflight_messages_max: int = 100_000
    """Most messages of one group that are in flight or held back (FIFO) at once, a count;
    above it a receive answers TOO_MANY_REQUESTS (RocketMQ bounds pop by
    ``popThresholdForQueue`` = 96 per client queue; this is the broker-side table bound)."""

    pop_span_max: int = 1_000_000
    """Most queue offsets between a queue's committed offset and its scan cursor, a count
    (the analogue of ``consumeConcurrentlyMaxSpan`` = 2000 of the 4.x push consumer): one slow
    message may hold the committed offset back by at most this many messages."""

    journal_bytes_max: int = 32 * 1024 * 1024
    """Size of the POP journal (``<store>/pop/popJournal``) at which it is compacted inline,
    bytes; the background revive loop compacts it at half this. The live state it is
    rewritten to is bounded by ``inflight_messages_max`` records per group (RocketMQ bounds its
    revive topic by retention instead)."""

    def __post_init__(self) -> None:
        limits.check_range("inflight_messages_max", self.inflight_messages_max, 1, 10_000_000)
        limits.check_range("pop_span_max", self.pop_span_max, 1, 100_000_000)
        limits.check_range("journal_bytes_max", self.journal_bytes_max, 64 * 1024, 64 * 1024 * 1024)


@dataclasses.dataclass(frozen=True, slots=True)
class FilterSettings:
    """Bounds of subscription filter expressions (tag and SQL92)."""

    expression_chars_max: int = 4_096
    """Longest filter expression accepted, in characters."""

    expression_depth_max: int = 32
    """Deepest nesting of parentheses/NOT/AND/OR in an SQL92 expression, a count."""

    in_list_items_max: int = 256
    """Most literals in one ``IN (...)`` list, a count."""

    tags_max: int = 256
    """Most tags in one ``a || b || c`` expression, a count."""

    def __post_init__(self) -> None:
        limits.check_range("expression_chars_max", self.expression_chars_max, 1, 1_000_000)
        limits.check_range("expression_depth_max", self.expression_depth_max, 1, 256)
        limits.check_range("in_list_items_max", self.in_list_items_max, 1, 100_000)
        limits.check_range("tags_max", self.tags_max, 1, 100_000)


@dataclasses.dataclass(frozen=True, slots=True)
class LongPollingSettings:
    """Parking of receive requests that found nothing (RocketMQ ``PopLongPollingService``)."""

    parked_requests_max: int = 10_000
    """Most receive requests parked at once, a count; one more answers TOO_MANY_REQUESTS
    (RocketMQ ``maxPopPollingSize`` = 100000 per broker)."""

    notify_keys_max: int = 100_000
    """Most keys whose last-notify stamp is remembered, a count; older stamps fold into one
    floor stamp, which can only cause a spurious wake-up, never a lost one."""

    def __post_init__(self) -> None:
        limits.check_range("parked_requests_max", self.parked_requests_max, 1, 10_000_000)
        limits.check_range("notify_keys_max", self.notify_keys_max, 1, 10_000_000)


@dataclasses.dataclass(frozen=True, slots=True)
class CoreSettings:
    """All settings of the broker's pure core, grouped by concern."""

    topics: TopicSettings = dataclasses.field(default_factory=TopicSettings)
    """Topic table."""

    subscriptions: SubscriptionSettings = dataclasses.field(default_factory=SubscriptionSettings)
    """Subscription-group table."""

    offsets: OffsetSettings = dataclasses.field(default_factory=OffsetSettings)
    """Consumer-offset table."""

    pop: PopSettings = dataclasses.field(default_factory=PopSettings)
    """Invisible-time bookkeeping."""

    filters: FilterSettings = dataclasses.field(default_factory=FilterSettings)
    """Filter expressions."""

    long_polling: LongPollingSettings = dataclasses.field(default_factory=LongPollingSettings)
    """Receive parking."""
