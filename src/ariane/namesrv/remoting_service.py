"""The name server's Remoting handlers: what classic clients and ``mqadmin`` ask a name server.

Codes served (remoting.md §2, §5), over the same ``RouteInfoManager`` as the gRPC registry:

* 105 GET_ROUTEINFO_BY_TOPIC: ext ``topic`` → TopicRouteData as fastjson writes it, or 17
  TOPIC_NOT_EXIST;
* 106 GET_BROKER_CLUSTER_INFO: ``{"brokerAddrTable":{…},"clusterAddrTable":{…}}``;
* 206 GET_ALL_TOPIC_LIST_FROM_NAMESERVER: ``{"topicList":[…]}``;
* 100/101/102 PUT/GET/DELETE_KV_CONFIG and 219 GET_KVLIST_BY_NAMESPACE (``kv_config``); with
  the inner credential enforced (``inner_auth``), 100 and 102 must be signed with it or
  answer 16 NO_PERMISSION and change nothing (RocketMQ checks nothing); reads stay open;
* 216 DELETE_TOPIC_IN_NAMESRV (``mqadmin deleteTopic``, after the brokers deleted it): ext
  ``topic``, ``clusterName`` → the topic leaves the routes of that cluster's groups (a master
  that still has it lists it again at its next registration);
* 205 WIPE_WRITE_PERM_OF_BROKER / 327 ADD_WRITE_PERM_OF_BROKER (``mqadmin wipeWritePerm`` /
  ``addWritePerm``): ext ``brokerName`` → ext ``wipeTopicCount`` / ``addTopicCount``. RocketMQ
  changes only the name server's own route table, which a name-server restart or the broker's
  next changed registration undoes, and the broker keeps accepting writes from clients with
  older routes. Ariane passes the change to the group's master (``Forwarder.set_write_perm``,
  the broker's ``Admin.WipeWritePerm``/``AddWritePerm``): the broker persists it, refuses
  writes itself, and registers again at once, so every name server's routes follow. An
  unknown group or one without a live master answers SYSTEM_ERROR (1) with the reason, as
  does a master that refused (16 NO_PERMISSION when it refused for permission);
* 34 HEART_BEAT and 35 UNREGISTER_CLIENT answered 0 (``mqadmin``'s inner producer sends them to
  the name server address it was given).

Every other code gets REQUEST_CODE_NOT_SUPPORTED from the transport (103 REGISTER_BROKER
included: Ariane brokers register over gRPC).

Invariants of every route answer, which Java and Go rely on:

* a broker appears at its **Remoting** address; brokers that registered none (they serve only
  gRPC) are left out, since a classic client cannot speak gRPC; a group left without members
  is left out with its queue data, and a topic left with nothing is TOPIC_NOT_EXIST;
* every queueData has a brokerData of the same brokerName, no list or map is null, and
  ``brokerAddrs`` is keyed by the broker id as a quoted string (``"0"`` = master);
* JSON is compact (Go splits addresses on ``,`` and the first ``:``).

Transport: a broker's Remoting address is handed out as it registered it, whatever transport the
caller used. That matches because every port of a process has one ``[tls]`` mode and the
brokers of a cluster are given the name server's mode (a deployment rule, not checked here): a
classic client that reached an ``enforcing`` name server over TLS finds brokers that speak TLS
too (``permissive`` ones speak both).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from ariane.common import errors, ids
from ariane.namesrv import inner_auth, kv_config
from ariane.namesrv import route_info_manager as rim
from ariane.remoting import codes, fastjson, transport
from ariane.remoting import command as cmd

_log = logging.getLogger(__name__)

Reply = cmd.RemotingCommand

WritePermSetter = Callable[[ids.BrokerName, bool], Awaitable[int]]
"""(broker group, writable) -> topics changed on its master (``Forwarder.set_write_perm``)."""


def broker_data(group: rim.BrokerGroup) -> dict[str, object] | None:
    """The ``BrokerData`` JSON of a group's members that serve Remoting, or ``None`` if none do.

    Fields as RocketMQ ``BrokerData`` (``cluster``, ``brokerName``, ``brokerAddrs`` keyed by
    broker id, ``enableActingMaster``).
    """
    addrs = {str(m.broker_id): m.remoting_address for m in group.members if m.remoting_address}
    if not addrs:
        return None
    return {
        "brokerAddrs": addrs,
        "brokerName": group.broker_name,
        "cluster": group.cluster,
        "enableActingMaster": False,
    }


def topic_route_data(route: rim.TopicRoute) -> dict[str, object] | None:
    """The TopicRouteData JSON of a route, limited to Remoting brokers; ``None`` if none is left.

    Fields as RocketMQ ``TopicRouteData``: ``brokerDatas``, ``queueDatas`` (``brokerName``,
    ``perm``, ``readQueueNums``, ``writeQueueNums``, ``topicSysFlag``), ``filterServerTable``.
    """
    datas = {}
    for group in route.broker_groups:
        data = broker_data(group)
        if data is not None:
            datas[group.broker_name] = data
    queues = [
        {
            "brokerName": q.broker_name,
            "perm": q.perm,
            "readQueueNums": q.read_queue_nums,
            "topicSysFlag": 0,
            "writeQueueNums": q.write_queue_nums,
        }
        for q in route.queue_datas
        if q.broker_name in datas
    ]
    if not queues:
        return None
    return {
        "brokerDatas": [datas[name] for name in sorted(datas)],
        "filterServerTable": {},
        "queueDatas": queues,
    }


def cluster_info(groups: tuple[rim.BrokerGroup, ...]) -> dict[str, object]:
    """The ClusterInfo JSON (``brokerAddrTable``, ``clusterAddrTable``) of Remoting brokers."""
    broker_table: dict[str, object] = {}
    cluster_table: dict[str, list[str]] = {}
    for group in groups:
        data = broker_data(group)
        if data is None:
            continue
        broker_table[group.broker_name] = data
        cluster_table.setdefault(group.cluster, []).append(group.broker_name)
    return {"brokerAddrTable": broker_table, "clusterAddrTable": cluster_table}


class RemotingNameService:
    """Handlers of the name server's Remoting codes.

    Args:
        manager: the route tables (shared with the gRPC registry).
        kv: the KV config.
        writers: checks the inner-credential signature of KV writes (``None``: open, as in
            RocketMQ).
        write_perm: sets a group's write permission on its master (205/327); ``None``: those
            codes answer SYSTEM_ERROR (a name server built without brokers to call, tests).
    """

    def __init__(
        self,
        manager: rim.RouteInfoManager,
        kv: kv_config.KvConfig,
        writers: inner_auth.InnerAuthenticator | None = None,
        write_perm: WritePermSetter | None = None,
    ) -> None:
        self._manager = manager
        self._kv = kv
        self._writers = writers
        self._write_perm = write_perm

    def handlers(self) -> dict[int, transport.Handler]:
        """The handler table for ``transport.RemotingServer``."""
        request = codes.RequestCode
        return {
            request.GET_ROUTEINFO_BY_TOPIC: self.get_route,
            request.GET_BROKER_CLUSTER_INFO: self.get_cluster_info,
            request.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: self.get_topic_list,
            request.PUT_KV_CONFIG: self.put_kv,
            request.GET_KV_CONFIG: self.get_kv,
            request.DELETE_KV_CONFIG: self.delete_kv,
            request.GET_KVLIST_BY_NAMESPACE: self.get_kv_list,
            request.HEART_BEAT: self.accept,
            request.UNREGISTER_CLIENT: self.accept,
            request.DELETE_TOPIC_IN_NAMESRV: self.delete_topic,
            request.WIPE_WRITE_PERM_OF_BROKER: self.wipe_write_perm,
            request.ADD_WRITE_PERM_OF_BROKER: self.add_write_perm,
        }

    async def get_route(self, _conn: transport.Connection, req: Reply) -> Reply:
        """105: the topic's route, or TOPIC_NOT_EXIST (``getRouteInfoByTopic``)."""
        topic = req.ext_fields.get("topic", "")
        try:
            route = self._manager.pickup_topic_route(ids.TopicName(topic))
        except errors.TopicNotFoundError:
            route = None
        data = None if route is None else topic_route_data(route)
        if data is None:
            remark = f"No topic route info in name server for the topic: {topic}"
            return cmd.response(req, codes.ResponseCode.TOPIC_NOT_EXIST, remark=remark)
        return cmd.response(req, body=fastjson.dumps(data))

    async def get_cluster_info(self, _conn: transport.Connection, req: Reply) -> Reply:
        """106: every Remoting broker by name and the broker names of each cluster."""
        return cmd.response(req, body=fastjson.dumps(cluster_info(self._manager.cluster_info())))

    async def get_topic_list(self, _conn: transport.Connection, req: Reply) -> Reply:
        """206: every topic with a route (``TopicList``)."""
        return cmd.response(req, body=fastjson.dumps({"topicList": self._manager.topic_names()}))

    def _refused(self, conn: transport.Connection, req: Reply) -> Reply | None:
        """NO_PERMISSION when KV writes need the inner credential and ``req`` lacks it."""
        if self._writers is None:
            return None
        reason = self._writers.remoting_refusal(
            req.ext_fields, req.body, version=req.version, peer=conn.remote_address, code=req.code
        )
        if reason is None:
            return None
        return cmd.response(req, codes.ResponseCode.NO_PERMISSION, remark=reason[:512])

    async def put_kv(self, conn: transport.Connection, req: Reply) -> Reply:
        """100: store ``namespace``/``key`` = ``value`` (signed, when enforced)."""
        if (refused := self._refused(conn, req)) is not None:
            return refused
        ext = req.ext_fields
        try:
            self._kv.put(ext.get("namespace", ""), ext.get("key", ""), ext.get("value", ""))
        except kv_config.KvConfigFullError as exc:
            return cmd.response(req, codes.ResponseCode.SYSTEM_BUSY, remark=str(exc))
        return cmd.response(req)

    async def get_kv(self, _conn: transport.Connection, req: Reply) -> Reply:
        """101: ext ``value``, or QUERY_NOT_FOUND."""
        namespace, key = req.ext_fields.get("namespace", ""), req.ext_fields.get("key", "")
        value = self._kv.get(namespace, key)
        if value is None:
            remark = f"No config item, Namespace: {namespace} Key: {key}"
            return cmd.response(req, codes.ResponseCode.QUERY_NOT_FOUND, remark=remark)
        return cmd.response(req, ext_fields={"value": value})

    async def delete_kv(self, conn: transport.Connection, req: Reply) -> Reply:
        """102: remove the entry (success whether or not it existed; signed, when enforced)."""
        if (refused := self._refused(conn, req)) is not None:
            return refused
        self._kv.delete(req.ext_fields.get("namespace", ""), req.ext_fields.get("key", ""))
        return cmd.response(req)

    async def get_kv_list(self, _conn: transport.Connection, req: Reply) -> Reply:
        """219: the namespace's entries as a KVTable (``{"table":{…}}``), or QUERY_NOT_FOUND."""
        namespace = req.ext_fields.get("namespace", "")
        table = self._kv.namespace(namespace)
        if not table:
            remark = f"No config item, Namespace: {namespace}"
            return cmd.response(req, codes.ResponseCode.QUERY_NOT_FOUND, remark=remark)
        return cmd.response(req, body=fastjson.dumps({"table": table}))

    async def accept(self, _conn: transport.Connection, req: Reply) -> Reply:
        """34, 35: success with nothing to do (a name server keeps no client table)."""
        return cmd.response(req)

    async def delete_topic(self, _conn: transport.Connection, req: Reply) -> Reply:
        """216: drop ``topic`` from the routes of ``clusterName``'s groups (all when absent)."""
        topic = req.ext_fields.get("topic", "").strip()
        if not topic:
            return cmd.response(req, codes.ResponseCode.INVALID_PARAMETER, remark="no topic")
        cluster = req.ext_fields.get("clusterName", "").strip()
        removed = self._manager.delete_topic(
            ids.TopicName(topic), ids.ClusterName(cluster) if cluster else None
        )
        _log.info("topic %s deleted from the routes of %d groups (%s)", topic, removed, cluster)
        return cmd.response(req)

    async def wipe_write_perm(self, _conn: transport.Connection, req: Reply) -> Reply:
        """205: make the group's ordinary topics read-only; ext ``wipeTopicCount``."""
        return await self._set_write_perm(req, writable=False, count_field="wipeTopicCount")

    async def add_write_perm(self, _conn: transport.Connection, req: Reply) -> Reply:
        """327: give the group's ordinary topics write back; ext ``addTopicCount``."""
        return await self._set_write_perm(req, writable=True, count_field="addTopicCount")

    async def _set_write_perm(self, req: Reply, *, writable: bool, count_field: str) -> Reply:
        broker_name = req.ext_fields.get("brokerName", "").strip()
        if not broker_name:
            return cmd.response(req, codes.ResponseCode.INVALID_PARAMETER, remark="no brokerName")
        if self._write_perm is None:
            remark = "this name server cannot reach brokers"
            return cmd.response(req, codes.ResponseCode.SYSTEM_ERROR, remark=remark)
        try:
            changed = await self._write_perm(ids.BrokerName(broker_name), writable)
        except errors.ArianeError as exc:
            code = (
                codes.ResponseCode.NO_PERMISSION
                if isinstance(exc, (errors.ForbiddenError, errors.UnauthorizedError))
                else codes.ResponseCode.SYSTEM_ERROR
            )
            return cmd.response(req, code, remark=exc.message[:512])
        _log.info("write permission of %s %s: %d topics", broker_name, writable, changed)
        return cmd.response(req, ext_fields={count_field: str(changed)})
