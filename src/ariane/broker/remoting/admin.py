"""Classic admin codes, the broker side of ``mqadmin`` (rocketmq-tools 5.3.3).

Mirrors RocketMQ's ``AdminBrokerProcessor`` for the codes ``mqadmin updateTopic, updateSubGroup,
topicList -c, clusterList, topicStatus, consumerProgress, brokerStatus, statsAll,
resetOffsetByTime`` send
(remoting.md §5, §9), over the protocol-neutral ``processors.admin.AdminProcessor`` (the one the
gRPC admin API and ``ariane admin`` call) and the classic client table:

* ``UPDATE_AND_CREATE_TOPIC`` (17) and ``UPDATE_AND_CREATE_SUBSCRIPTIONGROUP`` (200) create or
  replace the config through the processor, which persists the table at once and (topics)
  sets ``route_changed`` so the broker registers with every name server, as ``ariane admin
  topic create`` does. A bad name or config answers INVALID_PARAMETER (29), a slave
  NO_PERMISSION (16).
* ``GET_TOPIC_STATS_INFO`` (202): min/max offset and last store time per queue, or
  TOPIC_NOT_EXIST (17); ``topicPutTps`` is the topic's live ``TOPIC_PUT_NUMS`` rate (which
  ``mqadmin topicStatus`` 5.3.3 drops: it merges only the brokers' offset tables).
* ``GET_CONSUME_STATS`` (208): per readable queue the broker, consumer and pull offsets and the
  last consumed store time, of ``topic`` or of every topic the group consumed here; when the
  group's clients are online, only the topics they subscribe to (as RocketMQ). An unknown
  group or topic answers an empty table, on which mqadmin asks 203. ``consumeTps`` sums the
  group's live ``GROUP_GET_NUMS`` rates over those topics.
* ``GET_CONSUMER_CONNECTION_LIST`` (203): the group's live classic clients and subscriptions,
  or CONSUMER_NOT_ONLINE (206).
* ``GET_PRODUCER_CONNECTION_LIST`` (204): the producer group's live classic clients, or
  SYSTEM_ERROR (1) "the producer group[...] not exist" (RocketMQ's code for it).
* ``GET_TOPIC_CONFIG`` (351): the topic's config, or TOPIC_NOT_EXIST (17), which mqadmin's
  ``consumerProgress`` and ``topicStatus`` tolerate.
* ``GET_BROKER_RUNTIME_INFO`` (28): a ``KVTable`` of store and traffic figures, with the live
  ``putTps``/``getTransferedTps`` of ``rates.TpsSampler`` (10 s, 1 min, 10 min).
* ``VIEW_BROKER_STATS_DATA`` (315), header ``statsName``, ``statsKey``: a ``BrokerStatsData``
  (minute, hour, day: ``sum``, ``tps``, ``avgpt``) of one item of ``traffic_stats`` (topic and
  topic@group stats) or, for ``BROKER_PUT_NUMS``/``BROKER_GET_NUMS`` under the cluster name, of
  ``rates.TpsSampler``; an item never counted answers SYSTEM_ERROR (1) "The stats <name> <key>
  not exist", as RocketMQ's (``statsAll`` then prints 0 for it).
* ``QUERY_TOPIC_CONSUME_BY_WHO`` (300): the groups whose online clients subscribe to the
  topic plus the groups with committed offsets on it.
* ``INVOKE_BROKER_TO_RESET_OFFSET`` (222): RocketMQ 5's server-side reset
  (``useServerSideResetOffset``, its default): every readable queue of ``topic`` moves to the
  first offset stored at or after ``timestamp`` (ms; 0 = the earliest, negative = the latest),
  persisted at once, whether or not a consumer is online; answers ``ResetOffsetBody``.
  With ``queueId`` >= 0 (``mqadmin resetOffsetByTime -b BROKER -q ID``), only that queue
  moves, to ``offset`` when given (clamped to the queue's min..max; mqadmin sends the offset
  it found with SEARCH_OFFSET_BY_TIMESTAMP, or ``-o``), else by ``timestamp``. Unlike RocketMQ's
  broker, which also corrects an online consumer's next pull, a classic consumer online during
  the reset keeps its position and commits over it: reset a stopped group.
* ``DELETE_TOPIC_IN_BROKER`` (215) and ``DELETE_SUBSCRIPTIONGROUP`` (207): ``admin_changes``.

Every handler answers a missing or malformed header field with INVALID_PARAMETER (29) and never
raises. Invariant: no admin rule lives here, only decoding, encoding and RocketMQ's codes.
"""

from __future__ import annotations

import logging
from collections.abc import Hashable

from ariane.broker.processors import admin, admin_stats
from ariane.broker.remoting import admin_bodies, admin_changes, clients, rates, replies
from ariane.broker.tables import topic_config, traffic_stats
from ariane.common import errors
from ariane.remoting import codes, command

_log = logging.getLogger(__name__)

RC = codes.ResponseCode
Reply = command.RemotingCommand


class AdminHandler:
    """Serves 17, 200, 202, 208, 203, 204, 351, 28, 315, 300 and 222; 215 and 207 through
    ``admin_changes.DeleteHandler``.

    Args:
        admin_processor: the broker's admin operations.
        table: the classic client table (who is online, subscribing to what).
        tps: the live put/delivered rates of 28 and the broker items of 315 (``None``: not
            answered).
        traffic: the per-topic and per-group counts of 202, 208 and 315 (``None``: rates 0,
            315 finds no topic or group item).
        cluster: the broker's cluster name, the key of 315's broker items.
    """

    def __init__(
        self,
        admin_processor: admin.AdminProcessor,
        table: clients.ClassicClientTable,
        tps: rates.TpsSampler | None = None,
        *,
        traffic: traffic_stats.TrafficStats | None = None,
        cluster: str = "",
    ) -> None:
        self._admin = admin_processor
        self._table = table
        self._tps = tps
        self._traffic = traffic if traffic is not None else traffic_stats.TrafficStats()
        self._cluster = cluster
        self._deletes = admin_changes.DeleteHandler(admin_processor, self._traffic)

    async def update_topic(self, request: Reply) -> Reply:
        """17: create or replace a topic from the ``CreateTopicRequestHeader``."""
        try:
            self._admin.require_master()
            name = replies.Header(request.ext_fields).text("topic")
            current = self._current_topic(name)
            wanted = admin_bodies.topic_config_of(request.ext_fields, current)
            self._admin.create_topic(wanted)
        except errors.IllegalTopicError as exc:
            return replies.failed(request, RC.INVALID_PARAMETER, exc.message)
        except errors.ArianeError as exc:
            return replies.error(request, exc)
        return replies.ok(request)

    def _current_topic(self, name: str) -> topic_config.TopicConfig | None:
        try:
            return self._admin.existing_topic(name)
        except errors.TopicNotFoundError:
            return None

    async def update_group(self, request: Reply) -> Reply:
        """200: create or replace a group from its ``SubscriptionGroupConfig`` body."""
        try:
            name, raw = admin_bodies.group_name_of(request.body)
            self._admin.put_group(
                name,
                lambda current: admin_bodies.group_config_of(raw, current),
                must_exist=False,
            )
        except errors.ArianeError as exc:
            return replies.error(request, exc)
        return replies.ok(request)

    async def topic_stats(self, request: Reply) -> Reply:
        """202: the topic's queues, their offsets and last store times."""
        try:
            topic = replies.Header(request.ext_fields).text("topic")
            config, stats = self._admin.topic_stats(topic)
        except errors.ArianeError as exc:
            return replies.error(request, exc)
        body = admin_bodies.topic_stats_body(
            self._admin.broker_name, config.name, stats, self._traffic.topic_put_tps(config.name)
        )
        return replies.ok(request, body=body)

    async def consume_stats(self, request: Reply) -> Reply:
        """208: the group's progress per queue (empty for an unknown group or topic)."""
        try:
            header = replies.Header(request.ext_fields)
            group = header.text("consumerGroup")
            topic = header.text("topic", "") or None
            lags = self._lags(group, topic)
        except errors.ArianeError as exc:
            return replies.error(request, exc)
        rate = sum(self._traffic.group_get_tps(group, t) for t in {q.topic for q in lags})
        body = admin_bodies.consume_stats_body(self._admin.broker_name, lags, rate)
        return replies.ok(request, body=body)

    def _lags(self, group: str, topic: str | None) -> list[admin_stats.QueueLag]:
        try:
            lags = self._admin.consumer_lag(group, topic)
        except errors.ArianeError as exc:
            if admin_bodies.names_unknown(exc):
                return []
            raise
        online = self._table.consumer_group(group)
        if online is None or not online.subscriptions:
            return lags
        return [q for q in lags if q.topic in online.subscriptions]

    async def consumer_connections(self, request: Reply) -> Reply:
        """203: the group's live clients, or CONSUMER_NOT_ONLINE (206)."""
        try:
            group = replies.Header(request.ext_fields).text("consumerGroup")
        except errors.ArianeError as exc:
            return replies.error(request, exc)
        found = self._table.consumer_group(group)
        if found is None:
            return replies.failed(
                request, RC.CONSUMER_NOT_ONLINE, f"the consumer group[{group}] not online"
            )
        return replies.ok(request, body=admin_bodies.consumer_connection_body(found, _address))

    async def producer_connections(self, request: Reply) -> Reply:
        """204: the producer group's live clients, or SYSTEM_ERROR (1) naming the group when
        none heartbeats here (RocketMQ's answer)."""
        try:
            group = replies.Header(request.ext_fields).text("producerGroup")
        except errors.ArianeError as exc:
            return replies.error(request, exc)
        found = self._table.producer_details(group)
        if found is None:
            return replies.failed(
                request, RC.SYSTEM_ERROR, f"the producer group[{group}] not exist"
            )
        return replies.ok(request, body=admin_bodies.producer_connection_body(found, _address))

    async def topic_config(self, request: Reply) -> Reply:
        """351: the topic's config, or TOPIC_NOT_EXIST (17)."""
        try:
            topic = replies.Header(request.ext_fields).text("topic")
            config = self._admin.existing_topic(topic)
        except errors.ArianeError as exc:
            return replies.error(request, exc)
        return replies.ok(request, body=admin_bodies.topic_config_body(config))

    async def runtime_info(self, request: Reply) -> Reply:
        """28: the broker's runtime figures."""
        body = admin_bodies.runtime_info_body(
            self._admin.runtime_stats(),
            master=self._admin.is_master,
            earliest_ms=self._admin.earliest_store_time_ms(),
            tps=self._tps.rates() if self._tps is not None else None,
        )
        return replies.ok(request, body=body)

    async def broker_stats(self, request: Reply) -> Reply:
        """315: one stats item's minute, hour and day figures."""
        try:
            header = replies.Header(request.ext_fields)
            name, key = header.text("statsName"), header.text("statsKey")
        except errors.ArianeError as exc:
            return replies.error(request, exc)
        found = self._stats_data(name, key)
        if found is None:
            return replies.failed(request, RC.SYSTEM_ERROR, f"The stats <{name}> <{key}> not exist")
        return replies.ok(request, body=admin_bodies.broker_stats_body(found))

    def _stats_data(self, name: str, key: str) -> traffic_stats.StatsData | None:
        broker_items = (
            traffic_stats.StatsName.BROKER_PUT_NUMS,
            traffic_stats.StatsName.BROKER_GET_NUMS,
        )
        if name not in broker_items:
            return self._traffic.view(name, key)
        if self._tps is None or key != self._cluster:
            return None
        puts, gets = self._tps.stats()
        return puts if name == traffic_stats.StatsName.BROKER_PUT_NUMS else gets

    async def consumed_by(self, request: Reply) -> Reply:
        """300: the groups consuming ``topic`` here."""
        try:
            topic = replies.Header(request.ext_fields).text("topic")
            groups = [*self._table.groups_subscribed_to(topic), *self._admin.groups_of_topic(topic)]
        except errors.ArianeError as exc:
            return replies.error(request, exc)
        return replies.ok(request, body=admin_bodies.group_list_body(groups))

    async def reset_offset(self, request: Reply) -> Reply:
        """222: move ``group`` on every readable queue of ``topic`` (or ``queueId``) to
        ``timestamp`` (or ``offset``)."""
        try:
            header = replies.Header(request.ext_fields)
            topic, group = header.text("topic"), header.text("group")
            timestamp_ms = header.integer("timestamp")
            queue_id = header.integer("queueId", -1)
            offset = header.integer("offset", -1) if queue_id >= 0 else -1
            if timestamp_ms < 0:
                target = admin.ResetTarget.LATEST
            elif timestamp_ms == 0:
                target = admin.ResetTarget.EARLIEST
            else:
                target = admin.ResetTarget.TIMESTAMP
            name, offsets = self._admin.reset_offset(
                group,
                topic,
                target,
                timestamp_ms=max(0, timestamp_ms),
                queue_id=queue_id if queue_id >= 0 else None,
                offset=offset if offset >= 0 else None,
            )
        except errors.ArianeError as exc:
            return replies.error(request, exc)
        _log.info("classic reset of group %s on %s: %s", group, name, offsets)
        body = admin_bodies.reset_offset_body(self._admin.broker_name, name, offsets)
        return replies.ok(request, body=body)

    def table(self) -> dict[int, replies.RequestHandler]:
        """Request code -> handler, for ``RemotingService``."""
        rq = codes.RequestCode
        return {
            rq.UPDATE_AND_CREATE_TOPIC: self.update_topic,
            rq.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: self.update_group,
            rq.GET_TOPIC_STATS_INFO: self.topic_stats,
            rq.GET_CONSUME_STATS: self.consume_stats,
            rq.GET_CONSUMER_CONNECTION_LIST: self.consumer_connections,
            rq.GET_PRODUCER_CONNECTION_LIST: self.producer_connections,
            rq.GET_TOPIC_CONFIG: self.topic_config,
            rq.GET_BROKER_RUNTIME_INFO: self.runtime_info,
            rq.VIEW_BROKER_STATS_DATA: self.broker_stats,
            rq.QUERY_TOPIC_CONSUME_BY_WHO: self.consumed_by,
            rq.INVOKE_BROKER_TO_RESET_OFFSET: self.reset_offset,
            rq.DELETE_TOPIC_IN_BROKER: self._deletes.delete_topic,
            rq.DELETE_SUBSCRIPTIONGROUP: self._deletes.delete_group,
        }


def _address(connection: Hashable) -> str:
    """A connection's peer ``ip:port`` (the transport's ``Connection.remote_address``)."""
    address = getattr(connection, "remote_address", "")
    return address if isinstance(address, str) else ""
