"""Values ``AdminClient`` returns, and their conversions from ``ariane.admin.v1`` messages.

Every value is a frozen dataclass that names the broker group it came from, so results merged
from several masters stay attributable. Conversions are pure (no I/O); building them from a
reply whose fields are out of range is the server's bug and is not checked here.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping

from ariane.common import message
from ariane.grpcwire import convert, pb


@dataclasses.dataclass(frozen=True, slots=True)
class BrokerMaster:
    """A broker group's master as the name server lists it.

    Attributes:
        cluster: the cluster name.
        broker_name: the broker group.
        endpoint: ``host:port`` of its gRPC services (client and admin).
    """

    cluster: str
    broker_name: str
    endpoint: str


@dataclasses.dataclass(frozen=True, slots=True)
class LiteTopicInfo:
    """A lite topic (RocketMQ 5.5) under its LITE parent on one broker group.

    Attributes:
        broker_name: the broker group holding it.
        parent: the LITE parent topic.
        name: the lite topic.
        queue_id: the parent queue its messages go to.
        last_queue_offset: queue offset of its latest message, -1 before one.
        last_stored_timestamp_ms: STORETIMESTAMP of its latest message, ms since the epoch
            (0 before one).
    """

    broker_name: str
    parent: str
    name: str
    queue_id: int
    last_queue_offset: int
    last_stored_timestamp_ms: int


@dataclasses.dataclass(frozen=True, slots=True)
class TopicInfo:
    """A topic on one broker group (RocketMQ ``TopicConfig``).

    Attributes:
        broker_name: the broker group holding it.
        name: the topic.
        read_queue_nums: queues consumers read.
        write_queue_nums: queues producers write.
        perm: RocketMQ perm bits (READ 4, WRITE 2, INHERIT 1).
        message_type: the kinds of message it accepts.
        retention_hours: hours its messages are kept; 0 = the broker's default.
    """

    broker_name: str
    name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    message_type: message.MessageType
    retention_hours: int

    @staticmethod
    def from_message(broker_name: str, value: pb.admin.Topic) -> TopicInfo:
        """The topic an admin ``Topic`` describes (UNSPECIFIED type reads as NORMAL)."""
        try:
            kind = convert.message_type_of(value.message_type)
        except ValueError:
            kind = message.MessageType.NORMAL
        return TopicInfo(
            broker_name=broker_name,
            name=value.name,
            read_queue_nums=value.read_queue_nums,
            write_queue_nums=value.write_queue_nums,
            perm=value.perm,
            message_type=kind,
            retention_hours=value.retention_hours,
        )


class RetryKind(enum.Enum):
    """RocketMQ ``GroupRetryPolicyType``."""

    CUSTOMIZED = "CUSTOMIZED"
    EXPONENTIAL = "EXPONENTIAL"


@dataclasses.dataclass(frozen=True, slots=True)
class GroupRetryPolicy:
    """A group's redelivery backoff (RocketMQ ``GroupRetryPolicy``).

    Attributes:
        kind: CUSTOMIZED uses ``delays_ms``; EXPONENTIAL the three numbers below.
        delays_ms: CUSTOMIZED waits in ms, one per failed attempt; the last one repeats.
        initial_ms: EXPONENTIAL wait after the first failed attempt, ms.
        max_ms: EXPONENTIAL cap, ms.
        multiplier: EXPONENTIAL growth per attempt (a whole number).
    """

    kind: RetryKind
    delays_ms: tuple[int, ...] = ()
    initial_ms: int = 0
    max_ms: int = 0
    multiplier: int = 0

    def to_message(self, *, max_attempts: int) -> pb.v2.RetryPolicy:
        """The v2 ``RetryPolicy`` the admin API takes."""
        result = pb.v2.RetryPolicy(max_attempts=max_attempts)
        if self.kind is RetryKind.EXPONENTIAL:
            result.exponential_backoff.initial.FromMilliseconds(self.initial_ms)
            result.exponential_backoff.max.FromMilliseconds(self.max_ms)
            result.exponential_backoff.multiplier = float(self.multiplier)
        else:
            for delay_ms in self.delays_ms:
                result.customized_backoff.next.add().FromMilliseconds(delay_ms)
        return result

    @staticmethod
    def from_message(value: pb.v2.RetryPolicy) -> GroupRetryPolicy | None:
        """The policy a v2 ``RetryPolicy`` describes, ``None`` when it names no strategy."""
        strategy = value.WhichOneof("strategy")
        if strategy == "exponential_backoff":
            backoff = value.exponential_backoff
            return GroupRetryPolicy(
                kind=RetryKind.EXPONENTIAL,
                initial_ms=backoff.initial.ToMilliseconds(),
                max_ms=backoff.max.ToMilliseconds(),
                multiplier=int(backoff.multiplier),
            )
        if strategy == "customized_backoff":
            delays = tuple(d.ToMilliseconds() for d in value.customized_backoff.next)
            return GroupRetryPolicy(kind=RetryKind.CUSTOMIZED, delays_ms=delays)
        return None


@dataclasses.dataclass(frozen=True, slots=True)
class GroupInfo:
    """A consumer group's config on one broker group (RocketMQ ``SubscriptionGroupConfig``).

    Attributes:
        broker_name: the broker group.
        name: the consumer group.
        consume_orderly: FIFO delivery (one in-flight message per message group).
        max_delivery_attempts: deliveries before a message goes to ``%DLQ%<group>``.
        broadcast: broadcast consumption.
        retry_policy: the configured backoff, ``None`` for the default of its kind.
        allocate_strategy: how a FIFO group's queues are shared among its members (RocketMQ's
            strategy name: AVG, AVG_BY_CIRCLE, CONSISTENT_HASH, CONFIG).
    """

    broker_name: str
    name: str
    consume_orderly: bool
    max_delivery_attempts: int
    broadcast: bool
    retry_policy: GroupRetryPolicy | None
    allocate_strategy: str = "AVG"

    @staticmethod
    def from_message(broker_name: str, value: pb.admin.SubscriptionGroup) -> GroupInfo:
        """The group an admin ``SubscriptionGroup`` describes."""
        policy = (
            GroupRetryPolicy.from_message(value.retry_policy)
            if value.HasField("retry_policy")
            else None
        )
        return GroupInfo(
            broker_name=broker_name,
            name=value.name,
            consume_orderly=value.consume_orderly,
            max_delivery_attempts=value.max_delivery_attempts,
            broadcast=value.broadcast,
            retry_policy=policy,
            allocate_strategy=value.allocate_strategy or "AVG",
        )


@dataclasses.dataclass(frozen=True, slots=True)
class QueueLag:
    """A consumer group's progress on one queue (RocketMQ ``OffsetWrapper``).

    Attributes:
        broker_name: the broker group.
        topic: the topic.
        queue_id: the queue.
        broker_offset: the queue's max offset (next to be written).
        consumer_offset: the group's next offset to consume.
        lag: ``broker_offset - consumer_offset``, never negative.
        inflight: messages received and not yet acked.
    """

    broker_name: str
    topic: str
    queue_id: int
    broker_offset: int
    consumer_offset: int
    lag: int
    inflight: int

    @staticmethod
    def from_message(value: pb.admin.QueueLag) -> QueueLag:
        """The lag row of an admin ``QueueLag``."""
        return QueueLag(
            broker_name=value.broker_name,
            topic=value.topic,
            queue_id=value.queue_id,
            broker_offset=value.broker_offset,
            consumer_offset=value.consumer_offset,
            lag=value.lag,
            inflight=value.inflight,
        )


class ResetTarget(enum.Enum):
    """Where ``reset_offset`` moves a group."""

    EARLIEST = "EARLIEST"
    LATEST = "LATEST"
    TIMESTAMP = "TIMESTAMP"

    def to_message(self) -> pb.admin.ResetTarget:
        """The admin ``ResetTarget`` enum value."""
        return {
            ResetTarget.EARLIEST: pb.admin.ResetTarget.RESET_TARGET_EARLIEST,
            ResetTarget.LATEST: pb.admin.ResetTarget.RESET_TARGET_LATEST,
            ResetTarget.TIMESTAMP: pb.admin.ResetTarget.RESET_TARGET_TIMESTAMP,
        }[self]


@dataclasses.dataclass(frozen=True, slots=True)
class ResetQueueOffset:
    """A consumer offset set by ``reset_offset``.

    Attributes:
        broker_name: the broker group.
        topic: the topic.
        queue_id: the queue.
        offset: the group's new next offset to consume.
    """

    broker_name: str
    topic: str
    queue_id: int
    offset: int


@dataclasses.dataclass(frozen=True, slots=True)
class MessageRecord:
    """A message as a broker stored it (RocketMQ ``MessageExt``).

    Attributes:
        broker_name: the broker group that stored it.
        topic: its topic.
        queue_id: its queue.
        queue_offset: its index in the queue.
        commit_log_offset: byte position of its record in the broker's CommitLog.
        tag: its tag, or ``None``.
        keys: its keys.
        properties: every stored property, system and user.
        body: the stored body (compressed bodies stay compressed).
        born_timestamp_ms: when the producer made it, ms since the epoch.
        store_timestamp_ms: when the broker stored it, ms since the epoch.
        reconsume_times: redeliveries recorded in the record.
        message_id: the client's message id (UNIQ_KEY), "" if none.
        born_host: the producer's address.
        store_host: the broker's address.
    """

    broker_name: str
    topic: str
    queue_id: int
    queue_offset: int
    commit_log_offset: int
    tag: str | None
    keys: tuple[str, ...]
    properties: Mapping[str, str]
    body: bytes
    born_timestamp_ms: int
    store_timestamp_ms: int
    reconsume_times: int
    message_id: str
    born_host: str
    store_host: str

    @staticmethod
    def from_message(value: pb.admin.StoredMessage) -> MessageRecord:
        """The record an admin ``StoredMessage`` describes."""
        return MessageRecord(
            broker_name=value.broker_name,
            topic=value.topic,
            queue_id=value.queue_id,
            queue_offset=value.queue_offset,
            commit_log_offset=value.commit_log_offset,
            tag=value.tag if value.HasField("tag") else None,
            keys=tuple(value.keys),
            properties=dict(value.properties),
            body=value.body,
            born_timestamp_ms=value.born_timestamp_ms,
            store_timestamp_ms=value.store_timestamp_ms,
            reconsume_times=value.reconsume_times,
            message_id=value.message_id,
            born_host=value.born_host,
            store_host=value.store_host,
        )


@dataclasses.dataclass(frozen=True, slots=True)
class DeadLetterRecord:
    """One message of a group's ``%DLQ%<group>`` on one broker group.

    Attributes:
        message: the letter as stored (its ``message_id`` is the origin message id).
        origin_topic: the topic it was first sent to.
        origin_message_id: its message id there.
        attempts: deliveries before it was given up.
    """

    message: MessageRecord
    origin_topic: str
    origin_message_id: str
    attempts: int

    @staticmethod
    def from_message(value: pb.admin.DeadLetter) -> DeadLetterRecord:
        """The record an admin ``DeadLetter`` describes."""
        return DeadLetterRecord(
            message=MessageRecord.from_message(value.message),
            origin_topic=value.origin_topic,
            origin_message_id=value.origin_message_id,
            attempts=value.attempts,
        )


@dataclasses.dataclass(frozen=True, slots=True)
class ResentRecord:
    """A dead letter written back to its origin topic.

    Attributes:
        broker_name: the broker group that resent it.
        message_id: its message id.
        topic: the origin topic.
        queue_id: the queue it was written to.
        queue_offset: its offset there.
    """

    broker_name: str
    message_id: str
    topic: str
    queue_id: int
    queue_offset: int


_ROLE_NAMES = {
    pb.admin.BrokerRole.BROKER_ROLE_ASYNC_MASTER: "ASYNC_MASTER",
    pb.admin.BrokerRole.BROKER_ROLE_SYNC_MASTER: "SYNC_MASTER",
    pb.admin.BrokerRole.BROKER_ROLE_SLAVE: "SLAVE",
}


@dataclasses.dataclass(frozen=True, slots=True)
class BrokerStats:
    """One broker's runtime figures (RocketMQ ``brokerRuntimeInfo``).

    Attributes:
        cluster: the cluster name.
        broker_name: the broker group.
        broker_id: 0 for a master.
        role: ASYNC_MASTER, SYNC_MASTER, SLAVE or UNSPECIFIED.
        epoch: the broker group's epoch.
        commit_log_min_offset: first CommitLog byte still stored.
        commit_log_max_offset: CommitLog bytes written.
        commit_log_confirm_offset: CommitLog bytes known replicated.
        ha_lag_bytes: for a slave, bytes behind its master.
        writable: whether the broker accepts writes (disk not full).
        disk_used_ratio: used fraction of the store's file system.
        messages_in_total: messages received since start.
        messages_out_total: messages delivered since start.
        start_timestamp_ms: start time, ms since the epoch.
        extra: further named figures.
    """

    cluster: str
    broker_name: str
    broker_id: int
    role: str
    epoch: int
    commit_log_min_offset: int
    commit_log_max_offset: int
    commit_log_confirm_offset: int
    ha_lag_bytes: int
    writable: bool
    disk_used_ratio: float
    messages_in_total: int
    messages_out_total: int
    start_timestamp_ms: int
    extra: Mapping[str, str]

    @staticmethod
    def from_message(value: pb.admin.GetBrokerRuntimeStatsResponse) -> BrokerStats:
        """The stats of a GetBrokerRuntimeStats answer."""
        return BrokerStats(
            cluster=value.cluster_name,
            broker_name=value.broker_name,
            broker_id=value.broker_id,
            role=_ROLE_NAMES.get(value.role, "UNSPECIFIED"),
            epoch=value.epoch,
            commit_log_min_offset=value.commit_log_min_offset,
            commit_log_max_offset=value.commit_log_max_offset,
            commit_log_confirm_offset=value.commit_log_confirm_offset,
            ha_lag_bytes=value.ha_lag_bytes,
            writable=value.writable,
            disk_used_ratio=value.disk_used_ratio,
            messages_in_total=value.messages_in_total,
            messages_out_total=value.messages_out_total,
            start_timestamp_ms=value.start_timestamp_ms,
            extra=dict(value.extra),
        )
