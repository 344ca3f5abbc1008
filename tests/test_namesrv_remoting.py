"""The name server's Remoting codes, over a real socket: routes, cluster info, topics, KV.

Each test runs ``RemotingNameService``'s handlers in a ``RemotingServer`` over route tables fed
by ``register_broker`` (as gRPC registrations feed them) and asks with a ``RemotingClient``,
checking the bytes a classic client would parse.
"""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

import remoting_testing as rt
from ariane.common import clock, ids
from ariane.common import message as message_mod
from ariane.grpcwire import pb
from ariane.namesrv import inner_auth, kv_config, remoting_service, service
from ariane.namesrv import route_info_manager as rim
from ariane.remoting import codes, command, fastjson, transport
from ariane.security import settings as auth_settings
from ariane.security import signing

RC = codes.RequestCode


def _registration(
    name: str, broker_id: int, remoting: str, topics: dict[str, int]
) -> rim.BrokerRegistration:
    return rim.BrokerRegistration(
        cluster=ids.ClusterName("DefaultCluster"),
        broker_name=ids.BrokerName(name),
        broker_id=ids.BrokerId(broker_id),
        client_address=f"10.0.0.{broker_id + 5}:8081",
        ha_address="",
        data_version=1,
        topic_configs=tuple(
            rim.RegisteredTopic(ids.TopicName(t), n, n, 6, message_mod.MessageType.NORMAL)
            for t, n in topics.items()
        ),
        remoting_address=remoting,
    )


def _tables() -> tuple[rim.RouteInfoManager, kv_config.KvConfig]:
    manager = rim.RouteInfoManager(settings=rim.RouteSettings(), clock=clock.ManualClock())
    manager.register_broker(_registration("broker-b", 0, "10.0.0.5:10911", {"T": 4, "B": 1}))
    manager.register_broker(_registration("broker-b", 1, "10.0.0.6:10911", {}))
    # A broker that serves only gRPC: classic clients must never be routed to it.
    manager.register_broker(_registration("broker-g", 0, "", {"T": 2, "G": 2}))
    return manager, kv_config.KvConfig(entries_max=2)


async def _ask(code: int, ext: dict[str, str] | None = None) -> command.RemotingCommand:
    manager, kv = _tables()
    handlers = remoting_service.RemotingNameService(manager, kv).handlers()
    async with rt.running_server(handlers) as (_, addr):
        client = transport.RemotingClient()
        try:
            return await client.invoke(addr, command.request(code, ext), 5)
        finally:
            await client.close()


def test_route_lists_remoting_brokers_only_as_compact_json() -> None:
    """GET_ROUTEINFO_BY_TOPIC answers TopicRouteData byte for byte: master under "0", slave
    under "1", Remoting addresses, compact sorted JSON, and no gRPC-only broker group."""
    reply = asyncio.run(_ask(RC.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"}))
    assert reply.code == codes.ResponseCode.SUCCESS
    assert reply.body == (
        b'{"brokerDatas":[{"brokerAddrs":{"0":"10.0.0.5:10911","1":"10.0.0.6:10911"},'
        b'"brokerName":"broker-b","cluster":"DefaultCluster","enableActingMaster":false}],'
        b'"filterServerTable":{},"queueDatas":[{"brokerName":"broker-b","perm":6,'
        b'"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}]}'
    )


@pytest.mark.parametrize("topic", ["nope", "G"])
def test_unknown_or_grpc_only_topics_are_topic_not_exist(topic: str) -> None:
    """A topic no broker serves, or served only by gRPC-only brokers, gets TOPIC_NOT_EXIST (17)
    with a remark, which sends Java producers to TBW102."""
    reply = asyncio.run(_ask(RC.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}))
    assert reply.code == 17 == int(codes.ResponseCode.TOPIC_NOT_EXIST)
    assert reply.remark and topic in reply.remark and reply.body == b""


def test_cluster_info_and_topic_list() -> None:
    """GET_BROKER_CLUSTER_INFO lists the Remoting brokers by name and cluster;
    GET_ALL_TOPIC_LIST_FROM_NAMESERVER lists every routed topic."""
    info = fastjson.loads(asyncio.run(_ask(RC.GET_BROKER_CLUSTER_INFO)).body)
    assert info == {
        "brokerAddrTable": {
            "broker-b": {
                "brokerAddrs": {"0": "10.0.0.5:10911", "1": "10.0.0.6:10911"},
                "brokerName": "broker-b",
                "cluster": "DefaultCluster",
                "enableActingMaster": False,
            }
        },
        "clusterAddrTable": {"DefaultCluster": ["broker-b"]},
    }
    topics = asyncio.run(_ask(RC.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)).body
    assert topics == b'{"topicList":["B","G","T"]}'


def test_kv_config_put_get_delete_and_bound() -> None:
    """PUT/GET/DELETE_KV_CONFIG and GET_KVLIST_BY_NAMESPACE behave as KVConfigManager: a
    missing key is QUERY_NOT_FOUND, and a put beyond the entry bound is SYSTEM_BUSY."""

    async def main() -> None:
        manager, kv = _tables()
        handlers = remoting_service.RemotingNameService(manager, kv).handlers()
        async with rt.running_server(handlers) as (_, addr):
            client = transport.RemotingClient()

            async def ask(code: int, **ext: str) -> command.RemotingCommand:
                return await client.invoke(addr, command.request(code, ext), 5)

            ns = "ORDER_TOPIC_CONFIG"
            assert (await ask(RC.GET_KV_CONFIG, namespace=ns, key="T")).code == 22
            assert (await ask(RC.PUT_KV_CONFIG, namespace=ns, key="T", value="b:4")).code == 0
            got = await ask(RC.GET_KV_CONFIG, namespace=ns, key="T")
            assert (got.code, got.ext_fields) == (0, {"value": "b:4"})
            listed = await ask(RC.GET_KVLIST_BY_NAMESPACE, namespace=ns)
            assert listed.body == b'{"table":{"T":"b:4"}}'
            assert (await ask(RC.PUT_KV_CONFIG, namespace="x", key="k", value="v")).code == 0
            full = await ask(RC.PUT_KV_CONFIG, namespace="x", key="k2", value="v")
            assert full.code == codes.ResponseCode.SYSTEM_BUSY
            assert (await ask(RC.DELETE_KV_CONFIG, namespace=ns, key="T")).code == 0
            assert (await ask(RC.GET_KV_CONFIG, namespace=ns, key="T")).code == 22
            assert (await ask(RC.GET_KVLIST_BY_NAMESPACE, namespace=ns)).code == 22
            await client.close()

    asyncio.run(main())


@pytest.mark.parametrize("code", [RC.HEART_BEAT, RC.UNREGISTER_CLIENT])
def test_mqadmins_inner_producer_calls_are_accepted(code: int) -> None:
    """HEART_BEAT and UNREGISTER_CLIENT sent to a name server are answered SUCCESS."""
    assert asyncio.run(_ask(code, {"clientID": "c"})).code == codes.ResponseCode.SUCCESS


def test_registration_carries_the_remoting_address_to_members() -> None:
    """A gRPC RegisterBroker with ``remoting_address`` makes it the member's Remoting address,
    also shown by the registry's BrokerGroup message."""
    request = pb.registry.RegisterBrokerRequest(
        cluster_name="C",
        broker_name="b",
        broker_id=0,
        client_endpoint=pb.v2.Address(host="127.0.0.1", port=8081),
        remoting_address="127.0.0.1:10911",
    )
    registration = service.registration_of(request)
    assert registration.remoting_address == "127.0.0.1:10911"
    manager = rim.RouteInfoManager(settings=rim.RouteSettings(), clock=clock.ManualClock())
    group = manager.register_broker(registration)
    assert group.members[0].remoting_address == "127.0.0.1:10911"
    assert service.group_message(group).members[0].remoting_address == "127.0.0.1:10911"


def test_remoting_routes_follow_the_newest_epoch_master() -> None:
    """After a slave is promoted (id 0 at epoch 2) and the old master tries to register as id 0
    at epoch 1, classic routes and cluster info list only the new master under "0"."""
    manager = rim.RouteInfoManager(settings=rim.RouteSettings(), clock=clock.ManualClock())
    old = dataclasses.replace(_registration("g", 0, "10.0.0.5:10911", {"T": 2}), epoch=1)
    slave = dataclasses.replace(_registration("g", 1, "10.0.0.6:10911", {}), epoch=1)
    manager.register_broker(old)
    manager.register_broker(slave)
    promoted = _registration("g", 0, "10.0.0.6:10911", {"T": 2})  # with its synced topics
    manager.register_broker(
        dataclasses.replace(promoted, client_address=slave.client_address, epoch=2)
    )
    with pytest.raises(rim.StaleEpochError):
        manager.register_broker(old)
    route = remoting_service.topic_route_data(manager.pickup_topic_route(ids.TopicName("T")))
    assert route is not None
    datas = route["brokerDatas"]
    assert isinstance(datas, list)
    assert [d["brokerAddrs"] for d in datas] == [{"0": "10.0.0.6:10911"}]
    table = remoting_service.cluster_info(manager.cluster_info())["brokerAddrTable"]
    assert isinstance(table, dict)
    assert table["g"]["brokerAddrs"] == {"0": "10.0.0.6:10911"}


INNER = auth_settings.InnerCredentials("ariane-inner", "inner-secret")


@pytest.mark.parametrize("enforced", [True, False])
def test_kv_writes_need_the_inner_credential_when_enforced(enforced: bool) -> None:
    """With the inner credential enforced, an unsigned or wrongly signed PUT/DELETE_KV_CONFIG
    answers NO_PERMISSION and changes nothing while a signed one is served and reads stay open;
    with no credential configured, unsigned writes are served as today."""
    auth = inner_auth.NameServerAuthSettings(
        inner_client_authentication_credentials=INNER if enforced else None
    )
    writers = inner_auth.InnerAuthenticator(auth) if auth.enforced else None

    async def main() -> None:
        manager, kv = _tables()
        handlers = remoting_service.RemotingNameService(manager, kv, writers).handlers()
        async with rt.running_server(handlers) as (_, addr):
            client = transport.RemotingClient()

            async def ask(code: int, secret: str | None = None, **ext: str) -> int:
                fields = dict(ext)
                if secret is not None:
                    fields = signing.sign_remoting(
                        fields,
                        b"",
                        access_key=INNER.access_key,
                        secret_key=secret,
                        version=codes.ROCKETMQ_VERSION_5_3_3,
                    )
                return (await client.invoke(addr, command.request(code, fields), 5)).code

            put = {"namespace": "ns", "key": "k", "value": "v"}
            unsigned = await ask(RC.PUT_KV_CONFIG, **put)
            wrong = await ask(RC.PUT_KV_CONFIG, "guess", **put)
            if not enforced:
                assert (unsigned, wrong) == (0, 0)
                assert kv.get("ns", "k") == "v"
                assert await ask(RC.DELETE_KV_CONFIG, namespace="ns", key="k") == 0
                assert kv.get("ns", "k") is None
                await client.close()
                return
            assert unsigned == wrong == codes.ResponseCode.NO_PERMISSION
            assert kv.get("ns", "k") is None
            assert await ask(RC.PUT_KV_CONFIG, INNER.secret_key, **put) == 0
            assert kv.get("ns", "k") == "v"
            assert await ask(RC.GET_KV_CONFIG, namespace="ns", key="k") == 0  # reads stay open
            assert await ask(RC.GET_BROKER_CLUSTER_INFO) == 0
            refused = await ask(RC.DELETE_KV_CONFIG, namespace="ns", key="k")
            assert refused == codes.ResponseCode.NO_PERMISSION
            assert kv.get("ns", "k") == "v"
            assert await ask(RC.DELETE_KV_CONFIG, INNER.secret_key, namespace="ns", key="k") == 0
            assert kv.get("ns", "k") is None
            await client.close()

    asyncio.run(main())
