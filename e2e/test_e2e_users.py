"""A RocketMQUser applied by the real operator process to a secured loopback cluster.

The cluster is ``ariane dev --secure``'s (``dev.dev_cluster(secure=True)``: TLS enforcing on
every port, ACL 2.0 on, a generated Super user) standing in for a Broker's pods; the Broker CR
has ``spec.auth.enabled``, and the operator signs its admin calls with the keys of the Secret
``<broker>-operator-auth``, which the test fills with that Super user (in a cluster the operator
generates it). The operator reaches the name server through the override seam and speaks TLS
(``ARIANE_TLS``/``ARIANE_CA_FILE``), so the user's Secret carries that CA as ``ca.crt``.

Own cluster: a secure cluster (TLS enforcing, ACL on, its Super user handed to the operator) is
the subject; no other e2e module runs one.
"""

from __future__ import annotations

import asyncio
import base64
import json
import pathlib
from collections.abc import Iterator
from typing import Any

import kubernetes  # type: ignore[import-untyped]
import pytest
import yaml

from ariane import client, dev
from ariane.client import credentials
from ariane.common import errors
from ariane.grpcwire import tls as grpc_tls
from ariane.operator import settings as operator_settings
from ariane.operator import users
from e2e import operator_support
from e2e.testenv import cluster, processes

pytestmark = pytest.mark.k8s

WAIT_S = 90.0
RESYNC_S = 2


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dev.DevEndpoints]:
    """A name server and a broker on 127.0.0.1 with TLS enforcing and ACL 2.0 on."""
    with dev.dev_cluster(
        tmp_path_factory.mktemp("secured"), namesrv_port=0, workers=0, secure=True
    ) as endpoints:
        yield endpoints


@pytest.fixture
def operator(
    k8s: cluster.Cluster,
    namespace: str,
    secured: dev.DevEndpoints,
    tmp_path: pathlib.Path,
) -> Iterator[operator_support.Running]:
    """The operator watching ``namespace`` (created before it starts, so it is watched at once)."""
    env = {
        operator_settings.NAMESRV_OVERRIDES_ENV: json.dumps({"*": secured.namesrv}),
        operator_settings.TLS_ENV: "1",
        operator_settings.CA_FILE_ENV: secured.ca_path,
    }
    with operator_support.run_operator(
        k8s, tmp_path / "operator.log", namespace, env=env, resync_s=RESYNC_S
    ) as running:
        yield running


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _super_keys(secured: dev.DevEndpoints) -> tuple[str, str]:
    saved = json.loads(pathlib.Path(secured.credentials_path).read_text())
    return str(saved["access_key"]), str(saved["secret_key"])


def _custom(k8s: cluster.Cluster) -> Any:
    return kubernetes.client.CustomObjectsApi(k8s.api_client)


def _apply(k8s: cluster.Cluster, namespace: str, body: dict[str, Any]) -> None:
    k8s.kubectl("apply", "-n", namespace, "-f", "-", input_text=json.dumps(body))


def _ready(k8s: cluster.Cluster, namespace: str, plural: str, name: str) -> bool:
    body = _custom(k8s).get_namespaced_custom_object(
        "ariane.dev", "v1alpha1", namespace, plural, name
    )
    conditions = body.get("status", {}).get("conditions", [])
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def _secured_broker(k8s: cluster.Cluster, namespace: str, secured: dev.DevEndpoints) -> None:
    """The operator's Super keys Secret, a Broker with ACL on, and topics orders and other."""
    access_key, secret_key = _super_keys(secured)
    core = kubernetes.client.CoreV1Api(k8s.api_client)
    data = {"accessKey": _b64(access_key), "secretKey": _b64(secret_key)}
    core.create_namespaced_secret(
        namespace, {"metadata": {"name": users.operator_secret_name("demo")}, "data": data}
    )
    _apply(
        k8s,
        namespace,
        {
            "apiVersion": "ariane.dev/v1alpha1",
            "kind": "Broker",
            "metadata": {"name": "demo"},
            "spec": {"groups": 1, "storage": {"size": "1Gi"}, "auth": {"enabled": True}},
        },
    )
    for topic in ("orders", "other"):
        _apply(
            k8s,
            namespace,
            {
                "apiVersion": "ariane.dev/v1alpha1",
                "kind": "Topic",
                "metadata": {"name": topic},
                "spec": {"broker": "demo", "queues": 1},
            },
        )
    for topic in ("orders", "other"):
        processes.wait_until(
            lambda topic=topic: _ready(k8s, namespace, "topics", topic),  # type: ignore[misc]
            timeout_s=WAIT_S,
            what=f"Topic {topic} Ready (created by the operator's signed admin calls)",
        )


def _user_secret(k8s: cluster.Cluster, namespace: str) -> dict[str, str]:
    core = kubernetes.client.CoreV1Api(k8s.api_client)
    secret = core.read_namespaced_secret("alice", namespace)
    return {k: base64.b64decode(v).decode() for k, v in secret.data.items()}


async def _send(namesrv: str, keys: tuple[str, str], ca_file: pathlib.Path, topic: str) -> str:
    """Send one message as ``keys``; the message id, or the refusal's class name."""
    connection = client.ConnectionSettings(
        credentials=credentials.Credentials(*keys),
        tls=grpc_tls.ClientTls(ca_file=str(ca_file)),
        request_timeout_s=10.0,
    )
    settings = client.ProducerSettings(connection=connection)
    try:
        async with client.Producer(namesrv, settings=settings) as sender:
            receipt = await sender.send(topic, b"from a RocketMQUser")
    except errors.ArianeError as error:
        return type(error).__name__
    return str(receipt.message_id)


def test_user_secret_sends_on_its_topic_only_and_deletion_revokes_it(
    k8s: cluster.Cluster,
    namespace: str,
    secured: dev.DevEndpoints,
    operator: operator_support.Running,
    tmp_path: pathlib.Path,
) -> None:
    """The operator creates the user and its ACL on the broker and writes its Secret; a client
    with those keys sends on its topic, is refused on another, and is refused once the
    RocketMQUser is deleted."""
    _secured_broker(k8s, namespace, secured)
    user = {
        "apiVersion": "ariane.dev/v1alpha1",
        "kind": "RocketMQUser",
        "metadata": {"name": "alice"},
        "spec": {
            "broker": "demo",
            "authorization": {"acls": [{"resource": "Topic:orders", "actions": ["Pub"]}]},
        },
    }

    _apply(k8s, namespace, user)
    processes.wait_until(
        lambda: _ready(k8s, namespace, "rocketmqusers", "alice"),
        timeout_s=WAIT_S,
        what="RocketMQUser alice Ready",
    )
    secret = _user_secret(k8s, namespace)
    ca_file = tmp_path / "ca.crt"
    ca_file.write_text(secret["ca.crt"])
    keys = (secret["accessKey"], secret["secretKey"])
    on_orders = asyncio.run(_send(secret["endpoints"], keys, ca_file, "orders"))
    on_other = asyncio.run(_send(secret["endpoints"], keys, ca_file, "other"))
    _custom(k8s).delete_namespaced_custom_object(
        "ariane.dev", "v1alpha1", namespace, "rocketmqusers", "alice"
    )
    processes.wait_until(
        lambda: (
            not _custom(k8s).list_namespaced_custom_object(
                "ariane.dev", "v1alpha1", namespace, "rocketmqusers"
            )["items"]
        ),
        timeout_s=WAIT_S,
        what="RocketMQUser alice gone (its finalizer released after the broker delete)",
    )
    after = asyncio.run(_send(secret["endpoints"], keys, ca_file, "orders"))

    assert keys[0] == "alice" and secret["endpoints"] == secured.namesrv
    assert on_orders not in ("ForbiddenError", "UnauthorizedError"), on_orders
    assert on_other == "ForbiddenError"
    assert after == "UnauthorizedError"


CHART_RBAC_KINDS = ("ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding")
EXPECTED_NAMESPACE_GRANTS = {
    "brokers.ariane.dev": "get list watch patch",
    "topics.ariane.dev": "get list watch patch",
    "consumergroups.ariane.dev": "get list watch patch",
    "rocketmqusers.ariane.dev": "get list watch patch",
    "brokers.ariane.dev/status": "patch",
    "topics.ariane.dev/status": "patch",
    "consumergroups.ariane.dev/status": "patch",
    "rocketmqusers.ariane.dev/status": "patch",
    "events": "create",
    "secrets": "get create patch",
    "configmaps": "get create patch",
    "services": "create patch delete",
    "deployments.apps": "create patch",
    "statefulsets.apps": "list create patch delete",
    "pods": "list delete",
    "persistentvolumeclaims": "list patch",
    "poddisruptionbudgets.policy": "create patch delete",
    "networkpolicies.networking.k8s.io": "list create patch delete",
    "certificates.cert-manager.io": "create patch",
    "servicemonitors.monitoring.coreos.com": "create patch",
    "prometheusrules.monitoring.coreos.com": "create patch",
    "storageclasses.storage.k8s.io": "get",
}
"""What the chart grants its ServiceAccount in a watched namespace (``kubectl auth can-i
--list``), resource → verbs; outside it only ``storageclasses`` (plus what every authenticated
user may do: ``SELF_REVIEWS``)."""
SELF_REVIEWS = {
    "selfsubjectreviews.authentication.k8s.io": "create",
    "selfsubjectaccessreviews.authorization.k8s.io": "create",
    "selfsubjectrulesreviews.authorization.k8s.io": "create",
}


def _install_chart_rbac(k8s: cluster.Cluster, namespace: str, release: str) -> str:
    """Applies the chart's ServiceAccount and RBAC for ``watchNamespaces={namespace}``; the
    ServiceAccount's name."""
    text = k8s.helm(
        "template", release, str(operator_support.CHART_DIR), "--namespace", namespace,
        "--set", f"operator.watchNamespaces={{{namespace}}}",
    ).stdout  # fmt: skip
    objects = [d for d in yaml.safe_load_all(text) if d and d["kind"] in CHART_RBAC_KINDS]
    assert sorted(o["kind"] for o in objects) == sorted(CHART_RBAC_KINDS)
    body = json.dumps({"apiVersion": "v1", "kind": "List", "items": objects})
    k8s.kubectl("apply", "-f", "-", input_text=body)
    return next(str(o["metadata"]["name"]) for o in objects if o["kind"] == "ServiceAccount")


def _token_kubeconfig(
    k8s: cluster.Cluster, namespace: str, account: str, path: pathlib.Path
) -> str:
    """A kubeconfig authenticating as the ServiceAccount itself (a TokenRequest token)."""
    token = k8s.kubectl("create", "token", account, "-n", namespace, "--duration=1h").stdout
    config = json.loads(k8s.kubeconfig.read_text())
    config["users"] = [{"name": "admin", "user": {"token": token.strip()}}]
    path.write_text(json.dumps(config))
    return str(path)


def _can_i(k8s: cluster.Cluster, who: str, namespace: str) -> dict[str, str]:
    """``kubectl auth can-i --list`` as ``who`` in ``namespace``: resource → verbs (sorted)."""
    out = k8s.kubectl("auth", "can-i", "--list", f"--as={who}", "-n", namespace).stdout
    grants: dict[str, str] = {}
    for line in out.splitlines()[1:]:
        cells = [c for c in line.split("  ") if c.strip()]
        resource, verbs = cells[0].strip(), cells[-1].strip().strip("[]")
        if resource and not resource.startswith("/") and "[" not in cells[0]:
            grants[resource] = " ".join(sorted(verbs.split()))
    return grants


def _sorted(table: dict[str, str]) -> dict[str, str]:
    return {k: " ".join(sorted(v.split())) for k, v in table.items()}


def _broker_applied(k8s: cluster.Cluster, namespace: str) -> bool:
    body = _custom(k8s).get_namespaced_custom_object(
        "ariane.dev", "v1alpha1", namespace, "brokers", "demo"
    )
    meta, status = body["metadata"], body.get("status", {})
    return bool(status.get("observedGeneration") == meta["generation"] and status.get("groups"))


def test_operator_runs_under_exactly_the_charts_service_account(
    k8s: cluster.Cluster,
    namespace: str,
    secured: dev.DevEndpoints,
    tmp_path: pathlib.Path,
) -> None:
    """Authenticated as the chart's ServiceAccount (``watchNamespaces`` set: a Role, no
    cluster-wide grant but StorageClass reads), the operator reconciles a Broker (every step,
    NetworkPolicies included), two Topics and a RocketMQUser with no refusal, and ``kubectl
    auth can-i --list`` shows nothing beyond the expected grants."""
    release = f"r{namespace[-8:]}"
    account = _install_chart_rbac(k8s, namespace, release)
    kubeconfig = _token_kubeconfig(k8s, namespace, account, tmp_path / "sa.kubeconfig")
    who = f"system:serviceaccount:{namespace}:{account}"
    env = {
        "KUBECONFIG": kubeconfig,
        operator_settings.NAMESRV_OVERRIDES_ENV: json.dumps({"*": secured.namesrv}),
        operator_settings.TLS_ENV: "1",
        operator_settings.CA_FILE_ENV: secured.ca_path,
    }
    user = {
        "apiVersion": "ariane.dev/v1alpha1",
        "kind": "RocketMQUser",
        "metadata": {"name": "bob"},
        "spec": {
            "broker": "demo",
            "authorization": {"acls": [{"resource": "Topic:orders", "actions": ["Sub"]}]},
        },
    }
    try:
        with operator_support.run_operator(
            k8s, tmp_path / "operator.log", namespace, env=env, resync_s=RESYNC_S
        ) as running:
            _secured_broker(k8s, namespace, secured)
            _apply(k8s, namespace, user)
            processes.wait_until(
                lambda: (
                    _ready(k8s, namespace, "rocketmqusers", "bob")
                    and _broker_applied(k8s, namespace)
                ),
                timeout_s=WAIT_S,
                what="RocketMQUser bob Ready and every step of Broker demo applied",
            )
        log = running.log_path.read_text()
        inside, outside = _can_i(k8s, who, namespace), _can_i(k8s, who, "default")
    finally:
        for kind in ("clusterrolebinding", "clusterrole"):
            k8s.kubectl("delete", kind, f"{release}-ariane", "--ignore-not-found")
    policies = kubernetes.client.NetworkingV1Api(k8s.api_client).list_namespaced_network_policy(
        namespace
    )

    assert sorted(p.metadata.name for p in policies.items) == ["demo-a", "demo-namesrv"]
    assert _user_secret_names(k8s, namespace) >= {"bob", users.operator_secret_name("demo")}
    assert "Forbidden" not in log and "permissions" not in log, log[-3000:]
    assert inside == _sorted({**EXPECTED_NAMESPACE_GRANTS, **SELF_REVIEWS})
    assert outside == _sorted({"storageclasses.storage.k8s.io": "get", **SELF_REVIEWS})


def _user_secret_names(k8s: cluster.Cluster, namespace: str) -> set[str]:
    core = kubernetes.client.CoreV1Api(k8s.api_client)
    return {s.metadata.name for s in core.list_namespaced_secret(namespace).items}
