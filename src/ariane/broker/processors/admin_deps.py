"""What the admin processor is given: one broker's tables, POP service, store and counters.

``AdminDependencies`` is the explicit dependency set of ``processors.admin.AdminProcessor``
(no runtime locator); the two ``Protocol``s say what it needs of the broker's lag source and
counters, so tests can pass plain objects.
"""

from __future__ import annotations

import asyncio
import dataclasses
import pathlib
from collections.abc import Callable
from typing import Protocol

from ariane.broker.pop import service as pop_service_mod
from ariane.broker.tables import lite_topics, offsets, subscriptions, topic_config
from ariane.common import ids
from ariane.store import index_service, message_store


class QueueProgressView(Protocol):
    """A group's progress on one queue (``runtime.QueueProgress``)."""

    @property
    def broker_offset(self) -> ids.QueueOffset: ...
    @property
    def consumer_offset(self) -> ids.QueueOffset: ...
    @property
    def inflight(self) -> int: ...
    @property
    def lag(self) -> int: ...
    @property
    def scan_offset(self) -> ids.QueueOffset: ...


class QueueProgressSource(Protocol):
    """Where a group stands on a queue (``BrokerRuntime.queue_progress``)."""

    def __call__(
        self, group: ids.GroupName, topic: ids.TopicName, queue_id: ids.QueueId
    ) -> QueueProgressView: ...


class AdminCounters(Protocol):
    """The broker's totals since start (``runtime.Counters``), read by ``runtime_stats``."""

    messages_in: int
    bytes_in: int
    messages_out: int
    bytes_out: int
    sent_to_dlq: int


@dataclasses.dataclass(frozen=True, slots=True)
class AdminDependencies:
    """What the admin processor reads and changes (one broker's state, passed explicitly).

    Attributes:
        topic_table: topic configs.
        group_table: subscription-group configs.
        offset_table: committed consumer offsets.
        pop_service: per-group POP state (dropped/reset with groups, topics and offsets).
        store: queue offsets and message reads.
        key_index: the IndexFile service (query by key / id).
        queue_progress: where a group stands on a queue (lag).
        persist_offsets: writes the offset table at once (after deletes and resets).
        route_changed: set when topics change (registration then re-registers).
        broker_name: this broker group's name.
        broker_id: this broker's id now (0 for the master; a promotion changes it);
            changes are refused elsewhere.
        default_queue_nums: queues of a topic created with both counts 0.
        query_results_max: most index hits one query reads.
        counters: the broker's totals since start.
        store_dir: the store's root (its volume's use is reported).
        lite_topics: the lite topics and lite subscriptions (a deleted LITE parent's go).
    """

    topic_table: topic_config.TopicConfigManager
    group_table: subscriptions.SubscriptionGroupManager
    offset_table: offsets.ConsumerOffsetManager
    pop_service: pop_service_mod.PopService
    store: message_store.MessageStore
    key_index: index_service.IndexService
    queue_progress: QueueProgressSource
    persist_offsets: Callable[[], None]
    route_changed: asyncio.Event
    broker_name: ids.BrokerName
    broker_id: Callable[[], ids.BrokerId]
    default_queue_nums: int
    query_results_max: int
    counters: AdminCounters
    store_dir: pathlib.Path
    lite_topics: lite_topics.LiteTopicTable
