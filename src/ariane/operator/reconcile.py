"""Broker reconciliation as an ordered list of named, idempotent steps (DESIGN §8).

``reconcile_broker`` renders the model and applies it step by step through ``kube.Kube``; each
step may run again at any time (server-side apply of the same manifests is a no-op, and a hand
edit of an owned field is reverted). It returns the status to write: conditions plus
``observedGeneration`` (only after every step succeeded). A paused Broker applies nothing.

Not here yet (see the report of issue 5): the pod roller for OnDelete StatefulSets, safe
scale-in, PVC growth, reading group/pod state into status, Topic and ConsumerGroup steps.
"""

from __future__ import annotations

import dataclasses
import datetime
import logging
from collections.abc import Callable, Sequence
from typing import Any

from ariane.operator import kube, model, resources, status

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


def _apply_step(client: kube.Kube, step: Step, objects: Sequence[resources.Manifest]) -> int:
    applied = 0
    for manifest in objects:
        if not step.select(manifest):
            continue
        if manifest["apiVersion"] == MONITORING_API and not client.serves(
            MONITORING_API, manifest["kind"]
        ):
            _log.info("skipping %s: prometheus-operator CRDs are absent", manifest["kind"])
            continue
        client.apply(manifest)
        applied += 1
    return applied


def reconcile_broker(
    client: kube.Kube, broker: dict[str, Any], now: datetime.datetime
) -> dict[str, Any]:
    """Converges the objects of one Broker CR (a dict as the apiserver returns it).

    Returns:
        The status to patch: ``conditions`` (merged with the old ones) and, when every step
        succeeded, ``observedGeneration``.

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
        bad = status.condition(status.READY, False, "InvalidSpec", str(error), generation, now)
        return {"conditions": status.merge(old, [bad])}
    for step in STEPS:
        count = _apply_step(client, step, objects)
        _log.debug(
            "broker %s/%s: step %s applied %d objects",
            owner.namespace,
            owner.name,
            step.name,
            count,
        )
    # Ready needs pod and broker observation (not here yet): only Progressing is claimed.
    done = [
        status.condition(status.PAUSED, False, "Running", "reconciling", generation, now),
        status.condition(
            status.PROGRESSING, False, "Applied", f"{len(objects)} objects applied", generation, now
        ),
    ]
    return {"conditions": status.merge(old, done), "observedGeneration": generation}
