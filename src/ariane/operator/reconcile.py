"""Broker reconciliation as an ordered list of named, idempotent steps (DESIGN §8).

``reconcile_broker`` renders the model and applies it step by step through ``kube.Kube``; each
step may run again at any time (server-side apply of the same manifests is a no-op, and a hand
edit of an owned field is reverted). It returns the status to write: conditions plus
``observedGeneration`` (only after every step succeeded). A paused Broker applies nothing.

Readiness is read from the live objects the applies return: a Broker is Ready only when the
name-server Deployment and every group's StatefulSet report all their replicas ready at their
current generation (kwok marks pods ready in the e2e control plane). Until then Progressing is
True. After the applies, ``roller`` restarts at most one stale pod per group (Progressing is
True, reason Rolling, until every pod runs the current revision). Not here yet: safe scale-in,
PVC growth, broker roles and HA lag in status (they need the admin API per pod).
"""

from __future__ import annotations

import dataclasses
import datetime
import logging
from collections.abc import Callable, Sequence
from typing import Any

from ariane.operator import kube, model, resources, roller, status

_log = logging.getLogger(__name__)

MONITORING_API = "monitoring.coreos.com/v1"


@dataclasses.dataclass(frozen=True, slots=True)
class Step:
    """One named step: picks the manifests it applies from the rendered objects."""

    name: str
    """Shown in logs and in the Progressing condition when it fails."""
    select: Callable[[resources.Manifest], bool]
    """True for each rendered object this step applies."""


STEPS: Sequence[Step] = (
    Step("config", lambda m: m["kind"] == "ConfigMap"),
    Step(
        "name-server", lambda m: m["metadata"]["labels"]["app.kubernetes.io/component"] == "namesrv"
    ),
    Step(
        "broker-groups",
        lambda m: (
            m["kind"] in ("Service", "StatefulSet", "PodDisruptionBudget")
            and model.GROUP_LABEL in m["metadata"]["labels"]
        ),
    ),
    Step("monitoring", lambda m: m["apiVersion"] == MONITORING_API),
)


def _apply_step(
    client: kube.Kube, step: Step, objects: Sequence[resources.Manifest]
) -> list[resources.Manifest]:
    applied = []
    for manifest in objects:
        if not step.select(manifest):
            continue
        if manifest["apiVersion"] == MONITORING_API and not client.serves(
            MONITORING_API, manifest["kind"]
        ):
            _log.info("skipping %s: prometheus-operator CRDs are absent", manifest["kind"])
            continue
        applied.append(client.apply(manifest))
    return applied


def ready_replicas(live: resources.Manifest) -> int:
    """Ready replicas a live Deployment/StatefulSet reports for its current generation (else 0)."""
    observed = live.get("status", {}).get("observedGeneration", 0)
    if observed < live.get("metadata", {}).get("generation", 0):
        return 0
    return int(live.get("status", {}).get("readyReplicas", 0) or 0)


def observe(live_objects: Sequence[resources.Manifest]) -> tuple[list[dict[str, Any]], bool]:
    """The ``status.groups`` entries and whether every workload has all its replicas ready."""
    groups = []
    all_ready = True
    for live in live_objects:
        if live["kind"] not in ("StatefulSet", "Deployment"):
            continue
        ready = ready_replicas(live)
        wanted = int(live.get("spec", {}).get("replicas", 1))
        all_ready = all_ready and ready >= wanted
        if live["kind"] == "StatefulSet":
            name = live["metadata"]["name"]
            groups.append({"name": name, "statefulSet": name, "readyPods": ready})
    return groups, all_ready


def reconcile_broker(
    client: kube.Kube, broker: dict[str, Any], now: datetime.datetime
) -> dict[str, Any]:
    """Converges the objects of one Broker CR (a dict as the apiserver returns it).

    Returns:
        The status to patch: ``conditions`` (merged with the old ones) and, when every step
        succeeded, ``observedGeneration``, ``groups``, ``readyGroups`` and ``nameServerAddress``.

    Raises:
        kubernetes.client.ApiException: a step's apply failed (retry later; earlier steps
            stay applied, and repeating them is harmless).
    """
    meta = broker["metadata"]
    generation = int(meta.get("generation", 0))
    old = broker.get("status", {}).get("conditions", [])
    if status.is_paused(meta.get("annotations")):
        paused = status.condition(status.PAUSED, True, "Paused", "annotation set", generation, now)
        return {"conditions": status.merge(old, [paused])}
    owner = model.Owner(name=meta["name"], namespace=meta["namespace"], uid=meta["uid"])
    try:
        objects = model.desired_objects(owner, broker.get("spec", {}))
    except model.SpecError as error:
        bad = [
            status.condition(status.READY, False, "InvalidSpec", str(error), generation, now),
            status.condition(status.DEGRADED, True, "InvalidSpec", str(error), generation, now),
        ]
        return {"conditions": status.merge(old, bad)}
    live: list[resources.Manifest] = []
    for step in STEPS:
        applied = _apply_step(client, step, objects)
        live.extend(applied)
        _log.debug(
            "broker %s/%s: step %s applied %d objects",
            owner.namespace,
            owner.name,
            step.name,
            len(applied),
        )
    master_role = broker.get("spec", {}).get("brokerRole", resources.DEFAULT_BROKER_ROLE)
    rolls, pods = [], {}
    for sts in (m for m in live if m["kind"] == "StatefulSet"):
        decision, group_pods = roller.roll_group(client, sts)
        rolls.append(decision)
        pods[sts["metadata"]["name"]] = roller.pod_status(group_pods, master_role)
    result = _observed_status(owner, broker, live, rolls, now)
    for group in result["groups"]:
        group["pods"] = pods.get(group["name"], [])
        masters = [p["name"] for p in group["pods"] if p["brokerId"] == 0]
        group["masterPod"] = masters[0] if masters else ""
    return result


def _observed_status(
    owner: model.Owner,
    broker: dict[str, Any],
    live: Sequence[resources.Manifest],
    rolls: Sequence[roller.Decision],
    now: datetime.datetime,
) -> dict[str, Any]:
    generation = int(broker["metadata"].get("generation", 0))
    old = broker.get("status", {}).get("conditions", [])
    per_group = broker.get("spec", {}).get("replicasPerGroup", resources.DEFAULT_REPLICAS_PER_GROUP)
    groups, ready = observe(live)
    ready_groups = sum(1 for g in groups if g["readyPods"] >= per_group)
    message = f"{ready_groups}/{len(groups)} broker groups ready"
    rolling = [d.message for d in rolls if d.action is not roller.Action.NONE]
    if not ready:
        progress = (True, "WaitingForPods", message)
    elif rolling:
        progress = (True, "Rolling", "; ".join(rolling))
    else:
        progress = (False, "Converged", message)
    done = [
        status.condition(status.PAUSED, False, "Running", "reconciling", generation, now),
        status.condition(status.DEGRADED, False, "Applied", "every step applied", generation, now),
        status.condition(
            status.READY, ready, "AllReady" if ready else "PodsNotReady", message, generation, now
        ),
        status.condition(status.PROGRESSING, *progress, generation, now),
    ]
    return {
        "conditions": status.merge(old, done),
        "observedGeneration": generation,
        "groups": groups,
        "readyGroups": ready_groups,
        "nameServerAddress": model.namesrv_address(owner),
    }
