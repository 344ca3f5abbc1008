"""A real Kubernetes node for the e2e tests: pods run in containers by a kubelet (k8s-real-node).

``start`` brings up, in order: the host journal (``hostchanges``: what is about to change), a
FORWARD guard, the bridge ``BRIDGE`` at ``BRIDGE_IP`` with a route for the service range,
containerd (Debian; CRI, runc, the CNI bridge, its root, state and socket under the work
directory) with the locally built pause and Ariane images imported, then etcd, kube-apiserver on
the bridge IP, KCM and the scheduler, the kubelet (node ``NODE_NAME``), kube-proxy (iptables
mode) and CoreDNS on the bridge IP (no forwarder), then the default StorageClass with
pre-created hostPath PersistentVolumes owned by uid 10001. ``RealNode.stop`` deletes every pod,
stops everything by PID and restores the host from the journal.

Invariants:
- Every listener is on 127.0.0.1 or on the bridge IP; pods have no default route (their only
  routes are the pod subnet and the service range through the bridge), CoreDNS forwards nothing,
  and the FORWARD guard (mangle table, before any filter-table chain) drops every forwarded
  packet that does not enter and leave by the bridge.
- NetworkPolicies are enforced only while a ``netpolicy.PolicyAgent`` runs (a module opts in).
- One real node per machine at a time (``LOCK_PATH``, flock): the bridge, the kubelet port and the
  host's iptables are machine-wide.
- The host is restored on stop, and at the next start if a run died before restoring.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import logging
import os
import pathlib
import shutil
import ssl
import subprocess
import tempfile
import time
from typing import Any, TextIO

import kubernetes  # type: ignore[import-untyped]

from e2e.testenv import cluster, hostchanges, pki, processes

logger = logging.getLogger(__name__)

BRIDGE = "ariane0"
BRIDGE_IP = "10.244.0.1"
POD_CIDR = "10.244.0.0/24"
SERVICE_CIDR = "10.96.0.0/16"
SERVICE_IP = "10.96.0.1"
NODE_NAME = "ariane-node"
API_PORT = 6443
KUBELET_PORT = 10250
GUARD_CHAIN = "ARIANE-FORWARD"
PAUSE_IMAGE = "localhost/pause:pause"
"""The sandbox image (build-node.sh's pause-oci.tar, imported with base name localhost/pause)."""
LOCK_PATH = pathlib.Path("/run/ariane-testenv/realnode.lock")
LOCK_TIMEOUT_S = 600.0
"""Longest wait for another session's real node to finish."""
STORAGE_CLASS = "standard"
VOLUME_COUNT = 24
VOLUME_UID = 10001
"""Owner of the hostPath volumes: the image's user (the Dockerfile's USER)."""
POD_TIMEOUT_S = 120.0
"""Default bound on a run-to-completion pod, s."""
DRAIN_TIMEOUT_S = 60.0
IMPORT_TIMEOUT_S = 600.0
"""Bound on importing one image archive into containerd, s (``import_images``)."""
"""Bound on waiting for the kubelet to remove every container at stop, s."""


@dataclasses.dataclass(frozen=True, slots=True)
class Artifacts:
    """What the build scripts made: binaries and images."""

    control_plane_bin: pathlib.Path
    """build.sh's bin directory (etcd, kube-*, helm)."""
    node_dir: pathlib.Path
    """build-node.sh's output (bin/{kubelet,kube-proxy,coredns}, pause-oci.tar)."""
    image_dir: pathlib.Path
    """build-image.sh's output (ariane.tar, IMAGE)."""

    @property
    def image(self) -> str:
        """Name of the Ariane image built from the Dockerfile (``localhost/ariane:<key>``)."""
        return (self.image_dir / "IMAGE").read_text().strip()

    @property
    def client_image(self) -> str:
        """The Ariane image plus the official RocketMQ Python client (Dockerfile.client)."""
        return (self.image_dir / "CLIENT_IMAGE").read_text().strip()


@dataclasses.dataclass(frozen=True, slots=True)
class SparkArtifacts:
    """What build-spark.sh made: the flights job's and the spark-operator's images."""

    spark_dir: pathlib.Path
    """build-spark.sh's output (ariane-spark.tar, spark-operator.tar and their names)."""

    @property
    def app_image(self) -> str:
        """The image of examples/spark/Dockerfile (``localhost/ariane-spark:<key>``)."""
        return (self.spark_dir / "SPARK_APP_IMAGE").read_text().strip()

    @property
    def operator_image(self) -> str:
        """The spark-operator's image (``localhost/spark-operator:<version>-<key>``)."""
        return (self.spark_dir / "OPERATOR_IMAGE").read_text().strip()

    def archives(self) -> dict[str, pathlib.Path]:
        """Image name -> its docker-archive, for ``import_images``."""
        return {
            self.app_image: self.spark_dir / "ariane-spark.tar",
            self.operator_image: self.spark_dir / "spark-operator.tar",
        }


@dataclasses.dataclass(slots=True)
class RealNode:
    """Handle on a running real-node cluster; ``stop`` once, by whoever started it."""

    cluster: cluster.Cluster
    """The control plane handle (kubeconfig, api_client, kubectl, helm)."""
    artifacts: Artifacts
    journal: hostchanges.Journal
    socket: pathlib.Path
    """containerd's socket."""
    lock: TextIO | None = None

    @property
    def image(self) -> str:
        """The Ariane image (``imagePullPolicy: Never``/``IfNotPresent`` finds it imported)."""
        return self.artifacts.image

    def ctr(
        self, *args: str, check: bool = True, timeout_s: float = 60.0
    ) -> subprocess.CompletedProcess[str]:
        """Runs ``ctr -n k8s.io`` against this node's containerd (at most ``timeout_s``)."""
        return subprocess.run(
            ["ctr", "--address", str(self.socket), "--namespace", "k8s.io", *args],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=check,
        )

    def kill_container(self, container_id: str) -> None:
        """SIGKILLs a container's task through containerd (as an OOM kill or crash would)."""
        self.ctr("tasks", "kill", "--signal", "SIGKILL", container_id)

    def stop(self) -> None:
        """Deletes every pod, stops every component by PID, restores the host."""
        try:
            _drain(self)
        except Exception:
            logger.exception("draining the real node failed; stopping anyway")
        for name, args in (("tasks", ("kill", "--signal", "SIGKILL")), ("tasks", ("delete",))):
            for task in self.ctr("tasks", "list", "--quiet", check=False).stdout.split():
                self.ctr(name, *args, task, check=False)
        with contextlib.suppress(Exception):
            self.cluster.api_client.close()
        for process in reversed(self.cluster.processes):
            process.stop()
        self.cluster.processes.clear()
        if self.cluster.settings.keep_work_dir:
            kept = self.cluster.work_dir.with_name(self.cluster.work_dir.name + "-kept")
            shutil.copytree(self.cluster.work_dir / "logs", kept, dirs_exist_ok=True)
            with contextlib.suppress(OSError):
                shutil.copytree(
                    self.cluster.work_dir / "pod-logs", kept / "pods", dirs_exist_ok=True
                )
            logger.warning("kept the real node's logs in %s", kept)
        self.journal.restore()
        if self.lock is not None:
            self.lock.close()


def _drain(node: RealNode) -> None:
    core = kubernetes.client.CoreV1Api(node.cluster.api_client)
    for ns in core.list_namespace().items:
        if ns.metadata.name not in ("kube-system", "kube-public", "kube-node-lease"):
            core.delete_collection_namespaced_pod(ns.metadata.name, grace_period_seconds=0)
    processes.wait_until(
        lambda: not node.ctr("tasks", "list", "--quiet").stdout.split(),
        timeout_s=DRAIN_TIMEOUT_S,
        what="the kubelet to stop every container and sandbox",
    )
    logger.info("real node drained: no container runs")


def _lock() -> TextIO:
    LOCK_PATH.parent.mkdir(parents=True, exist_ok=True)
    handle = LOCK_PATH.open("w")
    deadline = time.monotonic() + LOCK_TIMEOUT_S
    while True:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return handle
        except BlockingIOError:
            if time.monotonic() > deadline:
                handle.close()
                raise TimeoutError(f"another real test node holds {LOCK_PATH}") from None
            time.sleep(1.0)


def _sh(*argv: str) -> None:
    subprocess.run(argv, check=True, capture_output=True, text=True, timeout=30)


def _guard_forwarding() -> None:
    """ARIANE-FORWARD, first in the mangle table's FORWARD (which runs before the filter
    table's, where kube-proxy and the NetworkPolicy agent put their chains first): a forwarded
    packet that does not enter and leave by the bridge is dropped, a bridge-to-bridge one
    goes on to the filter table; there, a last rule accepts it (whatever FORWARD's policy)."""
    for table, verdict in (("mangle", "RETURN"), ("filter", "ACCEPT")):
        subprocess.run(["iptables", "-t", table, "-N", GUARD_CHAIN], capture_output=True)
        _sh("iptables", "-t", table, "-F", GUARD_CHAIN)
        _sh("iptables", "-t", table, "-A", GUARD_CHAIN, "-i", BRIDGE, "-o", BRIDGE, "-j", verdict)
        while (
            subprocess.run(
                ["iptables", "-t", table, "-D", "FORWARD", "-j", GUARD_CHAIN], capture_output=True
            )
        ).returncode == 0:
            pass
    _sh("iptables", "-t", "mangle", "-A", GUARD_CHAIN, "-j", "DROP")
    _sh("iptables", "-t", "mangle", "-I", "FORWARD", "1", "-j", GUARD_CHAIN)
    _sh("iptables", "-t", "filter", "-A", "FORWARD", "-j", GUARD_CHAIN)


def _make_bridge(journal: hostchanges.Journal) -> None:
    if pathlib.Path(f"/sys/class/net/{BRIDGE}").exists():
        raise RuntimeError(f"bridge {BRIDGE} already exists: not ours, refusing to touch it")
    journal.set_bridge(BRIDGE)
    _sh("ip", "link", "add", BRIDGE, "type", "bridge")
    _sh("ip", "addr", "add", f"{BRIDGE_IP}/24", "dev", BRIDGE)
    _sh("ip", "link", "set", BRIDGE, "up")
    _sh("ip", "route", "add", SERVICE_CIDR, "dev", BRIDGE, "src", BRIDGE_IP)


def containerd_config(work: pathlib.Path, socket: pathlib.Path, root: pathlib.Path) -> str:
    """containerd 1.6 config: state under ``work``, images kept in ``root`` (the cache); the
    recipe's required settings (``restrict_oom_score_adj``, ``runtime_type``)."""
    cri = 'plugins."io.containerd.grpc.v1.cri"'
    return f"""version = 2
root = "{root}"
state = "{work}/containerd/state"
[grpc]
  address = "{socket}"
[plugins."io.containerd.internal.v1.opt"]
  path = "{work}/containerd/opt"
[{cri}]
  sandbox_image = "{PAUSE_IMAGE}"
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  [{cri}.cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "{work}/cni"
  [{cri}.containerd]
    default_runtime_name = "runc"
  [{cri}.containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
  [{cri}.containerd.runtimes.runc.options]
    SystemdCgroup = false
"""


def cni_config(work: pathlib.Path) -> dict[str, Any]:
    """The bridge network: no masquerade, no default route (only the service range)."""
    return {
        "cniVersion": "0.4.0",
        "name": "ariane",
        "plugins": [
            {
                "type": "bridge",
                "bridge": BRIDGE,
                "isGateway": True,
                "ipMasq": False,
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": POD_CIDR, "gateway": BRIDGE_IP}]],
                    "routes": [{"dst": SERVICE_CIDR}],
                    "dataDir": str(work / "cni-ipam"),
                },
            }
        ],
    }


def kubelet_config(
    work: pathlib.Path, keys: pki.Pki, socket: pathlib.Path, healthz: int
) -> dict[str, Any]:
    """KubeletConfiguration of the recipe: cgroup v1 allowed, resolv.conf away from the host's."""
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "failCgroupV1": False,
        "cgroupDriver": "cgroupfs",
        "containerRuntimeEndpoint": f"unix://{socket}",
        "address": BRIDGE_IP,
        "port": KUBELET_PORT,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": healthz,
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": False},
            "x509": {"clientCAFile": str(keys.ca_cert)},
        },
        "authorization": {"mode": "AlwaysAllow"},
        "tlsCertFile": str(work / "pki" / "kubelet.crt"),
        "tlsPrivateKeyFile": str(work / "pki" / "kubelet.key"),
        "failSwapOn": False,
        "resolvConf": str(work / "pod-resolv.conf"),
        "clusterDNS": [BRIDGE_IP],
        "clusterDomain": "cluster.local",
        "podLogsDir": str(work / "pod-logs"),
        "evictionHard": {
            "memory.available": "100Mi",
            "nodefs.available": "1%",
            "imagefs.available": "1%",
        },
        "imageGCHighThresholdPercent": 99,
        "imageGCLowThresholdPercent": 98,
        "serializeImagePulls": False,
        "syncFrequency": "5s",
        "fileCheckFrequency": "5s",
    }


def kube_proxy_config(kubeconfig: pathlib.Path, metrics: int, healthz: int) -> dict[str, Any]:
    """iptables mode; no conntrack sysctls, no route_localnet, NodePorts on the bridge IP only."""
    return {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "clientConnection": {"kubeconfig": str(kubeconfig)},
        "mode": "iptables",
        "clusterCIDR": POD_CIDR,
        "hostnameOverride": NODE_NAME,
        "metricsBindAddress": f"127.0.0.1:{metrics}",
        "healthzBindAddress": f"127.0.0.1:{healthz}",
        "conntrack": {
            "maxPerCore": 0,
            "min": 0,
            "tcpEstablishedTimeout": "0s",
            "tcpCloseWaitTimeout": "0s",
        },
        "iptables": {"localhostNodePorts": False, "syncPeriod": "10s", "minSyncPeriod": "0s"},
        "nodePortAddresses": [f"{BRIDGE_IP}/32"],
    }


def corefile(kubeconfig: pathlib.Path, ready_port: int) -> str:
    """Cluster names only, on the bridge IP; no forwarder, so no query leaves the machine."""
    return f"""cluster.local:53 in-addr.arpa:53 {{
    bind {BRIDGE_IP}
    errors
    ready 127.0.0.1:{ready_port}
    kubernetes cluster.local in-addr.arpa {{
        kubeconfig {kubeconfig} ariane-test
        pods insecure
        ttl 2
    }}
}}
.:53 {{
    bind {BRIDGE_IP}
    errors
}}
"""


def _apiserver_argv(bin_dir: pathlib.Path, keys: pki.Pki, ports: cluster.Ports) -> list[str]:
    """The loopback control plane's flags, moved onto the bridge IP with the Node authorizer."""
    settings = cluster.Settings(service_cidr=SERVICE_CIDR)
    base = cluster.apiserver_argv(bin_dir, keys, ports, settings)
    replaced = {
        "--bind-address": BRIDGE_IP,
        "--advertise-address": BRIDGE_IP,
        "--secure-port": str(API_PORT),
        "--service-account-issuer": "https://kubernetes.default.svc.cluster.local",
        "--authorization-mode": "Node,RBAC",
        "--endpoint-reconciler-type": "lease",
    }
    argv = [
        f"{a.split('=')[0]}={replaced[a.split('=')[0]]}" if a.split("=")[0] in replaced else a
        for a in base
    ]
    return [
        *argv,
        f"--kubelet-client-certificate={keys.admin_cert}",
        f"--kubelet-client-key={keys.admin_key}",
        "--kubelet-preferred-address-types=InternalIP",
        "--enable-admission-plugins=NodeRestriction",
    ]


def _storage(api: Any, work: pathlib.Path) -> None:
    """The default StorageClass (no provisioner) and VOLUME_COUNT hostPath volumes of it."""
    kubernetes.client.StorageV1Api(api).create_storage_class(
        {
            "metadata": {
                "name": STORAGE_CLASS,
                "annotations": {"storageclass.kubernetes.io/is-default-class": "true"},
            },
            "provisioner": "kubernetes.io/no-provisioner",
            "reclaimPolicy": "Retain",
            "volumeBindingMode": "Immediate",
        }
    )
    core = kubernetes.client.CoreV1Api(api)
    for index in range(VOLUME_COUNT):
        path = work / "volumes" / f"pv-{index}"
        path.mkdir(parents=True)
        os.chown(path, VOLUME_UID, VOLUME_UID)
        core.create_persistent_volume(
            {
                "metadata": {"name": f"local-pv-{index}"},
                "spec": {
                    "capacity": {"storage": "100Gi"},
                    "accessModes": ["ReadWriteOnce"],
                    "persistentVolumeReclaimPolicy": "Retain",
                    "storageClassName": STORAGE_CLASS,
                    "hostPath": {"path": str(path), "type": "Directory"},
                },
            }
        )


def _write_configs(work: pathlib.Path, socket: pathlib.Path, keys: pki.Pki) -> dict[str, int]:
    """Writes containerd, CNI, kubelet, kube-proxy and CoreDNS configs; returns their ports."""
    ports = {name: processes.free_port() for name in ("kubelet", "proxy", "proxy_health", "dns")}
    (work / "cni").mkdir()
    (work / "cni" / "10-ariane.conflist").write_text(json.dumps(cni_config(work), indent=1))
    (work / "containerd.toml").write_text(containerd_config(work, socket, containerd_root()))
    (work / "pod-resolv.conf").write_text("nameserver 127.0.0.1\n")
    kubeconfig = work / "kubeconfig"
    (work / "kubelet.yaml").write_text(
        json.dumps(kubelet_config(work, keys, socket, ports["kubelet"]))
    )
    (work / "kube-proxy.yaml").write_text(
        json.dumps(kube_proxy_config(kubeconfig, ports["proxy"], ports["proxy_health"]))
    )
    (work / "Corefile").write_text(corefile(kubeconfig, ports["dns"]))
    kubelet_kubeconfig = {
        **json.loads(kubeconfig.read_text()),
        "users": [
            {
                "name": "admin",
                "user": {
                    "client-certificate": str(work / "pki" / "kubelet.crt"),
                    "client-key": str(work / "pki" / "kubelet.key"),
                },
            }
        ],
    }
    (work / "kubelet.kubeconfig").write_text(json.dumps(kubelet_kubeconfig))
    return ports


def _start(node: RealNode, name: str, argv: list[str]) -> processes.ManagedProcess:
    running = cluster._start(node.cluster, name, argv)
    node.journal.add_process(name, running.popen.pid)
    return running


def _get_ok(url: str, context: ssl.SSLContext | None = None) -> bool:
    return cluster._get_ok(url, context)


def containerd_root() -> pathlib.Path:
    """containerd's root (content and snapshots), kept in the cache: a warm start finds the
    images unpacked. Only one real node runs at a time (LOCK_PATH), so one root suffices."""
    cache = pathlib.Path(os.environ.get("TESTENV_CACHE", pathlib.Path.home() / ".cache" / "ariane"))
    return cache / "node-containerd"


def _start_containerd(node: RealNode) -> None:
    """Starts containerd, drops containers a dead run left and stale Ariane images, and
    imports the pause and Ariane images it does not hold yet."""
    work = node.cluster.work_dir
    containerd = _start(
        node, "containerd", ["containerd", "--config", str(work / "containerd.toml")]
    )
    containerd.wait_ready(
        lambda: node.ctr("version").returncode == 0,
        timeout_s=node.cluster.settings.ready_timeout_s,
        what="containerd",
    )
    for container in node.ctr("containers", "list", "--quiet").stdout.split():
        node.ctr("containers", "delete", container, check=False)
    wanted = {node.artifacts.image: "ariane.tar", node.artifacts.client_image: "ariane-client.tar"}
    held = set(node.ctr("images", "list", "--quiet").stdout.split())
    for stale in held:
        if (
            stale.startswith(("localhost/ariane:", "localhost/ariane-client:"))
            and stale not in wanted
        ):
            node.ctr("images", "remove", stale, check=False)
    if PAUSE_IMAGE not in held:
        pause = node.artifacts.node_dir / "pause-oci.tar"
        node.ctr("images", "import", "--base-name", "localhost/pause", str(pause))
    for name, archive in wanted.items():
        if name not in held:
            node.ctr("images", "import", str(node.artifacts.image_dir / archive))


def import_images(
    node: RealNode, wanted: dict[str, pathlib.Path], timeout_s: float = IMPORT_TIMEOUT_S
) -> None:
    """Imports each ``name: docker-archive`` of ``wanted`` that containerd does not hold, after
    removing the images of the same repositories under other tags (older builds: the
    containerd root is kept in the cache, so they would pile up).

    Raises:
        subprocess.CalledProcessError: ``ctr`` refused an archive.
        subprocess.TimeoutExpired: an import took longer than ``timeout_s`` (a 2 GB image
            takes about a minute on a busy machine).
    """
    held = set(node.ctr("images", "list", "--quiet").stdout.split())
    repositories = {name.rsplit(":", 1)[0] + ":" for name in wanted}
    for stale in held - set(wanted):
        if stale.startswith(tuple(repositories)):
            node.ctr("images", "remove", stale, check=False)
    for name, archive in wanted.items():
        if name not in held:
            node.ctr("images", "import", str(archive), timeout_s=timeout_s)


def _start_control_plane(node: RealNode, keys: pki.Pki, ports: cluster.Ports) -> None:
    c, timeout_s = node.cluster, node.cluster.settings.ready_timeout_s
    etcd = _start(node, "etcd", cluster.etcd_argv(c.bin_dir, c.work_dir / "etcd", ports))
    etcd.wait_ready(
        lambda: _get_ok(f"http://127.0.0.1:{ports.etcd_client}/health"),
        timeout_s=timeout_s,
        what="etcd /health",
    )
    apiserver = _start(node, "kube-apiserver", _apiserver_argv(c.bin_dir, keys, ports))
    context = cluster._client_context(keys)
    apiserver.wait_ready(
        lambda: _get_ok(f"{c.server_url}/readyz", context),
        timeout_s=timeout_s,
        what="kube-apiserver /readyz",
    )
    kcm_argv = cluster.controller_manager_argv(c.bin_dir, c.kubeconfig, keys, ports, c.work_dir)
    kcm_argv += [
        f"--service-cluster-ip-range={SERVICE_CIDR}",
        f"--cluster-signing-cert-file={keys.ca_cert}",
        f"--cluster-signing-key-file={keys.ca_key}",
    ]
    _start(node, "kube-controller-manager", kcm_argv)
    _start(
        node,
        "kube-scheduler",
        cluster._component_argv(
            c.bin_dir / "kube-scheduler",
            c.kubeconfig,
            ports.scheduler,
            c.work_dir / "scheduler-certs",
        ),
    )


def _start_node_agents(node: RealNode, node_ports: dict[str, int]) -> None:
    c, bin_dir = node.cluster, node.artifacts.node_dir / "bin"
    work, timeout_s = c.work_dir, c.settings.ready_timeout_s
    core = kubernetes.client.CoreV1Api(c.api_client)
    kubelet = _start(
        node,
        "kubelet",
        [
            str(bin_dir / "kubelet"),
            f"--config={work / 'kubelet.yaml'}",
            f"--kubeconfig={work / 'kubelet.kubeconfig'}",
            f"--hostname-override={NODE_NAME}",
            f"--node-ip={BRIDGE_IP}",
            f"--root-dir={work / 'kubelet'}",
            "--v=1",
        ],
    )
    kubelet.wait_ready(
        lambda: cluster._node_ready(core, NODE_NAME), timeout_s=timeout_s, what="node Ready"
    )
    proxy = _start(
        node, "kube-proxy", [str(bin_dir / "kube-proxy"), f"--config={work / 'kube-proxy.yaml'}"]
    )
    proxy.wait_ready(
        lambda: _get_ok(f"http://127.0.0.1:{node_ports['proxy_health']}/healthz"),
        timeout_s=timeout_s,
        what="kube-proxy /healthz",
    )
    dns = _start(node, "coredns", [str(bin_dir / "coredns"), "-conf", str(work / "Corefile")])
    dns.wait_ready(
        lambda: _get_ok(f"http://127.0.0.1:{node_ports['dns']}/ready"),
        timeout_s=timeout_s,
        what="CoreDNS /ready",
    )
    _guard_forwarding()  # the filter table's accept last again, after kube-proxy's chains


def start(artifacts: Artifacts, settings: cluster.Settings | None = None) -> RealNode:
    """Starts the real-node cluster (see the module docstring); the caller must ``stop`` it.

    Raises:
        TimeoutError: another session's real node did not finish within LOCK_TIMEOUT_S.
        processes.StartupError: a component exited or was not ready in time (with its log
            tail); everything started so far has been stopped and the host restored.
    """
    settings = settings or cluster.Settings(ready_timeout_s=120.0, command_timeout_s=180.0)
    lock = _lock()
    hostchanges.restore_leftovers()
    work = pathlib.Path(tempfile.mkdtemp(prefix="ariane-node-"))
    (work / "logs").mkdir()
    socket = work / "containerd" / "containerd.sock"
    journal = hostchanges.Journal.begin(work, socket)
    control = cluster.Cluster(
        kubeconfig=work / "kubeconfig",
        server_url=f"https://{BRIDGE_IP}:{API_PORT}",
        api_client=None,
        bin_dir=artifacts.control_plane_bin,
        kubectl_path=cluster.find_kubectl(),
        work_dir=work,
        settings=settings,
        processes=[],
    )
    node = RealNode(cluster=control, artifacts=artifacts, journal=journal, socket=socket, lock=lock)
    try:
        _guard_forwarding()
        _make_bridge(journal)
        sans = [
            f"IP:{BRIDGE_IP}",
            f"IP:{SERVICE_IP}",
            "DNS:kubernetes",
            "DNS:kubernetes.default",
            "DNS:kubernetes.default.svc.cluster.local",
        ]
        keys = pki.make_pki(work / "pki", sans, NODE_NAME)
        cluster.write_kubeconfig(control.kubeconfig, control.server_url, keys)
        node_ports = _write_configs(work, socket, keys)
        _start_containerd(node)
        _start_control_plane(node, keys, cluster._pick_ports())
        control.api_client = kubernetes.config.new_client_from_config(
            config_file=str(control.kubeconfig)
        )
        _start_node_agents(node, node_ports)
        _storage(control.api_client, work)
    except BaseException:
        node.stop()
        raise
    logger.info("real test node ready: %s (files in %s)", control.server_url, work)
    return node


def run_pod(
    node: RealNode, namespace: str, pod: dict[str, Any], timeout_s: float = POD_TIMEOUT_S
) -> tuple[str, str]:
    """Creates ``pod`` (``restartPolicy: Never``), waits until it ends; its phase and log.

    Raises:
        TimeoutError: it neither Succeeded nor Failed within ``timeout_s``.
    """
    core = kubernetes.client.CoreV1Api(node.cluster.api_client)
    name = pod["metadata"]["name"]
    core.create_namespaced_pod(namespace, pod)
    phase: list[str] = []

    def ended() -> bool:
        phase.append(str(core.read_namespaced_pod(name, namespace).status.phase))
        return phase[-1] in ("Succeeded", "Failed")

    processes.wait_until(ended, timeout_s=timeout_s, what=f"pod {name} to end")
    return phase[-1], pod_log(node, namespace, name)


def run_to_completion(
    node: RealNode, namespace: str, pod: dict[str, Any], timeout_s: float = POD_TIMEOUT_S
) -> str:
    """``run_pod`` that must succeed; returns the log.

    Raises:
        processes.StartupError: the pod Failed (the message holds its log).
        TimeoutError: it did not finish within ``timeout_s``.
    """
    phase, log = run_pod(node, namespace, pod, timeout_s)
    if phase != "Succeeded":
        raise processes.StartupError(f"pod {pod['metadata']['name']} failed:\n{log}")
    return log


def pod_log(node: RealNode, namespace: str, name: str) -> str:
    """The log of the pod's (first) container, as text (the client's own decoding mangles it)."""
    core = kubernetes.client.CoreV1Api(node.cluster.api_client)
    response = core.read_namespaced_pod_log(name, namespace, _preload_content=False)
    return bytes(response.data).decode("utf-8", "replace")
