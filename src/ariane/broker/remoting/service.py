"""``RemotingService``: the classic protocol's server on a broker, over the broker's processors.

It owns the Remoting server (``ariane.remoting.transport``), the handler table (request code ->
handler of this package), the classic client table, the outbox of pushed requests and the loop
that expires silent clients. The composition root (``broker.server``) starts it on
``remoting_listen``, runs ``run()`` in its ``TaskGroup`` and hands ``check_listener`` to the
transaction check service. The admin codes ``mqadmin`` sends are ``admin.AdminHandler``'s
(``broker_config.BrokerConfigHandler``'s for 26/25),
the ACL admin codes 3001-3010 ``auth_admin.AuthAdminHandler``'s (when given a metadata store).
With ``[auth]`` on, every handler of the table runs behind ``remoting.security_gate``: one
authentication + authorization step answers NO_PERMISSION before any handler sees a refused
request. With ``[tls]`` the port serves by the process's mode (``transport.RemotingServer.start``).
Codes not in the table answer REQUEST_CODE_NOT_SUPPORTED (3) from the transport. As
RocketMQ's ``rejectRequest``, a slave answers sends (and send-backs) with SYSTEM_BUSY, and
pulls too unless ``slave_read_enable`` is on (``processors.slave_read``).
"""

from __future__ import annotations

import asyncio
import logging

from ariane.broker import assembly
from ariane.broker.remoting import (
    admin,
    auth_admin,
    broker_config,
    clients,
    membership,
    pulling,
    queries,
    rates,
    replies,
    sending,
    transactions,
)
from ariane.broker.remoting import locks as locks_mod
from ariane.broker.remoting import outbox as outbox_mod
from ariane.broker.tables import queue_locks, traffic_stats
from ariane.common import clock, message, tls
from ariane.remoting import codes, command, security_gate, transport
from ariane.security import audit, metadata_store
from ariane.security import settings as auth_settings

_log = logging.getLogger(__name__)

RQ = codes.RequestCode

CLIENT_EXPIRY_INTERVAL_S = 10.0
"""How often silent classic clients are dropped."""

SLAVE_REFUSED_CODES = (
    RQ.SEND_MESSAGE,
    RQ.SEND_MESSAGE_V2,
    RQ.SEND_BATCH_MESSAGE,
    RQ.CONSUMER_SEND_MSG_BACK,
)
"""The codes of RocketMQ's ``SendMessageProcessor``, which a slave refuses with SYSTEM_BUSY."""

TRANSPORT_SETTINGS = transport.TransportSettings(
    cancel_on_close_codes=frozenset({RQ.PULL_MESSAGE, RQ.LITE_PULL_MESSAGE})
)
"""A pull held in long polling has nothing left to do once its consumer's connection is gone
(its offset commit came first); every other request read in full still takes effect."""


class RemotingService:
    """The classic protocol on one broker.

    Args:
        processors: the broker's protocol-neutral processors.
        time: the clock (client expiry).
        locks: the broker's queue lock table (``BrokerServer.queue_locks``, shared with gRPC
            clients); a table of this service's own when not given (tests).
        auth_store: the broker's users and ACLs (serves 3001-3010); ``None``: not served.
        auth: the ``[auth]`` switches (default: off, nothing checked).
        cluster: the broker's cluster name (``Cluster:<name>`` resources).
        audit_log: the broker's decision counters and audit lines (``AuthStores.audit``, the
            gRPC gate's), so ``/metrics`` counts both protocols; a new one when ``None``.
        config: serves ``getBrokerConfig``/``updateBrokerConfig`` (26/25); ``None``: not
            served (tests without a broker runtime).
        tps: the put/delivered rates 28 answers, sampled by ``run`` every
            ``rates.SAMPLE_INTERVAL_S``; ``None``: 28 answers none.
        traffic: the broker's per-topic and per-group counts (``runtime.Counters.traffic``)
            that 202, 208 and 315 answer; ``None``: rates of 0 (tests).
    """

    def __init__(
        self,
        processors: assembly.Processors,
        *,
        time: clock.Clock,
        locks: queue_locks.RebalanceLockManager | None = None,
        auth_store: metadata_store.AuthMetadataStore | None = None,
        auth: auth_settings.AuthSettings | None = None,
        cluster: str = "",
        audit_log: audit.AuthAudit | None = None,
        config: broker_config.BrokerConfigHandler | None = None,
        tps: rates.TpsSampler | None = None,
        traffic: traffic_stats.TrafficStats | None = None,
    ) -> None:
        self._config = config
        self._tps = tps
        auth = auth if auth is not None else auth_settings.AuthSettings()
        assert auth_store is not None or not auth.authentication_enabled, "auth needs a store"
        self._auth_admin = (
            auth_admin.AuthAdminHandler(
                auth_store, authentication_enabled=auth.authentication_enabled
            )
            if auth_store is not None
            else None
        )
        self.gate = (
            security_gate.RemotingGate(auth_store, auth, cluster=cluster, audit_log=audit_log)
            if auth_store is not None
            else None
        )
        """The authentication + authorization step (``None`` without a metadata store)."""
        self.locks = locks if locks is not None else queue_locks.RebalanceLockManager(time=time)
        self.table = clients.ClassicClientTable(time=time, locks=self.locks)
        self.outbox = outbox_mod.Outbox()
        self._sender = sending.SendHandler(processors.sender, processors.retry)
        self._role = processors.read_role
        self._puller = pulling.PullHandler(processors.puller, self.table, self._role)
        self.membership = membership.MembershipHandler(self.table, processors.admin, self.outbox)
        self._ender = transactions.EndTransactionHandler(processors.transactions)
        self._queries = queries.QueryHandler(processors.admin)
        self._admin = admin.AdminHandler(
            processors.admin, self.table, tps, traffic=traffic, cluster=cluster
        )
        self._lock_handler = locks_mod.LockHandler(self.locks)
        self.check_listener = transactions.ClassicCheckListener(self.table, self.outbox)
        """Sends check-backs to classic producers (``check_service.CheckListener``)."""
        self.server = transport.RemotingServer(
            self.handlers(), settings=TRANSPORT_SETTINGS, on_connect=self._on_connect
        )

    def handlers(self) -> dict[int, replies.TransportHandler]:
        """Request code -> handler."""
        puller, members, queries_ = self._puller, self.membership, self._queries

        async def send(c: transport.Connection, r: command.RemotingCommand) -> Reply:
            return await self._sender.handle(born_host(c.remote_address), r)

        async def heartbeat(c: transport.Connection, r: command.RemotingCommand) -> Reply:
            return await members.heartbeat(c, r)

        table: dict[int, replies.TransportHandler] = {
            RQ.SEND_MESSAGE: send,
            RQ.SEND_MESSAGE_V2: send,
            RQ.SEND_BATCH_MESSAGE: send,
            RQ.HEART_BEAT: heartbeat,
        }
        for code, handler in (
            (RQ.PULL_MESSAGE, puller.pull),
            (RQ.LITE_PULL_MESSAGE, puller.pull),
            (RQ.QUERY_CONSUMER_OFFSET, puller.query_consumer_offset),
            (RQ.UPDATE_CONSUMER_OFFSET, puller.update_consumer_offset),
            (RQ.SEARCH_OFFSET_BY_TIMESTAMP, puller.queue_offset),
            (RQ.GET_MAX_OFFSET, puller.queue_offset),
            (RQ.GET_MIN_OFFSET, puller.queue_offset),
            (RQ.GET_EARLIEST_MSG_STORETIME, puller.queue_offset),
            (RQ.CONSUMER_SEND_MSG_BACK, self._sender.send_back),
            (RQ.UNREGISTER_CLIENT, members.unregister),
            (RQ.GET_CONSUMER_LIST_BY_GROUP, members.consumer_list),
            (RQ.CHECK_CLIENT_CONFIG, members.check_client_config),
            (RQ.END_TRANSACTION, self._ender.handle),
            (RQ.LOCK_BATCH_MQ, self._lock_handler.lock),
            (RQ.UNLOCK_BATCH_MQ, self._lock_handler.unlock),
            (RQ.VIEW_MESSAGE_BY_ID, queries_.view_by_id),
            (RQ.QUERY_MESSAGE, queries_.query),
            *self._admin.table().items(),
            *(self._auth_admin.table().items() if self._auth_admin is not None else ()),
            *self._config_handlers(),
        ):
            table[code] = replies.ignoring_connection(handler)
        for code in SLAVE_REFUSED_CODES:  # RocketMQ SendMessageProcessor.rejectRequest
            table[code] = replies.rejecting(table[code], self._role.rejects_send)
        for code in (RQ.PULL_MESSAGE, RQ.LITE_PULL_MESSAGE):  # PullMessageProcessor's
            table[code] = replies.rejecting(table[code], self._role.rejects_pull)
        return self.gate.wrap(table) if self.gate is not None else table

    def _config_handlers(self) -> list[tuple[int, replies.RequestHandler]]:
        if self._config is None:
            return []
        return [
            (RQ.GET_BROKER_CONFIG, self._config.get_config),
            (RQ.UPDATE_BROKER_CONFIG, self._config.update_config),
        ]

    def _on_connect(self, connection: transport.Connection) -> None:
        if self.gate is not None:
            self.gate.connection_opened(connection)
        connection.add_close_callback(self.membership.connection_closed)

    async def start(
        self, host: str, port: int, server_tls: tls.ServerTls | None = None
    ) -> tuple[str, int]:
        """Listen on ``host:port`` (0 picks a port) with the process's TLS (``None``:
        plaintext); returns the bound address.

        Raises:
            OSError: the address cannot be bound.
        """
        return await self.server.start(host, port, server_tls)

    async def run(self) -> None:
        """Send pushed requests, expire silent clients and sample the rates until cancelled."""
        async with asyncio.TaskGroup() as tasks:
            tasks.create_task(self.outbox.run(), name="remoting-outbox")
            tasks.create_task(self._expire(), name="remoting-client-expiry")
            if self._tps is not None:
                tasks.create_task(self._sample(self._tps), name="remoting-tps-sampler")

    async def _sample(self, tps: rates.TpsSampler) -> None:
        while True:
            tps.sample()
            await asyncio.sleep(rates.SAMPLE_INTERVAL_S)

    async def _expire(self) -> None:
        while True:
            await asyncio.sleep(CLIENT_EXPIRY_INTERVAL_S)
            self.membership.expire()

    async def close(self) -> None:
        """Stop listening and close every connection."""
        await self.server.close()


Reply = command.RemotingCommand | None


def born_host(remote_address: str) -> message.HostAddress:
    """The BORNHOST of a connection's ``ip:port`` (port 0 when it does not parse)."""
    host, _, port = remote_address.rpartition(":")
    return message.HostAddress(host.strip("[]") or "127.0.0.1", int(port) if port.isdigit() else 0)
