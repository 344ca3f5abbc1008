"""Registration with every name server (RocketMQ ``BrokerController.registerBrokerAll``).

Every ``register_interval_ms`` (30 s) and at once when ``runtime.route_changed`` is set (topic
created/updated/deleted, write permission changed), the broker sends ``RegisterBroker`` with its
full topic config to each name server, independently: one unreachable name server never delays
the others. On clean shutdown it sends ``UnregisterBroker`` so clients stop being routed to it
before the 120 s expiry.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

import grpc

from ariane.broker import runtime as runtime_mod
from ariane.common import errors
from ariane.remoting import codes, convert, pb, rpc

_log = logging.getLogger(__name__)

CALL_TIMEOUT_S = 5.0
"""Deadline of one registration call (RocketMQ allows 24 s; a dead name server should not stall
shutdown that long)."""


class RegistrationService:
    """Keeps this broker registered with every name server.

    Args:
        runtime: the broker's state (topics, endpoint, identity).
        channels: the pool of channels to name servers.
    """

    def __init__(self, runtime: runtime_mod.BrokerRuntime, channels: rpc.ChannelPool) -> None:
        self._runtime = runtime
        self._channels = channels
        self.registrations_ok = 0
        """Successful RegisterBroker calls since start (for tests and stats)."""

    def _request(self) -> pb.registry.RegisterBrokerRequest:
        runtime = self._runtime
        settings = runtime.settings
        host, port = convert.split_host_port(runtime.client_endpoint)
        return pb.registry.RegisterBrokerRequest(
            cluster_name=settings.cluster,
            broker_name=settings.broker_name,
            broker_id=settings.broker_id,
            client_endpoint=convert.address(host, port),
            data_version=runtime.topics.data_version.counter,
            topic_configs=[
                pb.topic.TopicConfig(
                    topic=config.name,
                    read_queue_nums=config.read_queue_nums,
                    write_queue_nums=config.write_queue_nums,
                    perm=int(config.perm),
                    message_type=convert.topic_message_type(config.message_type),
                )
                for config in runtime.topics.list_all()
            ],
        )

    async def register_all(self) -> int:
        """Register with every name server at once; returns how many accepted."""
        request = self._request()
        results = await asyncio.gather(
            *(self._register_one(addr, request) for addr in self._runtime.settings.namesrv_addrs)
        )
        return sum(results)

    async def _register_one(self, addr: str, request: pb.registry.RegisterBrokerRequest) -> bool:
        try:
            client = rpc.RegistryClient(await self._channels.get(addr), timeout_s=CALL_TIMEOUT_S)
            answer = await client.register_broker(request)
            codes.raise_for_status(answer.status)
        except (grpc.aio.AioRpcError, errors.ArianeError) as exc:
            _log.warning("registration with name server %s failed: %s", addr, exc)
            return False
        self.registrations_ok += 1
        return True

    async def run(self) -> None:
        """Register now, then every interval and whenever the route changes, until cancelled."""
        interval_s = self._runtime.settings.register_interval_ms / 1000
        changed = self._runtime.route_changed
        while True:
            changed.clear()
            await self.register_all()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(changed.wait(), timeout=interval_s)

    async def unregister_all(self) -> None:
        """Tell every name server this broker is leaving (best effort, bounded)."""
        settings = self._runtime.settings
        request = pb.registry.UnregisterBrokerRequest(
            cluster_name=settings.cluster,
            broker_name=settings.broker_name,
            broker_id=settings.broker_id,
        )

        async def one(addr: str) -> None:
            try:
                client = rpc.RegistryClient(await self._channels.get(addr), timeout_s=2.0)
                await client.unregister_broker(request)
            except grpc.aio.AioRpcError as exc:
                _log.warning("unregister from %s failed: %s", addr, exc.code())

        await asyncio.gather(*(one(addr) for addr in settings.namesrv_addrs))
