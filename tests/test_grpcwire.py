"""ariane.grpcwire turns errors into statuses, converts routes, reads headers and never crashes."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import relay_testing
from ariane.common import errors, ids, message
from ariane.grpcwire import (
    channel_pool,
    codes,
    convert,
    guard,
    metadata,
    pb,
    recall,
    registry_client,
    rpc,
    server,
)

V2 = pb.v2


def test_statuses_carry_codes_and_errors_round_trip() -> None:
    """An error becomes its code's status, and the status raises the same error class back."""
    status = codes.from_error(errors.TopicNotFoundError("no topic 'x'"))
    assert (status.code, status.message) == (40402, "no topic 'x'")
    with pytest.raises(errors.TopicNotFoundError, match="no topic"):
        codes.raise_for_status(status)
    codes.raise_for_status(codes.ok())
    codes.raise_for_status(codes.status(errors.Code.MULTIPLE_RESULTS))
    with pytest.raises(errors.ArianeError, match="illegal"):
        codes.raise_for_status(V2.Status())
    with pytest.raises(ValueError, match="never a valid answer"):
        codes.status(errors.Code.CODE_UNSPECIFIED)
    assert codes.not_implemented("Telemetry").code == 50100


def test_combined_status_is_the_shared_code_or_multiple_results() -> None:
    """As the Java proxy answers SendMessage/AckMessage: one code, else MULTIPLE_RESULTS."""
    not_found = codes.status(errors.Code.TOPIC_NOT_FOUND, "gone")
    assert codes.code_of(codes.combine([])) == errors.Code.OK
    assert codes.code_of(codes.combine([codes.ok(), codes.ok()])) == errors.Code.OK
    assert codes.combine([not_found, not_found]) == not_found
    assert codes.code_of(codes.combine([codes.ok(), not_found])) == errors.Code.MULTIPLE_RESULTS


@pytest.mark.parametrize(
    ("perm", "read", "write", "expected"),
    [
        (6, 4, 4, ["READ_WRITE"] * 4),
        (6, 4, 2, ["READ_WRITE", "READ_WRITE", "READ", "READ"]),
        (6, 1, 3, ["READ_WRITE", "WRITE", "WRITE"]),
        (4, 2, 2, ["READ", "READ"]),  # write permission wiped (draining)
        (2, 2, 2, ["WRITE", "WRITE"]),
        (0, 2, 1, ["NONE", "NONE"]),
        (6, 0, 0, []),
    ],
)
def test_queue_permissions_follow_perm_bits_and_queue_counts(
    perm: int, read: int, write: int, expected: list[str]
) -> None:
    """One MessageQueue per queue id up to max(read, write), each with its own permission."""
    broker = convert.broker(ids.BrokerName("b"), ids.BrokerId(0), "10.0.0.7:8081")
    queues = convert.message_queues(
        topic=convert.resource("t", "ns"),
        broker=broker,
        read_queue_nums=read,
        write_queue_nums=write,
        perm=perm,
        kind=message.MessageType.NORMAL,
    )
    assert [V2.Permission.Name(q.permission) for q in queues] == expected
    assert [q.id for q in queues] == list(range(len(expected)))
    for queue in queues:
        assert (queue.topic.name, queue.topic.resource_namespace) == ("t", "ns")
        assert queue.broker == broker
        assert convert.message_queue_value(queue).broker_name == "b"


def test_accepted_types_are_never_empty_and_mixed_accepts_all_four() -> None:
    """Each topic type gives its v2 type; MIXED gives NORMAL, FIFO, DELAY and TRANSACTION."""
    for kind in message.MessageType:
        assert convert.accept_message_types(kind)
        assert convert.message_type_of(convert.topic_message_type(kind)) is kind
    mixed = convert.accept_message_types(message.MessageType.MIXED)
    assert [V2.MessageType.Name(t) for t in mixed] == ["NORMAL", "FIFO", "DELAY", "TRANSACTION"]
    with pytest.raises(ValueError, match="not specified"):
        convert.message_type_of(pb.topic.TopicMessageType.TOPIC_MESSAGE_TYPE_UNSPECIFIED)


def test_endpoints_use_the_scheme_the_clients_would_pick() -> None:
    """IPv4 and IPv6 literals get their schemes, names get DOMAIN_NAME, one address each."""
    cases = {
        "10.1.2.3:8081": ("IPv4", "10.1.2.3", 8081),
        "[::1]:8081": ("IPv6", "::1", 8081),
        "broker-a-0.broker-a.ns.svc:8081": ("DOMAIN_NAME", "broker-a-0.broker-a.ns.svc", 8081),
    }
    for text, (scheme, host, port) in cases.items():
        value = convert.endpoints(text)
        assert V2.AddressScheme.Name(value.scheme) == scheme
        assert [(a.host, a.port) for a in value.addresses] == [(host, port)]
        assert convert.first_address(value) == text
    for bad in ["no-port", ":80", "host:0", "host:70000", "host:x"]:
        with pytest.raises(ValueError):
            convert.endpoints(bad)
    with pytest.raises(ValueError, match="no address"):
        convert.first_address(V2.Endpoints())


class FakeContext:
    """Just enough of a servicer context for ``metadata``."""

    def __init__(self, *pairs: tuple[str, str | bytes]) -> None:
        self._pairs = pairs

    def invocation_metadata(self) -> tuple[tuple[str, str | bytes], ...]:
        return self._pairs


def test_headers_are_read_and_a_missing_client_id_is_refused() -> None:
    """x-mq-* headers are read; no client id → CLIENT_ID_REQUIRED; oversize → 43100."""
    context = FakeContext(
        ("x-mq-client-id", "host@1@0@abc"),
        ("x-mq-language", "PYTHON"),
        ("x-mq-namespace", ""),
        ("authorization", "MQv2-HMAC-SHA1 Credential=, SignedHeaders=x-mq-date-time, Signature=0"),
        ("trace-bin", b"\x00"),
    )
    read = metadata.read(context)
    assert (read.client_id, read.language, read.namespace) == ("host@1@0@abc", "PYTHON", "")
    assert metadata.require_client_id(context) == "host@1@0@abc"
    assert [k for k, _ in metadata.forwardable(context)] == [
        "x-mq-client-id",
        "x-mq-language",
        "x-mq-namespace",
        "authorization",
    ]
    for missing in [FakeContext(), FakeContext(("x-mq-client-id", ""))]:
        with pytest.raises(errors.ClientIdRequiredError):
            metadata.require_client_id(missing)
    huge = FakeContext(("x-mq-client-id", "x" * (metadata.HEADER_CHARS_MAX + 1)))
    with pytest.raises(errors.RequestHeaderFieldsTooLargeError) as raised:
        metadata.read(huge)
    assert codes.from_error(raised.value).code == 43100


words = st.text(alphabet="abcXYZ019_-%", min_size=1, max_size=40)


@settings(max_examples=100, deadline=None)
@given(topic=words, broker=words, message_id=words, timestamp=st.integers(0, 2**63 - 1))
def test_recall_handles_round_trip(
    topic: str, broker: str, message_id: str, timestamp: int
) -> None:
    """decode(encode(h)) == h for every handle of legal names."""
    handle = recall.RecallHandle(
        ids.TopicName(topic),
        ids.BrokerName(broker),
        ids.TimestampMs(timestamp),
        ids.MessageId(message_id),
    )
    text = recall.encode(handle)
    assert recall.decode(text) == handle
    assert recall.decode(text.rstrip("=")) == handle


def test_malformed_recall_handles_are_bad_requests() -> None:
    """Garbage, wrong versions, missing fields and oversize handles are refused."""
    import base64

    def b64(text: str) -> str:
        return base64.urlsafe_b64encode(text.encode()).decode()

    for bad in ["", "!!!", b64("v2 t b 1 id"), b64("v1 t b x id"), b64("v1 t b 1"), "A" * 2000]:
        with pytest.raises(errors.BadRequestError):
            recall.decode(bad)
    with pytest.raises(ValueError, match="non-empty words"):
        recall.encode(
            recall.RecallHandle(
                ids.TopicName("t"), ids.BrokerName("a b"), ids.TimestampMs(1), ids.MessageId("m")
            )
        )


def test_server_options_raise_the_receive_limit_and_permit_keepalive() -> None:
    """130 MiB receive limit, pings without calls permitted, bounded streams; bad values refused."""
    options = dict(server.grpc_options(server.ServerSettings()))
    assert options["grpc.max_receive_message_length"] == 130 * 1024 * 1024
    assert options["grpc.keepalive_permit_without_calls"] == 1
    assert options["grpc.http2.min_ping_interval_without_data_ms"] <= 30_000
    assert options["grpc.max_concurrent_streams"] == 1024
    with pytest.raises(ValueError, match="receive_message_bytes_max"):
        server.ServerSettings(receive_message_bytes_max=4 * 1024 * 1024)
    assert server.parse_listen("0.0.0.0:9876") == ("0.0.0.0", 9876)
    assert server.parse_listen("[::1]:0") == ("::1", 0)
    for bad in ["9876", "host:", "host:99999"]:
        with pytest.raises(ValueError, match="HOST:PORT"):
            server.parse_listen(bad)


class Misbehaving:
    """A MessagingService implementation that fails in every way a servicer can."""

    async def query_route(self, request: Any, context: Any) -> Any:
        raise errors.TopicNotFoundError(f"no topic {request.topic.name!r}")

    async def heartbeat(self, request: Any, context: Any) -> Any:
        raise RuntimeError("a bug")

    async def send_message(self, request: Any, context: Any) -> Any:
        return pb.v2_service.SendMessageResponse()  # forgot the status: a bug

    async def notify_client_termination(self, request: Any, context: Any) -> Any:
        return pb.v2_service.NotifyClientTerminationResponse(status=codes.ok())

    async def receive_message(self, request: Any, context: Any) -> AsyncIterator[Any]:
        yield pb.v2_service.ReceiveMessageResponse(status=codes.ok())
        raise errors.InvalidReceiptHandleError("stale")


async def with_server(
    implementation: object,
    body: Callable[[grpc.aio.Channel], Awaitable[None]],
    *,
    relayed: bool = False,
) -> None:
    """Serve ``implementation`` on a free loopback port and run ``body`` against it; with
    ``relayed``, through a front-end worker's relay instead of in the serving process."""
    if relayed:
        async with relay_testing.relayed_server(implementation=implementation) as served:
            await body(served[0])
        return
    grpc_server = server.build(
        server.ServerSettings(),
        [guard.service_handler(pb.MESSAGING_SERVICE, implementation)],
    )
    port = server.bind(grpc_server, "127.0.0.1:0")
    await grpc_server.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            await body(channel)
    finally:
        await grpc_server.stop(None)


async def call(channel: grpc.aio.Channel, rpc_name: str, request: Any) -> Any:
    method = pb.MESSAGING_SERVICE.methods_by_name[rpc_name]
    response_type = pb.message_class(method.output_type)
    return await rpc.unary_call(
        channel, pb.MESSAGING_SERVICE, rpc_name, request, response_type, timeout_s=10
    )


@pytest.mark.parametrize("relayed", [False, True], ids=["in-process", "relayed"])
def test_every_failure_of_a_servicer_becomes_a_status(relayed: bool) -> None:
    """Errors, bugs, missing statuses and missing RPCs all answer a non-zero status, served in
    process or forwarded by a front-end worker's relay alike."""

    async def body(channel: grpc.aio.Channel) -> None:
        svc = pb.v2_service
        topic = convert.resource("orders")
        answer = await call(channel, "QueryRoute", svc.QueryRouteRequest(topic=topic))
        assert (answer.status.code, answer.status.message) == (40402, "no topic 'orders'")
        assert (await call(channel, "Heartbeat", svc.HeartbeatRequest())).status.code == 50000
        assert (await call(channel, "SendMessage", svc.SendMessageRequest())).status.code == 50000
        ok = await call(channel, "NotifyClientTermination", svc.NotifyClientTerminationRequest())
        assert ok.status.code == 20000
        missing = await call(channel, "EndTransaction", svc.EndTransactionRequest())
        assert missing.status.code == 50100
        receive = channel.unary_stream(
            rpc.method_path(pb.MESSAGING_SERVICE, "ReceiveMessage"),
            request_serializer=svc.ReceiveMessageRequest.SerializeToString,
            response_deserializer=svc.ReceiveMessageResponse.FromString,
        )
        stream = [r.status.code async for r in receive(svc.ReceiveMessageRequest(), timeout=10)]
        assert stream == [20000, 40013]
        telemetry = channel.stream_stream(
            rpc.method_path(pb.MESSAGING_SERVICE, "Telemetry"),
            request_serializer=svc.TelemetryCommand.SerializeToString,
            response_deserializer=svc.TelemetryCommand.FromString,
        )
        commands = [c async for c in telemetry(iter([svc.TelemetryCommand()]), timeout=10)]
        assert [c.status.code for c in commands] == [50100]

    asyncio.run(with_server(Misbehaving(), body, relayed=relayed))


def test_snake_case_names_match_the_rpcs() -> None:
    """RPC names map to the implementation's method names."""
    assert guard.snake_case("QueryRoute") == "query_route"
    assert guard.snake_case("ForwardMessageToDeadLetterQueue") == (
        "forward_message_to_dead_letter_queue"
    )


def test_query_route_lists_only_groups_with_a_master() -> None:
    """A group whose master is gone contributes no queues; slaves never appear in routes."""
    found = pb.registry.GetTopicRouteResponse(
        status=codes.ok(),
        queue_datas=[
            pb.registry.QueueData(
                broker_name=name,
                read_queue_nums=1,
                write_queue_nums=1,
                perm=6,
                message_type=pb.topic.TopicMessageType.TOPIC_MESSAGE_TYPE_FIFO,
            )
            for name in ["with-master", "slave-only"]
        ],
        broker_groups=[
            pb.registry.BrokerGroup(
                broker_name="with-master",
                members=[
                    pb.registry.BrokerMember(broker_id=0, client_endpoint=convert.address("m", 1)),
                    pb.registry.BrokerMember(broker_id=1, client_endpoint=convert.address("s", 1)),
                ],
            ),
            pb.registry.BrokerGroup(
                broker_name="slave-only",
                members=[
                    pb.registry.BrokerMember(broker_id=1, client_endpoint=convert.address("x", 1))
                ],
            ),
        ],
    )
    (queue,) = convert.query_route_queues(found, convert.resource("t"))
    assert (queue.broker.name, queue.broker.id, convert.first_address(queue.broker.endpoints)) == (
        "with-master",
        0,
        "m:1",
    )
    assert [V2.MessageType.Name(t) for t in queue.accept_message_types] == ["FIFO"]


def test_pooled_channels_wait_for_a_slow_handshake() -> None:
    """A server that takes 600 ms to answer a new connection (a busy process on a loaded
    machine; here a splice that connects onwards only after that delay) still serves the first
    call of a pooled channel. gRPC reads ``grpc.min_reconnect_backoff_ms`` as the least time a
    connection attempt gets; at 100 ms such calls failed with "timed out before receiving
    SETTINGS frame"."""

    async def cluster_info(_request: bytes, _context: grpc.aio.ServicerContext[Any, Any]) -> bytes:
        return pb.registry.GetClusterInfoResponse().SerializeToString()

    async def main() -> None:
        handler = grpc.method_handlers_generic_handler(
            pb.REGISTRY_SERVICE.full_name,
            {"GetClusterInfo": grpc.unary_unary_rpc_method_handler(cluster_info)},
        )
        backend = grpc.aio.server()
        backend.add_generic_rpc_handlers((handler,))
        backend_port = backend.add_insecure_port("127.0.0.1:0")
        await backend.start()

        async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            with contextlib.suppress(ConnectionError):
                while data := await reader.read(65536):
                    writer.write(data)
                    await writer.drain()
            writer.close()

        async def slow_front(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await asyncio.sleep(0.6)
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", backend_port)
            await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

        front = await asyncio.start_server(slow_front, "127.0.0.1", 0)
        front_port = front.sockets[0].getsockname()[1]
        pool = channel_pool.ChannelPool(channels_max=1)
        try:
            channel = await pool.get(f"127.0.0.1:{front_port}")
            client = registry_client.RegistryClient(channel, timeout_s=10.0)
            assert await client.get_cluster_info() == pb.registry.GetClusterInfoResponse()
        finally:
            await pool.close()
            front.close()
            await backend.stop(None)

    asyncio.run(main())
