"""``AdminService``: the broker's ``ariane.admin.v1.Admin`` API (RocketMQ ``AdminBrokerProcessor``).

The operator and ``ariane admin`` call it on every master. Each RPC is a coroutine named after
the RPC in snake case; serve it with ``handler(runtime)``
(``rpc.service_handler(pb.ADMIN_SERVICE, AdminService(runtime))``), which turns a raised
``ArianeError`` into the reply's status. The service keeps no state of its own: everything is in
the ``BrokerRuntime``.

What each RPC does (zero-valued request fields: see ``admin_convert``):

* Topics: ``CreateTopic`` creates or replaces a topic (RocketMQ ``UPDATE_AND_CREATE_TOPIC``:
  an existing topic takes the new config); ``UpdateTopic`` changes the given fields of an
  existing one; ``DeleteTopic`` removes it with every group's offsets and POP queues on it
  (its ConsumeQueue files stay until retention deletes them); ``ListTopics`` lists them.
  Every change sets ``runtime.route_changed`` so the broker registers again at once.
* Groups: ``CreateSubscriptionGroup`` creates or replaces a group's config (a group that was
  auto-created on first use takes the new one); ``UpdateSubscriptionGroup`` replaces the config
  of an existing group; ``DeleteSubscriptionGroup`` also forgets its offsets and POP state.
* ``GetConsumerLag``: per queue, the max offset, the group's consumer offset, the lag and the
  POP in-flight count. ``ResetOffset`` moves a group on every readable queue of a topic to the
  earliest, latest or first-at-timestamp offset, dropping its in-flight messages there, and
  persists the offsets at once.
* ``QueryMessageById`` finds a client message id (``UNIQ_KEY``) through the IndexFile key
  ``topic#id``, and also accepts RocketMQ's offset message ids (store host + CommitLog offset);
  ``QueryMessageByKey`` finds ``topic#key``. Index hits are hash matches: each message is read
  and kept only if its topic and id/key really match.
* ``GetBrokerRuntimeStats``: store offsets and counters, disk use, identity.
* ``WipeWritePerm``/``AddWritePerm``: clear or set the WRITE bit of every topic except system,
  ``%RETRY%`` and ``%DLQ%`` topics (retries of messages already here must still work while the
  broker drains), as ``mqadmin wipeWritePerm`` / ``addWritePerm``.
* ``ChangeRole`` promotes or demotes through ``broker.services.replication`` (DESIGN §7).

Every RPC that changes something answers FORBIDDEN on a slave (broker id above 0): changes go to
the master, which slaves copy metadata from.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterable
from typing import Any, Protocol

import grpc

from ariane.broker import runtime
from ariane.broker.grpc import admin_convert
from ariane.broker.tables import subscriptions, topic_config
from ariane.common import errors, ids, message, route, topics
from ariane.remoting import codes, pb, rpc
from ariane.store import commit_log, dispatcher, message_codec, retention
from ariane.store.ha import settings as ha_settings

_log = logging.getLogger(__name__)

Context = grpc.aio.ServicerContext[Any, Any]


class RoleChanger(Protocol):
    """The role changes ``ChangeRole`` drives (``broker.services.replication``)."""

    @property
    def role(self) -> ha_settings.BrokerRole: ...

    @property
    def epoch(self) -> int: ...

    async def promote(self, *, role: ha_settings.BrokerRole, epoch: int) -> None: ...

    async def demote(self, *, epoch: int, broker_id: int, master_ha: str) -> None: ...


RESPONSE_BODY_BYTES_MAX = 64 * 1024 * 1024
"""Most body bytes one query answer carries (at least one message is always returned)."""

TIMESTAMP_MS_MAX = 2**63 - 1
"""Open upper end of a store-time window, in ms."""


def handler(broker: runtime.BrokerRuntime) -> grpc.GenericRpcHandler:
    """The gRPC handler serving ``ariane.admin.v1.Admin`` from ``broker``."""
    return rpc.service_handler(pb.ADMIN_SERVICE, AdminService(broker))


def is_internal_topic(name: str) -> bool:
    """System, ``%RETRY%`` and ``%DLQ%`` topics: hidden by default, never write-wiped."""
    return topics.is_system_topic(name) or topics.is_retry_topic(name) or topics.is_dlq_topic(name)


class AdminService:
    """The admin RPCs of one broker.

    Args:
        broker: the runtime whose tables and store the RPCs read and change.
    """

    def __init__(self, broker: runtime.BrokerRuntime, *, roles: RoleChanger | None = None) -> None:
        self._rt = broker
        self._roles = roles

    # -- topics -------------------------------------------------------------------------------

    def _changed_routes(self) -> None:
        self._rt.route_changed.set()

    def _require_master(self) -> None:
        """Changes go to the master; slaves take metadata from it (RocketMQ refuses them too)."""
        broker_id = self._rt.broker_id
        if broker_id != ids.MASTER_BROKER_ID:
            raise errors.ForbiddenError(
                f"broker {self._rt.broker_name} id {broker_id} is a slave; send admin changes to "
                "its master (broker id 0)"
            )

    def _existing_topic(self, name: str) -> topic_config.TopicConfig:
        topics.validate_topic(name, allow_system=True)
        found = self._rt.topics.get(name)
        if found is None:
            raise errors.TopicNotFoundError(
                f"topic {name!r} does not exist on broker {self._rt.broker_name}; "
                "list the topics or create it first"
            )
        return found

    async def create_topic(
        self, request: pb.admin.CreateTopicRequest, context: Context
    ) -> pb.admin.CreateTopicResponse:
        """CreateTopic: create or replace a topic (ILLEGAL_TOPIC for a bad config)."""
        self._require_master()
        wanted = admin_convert.new_topic_config(
            request.topic, default_queue_nums=self._rt.settings.core.topics.default_queue_nums
        )
        existed = wanted.name in self._rt.topics
        stored = self._rt.topics.create_or_update(wanted)
        self._changed_routes()
        verb = "updated (it existed)" if existed else "created"
        _log.info("admin: topic %s %s: %s", stored.name, verb, stored)
        return pb.admin.CreateTopicResponse(
            status=codes.ok(f"topic {stored.name} {verb} on {self._rt.broker_name}"),
            topic=admin_convert.topic_message(stored),
        )

    async def update_topic(
        self, request: pb.admin.UpdateTopicRequest, context: Context
    ) -> pb.admin.UpdateTopicResponse:
        """UpdateTopic: change the non-zero fields of an existing topic (TOPIC_NOT_FOUND)."""
        self._require_master()
        current = self._existing_topic(request.topic.name)
        stored = self._rt.topics.create_or_update(
            admin_convert.updated_topic_config(request.topic, current),
            system=topics.is_system_topic(current.name),
        )
        self._changed_routes()
        _log.info("admin: topic %s updated: %s", stored.name, stored)
        return pb.admin.UpdateTopicResponse(
            status=codes.ok(f"topic {stored.name} updated on {self._rt.broker_name}"),
            topic=admin_convert.topic_message(stored),
        )

    async def delete_topic(
        self, request: pb.admin.DeleteTopicRequest, context: Context
    ) -> pb.admin.DeleteTopicResponse:
        """DeleteTopic: remove a topic, its consumer offsets and POP queues (TOPIC_NOT_FOUND)."""
        self._require_master()
        current = self._existing_topic(request.name)
        if topics.is_system_topic(current.name):
            raise errors.IllegalTopicError(f"topic {current.name!r} is a system topic; keep it")
        self._rt.topics.delete(current.name)
        removed = self._rt.offsets.remove_topic(current.name)
        queue_ids = range(max(current.read_queue_nums, current.write_queue_nums))
        self._rt.pop_service.close_topic(current.name, queue_ids)
        self._rt.persist_offsets()
        self._changed_routes()
        _log.info("admin: topic %s deleted (%d consumer offsets dropped)", current.name, removed)
        return pb.admin.DeleteTopicResponse(
            status=codes.ok(f"topic {current.name} deleted from {self._rt.broker_name}")
        )

    async def list_topics(
        self, request: pb.admin.ListTopicsRequest, context: Context
    ) -> pb.admin.ListTopicsResponse:
        """ListTopics: every topic sorted by name; internal ones only with ``include_system``."""
        return pb.admin.ListTopicsResponse(
            status=codes.ok(),
            topics=[
                admin_convert.topic_message(t)
                for t in self._rt.topics.list_all()
                if request.include_system or not is_internal_topic(t.name)
            ],
        )

    # -- subscription groups --------------------------------------------------------------------

    def _existing_group(self, name: str) -> subscriptions.SubscriptionGroupConfig:
        topics.validate_group(name)
        found = self._rt.groups.get(name)
        if found is None:
            raise errors.ConsumerGroupNotFoundError(
                f"consumer group {name!r} does not exist on broker {self._rt.broker_name}; "
                "list the groups or create it first"
            )
        return found

    def _put_group(
        self, value: pb.admin.SubscriptionGroup
    ) -> subscriptions.SubscriptionGroupConfig:
        current = self._rt.groups.get(value.name)
        stored = self._rt.groups.create_or_update(admin_convert.group_config_of(value, current))
        if current is not None and current.consume_orderly != stored.consume_orderly:
            # the POP state of the other kind is stale: FIFO bookkeeping differs
            self._rt.pop_service.drop_state(stored.group)
        _log.info("admin: group %s set: %s", stored.group, stored)
        return stored

    async def create_subscription_group(
        self, request: pb.admin.CreateSubscriptionGroupRequest, context: Context
    ) -> pb.admin.CreateSubscriptionGroupResponse:
        """CreateSubscriptionGroup: create or replace a group's config."""
        self._require_master()
        existed = request.group.name in self._rt.groups
        stored = self._put_group(request.group)
        verb = "updated (it existed)" if existed else "created"
        return pb.admin.CreateSubscriptionGroupResponse(
            status=codes.ok(f"group {stored.group} {verb} on {self._rt.broker_name}"),
            group=admin_convert.group_message(stored),
        )

    async def update_subscription_group(
        self, request: pb.admin.UpdateSubscriptionGroupRequest, context: Context
    ) -> pb.admin.UpdateSubscriptionGroupResponse:
        """UpdateSubscriptionGroup: replace an existing group's config.

        Raises:
            ConsumerGroupNotFoundError: the group does not exist here.
        """
        self._require_master()
        self._existing_group(request.group.name)
        stored = self._put_group(request.group)
        return pb.admin.UpdateSubscriptionGroupResponse(
            status=codes.ok(f"group {stored.group} updated on {self._rt.broker_name}"),
            group=admin_convert.group_message(stored),
        )

    async def delete_subscription_group(
        self, request: pb.admin.DeleteSubscriptionGroupRequest, context: Context
    ) -> pb.admin.DeleteSubscriptionGroupResponse:
        """DeleteSubscriptionGroup: remove a group, its offsets and POP state.

        Its ``%RETRY%``/``%DLQ%`` topics stay (the DLQ may hold messages someone still needs).
        """
        self._require_master()
        group = self._existing_group(request.name).group
        self._rt.groups.delete(group)
        removed = self._rt.offsets.remove_group(group)
        self._rt.pop_service.drop_state(group)
        self._rt.persist_offsets()
        _log.info("admin: group %s deleted (%d consumer offsets dropped)", group, removed)
        return pb.admin.DeleteSubscriptionGroupResponse(
            status=codes.ok(f"group {group} deleted from {self._rt.broker_name}")
        )

    async def list_subscription_groups(
        self, request: pb.admin.ListSubscriptionGroupsRequest, context: Context
    ) -> pb.admin.ListSubscriptionGroupsResponse:
        """ListSubscriptionGroups: every group sorted by name."""
        return pb.admin.ListSubscriptionGroupsResponse(
            status=codes.ok(),
            groups=[admin_convert.group_message(g) for g in self._rt.groups.list_all()],
        )

    # -- consumer progress ----------------------------------------------------------------------

    def _consumed_topics(self, group: ids.GroupName) -> list[topic_config.TopicConfig]:
        state = self._rt.pop_service.existing_state(group)
        tracked = {topic for topic, _ in state.open_queues()} if state is not None else set()
        return [
            t
            for t in self._rt.topics.list_all()
            if t.name in tracked or self._rt.offsets.offsets_of(group, t.name)
        ]

    def _queue_lag(
        self, group: ids.GroupName, topic: ids.TopicName, queue_id: ids.QueueId
    ) -> pb.admin.QueueLag:
        progress = self._rt.queue_progress(group, topic, queue_id)
        return pb.admin.QueueLag(
            topic=topic,
            broker_name=self._rt.broker_name,
            queue_id=queue_id,
            broker_offset=progress.broker_offset,
            consumer_offset=progress.consumer_offset,
            lag=progress.lag,
            inflight=progress.inflight,
        )

    async def get_consumer_lag(
        self, request: pb.admin.GetConsumerLagRequest, context: Context
    ) -> pb.admin.GetConsumerLagResponse:
        """GetConsumerLag: per readable queue of the topic (or of every topic the group has
        consumed here), RocketMQ ``GET_CONSUME_STATS``.

        A group that has no config, no offsets and no POP state here answers
        CONSUMER_GROUP_NOT_FOUND, even when a topic is named.
        """
        group = topics.validate_group(request.group)
        consumed = self._consumed_topics(group)
        if not consumed and group not in self._rt.groups:
            raise errors.ConsumerGroupNotFoundError(
                f"consumer group {group!r} has no config and never consumed on broker "
                f"{self._rt.broker_name}; check the name"
            )
        chosen = [self._existing_topic(request.topic)] if request.HasField("topic") else consumed
        queues = [
            self._queue_lag(group, t.name, ids.QueueId(q))
            for t in chosen
            for q in range(t.read_queue_nums)
        ]
        return pb.admin.GetConsumerLagResponse(
            status=codes.ok(),
            queues=queues,
            total_lag=sum(q.lag for q in queues),
            total_inflight=sum(q.inflight for q in queues),
        )

    def _reset_target(self, request: pb.admin.ResetOffsetRequest) -> Callable[[ids.QueueId], int]:
        store, topic = self._rt.store, request.topic
        if request.target == pb.admin.ResetTarget.RESET_TARGET_EARLIEST:
            return lambda q: store.min_queue_offset(topic, q)
        if request.target == pb.admin.ResetTarget.RESET_TARGET_LATEST:
            return lambda q: store.max_queue_offset(topic, q)
        if request.target == pb.admin.ResetTarget.RESET_TARGET_TIMESTAMP:
            if request.timestamp_ms <= 0:
                raise errors.BadRequestError(
                    "a TIMESTAMP reset needs timestamp_ms > 0 (ms since the epoch)"
                )
            return lambda q: store.queue_offset_by_time(topic, q, request.timestamp_ms)
        raise errors.BadRequestError(
            f"reset target {int(request.target)} is not one of EARLIEST, LATEST, TIMESTAMP"
        )

    async def reset_offset(
        self, request: pb.admin.ResetOffsetRequest, context: Context
    ) -> pb.admin.ResetOffsetResponse:
        """ResetOffset: move a group on every readable queue of a topic (RocketMQ
        ``INVOKE_BROKER_TO_RESET_OFFSET``); in-flight messages there are forgotten.

        The group is created with defaults if it is new (as on first use), so a reset can
        position a group before it starts.
        """
        self._require_master()
        topic = self._existing_topic(request.topic)
        offset_at = self._reset_target(request)
        group = self._rt.groups.require(request.group).group
        new_offsets = {
            ids.QueueId(q): ids.QueueOffset(offset_at(ids.QueueId(q)))
            for q in range(topic.read_queue_nums)
        }
        self._rt.offsets.reset(group, topic.name, new_offsets)
        self._rt.pop_service.reset_queues(group, topic.name, new_offsets)
        self._rt.persist_offsets()
        _log.info("admin: group %s reset on %s to %s", group, topic.name, new_offsets)
        return pb.admin.ResetOffsetResponse(
            status=codes.ok(f"group {group} reset on {len(new_offsets)} queues of {topic.name}"),
            offsets=[
                pb.admin.QueueOffset(topic=topic.name, queue_id=q, offset=o)
                for q, o in sorted(new_offsets.items())
            ],
        )

    # -- messages -------------------------------------------------------------------------------

    def _read(self, offsets: Iterable[int]) -> list[message.StoredMessage]:
        found: list[message.StoredMessage] = []
        for offset in offsets:
            result = self._rt.store.get_message(offset)
            if result.status is commit_log.LookupStatus.FOUND and result.message is not None:
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
        hits = self._rt.index.query(
            f"{topic}{dispatcher.KEY_SEPARATOR}{key}",
            max_count=max_count,
            begin_ms=window_ms[0],
            end_ms=window_ms[1],
        )
        return [m for m in self._read(hits) if m.topic == topic and matches(m)]

    def _by_offset_id(self, message_id: str, topic: str) -> list[message.StoredMessage]:
        decoded = message_codec.decode_offset_message_id(message_id)
        if decoded is None:
            return []
        wanted = message_id.upper()
        return [
            m
            for m in self._read([decoded[1]])
            if (not topic or m.topic == topic)
            and message_codec.create_offset_message_id(m.store_host, m.commit_log_offset) == wanted
        ]

    def _answer(self, found: list[message.StoredMessage]) -> list[pb.admin.StoredMessage]:
        answer: list[pb.admin.StoredMessage] = []
        body_bytes = 0
        for stored in found:
            body_bytes += len(stored.body)
            if answer and body_bytes > RESPONSE_BODY_BYTES_MAX:
                break
            answer.append(admin_convert.stored_message(stored, self._rt.broker_name))
        return answer

    async def query_message_by_id(
        self, request: pb.admin.QueryMessageByIdRequest, context: Context
    ) -> pb.admin.QueryMessageByIdResponse:
        """QueryMessageById: by client message id (needs the topic) or offset message id."""
        message_id = request.message_id.strip()
        if not message_id:
            raise errors.BadRequestError("message_id is empty; give the id the producer got back")
        found: list[message.StoredMessage] = []
        if request.topic:
            topic = topics.validate_topic(request.topic, allow_system=True)
            found = self._by_index_key(
                topic,
                message_id,
                lambda m: m.message.uniq_key == message_id,
                max_count=self._rt.settings.index.query_results_max,
            )
        if not found:
            found = self._by_offset_id(message_id, request.topic)
        offset_id = message_codec.decode_offset_message_id(message_id) is not None
        if not found and not request.topic and not offset_id:
            raise errors.BadRequestError(
                f"{message_id!r} is not an offset message id; give the topic too: client "
                "message ids are indexed per topic"
            )
        if not found:
            where = f"topic {request.topic}" if request.topic else "any topic"
            raise errors.MessageNotFoundError(
                f"no message with id {message_id} in {where} on broker {self._rt.broker_name}"
            )
        return pb.admin.QueryMessageByIdResponse(status=codes.ok(), messages=self._answer(found))

    async def query_message_by_key(
        self, request: pb.admin.QueryMessageByKeyRequest, context: Context
    ) -> pb.admin.QueryMessageByKeyResponse:
        """QueryMessageByKey: messages of a topic carrying a key in KEYS, newest first
        (RocketMQ ``QUERY_MESSAGE``); MESSAGE_NOT_FOUND when there are none."""
        topic = topics.validate_topic(request.topic, allow_system=True)
        key = request.key.strip()
        if not key:
            raise errors.BadRequestError("key is empty; give one of the keys the producer set")
        begin = request.begin_timestamp_ms
        end = request.end_timestamp_ms or TIMESTAMP_MS_MAX
        if begin < 0 or begin > end:
            raise errors.BadRequestError(
                f"store-time window [{begin}, {end}] is empty; give begin <= end (ms, 0 = open)"
            )
        limit = self._rt.settings.index.query_results_max
        found = self._by_index_key(
            topic,
            key,
            lambda m: key in m.message.keys,
            max_count=min(request.max_messages, limit) if request.max_messages > 0 else limit,
            window_ms=(begin, end),
        )
        if not found:
            raise errors.MessageNotFoundError(
                f"no message with key {key!r} in topic {topic} on broker {self._rt.broker_name}"
            )
        return pb.admin.QueryMessageByKeyResponse(status=codes.ok(), messages=self._answer(found))

    # -- broker ---------------------------------------------------------------------------------

    def _extra_stats(self) -> dict[str, str]:
        stats = self._rt.store.stats()
        counters = self._rt.counters
        read_only = sum(
            1
            for t in self._rt.topics.list_all()
            if not is_internal_topic(t.name) and not t.writeable
        )
        return {
            "flushed_commit_log_offset": str(stats.flushed_commit_log_offset),
            "flush_behind_bytes": str(stats.flush_behind_bytes),
            "dispatch_behind_bytes": str(stats.dispatch_behind_bytes),
            "commit_log_segment_count": str(stats.commit_log_segment_count),
            "consume_queue_count": str(stats.consume_queue_count),
            "put_message_failure_count": str(stats.put_message_failure_count),
            "corrupt_read_count": str(stats.corrupt_read_count),
            "recovery_clean": str(stats.recovery_clean).lower(),
            "bytes_in_total": str(counters.bytes_in),
            "bytes_out_total": str(counters.bytes_out),
            "send_to_dlq_messages_total": str(counters.sent_to_dlq),
            "topic_count": str(len(self._rt.topics)),
            "read_only_topic_count": str(read_only),
            "group_count": str(len(self._rt.groups)),
            "consumer_offset_count": str(len(self._rt.offsets)),
            "flush_disk_type": self._rt.settings.store.flush_disk_type.value,
            "store_dir": str(self._rt.settings.store_dir),
        }

    def _disk_used_ratio(self) -> float:
        try:
            return retention.disk_used_ratio(self._rt.settings.store_dir)
        except OSError as exc:
            _log.warning("cannot probe the disk of %s: %s", self._rt.settings.store_dir, exc)
            return 0.0

    async def get_broker_runtime_stats(
        self, request: pb.admin.GetBrokerRuntimeStatsRequest, context: Context
    ) -> pb.admin.GetBrokerRuntimeStatsResponse:
        """GetBrokerRuntimeStats: identity, CommitLog offsets, counters (``brokerRuntimeInfo``).

        Until replication lands a master is an ASYNC_MASTER at epoch 0 whose confirm offset is
        its max offset; a broker id above 0 reports SLAVE.
        """
        settings = self._rt.settings
        stats = self._rt.store.stats()
        role: pb.admin.BrokerRole = (
            pb.admin.BrokerRole.BROKER_ROLE_ASYNC_MASTER
            if self._rt.broker_id == ids.MASTER_BROKER_ID
            else pb.admin.BrokerRole.BROKER_ROLE_SLAVE
        )
        epoch = 0
        if self._roles is not None:
            role = pb.admin.BrokerRole.Value(f"BROKER_ROLE_{self._roles.role.value}")  # type: ignore[assignment]
            epoch = self._roles.epoch
        return pb.admin.GetBrokerRuntimeStatsResponse(
            status=codes.ok(),
            cluster_name=settings.cluster,
            broker_name=settings.broker_name,
            broker_id=self._rt.broker_id,
            role=role,
            epoch=epoch,
            commit_log_min_offset=stats.min_commit_log_offset,
            commit_log_max_offset=stats.max_commit_log_offset,
            commit_log_confirm_offset=stats.max_commit_log_offset,
            ha_lag_bytes=0,
            writable=not stats.disk_full,
            disk_used_ratio=self._disk_used_ratio(),
            messages_in_total=self._rt.counters.messages_in,
            messages_out_total=self._rt.counters.messages_out,
            start_timestamp_ms=self._rt.start_timestamp_ms,
            extra=self._extra_stats(),
        )

    async def change_role(
        self, request: pb.admin.ChangeRoleRequest, context: Context
    ) -> pb.admin.ChangeRoleResponse:
        """ChangeRole: promote (a master role, a newer epoch) or demote (SLAVE, the new
        master's HA address); PRECONDITION_FAILED for an epoch that is not newer, UNSUPPORTED
        on a broker started without a role (no HA port)."""
        roles = self._roles
        if roles is None:
            raise errors.UnsupportedError(
                f"broker {self._rt.broker_name} runs without a broker role (no HA port, no "
                "replication); "
                "start it with --broker-role"
            )
        wanted = pb.admin.BrokerRole.Name(request.role).removeprefix("BROKER_ROLE_")
        try:
            if wanted == "SLAVE":
                await roles.demote(
                    epoch=request.epoch,
                    broker_id=request.broker_id,
                    master_ha=request.master_ha_address,
                )
            else:
                await roles.promote(role=ha_settings.BrokerRole(wanted), epoch=request.epoch)
        except ValueError as exc:
            raise errors.PreconditionFailedError(str(exc)) from None
        return pb.admin.ChangeRoleResponse(
            status=codes.ok(),
            role=request.role,
            epoch=roles.epoch,
            commit_log_max_offset=self._rt.store.max_commit_log_offset,
        )

    def _set_write_perm(self, *, writable: bool) -> int:
        changed = 0
        for config in self._rt.topics.list_all():
            if is_internal_topic(config.name) or config.writeable == writable:
                continue
            perm = config.perm | route.Perm.WRITE if writable else config.perm & ~route.Perm.WRITE
            self._rt.topics.create_or_update(
                dataclasses.replace(config, perm=perm), system=topics.is_system_topic(config.name)
            )
            changed += 1
        if changed:
            self._changed_routes()
        return changed

    async def wipe_write_perm(
        self, request: pb.admin.WipeWritePermRequest, context: Context
    ) -> pb.admin.WipeWritePermResponse:
        """WipeWritePerm: make every ordinary topic read-only (drain before scale-in)."""
        self._require_master()
        changed = self._set_write_perm(writable=False)
        _log.warning("admin: write permission wiped from %d topics", changed)
        return pb.admin.WipeWritePermResponse(
            status=codes.ok(f"{changed} topics made read-only on {self._rt.broker_name}"),
            topics_changed=changed,
        )

    async def add_write_perm(
        self, request: pb.admin.AddWritePermRequest, context: Context
    ) -> pb.admin.AddWritePermResponse:
        """AddWritePerm: give every ordinary topic its WRITE bit back."""
        self._require_master()
        changed = self._set_write_perm(writable=True)
        _log.info("admin: write permission added to %d topics", changed)
        return pb.admin.AddWritePermResponse(
            status=codes.ok(f"{changed} topics made writable on {self._rt.broker_name}"),
            topics_changed=changed,
        )
