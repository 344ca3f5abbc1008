"""Every bad request gets the right RocketMQ ``Code`` from a real broker process, never a crash.

Calls go through our own generated stubs (``ariane.grpcwire.pb``) to the broker's endpoint, as a
misbehaving client would send them (grpc-v2.md §6.3 to §6.5).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any, TypeVar

import grpc
import pytest
from google.protobuf import message as pb_message

from ariane.common import errors
from ariane.grpcwire import codes, messages, pb, rpc
from conformance.conftest import Cluster

pytestmark = pytest.mark.slow

M = TypeVar("M", bound=pb_message.Message)
CLIENT = (("x-mq-client-id", "bad-input-test@1"),)
MIB = 1024 * 1024
CHANNEL_OPTIONS = [
    ("grpc.max_send_message_length", 64 * MIB),
    ("grpc.max_receive_message_length", 64 * MIB),
]


@pytest.fixture(scope="module")
def topics_ready(cluster: Cluster) -> Iterator[Cluster]:
    """A NORMAL and a FIFO topic on the broker."""
    cluster.admin("topic", "create", "plain", "--queues", "2", "--type", "NORMAL")
    cluster.admin("topic", "create", "ordered", "--queues", "2", "--type", "FIFO")
    yield cluster


def _call(
    cluster: Cluster,
    rpc_name: str,
    request: pb_message.Message,
    response_type: type[M],
    *,
    metadata: tuple[tuple[str, str], ...] = CLIENT,
) -> M:
    async def go() -> M:
        async with grpc.aio.insecure_channel(cluster.broker, options=CHANNEL_OPTIONS) as channel:
            return await rpc.unary_call(
                channel,
                pb.MESSAGING_SERVICE,
                rpc_name,
                request,
                response_type,
                timeout_s=30,
                metadata=metadata,
            )

    return asyncio.run(go())


def _message(topic: str, body: bytes = b"x", **system: Any) -> pb.v2.Message:
    props = pb.v2.SystemProperties(
        message_id=system.pop("message_id", "01ABCDEF"),
        message_type=system.pop("message_type", pb.v2.MessageType.NORMAL),
        born_timestamp=messages.timestamp(1_700_000_000_000),
        born_host="test-host",
        body_encoding=pb.v2.Encoding.IDENTITY,
        **system,
    )
    return pb.v2.Message(topic=pb.v2.Resource(name=topic), body=body, system_properties=props)


def _send(cluster: Cluster, msg: pb.v2.Message, **kw: Any) -> pb.v2_service.SendMessageResponse:
    request = pb.v2_service.SendMessageRequest(messages=[msg])
    return _call(cluster, "SendMessage", request, pb.v2_service.SendMessageResponse, **kw)


@pytest.mark.parametrize(
    ("msg", "code"),
    [
        (_message("no-such-topic"), errors.Code.TOPIC_NOT_FOUND),
        (_message("bad topic!"), errors.Code.ILLEGAL_TOPIC),
        (_message("plain", b""), errors.Code.MESSAGE_BODY_EMPTY),
        (_message("plain", b"x" * (4 * MIB + 1)), errors.Code.MESSAGE_BODY_TOO_LARGE),
        (_message("plain", tag="a|b"), errors.Code.ILLEGAL_MESSAGE_TAG),
        (_message("plain", message_id=""), errors.Code.ILLEGAL_MESSAGE_ID),
        (
            _message("plain", message_type=pb.v2.MessageType.FIFO, message_group="g"),
            errors.Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
        ),
        (_message("ordered"), errors.Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE),
        (
            _message("ordered", message_type=pb.v2.MessageType.FIFO, message_group="g" * 65),
            errors.Code.ILLEGAL_MESSAGE_GROUP,
        ),
        (
            _message("plain", message_type=pb.v2.MessageType.TRANSACTION),
            errors.Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
        ),
        (
            _message("ordered", message_type=pb.v2.MessageType.FIFO),
            errors.Code.ILLEGAL_MESSAGE_GROUP,
        ),
    ],
    ids=[
        "unknown-topic",
        "illegal-topic",
        "empty-body",
        "body-over-4MiB",
        "tag-with-bar",
        "no-message-id",
        "fifo-into-normal",
        "normal-into-fifo",
        "group-too-long",
        "transaction-into-normal",
        "fifo-without-group",
    ],
)
def test_bad_sends_get_their_code(topics_ready: Cluster, msg: pb.v2.Message, code: int) -> None:
    """Each invalid message refuses its request with its own code and no entries (a request
    is all-or-nothing, as the Java proxy answers it)."""
    response = _send(topics_ready, msg)
    assert codes.code_of(response.status) == code, response.status.message
    assert list(response.entries) == []


def _end(
    cluster: Cluster,
    topic: str,
    message_id: str,
    transaction_id: str,
    resolution: pb.v2.TransactionResolution,
) -> int:
    request = pb.v2_service.EndTransactionRequest(
        topic=pb.v2.Resource(name=topic),
        message_id=message_id,
        transaction_id=transaction_id,
        resolution=resolution,
    )
    answer = _call(cluster, "EndTransaction", request, pb.v2_service.EndTransactionResponse)
    return codes.code_of(answer.status)


def test_bad_end_transactions_get_invalid_transaction_id(topics_ready: Cluster) -> None:
    """EndTransaction with a made-up id, another message's id or another topic answers
    INVALID_TRANSACTION_ID and leaves the half message open; COMMIT then succeeds, a repeated
    COMMIT is OK, and a ROLLBACK after it is INVALID_TRANSACTION_ID."""
    topics_ready.admin("topic", "create", "atomic-bad", "--queues", "2", "--type", "TRANSACTION")
    sent = _send(topics_ready, _message("atomic-bad", message_type=pb.v2.MessageType.TRANSACTION))
    assert codes.code_of(sent.status) == errors.Code.OK, sent.status.message
    tid = sent.entries[0].transaction_id
    commit, rollback = pb.v2.TransactionResolution.COMMIT, pb.v2.TransactionResolution.ROLLBACK
    invalid = errors.Code.INVALID_TRANSACTION_ID
    assert _end(topics_ready, "atomic-bad", "01ABCDEF", "made-up", commit) == invalid
    assert _end(topics_ready, "atomic-bad", "01OTHER", tid, commit) == invalid
    assert _end(topics_ready, "plain", "01ABCDEF", tid, commit) == invalid
    assert _end(topics_ready, "atomic-bad", "01ABCDEF", tid, commit) == errors.Code.OK
    assert _end(topics_ready, "atomic-bad", "01ABCDEF", tid, commit) == errors.Code.OK
    assert _end(topics_ready, "atomic-bad", "01ABCDEF", tid, rollback) == invalid


def test_a_4_mib_body_is_accepted(topics_ready: Cluster) -> None:
    """A body of exactly 4 MiB plus headers passes gRPC's size limit and the broker's (§7.8)."""
    response = _send(topics_ready, _message("plain", b"y" * (4 * MIB)))
    assert codes.code_of(response.status) == errors.Code.OK, response.status.message
    assert response.entries[0].message_id == "01ABCDEF"


def test_reserved_user_property_key_is_refused(topics_ready: Cluster) -> None:
    """A user property named like a system property (UNIQ_KEY) is ILLEGAL_MESSAGE_PROPERTY_KEY."""
    msg = _message("plain")
    msg.user_properties["UNIQ_KEY"] = "spoof"
    assert (
        codes.code_of(_send(topics_ready, msg).status) == errors.Code.ILLEGAL_MESSAGE_PROPERTY_KEY
    )


def test_missing_client_id_is_refused(topics_ready: Cluster) -> None:
    """Without x-mq-client-id every RPC answers CLIENT_ID_REQUIRED."""
    response = _send(topics_ready, _message("plain"), metadata=())
    assert codes.code_of(response.status) == errors.Code.CLIENT_ID_REQUIRED
    heartbeat = _call(
        topics_ready,
        "Heartbeat",
        pb.v2_service.HeartbeatRequest(),
        pb.v2_service.HeartbeatResponse,
        metadata=(),
    )
    assert codes.code_of(heartbeat.status) == errors.Code.CLIENT_ID_REQUIRED


def _receive(
    cluster: Cluster, request: pb.v2_service.ReceiveMessageRequest, *, timeout_s: float = 30
) -> list[Any]:
    async def go() -> list[Any]:
        async with grpc.aio.insecure_channel(cluster.broker, options=CHANNEL_OPTIONS) as channel:
            call = channel.unary_stream(
                rpc.method_path(pb.MESSAGING_SERVICE, "ReceiveMessage"),
                request_serializer=pb.v2_service.ReceiveMessageRequest.SerializeToString,
                response_deserializer=pb.v2_service.ReceiveMessageResponse.FromString,
            )
            stream = call(request, timeout=timeout_s, metadata=CLIENT)
            return [item async for item in stream]

    return asyncio.run(go())


def _receive_request(**kw: Any) -> pb.v2_service.ReceiveMessageRequest:
    queue = pb.v2.MessageQueue(topic=pb.v2.Resource(name=kw.pop("topic", "plain")), id=0)
    return pb.v2_service.ReceiveMessageRequest(
        group=pb.v2.Resource(name=kw.pop("group", "checker")),
        message_queue=queue,
        filter_expression=pb.v2.FilterExpression(type=pb.v2.FilterType.TAG, expression="*"),
        batch_size=kw.pop("batch_size", 8),
        long_polling_timeout=messages.duration(5_000),
        **kw,
    )


@pytest.mark.parametrize(
    ("request_kw", "code"),
    [
        ({"invisible_duration": messages.duration(1_000)}, errors.Code.ILLEGAL_INVISIBLE_TIME),
        (
            {"invisible_duration": messages.duration(13 * 3600_000)},
            errors.Code.ILLEGAL_INVISIBLE_TIME,
        ),
        ({}, errors.Code.ILLEGAL_INVISIBLE_TIME),
        ({"group": "bad group", "auto_renew": True}, errors.Code.ILLEGAL_CONSUMER_GROUP),
        ({"topic": "no-such-topic", "auto_renew": True}, errors.Code.TOPIC_NOT_FOUND),
    ],
    ids=[
        "invisible-1s",
        "invisible-13h",
        "no-invisible-no-renew",
        "illegal-group",
        "unknown-topic",
    ],
)
def test_bad_receives_get_their_code(
    topics_ready: Cluster, request_kw: dict[str, Any], code: int
) -> None:
    """Receive answers exactly one status with the right code and no messages."""
    items = _receive(topics_ready, _receive_request(**request_kw))
    statuses = [i for i in items if i.WhichOneof("content") == "status"]
    assert [codes.code_of(s.status) for s in statuses] == [code]
    assert not [i for i in items if i.WhichOneof("content") == "message"]


def test_received_messages_carry_what_official_clients_require(topics_ready: Cluster) -> None:
    """Delivered messages have IDENTITY encoding, an upper-case MD5 digest and attempt >= 1."""
    assert codes.code_of(
        _send(topics_ready, _message("plain", b"payload", message_id="01FEED")).status
    ) == (errors.Code.OK)
    items = _receive(
        topics_ready,
        _receive_request(group="inspector", invisible_duration=messages.duration(30_000)),
    )
    kinds = [i.WhichOneof("content") for i in items]
    assert kinds[0] == "status" and kinds[-1] == "delivery_timestamp"
    delivered = [i.message for i in items if i.WhichOneof("content") == "message"]
    assert delivered, "the sent message was not delivered"
    for msg in delivered:
        props = msg.system_properties
        assert props.body_encoding == pb.v2.Encoding.IDENTITY
        assert props.body_digest.type == pb.v2.DigestType.MD5
        assert props.body_digest.checksum == props.body_digest.checksum.upper()
        assert props.delivery_attempt >= 1 and props.receipt_handle


def _change_invisible(
    cluster: Cluster, handle: str
) -> pb.v2_service.ChangeInvisibleDurationResponse:
    """ChangeInvisibleDuration of ``handle`` (group ``acker``, topic ``plain``) to 20 s."""
    change = pb.v2_service.ChangeInvisibleDurationRequest(
        group=pb.v2.Resource(name="acker"),
        topic=pb.v2.Resource(name="plain"),
        receipt_handle=handle,
        invisible_duration=messages.duration(20_000),
        message_id="x",
    )
    return _call(
        cluster, "ChangeInvisibleDuration", change, pb.v2_service.ChangeInvisibleDurationResponse
    )


def test_invalid_and_stale_receipt_handles_are_refused(topics_ready: Cluster) -> None:
    """Garbage, and a handle made stale by ChangeInvisibleDuration, are INVALID_RECEIPT_HANDLE."""
    _send(topics_ready, _message("plain", b"ack-me", message_id="01ACKME"))
    items = _receive(
        topics_ready,
        _receive_request(group="acker", invisible_duration=messages.duration(30_000)),
    )
    delivered = [i.message for i in items if i.WhichOneof("content") == "message"]
    old = delivered[0].system_properties.receipt_handle

    def ack(handle: str) -> pb.v2_service.AckMessageResponse:
        entry = pb.v2_service.AckMessageEntry(message_id="x", receipt_handle=handle)
        request = pb.v2_service.AckMessageRequest(
            group=pb.v2.Resource(name="acker"),
            topic=pb.v2.Resource(name="plain"),
            entries=[entry],
        )
        return _call(topics_ready, "AckMessage", request, pb.v2_service.AckMessageResponse)

    assert codes.code_of(ack("not-a-handle").status) == errors.Code.INVALID_RECEIPT_HANDLE
    changed = _change_invisible(topics_ready, old)
    assert codes.code_of(changed.status) == errors.Code.OK and changed.receipt_handle != old
    assert codes.code_of(ack(old).status) == errors.Code.INVALID_RECEIPT_HANDLE
    assert codes.code_of(ack(changed.receipt_handle).status) == errors.Code.OK
    assert codes.code_of(ack(changed.receipt_handle).status) == errors.Code.INVALID_RECEIPT_HANDLE


def test_a_receive_whose_deadline_leaves_no_long_poll_is_illegal_polling_time(
    topics_ready: Cluster,
) -> None:
    """A ReceiveMessage called with a 3 s deadline (less than the 5 s minimum long poll)
    answers one ILLEGAL_POLLING_TIME status and no messages."""
    request = _receive_request(group="hasty", invisible_duration=messages.duration(30_000))
    items = _receive(topics_ready, request, timeout_s=3)
    assert [codes.code_of(i.status) for i in items] == [errors.Code.ILLEGAL_POLLING_TIME]


def test_garbage_receipt_handles_are_refused_by_change_and_forward(topics_ready: Cluster) -> None:
    """ChangeInvisibleDuration and ForwardMessageToDeadLetterQueue with a handle that does not
    decode answer INVALID_RECEIPT_HANDLE (the push consumer then stops retrying them)."""
    changed = _change_invisible(topics_ready, "not-a-handle")
    forward = pb.v2_service.ForwardMessageToDeadLetterQueueRequest(
        group=pb.v2.Resource(name="acker"),
        topic=pb.v2.Resource(name="plain"),
        receipt_handle="not-a-handle",
        message_id="x",
        delivery_attempt=1,
        max_delivery_attempts=16,
    )
    forwarded = _call(
        topics_ready,
        "ForwardMessageToDeadLetterQueue",
        forward,
        pb.v2_service.ForwardMessageToDeadLetterQueueResponse,
    )
    assert [codes.code_of(changed.status), codes.code_of(forwarded.status)] == [
        errors.Code.INVALID_RECEIPT_HANDLE,
        errors.Code.INVALID_RECEIPT_HANDLE,
    ]


def test_a_garbage_recall_handle_is_a_bad_request(topics_ready: Cluster) -> None:
    """RecallMessage with a handle that does not decode answers BAD_REQUEST (a well-formed
    handle of a message no longer waiting is NOT_FOUND: ``test_broker_schedule_process``)."""
    request = pb.v2_service.RecallMessageRequest(
        topic=pb.v2.Resource(name="plain"), recall_handle="not-a-handle"
    )
    answer = _call(topics_ready, "RecallMessage", request, pb.v2_service.RecallMessageResponse)
    assert codes.code_of(answer.status) == errors.Code.BAD_REQUEST, answer.status.message
