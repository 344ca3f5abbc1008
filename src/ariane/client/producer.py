"""``Producer``: batching, pipelining asyncio producer over v2 ``SendMessage``.

The official clients send one message per SendMessage call; each call costs a Python broker about
half a millisecond of CPU whatever it carries (DESIGN §13), so this producer puts many messages
in one call (``send_batch``) and keeps several calls under way at once (``in_flight_max``).

How a batch travels (grpc-v2.md §5.1, §5.3, §6.3):

1. the topic's route comes from the name servers (``RouteCache``: QueryRoute, refreshed);
2. every message gets a client-made id (``message_id``: RocketMQ 5's 34-hex-character layout),
   its type (FIFO when it has a message group, DELAY when it has a delivery timestamp, else
   NORMAL; checked against the queues' accepted types before sending), a born timestamp and
   host;
3. messages with a message group go to the broker of ``writable[sha256(group) % n]`` (the
   official clients' rule, so a group always reaches the same broker, which then picks the
   group's queue); messages with an idempotency key to the broker group
   ``sha256(key) % groups`` (by name: the group that de-duplicates it, ``common.idempotency``);
   the others go to one round-robin broker per batch;
4. each broker gets one SendMessage with its messages, in batch order; the answer has one entry
   per message.

Streaming mode (``ProducerSettings.streaming``): step 4 writes the same SendMessageRequest on
Ariane's own ``ariane.ingest.v1.Ingest/SendStream`` instead, one long-lived bidi stream per
broker (``send_stream.StreamSender``: opened on first use, reopened after a failure), which
saves the broker the cost of a call per batch. Answers, errors and receipts are the same as in
unary mode; only Ariane's brokers serve that stream.

Errors: a refused batch raises the status code's class from ``ariane.common.errors`` (through
``codes.raise_for_status``), e.g. ``TopicNotFoundError``; when only some messages were refused,
``PartialSendError`` carries the receipts of the stored ones and the error of each other one.
Calls that fail at the gRPC level, or that the broker refuses whole with a retriable code, are
tried again up to ``send_attempts`` times (at least once delivery, as the official clients),
message-group-free batches on the next broker. In streaming mode a stream failure is retried by
the stream itself, on the same broker: its unanswered batches are written again, in their order,
on a new stream (up to ``send_attempts`` writes each).

Order: messages of one message group keep their order within a batch and across batches sent
one after another; batches sent concurrently have no order between them in unary mode, and in
streaming mode are stored in the order they were written on their broker's stream, retries
included.

Invariants: at most ``in_flight_max`` SendMessage calls (or stream requests) are under way per
producer (further callers wait), and at most ``stream_window_max`` per stream; at most
``connection.channels_max`` streams are open; a batch holds at most ``batch_messages_max``
messages and ``batch_bytes_max`` body bytes.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import hashlib
import itertools
import logging
import socket
from collections.abc import Mapping, Sequence

from ariane.client import route_cache, send_stream, session
from ariane.client import transport as transport_mod
from ariane.common import clock, errors, idempotency, ids, limits, message_id
from ariane.grpcwire import codes, pb

_check_range = limits.check_range  # the one range check, short at its many call sites

_log = logging.getLogger(__name__)

BATCH_MESSAGES_MAX_LIMIT = 65_536
BATCH_BYTES_MAX_LIMIT = 128 * 1024 * 1024
"""Upper bounds of the batch settings (the channels carry at most 130 MiB per message)."""

RETRY_BACKOFF_MS_INITIAL = 10
RETRY_BACKOFF_MS_MAX = 1_000
"""Pause before a retry: 10 ms doubling to 1 s (what brokers announce to producers)."""


@dataclasses.dataclass(frozen=True, slots=True)
class OutgoingMessage:
    """A message to send (RocketMQ ``Message`` without the topic).

    Attributes:
        body: the payload, at least one byte (brokers refuse more than 4 MiB by default).
        tag: the tag consumers filter on (no ``|``), or ``None``.
        keys: index keys (no spaces), for lookups by key.
        message_group: the FIFO message group; makes the message FIFO.
        properties: user properties (not RocketMQ's reserved names).
        delivery_timestamp_ms: when consumers may first receive it, ms since the epoch; makes
            the message DELAY (system property ``delivery_timestamp``, as RocketMQ 5's
            ``MessageBuilder.setDeliveryTimestamp``). Brokers refuse more than 3 days ahead
            (``IllegalDeliveryTimeError``) and deliver a past time at once.
        idempotency_key: makes the send idempotent (Ariane's brokers; RocketMQ has no
            idempotent producer): every message sent with this key to this topic is stored
            once within the broker's window (24 h by default), whatever the retries, and its
            id is ``idempotency.message_id_of(key)``. The key picks the message's broker group
            (``sha256(key) % groups`` by name), retries stay there.

    Raises:
        ValueError: both ``message_group`` and ``delivery_timestamp_ms`` are set (the
            official clients refuse that pair too), the timestamp is negative, or the
            idempotency key is empty, too long or holds control characters.
    """

    body: bytes
    tag: str | None = None
    keys: tuple[str, ...] = ()
    message_group: str | None = None
    properties: Mapping[str, str] = dataclasses.field(default_factory=dict)
    delivery_timestamp_ms: int | None = None
    idempotency_key: str | None = None

    def __post_init__(self) -> None:
        if self.idempotency_key is not None:
            idempotency.check_key(self.idempotency_key)
        if self.delivery_timestamp_ms is None:
            return
        if self.message_group is not None:
            raise ValueError("a message takes a message group or a delivery timestamp, not both")
        if self.delivery_timestamp_ms < 0:
            raise ValueError(f"delivery_timestamp_ms {self.delivery_timestamp_ms} is negative")


@dataclasses.dataclass(frozen=True, slots=True)
class SendReceipt:
    """Where a message was stored (RocketMQ ``SendReceipt``).

    Attributes:
        message_id: the message's id (its UNIQ_KEY), as made by this producer.
        topic: the topic.
        broker_name: the broker group that stored it.
        queue_offset: its offset in the queue the broker chose.
    """

    message_id: ids.MessageId
    topic: str
    broker_name: ids.BrokerName
    queue_offset: ids.QueueOffset


class PartialSendError(transport_mod.PartialFailureError):
    """Some messages of a batch were stored and others were refused.

    Attributes:
        receipts: per message of the batch, its receipt, or ``None`` where it was refused.
        failures: ``(index in the batch, error)`` of each refused message.
    """

    def __init__(
        self,
        message: str,
        receipts: Sequence[SendReceipt | None],
        failures: Sequence[tuple[int, errors.ArianeError]],
    ) -> None:
        super().__init__(message)
        self.receipts = tuple(receipts)
        self.failures = tuple(failures)


@dataclasses.dataclass(frozen=True, slots=True)
class ProducerSettings:
    """How a ``Producer`` sends."""

    connection: session.ConnectionSettings = dataclasses.field(
        default_factory=session.ConnectionSettings
    )
    """Deadlines, route refresh and channel bounds."""

    in_flight_max: int = 8
    """Most SendMessage calls under way at once (1 .. 1024); more callers wait. Eight batches of
    64 KiB keep a Python broker busy on this project's reference machine (perf.md §2.4)."""

    send_attempts: int = 3
    """Tries of a call that failed at the gRPC level or was refused whole with a retriable code,
    first one included (1 .. 16; RocketMQ's ``maxAttempts`` is 3)."""

    batch_messages_max: int = 1024
    """Most messages in one ``send_batch`` (1 .. 65 536)."""

    batch_bytes_max: int = 16 * 1024 * 1024
    """Most body bytes in one ``send_batch`` (1 .. 128 MiB)."""

    streaming: bool = False
    """Send over ``ariane.ingest.v1.Ingest/SendStream`` (one bidi stream per broker; Ariane's
    brokers only) instead of one unary SendMessage call per batch and broker."""

    stream_window_max: int = 8
    """Most requests awaiting their answer on one stream (1 .. 1024); more callers wait. Eight
    batches keep a broker busy while answers travel back (perf.md §2.4)."""

    def __post_init__(self) -> None:
        _check_range("in_flight_max", self.in_flight_max, 1, 1024)
        _check_range("send_attempts", self.send_attempts, 1, 16)
        _check_range("batch_messages_max", self.batch_messages_max, 1, BATCH_MESSAGES_MAX_LIMIT)
        _check_range("batch_bytes_max", self.batch_bytes_max, 1, BATCH_BYTES_MAX_LIMIT)
        _check_range("stream_window_max", self.stream_window_max, 1, send_stream.WINDOW_MAX_LIMIT)


@dataclasses.dataclass(frozen=True, slots=True)
class _Part:
    """The messages of a batch bound for one broker."""

    target: route_cache.QueueRoute
    indexes: tuple[int, ...]
    pinned: bool  # holds a message group: retries stay on this broker


class Producer:
    """Sends messages in batches to the brokers of a cluster (RocketMQ ``Producer``).

    Use it as an async context manager, or call ``close()``; use it from one event loop.

    Args:
        endpoints: the name servers, ``host:port`` (sequence or ``;``-separated).
        settings: how to send.
        time: the clock for routes and message ids.
        transport: the transport to use (tests); a new one when ``None``.

    Raises:
        ValueError: for malformed endpoints or settings.
    """

    def __init__(
        self,
        endpoints: str | Sequence[str],
        *,
        settings: ProducerSettings | None = None,
        time: clock.Clock | None = None,
        transport: transport_mod.Transport | None = None,
    ) -> None:
        self._settings = settings or ProducerSettings()
        self._session = session.Session(
            endpoints, self._settings.connection, time=time, transport=transport
        )
        self._clock = time or clock.SystemClock()
        self._ids = message_id.MessageIdFactory(time=self._clock)
        self._in_flight = asyncio.Semaphore(self._settings.in_flight_max)
        self._round_robin = itertools.count()
        self._host = socket.gethostname() or "localhost"
        self._streams: collections.OrderedDict[str, send_stream.StreamSender] = (
            collections.OrderedDict()
        )

    @property
    def client_id(self) -> ids.ClientId:
        """The ``x-mq-client-id`` this producer sends."""
        return self._session.client_id

    @property
    def settings(self) -> ProducerSettings:
        """The producer's settings."""
        return self._settings

    def stream_counts(self) -> dict[str, int]:
        """Per broker endpoint, how many SendStream calls this producer opened (streaming mode;
        1 each unless a stream failed and was reopened)."""
        return {endpoint: s.streams_opened for endpoint, s in self._streams.items()}

    async def __aenter__(self) -> Producer:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Let open streams finish, tell the brokers this producer is gone and close its
        channels (idempotent)."""
        while self._streams:
            _, stream = self._streams.popitem(last=False)
            await stream.close()
        await self._session.close()

    async def send(
        self,
        topic: str,
        body: bytes,
        *,
        tag: str | None = None,
        keys: Sequence[str] = (),
        message_group: str | None = None,
        properties: Mapping[str, str] | None = None,
        delivery_timestamp_ms: int | None = None,
        idempotency_key: str | None = None,
    ) -> SendReceipt:
        """Send one message (one SendMessage call).

        Args:
            topic: the topic.
            body: the payload (at least one byte).
            tag: the tag, or ``None``.
            keys: index keys.
            message_group: FIFO message group; ``None`` sends a NORMAL message.
            properties: user properties.
            delivery_timestamp_ms: when consumers may first receive it, ms since the epoch;
                sends a DELAY message (to a DELAY or MIXED topic). Not with a message group.
            idempotency_key: store the message once whatever the retries (see
                ``OutgoingMessage.idempotency_key``).

        Returns:
            where the message was stored.

        Raises:
            TopicNotFoundError: the name servers do not know the topic.
            MessageTypeConflictError: FIFO or DELAY to a NORMAL topic, or the reverse.
            IllegalDeliveryTimeError: ``delivery_timestamp_ms`` more than 3 days ahead.
            ValueError: both ``message_group`` and ``delivery_timestamp_ms``.
            ArianeError: the class of any other refusal (``ariane.common.errors``).
            NameServerUnreachableError, BrokerUnreachableError, RequestTimeoutError: after
                ``send_attempts`` tries.
        """
        outgoing = OutgoingMessage(
            body=body,
            tag=tag,
            keys=tuple(keys),
            message_group=message_group,
            properties={} if properties is None else properties,
            delivery_timestamp_ms=delivery_timestamp_ms,
            idempotency_key=idempotency_key,
        )
        return (await self.send_batch(topic, [outgoing]))[0]

    async def send_batch(
        self, topic: str, batch: Sequence[bytes | OutgoingMessage]
    ) -> list[SendReceipt]:
        """Send many messages in one SendMessage call per broker they go to.

        Args:
            topic: the topic.
            batch: the messages (plain ``bytes`` are bodies without tag, keys or group).

        Returns:
            one receipt per message, in batch order.

        Raises:
            ValueError: an empty batch, or one over ``batch_messages_max`` /
                ``batch_bytes_max``.
            PartialSendError: some messages were stored and some refused.
            ArianeError: the class of the refusal when every message was refused; see ``send``.
        """
        self._session.check_open()
        items = [m if isinstance(m, OutgoingMessage) else OutgoingMessage(m) for m in batch]
        self._check_batch(items)
        found = await self._session.routes.get(topic)
        parts = self._plan(found, items)
        message_ids = self._ids.take(len(items))
        born_ms = int(self._clock.now_ms())
        results = await asyncio.gather(
            *(self._send_part(found, part, items, message_ids, born_ms) for part in parts)
        )
        receipts: list[SendReceipt | None] = [None] * len(items)
        failures: list[tuple[int, errors.ArianeError]] = []
        for part, outcome in zip(parts, results, strict=True):
            for index, result in zip(part.indexes, outcome, strict=True):
                if isinstance(result, SendReceipt):
                    receipts[index] = result
                else:
                    failures.append((index, result))
        if not failures:
            return [r for r in receipts if r is not None]
        failures.sort(key=lambda f: f[0])
        if len(failures) == len(items):
            raise failures[0][1]
        raise PartialSendError(
            f"{len(failures)} of {len(items)} messages to {topic!r} were refused; first: "
            f"#{failures[0][0]} {failures[0][1].code.name} {failures[0][1].message}",
            receipts,
            failures,
        )

    def _check_batch(self, items: Sequence[OutgoingMessage]) -> None:
        settings = self._settings
        if not items:
            raise ValueError("send_batch needs at least one message")
        if len(items) > settings.batch_messages_max:
            raise ValueError(
                f"a batch holds at most {settings.batch_messages_max} messages, not {len(items)}"
            )
        size = sum(len(m.body) for m in items)
        if size > settings.batch_bytes_max:
            raise ValueError(
                f"a batch holds at most {settings.batch_bytes_max} body bytes, not {size}"
            )

    def _plan(self, found: route_cache.TopicRoute, items: Sequence[OutgoingMessage]) -> list[_Part]:
        """Which broker each message goes to; one part per broker, messages in batch order."""
        writable = found.writable
        if not writable:
            raise errors.ForbiddenError(f"topic {found.topic!r} has no writable queue on a master")
        spread = writable[next(self._round_robin) % len(writable)]
        by_endpoint: dict[str, tuple[route_cache.QueueRoute, list[int], list[bool]]] = {}
        for index, item in enumerate(items):
            group, key = item.message_group, item.idempotency_key
            if group is not None:
                target = writable[_group_slot(group, len(writable))]
            else:
                target = spread if key is None else _key_target(writable, key)
            kind = _wire_type(item)
            if int(kind) not in target.accepted_types:
                raise errors.MessageTypeConflictError(
                    f"topic {found.topic!r} does not accept {pb.v2.MessageType.Name(kind)} "
                    "messages (a message group makes a message FIFO, a delivery timestamp "
                    "DELAY); send to a topic of that type or change the topic's type"
                )
            _, indexes, pins = by_endpoint.setdefault(target.endpoint, (target, [], []))
            indexes.append(index)
            pins.append(group is not None or key is not None)
        return [
            _Part(target=target, indexes=tuple(indexes), pinned=any(pins))
            for target, indexes, pins in by_endpoint.values()
        ]

    def _request(
        self,
        topic: str,
        part: _Part,
        items: Sequence[OutgoingMessage],
        message_ids: Sequence[ids.MessageId],
        born_ms: int,
    ) -> pb.v2_service.SendMessageRequest:
        request = pb.v2_service.SendMessageRequest()
        born_s, born_nanos = born_ms // 1000, (born_ms % 1000) * 1_000_000
        for index in part.indexes:
            item = items[index]
            out = request.messages.add()
            out.topic.name = topic
            out.body = item.body
            system = out.system_properties
            key = item.idempotency_key
            system.message_id = (
                message_ids[index] if key is None else idempotency.message_id_of(key)
            )
            system.born_timestamp.seconds = born_s
            system.born_timestamp.nanos = born_nanos
            system.born_host = self._host
            system.body_encoding = pb.v2.Encoding.IDENTITY
            system.message_type = _wire_type(item)
            if item.message_group is not None:
                system.message_group = item.message_group
            if item.delivery_timestamp_ms is not None:
                system.delivery_timestamp.FromMilliseconds(item.delivery_timestamp_ms)
            if item.tag is not None:
                system.tag = item.tag
            if item.keys:
                system.keys.extend(item.keys)
            if item.properties:
                out.user_properties.update(item.properties)
            if key is not None:
                out.user_properties[idempotency.IDEMPOTENCY_KEY_PROPERTY] = key
        return request

    async def _send_part(
        self,
        found: route_cache.TopicRoute,
        part: _Part,
        items: Sequence[OutgoingMessage],
        message_ids: Sequence[ids.MessageId],
        born_ms: int,
    ) -> list[SendReceipt | errors.ArianeError]:
        """One SendMessage (retried as the settings say); a receipt or an error per message."""
        request = self._request(found.topic, part, items, message_ids, born_ms)
        targets = _retry_targets(found, part)
        attempts = self._settings.send_attempts
        for attempt in range(attempts):
            target = targets[attempt % len(targets)]
            try:
                response = await self._call(target.endpoint, request)
            except (transport_mod.BrokerUnreachableError, errors.RequestTimeoutError) as exc:
                self._session.routes.invalidate(found.topic)
                if attempt + 1 == attempts or self._settings.streaming:  # streams retried
                    return [exc] * len(part.indexes)
                _log.warning("send to %s failed, trying again: %s", target.endpoint, exc.message)
            else:
                if attempt + 1 == attempts or not _retry_whole(response):
                    return _results(found.topic, target, part, message_ids, response)
                _log.warning(
                    "%s refused a batch with code %d (%s); trying again",
                    target.endpoint,
                    codes.code_of(response.status),
                    response.status.message,
                )
            await asyncio.sleep(_backoff_s(attempt))
        raise AssertionError("unreachable: the last attempt returns or raises")

    async def _call(
        self, endpoint: str, request: pb.v2_service.SendMessageRequest
    ) -> pb.v2_service.SendMessageResponse:
        async with self._in_flight:
            self._session.used(endpoint)
            if self._settings.streaming:
                return await (await self._stream(endpoint)).send(request)
            return await self._session.transport.unary(
                endpoint, "SendMessage", request, pb.v2_service.SendMessageResponse
            )

    async def _stream(self, endpoint: str) -> send_stream.StreamSender:
        """The stream to ``endpoint``, made on first use; the least recently used one is closed
        when more than ``channels_max`` would be open."""
        self._session.check_open()
        stream = self._streams.get(endpoint)
        if stream is not None:
            self._streams.move_to_end(endpoint)
            return stream
        stream = send_stream.StreamSender(
            self._session.transport,
            endpoint,
            window_max=self._settings.stream_window_max,
            attempts=self._settings.send_attempts,
            timeout_s=self._settings.connection.request_timeout_s,
            backoff_s=_backoff_s,
        )
        self._streams[endpoint] = stream  # before any await: one stream per endpoint
        while len(self._streams) > self._settings.connection.channels_max:
            _, oldest = self._streams.popitem(last=False)
            await oldest.close()
        return stream


def _wire_type(item: OutgoingMessage) -> pb.v2.MessageType:
    """FIFO with a message group, DELAY with a delivery timestamp, else NORMAL."""
    if item.message_group is not None:
        return pb.v2.MessageType.FIFO
    if item.delivery_timestamp_ms is not None:
        return pb.v2.MessageType.DELAY
    return pb.v2.MessageType.NORMAL


def _group_slot(group: str, count: int) -> int:
    """The writable-queue index of a message group (the clients' ``sha256(group) % n``)."""
    return int.from_bytes(hashlib.sha256(group.encode()).digest()[:8], "big") % count


def _key_target(writable: Sequence[route_cache.QueueRoute], key: str) -> route_cache.QueueRoute:
    """The broker group of an idempotency key: ``sha256(key) % groups`` over the writable
    groups sorted by name (so every producer, and every retry, picks the same one while the
    route lists the same groups), as its first writable queue there."""
    groups = sorted({q.broker_name for q in writable})
    chosen = groups[_group_slot(key, len(groups))]
    return next(q for q in writable if q.broker_name == chosen)


def _retry_targets(found: route_cache.TopicRoute, part: _Part) -> list[route_cache.QueueRoute]:
    """The part's broker first; for parts without a message group the other brokers next."""
    if part.pinned:
        return [part.target]
    others = {q.endpoint: q for q in found.writable if q.endpoint != part.target.endpoint}
    return [part.target, *others.values()]


def _backoff_s(attempt: int) -> float:
    return min(RETRY_BACKOFF_MS_INITIAL << attempt, RETRY_BACKOFF_MS_MAX) / 1000


def _retry_whole(response: pb.v2_service.SendMessageResponse) -> bool:
    """Whether the broker refused the whole request with a code worth another try."""
    if codes.is_success(response.status):
        return False
    code = codes.code_of(response.status)
    if code == errors.Code.CODE_UNSPECIFIED:
        return True  # no status: the official clients call this illegal and retry
    error = errors.error_for_code(code, "")
    # Flow control is not retried at once (the official clients do not either).
    return error.retriable and not isinstance(error, errors.TooManyRequestsError)


def _results(
    topic: str,
    target: route_cache.QueueRoute,
    part: _Part,
    message_ids: Sequence[ids.MessageId],
    response: pb.v2_service.SendMessageResponse,
) -> list[SendReceipt | errors.ArianeError]:
    """A receipt or an error per message of the part, from the answer's entries."""
    outcomes = transport_mod.entry_errors(
        target.endpoint,
        response.status,
        [entry.status for entry in response.entries],
        len(part.indexes),
    )
    out: list[SendReceipt | errors.ArianeError] = []
    for position, (index, error) in enumerate(zip(part.indexes, outcomes, strict=True)):
        if error is not None:
            out.append(error)
            continue
        entry = response.entries[position]
        out.append(
            SendReceipt(
                message_id=ids.MessageId(entry.message_id or message_ids[index]),
                topic=topic,
                broker_name=target.broker_name,
                queue_offset=ids.QueueOffset(entry.offset),
            )
        )
    return out
