"""Long polling: park a receive request that found nothing until new messages or its timeout.

RocketMQ's ``PopLongPollingService`` parks pop requests and wakes them when a message arrives for
their topic/queue. Here a request parks on a *key* — ``(topic, queue id)`` for one queue, or the
topic for "any queue of this topic" — and the put path calls ``notify`` for every key the new
messages concern (usually both).

No lost wake-up: the caller takes ``stamp = poller.snapshot()`` *before* it looks for messages,
then ``await poller.hold(key, timeout_s, since=stamp)``. Every ``notify`` draws a new value from
one counter and records it as the key's last-notify stamp, so a notify that happened between the
check and the park makes ``hold`` return at once. Stamps of at most ``notify_keys_max`` keys are
remembered; older ones fold into a floor stamp, which can only cause a spurious wake-up (the
caller looks again and parks again), never a lost one.

Parked requests are bounded by ``parked_requests_max``; one more raises ``TooManyRequestsError``.
Runs on one event loop; not thread-safe.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Hashable, Iterable, Sequence

from ariane.broker import settings
from ariane.common import errors


class LongPolling:
    """Parking lot of receive requests, keyed by what they wait for.

    Args:
        polling_settings: ``parked_requests_max`` and ``notify_keys_max``.
    """

    def __init__(self, polling_settings: settings.LongPollingSettings) -> None:
        self._settings = polling_settings
        self._counter = 0
        self._floor = 0
        self._stamps: collections.OrderedDict[Hashable, int] = collections.OrderedDict()
        self._waiters: dict[Hashable, set[asyncio.Future[None]]] = {}
        self._parked = 0

    @property
    def parked(self) -> int:
        """Requests parked right now."""
        return self._parked

    def snapshot(self) -> int:
        """The current stamp; take it before looking for messages, pass it to ``hold``."""
        return self._counter

    def last_notify(self, key: Hashable) -> int:
        """The stamp of the last ``notify(key)`` (the floor if it was forgotten or never made)."""
        return self._stamps.get(key, self._floor)

    async def hold(self, key: Hashable, timeout_s: float, *, since: int) -> bool:
        """Wait until ``key`` is notified after ``since``, or ``timeout_s`` passes.

        Args:
            key: what the request waits for, e.g. ``(topic, queue_id)`` or ``topic``.
            timeout_s: longest wait, in seconds; ≤ 0 checks without waiting.
            since: the ``snapshot()`` taken before the caller last looked for messages.

        Returns:
            ``True`` if notified (look again), ``False`` on timeout.

        Raises:
            TooManyRequestsError: ``parked_requests_max`` requests are parked already.
        """
        return await self.hold_any((key,), timeout_s, since=since)

    async def hold_any(self, keys: Sequence[Hashable], timeout_s: float, *, since: int) -> bool:
        """``hold`` on several keys at once (a receive that reads a topic and its group's
        ``%RETRY%`` topic): wakes on a notify of any of them; counts as one parked request."""
        if any(self.last_notify(key) > since for key in keys):
            return True
        if timeout_s <= 0:
            return False
        if self._parked >= self._settings.parked_requests_max:
            raise errors.TooManyRequestsError(
                f"{self._parked} receive requests are parked (parked_requests_max); retry later"
            )
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        for key in keys:
            self._waiters.setdefault(key, set()).add(future)
        self._parked += 1
        try:
            await asyncio.wait_for(future, timeout_s)
            return True
        except TimeoutError:
            return False
        finally:
            self._parked -= 1
            for key in keys:
                waiters = self._waiters.get(key)
                if waiters is not None:
                    waiters.discard(future)
                    if not waiters:
                        del self._waiters[key]

    def notify(self, key: Hashable) -> int:
        """Record new messages for ``key`` and wake its parked requests.

        Returns:
            how many parked requests were woken.
        """
        self._counter += 1
        self._stamps[key] = self._counter
        self._stamps.move_to_end(key)
        while len(self._stamps) > self._settings.notify_keys_max:
            _old_key, old_stamp = self._stamps.popitem(last=False)
            self._floor = max(self._floor, old_stamp)
        return self._wake(self._waiters.get(key, ()))

    def notify_many(self, keys: Iterable[Hashable]) -> int:
        """``notify`` each key; returns the total woken."""
        return sum(self.notify(key) for key in keys)

    def wake_all(self) -> int:
        """Wake every parked request (shutdown); returns how many were woken."""
        self._counter += 1
        self._floor = self._counter
        self._stamps.clear()
        return sum(self._wake(waiters) for waiters in list(self._waiters.values()))

    @staticmethod
    def _wake(waiters: Iterable[asyncio.Future[None]]) -> int:
        woken = 0
        for future in list(waiters):
            if not future.done():
                future.set_result(None)
                woken += 1
        return woken
