"""``AdminClient``: topics, groups, lag, offsets and messages of a whole cluster, by name server.

The client knows only the name servers (RocketMQ's ``namesrvAddr``). It finds the broker
groups' masters (broker id 0) with ``GetClusterInfo`` or, for calls about one topic, with
``GetTopicRoute``, then calls each master's ``ariane.admin.v1.Admin`` service, concurrently,
and merges the answers (each value names its broker group). Name servers are tried in order
until one answers; they hold the same routes.

Errors (``ariane.common.errors`` tree)::

    ArianeError
    ├── (any class of the tree)   a broker or name server refused: the status code's class,
    │                             its message prefixed with the broker group
    └── ServiceUnavailableError
        ├── NameServerUnreachableError   no name server answered at the gRPC level
        └── BrokerUnreachableError       a master did not answer at the gRPC level

A call that goes to several masters runs on all of them; if any refuses, the first refusal is
raised after the others finished, and its message says where the call did succeed. Codes that
are normal on some brokers (a group unknown on one of them, a message found on another) are
skipped, and raised only when every broker answered that way.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable, Sequence
from typing import Any

import grpc

from ariane.client import admin_types as types
from ariane.client import auth_admin, transport
from ariane.client import credentials as credentials_mod
from ariane.common import errors, ids, message
from ariane.grpcwire import channel_pool, codes, convert, pb, rpc
from ariane.grpcwire import tls as grpc_tls

_log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 10.0
"""Deadline of each call to a name server or broker, in seconds."""

ROUTE_WAIT_S_DEFAULT = 24.0
"""How long ``create_topic`` waits for the name servers to route a new topic (RocketMQ's
broker waits up to ``registerBrokerTimeoutMills``, 24 s, for its registration before it
answers ``updateTopic``)."""

ROUTE_POLL_S = 0.05
"""Pause between two route queries while waiting for a route."""

NAMESRV_ENDPOINTS_MAX = transport.ENDPOINTS_MAX
"""Most name-server endpoints one client takes."""

NameServerUnreachableError = transport.NameServerUnreachableError
BrokerUnreachableError = transport.BrokerUnreachableError
parse_endpoints = transport.parse_endpoints


def _masters(groups: Iterable[pb.registry.BrokerGroup]) -> list[types.BrokerMaster]:
    return [
        types.BrokerMaster(
            cluster=group.cluster_name,
            broker_name=group.broker_name,
            endpoint=convert.address_text(member.client_endpoint),
        )
        for group in groups
        for member in group.members
        if member.broker_id == ids.MASTER_BROKER_ID
    ]


def _refusal(master: types.BrokerMaster, status: pb.v2.Status) -> errors.ArianeError:
    return errors.error_for_code(codes.code_of(status), f"{master.broker_name}: {status.message}")


def _members(groups: Iterable[pb.registry.BrokerGroup]) -> list[types.BrokerMaster]:
    """Every live member (masters and slaves; a slave named ``<group>/<broker id>``)."""
    return [
        types.BrokerMaster(
            cluster=group.cluster_name,
            broker_name=(
                group.broker_name
                if member.broker_id == ids.MASTER_BROKER_ID
                else f"{group.broker_name}/{member.broker_id}"
            ),
            endpoint=convert.address_text(member.client_endpoint),
        )
        for group in groups
        for member in group.members
    ]


class AdminClient(auth_admin.AuthAdminCalls):
    """Cluster-wide admin calls through the name servers (RocketMQ ``DefaultMQAdminExt``).

    Use it as an async context manager, or call ``close()``.

    Args:
        namesrv_endpoints: ``host:port`` of the name servers, as a sequence or a
            ``;``-separated string.
        timeout_s: deadline of each call, seconds.
        channels_max: most gRPC channels kept open (name servers plus brokers).
        credentials: what every call is signed with (brokers with ACL 2.0 on); ``None``:
            unsigned.
        tls: TLS to name servers and brokers (``None``: plaintext).

    Raises:
        ValueError: for malformed endpoints or a timeout outside 0.1..600 s.
    """

    def __init__(
        self,
        namesrv_endpoints: str | Sequence[str],
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        channels_max: int = 64,
        credentials: credentials_mod.Credentials | None = None,
        tls: grpc_tls.ClientTls | None = None,
    ) -> None:
        self._credentials = credentials
        self.tls = tls
        """The TLS options (``failover`` dials the brokers with them too)."""
        if not 0.1 <= timeout_s <= 600:
            raise ValueError(f"timeout_s must be 0.1..600 seconds, not {timeout_s}")
        self._endpoints = parse_endpoints(namesrv_endpoints)
        self._timeout_s = timeout_s
        self._channels = channel_pool.ChannelPool(
            channels_max=channels_max, credentials=None if tls is None else tls.credentials()
        )

    @property
    def credentials(self) -> credentials_mod.Credentials | None:
        """What every call is signed with (``failover.promote`` signs with them too)."""
        return self._credentials

    @property
    def namesrv_endpoints(self) -> tuple[str, ...]:
        """The name servers, in the order they are tried."""
        return self._endpoints

    async def close(self) -> None:
        """Close every channel."""
        await self._channels.close()

    async def __aenter__(self) -> AdminClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    # -- plumbing ---------------------------------------------------------------------------

    def _headers(self) -> tuple[tuple[str, str], ...]:
        return self._credentials.headers() if self._credentials is not None else ()

    async def _namesrv(self, rpc_name: str, request: Any, response_type: type[rpc.M]) -> rpc.M:
        failures: list[str] = []
        for endpoint in self._endpoints:
            channel = await self._channels.get(endpoint)
            try:
                response = await rpc.unary_call(
                    channel,
                    pb.REGISTRY_SERVICE,
                    rpc_name,
                    request,
                    response_type,
                    timeout_s=self._timeout_s,
                    metadata=self._headers(),
                )
            except grpc.aio.AioRpcError as exc:
                failures.append(f"{endpoint}: {transport.grpc_failure(exc)}")
                continue
            codes.raise_for_status(response.status)  # type: ignore[attr-defined]
            return response
        raise NameServerUnreachableError(
            "no name server answered (" + "; ".join(failures) + "); check the endpoints and "
            "that `ariane namesrv` runs there"
        )

    async def _broker(
        self, master: types.BrokerMaster, rpc_name: str, request: Any, response_type: type[rpc.M]
    ) -> rpc.M:
        channel = await self._channels.get(master.endpoint)
        try:
            return await rpc.unary_call(
                channel,
                pb.ADMIN_SERVICE,
                rpc_name,
                request,
                response_type,
                timeout_s=self._timeout_s,
                metadata=self._headers(),
            )
        except grpc.aio.AioRpcError as exc:
            raise BrokerUnreachableError(
                f"{master.broker_name} at {master.endpoint} did not answer {rpc_name}: "
                f"{transport.grpc_failure(exc)}"
            ) from None

    async def _fan_out(
        self,
        masters: Sequence[types.BrokerMaster],
        rpc_name: str,
        request: Any,
        response_type: type[rpc.M],
        *,
        skip: frozenset[errors.Code] = frozenset(),
    ) -> list[tuple[types.BrokerMaster, rpc.M]]:
        """Call ``rpc_name`` on every master at once; the successes in ``masters`` order."""
        results = await asyncio.gather(
            *(self._broker(m, rpc_name, request, response_type) for m in masters),
            return_exceptions=True,
        )
        done: list[tuple[types.BrokerMaster, rpc.M]] = []
        refused: list[errors.ArianeError] = []
        skipped: list[errors.ArianeError] = []
        for master, result in zip(masters, results, strict=True):
            if isinstance(result, errors.ArianeError):
                refused.append(result)
            elif isinstance(result, BaseException):
                raise result
            elif codes.is_success(result.status):  # type: ignore[attr-defined]
                done.append((master, result))
            else:
                status: pb.v2.Status = result.status  # type: ignore[attr-defined]
                (skipped if codes.code_of(status) in skip else refused).append(
                    _refusal(master, status)
                )
        if refused:
            first = refused[0]
            if done:
                first.message += f" (done on {', '.join(m.broker_name for m, _ in done)})"
                first.args = (first.message,)
            raise first
        if skipped and not done:
            raise skipped[0]
        return done

    # -- discovery -------------------------------------------------------------------------

    async def masters(self, broker_names: Sequence[str] = ()) -> list[types.BrokerMaster]:
        """The live masters, sorted by cluster then broker name; only ``broker_names`` if given.

        Raises:
            NameServerUnreachableError: no name server answered.
            NotFoundError: no broker is registered at all.
            BadRequestError: a name in ``broker_names`` is not registered.
        """
        info = await self._namesrv(
            "GetClusterInfo",
            pb.registry.GetClusterInfoRequest(),
            pb.registry.GetClusterInfoResponse,
        )
        found = _masters(info.broker_groups)
        if not found:
            raise errors.NotFoundError(
                f"no broker master is registered with {', '.join(self._endpoints)}; start one "
                "(`ariane broker` or `ariane dev`) and wait for it to register"
            )
        if not broker_names:
            return found
        known = {m.broker_name: m for m in found}
        missing = [n for n in broker_names if n not in known]
        if missing:
            raise errors.BadRequestError(
                f"broker group(s) {', '.join(missing)} not registered; registered: "
                f"{', '.join(sorted(known))}"
            )
        return [known[n] for n in dict.fromkeys(broker_names)]

    async def members(self, broker_names: Sequence[str] = ()) -> list[types.BrokerMaster]:
        """Every live broker, masters and slaves (where users and ACLs are written: RocketMQ
        ``mqadmin createUser -c`` writes to both); only those of ``broker_names`` if given.

        Raises:
            NameServerUnreachableError: no name server answered.
            NotFoundError: no broker is registered at all.
        """
        info = await self._namesrv(
            "GetClusterInfo",
            pb.registry.GetClusterInfoRequest(),
            pb.registry.GetClusterInfoResponse,
        )
        wanted = set(broker_names)
        found = [
            m
            for m in _members(info.broker_groups)
            if not wanted or m.broker_name.partition("/")[0] in wanted
        ]
        if not found:
            raise errors.NotFoundError(
                f"no broker is registered with {', '.join(self._endpoints)}"
                + (f" for {', '.join(sorted(wanted))}" if wanted else "")
            )
        return found

    async def topic_masters(self, topic: str) -> list[types.BrokerMaster]:
        """The masters of the broker groups that hold ``topic``.

        Raises:
            TopicNotFoundError: no broker group registered the topic.
            BrokerUnreachableError: its broker groups have no live master.
        """
        route = await self._namesrv(
            "GetTopicRoute",
            pb.registry.GetTopicRouteRequest(topic=topic),
            pb.registry.GetTopicRouteResponse,
        )
        holders = {q.broker_name for q in route.queue_datas}
        found = [m for m in _masters(route.broker_groups) if m.broker_name in holders]
        if not found:
            raise BrokerUnreachableError(
                f"topic {topic!r} is on {', '.join(sorted(holders))}, but no master of them is "
                "registered; check the brokers"
            )
        return found

    # -- topics ----------------------------------------------------------------------------

    async def create_topic(
        self,
        name: str,
        *,
        read_queue_nums: int = 0,
        write_queue_nums: int = 0,
        message_type: message.MessageType = message.MessageType.NORMAL,
        perm: int = 0,
        retention_hours: int = 0,
        broker_names: Sequence[str] = (),
        route_wait_s: float = ROUTE_WAIT_S_DEFAULT,
    ) -> list[types.TopicInfo]:
        """Create (or replace) a topic on every master, or on the named broker groups
        (RocketMQ ``mqadmin updateTopic``), and return once the name servers route it there
        (``wait_until_routed``): a producer started right after finds it. RocketMQ's broker
        answers ``updateTopic`` only after registering the topic with the name servers; an
        Ariane broker registers in the background (``route_changed``), so the wait is here.

        Args:
            name: the topic.
            read_queue_nums: queues per broker group consumers read; 0 = like
                ``write_queue_nums``, or the broker default (8) when both are 0.
            write_queue_nums: queues per broker group producers write; 0 as above.
            message_type: the kinds of message it accepts.
            perm: RocketMQ perm bits; 0 = read and write (6).
            retention_hours: hours to keep its messages; 0 = the broker default.
            broker_names: only these broker groups (all masters when empty).
            route_wait_s: the most seconds to wait for the route; 0 = return at once.

        Returns:
            the topic as each broker group stored it.

        Raises:
            IllegalTopicError: a bad name or value (the message says which).
            NameServerUnreachableError, BrokerUnreachableError, NotFoundError: see ``masters``.
            RequestTimeoutError: created, but not routed within ``route_wait_s``.
        """
        topic = pb.admin.Topic(
            name=name,
            read_queue_nums=read_queue_nums,
            write_queue_nums=write_queue_nums,
            perm=perm,
            message_type=convert.topic_message_type(message_type),
            retention_hours=retention_hours,
        )
        done = await self._fan_out(
            await self.masters(broker_names),
            "CreateTopic",
            pb.admin.CreateTopicRequest(topic=topic),
            pb.admin.CreateTopicResponse,
        )
        if route_wait_s > 0:
            await self.wait_until_routed(
                name, [m.broker_name for m, _ in done], timeout_s=route_wait_s
            )
        return [types.TopicInfo.from_message(m.broker_name, r.topic) for m, r in done]

    async def wait_until_routed(
        self, topic: str, broker_names: Sequence[str], *, timeout_s: float
    ) -> None:
        """Wait until every name server that answers routes ``topic`` to each of
        ``broker_names`` (at least one must answer; one that does not is not waited for: a
        client asking it fails over to the others).

        Args:
            topic: the topic.
            broker_names: the broker groups the route must name.
            timeout_s: the most seconds to wait (one query round may add a call deadline).

        Raises:
            RequestTimeoutError: not so after ``timeout_s``; the message names what is missing
                where.
        """
        deadline_s = time.monotonic() + timeout_s
        wanted = set(broker_names)
        while True:
            missing = await self._unrouted(topic, wanted)
            if not missing:
                return
            if time.monotonic() >= deadline_s:
                raise errors.RequestTimeoutError(
                    f"topic {topic!r} was created but the name servers do not route it after "
                    f"{timeout_s:g} s ({'; '.join(missing)}); check that the brokers register "
                    "with them (their logs)"
                )
            await asyncio.sleep(ROUTE_POLL_S)

    async def _unrouted(self, topic: str, wanted: set[str]) -> list[str]:
        """What each name server lacks of ``topic``'s route to ``wanted`` (``[]``: all there)."""
        request = pb.registry.GetTopicRouteRequest(topic=topic)
        answers = await asyncio.gather(
            *(self._route_on(e, request) for e in self._endpoints), return_exceptions=True
        )
        lacking: list[str] = []
        silent: list[str] = []
        for endpoint, answer in zip(self._endpoints, answers, strict=True):
            if isinstance(answer, grpc.aio.AioRpcError):
                silent.append(f"{endpoint}: {transport.grpc_failure(answer)}")
                continue
            if isinstance(answer, BaseException):
                raise answer
            absent = wanted - {q.broker_name for q in answer.queue_datas}  # all: TOPIC_NOT_FOUND
            if absent:
                lacking.append(f"{endpoint} lacks {', '.join(sorted(absent))}")
            else:
                codes.raise_for_status(answer.status)
        answered = len(silent) < len(self._endpoints)
        return lacking + silent if lacking or not answered else []

    async def _route_on(
        self, endpoint: str, request: pb.registry.GetTopicRouteRequest
    ) -> pb.registry.GetTopicRouteResponse:
        channel = await self._channels.get(endpoint)
        return await rpc.unary_call(
            channel,
            pb.REGISTRY_SERVICE,
            "GetTopicRoute",
            request,
            pb.registry.GetTopicRouteResponse,
            timeout_s=self._timeout_s,
            metadata=self._headers(),
        )

    async def update_topic(
        self,
        name: str,
        *,
        read_queue_nums: int = 0,
        write_queue_nums: int = 0,
        message_type: message.MessageType | None = None,
        perm: int = 0,
        retention_hours: int = 0,
    ) -> list[types.TopicInfo]:
        """Change the given fields of a topic on every broker group that holds it; zero (and
        ``None``) fields keep their value, ``retention_hours=-1`` restores the broker default.

        Raises:
            TopicNotFoundError: no broker group holds the topic.
            IllegalTopicError: a bad value.
        """
        topic = pb.admin.Topic(
            name=name,
            read_queue_nums=read_queue_nums,
            write_queue_nums=write_queue_nums,
            perm=perm,
            retention_hours=retention_hours,
        )
        if message_type is not None:
            topic.message_type = convert.topic_message_type(message_type)
        done = await self._fan_out(
            await self.topic_masters(name),
            "UpdateTopic",
            pb.admin.UpdateTopicRequest(topic=topic),
            pb.admin.UpdateTopicResponse,
        )
        return [types.TopicInfo.from_message(m.broker_name, r.topic) for m, r in done]

    async def delete_topic(self, name: str) -> list[str]:
        """Delete a topic (and its consumer offsets) from every broker group holding it.

        Returns:
            the broker groups it was deleted from.

        Raises:
            TopicNotFoundError: no broker group holds the topic.
        """
        done = await self._fan_out(
            await self.topic_masters(name),
            "DeleteTopic",
            pb.admin.DeleteTopicRequest(name=name),
            pb.admin.DeleteTopicResponse,
            skip=frozenset({errors.Code.TOPIC_NOT_FOUND}),
        )
        return [m.broker_name for m, _ in done]

    async def list_topics(self, *, include_system: bool = False) -> list[types.TopicInfo]:
        """Every topic of every master, sorted by name then broker group; ``include_system``
        adds system, ``%RETRY%`` and ``%DLQ%`` topics."""
        done = await self._fan_out(
            await self.masters(),
            "ListTopics",
            pb.admin.ListTopicsRequest(include_system=include_system),
            pb.admin.ListTopicsResponse,
        )
        found = [types.TopicInfo.from_message(m.broker_name, t) for m, r in done for t in r.topics]
        return sorted(found, key=lambda t: (t.name, t.broker_name))

    async def list_lite_topics(self, parent: str, *, limit: int = 0) -> list[types.LiteTopicInfo]:
        """The lite topics under LITE topic ``parent`` on every master holding it, up to
        ``limit`` per broker group (0: the broker's default, 1000), sorted by broker group
        then name.

        Raises:
            TopicNotFoundError: no broker group holds ``parent``.
        """
        done = await self._fan_out(
            await self.topic_masters(parent),
            "ListLiteTopics",
            pb.admin.ListLiteTopicsRequest(parent=parent, limit=limit),
            pb.admin.ListLiteTopicsResponse,
        )
        found = [
            types.LiteTopicInfo(
                m.broker_name,
                parent,
                t.name,
                t.queue_id,
                t.last_queue_offset,
                t.last_stored_timestamp_ms,
            )
            for m, r in done
            for t in r.lite_topics
        ]
        return sorted(found, key=lambda t: (t.broker_name, t.name))

    # -- groups ----------------------------------------------------------------------------

    async def create_group(
        self,
        name: str,
        *,
        consume_orderly: bool = False,
        max_delivery_attempts: int = 0,
        broadcast: bool = False,
        retry_policy: types.GroupRetryPolicy | None = None,
        broker_names: Sequence[str] = (),
        allocate_strategy: str = "",
        allocate_config_queues: Sequence[tuple[str, str, int]] = (),
    ) -> list[types.GroupInfo]:
        """Create (or replace) a consumer group's config on every master, or on the named
        broker groups (RocketMQ ``mqadmin updateSubGroup``). Groups are also created with
        defaults on first use; this sets FIFO, attempts and backoff.

        Args:
            name: the consumer group.
            consume_orderly: FIFO delivery (one in-flight message per message group).
            max_delivery_attempts: deliveries before the DLQ, first one included; 0 = 17.
            broadcast: broadcast consumption.
            retry_policy: the backoff; ``None`` = the default of the group's kind.
            broker_names: only these broker groups (all masters when empty).
            allocate_strategy: how a FIFO group's queues are shared among its members
                (AVG, AVG_BY_CIRCLE, CONSISTENT_HASH, CONFIG; "" = AVG).
            allocate_config_queues: CONFIG's fixed queues as (topic, broker name, queue id).

        Raises:
            IllegalConsumerGroupError: a bad name or value (an unknown strategy included).
        """
        group = pb.admin.SubscriptionGroup(
            name=name,
            consume_orderly=consume_orderly,
            max_delivery_attempts=max_delivery_attempts,
            broadcast=broadcast,
            allocate_strategy=allocate_strategy,
            allocate_config_queues=[
                pb.admin.QueueRef(topic=t, broker_name=b, queue_id=q)
                for t, b, q in allocate_config_queues
            ],
        )
        if retry_policy is not None:
            group.retry_policy.CopyFrom(retry_policy.to_message(max_attempts=max_delivery_attempts))
        done = await self._fan_out(
            await self.masters(broker_names),
            "CreateSubscriptionGroup",
            pb.admin.CreateSubscriptionGroupRequest(group=group),
            pb.admin.CreateSubscriptionGroupResponse,
        )
        return [types.GroupInfo.from_message(m.broker_name, r.group) for m, r in done]

    async def delete_group(self, name: str) -> list[str]:
        """Delete a group's config, offsets and POP state from every master that has it.

        Returns:
            the broker groups it was deleted from.

        Raises:
            ConsumerGroupNotFoundError: no master has the group.
        """
        done = await self._fan_out(
            await self.masters(),
            "DeleteSubscriptionGroup",
            pb.admin.DeleteSubscriptionGroupRequest(name=name),
            pb.admin.DeleteSubscriptionGroupResponse,
            skip=frozenset({errors.Code.CONSUMER_GROUP_NOT_FOUND}),
        )
        return [m.broker_name for m, _ in done]

    async def list_groups(self) -> list[types.GroupInfo]:
        """Every consumer group of every master, sorted by name then broker group."""
        done = await self._fan_out(
            await self.masters(),
            "ListSubscriptionGroups",
            pb.admin.ListSubscriptionGroupsRequest(),
            pb.admin.ListSubscriptionGroupsResponse,
        )
        found = [types.GroupInfo.from_message(m.broker_name, g) for m, r in done for g in r.groups]
        return sorted(found, key=lambda g: (g.name, g.broker_name))

    # -- progress --------------------------------------------------------------------------

    async def consumer_lag(self, group: str, topic: str | None = None) -> list[types.QueueLag]:
        """A group's lag per queue, of one topic or of every topic it consumed, sorted by topic,
        broker group and queue (RocketMQ ``mqadmin consumerProgress``).

        Raises:
            ConsumerGroupNotFoundError: no master knows the group.
            TopicNotFoundError: ``topic`` is not registered.
        """
        request = pb.admin.GetConsumerLagRequest(group=group)
        if topic is not None:
            request.topic = topic
        masters = await (self.masters() if topic is None else self.topic_masters(topic))
        done = await self._fan_out(
            masters,
            "GetConsumerLag",
            request,
            pb.admin.GetConsumerLagResponse,
            skip=frozenset({errors.Code.CONSUMER_GROUP_NOT_FOUND}),
        )
        found = [types.QueueLag.from_message(q) for _, r in done for q in r.queues]
        return sorted(found, key=lambda q: (q.topic, q.broker_name, q.queue_id))

    async def reset_offset(
        self, group: str, topic: str, target: types.ResetTarget, *, timestamp_ms: int = 0
    ) -> list[types.ResetQueueOffset]:
        """Move a group on every queue of a topic (RocketMQ ``mqadmin resetOffsetByTime``).

        Args:
            group: the consumer group (created with defaults where it is new).
            topic: the topic.
            target: EARLIEST, LATEST, or TIMESTAMP (the first message stored at or after
                ``timestamp_ms``).
            timestamp_ms: ms since the epoch, for TIMESTAMP.

        Raises:
            TopicNotFoundError, IllegalConsumerGroupError, BadRequestError.
        """
        request = pb.admin.ResetOffsetRequest(
            group=group, topic=topic, target=target.to_message(), timestamp_ms=timestamp_ms
        )
        done = await self._fan_out(
            await self.topic_masters(topic), "ResetOffset", request, pb.admin.ResetOffsetResponse
        )
        return [
            types.ResetQueueOffset(m.broker_name, o.topic, o.queue_id, o.offset)
            for m, r in done
            for o in r.offsets
        ]

    # -- messages --------------------------------------------------------------------------

    async def query_message_by_id(
        self, message_id: str, *, topic: str | None = None
    ) -> list[types.MessageRecord]:
        """The messages with a client message id (needs ``topic``) or an offset message id
        (RocketMQ ``mqadmin queryMsgById`` / ``queryMsgByUniqueKey``).

        Raises:
            MessageNotFoundError: no broker has it.
            BadRequestError: no topic and the id is not an offset message id.
        """
        request = pb.admin.QueryMessageByIdRequest(topic=topic or "", message_id=message_id)
        masters = await (self.masters() if topic is None else self.topic_masters(topic))
        done = await self._fan_out(
            masters,
            "QueryMessageById",
            request,
            pb.admin.QueryMessageByIdResponse,
            skip=frozenset({errors.Code.MESSAGE_NOT_FOUND}),
        )
        return [types.MessageRecord.from_message(m) for _, r in done for m in r.messages]

    async def query_message_by_key(
        self, topic: str, key: str, *, max_messages: int = 0
    ) -> list[types.MessageRecord]:
        """The messages of a topic carrying ``key``, newest first per broker group
        (RocketMQ ``mqadmin queryMsgByKey``); ``max_messages`` 0 = the broker's cap.

        Raises:
            MessageNotFoundError: no broker has such a message.
        """
        request = pb.admin.QueryMessageByKeyRequest(topic=topic, key=key, max_messages=max_messages)
        done = await self._fan_out(
            await self.topic_masters(topic),
            "QueryMessageByKey",
            request,
            pb.admin.QueryMessageByKeyResponse,
            skip=frozenset({errors.Code.MESSAGE_NOT_FOUND}),
        )
        return [types.MessageRecord.from_message(m) for _, r in done for m in r.messages]

    # -- dead letters ----------------------------------------------------------------------

    async def dead_letters(
        self, group: str, *, max_messages: int = 0
    ) -> list[types.DeadLetterRecord]:
        """The letters of ``%DLQ%<group>`` on every master, oldest first per broker group;
        ``max_messages`` 0 = the broker's cap (RocketMQ leaves the DLQ to operators)."""
        request = pb.admin.ListDeadLettersRequest(group=group, max_messages=max_messages)
        done = await self._fan_out(
            await self.masters(), "ListDeadLetters", request, pb.admin.ListDeadLettersResponse
        )
        return [types.DeadLetterRecord.from_message(d) for _, r in done for d in r.letters]

    async def resend_dead_letters(
        self, group: str, *, message_ids: Sequence[str] = (), everything: bool = False
    ) -> list[types.ResentRecord]:
        """Write dead letters of ``group`` back to their origin topics, on every master that
        holds them: the named ids, or every letter with ``everything``.

        Raises:
            MessageNotFoundError: no broker group holds one of the named letters.
            BadRequestError: neither ids nor ``everything``, or both.
        """
        if bool(message_ids) == everything:
            raise errors.BadRequestError("name the dead letters to resend by id, or ask for all")
        masters = await self.masters()
        if everything:
            done = await self._fan_out(
                masters,
                "ResendDeadLetters",
                pb.admin.ResendDeadLettersRequest(group=group, all=True),
                pb.admin.ResendDeadLettersResponse,
            )
            return _resent(done)
        found = await self.dead_letters(group)
        holders = {d.message.broker_name for d in found if d.origin_message_id in message_ids}
        missing = set(message_ids) - {d.origin_message_id for d in found}
        if missing:
            raise errors.MessageNotFoundError(
                f"no dead letter of group {group!r} has id {', '.join(sorted(missing))}"
            )
        per_broker = {
            b: [d.origin_message_id for d in found if d.message.broker_name == b] for b in holders
        }
        done = []
        for master in [m for m in masters if m.broker_name in holders]:
            wanted = [i for i in message_ids if i in per_broker[master.broker_name]]
            request = pb.admin.ResendDeadLettersRequest(group=group, message_ids=wanted)
            done += await self._fan_out(
                [master], "ResendDeadLetters", request, pb.admin.ResendDeadLettersResponse
            )
        return _resent(done)

    # -- brokers ---------------------------------------------------------------------------

    async def broker_stats(self, broker_names: Sequence[str] = ()) -> list[types.BrokerStats]:
        """Runtime figures of every master (or the named ones)."""
        done = await self._fan_out(
            await self.masters(broker_names),
            "GetBrokerRuntimeStats",
            pb.admin.GetBrokerRuntimeStatsRequest(),
            pb.admin.GetBrokerRuntimeStatsResponse,
        )
        return [types.BrokerStats.from_message(r) for _, r in done]

    async def set_write_perm(
        self, broker_names: Sequence[str], *, writable: bool
    ) -> dict[str, int]:
        """Wipe (``writable=False``, drain) or restore the write permission of every ordinary
        topic on the named broker groups (RocketMQ ``mqadmin wipeWritePerm``/``addWritePerm``).

        Returns:
            broker group → number of topics changed.

        Raises:
            BadRequestError: no broker group named (a drain is never cluster-wide by accident).
        """
        if not broker_names:
            raise errors.BadRequestError("name the broker group(s) whose write permission to set")
        masters = await self.masters(broker_names)
        if writable:
            done_add = await self._fan_out(
                masters,
                "AddWritePerm",
                pb.admin.AddWritePermRequest(),
                pb.admin.AddWritePermResponse,
            )
            return {m.broker_name: r.topics_changed for m, r in done_add}
        done_wipe = await self._fan_out(
            masters,
            "WipeWritePerm",
            pb.admin.WipeWritePermRequest(),
            pb.admin.WipeWritePermResponse,
        )
        return {m.broker_name: r.topics_changed for m, r in done_wipe}


def _resent(
    done: Iterable[tuple[types.BrokerMaster, pb.admin.ResendDeadLettersResponse]],
) -> list[types.ResentRecord]:
    return [
        types.ResentRecord(m.broker_name, r.message_id, r.topic, r.queue_id, r.queue_offset)
        for m, response in done
        for r in response.resent
    ]
