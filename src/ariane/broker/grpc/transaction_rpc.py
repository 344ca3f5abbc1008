"""EndTransaction's v2 adapter and the producer↔topic links transaction checks need.

``end_transaction`` decodes an ``EndTransactionRequest`` for
``transaction.TransactionalMessageService`` (grpc-v2.md §6.8; RocketMQ 5's proxy
``EndTransactionActivity``) and answers its status; ``learn_transaction_topics`` notes the topics
a client sends TRANSACTION messages to, so it is asked about their checks even when its settings
did not list them (§6.8 recommendation). Kept apart from ``messaging`` so that adapter stays one
readable module.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from ariane.broker.tables import clients
from ariane.broker.transaction import processor as transaction
from ariane.common import errors, message, topics
from ariane.grpcwire import codes, pb

_log = logging.getLogger(__name__)

_RESOLUTIONS = {
    pb.v2.TransactionResolution.COMMIT: transaction.Resolution.COMMIT,
    pb.v2.TransactionResolution.ROLLBACK: transaction.Resolution.ROLLBACK,
}


async def end_transaction(
    transactions: transaction.TransactionalMessageService,
    request: pb.v2_service.EndTransactionRequest,
) -> pb.v2_service.EndTransactionResponse:
    """COMMIT or ROLLBACK a half message, from the client or in answer to a check.

    An UNSPECIFIED resolution (a checker that cannot tell yet) changes nothing and answers OK:
    RocketMQ's ``EndTransactionProcessor`` ignores ``TRANSACTION_NOT_TYPE`` and the message is
    checked again later.

    Raises:
        InvalidTransactionIdError: (INVALID_TRANSACTION_ID) an empty, unknown or differently
            ended transaction id, or one that is not the request's message and topic.
        IllegalTopicError: the topic name is invalid.
        ArianeError: the store refused the write (the transaction stays open).
    """
    if not request.transaction_id:
        raise errors.InvalidTransactionIdError("transaction_id is empty")
    resolution = _RESOLUTIONS.get(request.resolution)
    if resolution is None:
        return pb.v2_service.EndTransactionResponse(status=codes.ok("still unknown"))
    await transactions.end_transaction(
        topic=topics.validate_topic(request.topic.name),
        message_id=request.message_id,
        transaction_id=request.transaction_id,
        resolution=resolution,
    )
    if request.source == pb.v2.TransactionSource.SOURCE_SERVER_CHECK:
        _log.info("transaction %s: %s by a check answer", request.transaction_id, resolution.value)
    return pb.v2_service.EndTransactionResponse(status=codes.ok())


def learn_transaction_topics(
    session: clients.ClientSession, incoming: Sequence[message.IncomingMessage]
) -> None:
    """Add the topics of ``incoming``'s TRANSACTION messages to the session's topics (the
    Python client lists only the topics known at its last settings sync)."""
    for item in incoming:
        if item.message_type == "TRANSACTION" and item.topic not in session.topics:
            session.topics = session.topics | {item.topic}
            session.client_type = session.client_type or "PRODUCER"
