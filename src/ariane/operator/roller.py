"""The safe roller for the OnDelete StatefulSets of a Broker (RocketMQ has no rolling restart).

A StatefulSet with ``updateStrategy: OnDelete`` never replaces pods itself: after a template
change (image, config hash, resources) its ``status.updateRevision`` differs from the
``controller-revision-hash`` label of the old pods. ``next_action`` decides, from the live
StatefulSet and its pods only, what to do for one group; ``roll_group`` does it.

Invariants (one decision per reconcile, so each wait is a later timer run, never a sleep):
- never two pods of a group down: nothing is deleted while any pod of the group is missing,
  not ready, or terminating;
- slaves (higher ordinals) before the master (ordinal 0), one pod at a time.
Not here yet: waiting for a slave's HA catch-up and a master switchover before its restart
(they need per-pod admin calls).
"""

from __future__ import annotations

import dataclasses
import enum
import logging
from collections.abc import Sequence
from typing import Any, Final

from ariane.operator import kube, model, resources

_log = logging.getLogger(__name__)

REVISION_LABEL: Final = "controller-revision-hash"


class Action(enum.Enum):
    """What the roller does for one group in this reconcile."""

    NONE = "none"
    """Every pod runs the current revision."""
    WAIT = "wait"
    """A pod is missing, not ready or terminating: delete nothing now."""
    DELETE = "delete"
    """Delete ``pod`` (stale revision); the StatefulSet controller recreates it."""


@dataclasses.dataclass(frozen=True, slots=True)
class Decision:
    """The roller's decision for one group, with a message for conditions and events."""

    action: Action
    message: str
    pod: str = ""


def _ready(pod: resources.Manifest) -> bool:
    if pod.get("metadata", {}).get("deletionTimestamp"):
        return False
    conditions = pod.get("status", {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _ordinal(pod: resources.Manifest) -> int:
    labels = pod["metadata"].get("labels", {})
    if model.POD_INDEX_LABEL in labels:
        return int(labels[model.POD_INDEX_LABEL])
    return int(pod["metadata"]["name"].rsplit("-", 1)[1])


def next_action(statefulset: resources.Manifest, pods: Sequence[resources.Manifest]) -> Decision:
    """The one thing to do now for the group of ``statefulset`` (pure).

    Args:
        statefulset: the live StatefulSet (``status.updateRevision`` set by the controller).
        pods: its live pods.
    """
    name = statefulset["metadata"]["name"]
    wanted = int(statefulset.get("spec", {}).get("replicas", 1))
    revision = statefulset.get("status", {}).get("updateRevision", "")
    if not revision:
        return Decision(Action.WAIT, f"{name}: no update revision observed yet")
    stale = [p for p in pods if p["metadata"].get("labels", {}).get(REVISION_LABEL) != revision]
    if not stale:
        return Decision(Action.NONE, f"{name}: every pod runs revision {revision}")
    unready = sorted(p["metadata"]["name"] for p in pods if not _ready(p))
    if len(pods) < wanted or unready:
        down = ", ".join(unready) or f"{wanted - len(pods)} missing"
        return Decision(Action.WAIT, f"{name}: rolling, waiting for {down}")
    victim = max(stale, key=_ordinal)
    role = "master" if _ordinal(victim) == 0 else "slave"
    victim_name = victim["metadata"]["name"]
    return Decision(
        Action.DELETE,
        f"{name}: restarting {role} {victim_name} for revision {revision}",
        victim_name,
    )


def pod_status(pods: Sequence[resources.Manifest], master_role: str) -> list[dict[str, Any]]:
    """``status.groups[].pods`` entries by ordinal: name, broker id, role, readiness.

    The role is the one the model assigns (ordinal 0 is the master with ``master_role``); the
    broker's own view (roles after a switchover, offsets, HA lag) needs admin calls per pod.
    """
    return [
        {
            "name": p["metadata"]["name"],
            "brokerId": _ordinal(p),
            "role": master_role if _ordinal(p) == 0 else "SLAVE",
            "ready": _ready(p),
        }
        for p in sorted(pods, key=_ordinal)
    ]


def roll_group(
    client: kube.Kube, statefulset: resources.Manifest
) -> tuple[Decision, list[resources.Manifest]]:
    """Reads the group's pods, decides (``next_action``) and deletes at most one pod.

    Returns:
        The decision and the pods as read before it.

    Raises:
        kubernetes.client.ApiException: listing or deleting failed.
    """
    meta = statefulset["metadata"]
    selector = statefulset["spec"]["selector"]["matchLabels"]
    pods = client.list_objects("v1", "Pod", meta["namespace"], selector)
    decision = next_action(statefulset, pods)
    if decision.action is Action.DELETE:
        _log.info("%s", decision.message)
        client.delete("v1", "Pod", meta["namespace"], decision.pod)
    return decision, pods
