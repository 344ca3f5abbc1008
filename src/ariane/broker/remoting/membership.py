"""Classic client membership: ``HEART_BEAT`` (34), ``UNREGISTER_CLIENT`` (35),
``GET_CONSUMER_LIST_BY_GROUP`` (38), ``CHECK_CLIENT_CONFIG`` (46), and the broker-initiated
oneway ``NOTIFY_CONSUMER_IDS_CHANGED`` (40).

Mirrors RocketMQ's ``ClientManageProcessor`` and ``ConsumerManageProcessor``: a heartbeat body
(``HeartbeatData`` JSON, read with the codec's fastjson-tolerant reader) registers every
producer and consumer group it names on the connection it came on; a CLUSTERING consumer's
group gets its ``%RETRY%<group>`` topic (``AdminProcessor.consumer_heartbeat``). When a consumer
group's membership changes (a new client, an unregister, a closed connection, a client silent
for 120 s), every remaining member is sent 40 so it rebalances at once rather than at its next
20 s rebalance. The reply to 34 carries version 479 (the codec's default), which Java reads as
the broker's version and needs at or above 232 for SQL92 pulls.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any, cast

from ariane.broker.processors import admin
from ariane.broker.remoting import clients, pulling, replies
from ariane.broker.remoting import outbox as outbox_mod
from ariane.common import errors
from ariane.remoting import codes, command, fastjson, transport

_log = logging.getLogger(__name__)

RC = codes.ResponseCode


class MembershipHandler:
    """Serves 34, 35, 38 and 46 and pushes 40.

    Args:
        table: the classic client table.
        admin_processor: creates subscription groups and retry topics.
        outbox: where pushed requests (40) are queued.
    """

    def __init__(
        self,
        table: clients.ClassicClientTable,
        admin_processor: admin.AdminProcessor,
        outbox: outbox_mod.Outbox,
    ) -> None:
        self._table = table
        self._admin = admin_processor
        self._outbox = outbox

    async def heartbeat(
        self, peer: transport.Connection, request: command.RemotingCommand
    ) -> command.RemotingCommand:
        """34: register the client's producer and consumer groups on ``peer``."""
        try:
            data = _heartbeat_data(request.body)
            client_id = _text(data, "clientID")
            client = clients.ClientVersion(request.language.name, request.version)
            for producer in _objects(data.get("producerDataSet")):
                self._table.register_producer(_text(producer, "groupName"), client_id, peer, client)
            changed = [
                group
                for consumer in _objects(data.get("consumerDataSet"))
                if (group := self._register_consumer(client_id, peer, consumer, client))
            ]
        except errors.ArianeError as exc:
            return replies.error(request, exc)
        self.notify_changed(changed)
        return replies.ok(request)

    def _register_consumer(
        self,
        client_id: str,
        peer: transport.Connection,
        consumer: Mapping[str, Any],
        client: clients.ClientVersion,
    ) -> str:
        """Register one consumer group; returns its name if its membership changed, else ""."""
        group = _text(consumer, "groupName")
        model = consumer.get("messageModel")
        clustering = model != "BROADCASTING"
        self._admin.consumer_heartbeat(group, clustering=clustering)
        consume_type = consumer.get("consumeType")
        from_where = consumer.get("consumeFromWhere")
        changed = self._table.register_consumer(
            group,
            client_id,
            peer,
            message_model="CLUSTERING" if clustering else "BROADCASTING",
            consume_type=consume_type if isinstance(consume_type, str) else "CONSUME_PASSIVELY",
            subscriptions=clients.subscriptions_of(_objects(consumer.get("subscriptionDataSet"))),
            consume_from_where=from_where if isinstance(from_where, str) else "",
            client=client,
        )
        return group if changed else ""

    async def unregister(self, request: command.RemotingCommand) -> command.RemotingCommand:
        """35: drop the client from the groups the header names."""
        try:
            header = replies.Header(request.ext_fields)
            changed = self._table.unregister(
                header.text("clientID"),
                consumer_group=header.text("consumerGroup", ""),
                producer_group=header.text("producerGroup", ""),
            )
        except errors.ArianeError as exc:
            return replies.error(request, exc)
        self.notify_changed(changed)
        return replies.ok(request)

    async def consumer_list(self, request: command.RemotingCommand) -> command.RemotingCommand:
        """38: the group's live client ids (``{"consumerIdList":[...]}``); an unknown group
        answers SYSTEM_ERROR as Java does ("no consumer for this group")."""
        try:
            group = replies.Header(request.ext_fields).text("consumerGroup")
        except errors.ArianeError as exc:
            return replies.error(request, exc)
        ids = self._table.consumer_ids(group)
        if not ids:
            return replies.failed(request, RC.SYSTEM_ERROR, f"no consumer of group {group!r}")
        return replies.ok(request, body=fastjson.dumps({"consumerIdList": ids}))

    async def check_client_config(
        self, request: command.RemotingCommand
    ) -> command.RemotingCommand:
        """46: a SQL92 consumer checks its filter before subscribing; parse it here."""
        try:
            data = _heartbeat_data(request.body)
            raw = data.get("subscriptionData")
            if isinstance(raw, Mapping):
                (sub,) = clients.subscriptions_of([raw]) or [clients.Subscription("", "*")]
                pulling.message_filter(sub.expression_type, sub.expression)
        except errors.ArianeError as exc:
            return replies.error(request, exc)
        return replies.ok(request)

    def connection_closed(self, peer: transport.Connection) -> None:
        """Drop the clients of a closed connection and tell their groups."""
        self.notify_changed(self._table.connection_closed(peer))

    def expire(self) -> None:
        """Drop silent clients and tell their groups."""
        self.notify_changed(self._table.expire())

    def notify_changed(self, groups: Iterable[str]) -> None:
        """Push 40 (oneway) to every live member of each group."""
        for group in groups:
            found = self._table.consumer_group(group)
            if found is None:
                continue
            notice = command.request(
                codes.RequestCode.NOTIFY_CONSUMER_IDS_CHANGED,
                {"consumerGroup": group},
                oneway=True,
            )
            for connection in found.connections():
                self._outbox.push(cast(transport.Connection, connection), notice)


def _heartbeat_data(body: bytes) -> Mapping[str, Any]:
    try:
        data = fastjson.loads(body) if body else {}
    except fastjson.JsonError as exc:
        raise errors.BadRequestError(f"body is no JSON object: {exc}") from None
    if not isinstance(data, Mapping):
        raise errors.BadRequestError("body is no JSON object")
    return data


def _objects(value: object) -> list[Mapping[str, Any]]:
    if not isinstance(value, list):
        return []
    return [v for v in value if isinstance(v, Mapping)]


def _text(data: Mapping[str, Any], name: str) -> str:
    value = data.get(name)
    if not isinstance(value, str) or not value:
        raise errors.BadRequestError(f"heartbeat field {name!r} is required")
    return value
