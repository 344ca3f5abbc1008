"""AdminClient finds masters through a real name server and merges their Admin answers."""

from __future__ import annotations

import asyncio
import pathlib
import time
from collections.abc import Awaitable, Callable

import grpc
import pytest

from admin_testing import Cluster, append_request, cluster
from ariane import client
from ariane.common import errors, message
from ariane.dev import free_port
from ariane.grpcwire import codes, convert, pb, registry_client
from ariane.namesrv import server as namesrv_server

TWO = ("broker-a", "broker-b")


async def eventually(check: Callable[[], Awaitable[bool]], *, timeout_s: float = 10.0) -> None:
    """Poll ``check`` until it is true; fail after ``timeout_s`` (re-registration is async)."""
    deadline = time.monotonic() + timeout_s
    while not await check():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.02)


async def route_brokers(admin: client.AdminClient, topic: str) -> set[str]:
    """The broker groups the name server routes ``topic`` to (empty when unknown)."""
    try:
        return {m.broker_name for m in await admin.topic_masters(topic)}
    except errors.TopicNotFoundError:
        return set()


def run_cluster(
    tmp_path: pathlib.Path,
    body: Callable[[Cluster, client.AdminClient], Awaitable[None]],
    names: tuple[str, ...] = TWO,
) -> None:
    """Start a name server and brokers, and run ``body`` with a client pointed at them."""

    async def main() -> None:
        async with (
            cluster(tmp_path, names) as found,
            client.AdminClient(f"127.0.0.1:1;{found.namesrv}", timeout_s=5) as admin,
        ):
            await body(found, admin)

    asyncio.run(main())


def test_topics_are_created_on_every_master_listed_merged_and_deleted(
    tmp_path: pathlib.Path,
) -> None:
    """A topic goes to every master (or the named ones), lists per broker, updates and deletes
    where the route says, and bad names come back with the broker named."""

    async def body(found: Cluster, admin: client.AdminClient) -> None:
        assert [m.broker_name for m in await admin.masters()] == list(TWO)
        made = await admin.create_topic(
            "orders", write_queue_nums=4, message_type=message.MessageType.FIFO
        )
        assert [(t.broker_name, t.read_queue_nums, t.write_queue_nums) for t in made] == [
            ("broker-a", 4, 4),
            ("broker-b", 4, 4),
        ]
        only_b = await admin.create_topic("audit", broker_names=["broker-b"])
        assert [t.broker_name for t in only_b] == ["broker-b"]
        listed = await admin.list_topics()
        assert [(t.name, t.broker_name) for t in listed] == [
            ("audit", "broker-b"),
            ("orders", "broker-a"),
            ("orders", "broker-b"),
        ]
        assert listed[1].message_type is message.MessageType.FIFO
        await eventually(lambda: _has_route(admin, "orders", set(TWO)))
        updated = await admin.update_topic("orders", perm=4, retention_hours=12)
        assert {(t.perm, t.retention_hours) for t in updated} == {(4, 12)}
        with pytest.raises(errors.BadRequestError, match="broker-z"):
            await admin.create_topic("x", broker_names=["broker-z"])
        with pytest.raises(errors.IllegalTopicError, match=r"^broker-a: .*characters"):
            await admin.create_topic("bad name")
        await eventually(lambda: _has_route(admin, "audit", {"broker-b"}))
        assert await admin.delete_topic("audit") == ["broker-b"]
        await eventually(lambda: _has_route(admin, "audit", set()))
        with pytest.raises(errors.TopicNotFoundError):
            await admin.delete_topic("audit")

    run_cluster(tmp_path, body)


async def _has_route(admin: client.AdminClient, topic: str, brokers: set[str]) -> bool:
    return await route_brokers(admin, topic) == brokers


def test_groups_lag_and_messages_across_brokers(tmp_path: pathlib.Path) -> None:
    """Groups go to every master; lag and message queries merge what each broker holds."""

    async def body(found: Cluster, admin: client.AdminClient) -> None:
        made = await admin.create_group("billing", consume_orderly=True, max_delivery_attempts=3)
        assert {(g.broker_name, g.consume_orderly, g.max_delivery_attempts) for g in made} == {
            ("broker-a", True, 3),
            ("broker-b", True, 3),
        }
        policy = client.GroupRetryPolicy(client.RetryKind.CUSTOMIZED, delays_ms=(1_000, 5_000))
        await admin.create_group("audit", retry_policy=policy, broker_names=["broker-a"])
        groups = await admin.list_groups()
        assert [(g.name, g.broker_name) for g in groups] == [
            ("audit", "broker-a"),
            ("billing", "broker-a"),
            ("billing", "broker-b"),
        ]
        assert groups[0].retry_policy == policy and groups[1].retry_policy is None
        await admin.create_topic("orders", write_queue_nums=1)
        await eventually(lambda: _has_route(admin, "orders", set(TWO)))
        broker_b = found.brokers["broker-b"]
        await broker_b.store.put_messages(
            [append_request("orders", uniq_key=f"ID-{i}", keys="k") for i in range(3)]
        )
        lag = await admin.consumer_lag("billing", "orders")
        assert [(q.broker_name, q.lag) for q in lag] == [("broker-a", 0), ("broker-b", 3)]
        moved = await admin.reset_offset("billing", "orders", client.ResetTarget.LATEST)
        assert sorted((o.broker_name, o.offset) for o in moved) == [
            ("broker-a", 0),
            ("broker-b", 3),
        ]
        assert sum(q.lag for q in await admin.consumer_lag("billing")) == 0
        with pytest.raises(errors.ConsumerGroupNotFoundError):
            await admin.consumer_lag("nobody")
        by_key = await admin.query_message_by_key("orders", "k")
        assert [(m.broker_name, m.message_id) for m in by_key] == [
            ("broker-b", "ID-2"),
            ("broker-b", "ID-1"),
            ("broker-b", "ID-0"),
        ]
        by_id = await admin.query_message_by_id("ID-1", topic="orders")
        assert [(m.queue_offset, m.keys, m.body) for m in by_id] == [(1, ("k",), b"hello")]
        with pytest.raises(errors.MessageNotFoundError):
            await admin.query_message_by_id("ID-9", topic="orders")
        assert await admin.delete_group("audit") == ["broker-a"]
        with pytest.raises(errors.ConsumerGroupNotFoundError):
            await admin.delete_group("audit")

    run_cluster(tmp_path, body)


def test_stats_and_write_permission_per_broker(tmp_path: pathlib.Path) -> None:
    """Stats come from every master; wiping write permission needs named broker groups."""

    async def body(found: Cluster, admin: client.AdminClient) -> None:
        await admin.create_topic("orders")
        stats = await admin.broker_stats()
        assert [(s.broker_name, s.role, s.writable) for s in stats] == [
            ("broker-a", "ASYNC_MASTER", True),
            ("broker-b", "ASYNC_MASTER", True),
        ]
        with pytest.raises(errors.BadRequestError, match="name the broker"):
            await admin.set_write_perm([], writable=False)
        assert await admin.set_write_perm(["broker-b"], writable=False) == {"broker-b": 1}
        perms = {(t.broker_name, t.perm) for t in await admin.list_topics()}
        assert perms == {("broker-a", 6), ("broker-b", 4)}
        assert await admin.set_write_perm(["broker-b"], writable=True) == {"broker-b": 1}

    run_cluster(tmp_path, body)


def test_unreachable_name_servers_and_brokers_are_told_apart(tmp_path: pathlib.Path) -> None:
    """No name server → NameServerUnreachableError; no broker → NotFoundError; a registered
    broker that does not answer → BrokerUnreachableError naming it."""

    async def main() -> None:
        closed = f"127.0.0.1:{free_port()}"
        async with client.AdminClient(closed, timeout_s=2) as admin:
            with pytest.raises(client.NameServerUnreachableError, match=closed):
                await admin.list_topics()
        stop = asyncio.Event()
        ns = namesrv_server.NameServer(namesrv_server.NameServerSettings(listen="127.0.0.1:0"))
        serving = asyncio.create_task(ns.serve(stop))
        await ns.started.wait()
        namesrv = f"127.0.0.1:{ns.port}"
        try:
            async with client.AdminClient(namesrv, timeout_s=2) as admin:
                with pytest.raises(errors.NotFoundError, match="no broker master"):
                    await admin.list_topics()
                await _register_ghost(namesrv, closed)
                with pytest.raises(client.BrokerUnreachableError, match="ghost"):
                    await admin.list_topics()
        finally:
            stop.set()
            await serving

    asyncio.run(main())


async def _register_ghost(namesrv: str, endpoint: str) -> None:
    host, port = convert.split_host_port(endpoint)
    async with grpc.aio.insecure_channel(namesrv) as channel:
        request = pb.registry.RegisterBrokerRequest(
            cluster_name="c", broker_name="ghost", client_endpoint=convert.address(host, port)
        )
        answer = await registry_client.RegistryClient(channel).register_broker(request)
        assert codes.is_success(answer.status)


def test_endpoints_parse_like_namesrv_addr() -> None:
    """``;`` and ``,`` separate endpoints, duplicates collapse, and bad ones are refused."""
    assert client.admin.parse_endpoints("a:1; b:2,a:1") == ("a:1", "b:2")
    assert client.admin.parse_endpoints(["a:1", "c:3"]) == ("a:1", "c:3")
    for bad in ["", " ; ", "nohost", "a:0", "a:99999"]:
        with pytest.raises(ValueError):
            client.admin.parse_endpoints(bad)
    with pytest.raises(ValueError, match="timeout_s"):
        client.AdminClient("a:1", timeout_s=0)
