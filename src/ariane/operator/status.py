"""Status conditions of the Ariane CRs (pure): Ready, Progressing, Degraded, ReconciliationPaused.

Invariants: ``lastTransitionTime`` changes only when a condition's ``status`` changes; the list
is ordered by type so a status patch is deterministic.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from typing import Any, Final

READY: Final = "Ready"
PROGRESSING: Final = "Progressing"
DEGRADED: Final = "Degraded"
PAUSED: Final = "ReconciliationPaused"
PAUSE_ANNOTATION: Final = "ariane.dev/pause-reconciliation"


def condition(
    kind: str, ok: bool, reason: str, message: str, generation: int, now: datetime.datetime
) -> dict[str, Any]:
    """One condition as the CRDs declare it (``status`` is ``"True"`` or ``"False"``)."""
    return {
        "type": kind,
        "status": "True" if ok else "False",
        "reason": reason,
        "message": message,
        "observedGeneration": generation,
        "lastTransitionTime": now.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


def merge(old: Sequence[dict[str, Any]], new: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """``old`` updated by ``new`` (by type); an unchanged status keeps its transition time."""
    merged = {c["type"]: dict(c) for c in old}
    for cond in new:
        previous = merged.get(cond["type"])
        updated = dict(cond)
        if previous is not None and previous.get("status") == cond["status"]:
            updated["lastTransitionTime"] = previous.get(
                "lastTransitionTime", cond["lastTransitionTime"]
            )
        merged[cond["type"]] = updated
    return [merged[k] for k in sorted(merged)]


def is_paused(annotations: Mapping[str, str] | None) -> bool:
    """Whether the CR carries ``ariane.dev/pause-reconciliation: "true"``."""
    return (annotations or {}).get(PAUSE_ANNOTATION, "").lower() == "true"
