"""A loopback stand-in for the kubelet: each broker pod's container as an ``ariane broker`` process.

The test control plane has no kubelet (kwok only marks pods Ready), yet the operator's HA steps
need real brokers behind the pods. ``LoopbackKubelet`` polls the pods of one namespace and, for
each pod name it holds a slot for, does what a kubelet would:

- once the pod is scheduled (``spec.nodeName`` set) and not terminating, it starts the pod's
  container command: the pod's own ``args`` with its env vars resolved as the kubelet resolves
  them at container start (``fieldRef`` to the pod's name and labels, ``configMapKeyRef`` read
  from the ConfigMap then), ``--config`` pointing at a copy of the mounted ConfigMap's file,
  then loopback addresses appended (listen = advertise, HA port, name server, store dir, metrics
  port; argparse keeps the last value), so nothing dials a cluster address;
- when the pod is deleted or replaced (another uid), it stops the process (SIGTERM, bounded);
  a process that exits by itself is started again (``restartPolicy: Always``).

Each slot keeps its ports and store directory across restarts, as a pod keeps its PVC. Readiness
stays kwok's (it does not follow the process). ``kill`` SIGKILLs a pod's process and keeps it
down until the pod is replaced (a node dying under it).
"""

from __future__ import annotations

import dataclasses
import logging
import pathlib
import re
import sys
import threading
from typing import Any

import kubernetes  # type: ignore[import-untyped]

from e2e.testenv import processes

logger = logging.getLogger(__name__)

TICK_S = 0.2
"""Pause between two looks at the pods, s."""
JOIN_TIMEOUT_S = 30.0
"""Longest wait for the polling thread to end, s."""
_VARIABLE = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


@dataclasses.dataclass
class Slot:
    """One pod name and the loopback resources its broker keeps across restarts."""

    pod: str
    port: int
    ha_port: int
    metrics_port: int
    store: pathlib.Path
    process: processes.ManagedProcess | None = None
    uid: str = ""
    killed_uid: str = ""
    starts: int = 0

    @property
    def endpoint(self) -> str:
        """``127.0.0.1:PORT`` of the broker's gRPC port."""
        return f"127.0.0.1:{self.port}"


class LoopbackKubelet:
    """Runs the brokers of ``pods`` in ``namespace`` as local processes (see the module).

    Args:
        kubeconfig: the test cluster's kubeconfig (the thread opens its own client).
        namespace: where the pods live.
        pods: the pod names to run (``<group>-<ordinal>``).
        namesrv: ``127.0.0.1:PORT`` of the loopback name server the brokers register with.
        work: directory for stores, config copies and logs.
    """

    def __init__(
        self,
        kubeconfig: pathlib.Path,
        namespace: str,
        pods: list[str],
        namesrv: str,
        work: pathlib.Path,
    ) -> None:
        self.namespace = namespace
        self.namesrv = namesrv
        self.work = work
        self.slots = {
            pod: Slot(
                pod,
                processes.free_port(),
                processes.free_port(),
                processes.free_port(),
                work / f"store-{pod}",
            )
            for pod in pods
        }
        self._api = kubernetes.config.new_client_from_config(str(kubeconfig))
        self._core = kubernetes.client.CoreV1Api(self._api)
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="loopback-kubelet", daemon=True)

    def overrides(self) -> dict[str, str]:
        """``{"<ns>/<pod>": "127.0.0.1:PORT"}``: the operator's pod address override map."""
        return {f"{self.namespace}/{pod}": slot.endpoint for pod, slot in self.slots.items()}

    def endpoint(self, pod: str) -> str:
        """The broker endpoint standing in for ``pod``."""
        return self.slots[pod].endpoint

    def start(self) -> None:
        """Start polling (in a thread)."""
        self._thread.start()

    def stop(self) -> None:
        """Stop polling, then every process (by PID)."""
        self._stop.set()
        self._thread.join(JOIN_TIMEOUT_S)
        with self._lock:
            for slot in self.slots.values():
                if slot.process is not None:
                    slot.process.stop()
                    slot.process = None
        self._api.close()

    def kill(self, pod: str) -> None:
        """SIGKILL ``pod``'s broker and keep it down until the pod is replaced."""
        with self._lock:
            slot = self.slots[pod]
            if slot.process is not None:
                slot.process.popen.kill()
                slot.process.popen.wait()
                slot.process = None
            slot.killed_uid = slot.uid

    def _run(self) -> None:
        while not self._stop.wait(TICK_S):
            try:
                self._tick()
            except Exception:  # the API may hiccup; the next tick tries again
                logger.exception("loopback kubelet tick failed")

    def _tick(self) -> None:
        pods = {
            p.metadata.name: p
            for p in self._core.list_namespaced_pod(self.namespace).items
            if p.metadata.name in self.slots
        }
        with self._lock:
            for name, slot in self.slots.items():
                self._converge(slot, pods.get(name))

    def _converge(self, slot: Slot, pod: Any) -> None:
        gone = pod is None or pod.metadata.deletion_timestamp is not None
        if slot.process is not None and (gone or pod.metadata.uid != slot.uid):
            logger.info("pod %s deleted or replaced: stopping its broker", slot.pod)
            slot.process.stop()
            slot.process = None
        if slot.process is not None and not slot.process.running():
            slot.process = None  # exited by itself: start it again below
        if gone or not pod.spec.node_name or pod.metadata.uid == slot.killed_uid:
            return
        if slot.process is None:
            slot.uid = pod.metadata.uid
            slot.process = self._start(slot, pod)

    def _env(self, pod: Any) -> dict[str, str]:
        values: dict[str, str] = {}
        for var in pod.spec.containers[0].env or []:
            source = var.value_from
            if source is None:
                values[var.name] = var.value or ""
            elif source.field_ref is not None:
                values[var.name] = _field(pod, source.field_ref.field_path)
            elif source.config_map_key_ref is not None:
                ref = source.config_map_key_ref
                data = self._core.read_namespaced_config_map(ref.name, self.namespace).data
                values[var.name] = (data or {})[ref.key]
        return values

    def _start(self, slot: Slot, pod: Any) -> processes.ManagedProcess:
        env = self._env(pod)
        args = [
            _VARIABLE.sub(lambda m: env.get(m.group(1), m.group(0)), a)
            for a in pod.spec.containers[0].args
        ]
        if "--config" in args:
            index = args.index("--config") + 1
            args[index] = str(self._config_copy(pod, slot, args[index]))
        args += ["--listen", slot.endpoint, "--advertise", slot.endpoint]
        args += ["--ha-listen", f"127.0.0.1:{slot.ha_port}", "--namesrv", self.namesrv]
        args += ["--store-dir", str(slot.store), "--workers", "0"]
        args += ["--metrics-listen", f"127.0.0.1:{slot.metrics_port}"]
        slot.starts += 1
        logger.info("starting pod %s: ariane %s", slot.pod, " ".join(args))
        return processes.ManagedProcess.start(
            f"{slot.pod}-{slot.starts}",
            [sys.executable, "-m", "ariane", *args],
            log_dir=self.work,
            cwd=self.work,
        )

    def _config_copy(self, pod: Any, slot: Slot, mounted: str) -> pathlib.Path:
        """The file ``mounted`` of the pod's ConfigMap volumes, copied under ``work``."""
        container = pod.spec.containers[0]
        for mount in container.volume_mounts or []:
            if not mounted.startswith(mount.mount_path.rstrip("/") + "/"):
                continue
            volume = next(v for v in pod.spec.volumes if v.name == mount.name)
            name = volume.config_map.name
            data = self._core.read_namespaced_config_map(name, self.namespace).data or {}
            copy = self.work / f"{slot.pod}-{pathlib.Path(mounted).name}"
            copy.write_text(data[pathlib.Path(mounted).name])
            return copy
        raise FileNotFoundError(f"{mounted} is not in a ConfigMap volume of pod {slot.pod}")


def _field(pod: Any, path: str) -> str:
    """A downward-API ``fieldPath`` of ``pod`` (the ones broker pods use)."""
    if path == "metadata.name":
        return str(pod.metadata.name)
    match = re.fullmatch(r"metadata\.labels\['([^']+)'\]", path)
    if match:
        return str((pod.metadata.labels or {})[match.group(1)])
    raise ValueError(f"unsupported fieldPath {path!r}")
