"""The records of transactional messages, built from a stored half message: pure, no I/O.

``transaction.processor`` keeps the table of unresolved halves; this module only says what the
half message looks like to its producer (``restored``), what a COMMIT writes to the real topic
(``commit_request``) and what a check copy is (``check_copy``), in RocketMQ 5.3's layout
(``TransactionalMessageBridge.renewHalfMessageInner``, ``EndTransactionProcessor
.endMessageTransaction``). Invariant: a restored or committed message carries none of the
internal properties (``INTERNAL_PROPERTIES``); a check copy carries all of them.
"""

from __future__ import annotations

import dataclasses

from ariane.common import ids, message
from ariane.store import commit_log

P = message.Property

HALF_QUEUE = ids.QueueId(0)
"""The one queue of the half and op topics."""
PREPARED_QUEUE_OFFSET = "TRAN_PREPARED_QUEUE_OFFSET"
"""Property of a check copy: the queue offset of the original half (RocketMQ's name)."""
TRANSACTION_ID = "__transactionId__"
"""Property of a check copy: the transaction id (RocketMQ ``PROPERTY_TRANSACTION_ID``)."""
INTERNAL_PROPERTIES = frozenset(
    {
        P.REAL_TOPIC,
        P.REAL_QUEUE_ID,
        P.TRANSACTION_PREPARED,
        P.TRANSACTION_CHECK_TIMES,
        PREPARED_QUEUE_OFFSET,
        TRANSACTION_ID,
    }
)
"""What the broker adds to a half message and strips before anyone else sees it."""


def restored(half: message.StoredMessage) -> message.StoredMessage:
    """The half message as its producer sent it: real topic and queue, no internal
    properties (what a check-back shows and what COMMIT writes)."""
    props = {k: v for k, v in half.properties.items() if k not in INTERNAL_PROPERTIES}
    topic = ids.TopicName(half.properties[P.REAL_TOPIC])
    return dataclasses.replace(
        half,
        message=message.Message(topic, half.body, props, half.message.flag),
        queue_id=ids.QueueId(int(half.properties[P.REAL_QUEUE_ID])),
    )


def commit_request(half: message.StoredMessage) -> commit_log.AppendRequest:
    """The real message of a committed half (RocketMQ ``endMessageTransaction``)."""
    real = restored(half)
    return commit_log.AppendRequest(
        message=real.message,
        queue_id=real.queue_id,
        sys_flag=(half.sys_flag & message.SysFlag.COMPRESSED) | message.SysFlag.TRANSACTION_COMMIT,
        born_timestamp_ms=half.born_timestamp_ms,
        born_host=half.born_host,
        prepared_transaction_offset=half.commit_log_offset,
    )


def check_copy(
    half: message.StoredMessage, *, origin: int, transaction_id: str, checks: int
) -> commit_log.AppendRequest:
    """The copy of ``half`` written before its ``checks``-th check-back (RocketMQ
    ``putBackHalfMsgQueue``): same body, the check count, its origin and transaction id."""
    props = dict(half.properties)
    props[P.TRANSACTION_CHECK_TIMES] = str(checks)
    props[PREPARED_QUEUE_OFFSET] = str(origin)
    props[TRANSACTION_ID] = transaction_id
    return commit_log.AppendRequest(
        message=message.Message(half.topic, half.body, props, half.message.flag),
        queue_id=HALF_QUEUE,
        sys_flag=half.sys_flag & message.SysFlag.COMPRESSED,
        born_timestamp_ms=half.born_timestamp_ms,
        born_host=half.born_host,
    )
