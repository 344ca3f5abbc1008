"""``AdminProcessor``: what the broker's admin API does, whatever wire it came on.

Mirrors RocketMQ's ``AdminBrokerProcessor``: topics and subscription groups (create, update,
delete), consumer lag (``GET_CONSUME_STATS``), offset resets (``INVOKE_BROKER_TO_RESET_OFFSET``),
message queries by id and key (``QUERY_MESSAGE`` / ``VIEW_MESSAGE_BY_ID``), runtime stats
(``GET_BROKER_RUNTIME_INFO``) and wiping/adding write permission. The gRPC ``Admin`` service
(``broker.grpc.admin_service``) decodes a request into the typed arguments here and encodes the
typed result; the classic Remoting adapter (``broker.remoting``) calls the same methods.

What each operation does:

* Topics: ``create_topic`` creates or replaces (an existing topic takes the new config);
  ``update_topic`` applies a change to an existing one; ``delete_topic`` removes it with every
  group's offsets and POP queues on it (its ConsumeQueue files stay until retention deletes
  them). Every topic change sets ``route_changed`` so the broker registers again at once.
* Groups: ``put_group`` creates or replaces a group's config (a change of FIFO-ness drops its
  POP state, whose bookkeeping differs); ``delete_group`` also forgets its offsets and POP state.
* ``consumer_lag``: per readable queue, the max offset, the group's offset, lag, in-flight,
  pull offset and last consumed store time; ``topic_stats``: per queue min/max offsets and
  last store time (``GET_TOPIC_STATS_INFO``); both rows are ``admin_stats``'s.
  ``reset_offset`` moves a group on every readable queue of a topic to the earliest, latest or
  first-at-timestamp offset, dropping its in-flight messages there; offsets persist at once.
* ``messages_by_id`` / ``messages_by_key``: IndexFile lookups of ``topic#id`` / ``topic#key``
  (also RocketMQ's offset message ids); index hits are hash matches, so each message is read
  and kept only if its topic and id/key really match.

Invariants: every change answers FORBIDDEN on a slave (broker id above 0): changes go to the
master, which slaves copy metadata from. The processor keeps no state: it changes the tables,
the POP service and the store it is given. No protobuf, no gRPC (import-linter).
"""

from __future__ import annotations

import copy
import dataclasses
import enum
import logging
from collections.abc import Callable, Iterable
from typing import Generic, TypeVar

from ariane.broker.processors import admin_deps, admin_stats
from ariane.broker.tables import subscriptions, topic_config
from ariane.common import errors, ids, message, route, topics
from ariane.common import message_id as message_id_mod
from ariane.store import dispatcher, message_store, record_reader, retention

_log = logging.getLogger(__name__)

T = TypeVar("T")

RESPONSE_BODY_BYTES_MAX = 64 * 1024 * 1024
"""Most body bytes one query answer carries (at least one message is always returned)."""

TIMESTAMP_MS_MAX = 2**63 - 1
"""Open upper end of a store-time window, in ms."""


def is_internal_topic(name: str) -> bool:
    """System, ``%RETRY%`` and ``%DLQ%`` topics: hidden by default, never write-wiped."""
    return topics.is_system_topic(name) or topics.is_retry_topic(name) or topics.is_dlq_topic(name)


class ResetTarget(enum.Enum):
    """Where ``reset_offset`` moves a group (``mqadmin resetOffsetByTime`` and friends)."""

    EARLIEST = "EARLIEST"
    LATEST = "LATEST"
    TIMESTAMP = "TIMESTAMP"


@dataclasses.dataclass(frozen=True, slots=True)
class Change(Generic[T]):
    """A stored config and whether it replaced an existing one."""

    stored: T
    existed: bool


@dataclasses.dataclass(frozen=True, slots=True)
class RuntimeStats:
    """What ``runtime_stats`` answers (RocketMQ ``GET_BROKER_RUNTIME_INFO``).

    Attributes:
        store: the store's offsets (CommitLog bytes) and counters.
        disk_used_ratio: used / size of the store's volume, 0..1 (0 when it cannot be probed).
        counters: messages and bytes in/out and DLQ forwards since start (a copy).
        topic_count: topics, internal ones included.
        read_only_topic_count: ordinary topics without the WRITE bit.
        group_count: subscription groups.
        consumer_offset_count: (group, topic, queue) offset entries.
    """

    store: message_store.StoreStats
    disk_used_ratio: float
    counters: admin_deps.AdminCounters
    topic_count: int
    read_only_topic_count: int
    group_count: int
    consumer_offset_count: int


class AdminProcessor:
    """The admin operations of one broker (RocketMQ ``AdminBrokerProcessor``).

    Args:
        deps: the tables, services and identity it works on.
    """

    def __init__(self, deps: admin_deps.AdminDependencies) -> None:
        self._d = deps

    @property
    def broker_name(self) -> ids.BrokerName:
        """This broker group's name (answers name it)."""
        return self._d.broker_name

    @property
    def default_queue_nums(self) -> int:
        """Queues of a topic created with both counts 0."""
        return self._d.default_queue_nums

    @property
    def is_master(self) -> bool:
        """Whether this broker is its group's master (id 0) now."""
        return self._d.broker_id() == ids.MASTER_BROKER_ID

    def require_master(self) -> None:
        """Refuse a change on a slave (RocketMQ refuses them too).

        Raises:
            ForbiddenError: this broker's id is above 0.
        """
        if self._d.broker_id() != ids.MASTER_BROKER_ID:
            raise errors.ForbiddenError(
                f"broker {self._d.broker_name} id {self._d.broker_id()} is a slave; send admin "
                "changes to its master (broker id 0)"
            )

    # -- topics ---------------------------------------------------------------------------------

    def existing_topic(self, name: str) -> topic_config.TopicConfig:
        """The config of topic ``name``.

        Raises:
            IllegalTopicError: a bad name. TopicNotFoundError: no such topic here.
        """
        topics.validate_topic(name, allow_system=True)
        found = self._d.topic_table.get(name)
        if found is None:
            raise errors.TopicNotFoundError(
                f"topic {name!r} does not exist on broker {self._d.broker_name}; "
                "list the topics or create it first"
            )
        return found

    def create_topic(self, wanted: topic_config.TopicConfig) -> Change[topic_config.TopicConfig]:
        """Create or replace a topic (``UPDATE_AND_CREATE_TOPIC``); ILLEGAL_TOPIC if bad."""
        self.require_master()
        existed = wanted.name in self._d.topic_table
        stored = self._d.topic_table.create_or_update(wanted)
        self._d.route_changed.set()
        _log.info(
            "admin: topic %s %s: %s", stored.name, "updated" if existed else "created", stored
        )
        return Change(stored, existed)

    def update_topic(
        self, name: str, change: Callable[[topic_config.TopicConfig], topic_config.TopicConfig]
    ) -> topic_config.TopicConfig:
        """Apply ``change`` to an existing topic's config (TOPIC_NOT_FOUND if absent)."""
        self.require_master()
        current = self.existing_topic(name)
        stored = self._d.topic_table.create_or_update(
            change(current), system=topics.is_system_topic(current.name)
        )
        self._d.route_changed.set()
        _log.info("admin: topic %s updated: %s", stored.name, stored)
        return stored

    def delete_topic(self, name: str) -> ids.TopicName:
        """Remove a topic, its offsets, POP queues, ConsumeQueues and lite topics; returns it.

        Mirrors RocketMQ ``AdminBrokerProcessor.deleteTopic``: a topic created again under the
        name starts empty, at queue offset 0, with no group offsets, lite topics or lite
        subscriptions, also after a restart (``MessageStore.delete_topic``); the POP retry
        topics of the groups with offsets on it go too (``clearRetryTopicWhenDeleteTopic``).

        Raises:
            TopicNotFoundError: no such topic. IllegalTopicError: a system topic.
        """
        self.require_master()
        current = self.existing_topic(name)
        if topics.is_system_topic(current.name):
            raise errors.IllegalTopicError(f"topic {current.name!r} is a system topic; keep it")
        retry_topics = [
            found
            for group in self._d.offset_table.groups_of_topic(current.name)
            if (found := self._d.topic_table.get(topics.pop_retry_topic(group, current.name)))
            is not None
        ]
        for config in (current, *retry_topics):
            self._delete_in_broker(config)
        self._d.route_changed.set()
        return current.name

    def _delete_in_broker(self, config: topic_config.TopicConfig) -> None:
        """One topic's config, offsets, POP queues and ConsumeQueues (``deleteTopicInBroker``)."""
        self._d.topic_table.delete(config.name)
        self._d.lite_topics.drop_parent(config.name)  # RocketMQ 5.5 cleanByParentTopic
        removed = self._d.offset_table.remove_topic(config.name)
        queue_ids = range(max(config.read_queue_nums, config.write_queue_nums))
        self._d.pop_service.close_topic(config.name, queue_ids)
        self._d.persist_offsets()  # before the data goes: no offset outlives its queue
        queues = self._d.store.delete_topic(config.name)
        _log.info("admin: topic %s deleted (%d offsets, %d CQs)", config.name, removed, queues)

    def list_topics(self, *, include_internal: bool) -> list[topic_config.TopicConfig]:
        """Every topic sorted by name; system/retry/DLQ ones only with ``include_internal``."""
        return [
            t
            for t in self._d.topic_table.list_all()
            if include_internal or not is_internal_topic(t.name)
        ]

    # -- subscription groups --------------------------------------------------------------------

    def existing_group(self, name: str) -> subscriptions.SubscriptionGroupConfig:
        """The config of group ``name`` (CONSUMER_GROUP_NOT_FOUND if absent)."""
        topics.validate_group(name)
        found = self._d.group_table.get(name)
        if found is None:
            raise errors.ConsumerGroupNotFoundError(
                f"consumer group {name!r} does not exist on broker {self._d.broker_name}; "
                "list the groups or create it first"
            )
        return found

    def put_group(
        self,
        name: str,
        build: Callable[
            [subscriptions.SubscriptionGroupConfig | None], subscriptions.SubscriptionGroupConfig
        ],
        *,
        must_exist: bool,
    ) -> Change[subscriptions.SubscriptionGroupConfig]:
        """Create or replace a group's config: ``build(current or None)`` is the new one.

        Raises:
            ConsumerGroupNotFoundError: ``must_exist`` and the group does not exist here.
        """
        self.require_master()
        if must_exist:
            self.existing_group(name)
        current = self._d.group_table.get(name)
        stored = self._d.group_table.create_or_update(build(current))
        if current is not None and current.consume_orderly != stored.consume_orderly:
            # the POP state of the other kind is stale: FIFO bookkeeping differs
            self._d.pop_service.drop_state(stored.group)
        _log.info("admin: group %s set: %s", stored.group, stored)
        return Change(stored, current is not None)

    def delete_group(self, name: str) -> ids.GroupName:
        """Remove a group, its offsets and POP state (its retry/DLQ topics stay)."""
        self.require_master()
        group = self.existing_group(name).group
        self._d.group_table.delete(group)
        removed = self._d.offset_table.remove_group(group)
        self._d.pop_service.drop_state(group)
        self._d.persist_offsets()
        _log.info("admin: group %s deleted (%d consumer offsets dropped)", group, removed)
        return group

    def consumer_heartbeat(self, name: str, *, clustering: bool) -> None:
        """What a classic consumer's heartbeat creates (RocketMQ ``ClientManageProcessor``
        ``heartBeat``): the subscription group (when auto-created) and, for CLUSTERING, its
        ``%RETRY%<group>`` topic (1 queue, perm 6), registered with the name servers at once
        because the client subscribes to it and needs its route.

        Raises:
            IllegalConsumerGroupError: the name breaks the group name rules.
            ConsumerGroupNotFoundError: unknown group and auto-create is off.
            TooManyRequestsError: a table is full.
        """
        group = self._d.group_table.require(name).group
        if not clustering or self._d.topic_table.get(topics.retry_topic(group)) is not None:
            return
        self._d.topic_table.ensure_retry_topic(group)
        self._d.route_changed.set()
        _log.info("retry topic of consumer group %s created", group)

    def list_groups(self) -> tuple[subscriptions.SubscriptionGroupConfig, ...]:
        """Every group sorted by name."""
        return self._d.group_table.list_all()

    # -- consumer progress ----------------------------------------------------------------------

    def consumer_lag(self, group_name: str, topic: str | None) -> list[admin_stats.QueueLag]:
        """Per readable queue of ``topic`` (or of every topic the group consumed here).

        Raises:
            ConsumerGroupNotFoundError: the group has no config, offsets or POP state here
                (even when a topic is named).
            TopicNotFoundError: ``topic`` is named and does not exist.
        """
        group = topics.validate_group(group_name)
        consumed = self._consumed_topics(group)
        if not consumed and group not in self._d.group_table:
            raise errors.ConsumerGroupNotFoundError(
                f"consumer group {group!r} has no config and never consumed on broker "
                f"{self._d.broker_name}; check the name"
            )
        chosen = [self.existing_topic(topic)] if topic is not None else consumed
        return [
            self._queue_lag(group, t.name, ids.QueueId(q))
            for t in chosen
            for q in range(t.read_queue_nums)
        ]

    def _consumed_topics(self, group: ids.GroupName) -> list[topic_config.TopicConfig]:
        state = self._d.pop_service.existing_state(group)
        tracked = {topic for topic, _ in state.open_queues()} if state is not None else set()
        return [
            t
            for t in self._d.topic_table.list_all()
            if t.name in tracked or self._d.offset_table.offsets_of(group, t.name)
        ]

    def _queue_lag(
        self, group: ids.GroupName, topic: ids.TopicName, queue_id: ids.QueueId
    ) -> admin_stats.QueueLag:
        progress = self._d.queue_progress(group, topic, queue_id)
        return admin_stats.QueueLag(
            topic=topic,
            queue_id=queue_id,
            broker_offset=progress.broker_offset,
            consumer_offset=progress.consumer_offset,
            lag=progress.lag,
            inflight=progress.inflight,
            pull_offset=max(progress.consumer_offset, progress.scan_offset),
            last_timestamp_ms=admin_stats.store_time_ms(
                self._d.store, topic, queue_id, progress.consumer_offset - 1
            ),
        )

    def groups_of_topic(self, topic: str) -> tuple[ids.GroupName, ...]:
        """The groups holding committed offsets on ``topic`` here (RocketMQ
        ``ConsumerOffsetManager.whichGroupByTopic``)."""
        return self._d.offset_table.groups_of_topic(ids.TopicName(topic))

    # -- topic statistics -----------------------------------------------------------------------

    def topic_stats(
        self, name: str
    ) -> tuple[topic_config.TopicConfig, list[admin_stats.QueueStats]]:
        """Per queue of a topic (``max(read, write)`` queues): min and max offsets and the
        store time of its last message (RocketMQ ``GET_TOPIC_STATS_INFO``).

        Raises:
            IllegalTopicError: a bad name. TopicNotFoundError: no such topic here.
        """
        config = self.existing_topic(name)
        return config, admin_stats.queue_stats(self._d.store, config)

    def earliest_store_time_ms(self) -> int:
        """Store time of the oldest message in ms, 0 when the store holds none."""
        return admin_stats.earliest_store_time_ms(self._d.store)

    def reset_offset(
        self,
        group_name: str,
        topic_name: str,
        target: ResetTarget,
        *,
        timestamp_ms: int = 0,
        queue_id: int | None = None,
        offset: int | None = None,
    ) -> tuple[ids.TopicName, dict[ids.QueueId, ids.QueueOffset]]:
        """Move a group on every readable queue of a topic (only ``queue_id`` when given, to
        ``offset`` when given, clamped to the queue's min..max); in-flight messages there are
        forgotten. A new group is created with defaults (as on first use).

        Returns:
            the topic and the new offset of each queue moved.

        Raises:
            BadRequestError: a TIMESTAMP target with ``timestamp_ms`` <= 0 (and no ``offset``),
                or ``queue_id`` not a readable queue. TopicNotFoundError: no such topic.
        """
        self.require_master()
        topic = self.existing_topic(topic_name)
        queues = range(topic.read_queue_nums) if queue_id is None else [queue_id]
        if queue_id is not None and not 0 <= queue_id < topic.read_queue_nums:
            raise errors.BadRequestError(f"{topic.name} has no readable queue {queue_id}")
        offset_at = self._reset_target(topic.name, target, timestamp_ms, offset)
        group = self._d.group_table.require(group_name).group
        new_offsets = {ids.QueueId(q): ids.QueueOffset(offset_at(ids.QueueId(q))) for q in queues}
        self._d.offset_table.reset(group, topic.name, new_offsets)
        self._d.pop_service.reset_queues(group, topic.name, new_offsets)
        self._d.persist_offsets()
        _log.info("admin: group %s reset on %s to %s", group, topic.name, new_offsets)
        return topic.name, new_offsets

    def _reset_target(
        self, topic: ids.TopicName, target: ResetTarget, timestamp_ms: int, offset: int | None
    ) -> Callable[[ids.QueueId], int]:
        store = self._d.store
        if offset is not None:
            return lambda q: min(
                max(offset, store.min_queue_offset(topic, q)), store.max_queue_offset(topic, q)
            )
        if target is ResetTarget.EARLIEST:
            return lambda q: store.min_queue_offset(topic, q)
        if target is ResetTarget.LATEST:
            return lambda q: store.max_queue_offset(topic, q)
        if timestamp_ms <= 0:
            raise errors.BadRequestError(
                "a TIMESTAMP reset needs timestamp_ms > 0 (ms since the epoch)"
            )
        return lambda q: store.queue_offset_by_time(topic, q, timestamp_ms)

    # -- messages -------------------------------------------------------------------------------

    def messages_by_id(self, message_id: str, topic: str) -> list[message.StoredMessage]:
        """By client message id (needs ``topic``) or offset message id (``topic`` may be "").

        Raises:
            BadRequestError: an empty id, or a client id without a topic.
            MessageNotFoundError: nothing matches.
        """
        message_id = message_id.strip()
        if not message_id:
            raise errors.BadRequestError("message_id is empty; give the id the producer got back")
        found: list[message.StoredMessage] = []
        if topic:
            found = self._by_index_key(
                topics.validate_topic(topic, allow_system=True),
                message_id,
                lambda m: m.message.uniq_key == message_id,
                max_count=self._d.query_results_max,
            )
        if not found:
            found = self._by_offset_id(message_id, topic)
        offset_id = message_id_mod.decode_offset_message_id(message_id) is not None
        if not found and not topic and not offset_id:
            raise errors.BadRequestError(
                f"{message_id!r} is not an offset message id; give the topic too: client "
                "message ids are indexed per topic"
            )
        if not found:
            where = f"topic {topic}" if topic else "any topic"
            raise errors.MessageNotFoundError(
                f"no message with id {message_id} in {where} on broker {self._d.broker_name}"
            )
        return _within_body_budget(found)

    def messages_by_key(
        self, topic_name: str, key: str, *, max_messages: int, window_ms: tuple[int, int]
    ) -> list[message.StoredMessage]:
        """Messages of a topic carrying ``key`` in KEYS, newest first (``QUERY_MESSAGE``).

        Args:
            max_messages: most to return (0 = the broker's ``query_results_max``).
            window_ms: store-time window ``(begin, end)`` in ms; ``end`` 0 = open.

        Raises:
            BadRequestError: an empty key or an empty window. MessageNotFoundError: none.
        """
        topic = topics.validate_topic(topic_name, allow_system=True)
        key = key.strip()
        if not key:
            raise errors.BadRequestError("key is empty; give one of the keys the producer set")
        begin, end = window_ms[0], window_ms[1] or TIMESTAMP_MS_MAX
        if begin < 0 or begin > end:
            raise errors.BadRequestError(
                f"store-time window [{begin}, {end}] is empty; give begin <= end (ms, 0 = open)"
            )
        limit = self._d.query_results_max
        found = self._by_index_key(
            topic,
            key,
            lambda m: key in m.message.keys,
            max_count=min(max_messages, limit) if max_messages > 0 else limit,
            window_ms=(begin, end),
        )
        if not found:
            raise errors.MessageNotFoundError(
                f"no message with key {key!r} in topic {topic} on broker {self._d.broker_name}"
            )
        return _within_body_budget(found)

    def message_at(self, commit_log_offset: int) -> message.StoredMessage:
        """The message whose record starts at ``commit_log_offset`` (RocketMQ
        ``VIEW_MESSAGE_BY_ID``, which reads the offset inside an offset message id).

        Raises:
            MessageNotFoundError: no readable record starts there (wrong offset, deleted by
                retention, or corrupt).
        """
        found = self._read([commit_log_offset])
        if not found:
            raise errors.MessageNotFoundError(
                f"no message starts at CommitLog offset {commit_log_offset} on this broker"
            )
        return found[0]

    def _read(self, offsets: Iterable[int]) -> list[message.StoredMessage]:
        found: list[message.StoredMessage] = []
        for offset in offsets:
            result = self._d.store.get_message(ids.CommitLogOffset(offset))
            if result.status is record_reader.LookupStatus.FOUND and result.message is not None:
                found.append(result.message)
        return found

    def _by_index_key(
        self,
        topic: ids.TopicName,
        key: str,
        matches: Callable[[message.StoredMessage], bool],
        *,
        max_count: int,
        window_ms: tuple[int, int] = (0, TIMESTAMP_MS_MAX),
    ) -> list[message.StoredMessage]:
        hits = self._d.key_index.query(
            f"{topic}{dispatcher.KEY_SEPARATOR}{key}",
            max_count=max_count,
            begin_ms=window_ms[0],
            end_ms=window_ms[1],
        )
        return [m for m in self._read(hits) if m.topic == topic and matches(m)]

    def _by_offset_id(self, message_id: str, topic: str) -> list[message.StoredMessage]:
        decoded = message_id_mod.decode_offset_message_id(message_id)
        if decoded is None:
            return []
        wanted = message_id.upper()
        return [
            m
            for m in self._read([decoded[1]])
            if (not topic or m.topic == topic)
            and message_id_mod.create_offset_message_id(m.store_host, m.commit_log_offset) == wanted
        ]

    # -- broker ---------------------------------------------------------------------------------

    def runtime_stats(self) -> RuntimeStats:
        """Store offsets and counters, table sizes and disk use, now."""
        topic_configs = self._d.topic_table.list_all()
        read_only = sum(
            1 for t in topic_configs if not is_internal_topic(t.name) and not t.writeable
        )
        return RuntimeStats(
            store=self._d.store.stats(),
            disk_used_ratio=self._disk_used_ratio(),
            counters=copy.copy(self._d.counters),
            topic_count=len(self._d.topic_table),
            read_only_topic_count=read_only,
            group_count=len(self._d.group_table),
            consumer_offset_count=len(self._d.offset_table),
        )

    def _disk_used_ratio(self) -> float:
        try:
            return retention.disk_used_ratio(self._d.store_dir)
        except OSError as exc:
            _log.warning("cannot probe the disk of %s: %s", self._d.store_dir, exc)
            return 0.0

    # -- write permission -----------------------------------------------------------------------

    def set_write_perm(self, *, writable: bool) -> int:
        """Set or clear the WRITE bit of every ordinary topic (``addWritePerm`` /
        ``wipeWritePerm``); internal topics keep theirs so retries still work. Returns how
        many topics changed."""
        self.require_master()
        changed = 0
        for config in self._d.topic_table.list_all():
            if is_internal_topic(config.name) or config.writeable == writable:
                continue
            perm = config.perm | route.Perm.WRITE if writable else config.perm & ~route.Perm.WRITE
            self._d.topic_table.create_or_update(
                dataclasses.replace(config, perm=perm), system=topics.is_system_topic(config.name)
            )
            changed += 1
        if changed:
            self._d.route_changed.set()
        (_log.info if writable else _log.warning)("admin: write perm %s: %d", writable, changed)
        return changed


def _within_body_budget(found: list[message.StoredMessage]) -> list[message.StoredMessage]:
    """The leading messages whose bodies fit ``RESPONSE_BODY_BYTES_MAX`` (at least one)."""
    answer: list[message.StoredMessage] = []
    body_bytes = 0
    for stored in found:
        body_bytes += len(stored.body)
        if answer and body_bytes > RESPONSE_BODY_BYTES_MAX:
            break
        answer.append(stored)
    return answer
