"""The chart on the real node: helm install → operator pod → broker pods → official client.

Shares the session's real-node cluster (``real_node``); everything runs in pods from the image
built from the Dockerfile, the client in a pod of the client image (Dockerfile.client).

The tests here install the chart with its sample Broker ``demo`` (``_install(secure=True)``):
secure by default, TLS enforcing and ACL 2.0 on, with the HA fields of the test in
``sampleBroker.extraSpec``; the official client signs as the RocketMQUser ``USER`` (Pub/Sub on
``orders``, Sub as ``billing``) with the keys and CA of its Secret, and ``helm test`` as the
chart's own smoke user. ``test_e2e_realnode_ops`` installs a plaintext Broker of its own
(``secure=False``: its Prometheus scrapes plain HTTP).
"""

from __future__ import annotations

import functools
import json
import pathlib
from typing import Any

import kubernetes  # type: ignore[import-untyped]
import pytest

from e2e import operator_support
from e2e.testenv import objects, processes, realnode

pytestmark = pytest.mark.realnode


DRIVER = (
    pathlib.Path(__file__).resolve().parents[1] / "tests" / "conformance" / "official_py_driver.py"
)
TOPIC = "orders"
GROUP = "billing"
ROLL_TIMEOUT_S = 240.0
BROKER_PODS = "app.kubernetes.io/component=broker"
"""Label selector of the broker pods of every Broker (``model.selector_labels``)."""
USER = "client"
"""The RocketMQUser the official client signs as against the secure sample Broker."""


def _apply(node: realnode.RealNode, namespace: str, body: dict[str, Any]) -> None:
    node.cluster.kubectl("apply", "-n", namespace, "-f", "-", input_text=json.dumps(body))


def _broker(node: realnode.RealNode, namespace: str) -> dict[str, Any]:
    found: dict[str, Any] = kubernetes.client.CustomObjectsApi(
        node.cluster.api_client
    ).get_namespaced_custom_object("ariane.dev", "v1alpha1", namespace, "brokers", "demo")
    return found


def _ready(node: realnode.RealNode, namespace: str) -> bool:
    conditions = _broker(node, namespace).get("status", {}).get("conditions", [])
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def _wait(node: realnode.RealNode, namespace: str, check: Any, what: str) -> None:
    try:
        processes.wait_until(check, timeout_s=ROLL_TIMEOUT_S, what=what)
    except TimeoutError as error:
        raise AssertionError(f"{error}\n{_diagnose(node, namespace)}") from error


def _diagnose(node: realnode.RealNode, namespace: str) -> str:
    """Pods, the Broker's status and the log tails of the operator and broker containers, the
    helm smoke pod and the client pods."""
    kubectl = functools.partial(node.cluster.kubectl, "-n", namespace, check=False)
    parts = [
        kubectl("get", "pods", "-o", "wide").stdout,
        json.dumps(_broker(node, namespace).get("status", {}))[-3000:],
    ]
    core = kubernetes.client.CoreV1Api(node.cluster.api_client)
    brokers = core.list_namespaced_pod(namespace, label_selector=BROKER_PODS).items
    pods = sorted(p.metadata.name for p in brokers) or ["demo-a-0", "demo-a-1"]
    for target in (f"deploy/{_release(namespace)}-ariane", *pods):
        for previous in ((), ("--previous",)):
            tail = kubectl("logs", target, "--tail=25", *previous).stdout
            parts.append(f"--- {target} {' '.join(previous)}\n{tail}")
    names = [p.metadata.name for p in core.list_namespaced_pod(namespace).items]
    for name in sorted(names):  # the helm smoke pod, client pods: why they ended in Error
        if name.endswith("-smoke") or name.startswith("produce-"):
            parts.append(f"--- {name}\n{kubectl('logs', name, '--tail=25').stdout}")
    return "\n".join(parts)


def _driver_pod(node: realnode.RealNode, name: str, *args: str, user: str = "") -> dict[str, Any]:
    """A pod running the official-client driver (tests/conformance) from the client image; with
    ``user``, over TLS trusting that RocketMQUser's Secret's ``ca.crt`` and signing with its
    keys (the kubelet reads them from the Secret)."""
    env: list[dict[str, Any]] = []
    mounts = [{"name": "driver", "mountPath": "/driver"}, {"name": "tmp", "mountPath": "/tmp"}]
    volumes: list[dict[str, Any]] = [
        {"name": "driver", "configMap": {"name": "driver"}},
        {"name": "tmp", "emptyDir": {}},
    ]
    if user:
        env = [
            {"name": "RMQ_DRIVER_TLS", "value": "1"},
            {"name": "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH", "value": "/ca/ca.crt"},
        ] + [
            {"name": var, "valueFrom": {"secretKeyRef": {"name": user, "key": key}}}
            for var, key in (
                ("RMQ_DRIVER_ACCESS_KEY", "accessKey"),
                ("RMQ_DRIVER_SECRET_KEY", "secretKey"),
            )
        ]
        mounts.append({"name": "ca", "mountPath": "/ca"})
        items = [{"key": "ca.crt", "path": "ca.crt"}]
        volumes.append({"name": "ca", "secret": {"secretName": user, "items": items}})
    return {
        "metadata": {"name": name},
        "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 1,
            "securityContext": objects.restricted_pod_security_context(),
            "containers": [
                {
                    "name": "client",
                    "image": node.artifacts.client_image,
                    "imagePullPolicy": "Never",
                    "args": ["/driver/official_py_driver.py", *args],
                    "env": env,
                    "securityContext": objects.restricted_container_security_context(),
                    "volumeMounts": mounts,
                }
            ],
            "volumes": volumes,
        },
    }


def _events(log: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.splitlines() if line.startswith("{")]


def _driver(
    node: realnode.RealNode, namespace: str, name: str, *args: str, user: str = ""
) -> list[dict[str, Any]]:
    """Runs the driver in a pod (as ``user``, see ``_driver_pod``) until it exits 0; its JSON
    events."""
    log = realnode.run_to_completion(node, namespace, _driver_pod(node, name, *args, user=user))
    assert _events(log), f"the driver in pod {name} printed no event:\n{log[-3000:]}"
    return _events(log)


def _produce_until_accepted(
    node: realnode.RealNode,
    namespace: str,
    endpoints: str,
    prefix: str,
    count: int,
    timeout_s: float = ROLL_TIMEOUT_S,
    user: str = "",
) -> set[str]:
    """Sends ``count`` messages (as ``user``, see ``_driver_pod``), a new driver pod per attempt
    until one sends them all (a SYNC_MASTER refuses sends until its slave is in sync again);
    every id acknowledged on the way, by any attempt."""
    acknowledged: set[str] = set()
    attempts: list[str] = []

    def attempt() -> bool:
        name = f"produce-{prefix}-{len(attempts)}"
        attempts.append(name)
        args = ("produce", "--endpoints", endpoints, "--topic", TOPIC, "--count", str(count))
        phase, log = realnode.run_pod(
            node, namespace, _driver_pod(node, name, *args, "--prefix", prefix, user=user)
        )
        acknowledged.update(e["message_id"] for e in _events(log) if e["event"] == "sent")
        return phase == "Succeeded"

    try:
        processes.wait_until(attempt, timeout_s=timeout_s, what=f"{count} sends accepted")
    except TimeoutError as error:
        last = realnode.pod_log(node, namespace, attempts[-1])[-2000:] if attempts else ""
        raise AssertionError(
            f"{error}; last attempt:\n{last}\n{_diagnose(node, namespace)}"
        ) from error
    return acknowledged


def _running_container(core: Any, namespace: str, pod: str) -> tuple[str, Any]:
    """The id and start time of ``pod``'s running container; ("", None) when none runs."""
    [status] = core.read_namespaced_pod(pod, namespace).status.container_statuses
    if status.state.running is None or not status.container_id:
        return "", None
    return str(status.container_id).split("://", 1)[1], status.state.running.started_at


def _kill_until_failover(node: realnode.RealNode, core: Any, ns: str, master: str) -> int:
    """SIGKILLs ``master``'s container through containerd, and again each time the kubelet
    restarts it (a master that keeps dying), until the roles ConfigMap names another master and
    a container of ``master`` runs again. Returns the number of kills.

    The container running then may have started just before the failover: it read its role from
    the ConfigMap (an env var) at its start and comes back as a stale master at the old epoch.
    The name server refuses it, and it rejoins the group as the new master's slave by itself
    (``[ha] rejoin_as_slave``); before that existed, it stayed a fenced master and the new
    SYNC_MASTER refused every send (found by this test).
    """
    before = _roles(core, ns)
    killed: set[str] = set()

    def settled() -> bool:
        container, _ = _running_container(core, ns, master)
        if _roles(core, ns) != before:
            return bool(container)
        if container and container not in killed:
            node.kill_container(container)
            killed.add(container)
        return False

    _wait(node, ns, settled, f"the operator's failover away from {master}, {master} back")
    return len(killed)


def _release(namespace: str) -> str:
    """The Helm release of a test: one per namespace (the chart's ClusterRole is named after it)."""
    return f"rel-{namespace}"


HA_SPEC: dict[str, Any] = {
    "brokerRole": "SYNC_MASTER", "flushDiskType": "SYNC_FLUSH",
    "failover": {"masterDownTimeoutSeconds": 2}, "config": {"slave_sync": {"interval_ms": 300}},
}  # fmt: skip
"""The Broker fields of these tests beyond the chart sample's: SYNC_MASTER groups that fail
over 2 s after their master is gone."""


def helm_install(node: realnode.RealNode, ns: str, *sets: str) -> None:
    """``helm install`` the chart into ``ns`` with the built image, watching ``ns`` only, a 2 s
    resync, and ``sets`` (``--set…=`` arguments); waits for the operator's Deployment."""
    repository, tag = node.image.rsplit(":", 1)
    node.cluster.helm(
        "install", _release(ns), str(operator_support.CHART_DIR), "--namespace", ns, "--wait",
        "--timeout", "3m", f"--set=image.repository={repository}", f"--set=image.tag={tag}",
        "--set=image.pullPolicy=Never", "--set=operator.resyncSeconds=2",
        f"--set=operator.watchNamespaces={{{ns}}}", *sets,
    )  # fmt: skip


def _install(node: realnode.RealNode, ns: str, groups: int = 1, secure: bool = False) -> None:
    """``helm install`` the chart with the built image and a Broker ``demo`` (the name the
    chart's ``helm test`` smoke pod expects) of ``groups`` SYNC_MASTER + slave groups, a Topic
    and a ConsumerGroup; waits until the Broker is Ready.

    ``secure``: ``demo`` is the chart's own sample Broker as it comes (TLS enforcing, ACL on)
    with ``HA_SPEC`` in ``sampleBroker.extraSpec``, and the RocketMQUser ``USER`` (Pub/Sub on
    ``TOPIC``, Sub as ``GROUP``) is Ready too. Otherwise a plaintext Broker of this module's
    own, the chart without its sample."""
    if secure:
        helm_install(
            node, ns, "--set=sampleBroker.enabled=true", f"--set=sampleBroker.groups={groups}",
            "--set=sampleBroker.replicasPerGroup=2",
            f"--set-json=sampleBroker.extraSpec={json.dumps(HA_SPEC)}",
        )  # fmt: skip
    else:
        helm_install(node, ns)
        _apply(node, ns, {
            "apiVersion": "ariane.dev/v1alpha1", "kind": "Broker", "metadata": {"name": "demo"},
            "spec": {
                "image": node.image, "imagePullPolicy": "Never", "groups": groups,
                "replicasPerGroup": 2, "storage": {"size": "1Gi"}, **HA_SPEC,
            },
        })  # fmt: skip
    for kind, name, spec in (("Topic", TOPIC, {"queues": 2}), ("ConsumerGroup", GROUP, {})):
        body = {"apiVersion": "ariane.dev/v1alpha1", "kind": kind, "metadata": {"name": name}}
        _apply(node, ns, {**body, "spec": {"broker": "demo", **spec}})
    if secure:
        acls = [
            {"resource": f"Topic:{TOPIC}", "actions": ["Pub", "Sub"]},
            {"resource": f"Group:{GROUP}", "actions": ["Sub"]},
        ]
        _apply(node, ns, {
            "apiVersion": "ariane.dev/v1alpha1", "kind": "RocketMQUser",
            "metadata": {"name": USER}, "spec": {"broker": "demo", "authorization": {"acls": acls}},
        })  # fmt: skip
    _wait(node, ns, lambda: _ready(node, ns), "Broker demo Ready")
    if secure:
        _wait(node, ns, lambda: cr_ready(node, ns, "rocketmqusers", USER), f"{USER} Ready")


def cr_ready(node: realnode.RealNode, ns: str, plural: str, name: str) -> bool:
    """Whether the ``ariane.dev`` object ``plural``/``name`` has the condition Ready True."""
    body = kubernetes.client.CustomObjectsApi(node.cluster.api_client).get_namespaced_custom_object(
        "ariane.dev", "v1alpha1", ns, plural, name
    )
    conditions = body.get("status", {}).get("conditions", [])
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def _roles(core: Any, ns: str) -> dict[str, str]:
    return dict(core.read_namespaced_config_map("demo-roles", ns).data or {})


def _installed(node: realnode.RealNode, ns: str) -> tuple[Any, str, set[str]]:
    """The chart installed with its secure sample Broker serving (``_install(secure=True)``;
    checked: operator pod, ``helm test`` as the chart's smoke user), the driver ConfigMap, and
    20 messages sent by the official client as ``USER``; (core API, name-server endpoints, the
    acknowledged message ids)."""
    core = kubernetes.client.CoreV1Api(node.cluster.api_client)
    _install(node, ns, secure=True)
    release = _release(ns)
    selector = f"app.kubernetes.io/instance={release}"
    [operator] = core.list_namespaced_pod(ns, label_selector=selector).items
    assert operator.spec.service_account_name == f"{release}-ariane"
    assert operator.status.phase == "Running"
    driver = {"metadata": {"name": "driver"}, "data": {DRIVER.name: DRIVER.read_text()}}
    core.create_namespaced_config_map(ns, driver)
    endpoints = f"demo-namesrv.{ns}.svc.cluster.local:9876"
    sent = _produce_until_accepted(node, ns, endpoints, "before", 20, user=USER)  # slave in sync
    assert len(sent) >= 20
    smoke = node.cluster.helm("test", release, "--namespace", ns, "--timeout", "3m", check=False)
    assert smoke.returncode == 0, (
        f"helm test failed:\n{smoke.stdout}{smoke.stderr}\n{_diagnose(node, ns)}"
    )
    return core, endpoints, sent


def _receive_all(node: realnode.RealNode, ns: str, endpoints: str, sent: set[str]) -> None:
    consume = ("simple-consume", "--endpoints", endpoints, "--group", GROUP, "--topic", TOPIC)
    received = _driver(
        node, ns, "consume", *consume, "--count", str(len(sent)), "--deadline-s", "90", user=USER
    )
    got = {e["message_id"] for e in received if e["event"] == "received"}
    assert sent <= got, f"acknowledged but never received: {sorted(sent - got)}"


def test_helm_install_then_a_round_trip_with_the_official_client(
    real_node: realnode.RealNode, real_namespace: str
) -> None:
    """``helm install`` runs the operator as a pod under the chart's ServiceAccount; it runs the
    chart's sample Broker, secure by default (TLS enforcing, ACL on), as a SYNC_MASTER + slave
    group in pods on hostPath volumes; ``helm test`` passes as the chart's smoke user; the
    official Python client in pods, with a RocketMQUser's Secret, sends and receives every
    message through the name-server Service."""
    _, endpoints, sent = _installed(real_node, real_namespace)

    _receive_all(real_node, real_namespace, endpoints, sent)


def test_failover_after_the_master_container_is_sigkilled_loses_nothing(
    real_node: realnode.RealNode, real_namespace: str
) -> None:
    """On the secure sample Broker (TLS, ACL: the operator's calls signed as its Super user):
    after the master's container is SIGKILLed through containerd (again while the kubelet
    restarts it), the operator fails over to the slave, the old master's container comes back
    as the new master's slave (by its role from the ConfigMap, or, started before the failover,
    by rejoining on its own), the group takes sends again, and every acknowledged message,
    before and after, is received."""
    node, ns = real_node, real_namespace
    core, endpoints, sent = _installed(node, ns)

    roles_before = _roles(core, ns)
    killed = _kill_until_failover(node, core, ns, f"demo-a-{roles_before['demo-a']}")
    assert killed, "the master's container was never killed"
    assert _roles(core, ns) != roles_before
    _wait(node, ns, lambda: _ready(node, ns), "Broker demo Ready after the failover")
    sent |= _produce_until_accepted(node, ns, endpoints, "after", 20, timeout_s=120.0, user=USER)

    _receive_all(node, ns, endpoints, sent)
