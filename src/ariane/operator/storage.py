"""Store claim growth through ``spec.storage.size`` (pure): which PVCs to patch, or why not.

Kubernetes grows a bound volume when its claim's ``resources.requests.storage`` is raised and the
StorageClass has ``allowVolumeExpansion: true``; a StatefulSet's claim templates are immutable,
so the operator patches the claims themselves (as Strimzi does). Claims never shrink (the CRD
refuses a smaller ``storage.size`` too).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from typing import Final

from ariane.operator import resources

_UNITS: Final = {
    "": 1,
    "k": 1000,
    "M": 1000**2,
    "G": 1000**3,
    "T": 1000**4,
    "P": 1000**5,
    "Ki": 1024,
    "Mi": 1024**2,
    "Gi": 1024**3,
    "Ti": 1024**4,
    "Pi": 1024**5,
}
_QUANTITY: Final = re.compile(r"^([0-9]+(?:\.[0-9]+)?)(Ki|Mi|Gi|Ti|Pi|k|M|G|T|P)?$")


def quantity_bytes(quantity: str) -> int:
    """Bytes of a Kubernetes storage quantity: ``"10Gi"`` → 10737418240, ``"1G"`` → 10**9.

    Raises:
        ValueError: not a number with one of the binary or decimal suffixes the CRD admits.
    """
    match = _QUANTITY.match(str(quantity).strip())
    if not match:
        raise ValueError(f"storage quantity {quantity!r} is not a number with Ki..Pi or k..P")
    return int(float(match.group(1)) * _UNITS[match.group(2) or ""])


def claim_size(claim: resources.Manifest) -> str:
    """A PVC's requested storage (``spec.resources.requests.storage``), ``"0"`` if unset."""
    requests = claim.get("spec", {}).get("resources", {}).get("requests", {})
    return str(requests.get("storage", "0"))


def claim_patch(namespace: str, name: str, size: str) -> resources.Manifest:
    """The server-side apply body raising claim ``name`` to ``size``."""
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"resources": {"requests": {"storage": size}}},
    }


@dataclasses.dataclass(frozen=True, slots=True)
class GrowthPlan:
    """Claims to grow now, and those their class cannot grow (``blocked``)."""

    grow: tuple[str, ...]
    blocked: tuple[str, ...]
    message: str


def plan_growth(
    claims: Sequence[tuple[str, str]], wanted: str, expandable: Mapping[str, bool]
) -> GrowthPlan:
    """Which claims to patch to ``wanted`` (pure).

    Args:
        claims: (claim name, its requested size) of every store claim.
        wanted: ``spec.storage.size``.
        expandable: claim name → its StorageClass allows volume expansion.

    Returns:
        Claims smaller than ``wanted``: grown if their class allows it, else blocked; claims
        at or above it are left alone (never shrunk).
    """
    target = quantity_bytes(wanted)
    small = [name for name, size in claims if quantity_bytes(size) < target]
    grow = tuple(sorted(n for n in small if expandable.get(n, False)))
    blocked = tuple(sorted(n for n in small if not expandable.get(n, False)))
    if blocked:
        message = (
            f"{', '.join(blocked)} cannot grow to {wanted}: their StorageClass does not allow "
            "volume expansion (allowVolumeExpansion)"
        )
    elif grow:
        message = f"growing {', '.join(grow)} to {wanted}"
    else:
        message = f"every store claim is at least {wanted}"
    return GrowthPlan(grow, blocked, message)
