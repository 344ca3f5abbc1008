"""Helpers shared by the operator's e2e tests: apply the CRDs and wait until they are served.

``apply_monitoring_crds`` installs prometheus-operator's ServiceMonitor and PrometheusRule CRDs,
pinned to ``PROMETHEUS_OPERATOR_VERSION`` and fetched from the Go module proxy (the published
module carries them under ``example/prometheus-operator-crd/``) into the module cache that
``testenv/build.sh`` uses (``~/.cache/ariane/gomod``), so a second run reads them offline.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import pathlib
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping

import yaml

from ariane import dev
from ariane.operator import handlers
from e2e.testenv import cluster, processes

ROOT = pathlib.Path(__file__).resolve().parents[1]
CRD_DIR = ROOT / "crds"
CHART_DIR = ROOT / "charts" / "ariane"
ESTABLISHED_TIMEOUT_S = 60.0
OPERATOR_START_TIMEOUT_S = 90.0


PROMETHEUS_OPERATOR_MODULE = "github.com/prometheus-operator/prometheus-operator"
PROMETHEUS_OPERATOR_VERSION = "v0.85.0"
"""The pinned prometheus-operator release whose CRDs the e2e apiserver serves."""
MONITORING_CRDS = ("servicemonitors", "prometheusrules")
"""The prometheus-operator CRDs the Ariane operator renders objects of."""
GO_MODULE_CACHE = (
    pathlib.Path(os.environ.get("TESTENV_CACHE", pathlib.Path.home() / ".cache" / "ariane"))
    / "gomod"
)
DOWNLOAD_TIMEOUT_S = 300.0


def monitoring_crd_files() -> list[pathlib.Path]:
    """The pinned ServiceMonitor and PrometheusRule CRD files (downloaded on first use).

    Raises:
        subprocess.CalledProcessError: ``go mod download`` failed (no Go, proxy unreachable).
        FileNotFoundError: the module holds no such CRD file.
    """
    env = {**os.environ, "GOMODCACHE": str(GO_MODULE_CACHE), "GOFLAGS": "-modcacherw"}
    with tempfile.TemporaryDirectory() as outside_any_module:
        answer = subprocess.run(
            ["go", "mod", "download", "-json",
             f"{PROMETHEUS_OPERATOR_MODULE}@{PROMETHEUS_OPERATOR_VERSION}"],
            cwd=outside_any_module, env=env, capture_output=True, text=True, check=True,
            timeout=DOWNLOAD_TIMEOUT_S,
        )  # fmt: skip
    crd_dir = pathlib.Path(json.loads(answer.stdout)["Dir"]) / "example" / "prometheus-operator-crd"
    files = [crd_dir / f"monitoring.coreos.com_{plural}.yaml" for plural in MONITORING_CRDS]
    for path in files:
        if not path.is_file():
            raise FileNotFoundError(path)
    return files


def apply_monitoring_crds(k8s: cluster.Cluster) -> None:
    """Applies the pinned ServiceMonitor and PrometheusRule CRDs, waits until Established.

    Raises:
        AssertionError: the apiserver refused one.
        TimeoutError: one was not Established within ``ESTABLISHED_TIMEOUT_S``.
    """
    for path in monitoring_crd_files():
        applied = k8s.kubectl("apply", "--server-side", "-f", str(path), check=False)
        assert applied.returncode == 0, applied.stderr
        name = yaml.safe_load(path.read_text())["metadata"]["name"]
        processes.wait_until(
            lambda name=name: _established(k8s, name),  # type: ignore[misc]
            timeout_s=ESTABLISHED_TIMEOUT_S,
            what=f"CRD {name} Established",
        )


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


@dataclasses.dataclass(frozen=True)
class Running:
    """A running operator child: its log and where its liveness and metrics are served."""

    log_path: pathlib.Path
    liveness_url: str
    metrics_url: str


@contextlib.contextmanager
def run_operator(
    k8s: cluster.Cluster,
    log_path: pathlib.Path,
    namespace_glob: str,
    *,
    env: Mapping[str, str],
    resync_s: int,
) -> Iterator[Running]:
    """``ariane operator --standalone --namespace GLOB`` as a child process (CRDs applied
    first), with ``env`` added (the address override maps); stopped by PID, its log printed.

    Raises:
        AssertionError: the operator did not exit cleanly when stopped.
    """
    apply_crds(k8s)
    child_env = {
        **os.environ,
        "KUBECONFIG": str(k8s.kubeconfig),
        handlers.RESYNC_ENV: str(resync_s),
        **env,
    }
    port, metrics_port = dev.free_port(), dev.free_port()
    command = [sys.executable, "-m", "ariane", "operator", "--standalone"]
    command += [f"--namespace={namespace_glob}", f"--metrics-port={metrics_port}"]
    command += [f"--liveness=http://127.0.0.1:{port}/healthz", "--log-level=debug"]
    with log_path.open("wb") as log_file:
        child = subprocess.Popen(
            command,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=child_env,
        )
    try:
        dev.wait_until_listening(
            "127.0.0.1", port, process=child, timeout_s=OPERATOR_START_TIMEOUT_S
        )
        yield Running(
            log_path,
            f"http://127.0.0.1:{port}/healthz",
            f"http://127.0.0.1:{metrics_port}/metrics",
        )
    finally:
        code = dev.stop_process(child)
        print(log_path.read_text()[-20000:])
        assert code == 0, f"operator exited with {code}"
