"""Helpers shared by the operator's e2e tests: apply the CRDs and wait until they are served."""

from __future__ import annotations

import json
import pathlib

import yaml

from e2e.testenv import cluster, processes

ROOT = pathlib.Path(__file__).resolve().parents[1]
CRD_DIR = ROOT / "crds"
CHART_DIR = ROOT / "charts" / "ariane"
ESTABLISHED_TIMEOUT_S = 60.0


def _established(k8s: cluster.Cluster, name: str) -> bool:
    crd = json.loads(k8s.kubectl("get", "crd", name, "-o", "json").stdout)
    conditions = crd.get("status", {}).get("conditions", [])
    return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)


def apply_crds(k8s: cluster.Cluster) -> list[str]:
    """Applies ``crds/`` server-side (idempotent), waits until each is Established.

    Returns:
        The CRD names.

    Raises:
        AssertionError: the apiserver refused a CRD (its message is the assertion's).
        TimeoutError: a CRD was not Established within ``ESTABLISHED_TIMEOUT_S``.
    """
    applied = k8s.kubectl("apply", "--server-side", "-f", str(CRD_DIR), check=False)
    assert applied.returncode == 0, applied.stderr
    names = [yaml.safe_load(p.read_text())["metadata"]["name"] for p in sorted(CRD_DIR.glob("*"))]
    for name in names:
        processes.wait_until(
            lambda name=name: _established(k8s, name),  # type: ignore[misc]
            timeout_s=ESTABLISHED_TIMEOUT_S,
            what=f"CRD {name} Established",
        )
    return names
