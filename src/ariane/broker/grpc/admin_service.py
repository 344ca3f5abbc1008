"""``AdminService``: the broker's ``ariane.admin.v1.Admin`` API, a thin gRPC adapter.

Each RPC is a coroutine named after the RPC in snake case that decodes its request
(``admin_convert`` gives zero-valued fields their meaning), calls ``processors.admin.
AdminProcessor`` (which holds every rule: master-only changes, what a delete drops, lag, resets,
index queries; RocketMQ ``AdminBrokerProcessor``) and encodes the typed result. Serve it with
``handler(runtime)``; ``ariane.grpcwire.guard`` turns a raised ``ArianeError`` into the reply's
status. ``ChangeRole`` promotes or demotes through ``broker.services.replication`` (DESIGN §7).

Invariant: no admin rule lives here; the classic Remoting adapter calls the same processor.
"""

from __future__ import annotations

from typing import Any, Protocol

import grpc

from ariane.broker import assembly, runtime
from ariane.broker.grpc import admin_convert, auth_admin, auth_gate
from ariane.broker.processors import admin, retry
from ariane.common import errors, ids, topics
from ariane.grpcwire import codes, guard, pb
from ariane.store import commit_log
from ariane.store.ha import settings as ha_settings

Context = grpc.aio.ServicerContext[Any, Any]

_RESET_TARGETS = {
    pb.admin.ResetTarget.RESET_TARGET_EARLIEST: admin.ResetTarget.EARLIEST,
    pb.admin.ResetTarget.RESET_TARGET_LATEST: admin.ResetTarget.LATEST,
    pb.admin.ResetTarget.RESET_TARGET_TIMESTAMP: admin.ResetTarget.TIMESTAMP,
}


LITE_LIST_DEFAULT = 1_000
"""Rows ``ListLiteTopics`` returns when the request sets no limit."""

LITE_LIST_MAX = 100_000
"""Most rows one ``ListLiteTopics`` returns, whatever the request asks."""


class RoleChanger(Protocol):
    """The role changes ``ChangeRole`` drives (``broker.services.replication``)."""

    @property
    def role(self) -> ha_settings.BrokerRole: ...

    @property
    def epoch(self) -> int: ...

    @property
    def in_sync_replicas(self) -> int: ...

    async def promote(self, *, role: ha_settings.BrokerRole, epoch: int) -> None: ...

    async def demote(self, *, epoch: int, broker_id: int, master_ha: str) -> None: ...


def handler(broker: runtime.BrokerRuntime) -> grpc.GenericRpcHandler:
    """The gRPC handler serving ``ariane.admin.v1.Admin`` from ``broker``."""
    return guard.service_handler(pb.ADMIN_SERVICE, AdminService(broker))


class AdminService(auth_admin.AuthAdminRpcs):
    """The admin RPCs of one broker: decode, call the processor, encode.

    Args:
        broker: the runtime; the processor is built over it and the stats' identity read.
        processor: the admin processor to call (default: ``assembly.admin_processor(broker)``).
        roles: what ChangeRole drives (``None``: ChangeRole is refused).
        dead_letters: the DLQ list/resend (default: ``assembly.retry_processor(broker)``).
        auth_stores: the users and ACLs the user/ACL RPCs manage (``None``: those RPCs answer
            UNSUPPORTED).
    """

    def __init__(
        self,
        broker: runtime.BrokerRuntime,
        processor: admin.AdminProcessor | None = None,
        *,
        roles: RoleChanger | None = None,
        dead_letters: retry.RetryProcessor | None = None,
        auth_stores: auth_gate.AuthStores | None = None,
    ) -> None:
        self._rt = broker
        self._admin = processor or assembly.admin_processor(broker)
        self._roles = roles
        self._dead_letters = dead_letters or assembly.retry_processor(broker)
        self._auth_stores = auth_stores

    def _done(self, text: str) -> pb.v2.Status:
        return codes.ok(f"{text} on {self._rt.broker_name}")

    # -- topics -------------------------------------------------------------------------------

    async def create_topic(
        self, request: pb.admin.CreateTopicRequest, context: Context
    ) -> pb.admin.CreateTopicResponse:
        """CreateTopic: create or replace a topic (ILLEGAL_TOPIC for a bad config)."""
        self._admin.require_master()
        wanted = admin_convert.new_topic_config(
            request.topic, default_queue_nums=self._admin.default_queue_nums
        )
        change = self._admin.create_topic(wanted)
        verb = "updated (it existed)" if change.existed else "created"
        return pb.admin.CreateTopicResponse(
            status=self._done(f"topic {change.stored.name} {verb}"),
            topic=admin_convert.topic_message(change.stored),
        )

    async def update_topic(
        self, request: pb.admin.UpdateTopicRequest, context: Context
    ) -> pb.admin.UpdateTopicResponse:
        """UpdateTopic: change the non-zero fields of an existing topic (TOPIC_NOT_FOUND)."""
        stored = self._admin.update_topic(
            request.topic.name,
            lambda current: admin_convert.updated_topic_config(request.topic, current),
        )
        return pb.admin.UpdateTopicResponse(
            status=self._done(f"topic {stored.name} updated"),
            topic=admin_convert.topic_message(stored),
        )

    async def delete_topic(
        self, request: pb.admin.DeleteTopicRequest, context: Context
    ) -> pb.admin.DeleteTopicResponse:
        """DeleteTopic: remove a topic, its consumer offsets and POP queues (TOPIC_NOT_FOUND),
        and its traffic stats (``mqadmin statsAll``)."""
        name = self._admin.delete_topic(request.name)
        self._rt.counters.traffic.forget_topic(name)
        return pb.admin.DeleteTopicResponse(
            status=codes.ok(f"topic {name} deleted from {self._rt.broker_name}")
        )

    async def list_topics(
        self, request: pb.admin.ListTopicsRequest, context: Context
    ) -> pb.admin.ListTopicsResponse:
        """ListTopics: every topic sorted by name; internal ones only with ``include_system``."""
        found = self._admin.list_topics(include_internal=request.include_system)
        return pb.admin.ListTopicsResponse(
            status=codes.ok(), topics=[admin_convert.topic_message(t) for t in found]
        )

    async def list_lite_topics(
        self, request: pb.admin.ListLiteTopicsRequest, context: Context
    ) -> pb.admin.ListLiteTopicsResponse:
        """ListLiteTopics: the lite topics under a LITE parent (TOPIC_NOT_FOUND if unknown)
        with their queue, latest offset and store time, up to ``limit`` (0: 1000, at most
        ``LITE_LIST_MAX``), and the parent's and the broker's counts and quota."""
        parent = self._admin.existing_topic(request.parent).name
        limit = min(request.limit or LITE_LIST_DEFAULT, LITE_LIST_MAX)
        table = self._rt.lite_topics
        rows, total = table.listing(parent, max(0, limit))
        return pb.admin.ListLiteTopicsResponse(
            status=codes.ok(),
            lite_topics=[
                pb.admin.LiteTopic(
                    name=name,
                    queue_id=r.queue_id,
                    last_queue_offset=r.last_offset,
                    last_stored_timestamp_ms=r.last_stored_ms,
                )
                for name, r in rows
            ],
            parent_total=total,
            broker_total=len(table),
            broker_quota=table.lite_topics_max,
        )

    # -- subscription groups --------------------------------------------------------------------

    async def create_subscription_group(
        self, request: pb.admin.CreateSubscriptionGroupRequest, context: Context
    ) -> pb.admin.CreateSubscriptionGroupResponse:
        """CreateSubscriptionGroup: create or replace a group's config."""
        change = self._admin.put_group(
            request.group.name,
            lambda current: admin_convert.group_config_of(request.group, current),
            must_exist=False,
        )
        verb = "updated (it existed)" if change.existed else "created"
        return pb.admin.CreateSubscriptionGroupResponse(
            status=self._done(f"group {change.stored.group} {verb}"),
            group=admin_convert.group_message(change.stored),
        )

    async def update_subscription_group(
        self, request: pb.admin.UpdateSubscriptionGroupRequest, context: Context
    ) -> pb.admin.UpdateSubscriptionGroupResponse:
        """UpdateSubscriptionGroup: replace an existing group's config
        (CONSUMER_GROUP_NOT_FOUND)."""
        change = self._admin.put_group(
            request.group.name,
            lambda current: admin_convert.group_config_of(request.group, current),
            must_exist=True,
        )
        return pb.admin.UpdateSubscriptionGroupResponse(
            status=self._done(f"group {change.stored.group} updated"),
            group=admin_convert.group_message(change.stored),
        )

    async def delete_subscription_group(
        self, request: pb.admin.DeleteSubscriptionGroupRequest, context: Context
    ) -> pb.admin.DeleteSubscriptionGroupResponse:
        """DeleteSubscriptionGroup: remove a group, its offsets, POP state and traffic stats."""
        group = self._admin.delete_group(request.name)
        self._rt.counters.traffic.forget_group(group)
        return pb.admin.DeleteSubscriptionGroupResponse(
            status=codes.ok(f"group {group} deleted from {self._rt.broker_name}")
        )

    async def list_subscription_groups(
        self, request: pb.admin.ListSubscriptionGroupsRequest, context: Context
    ) -> pb.admin.ListSubscriptionGroupsResponse:
        """ListSubscriptionGroups: every group sorted by name."""
        return pb.admin.ListSubscriptionGroupsResponse(
            status=codes.ok(),
            groups=[admin_convert.group_message(g) for g in self._admin.list_groups()],
        )

    # -- consumer progress ----------------------------------------------------------------------

    async def get_consumer_lag(
        self, request: pb.admin.GetConsumerLagRequest, context: Context
    ) -> pb.admin.GetConsumerLagResponse:
        """GetConsumerLag: per readable queue (RocketMQ ``GET_CONSUME_STATS``)."""
        topic = request.topic if request.HasField("topic") else None
        queues = [
            pb.admin.QueueLag(
                topic=q.topic,
                broker_name=self._rt.broker_name,
                queue_id=q.queue_id,
                broker_offset=q.broker_offset,
                consumer_offset=q.consumer_offset,
                lag=q.lag,
                inflight=q.inflight,
            )
            for q in self._admin.consumer_lag(request.group, topic)
        ]
        return pb.admin.GetConsumerLagResponse(
            status=codes.ok(),
            queues=queues,
            total_lag=sum(q.lag for q in queues),
            total_inflight=sum(q.inflight for q in queues),
        )

    async def reset_offset(
        self, request: pb.admin.ResetOffsetRequest, context: Context
    ) -> pb.admin.ResetOffsetResponse:
        """ResetOffset: move a group on every readable queue of a topic
        (``INVOKE_BROKER_TO_RESET_OFFSET``)."""
        self._admin.require_master()
        target = _RESET_TARGETS.get(request.target)
        if target is None:
            raise errors.BadRequestError(
                f"reset target {int(request.target)} is not one of EARLIEST, LATEST, TIMESTAMP"
            )
        topic, offsets = self._admin.reset_offset(
            request.group, request.topic, target, timestamp_ms=request.timestamp_ms
        )
        return pb.admin.ResetOffsetResponse(
            status=codes.ok(f"group {request.group} reset on {len(offsets)} queues of {topic}"),
            offsets=[
                pb.admin.QueueOffset(topic=topic, queue_id=q, offset=o)
                for q, o in sorted(offsets.items())
            ],
        )

    # -- messages -------------------------------------------------------------------------------

    async def query_message_by_id(
        self, request: pb.admin.QueryMessageByIdRequest, context: Context
    ) -> pb.admin.QueryMessageByIdResponse:
        """QueryMessageById: by client message id (needs the topic) or offset message id."""
        found = self._admin.messages_by_id(request.message_id, request.topic)
        return pb.admin.QueryMessageByIdResponse(
            status=codes.ok(),
            messages=[admin_convert.stored_message(m, self._rt.broker_name) for m in found],
        )

    async def query_message_by_key(
        self, request: pb.admin.QueryMessageByKeyRequest, context: Context
    ) -> pb.admin.QueryMessageByKeyResponse:
        """QueryMessageByKey: messages of a topic carrying a key, newest first."""
        found = self._admin.messages_by_key(
            request.topic,
            request.key,
            max_messages=request.max_messages,
            window_ms=(request.begin_timestamp_ms, request.end_timestamp_ms),
        )
        return pb.admin.QueryMessageByKeyResponse(
            status=codes.ok(),
            messages=[admin_convert.stored_message(m, self._rt.broker_name) for m in found],
        )

    async def list_dead_letters(
        self, request: pb.admin.ListDeadLettersRequest, context: Context
    ) -> pb.admin.ListDeadLettersResponse:
        """ListDeadLetters: the oldest letters of ``%DLQ%<group>`` (``ariane admin dlq list``)."""
        group = topics.validate_group(request.group)
        wanted = request.max_messages or retry.DEAD_LETTERS_READ_MAX
        found = self._dead_letters.dead_letters(group, max_messages=wanted)
        return pb.admin.ListDeadLettersResponse(
            status=codes.ok(),
            letters=[
                pb.admin.DeadLetter(
                    message=admin_convert.stored_message(d.stored, self._rt.broker_name),
                    origin_topic=d.origin_topic,
                    origin_message_id=d.origin_message_id,
                    attempts=d.attempts,
                )
                for d in found
            ],
        )

    async def resend_dead_letters(
        self, request: pb.admin.ResendDeadLettersRequest, context: Context
    ) -> pb.admin.ResendDeadLettersResponse:
        """ResendDeadLetters: write letters back to their origin topics (``dlq resend``)."""
        group = topics.validate_group(request.group)
        if request.all == bool(request.message_ids):
            raise errors.BadRequestError("name the dead letters to resend by id, or ask for all")
        wanted = None if request.all else frozenset(request.message_ids)
        resent = await self._dead_letters.resend_dead_letters(group, message_ids=wanted)
        return pb.admin.ResendDeadLettersResponse(
            status=self._done(f"{len(resent)} dead letters of {group} resent"),
            resent=[
                pb.admin.ResentLetter(
                    message_id=r.message_id,
                    topic=r.topic,
                    queue_id=r.queue_id,
                    queue_offset=r.queue_offset,
                )
                for r in resent
            ],
        )

    # -- broker ---------------------------------------------------------------------------------

    async def get_broker_runtime_stats(
        self, request: pb.admin.GetBrokerRuntimeStatsRequest, context: Context
    ) -> pb.admin.GetBrokerRuntimeStatsResponse:
        """GetBrokerRuntimeStats: identity, CommitLog offsets, counters (``brokerRuntimeInfo``).

        A broker without a role is an ASYNC_MASTER at epoch 0 whose confirm offset is its max
        offset (a broker id above 0 reports SLAVE); one with a role reports it, its epoch and
        ``extra["in_sync_replicas"]`` (a master plus its in-sync slaves, RocketMQ
        ``inSyncReplicasNums``; 0 on a slave).
        """
        settings = self._rt.settings
        stats = self._admin.runtime_stats()
        role: pb.admin.BrokerRole = (
            pb.admin.BrokerRole.BROKER_ROLE_ASYNC_MASTER
            if self._rt.broker_id == ids.MASTER_BROKER_ID
            else pb.admin.BrokerRole.BROKER_ROLE_SLAVE
        )
        epoch = 0
        extra = self._extra_stats(stats)
        if self._roles is not None:
            role = pb.admin.BrokerRole.Value(f"BROKER_ROLE_{self._roles.role.value}")  # type: ignore[assignment]
            epoch = self._roles.epoch
            extra["in_sync_replicas"] = str(self._roles.in_sync_replicas)
        return pb.admin.GetBrokerRuntimeStatsResponse(
            status=codes.ok(),
            cluster_name=settings.cluster,
            broker_name=settings.broker_name,
            broker_id=self._rt.broker_id,
            role=role,
            epoch=epoch,
            commit_log_min_offset=stats.store.min_commit_log_offset,
            commit_log_max_offset=stats.store.max_commit_log_offset,
            commit_log_confirm_offset=stats.store.max_commit_log_offset,
            ha_lag_bytes=0,
            writable=not stats.store.disk_full and not self._refuses_writes(),
            disk_used_ratio=stats.disk_used_ratio,
            messages_in_total=stats.counters.messages_in,
            messages_out_total=stats.counters.messages_out,
            start_timestamp_ms=self._rt.start_timestamp_ms,
            extra=extra,
        )

    def _refuses_writes(self) -> bool:
        """Whether the role gate refuses writes (a slave, a fenced master, a lapsed lease); a
        SYNC_MASTER short of ``min_in_sync_replicas`` stays writable here (its in-sync count
        is the ``in_sync_replicas`` stat)."""
        gate = self._rt.store.replication
        role_refusal = commit_log.PutMessageStatus.SERVICE_NOT_AVAILABLE
        return gate is not None and gate.refusal() is role_refusal

    def _extra_stats(self, stats: admin.RuntimeStats) -> dict[str, str]:
        store, counters = stats.store, stats.counters
        return {
            "flushed_commit_log_offset": str(store.flushed_commit_log_offset),
            "flush_behind_bytes": str(store.flush_behind_bytes),
            "dispatch_behind_bytes": str(store.dispatch_behind_bytes),
            "commit_log_segment_count": str(store.commit_log_segment_count),
            "consume_queue_count": str(store.consume_queue_count),
            "put_message_failure_count": str(store.put_message_failure_count),
            "corrupt_read_count": str(store.corrupt_read_count),
            "repaired_record_count": str(store.repaired_record_count),
            "repair_unavailable_count": str(store.repair_unavailable_count),
            "recovery_clean": str(store.recovery_clean).lower(),
            "bytes_in_total": str(counters.bytes_in),
            "bytes_out_total": str(counters.bytes_out),
            "send_to_dlq_messages_total": str(counters.sent_to_dlq),
            "topic_count": str(stats.topic_count),
            "read_only_topic_count": str(stats.read_only_topic_count),
            "group_count": str(stats.group_count),
            "consumer_offset_count": str(stats.consumer_offset_count),
            "flush_disk_type": self._rt.settings.store.flush_disk_type.value,
            "store_dir": str(self._rt.settings.store_dir),
        }

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

    async def wipe_write_perm(
        self, request: pb.admin.WipeWritePermRequest, context: Context
    ) -> pb.admin.WipeWritePermResponse:
        """WipeWritePerm: make every ordinary topic read-only (drain before scale-in)."""
        changed = self._admin.set_write_perm(writable=False)
        return pb.admin.WipeWritePermResponse(
            status=self._done(f"{changed} topics made read-only"), topics_changed=changed
        )

    async def add_write_perm(
        self, request: pb.admin.AddWritePermRequest, context: Context
    ) -> pb.admin.AddWritePermResponse:
        """AddWritePerm: give every ordinary topic its WRITE bit back."""
        changed = self._admin.set_write_perm(writable=True)
        return pb.admin.AddWritePermResponse(
            status=self._done(f"{changed} topics made writable"), topics_changed=changed
        )
