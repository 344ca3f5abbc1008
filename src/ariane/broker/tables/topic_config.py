"""The broker's topic table (RocketMQ ``TopicConfigManager``), persisted in ``config/topics.json``.

A ``TopicConfig`` says how many read/write queues a topic has on this broker, its permission bits,
its message type and its retention. ``TopicConfigManager`` holds them by name and:

* validates every config (``ariane.common.topics`` name rules, 1..``queue_nums_max`` queues,
  only known ``Perm`` bits, retention -1 or ≥ 1 h) and bounds the table at ``topic_count_max``;
* writes the whole table atomically after each change, so what was acknowledged survives a crash;
* bumps ``data_version`` on every change (the name-server registration sends it);
* creates ``%RETRY%<group>``, a POP group's ``%RETRY%<group>_<topic>`` and ``%DLQ%<group>``
  (1 queue, read+write) on demand, as RocketMQ's ``createTopicInSendMessageBackMethod`` does;
* rejects unknown topics with ``TopicNotFoundError`` unless auto-create is enabled
  (``autoCreateTopicEnable``; off by default in Ariane) and the caller is a producer.

Not thread-safe: the broker calls it from its event loop only.
"""

from __future__ import annotations

import dataclasses
import logging
import pathlib
from typing import Any

from ariane.broker import settings
from ariane.broker.tables import persistence
from ariane.common import clock, errors, ids, message, route, topics

_log = logging.getLogger(__name__)

FILE_NAME = "topics.json"
"""Name of the topic table file inside ``config/`` (RocketMQ ``topics.json``)."""

RETENTION_BROKER_DEFAULT = -1
"""``retention_hours`` value meaning "use the broker's ``file_reserved_hours``"."""

RETENTION_HOURS_MAX = 10 * 365 * 24
"""Longest per-topic retention accepted, in hours (ten years)."""

_PERM_ALL = route.Perm.READ | route.Perm.WRITE | route.Perm.INHERIT | route.Perm.PRIORITY
RETRY_QUEUE_NUMS = 1
"""Queues of a ``%RETRY%<group>`` topic (SubscriptionGroupConfig ``retryQueueNums`` = 1)."""
DLQ_QUEUE_NUMS = 1
"""Queues of a ``%DLQ%<group>`` topic (MixAll ``DLQ_NUMS_PER_GROUP`` = 1)."""


@dataclasses.dataclass(frozen=True, slots=True)
class TopicConfig:
    """One topic on this broker (RocketMQ ``TopicConfig``).

    Attributes:
        name: the topic name.
        read_queue_nums: queues consumers read, 1..``queue_nums_max``.
        write_queue_nums: queues producers write, 1..``queue_nums_max``.
        perm: ``Perm`` bits; READ|WRITE (6) for an ordinary topic.
        message_type: the kinds of messages the topic accepts (``message.type`` attribute).
        retention_hours: hours to keep its messages; -1 means the broker default
            (``reserve.time`` attribute).
    """

    name: ids.TopicName
    read_queue_nums: int = 8
    write_queue_nums: int = 8
    perm: route.Perm = route.PERM_READ_WRITE
    message_type: message.MessageType = message.MessageType.NORMAL
    retention_hours: int = RETENTION_BROKER_DEFAULT

    @property
    def readable(self) -> bool:
        """Whether consumers may read it (READ bit)."""
        return route.is_readable(self.perm)

    @property
    def writeable(self) -> bool:
        """Whether producers may write it (WRITE bit)."""
        return route.is_writeable(self.perm)

    def queue_data(self, broker_name: ids.BrokerName) -> route.QueueData:
        """The ``QueueData`` this topic contributes to a route (name-server registration)."""
        return route.QueueData(
            broker_name=broker_name,
            read_queue_nums=self.read_queue_nums,
            write_queue_nums=self.write_queue_nums,
            perm=int(self.perm),
        )

    def to_json(self) -> dict[str, Any]:
        """The JSON object stored in ``topics.json``."""
        return {
            "name": self.name,
            "read_queue_nums": self.read_queue_nums,
            "write_queue_nums": self.write_queue_nums,
            "perm": int(self.perm),
            "message_type": self.message_type.value,
            "retention_hours": self.retention_hours,
        }

    @staticmethod
    def from_json(raw: object) -> TopicConfig:
        """Parse ``to_json`` output (no rule checks; the manager validates).

        Raises:
            CorruptMetadataError: if a field is missing or of the wrong type.
        """
        obj = persistence.expect_object(raw, "topic")
        try:
            kind = message.MessageType(persistence.expect_str(obj.get("message_type"), "type"))
        except ValueError as exc:
            raise persistence.CorruptMetadataError(f"topic message_type: {exc}") from exc
        return TopicConfig(
            name=ids.TopicName(persistence.expect_str(obj.get("name"), "topic.name")),
            read_queue_nums=persistence.expect_int(obj.get("read_queue_nums"), "read_queue_nums"),
            write_queue_nums=persistence.expect_int(
                obj.get("write_queue_nums"), "write_queue_nums"
            ),
            perm=route.Perm(persistence.expect_int(obj.get("perm"), "perm")),
            message_type=kind,
            retention_hours=persistence.expect_int(obj.get("retention_hours"), "retention_hours"),
        )


class TopicConfigManager(persistence.VersionedTable[TopicConfig]):
    """The topic table of one broker, persisted atomically after every change.

    Inherits ``path``, ``data_version``, ``len()``, ``get(name)``, ``list_all()`` and
    ``delete(name)`` from ``persistence.VersionedTable``.

    Args:
        path: the JSON file (``persistence.config_path(store_root, FILE_NAME)``); read if it
            exists.
        topic_settings: bounds and auto-create switch.
        time: the clock that stamps ``data_version``.

    Raises:
        CorruptMetadataError: if the file exists but does not hold a valid table.
    """

    def __init__(
        self,
        path: pathlib.Path,
        *,
        topic_settings: settings.TopicSettings,
        time: clock.Clock,
    ) -> None:
        super().__init__(
            path,
            section="topics",
            encode=TopicConfig.to_json,
            decode=TopicConfig.from_json,
            name_of=lambda config: config.name,
            time=time,
        )
        self._settings = topic_settings
        _log.info("loaded %d topics from %s", len(self), path)

    @property
    def table_settings(self) -> settings.TopicSettings:
        """The limits and auto-create switches in use now."""
        return self._settings

    def apply_settings(self, new: settings.TopicSettings) -> None:
        """Use ``new`` from the next request on (``mqadmin updateBrokerConfig``'s live keys;
        ``new`` validated itself when built). Entries already stored are not re-checked."""
        self._settings = new

    def require(self, name: str, *, auto_create: bool = False) -> TopicConfig:
        """The config of ``name``; for producers, create it when auto-create is on.

        Args:
            name: the topic the request names.
            auto_create: the caller is a producer sending to ``name`` (RocketMQ creates topics
                only on the send path); has effect only with ``auto_create_topic_enable``.

        Raises:
            TopicNotFoundError: the topic does not exist and is not auto-created.
            IllegalTopicError: auto-create was attempted with an illegal or system name.
            TooManyRequestsError: auto-create would exceed ``topic_count_max``.
        """
        found = self.get(name)
        if found is not None:
            return found
        if not (auto_create and self._settings.auto_create_topic_enable):
            raise errors.TopicNotFoundError(
                f"topic {name!r} does not exist on this broker; create it first"
            )
        queues = self._settings.default_queue_nums
        _log.info("auto-creating topic %s with %d queues", name, queues)
        return self.create_or_update(
            TopicConfig(
                name=topics.validate_topic(name), read_queue_nums=queues, write_queue_nums=queues
            )
        )

    def create_or_update(self, config: TopicConfig, *, system: bool = False) -> TopicConfig:
        """Create a topic or replace its config, then persist (RocketMQ ``updateTopicConfig``).

        Args:
            config: the wanted config.
            system: allow reserved system topic names (internal callers only).

        Returns:
            the stored config.

        Raises:
            IllegalTopicError: bad name, queue counts, perm bits or retention.
            TooManyRequestsError: a new topic would exceed ``topic_count_max``.
            OSError: if the file cannot be written (the table is left unchanged).
        """
        self._validate(config, system=system)
        self._put(config.name, config, count_max=self._settings.topic_count_max)
        return config

    def ensure_retry_topic(self, group: ids.GroupName) -> TopicConfig:
        """The ``%RETRY%<group>`` topic, created with 1 read+write queue when missing."""
        return self._ensure(topics.retry_topic(group), RETRY_QUEUE_NUMS)

    def ensure_pop_retry_topic(
        self, group: ids.GroupName, topic: ids.TopicName, queues: int = RETRY_QUEUE_NUMS
    ) -> TopicConfig:
        """A POP consumer group's retry topic for ``topic`` (``topics.pop_retry_topic``),
        created with ``queues`` read+write queues when missing (RocketMQ's
        ``PopReviveService`` creates it with 1 on the first revive; a PRIORITY topic's has one
        per priority level, ``pop.priority``)."""
        return self._ensure(topics.pop_retry_topic(group, topic), queues)

    def ensure_dlq_topic(self, group: ids.GroupName) -> TopicConfig:
        """The ``%DLQ%<group>`` topic, created with 1 read+write queue when missing.

        Mirrors RocketMQ's ``AbstractSendMessageProcessor`` creating the DLQ on demand.
        """
        return self._ensure(topics.dlq_topic(group), DLQ_QUEUE_NUMS)

    def _ensure(self, name: ids.TopicName, queues: int) -> TopicConfig:
        found = self.get(name)
        if found is not None:
            return found
        return self.create_or_update(
            TopicConfig(name=name, read_queue_nums=queues, write_queue_nums=queues)
        )

    def _validate(self, config: TopicConfig, *, system: bool) -> None:
        topics.validate_topic(config.name, allow_system=system)
        limit = self._settings.queue_nums_max
        for label, count in (
            ("read_queue_nums", config.read_queue_nums),
            ("write_queue_nums", config.write_queue_nums),
        ):
            if not 1 <= count <= limit:
                raise errors.IllegalTopicError(
                    f"topic {config.name!r}: {label}={count} is outside 1..{limit}"
                )
        if int(config.perm) & ~int(_PERM_ALL):
            raise errors.IllegalTopicError(
                f"topic {config.name!r}: perm {int(config.perm)} has bits other than "
                "READ 4, WRITE 2, INHERIT 1, PRIORITY 8"
            )
        hours = config.retention_hours
        if hours != RETENTION_BROKER_DEFAULT and not 1 <= hours <= RETENTION_HOURS_MAX:
            raise errors.IllegalTopicError(
                f"topic {config.name!r}: retention_hours={hours} must be -1 (broker default) "
                f"or 1..{RETENTION_HOURS_MAX}"
            )
