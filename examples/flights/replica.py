"""What the slave of ``make run``'s master/slave pair holds: replication lag and message count.

Read over the brokers' ``AdminService`` (``GetBrokerRuntimeStats`` for CommitLog offsets,
``GetConsumerLag`` on the slave for its ConsumeQueue ends of the topic), after waiting up to
``CATCH_UP_TIMEOUT_S`` for the slave to hold every byte of the master.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from typing import Any

import grpc

from ariane.grpcwire import codes, pb, rpc

CATCH_UP_TIMEOUT_S = 30.0
"""Longest wait for the slave to catch up before the figures are read, s."""


@dataclasses.dataclass(frozen=True, slots=True)
class Replica:
    """The slave's state next to its master's.

    Attributes:
        lag_bytes_at_end: master minus slave CommitLog max offset when the consumers finished.
        lag_bytes: the same after the bounded catch-up wait (0 = the slave holds everything).
        caught_up_s: how long the catch-up took, seconds.
        messages: messages of the topic in the slave's ConsumeQueues.
    """

    lag_bytes_at_end: int
    lag_bytes: int
    caught_up_s: float
    messages: int


async def _call(channel: grpc.aio.Channel, name: str, request: Any, answer: type[rpc.M]) -> rpc.M:
    response = await rpc.unary_call(
        channel,
        pb.ADMIN_SERVICE,
        name,
        request,
        answer,
        timeout_s=10,
    )
    codes.raise_for_status(response.status)  # type: ignore[attr-defined]
    return response


async def _lag(master: grpc.aio.Channel, slave: grpc.aio.Channel) -> int:
    request = pb.admin.GetBrokerRuntimeStatsRequest()
    answer = pb.admin.GetBrokerRuntimeStatsResponse
    ends = [await _call(c, "GetBrokerRuntimeStats", request, answer) for c in (master, slave)]
    return int(ends[0].commit_log_max_offset - ends[1].commit_log_max_offset)


async def _read(master_endpoint: str, slave_endpoint: str, topic: str, group: str) -> Replica:
    async with (
        grpc.aio.insecure_channel(master_endpoint) as master,
        grpc.aio.insecure_channel(slave_endpoint) as slave,
    ):
        started = time.monotonic()
        at_end = lag = await _lag(master, slave)
        while lag > 0 and time.monotonic() - started < CATCH_UP_TIMEOUT_S:
            await asyncio.sleep(0.1)
            lag = await _lag(master, slave)
        waited_s = time.monotonic() - started
        request = pb.admin.GetConsumerLagRequest(group=group, topic=topic)
        queues = await _call(slave, "GetConsumerLag", request, pb.admin.GetConsumerLagResponse)
        messages = sum(q.broker_offset for q in queues.queues)
    return Replica(at_end, lag, round(waited_s, 2), int(messages))


def read(master_endpoint: str, slave_endpoint: str, topic: str, group: str) -> Replica:
    """The slave's figures (see ``Replica``); ``group`` must be known to the slave (its
    metadata sync copies the master's groups).

    Raises:
        grpc.aio.AioRpcError: a broker did not answer.
        ArianeError: a broker refused (e.g. the group not yet synced to the slave).
    """
    return asyncio.run(_read(master_endpoint, slave_endpoint, topic, group))
