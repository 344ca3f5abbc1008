"""Ariane's Python client (asyncio): ``Producer``, ``SimpleConsumer``, ``PullConsumer`` and
``AdminClient``.

It speaks to name servers and brokers over gRPC through ``ariane.grpcwire`` and never imports
the broker or the store (DESIGN §2). ``Producer`` batches and pipelines SendMessage calls (or
streams them); ``SimpleConsumer`` receives and acks in batches; ``PullConsumer`` reads queues
by offset and commits offsets to a group; ``AdminClient`` manages topics and groups.
Errors are the classes of ``ariane.common.errors`` (one per RocketMQ status code), plus
``NameServerUnreachableError``/``BrokerUnreachableError`` for servers that did not answer and
``PartialSendError``/``PartialAckError`` when only some entries of a batch were refused.

Modules: ``producer``, ``consumer``, ``pull_consumer``, ``admin`` (+ ``admin_types``), ``failover``
(promote a slave: ``ariane admin broker promote`` and the operator), and
below them ``session``, ``route_cache``, ``transport``, ``credentials`` (ACL 2.0 signing),
``send_stream`` (the producer's streaming mode); ``message_id`` is ``ariane.common.message_id``
(the broker makes the same ids), named here too.
"""

from ariane.client import (
    admin,
    admin_types,
    consumer,
    credentials,
    producer,
    pull_consumer,
    route_cache,
    send_stream,
    session,
    transport,
)
from ariane.client.admin import AdminClient
from ariane.client.admin_types import (
    BrokerMaster,
    BrokerStats,
    DeadLetterRecord,
    GroupInfo,
    GroupRetryPolicy,
    MessageRecord,
    QueueLag,
    ResentRecord,
    ResetQueueOffset,
    ResetTarget,
    RetryKind,
    TopicInfo,
)
from ariane.client.consumer import (
    ConsumerSettings,
    PartialAckError,
    ReceivedMessage,
    SimpleConsumer,
)
from ariane.client.credentials import Credentials
from ariane.client.producer import (
    OutgoingMessage,
    PartialSendError,
    Producer,
    ProducerSettings,
    SendReceipt,
)
from ariane.client.pull_consumer import (
    MessageQueue,
    OffsetOutOfRangeError,
    PullBatch,
    PullConsumer,
    PullSettings,
)
from ariane.client.session import ConnectionSettings
from ariane.client.transport import (
    BrokerUnreachableError,
    NameServerUnreachableError,
    PartialFailureError,
)
from ariane.common import message_id
from ariane.grpcwire.tls import ClientTls

__all__ = [
    "AdminClient",
    "BrokerMaster",
    "BrokerStats",
    "BrokerUnreachableError",
    "ClientTls",
    "ConnectionSettings",
    "ConsumerSettings",
    "Credentials",
    "DeadLetterRecord",
    "GroupInfo",
    "GroupRetryPolicy",
    "MessageQueue",
    "MessageRecord",
    "NameServerUnreachableError",
    "OffsetOutOfRangeError",
    "OutgoingMessage",
    "PartialAckError",
    "PartialFailureError",
    "PartialSendError",
    "Producer",
    "ProducerSettings",
    "PullBatch",
    "PullConsumer",
    "PullSettings",
    "QueueLag",
    "ReceivedMessage",
    "ResentRecord",
    "ResetQueueOffset",
    "ResetTarget",
    "RetryKind",
    "SendReceipt",
    "SimpleConsumer",
    "TopicInfo",
    "admin",
    "admin_types",
    "consumer",
    "credentials",
    "message_id",
    "producer",
    "pull_consumer",
    "route_cache",
    "send_stream",
    "session",
    "transport",
]
