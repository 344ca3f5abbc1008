"""Classic transactions: ``END_TRANSACTION`` (37) and the broker's ``CHECK_TRANSACTION_STATE``
(39), over the same ``TransactionalMessageService`` and check service as gRPC.

Mirrors RocketMQ's ``EndTransactionProcessor``: the producer sends 37 oneway with
``commitOrRollback`` 8 (commit), 12 (rollback) or 0 (unknown: nothing happens, the broker asks
again later), the ``transactionId`` the send reply gave it and ``msgId`` (the UNIQ_KEY). A
check-back (``TransactionalMessageCheckService``) goes as a oneway 39 over a live connection of
a producer of the half message's group (its ``PGROUP`` property, known from heartbeats), with
the half message restored to its real topic as the body; the client answers with 37 and
``fromTransactionCheck=true``; a ``transactionId`` the broker did not issue (the Go client v2
echoes the UNIQ_KEY) falls back to the half message at ``commitLogOffset``, as RocketMQ finds
it. ``CheckListeners`` offers a check to the gRPC producer streams
first and then to classic producers.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Sequence

from ariane.broker.remoting import clients, replies
from ariane.broker.remoting import outbox as outbox_mod
from ariane.broker.transaction import check_service
from ariane.broker.transaction import processor as transaction
from ariane.common import errors, message
from ariane.common import message_id as message_id_mod
from ariane.remoting import codes, command, message_codec, transport

_log = logging.getLogger(__name__)

COMMIT = 8
"""``MessageSysFlag.TRANSACTION_COMMIT_TYPE``."""
ROLLBACK = 12
"""``MessageSysFlag.TRANSACTION_ROLLBACK_TYPE``."""

_RESOLUTIONS = {COMMIT: transaction.Resolution.COMMIT, ROLLBACK: transaction.Resolution.ROLLBACK}


class EndTransactionHandler:
    """Serves 37.

    Args:
        transactions: the transaction service.
    """

    def __init__(self, transactions: transaction.TransactionalMessageService) -> None:
        self._transactions = transactions

    async def handle(self, request: command.RemotingCommand) -> command.RemotingCommand | None:
        """Commit or roll back the half message 37 names; ``None`` for oneway requests."""
        try:
            header = replies.Header(request.ext_fields)
            kind = header.integer("commitOrRollback")
            resolution = _RESOLUTIONS.get(kind)
            if resolution is not None:
                await self._transactions.end_transaction(
                    topic=header.text("topic", "") or None,
                    message_id=header.text("msgId"),
                    transaction_id=self._transactions.issued_transaction_id(
                        header.text("transactionId"), header.integer("commitLogOffset", -1)
                    ),
                    resolution=resolution,
                )
            elif kind != 0:
                raise errors.BadRequestError(f"commitOrRollback {kind} is not 0, 8 or 12")
            response = replies.ok(request)
        except errors.ArianeError as exc:
            response = replies.error(request, exc)
            _log.info("END_TRANSACTION refused: %s (remark %r)", exc.message, request.remark)
        return None if request.is_oneway else response


class ClassicCheckListener:
    """Sends check-backs to classic producers of the half message's group.

    Args:
        table: the classic client table (producer connections by group).
        outbox: where the oneway 39 requests are queued.
    """

    def __init__(self, table: clients.ClassicClientTable, outbox: outbox_mod.Outbox) -> None:
        self._table = table
        self._outbox = outbox
        self._turn = itertools.count()

    def send_check(self, check: transaction.HalfCheck) -> bool:
        """Queue 39 to one live producer of the group; False when it has none."""
        half = check.message
        group = half.properties.get(message.Property.PRODUCER_GROUP, "")
        connections = [
            c
            for c in self._table.producer_connections(group)
            if isinstance(c, transport.Connection) and not c.closed
        ]
        if not connections:
            return False
        connection = connections[next(self._turn) % len(connections)]
        request = command.request(
            codes.RequestCode.CHECK_TRANSACTION_STATE,
            {
                "topic": half.topic,
                "tranStateTableOffset": str(half.queue_offset),
                "commitLogOffset": str(half.commit_log_offset),
                "msgId": message.message_id_of(half),
                "transactionId": check.transaction_id,
                "offsetMsgId": message_id_mod.create_offset_message_id(
                    half.store_host, half.commit_log_offset
                ),
            },
            message_codec.encode_stored(half),
            oneway=True,
        )
        return self._outbox.push(connection, request)


class CheckListeners:
    """Offers a check to each listener in turn (gRPC producer streams, then classic).

    Args:
        listeners: the listeners, in order.
    """

    def __init__(self, listeners: Sequence[check_service.CheckListener]) -> None:
        self._listeners = tuple(listeners)

    def send_check(self, check: transaction.HalfCheck) -> bool:
        """True once one listener took the check."""
        return any(listener.send_check(check) for listener in self._listeners)
