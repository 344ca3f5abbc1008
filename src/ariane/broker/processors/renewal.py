"""Server-side invisible-time renewal of push consumers' messages (the RocketMQ 5 proxy's
``DefaultReceiptHandleManager`` with ``ReceiptHandleGroup`` and ``RenewStrategyPolicy``).

The official push consumers (Java ``ProcessQueueImpl``, Go ``process_queue.go``, Python
``push_consumer.py``, Node ``PushConsumer.ts``, C++ ``ProcessQueueImpl``) all receive with
``auto_renew = true`` and no invisible duration, and none of them renews a message while its
listener runs: they call ChangeInvisibleDuration only to nack. The proxy keeps the message
invisible instead, and so does this table:

* a receive with ``auto_renew`` ``track``s each delivered handle under (client id, group) and
  the handle the client holds (its *original* handle);
* every ``renew_period_ms`` ``renew_once`` (run by ``services.receipt_renewal``) looks at each
  tracked handle: when the client is gone (``is_online`` false) its handles are made visible
  again after ``clear_invisible_ms`` and dropped (``clearGroup``); a handle whose message
  becomes visible within ``renew_ahead_ms`` is renewed with ChangeInvisibleDuration for
  ``renew_delays_ms[n]`` (the attempt count is unchanged) and its *current* handle remembered;
  past ``renew_max_ms`` since the receive it is made visible after the group's retry backoff
  (a failed attempt) and dropped;
* Ack, ChangeInvisibleDuration and ForwardMessageToDeadLetterQueue of a tracked original
  handle use its current handle (``take``), and stop tracking it (``removeReceiptHandle``).

So a listener that runs longer than the invisible duration neither sees a duplicate delivery
nor loses its ack. Invariants: used from the broker's event loop only; at most
``handles_max`` handles are tracked (more are not renewed, with a warning); nothing is
persisted: after a restart the clients reconnect and their old handles are stale anyway.
"""

from __future__ import annotations

import dataclasses
import enum
import logging
from collections.abc import Callable
from typing import Protocol

from ariane.broker.processors import renewal_settings
from ariane.common import clock, errors, ids

_log = logging.getLogger(__name__)

HandleKey = tuple[ids.ClientId, ids.GroupName]
"""(client id, consumer group): the proxy's ``ReceiptHandleGroupKey`` (channel, group)."""


class InvisibleTimeChanger(Protocol):
    """``ConsumeProcessor.change_invisible``: move a delivery's deadline, return the new
    handle; raises ``InvalidReceiptHandleError`` for a stale or unknown handle."""

    def __call__(
        self, group: ids.GroupName, topic: str, receipt_text: str, invisible_ms: int
    ) -> str:
        """The new receipt handle of the delivery."""
        ...


class _Outcome(enum.Enum):
    """What one renewal look at a handle did."""

    WAIT = "wait"
    RENEWED = "renewed"
    DROPPED = "dropped"


@dataclasses.dataclass(slots=True)
class _Tracked:
    """One tracked delivery (the proxy's ``MessageReceiptHandle``)."""

    topic: str
    message_id: str
    current: str
    attempt: int
    received_ms: int
    visible_ms: int
    renewals: int = 0


class ReceiptRenewals:
    """The table of auto-renewed receipt handles and its renewal pass.

    Args:
        change_invisible: ChangeInvisibleDuration of the consume path.
        is_online: whether a client id still has a session (terminated, stream closed and
            expired clients do not).
        retry_delay_ms: the group's retry backoff after delivery attempt n failed, ms.
        settings: periods, delays and the table bound.
        time: the clock (monotonic ms).
    """

    def __init__(
        self,
        *,
        change_invisible: InvisibleTimeChanger,
        is_online: Callable[[ids.ClientId], bool],
        retry_delay_ms: Callable[[ids.GroupName, int], int],
        settings: renewal_settings.RenewalSettings,
        time: clock.Clock,
    ) -> None:
        self._change = change_invisible
        self._is_online = is_online
        self._retry_delay_ms = retry_delay_ms
        self._settings = settings
        self._clock = time
        self._groups: dict[HandleKey, dict[str, _Tracked]] = {}
        self._count = 0
        self._warned_full = False

    def __len__(self) -> int:
        return self._count

    def track(
        self,
        key: HandleKey,
        *,
        topic: str,
        message_id: str,
        receipt_text: str,
        invisible_ms: int,
        attempt: int,
    ) -> None:
        """Renew a just-delivered message until it is acked, nacked or its client goes away.

        Args:
            key: the receiving client and its group.
            topic: the message's topic (as the client names it in Ack).
            message_id: its message id (logs).
            receipt_text: the handle delivered to the client.
            invisible_ms: the invisible duration the receive gave it, ms.
            attempt: its delivery attempt (the retry backoff when renewal stops).
        """
        if self._count >= self._settings.handles_max:
            if not self._warned_full:
                _log.warning(
                    "renewal: %d receipt handles tracked (handles_max); newer messages keep "
                    "their invisible time without renewal",
                    self._count,
                )
                self._warned_full = True
            return
        now_ms = self._clock.monotonic_ms()
        handles = self._groups.setdefault(key, {})
        if receipt_text not in handles:
            self._count += 1
        handles[receipt_text] = _Tracked(
            topic, message_id, receipt_text, attempt, now_ms, now_ms + invisible_ms
        )

    def take(self, key: HandleKey, receipt_text: str) -> str:
        """The current handle of the delivery the client knows as ``receipt_text`` (that
        handle itself when it is not tracked), and stop renewing it."""
        handles = self._groups.get(key)
        tracked = None if handles is None else handles.pop(receipt_text, None)
        if tracked is None:
            return receipt_text
        self._count -= 1
        self._warned_full = False
        if not handles:
            del self._groups[key]
        return tracked.current

    def current(self, key: HandleKey, receipt_text: str) -> str:
        """The current handle of ``receipt_text`` without untracking it."""
        tracked = self._groups.get(key, {}).get(receipt_text)
        return receipt_text if tracked is None else tracked.current

    def renew_once(self) -> int:
        """One pass over every tracked handle (proxy ``scheduleRenewTask``); returns how many
        were renewed."""
        renewed = 0
        for key in list(self._groups):
            if not self._is_online(key[0]):
                self._clear(key)
                continue
            handles = self._groups[key]
            for original in list(handles):
                outcome = self._renew(key, handles[original])
                if outcome is _Outcome.RENEWED:
                    renewed += 1
                elif outcome is _Outcome.DROPPED:
                    del handles[original]
                    self._count -= 1
            if not handles:
                del self._groups[key]
        return renewed

    def _renew(self, key: HandleKey, tracked: _Tracked) -> _Outcome:
        """Renew one handle if it is due."""
        now_ms = self._clock.monotonic_ms()
        if tracked.visible_ms - now_ms > self._settings.renew_ahead_ms:
            return _Outcome.WAIT
        group = key[1]
        if now_ms - tracked.received_ms >= self._settings.renew_max_ms:
            delay_ms = self._retry_delay_ms(group, tracked.attempt)
            self._change_quietly(group, tracked, delay_ms, "stop renewing")
            return _Outcome.DROPPED
        invisible_ms = self._settings.renew_delay_ms(tracked.renewals)
        try:
            tracked.current = self._change(group, tracked.topic, tracked.current, invisible_ms)
        except errors.ArianeError as exc:  # acked by another path, expired, topic deleted
            _log.debug("renewal of %s in %s stopped: %s", tracked.message_id, group, exc)
            return _Outcome.DROPPED
        tracked.visible_ms = now_ms + invisible_ms
        tracked.renewals += 1
        return _Outcome.RENEWED

    def _clear(self, key: HandleKey) -> None:
        """The client went away: its messages become visible soon (proxy ``clearGroup``)."""
        handles = self._groups.pop(key)
        self._count -= len(handles)
        for tracked in handles.values():
            self._change_quietly(key[1], tracked, self._settings.clear_invisible_ms, "clear")
        _log.info("renewal: client %s of %s gone; %d messages released", *key, len(handles))

    def _change_quietly(self, group: ids.GroupName, tracked: _Tracked, ms: int, why: str) -> None:
        try:
            self._change(group, tracked.topic, tracked.current, max(1, ms))
        except errors.ArianeError as exc:
            _log.debug("renewal %s of %s in %s: %s", why, tracked.message_id, group, exc)
