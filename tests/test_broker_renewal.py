"""The renewal table of auto-renewed receipt handles (the proxy's ``DefaultReceiptHandleManager``)
and the table of receive answers by ``attempt_id``, driven by a manual clock."""

from __future__ import annotations

import pytest

from ariane.broker.processors import receive_attempts, renewal, renewal_settings
from ariane.common import clock, errors, ids

KEY = (ids.ClientId("c1"), ids.GroupName("g"))
SETTINGS = renewal_settings.RenewalSettings(
    renew_period_ms=100, renew_ahead_ms=1_000, renew_max_ms=10_000, renew_delays_ms=(3_000, 5_000)
)


class Changer:
    """A fake ChangeInvisibleDuration: records calls, issues ``h1``, ``h2`` …"""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []
        self.stale: set[str] = set()

    def __call__(
        self, group: ids.GroupName, topic: str, receipt_text: str, invisible_ms: int
    ) -> str:
        if receipt_text in self.stale:
            raise errors.InvalidReceiptHandleError("stale")
        self.calls.append((receipt_text, invisible_ms))
        return f"h{len(self.calls)}"


def _table(
    time: clock.ManualClock, changer: Changer, online: set[str], **kw: int
) -> renewal.ReceiptRenewals:
    settings = renewal_settings.RenewalSettings(
        renew_period_ms=100,
        renew_ahead_ms=1_000,
        renew_max_ms=10_000,
        renew_delays_ms=(3_000, 5_000),
        **kw,
    )
    return renewal.ReceiptRenewals(
        change_invisible=changer,
        is_online=lambda client: client in online,
        retry_delay_ms=lambda group, attempt: 700 * attempt,
        settings=settings,
        time=time,
    )


def _track(table: renewal.ReceiptRenewals, handle: str = "h0") -> None:
    table.track(KEY, topic="t", message_id="m", receipt_text=handle, invisible_ms=2_000, attempt=2)


def test_handle_is_renewed_ahead_of_its_deadline_and_acks_with_the_current_one() -> None:
    """Nothing happens until the message is 1 s from visible; then it is renewed with the
    policy's delays, and ``take`` answers the newest handle and stops renewing it."""
    time, changer = clock.ManualClock(), Changer()
    table = _table(time, changer, {"c1"})
    _track(table)
    time.advance_ms(999)
    assert table.renew_once() == 0
    time.advance_ms(1)
    assert table.renew_once() == 1
    assert changer.calls == [("h0", 3_000)]
    time.advance_ms(2_000)
    assert table.renew_once() == 1
    assert changer.calls[-1] == ("h1", 5_000)
    assert table.current(KEY, "h0") == "h2"
    assert table.take(KEY, "h0") == "h2"
    assert len(table) == 0
    assert table.take(KEY, "h0") == "h0"


def test_gone_client_releases_its_messages_soon() -> None:
    """When the client has no session any more, its handles get ``clear_invisible_ms``."""
    time, changer = clock.ManualClock(), Changer()
    online = {"c1"}
    table = _table(time, changer, online)
    _track(table)
    online.clear()
    table.renew_once()
    assert changer.calls == [("h0", SETTINGS.clear_invisible_ms)]
    assert len(table) == 0


def test_renewal_stops_after_renew_max_with_the_retry_backoff() -> None:
    """Past ``renew_max_ms`` since the receive, the message gets the group's retry delay for
    its attempt (a failed attempt) and is no longer tracked."""
    time, changer = clock.ManualClock(), Changer()
    table = _table(time, changer, {"c1"})
    _track(table)
    time.advance_ms(10_000)
    table.renew_once()
    assert changer.calls == [("h0", 1_400)]
    assert len(table) == 0


def test_stale_handle_stops_renewal() -> None:
    """A handle the consume path no longer knows (acked elsewhere, redelivered) is dropped."""
    time, changer = clock.ManualClock(), Changer()
    table = _table(time, changer, {"c1"})
    _track(table)
    changer.stale.add("h0")
    time.advance_ms(1_500)
    assert table.renew_once() == 0
    assert len(table) == 0


def test_table_is_bounded() -> None:
    """Beyond ``handles_max`` a handle is not tracked (it keeps its invisible time)."""
    time, changer = clock.ManualClock(), Changer()
    table = _table(time, changer, {"c1"}, handles_max=1)
    _track(table, "a")
    _track(table, "b")
    assert len(table) == 1
    assert table.current(KEY, "b") == "b"


def test_renewal_settings_refuse_out_of_range_values() -> None:
    """An empty delay list or a sub-second renewal delay is refused at load time."""
    with pytest.raises(ValueError, match="renew_delays_ms"):
        renewal_settings.RenewalSettings(renew_delays_ms=())
    with pytest.raises(ValueError, match="renew_delays_ms"):
        renewal_settings.RenewalSettings(renew_delays_ms=(10,))


ATTEMPT = (ids.ClientId("c1"), ids.GroupName("g"), ids.TopicName("t"), "a1")


def test_attempt_answer_replays_until_it_expires() -> None:
    """An answer replays (minus what is no longer held) until its invisible time passed."""
    time = clock.ManualClock()
    table: receive_attempts.ReceiveAttempts[str] = receive_attempts.ReceiveAttempts(
        entries_max=10, time=time
    )
    table.remember(ATTEMPT, ["m1", "m2"], ttl_ms=1_000)
    assert table.replay(ATTEMPT, lambda item: True) == ["m1", "m2"]
    assert table.replay(ATTEMPT, lambda item: item == "m2") == ["m2"]
    assert table.replay(ATTEMPT, lambda item: False) is None
    time.advance_ms(1_000)
    assert table.replay(ATTEMPT, lambda item: True) is None
    assert len(table) == 0


def test_attempt_table_forgets_the_oldest_and_keeps_no_empty_answer() -> None:
    """At ``entries_max`` the oldest answer goes; an empty answer is not remembered."""
    time = clock.ManualClock()
    table: receive_attempts.ReceiveAttempts[str] = receive_attempts.ReceiveAttempts(
        entries_max=2, time=time
    )
    keys = [(*ATTEMPT[:3], f"a{n}") for n in range(3)]
    for key in keys:
        table.remember(key, ["m"], ttl_ms=60_000)
    table.remember((*ATTEMPT[:3], "empty"), [], ttl_ms=60_000)
    assert len(table) == 2
    assert table.replay(keys[0], lambda item: True) is None
    assert table.replay(keys[2], lambda item: True) == ["m"]
