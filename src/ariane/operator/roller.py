"""The safe roller for the OnDelete StatefulSets of a Broker (RocketMQ has no rolling restart).

A StatefulSet with ``updateStrategy: OnDelete`` never replaces pods itself: after a template
change (image, config hash, resources) its ``status.updateRevision`` differs from the
``controller-revision-hash`` label of the old pods. ``next_action`` decides, from the live
StatefulSet and its pods only, what to do for one group; ``roll_group`` does it.

Invariants (one decision per reconcile, so each wait is a later timer run, never a sleep):
- never two pods of a group down: nothing is deleted while any pod of the group is missing,
  not ready, or terminating;
- slaves (every ordinal but the master's, highest first) before the master, one pod at a time;
- switchover first: a stale master with an in-sync slave on the current revision is not
  deleted; the decision is SWITCHOVER to that slave (``reconcile`` promotes it through the admin
  API and moves the master ordinal), after which the old master is a stale slave and goes next;
  while the master answers but no slave is in sync (a restarted slave still catching up), WAIT.
  Only when the brokers cannot be asked (``master_answers`` False) is the master restarted in
  place.
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
    SWITCHOVER = "switchover"
    """Promote the slave ``pod`` (ordinal ``ordinal``) before the stale master restarts."""


@dataclasses.dataclass(frozen=True, slots=True)
class Decision:
    """The roller's decision for one group, with a message for conditions and events."""

    action: Action
    message: str
    pod: str = ""
    ordinal: int = -1


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


def next_action(
    statefulset: resources.Manifest,
    pods: Sequence[resources.Manifest],
    *,
    master_ordinal: int = 0,
    in_sync: Sequence[int] = (),
    master_answers: bool = False,
) -> Decision:
    """The one thing to do now for the group of ``statefulset`` (pure).

    Args:
        statefulset: the live StatefulSet (``status.updateRevision`` set by the controller).
        pods: its live pods.
        master_ordinal: the ordinal of the group's master pod (the roles ConfigMap).
        in_sync: ordinals of slaves in sync with the live master, preferred first
            (``failover.in_sync_slaves``).
        master_answers: the master's broker answered the admin API (a group with slaves then
            waits for one in sync rather than restart its master without a switchover).
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
    slaves = [p for p in stale if _ordinal(p) != master_ordinal]
    victim = max(slaves, key=_ordinal) if slaves else stale[0]
    role = "slave" if slaves else "master"
    victim_name = victim["metadata"]["name"]
    current = {_ordinal(p): p for p in pods if p not in stale}
    target = next((o for o in in_sync if o in current), None)
    if not slaves and target is not None:
        slave = current[target]["metadata"]["name"]
        return Decision(
            Action.SWITCHOVER,
            f"{name}: switching over from master {victim_name} to in-sync slave {slave} "
            f"before its restart for revision {revision}",
            slave,
            target,
        )
    if not slaves and master_answers and wanted > 1:
        return Decision(
            Action.WAIT,
            f"{name}: master {victim_name} is stale; waiting for a slave in sync to switch over to",
        )
    return Decision(
        Action.DELETE,
        f"{name}: restarting {role} {victim_name} for revision {revision}",
        victim_name,
    )


def pod_status(
    pods: Sequence[resources.Manifest], master_role: str, master_ordinal: int = 0
) -> list[dict[str, Any]]:
    """``status.groups[].pods`` entries by ordinal: name, broker id, role, readiness.

    The broker id and role are the ones the roles ConfigMap assigns (the master ordinal is
    broker id 0 with ``master_role``, ordinal 0 takes the master's ordinal as id); ``reconcile``
    overwrites them with what a broker answers when it is asked.
    """
    result = []
    for pod in sorted(pods, key=_ordinal):
        ordinal = _ordinal(pod)
        is_master = ordinal == master_ordinal
        result.append(
            {
                "name": pod["metadata"]["name"],
                "brokerId": 0 if is_master else (ordinal or master_ordinal),
                "role": master_role if is_master else "SLAVE",
                "ready": _ready(pod),
            }
        )
    return result


def ordinal(pod: resources.Manifest) -> int:
    """The pod's StatefulSet ordinal (its ``pod-index`` label, else its name's suffix)."""
    return _ordinal(pod)


def ready(pod: resources.Manifest) -> bool:
    """The pod is Ready and not terminating."""
    return _ready(pod)


def group_pods(client: kube.Kube, statefulset: resources.Manifest) -> list[resources.Manifest]:
    """The live pods of ``statefulset``.

    Raises:
        kubernetes.client.ApiException: listing failed.
    """
    meta = statefulset["metadata"]
    selector = statefulset["spec"]["selector"]["matchLabels"]
    return client.list_objects("v1", "Pod", meta["namespace"], selector)


def roll_group(
    client: kube.Kube,
    statefulset: resources.Manifest,
    pods: Sequence[resources.Manifest],
    *,
    master_ordinal: int = 0,
    in_sync: Sequence[int] = (),
    master_answers: bool = False,
) -> Decision:
    """Decides (``next_action``) and deletes at most one pod; a SWITCHOVER is left to the
    caller (it needs the admin API).

    Raises:
        kubernetes.client.ApiException: deleting failed.
    """
    meta = statefulset["metadata"]
    decision = next_action(
        statefulset,
        pods,
        master_ordinal=master_ordinal,
        in_sync=in_sync,
        master_answers=master_answers,
    )
    if decision.action is Action.DELETE:
        _log.info("%s", decision.message)
        client.delete("v1", "Pod", meta["namespace"], decision.pod)
    return decision
