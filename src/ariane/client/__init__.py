"""Ariane's Python client (asyncio): ``AdminClient`` for topics, groups, lag and messages.

It speaks to name servers and brokers over gRPC through ``ariane.remoting`` and never imports
the broker or the store. Producer and consumer clients join it later (DESIGN §2).
"""

from ariane.client import admin, admin_types
from ariane.client.admin import (
    AdminClient,
    BrokerUnreachableError,
    NameServerUnreachableError,
)
from ariane.client.admin_types import (
    BrokerMaster,
    BrokerStats,
    GroupInfo,
    MessageRecord,
    QueueLag,
    QueueOffset,
    ResetTarget,
    RetryKind,
    RetryPolicy,
    TopicInfo,
)

__all__ = [
    "AdminClient",
    "BrokerMaster",
    "BrokerStats",
    "BrokerUnreachableError",
    "GroupInfo",
    "MessageRecord",
    "NameServerUnreachableError",
    "QueueLag",
    "QueueOffset",
    "ResetTarget",
    "RetryKind",
    "RetryPolicy",
    "TopicInfo",
    "admin",
    "admin_types",
]
