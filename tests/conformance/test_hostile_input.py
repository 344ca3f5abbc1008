"""Hostile requests against real ``ariane namesrv`` + ``ariane broker`` processes (issue 9).

Each test proves one property a user or an attacker can observe from outside: a refused
SendMessage request stores nothing; out-of-range fields and poison GZIP bodies get a
BAD_REQUEST-family code; malformed protobuf gets gRPC INVALID_ARGUMENT with a bounded number of
one-line warnings; refused RPCs leave one log line per RPC kind and client. The broker runs with
its default front-end workers, so broker calls take the relay path; the name server serves
in-process (``grpcwire.guard``).
"""

from __future__ import annotations

import asyncio
import gzip
import pathlib
import random
import time
import zlib
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import grpc
import pytest
from google.protobuf import message as pb_message

from ariane.common import errors
from ariane.grpcwire import codes, messages, pb, rpc
from conformance.conftest import Cluster

pytestmark = pytest.mark.slow

M = TypeVar("M", bound=pb_message.Message)
MIB = 1024 * 1024
CHANNEL_OPTIONS = [
    ("grpc.max_send_message_length", 64 * MIB),
    ("grpc.max_receive_message_length", 64 * MIB),
]
LOG_DEADLINE_S = 10.0


def _metadata(client: str) -> tuple[tuple[str, str], ...]:
    return (("x-mq-client-id", client),)


@pytest.fixture(scope="module")
def topics_ready(cluster: Cluster) -> Iterator[Cluster]:
    """One-queue NORMAL topics, so a queue offset shows whether anything was stored."""
    for name in ("atomic", "poison", "fields", "zipped"):
        cluster.admin("topic", "create", name, "--queues", "1", "--type", "NORMAL")
    cluster.admin("topic", "create", "later", "--queues", "1", "--type", "DELAY")
    yield cluster


def _call(
    address: str,
    rpc_name: str,
    request: pb_message.Message,
    response_type: type[M],
    client: str,
    service: pb.ServiceDescriptor = pb.MESSAGING_SERVICE,
) -> M:
    async def go() -> M:
        async with grpc.aio.insecure_channel(address, options=CHANNEL_OPTIONS) as channel:
            return await rpc.unary_call(
                channel,
                service,
                rpc_name,
                request,
                response_type,
                timeout_s=60,
                metadata=_metadata(client),
            )

    return asyncio.run(go())


def _message(topic: str, body: bytes = b"x", **system: Any) -> pb.v2.Message:
    props = pb.v2.SystemProperties(
        message_id=system.pop("message_id", "01ABCDEF"),
        message_type=system.pop("message_type", pb.v2.MessageType.NORMAL),
        born_timestamp=system.pop("born_timestamp", messages.timestamp(1_700_000_000_000)),
        born_host="test-host",
        body_encoding=system.pop("body_encoding", pb.v2.Encoding.IDENTITY),
        **system,
    )
    return pb.v2.Message(topic=pb.v2.Resource(name=topic), body=body, system_properties=props)


def _send(
    cluster: Cluster, *batch: pb.v2.Message, client: str = "hostile@1"
) -> pb.v2_service.SendMessageResponse:
    request = pb.v2_service.SendMessageRequest(messages=list(batch))
    return _call(cluster.broker, "SendMessage", request, pb.v2_service.SendMessageResponse, client)


def _received_bodies(cluster: Cluster, topic: str, group: str) -> list[bytes]:
    async def go() -> list[bytes]:
        queue = pb.v2.MessageQueue(topic=pb.v2.Resource(name=topic), id=0)
        request = pb.v2_service.ReceiveMessageRequest(
            group=pb.v2.Resource(name=group),
            message_queue=queue,
            filter_expression=pb.v2.FilterExpression(type=pb.v2.FilterType.TAG, expression="*"),
            batch_size=32,
            invisible_duration=messages.duration(60_000),
            long_polling_timeout=messages.duration(5_000),
        )
        async with grpc.aio.insecure_channel(cluster.broker, options=CHANNEL_OPTIONS) as channel:
            call = channel.unary_stream(
                rpc.method_path(pb.MESSAGING_SERVICE, "ReceiveMessage"),
                request_serializer=pb.v2_service.ReceiveMessageRequest.SerializeToString,
                response_deserializer=pb.v2_service.ReceiveMessageResponse.FromString,
            )
            items = [i async for i in call(request, timeout=30, metadata=_metadata("rx@1"))]
        return [i.message.body for i in items if i.WhichOneof("content") == "message"]

    return asyncio.run(go())


def test_a_request_with_one_bad_message_after_8_mib_of_good_ones_stores_nothing(
    topics_ready: Cluster,
) -> None:
    """Three 3 MiB messages then one with born_timestamp seconds = -2^62: the answer is
    BAD_REQUEST, the queue offset is not consumed (the next message gets offset 0) and only
    that next message can be received."""
    rng = random.Random(9)
    good = [_message("atomic", rng.randbytes(3 * MIB), message_id=f"GOOD{i}") for i in range(3)]
    bad = _message("atomic", b"bad", message_id="BAD", born_timestamp=messages.timestamp(0))
    bad.system_properties.born_timestamp.seconds = -(2**62)
    refused = _send(topics_ready, *good, bad)
    assert codes.code_of(refused.status) == errors.Code.BAD_REQUEST, refused.status.message
    assert "message 4 of 4" in refused.status.message
    assert list(refused.entries) == []
    after = _send(topics_ready, _message("atomic", b"after", message_id="AFTER"))
    assert codes.code_of(after.status) == errors.Code.OK, after.status.message
    assert [e.offset for e in after.entries] == [0]
    assert _received_bodies(topics_ready, "atomic", "atomic-reader") == [b"after"]


def _bomb() -> bytes:
    return gzip.compress(b"\0" * (4 * MIB + 1), compresslevel=9)


def _field_cases() -> list[tuple[str, Callable[[], pb.v2.Message], int]]:
    def with_seconds(field: str, seconds: int, nanos: int = 0) -> Callable[[], pb.v2.Message]:
        def make() -> pb.v2.Message:
            msg = _message("fields")
            getattr(msg.system_properties, field).seconds = seconds
            getattr(msg.system_properties, field).nanos = nanos
            return msg

        return make

    def with_user(key: str, value: str) -> Callable[[], pb.v2.Message]:
        def make() -> pb.v2.Message:
            msg = _message("fields")
            msg.user_properties[key] = value
            return msg

        return make

    bad = errors.Code.BAD_REQUEST
    gzip_flag = pb.v2.Encoding.GZIP
    return [
        ("born-seconds-minus-2^62", with_seconds("born_timestamp", -(2**62)), bad),
        ("born-seconds-2^62", with_seconds("born_timestamp", 2**62), bad),
        ("born-nanos-negative", with_seconds("born_timestamp", 1_700_000_000, -1), bad),
        (
            "delivery-seconds-2^62",
            with_seconds("delivery_timestamp", 2**62),
            errors.Code.ILLEGAL_DELIVERY_TIME,
        ),
        ("message-type-99", lambda: _message("fields", message_type=99), bad),
        ("body-encoding-7", lambda: _message("fields", body_encoding=7), bad),
        ("separator-in-property-value", with_user("k", "a\x01b"), bad),
        (
            "keys-over-32-KiB",
            lambda: _message("fields", keys=["k" * 20_000, "j" * 20_000]),
            errors.Code.MESSAGE_PROPERTIES_TOO_LARGE,
        ),
        (
            "gzip-flag-not-gzip",
            lambda: _message("fields", b"not gzip", body_encoding=gzip_flag),
            errors.Code.MESSAGE_CORRUPTED,
        ),
        (
            "gzip-truncated",
            lambda: _message("fields", gzip.compress(b"x")[:-3], body_encoding=gzip_flag),
            errors.Code.MESSAGE_CORRUPTED,
        ),
        (
            "gzip-bomb-over-4-MiB",
            lambda: _message("fields", _bomb(), body_encoding=gzip_flag),
            errors.Code.MESSAGE_BODY_TOO_LARGE,
        ),
    ]


def test_out_of_range_fields_get_a_bad_request_family_code(topics_ready: Cluster) -> None:
    """Each out-of-range field (after a valid message) refuses its request with its code and
    no entries, and nothing of any of them is stored: a valid send then gets offset 0."""
    for name, make, code in _field_cases():
        response = _send(topics_ready, _message("fields", b"first", message_id="FIRST"), make())
        assert codes.code_of(response.status) == code, (name, response.status.message)
        assert list(response.entries) == [], name
    response = _send(topics_ready, _message("fields", b"only", message_id="ONLY"))
    assert [e.offset for e in response.entries] == [0], response.status.message


def test_valid_gzip_and_zlib_bodies_are_accepted(topics_ready: Cluster) -> None:
    """Bodies that the official clients can inflate (gzip, two gzip members, zlib) are OK."""
    bodies = [
        gzip.compress(b"one"),
        gzip.compress(b"two") + gzip.compress(b"three"),
        zlib.compress(b"four"),
    ]
    batch = [
        _message("zipped", body, message_id=f"Z{i}", body_encoding=pb.v2.Encoding.GZIP)
        for i, body in enumerate(bodies)
    ]
    response = _send(topics_ready, *batch)
    assert codes.code_of(response.status) == errors.Code.OK, response.status.message


def test_a_poison_gzip_body_is_refused_and_the_official_consumer_gets_the_rest(
    topics_ready: Cluster,
) -> None:
    """A body flagged GZIP that is not gzip is refused (MESSAGE_CORRUPTED), so the official
    SimpleConsumer (subprocess) receives every other message of the queue."""
    before = _send(topics_ready, _message("poison", b"before", message_id="BEFORE"))
    assert codes.code_of(before.status) == errors.Code.OK, before.status.message
    poison = _message("poison", b"not gzip at all", message_id="POISON", body_encoding=2)
    refused = _send(topics_ready, poison)
    assert codes.code_of(refused.status) == errors.Code.MESSAGE_CORRUPTED, refused.status.message
    _, sent = topics_ready.run_driver("produce", "--topic", "poison", "--count", "3")
    assert len([e for e in sent if e["event"] == "sent"]) == 3, sent
    code, got = topics_ready.run_driver(
        "simple-consume",
        "--topic",
        "poison",
        "--group",
        "poison-reader",
        "--count",
        "4",
        "--deadline-s",
        "30",
    )
    received = [e for e in got if e["event"] == "received"]
    assert code == 0 and len(received) == 4, got


def _malformed_bodies(request_class: type[pb_message.Message], count: int) -> list[bytes]:
    rng = random.Random(f"{request_class.__name__}-{count}")
    found: list[bytes] = []
    while len(found) < count:
        body = rng.randbytes(rng.randrange(1, 64))
        try:
            request_class.FromString(body)
        except pb_message.DecodeError:
            found.append(body)
    return found


async def _fuzz(address: str, rpc_path: str, bodies: list[bytes], streaming: bool) -> set[Any]:
    async with grpc.aio.insecure_channel(address) as channel:
        if streaming:
            stream: Any = channel.unary_stream(rpc_path)

            async def one(body: bytes) -> grpc.StatusCode:
                call = stream(body, timeout=30, metadata=_metadata("fuzz@1"))
                try:
                    async for _ in call:
                        pass
                except grpc.aio.AioRpcError as exc:
                    return exc.code()
                return grpc.StatusCode.OK

        else:
            unary: Any = channel.unary_unary(rpc_path)

            async def one(body: bytes) -> grpc.StatusCode:
                try:
                    await unary(body, timeout=30, metadata=_metadata("fuzz@1"))
                except grpc.aio.AioRpcError as exc:
                    return exc.code()
                return grpc.StatusCode.OK

        answers: set[Any] = set()
        for start in range(0, len(bodies), 100):
            answers.update(await asyncio.gather(*(one(b) for b in bodies[start : start + 100])))
        return answers


def _log_text(cluster: Cluster, name: str) -> str:
    return (cluster.data_dir / name).read_text(errors="replace")


def test_malformed_protobuf_answers_invalid_argument_with_bounded_warnings(
    topics_ready: Cluster,
) -> None:
    """2,400 unparsable bodies to four broker RPCs and 600 to the name server all answer
    INVALID_ARGUMENT; each log holds at most one warning line per RPC and no traceback."""
    targets = [
        (topics_ready.broker, "SendMessage", pb.v2_service.SendMessageRequest, False),
        (topics_ready.broker, "QueryRoute", pb.v2_service.QueryRouteRequest, False),
        (topics_ready.broker, "AckMessage", pb.v2_service.AckMessageRequest, False),
        (topics_ready.broker, "ReceiveMessage", pb.v2_service.ReceiveMessageRequest, True),
        (topics_ready.namesrv, "QueryRoute", pb.v2_service.QueryRouteRequest, False),
    ]
    for address, name, request_class, streaming in targets:
        count = 600
        path = rpc.method_path(pb.MESSAGING_SERVICE, name)
        bodies = _malformed_bodies(request_class, count)
        answers = asyncio.run(_fuzz(address, path, bodies, streaming))
        assert answers == {grpc.StatusCode.INVALID_ARGUMENT}, (name, answers)
    broker_log = _log_text(topics_ready, "broker.log")
    namesrv_log = _log_text(topics_ready, "namesrv.log")
    assert "Traceback" not in broker_log and "Traceback" not in namesrv_log
    broker_lines = [line for line in broker_log.splitlines() if "malformed request" in line]
    namesrv_lines = [line for line in namesrv_log.splitlines() if "malformed request" in line]
    assert 1 <= len(broker_lines) <= 4, broker_lines
    assert len(namesrv_lines) == 1, namesrv_lines


def _lines_with(path: pathlib.Path, *needles: str, at_least: int) -> list[str]:
    deadline = time.monotonic() + LOG_DEADLINE_S
    while True:
        lines = [
            line
            for line in path.read_text(errors="replace").splitlines()
            if all(n in line for n in needles)
        ]
        if len(lines) >= at_least or time.monotonic() > deadline:
            return lines
        time.sleep(0.05)  # polling a log file with a deadline, not waiting for an event


def test_refused_rpcs_leave_one_line_per_kind_and_client(topics_ready: Cluster) -> None:
    """30 UNSUPPORTED calls (the v2 Admin's DescribeGroupAccumulation of one lite topic: every
    message type is served on SendMessage now) and 30 NOT_IMPLEMENTED calls from each of two
    clients leave exactly one line per (RPC, client) in the broker log; the name server
    likewise. (The broker answers an EndTransaction without a transaction id
    INVALID_TRANSACTION_ID, which is not logged.)"""
    unsupported = pb.v2_admin.DescribeGroupAccumulationRequest(
        group=pb.v2.Resource(name="readers"), lite_topic="session-1"
    )
    end = pb.v2_service.EndTransactionRequest(topic=pb.v2.Resource(name="atomic"))
    for client in ("refused-a@1", "refused-b@1"):
        for _ in range(30):
            sent = _call(
                topics_ready.broker,
                "DescribeGroupAccumulation",
                unsupported,
                pb.v2_admin.DescribeGroupAccumulationResponse,
                client,
                service=pb.V2_ADMIN_SERVICE,
            )
            assert codes.code_of(sent.status) == errors.Code.UNSUPPORTED
            ended = _call(
                topics_ready.broker,
                "EndTransaction",
                end,
                pb.v2_service.EndTransactionResponse,
                client,
            )
            assert codes.code_of(ended.status) == errors.Code.INVALID_TRANSACTION_ID
            on_namesrv = _call(
                topics_ready.namesrv,
                "EndTransaction",
                end,
                pb.v2_service.EndTransactionResponse,
                client,
            )
            assert codes.code_of(on_namesrv.status) == errors.Code.NOT_IMPLEMENTED
    broker_log = topics_ready.data_dir / "broker.log"
    namesrv_log = topics_ready.data_dir / "namesrv.log"
    for client in ("refused-a@1", "refused-b@1"):
        sends = _lines_with(
            broker_log, "DescribeGroupAccumulation refused", client, "UNSUPPORTED", at_least=1
        )
        names = _lines_with(namesrv_log, "EndTransaction refused", client, at_least=1)
        assert (len(sends), len(names)) == (1, 1), (sends, names)
        assert not _lines_with(broker_log, "EndTransaction refused", client, at_least=0)
