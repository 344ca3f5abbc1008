"""Subscription groups (RocketMQ ``SubscriptionGroupManager``) in ``subscriptionGroup.json``.

A ``SubscriptionGroupConfig`` holds what the broker needs to serve one consumer group: whether it
may consume, whether it is FIFO (``consume_orderly``), whether broadcast consumption is allowed,
how many deliveries a message gets before it goes to ``%DLQ%<group>`` (``max_delivery_attempts``,
default 17 = the first delivery + RocketMQ's ``retryMaxTimes`` 16) and the retry backoff the broker
announces to push consumers in the Telemetry settings reply.

Retry policies mirror RocketMQ 5 ``GroupRetryPolicy``:

* CUSTOMIZED (the default): a list of delays, by default the 18 classic delay levels
  ``1s 5s 10s 30s 1m … 1h 2h``; the gRPC client waits ``delays[attempt - 1]`` (the last one
  repeats) before the next attempt, as the proxy's ``convertToCustomizedRetryPolicy`` sends it.
* EXPONENTIAL: ``min(max_ms, initial_ms * multiplier ** (attempt - 1))``, RocketMQ defaults
  initial 5 s, multiplier 2, max 2 h.
* FIFO groups without an explicit policy retry at a fixed 3000 ms (RocketMQ 5 FIFO docs).

``allocate_strategy`` picks how QueryAssignment shares a topic's queues among the group's live
members (``ariane.common.allocate``: AVG, the default, AVG_BY_CIRCLE, CONSISTENT_HASH, or CONFIG
with ``allocate_config_queues``), the per-group choice a RocketMQ consumer makes with
``setAllocateMessageQueueStrategy`` and its broker with ``QueryAssignmentProcessor``'s
``strategyName``.

The manager creates a group's config with defaults on first use when
``auto_create_subscription_group`` is on (RocketMQ's default), bounds the table at
``group_count_max`` and bumps ``data_version`` on every change. Not thread-safe.
"""

from __future__ import annotations

import dataclasses
import enum
import logging
import pathlib
from typing import Any

from ariane.broker import settings
from ariane.broker.tables import persistence
from ariane.common import allocate, clock, delay, errors, ids, limits, route, topics

_log = logging.getLogger(__name__)

FILE_NAME = "subscriptionGroup.json"
"""Name of the group table file inside ``config/`` (RocketMQ ``subscriptionGroup.json``)."""

MAX_DELIVERY_ATTEMPTS_LIMIT = 1_000
"""Largest ``max_delivery_attempts`` accepted, a count."""

RETRY_DELAYS_MAX = 128
"""Most delays in a customized retry policy, a count."""

RETRY_DELAY_MS_MAX = 24 * 3600 * 1000
"""Longest single retry delay, in ms (one day)."""

ALLOCATE_CONFIG_QUEUES_MAX = 1_024
"""Most queues a CONFIG allocation lists, a count."""

FIFO_RETRY_INTERVAL_MS = 3_000
"""Fixed retry interval of FIFO groups, in ms (RocketMQ 5 FIFO message docs)."""


class GroupRetryPolicyType(enum.Enum):
    """RocketMQ ``GroupRetryPolicyType``."""

    CUSTOMIZED = "CUSTOMIZED"
    EXPONENTIAL = "EXPONENTIAL"


@dataclasses.dataclass(frozen=True, slots=True)
class GroupRetryPolicy:
    """Backoff between delivery attempts of one group (RocketMQ ``GroupRetryPolicy``).

    Attributes:
        kind: CUSTOMIZED uses ``delays_ms``; EXPONENTIAL uses the three numbers below.
        delays_ms: CUSTOMIZED delays in ms; entry n-1 follows failed attempt n, the last one
            repeats.
        initial_ms: EXPONENTIAL delay after the first failed attempt, in ms.
        max_ms: EXPONENTIAL cap, in ms.
        multiplier: EXPONENTIAL growth factor per attempt (an integer, as in RocketMQ).
    """

    kind: GroupRetryPolicyType = GroupRetryPolicyType.CUSTOMIZED
    delays_ms: tuple[int, ...] = delay.DELAY_LEVELS_MS
    initial_ms: int = 5_000
    max_ms: int = 7_200_000
    multiplier: int = 2

    def next_delay_ms(self, attempt: int) -> int:
        """Delay before the next attempt after delivery attempt ``attempt`` (1-based) failed.

        Attempts below 1 count as 1; the exponent is capped at 32 as in RocketMQ.
        """
        n = max(1, attempt)
        if self.kind is GroupRetryPolicyType.CUSTOMIZED:
            return self.delays_ms[min(n - 1, len(self.delays_ms) - 1)]
        return int(min(self.max_ms, self.initial_ms * self.multiplier ** min(n - 1, 32)))

    def validate(self) -> None:
        """Check the policy's numbers.

        Raises:
            IllegalConsumerGroupError: empty or oversized delay list, delays outside
                1..``RETRY_DELAY_MS_MAX``, or exponential numbers out of range.
        """
        if self.kind is GroupRetryPolicyType.CUSTOMIZED:
            if not 1 <= len(self.delays_ms) <= RETRY_DELAYS_MAX:
                raise errors.IllegalConsumerGroupError(
                    f"a customized retry policy needs 1..{RETRY_DELAYS_MAX} delays, "
                    f"got {len(self.delays_ms)}"
                )
            bad = [d for d in self.delays_ms if not 1 <= d <= RETRY_DELAY_MS_MAX]
            if bad:
                raise errors.IllegalConsumerGroupError(
                    f"retry delays must be 1..{RETRY_DELAY_MS_MAX} ms, got {bad[:3]}"
                )
            return
        if not 1 <= self.initial_ms <= self.max_ms <= RETRY_DELAY_MS_MAX:
            raise errors.IllegalConsumerGroupError(
                f"exponential retry needs 1 <= initial_ms ({self.initial_ms}) <= max_ms "
                f"({self.max_ms}) <= {RETRY_DELAY_MS_MAX}"
            )
        if not 1 <= self.multiplier <= 100:
            raise errors.IllegalConsumerGroupError(
                f"exponential retry multiplier must be 1..100, got {self.multiplier}"
            )

    def to_json(self) -> dict[str, Any]:
        """The JSON object stored in the group file."""
        return {
            "kind": self.kind.value,
            "delays_ms": list(self.delays_ms),
            "initial_ms": self.initial_ms,
            "max_ms": self.max_ms,
            "multiplier": self.multiplier,
        }

    @staticmethod
    def from_json(raw: object) -> GroupRetryPolicy:
        """Parse ``to_json`` output.

        Raises:
            CorruptMetadataError: on a missing or mistyped field.
        """
        obj = persistence.expect_object(raw, "retry_policy")
        try:
            kind = GroupRetryPolicyType(
                persistence.expect_str(obj.get("kind"), "retry_policy.kind")
            )
        except ValueError as exc:
            raise persistence.CorruptMetadataError(f"retry_policy.kind: {exc}") from exc
        delays = obj.get("delays_ms")
        if not isinstance(delays, list):
            raise persistence.CorruptMetadataError("retry_policy.delays_ms: expected a list")
        return GroupRetryPolicy(
            kind=kind,
            delays_ms=tuple(persistence.expect_int(d, "retry_policy.delays_ms") for d in delays),
            initial_ms=persistence.expect_int(obj.get("initial_ms"), "retry_policy.initial_ms"),
            max_ms=persistence.expect_int(obj.get("max_ms"), "retry_policy.max_ms"),
            multiplier=persistence.expect_int(obj.get("multiplier"), "retry_policy.multiplier"),
        )


DEFAULT_RETRY_POLICY = GroupRetryPolicy()
"""CUSTOMIZED with the 18 delay levels (RocketMQ ``CustomizedRetryPolicy`` defaults)."""

FIFO_RETRY_POLICY = GroupRetryPolicy(delays_ms=(FIFO_RETRY_INTERVAL_MS,))
"""Fixed 3000 ms, the default of FIFO groups."""


@dataclasses.dataclass(frozen=True, slots=True)
class SubscriptionGroupConfig:
    """One consumer group's config (RocketMQ ``SubscriptionGroupConfig``).

    Attributes:
        group: the group name.
        consume_enable: whether the group may consume at all (``consumeEnable``).
        consume_orderly: FIFO delivery, one message per message group at a time
            (``consumeMessageOrderly``; the ``fifo`` flag of the settings reply).
        broadcast_consume_allowed: whether the group may consume in broadcast mode
            (RocketMQ ``consumeBroadcastEnable``); not whether it *is* broadcast (the admin
            API's ``broadcast`` field sets this permission).
        max_delivery_attempts: deliveries before the message goes to ``%DLQ%<group>``;
            ``retryMaxTimes + 1`` (default 17).
        retry_policy: the backoff; ``None`` means the default for the group's kind
            (``DEFAULT_RETRY_POLICY``, or ``FIFO_RETRY_POLICY`` when orderly).
        allocate_strategy: how QueryAssignment shares queues among the group's members.
        allocate_config_queues: the fixed queues of the CONFIG strategy (empty otherwise).
    """

    group: ids.GroupName
    consume_enable: bool = True
    consume_orderly: bool = False
    broadcast_consume_allowed: bool = True
    max_delivery_attempts: int = limits.MAX_DELIVERY_ATTEMPTS_DEFAULT
    retry_policy: GroupRetryPolicy | None = None
    allocate_strategy: allocate.AllocateStrategy = allocate.DEFAULT_STRATEGY
    allocate_config_queues: tuple[route.MessageQueue, ...] = ()

    @property
    def retry_max_times(self) -> int:
        """RocketMQ's ``retryMaxTimes``: redeliveries after the first delivery."""
        return self.max_delivery_attempts - 1

    def effective_retry_policy(self) -> GroupRetryPolicy:
        """The configured policy, or the default for an orderly or a concurrent group."""
        if self.retry_policy is not None:
            return self.retry_policy
        return FIFO_RETRY_POLICY if self.consume_orderly else DEFAULT_RETRY_POLICY

    def to_json(self) -> dict[str, Any]:
        """The JSON object stored in the group file."""
        return {
            "group": self.group,
            "consume_enable": self.consume_enable,
            "consume_orderly": self.consume_orderly,
            "broadcast_consume_allowed": self.broadcast_consume_allowed,
            "max_delivery_attempts": self.max_delivery_attempts,
            "retry_policy": None if self.retry_policy is None else self.retry_policy.to_json(),
            "allocate_strategy": self.allocate_strategy.value,
            "allocate_config_queues": [
                {"topic": q.topic, "broker_name": q.broker_name, "queue_id": q.queue_id}
                for q in self.allocate_config_queues
            ],
        }

    @staticmethod
    def from_json(raw: object) -> SubscriptionGroupConfig:
        """Parse ``to_json`` output (no rule checks; the manager validates).

        Raises:
            CorruptMetadataError: on a missing or mistyped field.
        """
        obj = persistence.expect_object(raw, "group")
        policy = obj.get("retry_policy")
        return SubscriptionGroupConfig(
            group=ids.GroupName(persistence.expect_str(obj.get("group"), "group.group")),
            consume_enable=persistence.expect_bool(obj.get("consume_enable"), "consume_enable"),
            consume_orderly=persistence.expect_bool(obj.get("consume_orderly"), "orderly"),
            broadcast_consume_allowed=persistence.expect_bool(
                # files written before the rename carry "broadcast_enable"
                obj.get("broadcast_consume_allowed", obj.get("broadcast_enable")),
                "broadcast_consume_allowed",
            ),
            max_delivery_attempts=persistence.expect_int(
                obj.get("max_delivery_attempts"), "max_delivery_attempts"
            ),
            retry_policy=None if policy is None else GroupRetryPolicy.from_json(policy),
            allocate_strategy=_strategy_from_json(obj.get("allocate_strategy")),
            allocate_config_queues=_queues_from_json(obj.get("allocate_config_queues", [])),
        )


def _strategy_from_json(raw: object) -> allocate.AllocateStrategy:
    """The stored strategy; files written before it existed hold none (the default)."""
    if raw is None:
        return allocate.DEFAULT_STRATEGY
    try:
        return allocate.AllocateStrategy(persistence.expect_str(raw, "allocate_strategy"))
    except ValueError as exc:
        raise persistence.CorruptMetadataError(f"allocate_strategy: {exc}") from exc


def _queues_from_json(raw: object) -> tuple[route.MessageQueue, ...]:
    if not isinstance(raw, list):
        raise persistence.CorruptMetadataError("allocate_config_queues: expected a list")
    queues = []
    for item in raw:
        obj = persistence.expect_object(item, "allocate_config_queues")
        queues.append(
            route.MessageQueue(
                ids.TopicName(persistence.expect_str(obj.get("topic"), "queue.topic")),
                ids.BrokerName(persistence.expect_str(obj.get("broker_name"), "queue.broker")),
                ids.QueueId(persistence.expect_int(obj.get("queue_id"), "queue.queue_id")),
            )
        )
    return tuple(queues)


class SubscriptionGroupManager(persistence.VersionedTable[SubscriptionGroupConfig]):
    """The subscription-group table of one broker, persisted atomically after every change.

    Inherits ``path``, ``data_version``, ``len()``, ``get(group)``, ``list_all()`` and
    ``delete(group)`` from ``persistence.VersionedTable``.

    Args:
        path: the JSON file (``persistence.config_path(store_root, FILE_NAME)``).
        group_settings: bound and auto-create switch.
        time: the clock that stamps ``data_version``.

    Raises:
        CorruptMetadataError: if the file exists but does not hold a valid table.
    """

    def __init__(
        self,
        path: pathlib.Path,
        *,
        group_settings: settings.SubscriptionSettings,
        time: clock.Clock,
    ) -> None:
        super().__init__(
            path,
            section="groups",
            encode=SubscriptionGroupConfig.to_json,
            decode=SubscriptionGroupConfig.from_json,
            name_of=lambda config: config.group,
            time=time,
        )
        self._settings = group_settings
        _log.info("loaded %d subscription groups from %s", len(self), path)

    @property
    def table_settings(self) -> settings.SubscriptionSettings:
        """The limits and auto-create switches in use now."""
        return self._settings

    def apply_settings(self, new: settings.SubscriptionSettings) -> None:
        """Use ``new`` from the next request on (``mqadmin updateBrokerConfig``'s live keys;
        ``new`` validated itself when built). Entries already stored are not re-checked."""
        self._settings = new

    def require(self, group: str) -> SubscriptionGroupConfig:
        """The config of ``group``, created with defaults on first use when auto-create is on.

        Raises:
            IllegalConsumerGroupError: the name breaks the group name rules.
            ConsumerGroupNotFoundError: unknown group and auto-create is off.
            TooManyRequestsError: creating it would exceed ``group_count_max``.
        """
        found = self.get(group)
        if found is not None:
            return found
        name = topics.validate_group(group)
        if not self._settings.auto_create_subscription_group:
            raise errors.ConsumerGroupNotFoundError(
                f"consumer group {group!r} does not exist on this broker; create it first"
            )
        _log.info("auto-creating subscription group %s", name)
        return self.create_or_update(SubscriptionGroupConfig(group=name))

    def create_or_update(self, config: SubscriptionGroupConfig) -> SubscriptionGroupConfig:
        """Create a group or replace its config, then persist.

        Raises:
            IllegalConsumerGroupError: bad name, attempts outside 1..1000, bad retry policy,
                or more than ``ALLOCATE_CONFIG_QUEUES_MAX`` (or negative) CONFIG queues.
            TooManyRequestsError: a new group would exceed ``group_count_max``.
            OSError: if the file cannot be written (the table is unchanged).
        """
        topics.validate_group(config.group)
        if not 1 <= config.max_delivery_attempts <= MAX_DELIVERY_ATTEMPTS_LIMIT:
            raise errors.IllegalConsumerGroupError(
                f"group {config.group!r}: max_delivery_attempts="
                f"{config.max_delivery_attempts} is outside 1..{MAX_DELIVERY_ATTEMPTS_LIMIT}"
            )
        if config.retry_policy is not None:
            config.retry_policy.validate()
        if len(config.allocate_config_queues) > ALLOCATE_CONFIG_QUEUES_MAX:
            raise errors.IllegalConsumerGroupError(
                f"group {config.group!r}: at most {ALLOCATE_CONFIG_QUEUES_MAX} CONFIG queues"
            )
        if any(q.queue_id < 0 for q in config.allocate_config_queues):
            raise errors.IllegalConsumerGroupError(
                f"group {config.group!r}: CONFIG queue ids must be >= 0"
            )
        self._put(config.group, config, count_max=self._settings.group_count_max)
        return config
