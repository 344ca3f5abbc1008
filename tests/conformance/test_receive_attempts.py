"""A ReceiveMessage retried with the same ``attempt_id`` answers with the same messages and
receipt handles instead of popping more (RocketMQ's POP ``attemptId``), against a real broker
process through our own generated stubs: the official clients resend an attempt only after a
network error, which a test cannot provoke on demand."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
import pytest

from ariane.common import errors
from ariane.grpcwire import codes, messages, pb, rpc
from conformance.conftest import Cluster

pytestmark = pytest.mark.slow

CLIENT = (("x-mq-client-id", "attempt-test@1"),)
TOPIC = "attempts"
GROUP = "retrying"


def _unary(cluster: Cluster, name: str, request: Any, response_type: type[Any]) -> Any:
    async def go() -> Any:
        async with grpc.aio.insecure_channel(cluster.broker) as channel:
            return await rpc.unary_call(
                channel,
                pb.MESSAGING_SERVICE,
                name,
                request,
                response_type,
                timeout_s=30,
                metadata=CLIENT,
            )

    return asyncio.run(go())


def _receive(
    cluster: Cluster, attempt_id: str, batch_size: int, *, topic: str = TOPIC
) -> list[tuple[str, str]]:
    """(message id, receipt handle) of each message one ReceiveMessage answers with."""
    request = pb.v2_service.ReceiveMessageRequest(
        group=pb.v2.Resource(name=GROUP),
        message_queue=pb.v2.MessageQueue(topic=pb.v2.Resource(name=topic), id=-1),
        filter_expression=pb.v2.FilterExpression(type=pb.v2.FilterType.TAG, expression="*"),
        batch_size=batch_size,
        invisible_duration=messages.duration(60_000),
        long_polling_timeout=messages.duration(5_000),
        attempt_id=attempt_id,
    )

    async def go() -> list[Any]:
        async with grpc.aio.insecure_channel(cluster.broker) as channel:
            call = channel.unary_stream(
                rpc.method_path(pb.MESSAGING_SERVICE, "ReceiveMessage"),
                request_serializer=pb.v2_service.ReceiveMessageRequest.SerializeToString,
                response_deserializer=pb.v2_service.ReceiveMessageResponse.FromString,
            )
            return [item async for item in call(request, timeout=30, metadata=CLIENT)]

    items = asyncio.run(go())
    return [
        (i.message.system_properties.message_id, i.message.system_properties.receipt_handle)
        for i in items
        if i.WhichOneof("content") == "message"
    ]


def _send(cluster: Cluster, message_id: str, *, topic: str = TOPIC) -> None:
    props = pb.v2.SystemProperties(
        message_id=message_id,
        message_type=pb.v2.MessageType.NORMAL,
        born_timestamp=messages.timestamp(1_700_000_000_000),
        born_host="attempt-test",
        body_encoding=pb.v2.Encoding.IDENTITY,
    )
    msg = pb.v2.Message(topic=pb.v2.Resource(name=topic), body=b"x", system_properties=props)
    request = pb.v2_service.SendMessageRequest(messages=[msg])
    sent = _unary(cluster, "SendMessage", request, pb.v2_service.SendMessageResponse)
    assert codes.code_of(sent.status) == errors.Code.OK


def _ack(cluster: Cluster, message_id: str, handle: str, *, topic: str = TOPIC) -> int:
    request = pb.v2_service.AckMessageRequest(
        group=pb.v2.Resource(name=GROUP),
        topic=pb.v2.Resource(name=topic),
        entries=[pb.v2_service.AckMessageEntry(message_id=message_id, receipt_handle=handle)],
    )
    acked = _unary(cluster, "AckMessage", request, pb.v2_service.AckMessageResponse)
    return codes.code_of(acked.status)


def test_retried_attempt_gets_the_same_messages_and_handles(cluster: Cluster) -> None:
    """The retry of attempt A answers with A's two messages and handles (not the third one),
    a new attempt gets only the third, and the replayed handles ack; once one is acked the
    replay leaves it out."""
    cluster.admin("topic", "create", TOPIC, "--queues", "1", "--type", "NORMAL")
    for n in range(3):
        _send(cluster, f"01ATTEMPT{n}")
    first = _receive(cluster, "attempt-a", batch_size=2)
    assert len(first) == 2
    assert _receive(cluster, "attempt-a", batch_size=2) == first
    (third,) = _receive(cluster, "attempt-b", batch_size=2)
    assert third[0] not in {m for m, _ in first}
    assert _ack(cluster, *first[0]) == errors.Code.OK
    assert _receive(cluster, "attempt-a", batch_size=2) == first[1:]
    assert _ack(cluster, *first[1]) == errors.Code.OK
    assert _ack(cluster, *third) == errors.Code.OK


def test_a_retried_attempt_that_got_a_retry_copy_answers_with_that_copy(cluster: Cluster) -> None:
    """An attempt whose answer was a retry copy (attempt 2, from %RETRY%<group>_<topic>) is
    replayed with that copy's id and handle, not with what the consumed topic holds at the
    copy's queue offset; the replayed handle acks."""
    topic = "attempts-retry"
    cluster.admin("topic", "create", topic, "--queues", "1", "--type", "NORMAL")
    for message_id in ("01FILLER", "01RETRYME"):
        _send(cluster, message_id, topic=topic)
    filler, retried = _receive(cluster, "attempt-r1", batch_size=2, topic=topic)
    assert (filler[0], retried[0]) == ("01FILLER", "01RETRYME")
    assert _ack(cluster, *filler, topic=topic) == errors.Code.OK
    change = pb.v2_service.ChangeInvisibleDurationRequest(
        group=pb.v2.Resource(name=GROUP),
        topic=pb.v2.Resource(name=topic),
        receipt_handle=retried[1],
        invisible_duration=messages.duration(0),
        message_id=retried[0],
    )
    changed = _unary(
        cluster, "ChangeInvisibleDuration", change, pb.v2_service.ChangeInvisibleDurationResponse
    )
    assert codes.code_of(changed.status) == errors.Code.OK
    (copy,) = _receive(cluster, "attempt-r2", batch_size=1, topic=topic)  # expired: a copy
    assert copy[0] == "01RETRYME" and copy[1] != changed.receipt_handle
    assert _receive(cluster, "attempt-r2", batch_size=1, topic=topic) == [copy]
    assert _ack(cluster, *copy, topic=topic) == errors.Code.OK
