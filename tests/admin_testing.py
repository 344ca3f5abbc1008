"""Helpers shared by the admin tests: a tiny broker runtime, its Admin service on 127.0.0.1,
a name server it registers with, and message factories."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import pathlib
from collections.abc import AsyncIterator
from typing import Any

import grpc
from google.protobuf import message as pb_message

import store_testing
from ariane.broker import runtime
from ariane.broker import settings as broker_settings
from ariane.broker.grpc import admin_service
from ariane.broker.tables import topic_config
from ariane.common import clock, ids, message
from ariane.grpcwire import convert, pb, registry_client, rpc
from ariane.grpcwire import server as grpc_server
from ariane.namesrv import server as namesrv_server
from ariane.store import commit_log, index_file
from ariane.store import settings as store_settings


def tiny_settings(store_dir: pathlib.Path, **overrides: Any) -> broker_settings.BrokerSettings:
    """Broker settings with 64 KiB CommitLog segments, 64-entry CQ files and a tiny index."""
    base = broker_settings.BrokerSettings(
        store_dir=store_dir,
        store=store_settings.StoreSettings(
            commit_log_file_size_bytes=64 * 1024,
            consume_queue_file_entries=64,
            message_size_bytes_max=16 * 1024,
            write_buffer_bytes=128 * 1024,
        ),
        index=index_file.IndexSettings(hash_slot_count=64, index_count_max=256),
    )
    return dataclasses.replace(base, **overrides)


def append_request(
    topic: str,
    *,
    queue_id: int = 0,
    body: bytes = b"hello",
    uniq_key: str | None = None,
    keys: str | None = None,
    tag: str | None = None,
) -> commit_log.AppendRequest:
    """An append request as the send path builds it (UNIQ_KEY, KEYS, TAGS properties)."""
    props = {} if uniq_key is None else {message.Property.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: uniq_key}
    return store_testing.request(topic, body, queue_id=queue_id, tags=tag, keys=keys, props=props)


class AdminCaller:
    """Typed-enough unary calls of ``ariane.admin.v1.Admin`` over one channel."""

    def __init__(self, channel: grpc.aio.Channel) -> None:
        self.channel = channel

    async def call(self, rpc_name: str, request: pb_message.Message) -> Any:
        """Call ``rpc_name`` and return its response message."""
        method = pb.ADMIN_SERVICE.methods_by_name[rpc_name]
        response_type = pb.message_class(method.output_type)
        return await rpc.unary_call(
            self.channel, pb.ADMIN_SERVICE, rpc_name, request, response_type, timeout_s=10
        )


@contextlib.asynccontextmanager
async def serving(broker: runtime.BrokerRuntime) -> AsyncIterator[tuple[AdminCaller, int]]:
    """Serve the Admin service of ``broker`` on a free loopback port; yields (caller, port)."""
    server = grpc_server.build(grpc_server.ServerSettings(), [admin_service.handler(broker)])
    port = grpc_server.bind(server, "127.0.0.1:0")
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            yield AdminCaller(channel), port
    finally:
        await server.stop(None)


def registration(
    broker: runtime.BrokerRuntime, port: int, *, data_version: int
) -> pb.registry.RegisterBrokerRequest:
    """The RegisterBroker request of ``broker`` serving on ``port`` (what registration sends)."""

    def topic_message(t: topic_config.TopicConfig) -> pb.topic.TopicConfig:
        return pb.topic.TopicConfig(
            topic=t.name,
            read_queue_nums=t.read_queue_nums,
            write_queue_nums=t.write_queue_nums,
            perm=int(t.perm),
            message_type=convert.topic_message_type(t.message_type),
        )

    settings = broker.settings
    return pb.registry.RegisterBrokerRequest(
        cluster_name=settings.cluster,
        broker_name=settings.broker_name,
        broker_id=settings.broker_id,
        client_endpoint=convert.address("127.0.0.1", port),
        data_version=data_version,
        topic_configs=[topic_message(t) for t, _ in broker.queue_datas()],
    )


async def keep_registered(
    broker: runtime.BrokerRuntime, port: int, namesrv: str, registered: asyncio.Event
) -> None:
    """Register with ``namesrv`` now and again whenever ``route_changed`` is set (the broker's
    registration loop in miniature); sets ``registered`` after each registration."""
    async with grpc.aio.insecure_channel(namesrv) as channel:
        client = registry_client.RegistryClient(channel, timeout_s=10)
        version = 0
        while True:
            version += 1
            broker.route_changed.clear()
            answer = await client.register_broker(registration(broker, port, data_version=version))
            assert answer.status.code == 20000, answer.status
            registered.set()
            await broker.route_changed.wait()


@dataclasses.dataclass
class Cluster:
    """A name server and brokers (Admin service only) registered with it, all in this loop."""

    namesrv: str
    brokers: dict[str, runtime.BrokerRuntime]
    ports: dict[str, int]


@contextlib.asynccontextmanager
async def cluster(
    root: pathlib.Path, broker_names: tuple[str, ...] = ("broker-a",)
) -> AsyncIterator[Cluster]:
    """A name server plus one master per name in ``broker_names``, each registered."""
    stop = asyncio.Event()
    ns = namesrv_server.NameServer(namesrv_server.NameServerSettings(listen="127.0.0.1:0"))
    async with contextlib.AsyncExitStack() as stack, asyncio.TaskGroup() as tasks:
        serve = tasks.create_task(ns.serve(stop))
        await ns.started.wait()
        namesrv = f"127.0.0.1:{ns.port}"
        found = Cluster(namesrv, {}, {})
        loops = []
        for name in broker_names:
            settings = tiny_settings(root / name, broker_name=ids.BrokerName(name))
            broker = runtime.BrokerRuntime(settings, time=clock.SystemClock())
            stack.callback(broker.close)
            _, port = await stack.enter_async_context(serving(broker))
            registered = asyncio.Event()
            loops.append(tasks.create_task(keep_registered(broker, port, namesrv, registered)))
            await registered.wait()
            found.brokers[name], found.ports[name] = broker, port
        try:
            yield found
        finally:
            for loop in loops:
                loop.cancel()
            stop.set()
            await serve
