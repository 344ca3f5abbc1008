"""The roller's decisions: slaves before the master, one pod at a time, never two down."""

from __future__ import annotations

from typing import Any

from ariane.operator import roller


def _sts(replicas: int = 2, revision: str = "new") -> dict[str, Any]:
    return {
        "metadata": {"name": "demo-a"},
        "spec": {"replicas": replicas},
        "status": {"updateRevision": revision},
    }


def _pod(ordinal: int, revision: str, ready: bool = True, deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": f"demo-a-{ordinal}",
        "labels": {
            roller.REVISION_LABEL: revision,
            "apps.kubernetes.io/pod-index": str(ordinal),
        },
    }
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    state = "True" if ready else "False"
    return {"metadata": meta, "status": {"conditions": [{"type": "Ready", "status": state}]}}


def test_slave_goes_first_then_master() -> None:
    """With every pod stale the highest ordinal (a slave) is deleted; the master comes last."""
    first = roller.next_action(_sts(3), [_pod(0, "old"), _pod(1, "old"), _pod(2, "old")])
    last = roller.next_action(_sts(3), [_pod(0, "old"), _pod(1, "new"), _pod(2, "new")])

    assert (first.action, first.pod) == (roller.Action.DELETE, "demo-a-2")
    assert "slave" in first.message
    assert (last.action, last.pod) == (roller.Action.DELETE, "demo-a-0")
    assert "master" in last.message


def test_nothing_is_deleted_while_a_pod_is_down() -> None:
    """A missing, unready or terminating pod blocks the roll (never two pods of a group down)."""
    missing = roller.next_action(_sts(2), [_pod(0, "old")])
    unready = roller.next_action(_sts(2), [_pod(0, "old"), _pod(1, "new", ready=False)])
    deleting = roller.next_action(_sts(2), [_pod(0, "old"), _pod(1, "old", deleting=True)])

    assert {missing.action, unready.action, deleting.action} == {roller.Action.WAIT}
    assert "demo-a-1" in unready.message


def test_current_pods_need_nothing_and_unknown_revision_waits() -> None:
    """Pods at the update revision need no action; no revision observed yet means wait."""
    done = roller.next_action(_sts(2), [_pod(0, "new"), _pod(1, "new")])
    unknown = roller.next_action(_sts(2, revision=""), [_pod(0, "old"), _pod(1, "old")])

    assert done.action is roller.Action.NONE
    assert unknown.action is roller.Action.WAIT
