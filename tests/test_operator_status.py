"""Status conditions of the operator's CRs: transition times and the pause annotation."""

from __future__ import annotations

import datetime

from ariane.operator import status

T0 = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
T1 = T0 + datetime.timedelta(minutes=5)


def test_unchanged_status_keeps_its_transition_time() -> None:
    """Re-asserting a condition with the same status keeps the first lastTransitionTime."""
    first = status.merge([], [status.condition(status.READY, True, "A", "m", 1, T0)])
    second = status.merge(first, [status.condition(status.READY, True, "B", "n", 2, T1)])
    flipped = status.merge(second, [status.condition(status.READY, False, "C", "o", 3, T1)])

    assert second[0]["lastTransitionTime"] == "2026-01-01T00:00:00Z"
    assert second[0]["reason"] == "B" and second[0]["observedGeneration"] == 2
    assert flipped[0]["lastTransitionTime"] == "2026-01-01T00:05:00Z"


def test_conditions_are_sorted_by_type() -> None:
    """Merged conditions come out ordered by type (a deterministic status patch)."""
    merged = status.merge(
        [status.condition(status.READY, True, "A", "m", 1, T0)],
        [status.condition(status.DEGRADED, False, "A", "m", 1, T0)],
    )

    assert [c["type"] for c in merged] == [status.DEGRADED, status.READY]


def test_pause_annotation() -> None:
    """Only the value "true" (any case) of the pause annotation pauses."""
    assert status.is_paused({status.PAUSE_ANNOTATION: "True"})
    assert not status.is_paused({status.PAUSE_ANNOTATION: "false"})
    assert not status.is_paused(None)
