"""Idempotent ReceiveMessage retries: the answers of recent receives by ``attempt_id``.

The official push consumers (Java ``ProcessQueueImpl.receiveMessage(attemptId)``, Go
``receiveMessageWithAttemptId``, Python) send a fresh uuid as ``attempt_id`` with every
receive and send the *same* one again when the receive failed on the way back (a network
error, a deadline): the broker may have popped messages the client never saw. RocketMQ's POP
keeps the popping ``attemptId`` (``ConsumerOrderInfoManager.checkBlock``, the proxy passes it
as ``PopMessageRequestHeader.attemptId``) and lets the same attempt pop the same offsets again
instead of leaving them invisible until their deadline; Ariane does it for every group: a
receive whose (client id, group, topic, ``attempt_id``) answered with messages before answers
with the same messages and receipt handles, without making them invisible again, as long as
they are still in flight under those handles.

Invariants: at most ``entries_max`` answers are kept (the oldest is forgotten first; a retry
of it then receives anew); an answer expires when the invisible time of its receive has
passed (its messages are due for redelivery then); empty answers are never kept.
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

from ariane.common import clock, ids

T = TypeVar("T")

AttemptKey = tuple[ids.ClientId, ids.GroupName, ids.TopicName, str]
"""(client id, consumer group, topic, attempt id)."""


@dataclasses.dataclass(frozen=True, slots=True)
class _Answer(Generic[T]):
    items: tuple[T, ...]
    expires_ms: int


class ReceiveAttempts(Generic[T]):
    """The bounded table of recent receive answers by attempt.

    Args:
        entries_max: most answers kept, a count.
        time: the clock (monotonic ms).
    """

    def __init__(self, *, entries_max: int, time: clock.Clock) -> None:
        assert entries_max >= 1, "entries_max must be >= 1"
        self._entries_max = entries_max
        self._clock = time
        self._answers: collections.OrderedDict[AttemptKey, _Answer[T]] = collections.OrderedDict()

    def __len__(self) -> int:
        return len(self._answers)

    def remember(self, key: AttemptKey, items: Sequence[T], *, ttl_ms: int) -> None:
        """Keep a non-empty answer of ``key`` for ``ttl_ms`` (the receive's invisible time)."""
        if not items:
            return
        now_ms = self._clock.monotonic_ms()
        self._answers.pop(key, None)
        self._answers[key] = _Answer(tuple(items), now_ms + ttl_ms)
        while self._answers:
            oldest_key, oldest = next(iter(self._answers.items()))
            if oldest.expires_ms > now_ms and len(self._answers) <= self._entries_max:
                break
            del self._answers[oldest_key]

    def replay(self, key: AttemptKey, still_held: Callable[[T], bool]) -> list[T] | None:
        """The earlier answer of ``key``, without the items no longer held under their
        handles (acked, nacked, redelivered), or ``None`` when there is none to replay (never
        answered, expired, forgotten, or nothing of it still held)."""
        answer = self._answers.get(key)
        if answer is None:
            return None
        if answer.expires_ms <= self._clock.monotonic_ms():
            del self._answers[key]
            return None
        held = [item for item in answer.items if still_held(item)]
        return held or None
