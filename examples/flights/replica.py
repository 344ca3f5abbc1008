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
from examples.flights import access as access_mod

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


async def _call(
    channel: grpc.aio.Channel,
    name: str,
    request: Any,
    answer: type[rpc.M],
    headers: tuple[tuple[str, str], ...] = (),
) -> rpc.M:
    response = await rpc.unary_call(
        channel, pb.ADMIN_SERVICE, name, request, answer, timeout_s=10, metadata=headers
    )
    codes.raise_for_status(response.status)  # type: ignore[attr-defined]
    return response


async def _lag(master: grpc.aio.Channel, slave: grpc.aio.Channel, access: access_mod.Access) -> int:
    request = pb.admin.GetBrokerRuntimeStatsRequest()
    answer = pb.admin.GetBrokerRuntimeStatsResponse
    ends = [
        await _call(c, "GetBrokerRuntimeStats", request, answer, access.call_headers())
        for c in (master, slave)
    ]
    return int(ends[0].commit_log_max_offset - ends[1].commit_log_max_offset)


def _channel(endpoint: str, access: access_mod.Access) -> grpc.aio.Channel:
    credentials = access.channel_credentials()
    if credentials is None:
        return grpc.aio.insecure_channel(endpoint)
    return grpc.aio.secure_channel(endpoint, credentials)


async def _read(
    access: access_mod.Access, master_endpoint: str, slave_endpoint: str, topic: str, group: str
) -> Replica:
    async with (
        _channel(master_endpoint, access) as master,
        _channel(slave_endpoint, access) as slave,
    ):
        started = time.monotonic()
        at_end = lag = await _lag(master, slave, access)
        while lag > 0 and time.monotonic() - started < CATCH_UP_TIMEOUT_S:
            await asyncio.sleep(0.1)
            lag = await _lag(master, slave, access)
        waited_s = time.monotonic() - started
        request = pb.admin.GetConsumerLagRequest(group=group, topic=topic)
        queues = await _call(
            slave, "GetConsumerLag", request, pb.admin.GetConsumerLagResponse,
            access.call_headers(),
        )  # fmt: skip
        messages = sum(q.broker_offset for q in queues.queues)
    return Replica(at_end, lag, round(waited_s, 2), int(messages))


def read(
    access: access_mod.Access, master_endpoint: str, slave_endpoint: str, topic: str, group: str
) -> Replica:
    """The slave's figures (see ``Replica``), read over ``access``'s TLS and as its user (an
    operator's view: a user allowed the admin reads, e.g. the Super user); ``group`` must be
    known to the slave (its metadata sync copies the master's groups).

    Raises:
        grpc.aio.AioRpcError: a broker did not answer.
        ArianeError: a broker refused (e.g. the group not yet synced to the slave).
    """
    return asyncio.run(_read(access, master_endpoint, slave_endpoint, topic, group))
