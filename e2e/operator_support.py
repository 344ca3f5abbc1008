"""Helpers shared by the operator's e2e tests: apply the CRDs and wait until they are served.

``apply_monitoring_crds`` installs prometheus-operator's ServiceMonitor and PrometheusRule CRDs,
pinned to ``PROMETHEUS_OPERATOR_VERSION`` and fetched from the Go module proxy (the published
module carries them under ``example/prometheus-operator-crd/``) into the module cache that
``testenv/build.sh`` uses (``~/.cache/ariane/gomod``), so a second run reads them offline.
``apply_spark_operator_crds`` does the same for the Kubeflow spark-operator's
``SparkApplication`` CRD (pinned ``SPARK_OPERATOR_VERSION``; its module carries the CRDs under
``config/crd/bases/`` and its Helm chart under ``charts/spark-operator-chart``), and
``cert_manager_crd_files`` for cert-manager's ``Certificate`` (``deploy/crds/``).
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
from ariane.operator import settings as operator_settings
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


SPARK_OPERATOR_MODULE = "github.com/kubeflow/spark-operator/v2"
SPARK_OPERATOR_VERSION = "v2.5.2"
"""The pinned spark-operator release whose ``SparkApplication`` CRD and chart the e2e tests use."""


def go_module_dir(module: str, version: str) -> pathlib.Path:
    """The extracted source of ``module@version`` in ``GO_MODULE_CACHE`` (downloaded on first use).

    Raises:
        subprocess.CalledProcessError: ``go mod download`` failed (no Go, proxy unreachable).
    """
    env = {**os.environ, "GOMODCACHE": str(GO_MODULE_CACHE), "GOFLAGS": "-modcacherw"}
    with tempfile.TemporaryDirectory() as outside_any_module:
        answer = subprocess.run(
            ["go", "mod", "download", "-json", f"{module}@{version}"],
            cwd=outside_any_module, env=env, capture_output=True, text=True, check=True,
            timeout=DOWNLOAD_TIMEOUT_S,
        )  # fmt: skip
    return pathlib.Path(json.loads(answer.stdout)["Dir"])


def _existing(files: list[pathlib.Path]) -> list[pathlib.Path]:
    for path in files:
        if not path.is_file():
            raise FileNotFoundError(path)
    return files


def monitoring_crd_files() -> list[pathlib.Path]:
    """The pinned ServiceMonitor and PrometheusRule CRD files (downloaded on first use).

    Raises:
        subprocess.CalledProcessError: ``go mod download`` failed (no Go, proxy unreachable).
        FileNotFoundError: the module holds no such CRD file.
    """
    module = go_module_dir(PROMETHEUS_OPERATOR_MODULE, PROMETHEUS_OPERATOR_VERSION)
    crd_dir = module / "example" / "prometheus-operator-crd"
    return _existing(
        [crd_dir / f"monitoring.coreos.com_{plural}.yaml" for plural in MONITORING_CRDS]
    )


CERT_MANAGER_MODULE = "github.com/cert-manager/cert-manager"
CERT_MANAGER_VERSION = "v1.21.2"
"""The pinned cert-manager release whose ``Certificate`` CRD the e2e apiserver serves (the
module carries the CRDs under ``deploy/crds/``)."""


def cert_manager_crd_files() -> list[pathlib.Path]:
    """The pinned cert-manager ``Certificate`` and issuer CRD files (downloaded on first use).

    Raises:
        subprocess.CalledProcessError: ``go mod download`` failed (no Go, proxy unreachable).
        FileNotFoundError: the module holds no such CRD file.
    """
    crd_dir = go_module_dir(CERT_MANAGER_MODULE, CERT_MANAGER_VERSION) / "deploy" / "crds"
    names = ("certificates", "issuers", "clusterissuers")
    return _existing([crd_dir / f"cert-manager.io_{name}.yaml" for name in names])


def spark_operator_dir() -> pathlib.Path:
    """The pinned spark-operator module's source tree (downloaded on first use)."""
    return go_module_dir(SPARK_OPERATOR_MODULE, SPARK_OPERATOR_VERSION)


def spark_application_crd_file() -> pathlib.Path:
    """The pinned ``sparkapplications.sparkoperator.k8s.io`` CRD file.

    Raises:
        subprocess.CalledProcessError: ``go mod download`` failed (no Go, proxy unreachable).
        FileNotFoundError: the module holds no such CRD file.
    """
    crd_dir = spark_operator_dir() / "config" / "crd" / "bases"
    return _existing([crd_dir / "sparkoperator.k8s.io_sparkapplications.yaml"])[0]


def apply_monitoring_crds(k8s: cluster.Cluster) -> None:
    """Applies the pinned ServiceMonitor and PrometheusRule CRDs, waits until Established.

    Raises:
        AssertionError: the apiserver refused one.
        TimeoutError: one was not Established within ``ESTABLISHED_TIMEOUT_S``.
    """
    apply_crd_files(k8s, monitoring_crd_files())


def apply_spark_operator_crds(k8s: cluster.Cluster) -> str:
    """Applies the pinned ``SparkApplication`` CRD, waits until Established; returns its name.

    Raises:
        AssertionError: the apiserver refused it.
        TimeoutError: it was not Established within ``ESTABLISHED_TIMEOUT_S``.
    """
    return apply_crd_files(k8s, [spark_application_crd_file()])[0]


def apply_crd_files(k8s: cluster.Cluster, files: list[pathlib.Path]) -> list[str]:
    """Applies each CRD file server-side, waits until each is Established; returns the names.

    Raises:
        AssertionError: the apiserver refused one.
        TimeoutError: one was not Established within ``ESTABLISHED_TIMEOUT_S``.
    """
    names = []
    for path in files:
        applied = k8s.kubectl("apply", "--server-side", "-f", str(path), check=False)
        assert applied.returncode == 0, applied.stderr
        name = yaml.safe_load(path.read_text())["metadata"]["name"]
        processes.wait_until(
            lambda name=name: _established(k8s, name),  # type: ignore[misc]
            timeout_s=ESTABLISHED_TIMEOUT_S,
            what=f"CRD {name} Established",
        )
        names.append(name)
    return names


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
    return apply_crd_files(k8s, sorted(CRD_DIR.glob("*")))


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
        operator_settings.RESYNC_ENV: str(resync_s),
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
