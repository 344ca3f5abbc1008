"""Route values: MessageQueue, QueueData, BrokerData and TopicRouteData, and permission bits.

Mirrors RocketMQ's ``TopicRouteData``/``BrokerData``/``QueueData`` and ``PermName``:
perm bits are PRIORITY 8, READ 4, WRITE 2, INHERIT 1, so 6 is read+write.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping

from ariane.common import ids


class Perm(enum.IntFlag):
    """RocketMQ ``PermName`` bits."""

    NONE = 0
    INHERIT = 1
    WRITE = 2
    READ = 4
    PRIORITY = 8


PERM_READ_WRITE = Perm.READ | Perm.WRITE


def is_readable(perm: int) -> bool:
    """Whether ``perm`` has the READ bit."""
    return bool(perm & Perm.READ)


def is_writeable(perm: int) -> bool:
    """Whether ``perm`` has the WRITE bit."""
    return bool(perm & Perm.WRITE)


@dataclasses.dataclass(frozen=True, slots=True, order=True)
class MessageQueue:
    """One queue of a topic on one broker group (RocketMQ ``MessageQueue``)."""

    topic: ids.TopicName
    broker_name: ids.BrokerName
    queue_id: ids.QueueId


@dataclasses.dataclass(frozen=True, slots=True)
class QueueData:
    """A topic's queues on one broker group (RocketMQ ``QueueData``).

    Attributes:
        broker_name: the broker group holding the queues.
        read_queue_nums: number of queues consumers read.
        write_queue_nums: number of queues producers write.
        perm: ``Perm`` bits.
        topic_sys_flag: RocketMQ topic system flag (0 for ordinary topics).
    """

    broker_name: ids.BrokerName
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_sys_flag: int = 0


@dataclasses.dataclass(frozen=True, slots=True)
class BrokerData:
    """A broker group's members (RocketMQ ``BrokerData``): broker id → client endpoint.

    Attributes:
        cluster: cluster name.
        broker_name: broker group name.
        broker_addrs: broker id → ``host:port`` of the gRPC endpoint; id 0 is the master.
    """

    cluster: ids.ClusterName
    broker_name: ids.BrokerName
    broker_addrs: Mapping[ids.BrokerId, str]

    def master_addr(self) -> str | None:
        """The master's endpoint, or ``None`` when the group has no master registered."""
        return self.broker_addrs.get(ids.MASTER_BROKER_ID)


@dataclasses.dataclass(frozen=True, slots=True)
class TopicRouteData:
    """Where a topic lives (RocketMQ ``TopicRouteData``); lists sorted by broker name."""

    queue_datas: tuple[QueueData, ...]
    broker_datas: tuple[BrokerData, ...]
