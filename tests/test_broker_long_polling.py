"""Long polling parks receive requests, wakes them on notify, times out, never loses a wake-up."""

from __future__ import annotations

import asyncio

import pytest

from ariane.broker import settings as broker_settings
from ariane.broker.processors import long_polling
from ariane.common import errors

KEY = ("orders", 0)
DEADLINE_S = 10.0
"""Upper bound for waits that must end by an event, not by this timeout."""


def _poller(parked_max: int = 100, keys_max: int = 100) -> long_polling.LongPolling:
    return long_polling.LongPolling(
        broker_settings.LongPollingSettings(
            parked_requests_max=parked_max, notify_keys_max=keys_max
        )
    )


async def _until_parked(poller: long_polling.LongPolling, count: int) -> None:
    """Yield to the loop until ``count`` requests are parked (callers bound it by wait_for)."""
    while poller.parked < count:  # noqa: ASYNC110 - yields, never sleeps for time
        await asyncio.sleep(0)


def test_notify_wakes_a_parked_request() -> None:
    """A request parked on a key returns True as soon as that key is notified."""

    async def scenario() -> None:
        poller = _poller()
        stamp = poller.snapshot()
        waiter = asyncio.create_task(poller.hold(KEY, DEADLINE_S, since=stamp))
        await asyncio.wait_for(_until_parked(poller, 1), DEADLINE_S)
        assert poller.notify(("orders", 1)) == 0  # another key wakes nobody
        assert poller.notify(KEY) == 1
        assert await asyncio.wait_for(waiter, DEADLINE_S) is True
        assert poller.parked == 0

    asyncio.run(scenario())


def test_a_notify_between_check_and_park_is_not_lost() -> None:
    """A notify after the snapshot but before hold() makes hold return at once."""

    async def scenario() -> None:
        poller = _poller()
        stamp = poller.snapshot()
        poller.notify(KEY)  # new messages arrive while the caller was reading the store
        assert await asyncio.wait_for(poller.hold(KEY, DEADLINE_S, since=stamp), 1.0) is True
        assert poller.parked == 0

    asyncio.run(scenario())


def test_hold_times_out_without_notify() -> None:
    """With no notify the request returns False after its (short) timeout."""

    async def scenario() -> None:
        poller = _poller()
        assert await poller.hold(KEY, 0.01, since=poller.snapshot()) is False
        assert await poller.hold(KEY, 0, since=poller.snapshot()) is False
        assert poller.parked == 0

    asyncio.run(scenario())


def test_parked_requests_are_bounded() -> None:
    """One request beyond parked_requests_max gets TooManyRequestsError; a freed slot reopens."""

    async def scenario() -> None:
        poller = _poller(parked_max=2)
        stamp = poller.snapshot()
        waiters = [
            asyncio.create_task(poller.hold(("t", n), DEADLINE_S, since=stamp)) for n in range(2)
        ]
        await asyncio.wait_for(_until_parked(poller, 2), DEADLINE_S)
        with pytest.raises(errors.TooManyRequestsError):
            await poller.hold(("t", 9), DEADLINE_S, since=stamp)
        poller.notify(("t", 0))
        assert await asyncio.wait_for(waiters[0], DEADLINE_S) is True
        third = asyncio.create_task(poller.hold(("t", 9), DEADLINE_S, since=poller.snapshot()))
        await asyncio.wait_for(_until_parked(poller, 2), DEADLINE_S)
        assert poller.wake_all() == 2
        results = await asyncio.wait_for(asyncio.gather(waiters[1], third), DEADLINE_S)
        assert list(results) == [True, True]

    asyncio.run(scenario())


def test_a_cancelled_request_frees_its_slot() -> None:
    """Cancelling a parked request (client gone) releases its slot and its key."""

    async def scenario() -> None:
        poller = _poller(parked_max=1)
        waiter = asyncio.create_task(poller.hold(KEY, DEADLINE_S, since=poller.snapshot()))
        await asyncio.wait_for(_until_parked(poller, 1), DEADLINE_S)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        assert poller.parked == 0
        assert await poller.hold(KEY, 0.001, since=poller.snapshot()) is False

    asyncio.run(scenario())


def test_forgotten_stamps_cause_spurious_wakeups_never_lost_ones() -> None:
    """With notify_keys_max=1, a key's old notify folds into the floor and still wakes."""

    async def scenario() -> None:
        poller = _poller(keys_max=1)
        stamp = poller.snapshot()
        poller.notify(KEY)
        poller.notify(("other", 1))  # evicts KEY's stamp
        assert poller.last_notify(KEY) > stamp
        assert await asyncio.wait_for(poller.hold(KEY, DEADLINE_S, since=stamp), 1.0) is True
        assert poller.notify_many([KEY, ("other", 1)]) == 0

    asyncio.run(scenario())
