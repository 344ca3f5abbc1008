"""Real ``ariane namesrv`` and ``ariane broker`` processes: registration, shutdown, restart, dev.

A broker registers with every name server given; clients get the same route from each; a clean
stop unregisters it at once (not after the 120 s expiry) and closes the store cleanly, so a
restart on the same directory serves the same messages; ``ariane dev`` prints its endpoints and
stops both children on SIGTERM.

Own cluster: starting, stopping and restarting these processes is the subject.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import pathlib
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator

import grpc
import pytest
from e2e.testenv import processes

from ariane import dev
from ariane.broker.services import registration
from ariane.common import errors
from ariane.grpcwire import codes, messages, pb, registry_client, rpc

pytestmark = pytest.mark.slow

CLIENT = (("x-mq-client-id", "process-test@1"),)
DEADLINE_S = 30.0


_spawn = processes.spawn_ariane


@contextlib.contextmanager
def _namesrv(tmp: pathlib.Path, name: str) -> Iterator[str]:
    with processes.running_namesrv(tmp / f"{name}.log", check_exit=True) as (endpoint, _):
        yield endpoint


def _broker(tmp: pathlib.Path, namesrvs: list[str], port: int) -> subprocess.Popen[bytes]:
    args = [
        "broker",
        "--listen",
        f"127.0.0.1:{port}",
        "--store-dir",
        str(tmp / "store"),
        "--broker-name",
        "broker-p",
    ]
    for addr in namesrvs:
        args += ["--namesrv", addr]
    proc = _spawn(args, tmp / "broker.log")
    dev.wait_until_listening("127.0.0.1", port, process=proc, timeout_s=DEADLINE_S)
    return proc


async def _cluster_members(namesrv: str) -> list[str]:
    async with grpc.aio.insecure_channel(namesrv) as channel:
        info = await registry_client.RegistryClient(channel, timeout_s=5).get_cluster_info()
    return sorted(g.broker_name for g in info.broker_groups if g.members)


def _registered(namesrv: str) -> bool:
    return asyncio.run(_cluster_members(namesrv)) == ["broker-p"]


def _poll(check: Callable[[], bool], what: str) -> None:
    processes.wait_until(check, timeout_s=DEADLINE_S, what=what)


async def _admin_create_topic(broker: str, name: str) -> None:
    async with grpc.aio.insecure_channel(broker) as channel:
        request = pb.admin.CreateTopicRequest(
            topic=pb.admin.Topic(
                name=name,
                read_queue_nums=2,
                write_queue_nums=2,
                perm=6,
                message_type=pb.topic.TopicMessageType.TOPIC_MESSAGE_TYPE_NORMAL,
            )
        )
        answer = await rpc.unary_call(
            channel,
            pb.ADMIN_SERVICE,
            "CreateTopic",
            request,
            pb.admin.CreateTopicResponse,
            timeout_s=10,
        )
    codes.raise_for_status(answer.status)


async def _query_route(namesrv: str, topic: str) -> pb.v2_service.QueryRouteResponse:
    async with grpc.aio.insecure_channel(namesrv) as channel:
        request = pb.v2_service.QueryRouteRequest(topic=pb.v2.Resource(name=topic))
        return await rpc.unary_call(
            channel,
            pb.MESSAGING_SERVICE,
            "QueryRoute",
            request,
            pb.v2_service.QueryRouteResponse,
            timeout_s=10,
            metadata=CLIENT,
        )


async def _send(broker: str, topic: str, body: bytes) -> int:
    props = pb.v2.SystemProperties(
        message_id=body.decode(),
        message_type=pb.v2.MessageType.NORMAL,
        born_timestamp=messages.timestamp(1_700_000_000_000),
        born_host="t",
        body_encoding=pb.v2.Encoding.IDENTITY,
    )
    msg = pb.v2.Message(topic=pb.v2.Resource(name=topic), body=body, system_properties=props)
    async with grpc.aio.insecure_channel(broker) as channel:
        answer = await rpc.unary_call(
            channel,
            pb.MESSAGING_SERVICE,
            "SendMessage",
            pb.v2_service.SendMessageRequest(messages=[msg]),
            pb.v2_service.SendMessageResponse,
            timeout_s=10,
            metadata=CLIENT,
        )
    return codes.code_of(answer.status)


async def _message_by_id(broker: str, topic: str, message_id: str) -> list[bytes]:
    async with grpc.aio.insecure_channel(broker) as channel:
        answer = await rpc.unary_call(
            channel,
            pb.ADMIN_SERVICE,
            "QueryMessageById",
            pb.admin.QueryMessageByIdRequest(topic=topic, message_id=message_id),
            pb.admin.QueryMessageByIdResponse,
            timeout_s=10,
        )
    return [m.body for m in answer.messages]


def test_broker_registers_with_every_name_server_and_unregisters_on_stop(
    tmp_path: pathlib.Path,
) -> None:
    """Both name servers route to the broker; SIGTERM removes it from both at once; a restart
    on the same store serves the message sent before."""
    with _namesrv(tmp_path, "ns1") as ns1, _namesrv(tmp_path, "ns2") as ns2:
        port = dev.free_port()
        broker = _broker(tmp_path, [ns1, ns2], port)
        endpoint = f"127.0.0.1:{port}"
        asyncio.run(_admin_create_topic(endpoint, "routed"))
        for ns in (ns1, ns2):
            _poll(functools.partial(_registered, ns), f"{ns} to list the broker")
        routes = [asyncio.run(_query_route(ns, "routed")) for ns in (ns1, ns2)]
        assert routes[0] == routes[1]
        assert codes.code_of(routes[0].status) == errors.Code.OK
        assert {q.broker.endpoints.addresses[0].port for q in routes[0].message_queues} == {port}
        assert asyncio.run(_send(endpoint, "routed", b"01BEFORE")) == errors.Code.OK
        assert dev.stop_process(broker) == 0
        assert asyncio.run(_cluster_members(ns1)) == []
        assert asyncio.run(_cluster_members(ns2)) == []
        assert "store closed" in (tmp_path / "broker.log").read_text()
        broker = _broker(tmp_path, [ns1], port)
        try:
            found = asyncio.run(_message_by_id(endpoint, "routed", "01BEFORE"))
            assert found == [b"01BEFORE"]
        finally:
            assert dev.stop_process(broker) == 0


def _listening(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5):
        return True
    return False


def test_ariane_dev_prints_endpoints_and_stops_its_children(tmp_path: pathlib.Path) -> None:
    """``ariane dev`` serves a name server and a broker, prints both and their ``/metrics``
    URLs (which answer), and SIGTERM stops both."""
    with subprocess.Popen(
        [sys.executable, "-m", "ariane", "dev", "--data-dir", str(tmp_path), "--namesrv-port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    ) as proc:
        try:
            assert proc.stdout is not None
            ends = json.loads(proc.stdout.readline())
            ports = [int(ends[k].rpartition(":")[2]) for k in ("namesrv", "broker")]
            assert all(_listening(p) for p in ports)
            for key, series in [
                ("namesrv_metrics", "ariane_namesrv_topics"),
                ("broker_metrics", "rocketmq_messages_in_total"),
            ]:
                with urllib.request.urlopen(ends[key], timeout=DEADLINE_S) as answer:
                    assert series in answer.read().decode()
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=DEADLINE_S) == 0
            assert not any(_listening(p) for p in ports)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=DEADLINE_S)


def test_admin_round_trip_sends_and_receives_one_message(tmp_path: pathlib.Path) -> None:
    """``ariane admin message round-trip`` (the chart's helm test) passes against real
    processes and fails with exit 1 on a topic that does not exist."""
    with dev.dev_cluster(tmp_path, namesrv_port=0) as ends:
        admin = [sys.executable, "-m", "ariane", "admin", "--endpoints", ends.namesrv]
        created = subprocess.run(
            [*admin, "topic", "create", "smoke", "--queues", "1"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert created.returncode == 0, created.stderr
        trip = subprocess.run(
            [*admin, "--json", "message", "round-trip", "--topic", "smoke"],
            capture_output=True,
            text=True,
            timeout=90,
            check=False,
        )
        assert trip.returncode == 0, trip.stderr
        (row,) = json.loads(trip.stdout)
        assert row["topic"] == "smoke" and len(row["message_id"]) == 34
        missing = subprocess.run(
            [*admin, "message", "round-trip", "--topic", "nowhere", "--wait-s", "2"],
            capture_output=True,
            text=True,
            timeout=90,
            check=False,
        )
        assert missing.returncode == 1
        assert "TOPIC_NOT_FOUND" in missing.stderr


def _routed(namesrv: str, topic: str) -> bool:
    try:
        answer = asyncio.run(_query_route(namesrv, topic))
    except grpc.aio.AioRpcError:
        return False
    return codes.code_of(answer.status) == errors.Code.OK


@pytest.mark.solo
def test_a_restarted_name_server_routes_the_broker_again_within_seconds(
    tmp_path: pathlib.Path,
) -> None:
    """After the name server is SIGKILLed and restarted on the same port, a route query for the
    broker's topic succeeds within 8 s, far less than the 30 s registration period."""
    port = dev.free_port()
    addr = f"127.0.0.1:{port}"
    namesrv_args = ["namesrv", "--listen", addr]
    namesrv = _spawn(namesrv_args, tmp_path / "namesrv.log")
    broker: subprocess.Popen[bytes] | None = None
    try:
        dev.wait_until_listening("127.0.0.1", port, process=namesrv, timeout_s=DEADLINE_S)
        broker_port = dev.free_port()
        broker = _broker(tmp_path, [addr], broker_port)
        _poll(lambda: _registered(addr), "the first registration")
        asyncio.run(_admin_create_topic(f"127.0.0.1:{broker_port}", "comes-back"))
        _poll(lambda: _routed(addr, "comes-back"), "the topic's route")
        namesrv.kill()  # SIGKILL by PID: the name server forgets every broker
        namesrv.wait(timeout=DEADLINE_S)
        namesrv = _spawn(namesrv_args, tmp_path / "namesrv.log")
        dev.wait_until_listening("127.0.0.1", port, process=namesrv, timeout_s=DEADLINE_S)
        restarted = time.monotonic()
        while not _routed(addr, "comes-back"):
            assert time.monotonic() - restarted < 8.0, "no route 8 s after the restart"
            time.sleep(0.1)  # polling the route with a deadline
    finally:
        if broker is not None:
            dev.stop_process(broker)
        dev.stop_process(namesrv)


def test_registration_retries_back_off_to_at_most_3_s() -> None:
    """Failed registrations are retried after 0.5, 1, 2, then at most 3 s, never longer."""
    waits = [registration.retry_backoff_s(n) for n in range(1, 200)]
    assert waits[:5] == [0.5, 1.0, 2.0, 3.0, 3.0]
    assert max(waits) == 3.0


def test_free_ports_are_bindable_distinct_and_below_the_ephemeral_range() -> None:
    """``dev.free_port`` stays out of the range outgoing connections draw their local ports
    from (so none can take it before the server binds), never hands out a port twice, and each
    port binds on 127.0.0.1 right away."""
    low = int(pathlib.Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    ports = [dev.free_port() for _ in range(200)]
    assert len(set(ports)) == len(ports)
    assert all(dev.FREE_PORT_FLOOR <= port < low for port in ports)
    for port in ports[:20]:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))
