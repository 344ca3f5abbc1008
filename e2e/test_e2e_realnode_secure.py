"""Issue 24 on real pods: a secured Broker (TLS enforcing, ACL 2.0, NetworkPolicies enforced) in
a restricted namespace.

One ``helm install`` per module, in a namespace labelled
``pod-security.kubernetes.io/enforce=restricted`` (the apiserver's PodSecurity admission admits or
rejects every pod: operator, name server, brokers, client pods), with the node's NetworkPolicy
agent running for the whole module (``policy_agent``: kube-router's firewall), so the chart's
operator policy and the operator's Broker policies are enforced on every connection the module
makes. The Broker ``demo`` is the chart's sample, secure by default as it comes
(``spec.tls.mode: enforcing``, ``spec.auth.enabled``, with the smoke test's RocketMQUser), given
one slave (``sampleBroker.replicasPerGroup=2``) and ``spec.networkPolicy.clientSelectors``
naming ``CLIENT_LABELS`` (``sampleBroker.extraSpec``), which every client pod of the module
carries; its leaves live ``LEAF_LIFETIME_S``
(``certs.LEAF_LIFETIME_ANNOTATION``), so the operator's own renewal path (a leaf due at two
thirds of its life is re-issued into its Secret) runs during the module. Clients are the
official Python client (tests/conformance/official_py_driver.py) in pods of the client image.
"""

from __future__ import annotations

import base64
import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import kubernetes  # type: ignore[import-untyped]
import pytest
from cryptography import x509

from ariane.operator import model
from e2e import test_e2e_realnode_chart as chart
from e2e.testenv import netpolicy, objects, processes, realnode

pytestmark = pytest.mark.realnode

LEAF_LIFETIME_S = 45
"""Seconds a leaf certificate lives: re-issued every 30 s (``certs.RENEW_FRACTION``)."""
WAIT_S = 120.0
USER = "alice"
TOPIC, OTHER_TOPIC, GROUP = "orders", "other", "billing"
BROKER_POD, SLAVE_POD = "demo-a-0", "demo-a-1"
CLIENT_LABELS = {"ariane.dev/client": "demo"}
"""The labels of the Broker's ``clientSelectors``: the module's client pods carry them."""


@pytest.fixture(scope="module")
def restricted_namespace(real_node: realnode.RealNode) -> Iterator[str]:
    """A namespace enforcing the ``restricted`` Pod Security Standard."""
    core = kubernetes.client.CoreV1Api(real_node.cluster.api_client)
    name = f"s-{uuid.uuid4().hex[:10]}"
    core.create_namespace(
        {"metadata": {"name": name, "labels": objects.RESTRICTED_NAMESPACE_LABELS}}
    )
    processes.wait_until(
        lambda: core.read_namespaced_service_account("default", name) is not None,
        timeout_s=60.0,
        what=f"ServiceAccount default in namespace {name}",
    )
    yield name
    core.delete_namespace(name)


@pytest.fixture(scope="module")
def secured(
    real_node: realnode.RealNode, restricted_namespace: str, policy_agent: netpolicy.PolicyAgent
) -> str:
    """The chart installed with its sample Broker ``demo`` as it comes (TLS enforcing, ACL on;
    only the leaf lifetime annotated, one slave and the client selectors added), Ready, its
    NetworkPolicies enforced, topics ``orders`` and ``other``, group ``billing``, the driver
    ConfigMap; the namespace. The node's DNS server is no pod: the chart's operator policy
    admits it through ``networkPolicy.dnsCidrs``."""
    node, ns = real_node, restricted_namespace
    annotations = {"ariane.dev/tls-certificate-lifetime-seconds": str(LEAF_LIFETIME_S)}
    smoke = {"app.kubernetes.io/component": "smoke-test"}  # the chart's `helm test` pod
    selectors = [{"podSelector": {"matchLabels": labels}} for labels in (CLIENT_LABELS, smoke)]
    extra = {"networkPolicy": {"clientSelectors": selectors}}
    chart.helm_install(
        node, ns, "--set=sampleBroker.enabled=true", "--set=sampleBroker.replicasPerGroup=2",
        f"--set-json=sampleBroker.annotations={json.dumps(annotations)}",
        f"--set-json=sampleBroker.extraSpec={json.dumps(extra)}",
        f"--set=networkPolicy.dnsCidrs={{{realnode.BRIDGE_IP}/32}}",
    )  # fmt: skip
    spec = chart._broker(node, ns)["spec"]
    assert (spec["tls"]["mode"], spec["auth"]["enabled"]) == ("enforcing", True), spec
    for kind, name in (("Topic", TOPIC), ("Topic", OTHER_TOPIC), ("ConsumerGroup", GROUP)):
        body = {"apiVersion": "ariane.dev/v1alpha1", "kind": kind, "metadata": {"name": name}}
        chart._apply(node, ns, {**body, "spec": {"broker": "demo"}})
    chart._wait(node, ns, lambda: chart._ready(node, ns), "Broker demo Ready")
    for plural, name in (("topics", TOPIC), ("topics", OTHER_TOPIC), ("consumergroups", GROUP)):
        chart._wait(
            node,
            ns,
            lambda plural=plural, name=name: chart.cr_ready(node, ns, plural, name),
            f"{plural} {name} Ready (created by the operator's signed admin calls)",
        )
    driver = {"metadata": {"name": "driver"}, "data": {chart.DRIVER.name: chart.DRIVER.read_text()}}
    kubernetes.client.CoreV1Api(node.cluster.api_client).create_namespaced_config_map(ns, driver)
    return ns


CLIENT_SCRIPT = (
    'python3 "$@"; rc=$?; echo "--- exit $rc; the client\'s own log:";'
    " tail -n 30 $HOME/logs/rocketmq_python/*.log 2>&1; exit $rc"
)
"""Runs the driver, then prints the tail of the official client's log file (for failures)."""


def _client_pod(
    node: realnode.RealNode, name: str, args: list[str], env: list[dict[str, Any]], ca_secret: str
) -> dict[str, Any]:
    """The official-client driver in a restricted pod, trusting ``ca_secret``'s ``ca.crt``."""
    tls_env = [
        {"name": "RMQ_DRIVER_TLS", "value": "1"},
        {"name": "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH", "value": "/ca/ca.crt"},
    ]
    ca_items = [{"key": "ca.crt", "path": "ca.crt"}]
    return {
        "metadata": {"name": name, "labels": CLIENT_LABELS},
        "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 1,
            "securityContext": objects.restricted_pod_security_context(),
            "containers": [
                {
                    "name": "client",
                    "image": node.artifacts.client_image,
                    "imagePullPolicy": "Never",
                    "command": ["sh", "-c", CLIENT_SCRIPT, "sh"],
                    "args": ["/driver/official_py_driver.py", *args],
                    "env": tls_env + env,
                    "securityContext": objects.restricted_container_security_context(),
                    "volumeMounts": [
                        {"name": "driver", "mountPath": "/driver"},
                        {"name": "ca", "mountPath": "/ca"},
                        {"name": "tmp", "mountPath": "/tmp"},
                    ],
                }
            ],
            "volumes": [
                {"name": "driver", "configMap": {"name": "driver"}},
                {"name": "ca", "secret": {"secretName": ca_secret, "items": ca_items}},
                {"name": "tmp", "emptyDir": {}},
            ],
        },
    }


def _from_user_secret() -> list[dict[str, Any]]:
    """The driver's credentials taken from the RocketMQUser's Secret by the kubelet."""
    return [
        {"name": env, "valueFrom": {"secretKeyRef": {"name": USER, "key": key}}}
        for env, key in (
            ("RMQ_DRIVER_ACCESS_KEY", "accessKey"),
            ("RMQ_DRIVER_SECRET_KEY", "secretKey"),
        )
    ]


def _literal_keys(access_key: str, secret_key: str) -> list[dict[str, Any]]:
    return [
        {"name": "RMQ_DRIVER_ACCESS_KEY", "value": access_key},
        {"name": "RMQ_DRIVER_SECRET_KEY", "value": secret_key},
    ]


def _run(
    node: realnode.RealNode,
    ns: str,
    name: str,
    args: list[str],
    env: list[dict[str, Any]],
    ca_secret: str = USER,
) -> tuple[str, list[dict[str, Any]], str]:
    """Runs a client pod to its end: (phase, JSON events, log)."""
    phase, log = realnode.run_pod(node, ns, _client_pod(node, name, args, env, ca_secret))
    return phase, chart._events(log), log


def _diagnose(node: realnode.RealNode, ns: str) -> str:
    """``chart._diagnose`` (pods, status, operator and broker logs) plus the name server's."""
    namesrv = node.cluster.kubectl(
        "-n", ns, "logs", "deploy/demo-namesrv", "--tail=25", check=False
    )
    return f"{chart._diagnose(node, ns)}\n--- deploy/demo-namesrv\n{namesrv.stdout}"


def _custom(node: realnode.RealNode) -> Any:
    return kubernetes.client.CustomObjectsApi(node.cluster.api_client)


def _user_gone(node: realnode.RealNode, ns: str) -> bool:
    found = _custom(node).list_namespaced_custom_object(
        "ariane.dev", "v1alpha1", ns, "rocketmqusers"
    )
    return USER not in {u["metadata"]["name"] for u in found["items"]}


def _secret_data(node: realnode.RealNode, ns: str, name: str) -> dict[str, str]:
    secret = kubernetes.client.CoreV1Api(node.cluster.api_client).read_namespaced_secret(name, ns)
    return {k: base64.b64decode(v).decode() for k, v in secret.data.items()}


def _refused(result: tuple[str, list[dict[str, Any]], str], code: str) -> None:
    """The driver sent nothing and ended on the client's exception (exit 4) carrying the
    status ``code`` (40100 unauthenticated, 40300 forbidden)."""
    phase, events, log = result
    errors = [e["message"] for e in events if e["event"] == "error"]
    assert phase == "Failed", log[-3000:]
    assert not [e for e in events if e["event"] == "sent"], log[-3000:]
    assert errors and code in errors[0], log[-3000:]


def test_every_pod_is_admitted_under_restricted_and_a_privileged_one_is_not(
    real_node: realnode.RealNode, secured: str
) -> None:
    """In the namespace enforcing ``restricted``, the operator, name-server and broker pods run
    (the apiserver admitted them), while a pod without the restricted securityContext is
    rejected by the same apiserver (the enforcement is on)."""
    node, ns = real_node, secured
    core = kubernetes.client.CoreV1Api(node.cluster.api_client)
    labels = core.read_namespace(ns).metadata.labels
    pods = core.list_namespaced_pod(ns).items
    components = {
        p.metadata.labels.get("app.kubernetes.io/component", "") for p in pods
        if p.status.phase == "Running"
    }  # fmt: skip
    loose = {
        "metadata": {"name": "loose"},
        "spec": {"containers": [{"name": "c", "image": node.image, "imagePullPolicy": "Never"}]},
    }
    with pytest.raises(kubernetes.client.ApiException) as refused:
        core.create_namespaced_pod(ns, loose, dry_run="All")

    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"
    assert {"operator", "namesrv", "broker"} <= components, [p.metadata.name for p in pods]
    assert refused.value.status == 403
    assert "violates PodSecurity" in str(refused.value.body), refused.value.body


def test_helm_test_passes_against_the_secure_sample_as_it_comes(
    real_node: realnode.RealNode, secured: str
) -> None:
    """``helm test`` passes against the chart's sample Broker with TLS enforcing and ACL on:
    its smoke pod signs as the RocketMQUser the chart renders (keys, endpoints and CA from the
    Secret the operator wrote), creates ``helm-smoke``, lists the brokers and makes a round
    trip; the smoke user may do nothing beyond that (it is refused the topic ``orders``)."""
    node, ns = real_node, secured
    release = chart._release(ns)
    smoke_user = f"{release}-ariane-smoke"

    smoke = node.cluster.helm("test", release, "--namespace", ns, "--timeout", "3m", check=False)
    keys = [
        {"name": var, "valueFrom": {"secretKeyRef": {"name": smoke_user, "key": key}}}
        for var, key in (
            ("RMQ_DRIVER_ACCESS_KEY", "accessKey"),
            ("RMQ_DRIVER_SECRET_KEY", "secretKey"),
        )
    ]
    endpoints = _secret_data(node, ns, smoke_user)["endpoints"]
    produce = ["produce", "--endpoints", endpoints, "--count", "1", "--topic", TOPIC]
    beyond = _run(node, ns, "smoke-user-on-orders", produce, keys, smoke_user)

    assert smoke.returncode == 0, f"{smoke.stdout}{smoke.stderr}\n{_diagnose(node, ns)}"
    assert chart.cr_ready(node, ns, "rocketmqusers", smoke_user)
    _refused(beyond, "40300")


def test_user_secret_pub_sub_on_its_topic_only_and_deletion_revokes(
    real_node: realnode.RealNode, secured: str
) -> None:
    """A RocketMQUser with Pub/Sub on ``orders``: a client pod with its Secret (keys and CA)
    sends and receives over TLS; without the Secret, or on another topic, it is refused; once
    the user is deleted its keys are refused. The name server logged no asyncio warning for
    the TLS connections that ended meanwhile (``common.splice``)."""
    node, ns = real_node, secured
    acls = [
        {"resource": f"Topic:{TOPIC}", "actions": ["Pub", "Sub"]},
        {"resource": f"Group:{GROUP}", "actions": ["Sub"]},
    ]
    user = {
        "apiVersion": "ariane.dev/v1alpha1", "kind": "RocketMQUser", "metadata": {"name": USER},
        "spec": {"broker": "demo", "authorization": {"acls": acls}},
    }  # fmt: skip
    chart._apply(node, ns, user)
    chart._wait(
        node,
        ns,
        lambda: chart.cr_ready(node, ns, "rocketmqusers", USER),
        f"RocketMQUser {USER} Ready",
    )
    secret = _secret_data(node, ns, USER)
    endpoints = secret["endpoints"]
    produce = ["produce", "--endpoints", endpoints, "--count", "5", "--topic"]
    consume = ["simple-consume", "--endpoints", endpoints, "--group", GROUP, "--topic", TOPIC]
    keys = _from_user_secret()

    sent = _run(node, ns, "send", [*produce, TOPIC], keys)
    received = _run(node, ns, "receive", [*consume, "--count", "5", "--deadline-s", "60"], keys)
    other = _run(node, ns, "send-other", [*produce, OTHER_TOPIC], keys)
    anonymous = _run(node, ns, "send-anonymous", [*produce, TOPIC], [], "demo-namesrv-tls")
    _custom(node).delete_namespaced_custom_object(
        "ariane.dev", "v1alpha1", ns, "rocketmqusers", USER
    )
    deleted_at = time.monotonic()
    chart._wait(node, ns, lambda: _user_gone(node, ns), f"RocketMQUser {USER} gone")
    revoked_s = time.monotonic() - deleted_at
    literal = _literal_keys(secret["accessKey"], secret["secretKey"])
    after = _run(node, ns, "send-revoked", [*produce, TOPIC], literal, "demo-namesrv-tls")

    assert sent[0] == "Succeeded", sent[2][-3000:] + _diagnose(node, ns)
    ids = {e["message_id"] for e in sent[1] if e["event"] == "sent"}
    assert len(ids) == 5, sent[2][-3000:]
    assert received[0] == "Succeeded", received[2][-3000:]
    assert ids <= {e["message_id"] for e in received[1] if e["event"] == "received"}
    _refused(other, "40300")
    _refused(anonymous, "40100")
    assert revoked_s < 30.0, revoked_s
    _refused(after, "40100")
    namesrv = node.cluster.kubectl("-n", ns, "logs", "deploy/demo-namesrv").stdout
    assert "eof_received" not in namesrv, namesrv[-2000:]  # asyncio's TLS warning, per connection


def _serial(pem: str) -> str:
    return format(x509.load_pem_x509_certificate(pem.encode()).serial_number, "X")


def _lifetime_s(pem: str) -> float:
    cert = x509.load_pem_x509_certificate(pem.encode())
    return (cert.not_valid_after_utc - cert.not_valid_before_utc).total_seconds()


SERVED_SERIAL = (
    "import socket, ssl\n"
    "ctx = ssl.create_default_context(cafile='/etc/ariane/tls/ca.crt')\n"
    "ctx.check_hostname = False\n"
    "ctx.set_alpn_protocols(['h2'])\n"
    "with socket.create_connection(('127.0.0.1', 8081), timeout=10) as raw:\n"
    "    with ctx.wrap_socket(raw) as tls:\n"
    "        print(tls.getpeercert()['serialNumber'])\n"
)
"""Run in the broker pod: the serial of the certificate a new TLS connection is served."""


def _served(node: realnode.RealNode, ns: str) -> str:
    out = node.cluster.kubectl("exec", "-n", ns, BROKER_POD, "--", "python3", "-c", SERVED_SERIAL)
    return out.stdout.strip().upper()


def test_a_renewed_certificate_is_served_without_a_pod_restart(
    real_node: realnode.RealNode, secured: str
) -> None:
    """The operator re-issues the broker's leaf at two thirds of its life; a new TLS connection
    to the broker is then served the new serial while the pod's container never restarted."""
    node, ns = real_node, secured
    core = kubernetes.client.CoreV1Api(node.cluster.api_client)
    pod_before = core.read_namespaced_pod(BROKER_POD, ns)
    secret_before = _serial(_secret_data(node, ns, "demo-broker-tls")["tls.crt"])
    served_before = _served(node, ns)
    renewed: list[str] = []

    def secret_renewed() -> bool:
        renewed.append(_serial(_secret_data(node, ns, "demo-broker-tls")["tls.crt"]))
        return renewed[-1] not in (secret_before, served_before)

    processes.wait_until(secret_renewed, timeout_s=WAIT_S, what="the broker leaf re-issued")
    served: list[str] = []

    def new_serial_served() -> bool:
        served.append(_served(node, ns))
        current = _serial(_secret_data(node, ns, "demo-broker-tls")["tls.crt"])
        return served[-1] == current and served[-1] != served_before

    processes.wait_until(new_serial_served, timeout_s=WAIT_S, what="the new leaf served")
    pod_after = core.read_namespaced_pod(BROKER_POD, ns)
    leaf = _secret_data(node, ns, "demo-broker-tls")["tls.crt"]

    assert pod_after.metadata.uid == pod_before.metadata.uid
    assert [s.restart_count for s in pod_after.status.container_statuses] == [0]
    assert served[-1] not in (served_before, secret_before)
    # issued for the annotation's lifetime (notBefore backdated a tenth of it, ``security.ca``)
    assert LEAF_LIFETIME_S <= _lifetime_s(leaf) <= LEAF_LIFETIME_S * 1.1 + 1


PROBE = """
import json, socket, sys, time
def attempt(target):
    host, port = target.rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=3).close()
        return "connected"
    except ConnectionRefusedError:
        return "refused"
    except TimeoutError:
        return "timeout"
    except OSError as error:
        return f"error {error.errno}"
split = sys.argv.index("--once")
result, deadline = {}, time.monotonic() + float(sys.argv[1])
for target in sys.argv[2:split]:
    while (outcome := attempt(target)) != "connected" and time.monotonic() < deadline:
        time.sleep(0.5)
    result[target] = outcome
for target in sys.argv[split + 1:]:
    result[target] = attempt(target)
print(json.dumps(result))
"""
"""TCP connects from a pod: ``DEADLINE_S WAITED... --once TRIED...`` (``HOST:PORT`` each); the
waited ones are retried until connected (the agent admits a new pod's IP within its sync), the
tried ones are attempted once afterwards; prints ``{target: connected|refused|timeout|...}``."""
PROBE_DEADLINE_S = 45


def _probe(
    node: realnode.RealNode,
    ns: str,
    name: str,
    labels: dict[str, str],
    waited: list[str],
    tried: list[str],
) -> dict[str, str]:
    """Runs PROBE in a restricted pod of the Ariane image with ``labels``; its result."""
    container = {
        "name": "probe", "image": node.image, "imagePullPolicy": "Never",
        "command": ["python3", "-c", PROBE, str(PROBE_DEADLINE_S), *waited, "--once", *tried],
        "securityContext": objects.restricted_container_security_context(),
    }  # fmt: skip
    pod = {
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "restartPolicy": "Never", "terminationGracePeriodSeconds": 1,
            "securityContext": objects.restricted_pod_security_context(),
            "containers": [container],
        },
    }  # fmt: skip
    log = realnode.run_to_completion(node, ns, pod, timeout_s=PROBE_DEADLINE_S + 60)
    result: dict[str, str] = json.loads(log.strip().splitlines()[-1])
    return result


def _pod_ips(node: realnode.RealNode, ns: str) -> dict[str, str]:
    """Pod name → IP; the name-server pod also under ``namesrv``."""
    pods = kubernetes.client.CoreV1Api(node.cluster.api_client).list_namespaced_pod(ns).items
    ips = {p.metadata.name: p.status.pod_ip for p in pods if p.status.pod_ip}
    for p in pods:
        if p.metadata.name.startswith("demo-namesrv-") and p.status.phase == "Running":
            ips["namesrv"] = p.status.pod_ip
    return ips


SLAVE_CONNECT = (
    "import socket, sys\n"
    "socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=5).close()\n"
    "print('connected')\n"
)
HA_PEERS = (
    "import sys\n"
    "port = format(int(sys.argv[1]), '04X')\n"
    "for table in ('/proc/net/tcp', '/proc/net/tcp6'):\n"
    "    for line in open(table).read().splitlines()[1:]:\n"
    "        local, remote, state = line.split()[1:4]\n"
    "        if local.endswith(':' + port) and state == '01':\n"
    "            v4 = remote.split(':')[0][-8:]\n"
    "            print('.'.join(str(int(v4[i:i + 2], 16)) for i in (6, 4, 2, 0)))\n"
)
"""Run in the master: the IPv4 peers (IPv4-mapped too) of its ESTABLISHED connections on the
HA port (``/proc/net/tcp*`` hold addresses as little-endian hex)."""


def test_network_policies_are_enforced_between_real_pods(
    real_node: realnode.RealNode, secured: str, policy_agent: netpolicy.PolicyAgent
) -> None:
    """With kube-router enforcing the operator's policies: a pod with the clientSelector labels
    connects to the name server's and the broker's client ports but not to the HA port; a pod
    without them connects to none; the slave opens a new connection to its master's HA port and
    replicates over one (broker traffic keeps working; the module's other tests send, receive
    and renew certificates under the same policies)."""
    node, ns = real_node, secured
    ips = _pod_ips(node, ns)
    namesrv = f"{ips['namesrv']}:{model.NAMESRV_PORT}"
    client_port = f"{ips[BROKER_POD]}:{model.BROKER_PORT}"
    ha = f"{ips[BROKER_POD]}:{model.HA_PORT}"

    labelled = _probe(node, ns, "probe-client", CLIENT_LABELS, [namesrv, client_port], [ha])
    stranger = _probe(node, ns, "probe-stranger", {"role": "x"}, [], [namesrv, client_port, ha])
    slave = node.cluster.kubectl(
        "exec", "-n", ns, SLAVE_POD, "--", "python3", "-c", SLAVE_CONNECT, *ha.split(":"),
        check=False,
    )  # fmt: skip
    peers = node.cluster.kubectl(
        "exec", "-n", ns, BROKER_POD, "--", "python3", "-c", HA_PEERS, str(model.HA_PORT)
    ).stdout.split()

    diagnosis = f"{labelled} {stranger}\n{policy_agent.log_tail()}"
    assert labelled == {namesrv: "connected", client_port: "connected", ha: "refused"}, diagnosis
    assert stranger == dict.fromkeys((namesrv, client_port, ha), "refused"), diagnosis
    assert slave.stdout.strip() == "connected", slave.stderr + diagnosis
    assert ips[SLAVE_POD] in peers, (peers, ips)
