"""Fixtures for the end-to-end tests: one real control plane per session, a namespace per test.

The binaries come from the cache filled by ``e2e/testenv/build.sh`` (``make e2e`` runs it
first). When they are missing the tests are skipped with the reason, unless
``TESTENV_REQUIRED=1`` (set by ``make e2e``), which turns that into a failure.
"""

from __future__ import annotations

import os
import pathlib
import sys
import uuid
from collections.abc import Iterator

import kubernetes  # type: ignore[import-untyped]
import pytest

from e2e.testenv import build, cluster, netpolicy, objects, processes, realnode

NAMESPACE_READY_TIMEOUT_S = 60.0

TESTS_DIR = pathlib.Path(__file__).resolve().parents[1] / "tests"
if str(TESTS_DIR) not in sys.path:
    # The unit tests' helpers (prometheus_testing: the Debian Prometheus) by the module names
    # they have there and under mypy; pytest puts tests/ on the path only when it collects it.
    sys.path.append(str(TESTS_DIR))


def pytest_configure(config: pytest.Config) -> None:
    """Registers the ``k8s`` marker (tests that need the real control plane)."""
    config.addinivalue_line("markers", "k8s: needs the real test control plane (e2e/testenv)")
    config.addinivalue_line(
        "markers", "realnode: needs the real test node (kubelet, containerd; e2e/testenv)"
    )


def _missing(reason: str) -> None:
    if os.environ.get("TESTENV_REQUIRED") == "1":
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def k8s_bin_dir() -> pathlib.Path:
    """The cached control-plane binaries of the pinned versions (warm ``build.sh --check``)."""
    try:
        return build.cached_bin_dir()
    except build.NotBuiltError as error:
        if os.environ.get("TESTENV_REQUIRED") == "1":
            pytest.fail(str(error))
        pytest.skip(str(error))


@pytest.fixture(scope="session")
def k8s(k8s_bin_dir: pathlib.Path) -> Iterator[cluster.Cluster]:
    """A running control plane (etcd, apiserver, KCM, scheduler, kwok) for the whole session.

    ``KUBECONFIG`` points at it meanwhile; the previous value is restored afterwards.
    """
    settings = cluster.Settings(keep_work_dir=os.environ.get("TESTENV_KEEP") == "1")
    running = cluster.start_cluster(k8s_bin_dir, settings)
    previous = os.environ.get("KUBECONFIG")
    os.environ["KUBECONFIG"] = str(running.kubeconfig)  # for clients that read it (kopf)
    try:
        yield running
    finally:
        if previous is None:
            os.environ.pop("KUBECONFIG", None)
        else:
            os.environ["KUBECONFIG"] = previous
        running.stop()


@pytest.fixture(scope="session")
def real_node() -> Iterator[realnode.RealNode]:
    """One real-node cluster (kubelet, containerd, kube-proxy, CoreDNS) for the whole session.

    Needs root and the outputs of build.sh, build-node.sh and build-image.sh (``make e2e``
    builds them); skipped with the reason otherwise (a failure under ``TESTENV_REQUIRED=1``).
    """
    if os.geteuid() != 0:
        _missing("the real test node needs root (containerd, bridge, iptables)")
    try:
        artifacts = realnode.Artifacts(
            control_plane_bin=build.cached_bin_dir(),
            node_dir=build.cached_output(build.NODE_SCRIPT),
            image_dir=build.cached_output(build.IMAGE_SCRIPT),
        )
    except build.NotBuiltError as error:
        _missing(str(error))
    settings = cluster.Settings(
        keep_work_dir=os.environ.get("TESTENV_KEEP") == "1",
        ready_timeout_s=120.0,
        command_timeout_s=240.0,
    )
    node = realnode.start(artifacts, settings)
    try:
        yield node
    finally:
        node.stop()


@pytest.fixture(scope="module")
def policy_agent(real_node: realnode.RealNode) -> Iterator[netpolicy.PolicyAgent]:
    """NetworkPolicies enforced on the real node for one module (kube-router's firewall,
    ``netpolicy``); stopped, its chains and ipsets removed, when the module ends."""
    agent = netpolicy.start(real_node)
    try:
        yield agent
    finally:
        agent.stop()


@pytest.fixture(scope="session")
def spark_images(real_node: realnode.RealNode) -> realnode.SparkArtifacts:
    """build-spark.sh's images (the flights job's, the spark-operator's) imported into the
    real node's containerd; skipped when not built (a failure under ``TESTENV_REQUIRED=1``)."""
    try:
        spark = realnode.SparkArtifacts(build.cached_output(build.SPARK_SCRIPT))
    except build.NotBuiltError as error:
        _missing(str(error))
    realnode.import_images(real_node, spark.archives())
    return spark


@pytest.fixture
def real_namespace(real_node: realnode.RealNode) -> Iterator[str]:
    """A fresh namespace on the real node whose ``default`` ServiceAccount exists, enforcing
    the ``restricted`` Pod Security Standard (``objects.RESTRICTED_NAMESPACE_LABELS``)."""
    core = kubernetes.client.CoreV1Api(real_node.cluster.api_client)
    name = f"r-{uuid.uuid4().hex[:10]}"
    labels = objects.RESTRICTED_NAMESPACE_LABELS
    core.create_namespace({"metadata": {"name": name, "labels": labels}})
    processes.wait_until(
        lambda: core.read_namespaced_service_account("default", name) is not None,
        timeout_s=NAMESPACE_READY_TIMEOUT_S,
        what=f"ServiceAccount default in namespace {name}",
    )
    yield name
    core.delete_namespace(name)


@pytest.fixture
def namespace(k8s: cluster.Cluster) -> Iterator[str]:
    """A fresh namespace whose ``default`` ServiceAccount exists (so pods are admitted),
    enforcing the ``restricted`` Pod Security Standard like ``real_namespace``."""
    core = kubernetes.client.CoreV1Api(k8s.api_client)
    name = f"t-{uuid.uuid4().hex[:10]}"
    labels = objects.RESTRICTED_NAMESPACE_LABELS
    core.create_namespace({"metadata": {"name": name, "labels": labels}})
    processes.wait_until(
        lambda: core.read_namespaced_service_account("default", name) is not None,
        timeout_s=NAMESPACE_READY_TIMEOUT_S,
        what=f"ServiceAccount default in namespace {name}",
    )
    yield name
    core.delete_namespace(name)
