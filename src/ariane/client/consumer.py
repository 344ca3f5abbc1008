"""``SimpleConsumer``: receive and ack messages of one topic for one consumer group (asyncio).

Mirrors RocketMQ 5's SimpleConsumer over v2 ``ReceiveMessage`` and ``AckMessage``
(grpc-v2.md §5.4, §6.4, §6.5):

* ``receive`` asks one master (round-robin over the topic's readable queues, so a FIFO group
  names a queue) for up to ``max_messages`` messages, long-polling up to
  ``long_polling_timeout_s`` when there are none; the broker hides what it delivers for
  ``invisible_duration_s`` and delivers it again afterwards unless it was acked. An answer is
  one status, the messages, then a delivery timestamp; MESSAGE_NOT_FOUND means an empty list.
  Ariane's brokers return at most 32 messages per call.
* ``ack`` acknowledges many messages in one AckMessage per broker (the broker that issued a
  receipt handle is the one that takes the ack), in chunks of ``ack_entries_max``.

Each received body is checked against its ``body_digest`` (CRC32, MD5 or SHA1, upper-case hex,
over the body as sent) and then decompressed when its encoding is GZIP (gzip or zlib framing,
at most ``DECOMPRESSED_BYTES_MAX``); a mismatch or a bad stream marks the message ``corrupted``
(the official clients nack such messages).

Errors: statuses raise their ``ariane.common.errors`` class (``codes.raise_for_status``), e.g.
``TopicNotFoundError``, ``IllegalInvisibleTimeError``; an ack where only some entries failed
raises ``PartialAckError`` naming them (INVALID_RECEIPT_HANDLE: the handle is stale because the
invisible time ran out and the message was delivered again).

Invariants: a receive reads at most ``max_messages`` + a few responses; an AckMessage carries
at most ``ack_entries_max`` entries.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import itertools
import logging
import zlib
from collections.abc import Mapping, Sequence

from ariane.client import route_cache, session
from ariane.client import transport as transport_mod
from ariane.common import clock, errors, ids, limits
from ariane.grpcwire import codes, convert, messages, pb

_log = logging.getLogger(__name__)

RECEIVE_MESSAGES_MAX = 1024
"""Most messages one ``receive`` asks for (Ariane's brokers return at most 32)."""

RESPONSES_SLACK = 8
"""Responses a receive reads beyond its messages (status, delivery timestamp, spare)."""

ACK_ENTRIES_MAX_LIMIT = 65_536
"""Upper bound of ``ack_entries_max``."""

DECOMPRESSED_BYTES_MAX = 64 * 1024 * 1024
"""Largest body a GZIP-encoded message may inflate to."""

_GZIP_OR_ZLIB_WBITS = 47  # zlib.decompressobj: detect gzip or zlib framing


@dataclasses.dataclass(frozen=True, slots=True)
class ReceivedMessage:
    """A delivered message (RocketMQ ``MessageView``) and how to ack it.

    Attributes:
        message_id: the producer-made id (UNIQ_KEY).
        topic: the topic.
        body: the payload.
        tag: the tag, or ``None``.
        keys: the index keys.
        message_group: the FIFO message group, or ``None``.
        properties: user properties.
        delivery_attempt: 1 on the first delivery, +1 on each redelivery.
        queue_id: the queue it is stored in.
        queue_offset: its offset in that queue.
        born_timestamp_ms: when the producer made it, ms since the epoch.
        store_timestamp_ms: when the broker stored it, ms since the epoch.
        receipt_handle: what ``ack`` sends back (valid until the invisible time runs out).
        broker_name: the broker group that delivered it.
        endpoint: ``host:port`` of that broker (acks go there).
        corrupted: the body does not match the digest the broker sent.
    """

    message_id: ids.MessageId
    topic: str
    body: bytes = dataclasses.field(repr=False)
    tag: str | None
    keys: tuple[str, ...]
    message_group: str | None
    properties: Mapping[str, str]
    delivery_attempt: int
    queue_id: ids.QueueId
    queue_offset: ids.QueueOffset
    born_timestamp_ms: ids.TimestampMs
    store_timestamp_ms: ids.TimestampMs
    receipt_handle: str
    broker_name: ids.BrokerName
    endpoint: str
    corrupted: bool


class PartialAckError(transport_mod.PartialFailureError):
    """Some acks were taken and others refused.

    Attributes:
        failures: ``(message, error)`` of each refused ack.
    """

    def __init__(
        self, message: str, failures: Sequence[tuple[ReceivedMessage, errors.ArianeError]]
    ) -> None:
        super().__init__(message)
        self.failures = tuple(failures)


@dataclasses.dataclass(frozen=True, slots=True)
class ConsumerSettings:
    """How a ``SimpleConsumer`` receives and acks."""

    connection: session.ConnectionSettings = dataclasses.field(
        default_factory=session.ConnectionSettings
    )
    """Deadlines, route refresh and channel bounds."""

    long_polling_timeout_s: float = limits.LONG_POLLING_MS_MIN / 1000
    """How long a receive waits for messages before answering empty, seconds (5 .. 20: what
    brokers accept; the official clients' ``await_duration``)."""

    ack_entries_max: int = 1024
    """Most entries in one AckMessage (1 .. 65 536); bigger acks are split."""

    def __post_init__(self) -> None:
        low, high = limits.LONG_POLLING_MS_MIN / 1000, limits.LONG_POLLING_MS_MAX / 1000
        if not low <= self.long_polling_timeout_s <= high:
            raise ValueError(
                f"long_polling_timeout_s must be {low}..{high}, not {self.long_polling_timeout_s}"
            )
        if not 1 <= self.ack_entries_max <= ACK_ENTRIES_MAX_LIMIT:
            raise ValueError(
                f"ack_entries_max must be 1..{ACK_ENTRIES_MAX_LIMIT}, not {self.ack_entries_max}"
            )


class SimpleConsumer:
    """Receives messages of ``topic`` for ``group`` and acks them (RocketMQ ``SimpleConsumer``).

    Use it as an async context manager, or call ``close()``; use it from one event loop.

    Args:
        endpoints: the name servers, ``host:port`` (sequence or ``;``-separated).
        group: the consumer group (created with defaults on first use when the broker allows;
            make it FIFO with ``AdminClient.create_group(..., consume_orderly=True)``).
        topic: the topic.
        tag_expression: which tags to receive: ``*``, ``a`` or ``a||b``.
        settings: how to receive and ack.
        time: the clock for routes.
        transport: the transport to use (tests); a new one when ``None``.

    Raises:
        ValueError: for malformed endpoints, an empty group, topic or expression, or settings
            out of range.
    """

    def __init__(
        self,
        endpoints: str | Sequence[str],
        group: str,
        topic: str,
        *,
        tag_expression: str = "*",
        settings: ConsumerSettings | None = None,
        time: clock.Clock | None = None,
        transport: transport_mod.Transport | None = None,
    ) -> None:
        if not group or not topic or not tag_expression.strip():
            raise ValueError("a consumer needs a group, a topic and a tag expression")
        self._settings = settings or ConsumerSettings()
        self._session = session.Session(
            endpoints, self._settings.connection, time=time, transport=transport
        )
        self._group = convert.resource(group)
        self._topic = topic
        self._filter = pb.v2.FilterExpression(type=pb.v2.FilterType.TAG, expression=tag_expression)
        self._round_robin = itertools.count()

    @property
    def client_id(self) -> ids.ClientId:
        """The ``x-mq-client-id`` this consumer sends."""
        return self._session.client_id

    @property
    def group(self) -> str:
        """The consumer group."""
        return self._group.name

    @property
    def topic(self) -> str:
        """The topic."""
        return self._topic

    async def __aenter__(self) -> SimpleConsumer:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Tell the brokers this consumer is gone and close its channels (idempotent)."""
        await self._session.close(self._group.name)

    async def receive(
        self, max_messages: int = 32, invisible_duration_s: float = 30.0
    ) -> list[ReceivedMessage]:
        """Receive up to ``max_messages`` messages from one broker (one ReceiveMessage call).

        Args:
            max_messages: most messages wanted, 1 .. 1024 (Ariane's brokers send at most 32).
            invisible_duration_s: how long the messages stay hidden from other receives unless
                acked, seconds (brokers accept 10 s .. 12 h).

        Returns:
            the messages; empty when none arrived within the long-polling time.

        Raises:
            ValueError: ``max_messages`` out of range, or a non-positive invisible duration.
            TopicNotFoundError: the name servers do not know the topic.
            IllegalInvisibleTimeError: the broker refused the invisible duration.
            ArianeError: the class of any other refusal (``ariane.common.errors``).
            BrokerUnreachableError, RequestTimeoutError: the broker did not answer.
        """
        self._session.check_open()
        if not 1 <= max_messages <= RECEIVE_MESSAGES_MAX:
            raise ValueError(f"max_messages must be 1..{RECEIVE_MESSAGES_MAX}, not {max_messages}")
        if invisible_duration_s <= 0:
            raise ValueError(f"invisible_duration_s must be > 0, not {invisible_duration_s}")
        found = await self._session.routes.get(self._topic)
        if not found.readable:
            raise errors.ForbiddenError(f"topic {self._topic!r} has no readable queue on a master")
        queue = found.readable[next(self._round_robin) % len(found.readable)]
        polling_s = self._settings.long_polling_timeout_s
        request = pb.v2_service.ReceiveMessageRequest(
            group=self._group,
            message_queue=queue.message_queue,
            filter_expression=self._filter,
            batch_size=max_messages,
            invisible_duration=messages.duration(round(invisible_duration_s * 1000)),
            auto_renew=False,
            long_polling_timeout=messages.duration(round(polling_s * 1000)),
        )
        self._session.used(queue.endpoint)
        responses = await self._session.transport.stream(
            queue.endpoint,
            "ReceiveMessage",
            request,
            pb.v2_service.ReceiveMessageResponse,
            timeout_s=self._settings.connection.request_timeout_s + polling_s,
            responses_max=max_messages + RESPONSES_SLACK,
        )
        return _received(queue, responses)

    async def ack(self, received: Sequence[ReceivedMessage]) -> None:
        """Acknowledge messages: one AckMessage per broker (and per ``ack_entries_max``).

        Args:
            received: messages from ``receive`` of this consumer.

        Raises:
            PartialAckError: some acks were refused (each named with its error).
            InvalidReceiptHandleError: every ack was refused as stale (or the class of another
                shared refusal); BrokerUnreachableError, RequestTimeoutError likewise.
        """
        self._session.check_open()
        if not received:
            return
        chunks: dict[tuple[str, str], list[ReceivedMessage]] = {}
        for item in received:
            chunks.setdefault((item.endpoint, item.topic), []).append(item)
        size = self._settings.ack_entries_max
        calls = [
            group_items[start : start + size]
            for group_items in chunks.values()
            for start in range(0, len(group_items), size)
        ]
        results = await asyncio.gather(*(self._ack_chunk(chunk) for chunk in calls))
        failures = [failure for result in results for failure in result]
        if not failures:
            return
        if len(failures) == len(received):
            raise failures[0][1]
        raise PartialAckError(
            f"{len(failures)} of {len(received)} acks were refused; first: "
            f"{failures[0][0].message_id} {failures[0][1].code.name} {failures[0][1].message}",
            failures,
        )

    async def _ack_chunk(
        self, chunk: Sequence[ReceivedMessage]
    ) -> list[tuple[ReceivedMessage, errors.ArianeError]]:
        endpoint = chunk[0].endpoint
        request = pb.v2_service.AckMessageRequest(
            group=self._group,
            topic=convert.resource(chunk[0].topic),
            entries=[
                pb.v2_service.AckMessageEntry(
                    message_id=m.message_id, receipt_handle=m.receipt_handle
                )
                for m in chunk
            ],
        )
        try:
            response = await self._session.transport.unary(
                endpoint, "AckMessage", request, pb.v2_service.AckMessageResponse
            )
        except (transport_mod.BrokerUnreachableError, errors.RequestTimeoutError) as exc:
            return [(m, exc) for m in chunk]
        outcomes = transport_mod.entry_errors(
            endpoint, response.status, [e.status for e in response.entries], len(chunk)
        )
        return [(m, error) for m, error in zip(chunk, outcomes, strict=True) if error is not None]


def _received(
    queue: route_cache.QueueRoute, responses: Sequence[pb.v2_service.ReceiveMessageResponse]
) -> list[ReceivedMessage]:
    """The messages of a ReceiveMessage answer, or the error its status stands for."""
    status: pb.v2.Status | None = None
    out: list[ReceivedMessage] = []
    for response in responses:
        kind = response.WhichOneof("content")
        if kind == "status" and status is None:
            status = response.status
        elif kind == "message":
            out.append(message_view(queue, response.message))
    if status is None:
        if out:
            _log.warning("%s answered a receive without a status", queue.endpoint)
            return out
        raise errors.ArianeError(f"{queue.endpoint} answered a receive without a status")
    if codes.code_of(status) == errors.Code.MESSAGE_NOT_FOUND:
        return out
    codes.raise_for_status(status)
    return out


def message_view(queue: route_cache.QueueRoute, message: pb.v2.Message) -> ReceivedMessage:
    """The ``ReceivedMessage`` of a delivered v2 ``Message`` of ``queue`` (digest checked,
    GZIP bodies inflated); also what ``PullConsumer`` returns."""
    system = message.system_properties
    body = message.body
    intact = _digest_matches(body, system.body_digest)
    if system.body_encoding == pb.v2.Encoding.GZIP:
        body, inflated = _inflate(body)
        intact = intact and inflated
    return ReceivedMessage(
        message_id=ids.MessageId(system.message_id),
        topic=message.topic.name,
        body=body,
        tag=system.tag if system.HasField("tag") else None,
        keys=tuple(system.keys),
        message_group=system.message_group if system.HasField("message_group") else None,
        properties=dict(message.user_properties),
        delivery_attempt=system.delivery_attempt,
        queue_id=ids.QueueId(system.queue_id),
        queue_offset=ids.QueueOffset(system.queue_offset),
        born_timestamp_ms=ids.TimestampMs(messages.timestamp_ms(system.born_timestamp)),
        store_timestamp_ms=ids.TimestampMs(messages.timestamp_ms(system.store_timestamp)),
        receipt_handle=system.receipt_handle,
        broker_name=queue.broker_name,
        endpoint=queue.endpoint,
        corrupted=not intact,
    )


def _digest_matches(body: bytes, digest: pb.v2.Digest) -> bool:
    """Whether ``body`` has the checksum the broker sent (no digest: nothing to check)."""
    kind = digest.type
    if kind == pb.v2.DigestType.MD5:
        actual = hashlib.md5(body, usedforsecurity=False).hexdigest()
    elif kind == pb.v2.DigestType.SHA1:
        actual = hashlib.sha1(body, usedforsecurity=False).hexdigest()
    elif kind == pb.v2.DigestType.CRC32:
        actual = f"{zlib.crc32(body):08X}"
    else:
        return True
    return actual.upper() == digest.checksum.upper()


def _inflate(body: bytes) -> tuple[bytes, bool]:
    """``(inflated body, True)``, or ``(body, False)`` for a bad or oversized stream."""
    inflater = zlib.decompressobj(_GZIP_OR_ZLIB_WBITS)
    try:
        inflated = inflater.decompress(body, DECOMPRESSED_BYTES_MAX)
    except zlib.error:
        return body, False
    if inflater.unconsumed_tail or not inflater.eof:
        return body, False
    return inflated, True
