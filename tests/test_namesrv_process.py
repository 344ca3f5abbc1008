"""`ariane namesrv` processes serve Registry and v2 QueryRoute/RecallMessage as clients need."""

from __future__ import annotations

import asyncio
import contextlib
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import grpc
import pytest

from ariane import dev
from ariane.common import clock, errors, ids
from ariane.grpcwire import codes, convert, guard, pb, recall, registry_client
from ariane.grpcwire import server as grpc_server
from ariane.namesrv import server as namesrv_server
from ariane.remoting import codes as remoting_codes
from ariane.remoting import command as remoting_command
from ariane.remoting import fastjson, transport

pytestmark = pytest.mark.slow

CLIENT_HEADERS = (("x-mq-client-id", "tester@42@0@abc"), ("x-mq-language", "PYTHON"))
STARTUP_S = 30.0
TOPIC_TYPES = pb.topic.TopicMessageType


free_port = dev.free_port


def ariane_command() -> list[str]:
    script = pathlib.Path(sys.executable).parent / "ariane"
    if script.exists():
        return [str(script)]
    found = shutil.which("ariane")
    if found:
        return [found]
    return [sys.executable, "-c", "import sys; from ariane.cli import main; sys.exit(main())"]


class NameServerProcess:
    """One `ariane namesrv` child process on a free loopback port."""

    def __init__(self, log_path: pathlib.Path, *extra_args: str) -> None:
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self._log = log_path.open("wb")
        command = [*ariane_command(), "namesrv", "--listen", self.address, *extra_args]
        self.process = subprocess.Popen(command, stdout=self._log, stderr=subprocess.STDOUT)
        self.log_path = log_path

    def stop(self) -> int:
        """SIGTERM this process (by PID) and return its exit status."""
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGTERM)
        try:
            return self.process.wait(timeout=30)
        finally:
            self._log.close()


async def wait_until_serving(process: NameServerProcess) -> None:
    """Poll GetClusterInfo until the process answers, or fail at the deadline."""
    deadline = time.monotonic() + STARTUP_S
    async with grpc.aio.insecure_channel(process.address) as channel:
        while True:
            assert process.process.poll() is None, process.log_path.read_text()
            try:
                await registry_client.RegistryClient(channel, timeout_s=1).get_cluster_info()
                return
            except grpc.aio.AioRpcError:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.05)


def topic_config(
    name: str, read: int, write: int, perm: int, kind: pb.topic.TopicMessageType
) -> pb.topic.TopicConfig:
    return pb.topic.TopicConfig(
        topic=name, read_queue_nums=read, write_queue_nums=write, perm=perm, message_type=kind
    )


REGISTRATIONS = [
    pb.registry.RegisterBrokerRequest(
        cluster_name="DefaultCluster",
        broker_name="broker-b",
        broker_id=0,
        client_endpoint=pb.v2.Address(host="broker-b-0.brokers.svc", port=8081),
        ha_address="broker-b-0.brokers.svc:10912",
        data_version=1,
        topic_configs=[topic_config("orders", 2, 2, 4, TOPIC_TYPES.TOPIC_MESSAGE_TYPE_NORMAL)],
    ),
    pb.registry.RegisterBrokerRequest(
        cluster_name="DefaultCluster",
        broker_name="broker-a",
        broker_id=0,
        client_endpoint=pb.v2.Address(host="127.0.0.1", port=10911),
        ha_address="127.0.0.1:10912",
        data_version=3,
        topic_configs=[
            topic_config("orders", 4, 4, 6, TOPIC_TYPES.TOPIC_MESSAGE_TYPE_NORMAL),
            topic_config("mixed", 2, 1, 6, TOPIC_TYPES.TOPIC_MESSAGE_TYPE_MIXED),
        ],
    ),
    pb.registry.RegisterBrokerRequest(
        cluster_name="DefaultCluster",
        broker_name="broker-a",
        broker_id=1,
        client_endpoint=pb.v2.Address(host="127.0.0.2", port=10911),
        ha_address="127.0.0.2:10912",
        data_version=3,
    ),
]


@pytest.fixture(scope="module")
def name_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[str]]:
    """Two name servers, each registered with the same three brokers; yields their addresses."""
    log_dir = tmp_path_factory.mktemp("namesrv")
    processes = [NameServerProcess(log_dir / f"namesrv-{i}.log") for i in range(2)]

    async def start_and_register() -> None:
        for process in processes:
            await wait_until_serving(process)
            async with grpc.aio.insecure_channel(process.address) as channel:
                stub = pb.registry_grpc.RegistryStub(channel)
                for request in REGISTRATIONS:
                    response = await stub.RegisterBroker(request, timeout=10)
                    assert response.status.code == errors.Code.OK, response

    try:
        asyncio.run(start_and_register())
        yield [p.address for p in processes]
    finally:
        for process in processes:
            process.stop()


async def messaging(address: str, rpc_name: str, request: Any, **kwargs: Any) -> Any:
    async with grpc.aio.insecure_channel(address) as channel:
        stub = pb.v2_service_grpc.MessagingServiceStub(channel)
        kwargs.setdefault("metadata", CLIENT_HEADERS)
        return await getattr(stub, rpc_name)(request, timeout=10, **kwargs)


def query_route(address: str, topic: str, **kwargs: Any) -> Any:
    request = pb.v2_service.QueryRouteRequest(
        topic=convert.resource(topic), endpoints=convert.endpoints(address)
    )
    return asyncio.run(messaging(address, "QueryRoute", request, **kwargs))


def test_query_route_lists_each_masters_queues_field_by_field(name_servers: list[str]) -> None:
    """Masters only, at their advertised endpoints, per-queue permissions, NORMAL accepted."""
    response = query_route(name_servers[0], "orders")
    assert (response.status.code, response.status.message) == (20000, "OK")
    rows = [
        (
            q.topic.name,
            q.id,
            pb.v2.Permission.Name(q.permission),
            q.broker.name,
            q.broker.id,
            pb.v2.AddressScheme.Name(q.broker.endpoints.scheme),
            [(a.host, a.port) for a in q.broker.endpoints.addresses],
            [pb.v2.MessageType.Name(t) for t in q.accept_message_types],
        )
        for q in response.message_queues
    ]
    a_endpoint = [("127.0.0.1", 10911)]
    b_endpoint = [("broker-b-0.brokers.svc", 8081)]
    assert rows == [
        *[
            ("orders", i, "READ_WRITE", "broker-a", 0, "IPv4", a_endpoint, ["NORMAL"])
            for i in range(4)
        ],
        *[
            ("orders", i, "READ", "broker-b", 0, "DOMAIN_NAME", b_endpoint, ["NORMAL"])
            for i in range(2)
        ],
    ]


def test_a_mixed_topic_accepts_all_four_types(name_servers: list[str]) -> None:
    """MIXED → NORMAL, FIFO, DELAY, TRANSACTION; the extra read queue is READ only."""
    response = query_route(name_servers[1], "mixed")
    assert response.status.code == 20000
    assert [pb.v2.Permission.Name(q.permission) for q in response.message_queues] == [
        "READ_WRITE",
        "READ",
    ]
    for queue in response.message_queues:
        assert [pb.v2.MessageType.Name(t) for t in queue.accept_message_types] == [
            "NORMAL",
            "FIFO",
            "DELAY",
            "TRANSACTION",
        ]


def test_bad_queries_answer_their_codes(name_servers: list[str]) -> None:
    """Unknown topic, illegal name and a missing client id each get their own code."""
    assert query_route(name_servers[0], "nobody-has-it").status.code == 40402
    assert query_route(name_servers[0], "bad topic!").status.code == 40002
    assert query_route(name_servers[0], "orders", metadata=()).status.code == 40017


def test_other_v2_rpcs_answer_a_non_zero_status(name_servers: list[str]) -> None:
    """Every RPC a name server does not serve says so in a status instead of failing."""
    svc = pb.v2_service
    for rpc_name, request in [
        ("Heartbeat", svc.HeartbeatRequest()),
        ("SendMessage", svc.SendMessageRequest()),
        ("AckMessage", svc.AckMessageRequest()),
        ("EndTransaction", svc.EndTransactionRequest()),
        ("NotifyClientTermination", svc.NotifyClientTerminationRequest()),
        ("ChangeInvisibleDuration", svc.ChangeInvisibleDurationRequest()),
        ("GetOffset", svc.GetOffsetRequest()),
    ]:
        response = asyncio.run(messaging(name_servers[0], rpc_name, request))
        assert response.status.code == errors.Code.NOT_IMPLEMENTED, rpc_name

    async def receive() -> list[int]:
        async with grpc.aio.insecure_channel(name_servers[0]) as channel:
            stub = pb.v2_service_grpc.MessagingServiceStub(channel)
            call = stub.ReceiveMessage(svc.ReceiveMessageRequest(), timeout=10)
            return [r.status.code async for r in call]

    assert asyncio.run(receive()) == [errors.Code.NOT_IMPLEMENTED]


def test_two_name_servers_answer_identically(name_servers: list[str]) -> None:
    """Same registrations, same bytes: routes and cluster info do not depend on the server."""
    for topic in ["orders", "mixed"]:
        first, second = (query_route(address, topic) for address in name_servers)
        assert first.SerializeToString(deterministic=True) == second.SerializeToString(
            deterministic=True
        )

    async def cluster(address: str) -> Any:
        async with grpc.aio.insecure_channel(address) as channel:
            return await registry_client.RegistryClient(channel).get_topic_route("orders")

    routes = [asyncio.run(cluster(address)) for address in name_servers]
    for found in routes:  # registration times differ by server; everything else must not
        for group in found.broker_groups:
            for member in group.members:
                assert member.last_update_timestamp_ms > 0
                member.ClearField("last_update_timestamp_ms")
                member.ClearField("heard_ago_ms")  # when each server heard it: a time too
    assert routes[0] == routes[1]
    assert [g.broker_name for g in routes[0].broker_groups] == ["broker-a", "broker-b"]
    assert [m.broker_id for m in routes[0].broker_groups[0].members] == [0, 1]


def test_sigterm_stops_the_process_cleanly(tmp_path: pathlib.Path) -> None:
    """A serving name server exits 0 on SIGTERM (sent by PID); a second one on its port exits 1."""
    process = NameServerProcess(tmp_path / "namesrv.log")
    try:
        asyncio.run(wait_until_serving(process))
        clash = subprocess.run(
            [*ariane_command(), "namesrv", "--listen", process.address],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert clash.returncode == 1, clash.stderr
        assert "cannot listen" in clash.stderr
    finally:
        status = process.stop()
    log = process.log_path.read_text()
    assert status == 0, log
    assert "name server stopped" in log


class FakeBroker:
    """A broker that answers RecallMessage and remembers what it was asked."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, str]]] = []

    async def recall_message(
        self, request: pb.v2_service.RecallMessageRequest, context: Any
    ) -> pb.v2_service.RecallMessageResponse:
        headers = {k: v for k, v in context.invocation_metadata() if isinstance(v, str)}
        self.calls.append((request.recall_handle, headers))
        handle = recall.decode(request.recall_handle)
        return pb.v2_service.RecallMessageResponse(status=codes.ok(), message_id=handle.message_id)

    async def query_assignment(
        self, request: pb.v2_service.QueryAssignmentRequest, context: Any
    ) -> pb.v2_service.QueryAssignmentResponse:
        headers = {k: v for k, v in context.invocation_metadata() if isinstance(v, str)}
        self.calls.append((f"{request.topic.name}/{request.group.name}", headers))
        queue = pb.v2.MessageQueue(topic=request.topic, id=-1)
        return pb.v2_service.QueryAssignmentResponse(
            status=codes.ok(), assignments=[pb.v2.Assignment(message_queue=queue)]
        )


@contextlib.asynccontextmanager
async def serving(implementation: object) -> AsyncIterator[int]:
    server = grpc_server.build(
        grpc_server.ServerSettings(), [guard.service_handler(pb.MESSAGING_SERVICE, implementation)]
    )
    port = grpc_server.bind(server, "127.0.0.1:0")
    await server.start()
    try:
        yield port
    finally:
        await server.stop(None)


@contextlib.asynccontextmanager
async def name_server_before(broker: object) -> AsyncIterator[tuple[str, int]]:
    """An in-process name server (forwarding within 2 s) and ``broker`` served on a free port.

    Yields the name server's address and the broker's port; stops both on exit.
    """
    stop = asyncio.Event()
    settings = namesrv_server.NameServerSettings(listen="127.0.0.1:0", forward_timeout_ms=2_000)
    name_server = namesrv_server.NameServer(settings, clock=clock.SystemClock())
    async with serving(broker) as broker_port, asyncio.TaskGroup() as tasks:
        tasks.create_task(name_server.serve(stop))
        await name_server.started.wait()
        try:
            yield f"127.0.0.1:{name_server.port}", broker_port
        finally:
            stop.set()


def recall_request(broker_name: str, topic: str = "delayed") -> Any:
    handle = recall.RecallHandle(
        ids.TopicName("delayed"),
        ids.BrokerName(broker_name),
        ids.TimestampMs(1_700_000_000_000),
        ids.MessageId("01ABCDEF"),
    )
    return pb.v2_service.RecallMessageRequest(
        topic=convert.resource(topic), recall_handle=recall.encode(handle)
    )


def test_the_name_server_refuses_to_run_under_python_dash_o() -> None:
    """Assertions are checks, so `python -O` is refused with exit status 2."""
    refused = subprocess.run(
        [sys.executable, "-O", "-m", "ariane.namesrv", "--listen", "127.0.0.1:0"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert refused.returncode == 2
    assert "python -O" in refused.stderr


def test_bad_listen_addresses_are_refused_before_starting() -> None:
    """`ariane namesrv --listen` without a port exits 2 with a clear message."""
    from ariane import cli

    assert cli.main(["namesrv", "--listen", "localhost"]) == 2


def test_recall_is_forwarded_to_the_broker_named_in_the_handle() -> None:
    """RecallMessage reaches the owning broker with the client's headers; errors get codes."""
    broker = FakeBroker()

    async def scenario() -> None:
        async with name_server_before(broker) as (address, broker_port):
            async with grpc.aio.insecure_channel(address) as channel:
                registry = registry_client.RegistryClient(channel, timeout_s=10)
                for name, port in [("broker-live", broker_port), ("broker-dead", free_port())]:
                    registered = await registry.register_broker(
                        pb.registry.RegisterBrokerRequest(
                            cluster_name="c",
                            broker_name=name,
                            client_endpoint=pb.v2.Address(host="127.0.0.1", port=port),
                        )
                    )
                    assert registered.master_client_endpoint.port == port
            answers = [
                await messaging(address, "RecallMessage", recall_request(name, topic))
                for name, topic in [
                    ("broker-live", "delayed"),
                    ("broker-unknown", "delayed"),
                    ("broker-live", "other"),
                    ("broker-dead", "delayed"),
                ]
            ]
        assert [(a.status.code, a.message_id) for a in answers] == [
            (20000, "01ABCDEF"),
            (40400, ""),
            (40000, ""),
            (50001, ""),
        ]

    asyncio.run(scenario())
    ((handle, headers),) = broker.calls
    assert recall.decode(handle).broker_name == "broker-live"
    assert headers["x-mq-client-id"] == "tester@42@0@abc"
    assert headers["x-mq-language"] == "PYTHON"


def assignment_request(topic: str, group: str = "readers") -> Any:
    return pb.v2_service.QueryAssignmentRequest(
        topic=convert.resource(topic), group=convert.resource(group)
    )


def test_query_assignment_is_forwarded_to_a_broker_serving_the_topic_readable() -> None:
    """QueryAssignment (the Go client asks its access point) reaches a readable live master."""
    broker = FakeBroker()
    normal = TOPIC_TYPES.TOPIC_MESSAGE_TYPE_NORMAL

    async def scenario() -> list[Any]:
        async with name_server_before(broker) as (address, broker_port):
            registrations = [  # broker-a only writes "orders": broker-b must answer
                ("broker-a", free_port(), [topic_config("orders", 2, 2, 2, normal)]),
                ("broker-b", broker_port, [topic_config("orders", 2, 2, 6, normal)]),
                ("broker-c", free_port(), [topic_config("stranded", 1, 1, 6, normal)]),
            ]
            async with grpc.aio.insecure_channel(address) as channel:
                registry = registry_client.RegistryClient(channel, timeout_s=10)
                for name, port, configs in registrations:
                    await registry.register_broker(
                        pb.registry.RegisterBrokerRequest(
                            cluster_name="c",
                            broker_name=name,
                            client_endpoint=pb.v2.Address(host="127.0.0.1", port=port),
                            topic_configs=configs,
                        )
                    )
            answers = [
                await messaging(address, "QueryAssignment", request)
                for request in [
                    assignment_request("orders"),
                    assignment_request("missing"),
                    assignment_request("stranded"),
                    assignment_request("orders", "bad group!"),
                ]
            ]
        return answers

    answers = asyncio.run(scenario())
    assert [a.status.code for a in answers] == [20000, 40402, 50001, 40003]
    assert [a.message_queue.topic.name for a in answers[0].assignments] == ["orders"]
    ((asked, headers),) = broker.calls
    assert asked == "orders/readers"
    assert headers["x-mq-client-id"] == "tester@42@0@abc"


CLASSIC_BROKER = pb.registry.RegisterBrokerRequest(
    cluster_name="DefaultCluster",
    broker_name="broker-c",
    broker_id=0,
    client_endpoint=pb.v2.Address(host="127.0.0.1", port=8081),
    data_version=1,
    topic_configs=[topic_config("classic", 4, 4, 6, TOPIC_TYPES.TOPIC_MESSAGE_TYPE_NORMAL)],
    remoting_address="127.0.0.1:10911",
)


async def remoting_route(address: str, topic: str) -> remoting_command.RemotingCommand:
    client = transport.RemotingClient()
    try:
        request = remoting_command.request(
            remoting_codes.RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}
        )
        return await client.invoke(address, request, 10)
    finally:
        await client.close()


async def register(address: str, request: pb.registry.RegisterBrokerRequest) -> None:
    async with grpc.aio.insecure_channel(address) as channel:
        response = await pb.registry_grpc.RegistryStub(channel).RegisterBroker(request, timeout=10)
        assert response.status.code == errors.Code.OK, response


def test_one_port_serves_grpc_and_remoting(tmp_path: pathlib.Path) -> None:
    """By default the --listen port answers gRPC (a registration, QueryRoute) and Remoting
    (GET_ROUTEINFO_BY_TOPIC with the broker's Remoting address) side by side, and a bad
    Remoting frame closes only its own connection."""
    process = NameServerProcess(tmp_path / "namesrv.log")

    async def scenario() -> None:
        await wait_until_serving(process)
        await register(process.address, CLASSIC_BROKER)
        reply = await remoting_route(process.address, "classic")
        assert reply.code == 0, reply.remark
        route = fastjson.loads(reply.body)
        assert route["brokerDatas"][0]["brokerAddrs"] == {"0": "127.0.0.1:10911"}
        host, port = process.address.split(":")
        reader, writer = await asyncio.open_connection(host, int(port))
        writer.write(b"\x00\x00\x00\x09\x00\x00\x00\x05{garb")
        async with asyncio.timeout(10):
            assert await reader.read(1) == b""
        writer.close()
        assert (await remoting_route(process.address, "nope")).code == 17

    try:
        asyncio.run(scenario())
        assert query_route(process.address, "classic").status.code == 20000
    finally:
        assert process.stop() == 0, process.log_path.read_text()


def test_remoting_listen_moves_remoting_to_its_own_port(tmp_path: pathlib.Path) -> None:
    """``--remoting-listen`` serves Remoting on that port while gRPC stays on --listen."""
    remoting_address = f"127.0.0.1:{free_port()}"
    process = NameServerProcess(tmp_path / "namesrv.log", "--remoting-listen", remoting_address)

    async def scenario() -> None:
        await wait_until_serving(process)
        await register(process.address, CLASSIC_BROKER)
        reply = await remoting_route(remoting_address, "classic")
        assert reply.code == 0 and b'"0":"127.0.0.1:10911"' in reply.body

    try:
        asyncio.run(scenario())
        assert query_route(process.address, "classic").status.code == 20000
    finally:
        assert process.stop() == 0, process.log_path.read_text()
