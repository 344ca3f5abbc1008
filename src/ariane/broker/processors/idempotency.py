"""Idempotent sends: a message with an idempotency key is stored once per topic within a window.

RocketMQ has no idempotent producer (apache/rocketmq#4933, #10263): a send retried after a lost
answer, a failed-over producer or a re-run Spark task stores its messages again. Here a message
sent over either protocol (``send.SendProcessor`` serves v2 and classic sends alike)
whose user property ``idempotency.IDEMPOTENCY_KEY_PROPERTY`` holds a key K gets the message id
(``UNIQ_KEY``) ``idempotency.message_id_of(K)``, and a send of K when a message of the same
topic with that id is stored here, with a store time within the last ``window_ms``, stores
nothing and is answered OK with the stored message's id and queue offset (so the producer's
receipt says where it is).

Where the window lives: the store's key index (IndexFiles), which already holds
``topic#UNIQ_KEY`` of every message. So the window is persisted with the index (flushed before
each checkpoint, rebuilt from the CommitLog by recovery after a crash), built by a slave from
the CommitLog it replicates (a promoted slave answers the duplicates of what it holds), bounded
on disk by the CommitLog's retention and in memory by nothing but the keys of requests under
way. A hit is read back from the CommitLog and its id and topic compared (index hashes
collide). DELAY messages are looked up in their topic and in the timer topic (a parked message
sits there until due); TRANSACTION messages are not de-duplicated (a half message needs its
own transaction id).

Concurrent sends of one key: ``claim`` marks the keys of a request as under way until
``Claim.release``; a request holding a key under way waits for it, then looks again, so two
concurrent tries of K store one message. A key repeated within one request is stored once and
its repeats answered like the first.

Invariants: for each (topic, key) at most one message is stored per window on this broker
group while the producer keeps sending K to the same broker group (``ariane.client.Producer``
pins a key to ``hash(key) % brokers``); a key seen after the window is stored again.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence

from ariane.common import clock, idempotency, ids, message, topics
from ariane.common import message_id as message_id_mod
from ariane.store import commit_log, dispatcher, index_service, message_store, record_reader

P = message.Property

WINDOW_MS_DEFAULT = 24 * 3_600_000
"""Default de-duplication window, ms: a day, longer than a Spark driver's restart and a
producer's retries; the CommitLog's retention (72 h by default) bounds it anyway."""

INDEX_HITS_MAX = 8
"""Most index hits read back per lookup key (hash collisions are rare)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Stored:
    """The message an earlier try of a key stored.

    Attributes:
        message_id: its id (``UNIQ_KEY``).
        queue_offset: its offset in the queue it was stored in.
        delivery_ms: a DELAY message's delivery time, ms since the epoch, else ``None``.
        queue_id: the queue it was stored in (a parked message: the timer's).
        offset_message_id: its offset message id (store host + CommitLog offset; a classic
            producer's receipt names it).
    """

    message_id: str
    queue_offset: int
    delivery_ms: int | None
    queue_id: int = 0
    offset_message_id: str = ""


Found = Stored | int | None
"""Per request of a batch: ``Stored`` (a duplicate of a stored message), the index of an
earlier request of the same batch with the same key, or ``None`` (to be stored)."""


@dataclasses.dataclass(slots=True)
class Claim:
    """The keys of one request, marked under way until ``release``.

    Attributes:
        found: per request, what ``Found`` says.
    """

    found: list[Found]
    _keys: list[str]
    _window: IdempotencyWindow

    @property
    def duplicates(self) -> bool:
        """Whether some request is not to be stored."""
        return any(f is not None for f in self.found)

    def release(self) -> None:
        """End the claim: waiting requests of the same keys look again (idempotent)."""
        self._window.release(self._keys)
        self._keys = []


def key_of(request: commit_log.AppendRequest) -> str | None:
    """``topic#message id`` of a request with an idempotency key (its real topic: a parked
    DELAY message's ``REAL_TOPIC``), or ``None`` (no key, or a half message)."""
    props = request.message.properties
    if idempotency.IDEMPOTENCY_KEY_PROPERTY not in props:
        return None
    if request.message.topic == topics.TRANS_HALF_TOPIC:
        return None
    topic = props.get(P.REAL_TOPIC, request.message.topic)
    return f"{topic}{dispatcher.KEY_SEPARATOR}{props[P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX]}"


class IdempotencyWindow:
    """Finds earlier tries of idempotent sends in the key index (module docstring).

    Args:
        store: the message store (hits are read back from its CommitLog).
        index: its key index.
        window_ms: how far back a stored message counts, ms of store time.
        time: the clock the window is measured on (the store's).
    """

    def __init__(
        self,
        *,
        store: message_store.MessageStore,
        index: index_service.IndexService,
        window_ms: int,
        time: clock.Clock,
    ) -> None:
        self._store = store
        self._index = index
        self._window_ms = window_ms
        self._clock = time
        self._under_way: dict[str, asyncio.Future[None]] = {}

    async def claim(self, requests: Sequence[commit_log.AppendRequest]) -> Claim | None:
        """Look up each keyed request (after the requests under way with the same keys end)
        and mark the keys to be stored as under way; ``None`` when no request has a key."""
        keys = [key_of(r) for r in requests]
        if not any(keys):
            return None
        while True:
            busy = [self._under_way[k] for k in keys if k is not None and k in self._under_way]
            if not busy:
                break
            await asyncio.wait(busy)
        # From here to the end no await: the look-ups and the marks are one step.
        found: list[Found] = []
        first: dict[str, int] = {}
        for position, (request, key) in enumerate(zip(requests, keys, strict=True)):
            if key is None:
                found.append(None)
            elif key in first:
                found.append(first[key])
            else:
                stored = self._lookup(request, key)
                found.append(stored)
                if stored is None:
                    first[key] = position
        loop = asyncio.get_running_loop()
        for key in first:
            self._under_way[key] = loop.create_future()
        return Claim(found, list(first), self)

    def release(self, keys: Sequence[str]) -> None:
        """Unmark ``keys`` and wake the requests waiting for them."""
        for key in keys:
            done = self._under_way.pop(key, None)
            if done is not None and not done.done():
                done.set_result(None)

    def _lookup(self, request: commit_log.AppendRequest, key: str) -> Stored | None:
        topic, _, message_id = key.rpartition(dispatcher.KEY_SEPARATOR)
        now_ms = self._clock.now_ms()
        places = [topic]
        if P.TIMER_DELIVER_MS in request.message.properties:
            places.append(topics.TIMER_TOPIC)
        for place in places:
            hits = self._index.query(
                f"{place}{dispatcher.KEY_SEPARATOR}{message_id}",
                max_count=INDEX_HITS_MAX,
                begin_ms=max(0, now_ms - self._window_ms),
                end_ms=now_ms + self._window_ms,  # a clock stepped back still finds it
            )
            for offset in hits:
                stored = self._read(offset, topic, message_id)
                if stored is not None:
                    return stored
        return None

    def _read(self, offset: ids.CommitLogOffset, topic: str, message_id: str) -> Stored | None:
        result = self._store.get_message(offset)
        found = result.message
        if result.status is not record_reader.LookupStatus.FOUND or found is None:
            return None
        props = found.properties
        if props.get(P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX) != message_id:
            return None
        if props.get(P.REAL_TOPIC, found.message.topic) != topic:
            return None
        due = props.get(P.TIMER_DELIVER_MS, "")
        return Stored(
            message_id,
            found.queue_offset,
            int(due) if due.isdigit() else None,
            found.queue_id,
            message_id_mod.create_offset_message_id(found.store_host, found.commit_log_offset),
        )
