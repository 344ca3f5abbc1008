"""The one send processor (RocketMQ ``SendMessageProcessor``) for both protocols.

A protocol adapter turns its request into drafts (``send_v2`` for v2 ``SendMessage``,
``send_classic`` for Remoting ``SEND_MESSAGE``/``V2``/``BATCH``); the core here routes each
draft (a DELAY or timer message parked by the schedule hook, ``broker.schedule``; a
TRANSACTION one made a half message by ``transaction.TransactionalMessageService``), encodes it
to its stored form once (``CommitLog.prepare``, which also checks body and properties: the
check is the encoding), drops the messages an earlier try of their idempotency key stored
(``idempotency``), appends the rest as one batch, records stored half messages, counts and
wakes long polling; the adapter answers from the results, in its protocol's terms.

Invariants:

* a request is all-or-nothing: every message is translated, routed and encoded before
  anything reaches the store; the first one refused refuses the whole request (body and
  property problems as their error, the rarer store problems as the store's status for
  every message) and nothing of it is stored (as the Java proxy, whose ``buildMessage``
  throws for the request);
* a message's properties are encoded once, after its route rewrote them (a classic message
  stored as sent is not encoded at all: its properties string is the stored one);
* idempotent sends (Ariane's, RocketMQ has none): a message whose user property
  ``ARIANE_IDEMPOTENCY_KEY`` holds a key is stored with the message id derived from it
  (``common.idempotency``) whichever protocol sent it, and one an earlier try stored within
  the window is not stored again but answered OK with where that try went (``idempotency``).
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Sequence
from typing import Protocol

from ariane.broker.processors import idempotency as idempotency_mod
from ariane.broker.processors import long_polling, send_classic, send_draft, send_v2
from ariane.broker.tables import lite_topics, topic_config, traffic_stats
from ariane.common import clock, errors, histogram, idempotency, ids, message, topics
from ariane.store import commit_log, message_store
from ariane.store import settings as store_settings_mod

P = message.Property
Route = send_draft.Route

Found = commit_log.PutMessageResult | idempotency_mod.Stored | int
"""Per message of a request: the store's result, the message an earlier try stored, or the
index of the earlier message of the same request with the same key (``idempotency.Found``)."""

_STATUS_ERRORS: dict[commit_log.PutMessageStatus, errors.Code] = {
    commit_log.PutMessageStatus.FLUSH_DISK_TIMEOUT: errors.Code.MASTER_PERSISTENCE_TIMEOUT,
    commit_log.PutMessageStatus.FLUSH_SLAVE_TIMEOUT: errors.Code.SLAVE_PERSISTENCE_TIMEOUT,
    commit_log.PutMessageStatus.SLAVE_NOT_AVAILABLE: errors.Code.HA_NOT_AVAILABLE,
    commit_log.PutMessageStatus.IN_SYNC_REPLICAS_NOT_ENOUGH: errors.Code.HA_NOT_AVAILABLE,
    commit_log.PutMessageStatus.SERVICE_NOT_AVAILABLE: errors.Code.INTERNAL_SERVER_ERROR,
    commit_log.PutMessageStatus.CREATE_MAPPED_FILE_FAILED: errors.Code.INTERNAL_SERVER_ERROR,
    commit_log.PutMessageStatus.MESSAGE_ILLEGAL: errors.Code.BAD_REQUEST,
    commit_log.PutMessageStatus.PROPERTIES_SIZE_EXCEEDED: errors.Code.MESSAGE_PROPERTIES_TOO_LARGE,
    commit_log.PutMessageStatus.OS_PAGE_CACHE_BUSY: errors.Code.TOO_MANY_REQUESTS,
    commit_log.PutMessageStatus.CONSUME_QUEUE_NUM_EXCEEDED: errors.Code.TOO_MANY_REQUESTS,
    commit_log.PutMessageStatus.UNKNOWN_ERROR: errors.Code.INTERNAL_ERROR,
}
"""How store outcomes map to v2 codes (proxy ``SendMessageActivity``/``ProxyException``)."""

_STATUS_TEXT: dict[commit_log.PutMessageStatus, str] = {
    commit_log.PutMessageStatus.FLUSH_DISK_TIMEOUT: "stored but not flushed in time (SYNC_FLUSH)",
    commit_log.PutMessageStatus.SERVICE_NOT_AVAILABLE: (
        "service not available now: the disk may be full, the store stopping, or this broker "
        "is no writable master (a slave, a master fenced by a newer epoch, or one whose lease "
        "lapsed): retry on another broker"
    ),
    commit_log.PutMessageStatus.IN_SYNC_REPLICAS_NOT_ENOUGH: (
        "in-sync replicas not enough (fewer than min_in_sync_replicas): not stored, retry later"
    ),
}


@dataclasses.dataclass(frozen=True, slots=True)
class SendOutcome:
    """The answer for one message of a v2 request.

    Attributes:
        code: OK or the error code.
        text: the status message.
        message_id: the client's message id (echoed back).
        queue_offset: the queue offset it got, or -1.
        delivery_ms: a parked DELAY message's delivery time (the recall handle names it).
        transaction_id: the transaction id of a stored half message, else "".
    """

    code: errors.Code
    text: str
    message_id: str
    queue_offset: int = -1
    delivery_ms: int | None = None
    transaction_id: str = ""


class SendCounters(Protocol):
    """The totals the send path adds to (``runtime.Counters``); ``message_size_bytes`` holds
    one histogram per message type but MIXED."""

    messages_in: int
    bytes_in: int
    message_size_bytes: dict[message.MessageType, histogram.Histogram]
    traffic: traffic_stats.TrafficStats


class ScheduleHook(Protocol):
    """Parks DELAY-level and timer messages (``schedule.service.ScheduleService``)."""

    def park(
        self, request: commit_log.AppendRequest, *, delivery_ms: int | None
    ) -> commit_log.AppendRequest:
        """The request rewritten into the timer topic (see ``ScheduleService.park``)."""
        ...

    def park_level(self, request: commit_log.AppendRequest, level: int) -> commit_log.AppendRequest:
        """The request rewritten into ``SCHEDULE_TOPIC_XXXX`` queue ``level - 1``."""
        ...


class HalfMessages(Protocol):
    """Where TRANSACTION sends go (``transaction.TransactionalMessageService``)."""

    def to_half(self, request: commit_log.AppendRequest) -> commit_log.AppendRequest:
        """The half message's append request (raises TooManyRequestsError when full)."""

    def prepared(self, half: commit_log.AppendRequest, result: commit_log.PutMessageResult) -> str:
        """Record a stored half message; returns its transaction id."""


class SendProcessor:
    """Validates, encodes and appends the messages of send requests of either protocol
    (RocketMQ ``SendMessageProcessor``; module docstring).

    Args:
        store: the message store the batch is appended to.
        topics: the topic table (``require`` with auto-create).
        polling: long polling, notified of the topics that got messages.
        counters: the broker's totals (messages and bytes in).
        store_settings: the body and property size limits.
        schedule: parks DELAY messages; without it they answer UNSUPPORTED.
        half_messages: the transaction service, or ``None`` to refuse TRANSACTION sends.
        idempotency_window: finds earlier tries of messages with an idempotency key
            (``idempotency``); ``None`` stores every try.
        time: the clock of classic timer delays, broker-made ``UNIQ_KEY`` ids and lite
            topics' activity.
        lite: the broker's lite topics (``None``: LITE sends answer UNSUPPORTED).
    """

    def __init__(
        self,
        *,
        store: message_store.MessageStore,
        topics: topic_config.TopicConfigManager,
        polling: long_polling.LongPolling,
        counters: SendCounters,
        store_settings: store_settings_mod.StoreSettings,
        schedule: ScheduleHook | None = None,
        half_messages: HalfMessages | None = None,
        idempotency_window: idempotency_mod.IdempotencyWindow | None = None,
        time: clock.Clock | None = None,
        lite: lite_topics.LiteTopicTable | None = None,
    ) -> None:
        self._lite = lite
        self._time = time or clock.SystemClock()
        self._store = store
        self._polling = polling
        self._counters = counters
        self._limits = store_settings
        self._schedule = schedule
        self._half = half_messages
        self._idempotency = idempotency_window
        round_robin = itertools.count()
        self._v2 = send_v2.V2Drafts(
            table=topics,
            store_settings=store_settings,
            round_robin=round_robin,
            delay_supported=schedule is not None,
            transactions_supported=half_messages is not None,
            lite=lite,
            time=self._time,
        )
        self._classic = send_classic.ClassicDrafts(
            table=topics,
            store_settings=store_settings,
            round_robin=round_robin,
            time=self._time,
        )

    async def send(
        self, batch: Sequence[message.IncomingMessage], *, born_ip: str
    ) -> list[SendOutcome]:
        """v2 ``SendMessage``: check every message, append all of them as one atomic batch,
        answer each.

        Args:
            batch: the decoded messages of one request.
            born_ip: the producer's IP as seen by the server (stored as BORNHOST).

        Returns:
            one outcome per message, in request order.

        Raises:
            ArianeError: the error of the first invalid message (its class and code, the
                message's position in the text); nothing of the request was stored.
        """
        drafts = self._v2.drafts(batch, born_ip)
        routed, found, transaction_ids = await self._commit(drafts, refuse=True)
        answered: list[SendOutcome] = []
        for incoming, request, result, tid in zip(
            batch, routed, found, transaction_ids, strict=True
        ):
            if isinstance(result, int):
                answered.append(answered[result])
            elif isinstance(result, idempotency_mod.Stored):
                answered.append(
                    SendOutcome(
                        errors.Code.OK,
                        "OK",
                        result.message_id,
                        result.queue_offset,
                        result.delivery_ms,
                    )
                )
            else:
                answered.append(_outcome(incoming, request, result, tid))
                if self._lite is not None and P.LITE_TOPIC in request.message.properties:
                    self._lite_stored(request, result)
        return answered

    def _lite_stored(
        self, request: commit_log.AppendRequest, result: commit_log.PutMessageResult
    ) -> None:
        """Note where a stored lite message went (its lite topic's lag and activity)."""
        if self._lite is not None and result.status.is_stored:
            self._lite.stored(
                ids.TopicName(request.message.topic),
                request.message.properties[P.LITE_TOPIC],
                result.queue_offset,
                self._time.monotonic_ms(),
                result.store_timestamp_ms,
            )

    async def send_classic(
        self, request: send_classic.ClassicSendRequest
    ) -> send_classic.ClassicSendResult:
        """A classic send: check every message, append them atomically, say where they went.

        Raises:
            ArianeError: as ``send_classic.ClassicDrafts.drafts``; body and property problems
                (MessageBodyEmptyError, MessageBodyTooLargeError, MessagePropertiesTooLargeError,
                BadRequestError); TooManyRequestsError: the timer wheel or the half-message
                table is full. Nothing of the request was stored.
        """
        drafts = self._classic.drafts(request)
        routed, found, transaction_ids = await self._commit(drafts, refuse=False)
        results: list[commit_log.PutMessageResult | idempotency_mod.Stored] = []
        for item in found:
            results.append(results[item] if isinstance(item, int) else item)
        first = results[0]
        if isinstance(first, idempotency_mod.Stored):
            status, queue_id = commit_log.PutMessageStatus.PUT_OK, ids.QueueId(first.queue_id)
        else:
            status, queue_id = first.status, routed[0].queue_id
        for result in results:
            if isinstance(result, commit_log.PutMessageResult) and not result.status.is_stored:
                status = result.status
                break
        return send_classic.ClassicSendResult(
            status=status,
            queue_id=queue_id,
            queue_offset=first.queue_offset,
            offset_message_ids=tuple(
                r.offset_message_id if isinstance(r, idempotency_mod.Stored) else r.message_id
                for r in results
            ),
            unique_keys=tuple(
                r.message.properties[P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX] for r in routed
            ),
            transaction_id=transaction_ids[0],
        )

    async def _commit(
        self, drafts: Sequence[send_draft.Draft], *, refuse: bool
    ) -> tuple[list[commit_log.AppendRequest], list[Found], list[str]]:
        """Route, encode and append ``drafts`` (module docstring); the routed requests, what
        became of each and each stored half message's transaction id ("" for the others).

        ``refuse``: an invalid message's error names its position (``refuse_request``).

        Raises:
            ArianeError: a message could not be routed, or its body or properties are
                refused; nothing was stored.
        """
        routed: list[commit_log.AppendRequest] = []
        prepared: list[commit_log.PreparedAppend] = []
        prepare = self._store.commit_log.prepare  # pure: the put lock is taken to append
        refused: commit_log.PutMessageStatus | None = None
        for position, draft in enumerate(drafts):
            try:
                request = draft.request if draft.route is Route.STORE else self._route(draft)
                item = prepare(request, properties_bytes=draft.properties_bytes)
                if item.record is None:
                    error = send_draft.problem_error(item, self._limits)
                    if error is not None:
                        raise error
                    refused = refused or item.status
            except errors.ArianeError as exc:
                if refuse:
                    raise send_draft.refuse_request(exc, position, len(drafts)) from None
                raise
            routed.append(request)
            prepared.append(item)
        if refused is not None:  # a store problem: the request answers its status, unstored
            return routed, [commit_log.PutMessageResult(refused)] * len(drafts), [""] * len(drafts)
        found = await self._put(prepared)
        return routed, found, self._account(drafts, routed, found)

    def _route(self, draft: send_draft.Draft) -> commit_log.AppendRequest:
        route = draft.route
        if route is Route.HALF and self._half is not None:
            return self._half.to_half(draft.request)
        schedule = self._schedule
        if route is Route.TIMER and schedule is not None:
            return schedule.park(draft.request, delivery_ms=draft.delivery_ms)
        if route is Route.LEVEL and schedule is not None:
            return schedule.park_level(draft.request, draft.level)
        raise errors.UnsupportedError(f"{route.value} sends are not supported by this broker")

    async def _put(self, prepared: list[commit_log.PreparedAppend]) -> list[Found]:
        """Append ``prepared`` as one batch, but those an earlier try stored
        (``idempotency``): for them the stored message, or the index of the request of this
        batch with the same key."""
        window = self._idempotency
        key = idempotency.IDEMPOTENCY_KEY_PROPERTY
        if window is not None and not any(key in p.request.message.properties for p in prepared):
            window = None  # no message has a key: nothing to look up or claim
        claim = None if window is None else await window.claim([p.request for p in prepared])
        try:
            if claim is None or not claim.duplicates:
                return list(await self._store.put_prepared(prepared))
            fresh = [p for p, f in zip(prepared, claim.found, strict=True) if f is None]
            results = iter(await self._store.put_prepared(fresh) if fresh else [])
            return [next(results) if f is None else f for f in claim.found]
        finally:
            if claim is not None:
                claim.release()

    def _account(
        self,
        drafts: Sequence[send_draft.Draft],
        routed: Sequence[commit_log.AppendRequest],
        found: Sequence[Found],
    ) -> list[str]:
        """Count the stored messages (once per request, in total and per topic as sent), wake
        long polling for their topics and record the stored half messages; each message's
        transaction id or ""."""
        transaction_ids: list[str] = []
        stored_topics: dict[str, tuple[int, int]] = {}  # topic -> (messages, body bytes)
        stored = stored_bytes = 0
        sizes = self._counters.message_size_bytes
        half = self._half
        for draft, request, result in zip(drafts, routed, found, strict=True):
            tid = ""
            if isinstance(result, commit_log.PutMessageResult) and result.status.is_stored:
                if half is not None and request.message.topic == topics.TRANS_HALF_TOPIC:
                    tid = half.prepared(request, result)
                stored += 1
                size = len(request.message.body)
                messages, topic_bytes = stored_topics.get(draft.topic, (0, 0))
                stored_topics[draft.topic] = (messages + 1, topic_bytes + size)
                stored_bytes += size
                sizes[draft.kind].observe(size)
            transaction_ids.append(tid)
        counters = self._counters
        counters.messages_in += stored
        counters.bytes_in += stored_bytes
        for topic, (messages, topic_bytes) in stored_topics.items():
            counters.traffic.put(topic, messages, topic_bytes)
        if stored_topics:
            self._polling.notify_many(stored_topics)
        return transaction_ids


def _outcome(
    incoming: message.IncomingMessage,
    request: commit_log.AppendRequest,
    result: commit_log.PutMessageResult,
    transaction_id: str,
) -> SendOutcome:
    if result.status is commit_log.PutMessageStatus.PUT_OK:
        return SendOutcome(
            errors.Code.OK,
            "OK",
            request.message.properties.get(P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or incoming.message_id,
            result.queue_offset,
            incoming.delivery_timestamp_ms if send_v2.parks(incoming) else None,
            transaction_id,
        )
    code = _STATUS_ERRORS.get(result.status, errors.Code.INTERNAL_ERROR)
    text = _STATUS_TEXT.get(result.status, f"store answered {result.status.value}")
    return SendOutcome(code, text, incoming.message_id, result.queue_offset, None, transaction_id)
