"""``SlaveSyncService``: a slave copies its master's topics, groups, consumer offsets, users
and ACLs.

Mirrors RocketMQ ``SlaveSynchronize.syncAll`` (topic config, subscription groups, consumer
offsets; every 10 s): the HA stream carries only CommitLog bytes, so without this a promoted
slave would hold the messages but answer TOPIC_NOT_FOUND for them and restart every group from
its ConsumeFromWhere. While this broker is a slave (broker id above 0), every
``slave_sync.interval_ms`` it finds its master in the name servers' cluster info (the member
whose HA address is the one it replicates from, else the group's id 0), reads ``ListTopics``
(system topics included), ``ListSubscriptionGroups`` and ``GetConsumerLag`` per group over the
master's ``AdminService``, and makes its own tables equal: configs the master has are written
(only when different, so the data version moves only on a change), ordinary topics and
groups it lacks are deleted, committed offsets take the master's value (RocketMQ overwrites
the slave's table too), except the transaction check progress (group ``CID_RMQ_SYS_TRANS``): a
slave holds none, and a promotion rebuilds the unresolved half messages from the first record of
the half and op queues (``transaction.processor``), never from a copied progress that may lie
past records this slave holds. With ACL 2.0 on, the calls are signed with the broker's
``[auth.inner_client_authentication_credentials]`` (a Super user). Each round first reads the
master's CommitLog end (``GetBrokerRuntimeStats``) and records it once applied
(``BrokerRuntime.metadata_synced_offset``): topics deleted on the master before it stay deleted
when a promotion rebuilds the configs of topics younger than the last round
(``services.orphan_topics``).

With authentication on (``[auth] authentication_enabled``), each round also reads the master's
users, secret keys included (the slave must verify signatures once promoted), and ACLs over the
inner-only ``ExportAuthMetadata`` RPC (answered to the inner credential user alone) and makes its
own ``config/auth/auth.json`` equal in one atomic write, only when different; its own bootstrap
users (``init_authentication_user``, the inner credential) stay when the master lacks them, and
take the master's version when it has them (a password rotated there holds here too). RocketMQ
5.3's ``SlaveSynchronize.syncAll`` copies no user or ACL (``mqadmin createUser -c`` writes each
master and slave once, so a slave that was down then, or added later, lacks them when promoted).
Without TLS on the channel these secrets cross the network in plaintext like every inner call.
A master too old to serve the export is skipped (warned); a refusal fails the round.

Invariant: it never writes while the broker is a master (a promotion stops the copy at once;
the round in flight re-checks the role before applying). A failed round (name server or master
unreachable, a refusal) is logged and retried next period; nothing is applied half-read.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import logging
from typing import Any

import grpc

from ariane.broker import runtime as runtime_mod
from ariane.broker.grpc import admin_convert, auth_admin
from ariane.broker.tables import subscriptions, topic_config
from ariane.broker.transaction import processor as transaction
from ariane.common import errors, ids, log_limits, topics
from ariane.grpcwire import channel_pool, codes, convert, pb, registry_client, rpc
from ariane.security import model, signing
from ariane.security import settings as auth_settings

_log = logging.getLogger(__name__)

FAILURE_LOG_INTERVAL_S = 30.0
"""Least time between two "sync failed" warnings, s (rounds come every interval)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Snapshot:
    """What one round read from the master."""

    master_endpoint: str
    master_commit_log_offset: int
    """The master's CommitLog end, read before its topic listing."""
    topics: tuple[topic_config.TopicConfig, ...]
    groups: tuple[subscriptions.SubscriptionGroupConfig, ...]
    offsets: tuple[tuple[ids.GroupName, ids.TopicName, ids.QueueId, ids.QueueOffset], ...]
    auth: tuple[tuple[model.User, ...], tuple[model.Acl, ...]] | None = None
    """The master's users (with secrets) and ACLs; ``None``: not copied this round."""


def inner_headers(auth: auth_settings.AuthSettings) -> tuple[tuple[str, str], ...]:
    """The signature headers of a call this broker makes to another broker's gRPC services,
    signed with ``[auth.inner_client_authentication_credentials]`` (RocketMQ
    ``innerClientAuthenticationCredentials``); none when those are not set."""
    inner = auth.inner_client_authentication_credentials
    if inner is None:
        return ()
    now = signing.grpc_date_time(datetime.datetime.now(datetime.UTC))
    return signing.sign_grpc(
        access_key=inner.access_key, secret_key=inner.secret_key, date_time=now
    )


class SlaveSyncService:
    """Keeps a slave's topic, group and offset tables equal to its master's.

    Args:
        runtime: the broker's state (tables, identity, the master's HA address).
        channels: the pool of channels to name servers and the master.
    """

    def __init__(
        self, runtime: runtime_mod.BrokerRuntime, channels: channel_pool.ChannelPool
    ) -> None:
        self._runtime = runtime
        self._channels = channels
        self._timeout_s = runtime.settings.slave_sync.call_timeout_ms / 1000
        self._failures = log_limits.LineLimiter(key_interval_s=FAILURE_LOG_INTERVAL_S)
        self.rounds_ok = 0
        """Rounds applied since start (for tests and stats)."""

    @property
    def _is_slave(self) -> bool:
        return self._runtime.broker_id != ids.MASTER_BROKER_ID

    async def run(self) -> None:
        """Sync every interval while a slave, until cancelled."""
        interval_s = self._runtime.settings.slave_sync.interval_ms / 1000
        while True:
            if self._is_slave:
                try:
                    await self.sync_once()
                except (grpc.aio.AioRpcError, errors.ArianeError, ValueError, OSError) as exc:
                    if self._failures.allow("sync"):
                        _log.warning("metadata sync from the master failed: %s", exc)
            await asyncio.sleep(interval_s)

    async def sync_once(self) -> bool:
        """One round: read the master's tables and apply them; ``False`` if no master is known
        or this broker became a master meanwhile.

        Raises:
            grpc.aio.AioRpcError: the name server or the master did not answer.
            ArianeError: the master refused a call; a table refused a config.
        """
        endpoint = await self._master_endpoint()
        if not endpoint or endpoint == self._runtime.client_endpoint:
            return False
        snapshot = await self._read(endpoint)
        if not self._is_slave:
            return False
        self._apply(snapshot)
        self.rounds_ok += 1
        return True

    async def _master_endpoint(self) -> str:
        runtime = self._runtime
        for addr in runtime.settings.namesrv_addrs:
            registry = registry_client.RegistryClient(
                await self._channels.get(addr), timeout_s=self._timeout_s
            )
            try:
                info = await registry.get_cluster_info()
            except grpc.aio.AioRpcError:
                continue
            for group in info.broker_groups:
                if group.broker_name == runtime.broker_name:
                    return _master_of(group, runtime.master_ha_address)
        return ""

    async def _call(self, endpoint: str, name: str, request: Any, answer: type[rpc.M]) -> rpc.M:
        channel = await self._channels.get(endpoint)
        response = await rpc.unary_call(
            channel,
            pb.ADMIN_SERVICE,
            name,
            request,
            answer,
            timeout_s=self._timeout_s,
            metadata=inner_headers(self._runtime.settings.auth),
        )
        codes.raise_for_status(response.status)  # type: ignore[attr-defined]
        return response

    async def _read(self, endpoint: str) -> Snapshot:
        stats = await self._call(
            endpoint,
            "GetBrokerRuntimeStats",
            pb.admin.GetBrokerRuntimeStatsRequest(),
            pb.admin.GetBrokerRuntimeStatsResponse,
        )
        listed = await self._call(
            endpoint,
            "ListTopics",
            pb.admin.ListTopicsRequest(include_system=True),
            pb.admin.ListTopicsResponse,
        )
        default_queues = self._runtime.settings.core.topics.default_queue_nums
        found_topics = tuple(
            admin_convert.new_topic_config(t, default_queue_nums=default_queues)
            for t in listed.topics
        )
        listed_groups = await self._call(
            endpoint,
            "ListSubscriptionGroups",
            pb.admin.ListSubscriptionGroupsRequest(),
            pb.admin.ListSubscriptionGroupsResponse,
        )
        groups = self._runtime.groups
        found_groups = tuple(
            admin_convert.group_config_of(g, groups.get(g.name)) for g in listed_groups.groups
        )
        offsets = []
        for group in found_groups:
            lag = await self._call(
                endpoint,
                "GetConsumerLag",
                pb.admin.GetConsumerLagRequest(group=group.group),
                pb.admin.GetConsumerLagResponse,
            )
            offsets += [
                (
                    group.group,
                    ids.TopicName(q.topic),
                    ids.QueueId(q.queue_id),
                    ids.QueueOffset(q.consumer_offset),
                )
                for q in lag.queues
            ]
        return Snapshot(
            endpoint,
            stats.commit_log_max_offset,
            found_topics,
            found_groups,
            tuple(offsets),
            await self._read_auth(endpoint),
        )

    async def _read_auth(
        self, endpoint: str
    ) -> tuple[tuple[model.User, ...], tuple[model.Acl, ...]] | None:
        """The master's users and ACLs, converted (a bad one raises before anything is
        applied); ``None`` with authentication off here or a master without the export."""
        if not self._runtime.settings.auth.authentication_enabled:
            return None
        try:
            exported = await self._call(
                endpoint,
                "ExportAuthMetadata",
                pb.admin.ExportAuthMetadataRequest(),
                pb.admin.ExportAuthMetadataResponse,
            )
        except grpc.aio.AioRpcError as exc:
            if exc.code() != grpc.StatusCode.UNIMPLEMENTED:
                raise
            if self._failures.allow("export"):
                _log.warning("master %s cannot export users and ACLs: not copied", endpoint)
            return None
        users = tuple(auth_admin.user_of_secret(u) for u in exported.users)
        return users, tuple(auth_admin.acl_of(a) for a in exported.acls)

    def _apply(self, snapshot: Snapshot) -> None:
        runtime = self._runtime
        wanted_topics = {t.name: t for t in snapshot.topics}
        changed = False
        for name, config in wanted_topics.items():
            if runtime.topics.get(name) != config:
                runtime.topics.create_or_update(config, system=topics.is_system_topic(name))
                changed = True
        for config in runtime.topics.list_all():  # system topics are each broker's own
            if config.name not in wanted_topics and not topics.is_system_topic(config.name):
                changed |= runtime.topics.delete(config.name)
                runtime.lite_topics.drop_parent(config.name)  # a demoted master's lite topics
        wanted_groups = {g.group: g for g in snapshot.groups}
        for group_name, group in wanted_groups.items():
            if runtime.groups.get(group_name) != group:
                runtime.groups.create_or_update(group)
        for group in runtime.groups.list_all():
            if group.group not in wanted_groups:
                runtime.groups.delete(group.group)
        for group_name, topic, queue_id, offset in snapshot.offsets:
            if group_name != transaction.CONSUMER_GROUP:  # a slave holds no check progress
                runtime.offsets.commit(group_name, topic, queue_id, offset)
        runtime.metadata_synced_offset = snapshot.master_commit_log_offset
        if changed:
            runtime.route_changed.set()
        if snapshot.auth is not None:
            users, acls = snapshot.auth
            keep = bootstrap_usernames(runtime.settings.auth)
            runtime.auth_metadata.replace(users, acls, keep=keep)
        _log.debug(
            "synced %d topics, %d groups, %d offsets from %s",
            len(snapshot.topics),
            len(snapshot.groups),
            len(snapshot.offsets),
            snapshot.master_endpoint,
        )


def bootstrap_usernames(auth: auth_settings.AuthSettings) -> tuple[str, ...]:
    """The users ``[auth]`` creates at start (``init_authentication_user``, the inner
    credential): a slave keeps its own when its master lacks them."""
    names = []
    if auth.init_authentication_user is not None:
        names.append(auth.init_authentication_user.username)
    if auth.inner_client_authentication_credentials is not None:
        names.append(auth.inner_client_authentication_credentials.access_key)
    return tuple(names)


def _master_of(group: pb.registry.BrokerGroup, master_ha: str) -> str:
    """The client endpoint of the member serving ``master_ha``, else of broker id 0, else ""."""
    by_ha = [m for m in group.members if master_ha and m.ha_address == master_ha]
    masters = by_ha or [m for m in group.members if m.broker_id == ids.MASTER_BROKER_ID]
    return convert.address_text(masters[0].client_endpoint) if masters else ""
