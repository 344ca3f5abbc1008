"""The CRDs in ``crds/`` against the real apiserver: accepted, defaulted, validated, status kept."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import kubernetes  # type: ignore[import-untyped]
import pytest

from ariane.operator import model
from e2e import operator_support
from e2e.testenv import cluster, processes

pytestmark = pytest.mark.k8s

SAMPLES = operator_support.ROOT / "examples" / "k8s" / "broker.yaml"
GROUP = "ariane.dev"
VERSION = "v1alpha1"


@pytest.fixture(scope="module")
def crds(k8s: cluster.Cluster) -> list[str]:
    """The three CRDs applied (server-side) and Established; returns their names."""
    return operator_support.apply_crds(k8s)


def _apply(k8s: cluster.Cluster, namespace: str, body: dict[str, Any], *extra: str) -> Any:
    return k8s.kubectl(
        "apply", "-n", namespace, "-f", "-", *extra, check=False, input_text=json.dumps(body)
    )


def _topic(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Topic",
        "metadata": {"name": name},
        "spec": {"broker": "demo", **spec},
    }


def _user(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "RocketMQUser",
        "metadata": {"name": name},
        "spec": {"broker": "demo", **spec},
    }


def _acl(resource: str, *actions: str, **extra: Any) -> dict[str, Any]:
    return {"authorization": {"acls": [{"resource": resource, "actions": list(actions), **extra}]}}


def _broker(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Broker",
        "metadata": {"name": name},
        "spec": spec,
    }


def test_crds_are_established_with_four_kinds(crds: list[str]) -> None:
    """The apiserver accepts all four structural CRDs (CEL rules compile) and serves them."""
    assert sorted(crds) == [
        "brokers.ariane.dev",
        "consumergroups.ariane.dev",
        "rocketmqusers.ariane.dev",
        "topics.ariane.dev",
    ]


def test_samples_pass_server_side_dry_run(
    k8s: cluster.Cluster, namespace: str, crds: list[str]
) -> None:
    """The example Broker, Topic and ConsumerGroup pass the apiserver's validation."""
    result = k8s.kubectl("apply", "-n", namespace, "--dry-run=server", "-f", str(SAMPLES))

    assert "broker.ariane.dev/demo created (server dry run)" in result.stdout
    assert "topic.ariane.dev/orders created (server dry run)" in result.stdout
    assert "consumergroup.ariane.dev/billing created (server dry run)" in result.stdout


def test_defaults_are_filled_in(k8s: cluster.Cluster, namespace: str, crds: list[str]) -> None:
    """A minimal Topic and Broker come back with the schema defaults."""
    assert _apply(k8s, namespace, _topic("t1")).returncode == 0
    assert _apply(k8s, namespace, _broker("b1")).returncode == 0
    custom = kubernetes.client.CustomObjectsApi(k8s.api_client)

    topic = custom.get_namespaced_custom_object(GROUP, VERSION, namespace, "topics", "t1")
    broker = custom.get_namespaced_custom_object(GROUP, VERSION, namespace, "brokers", "b1")

    assert topic["spec"] == {
        "broker": "demo",
        "queues": 8,
        "messageType": "NORMAL",
        "perm": 6,
        "retentionHours": 72,
    }
    assert broker["spec"]["groups"] == 1
    assert broker["spec"]["replicasPerGroup"] == 1
    assert broker["spec"]["storage"] == {"size": "10Gi", "deleteClaim": False}
    assert broker["spec"]["nameServer"] == {"replicas": 1}


def test_user_defaults_and_printer_columns(
    k8s: cluster.Cluster, namespace: str, crds: list[str]
) -> None:
    """A minimal RocketMQUser gets userType Normal, hmac authentication and LITERAL/Allow
    entries, and ``kubectl get`` shows its Broker, type and Secret columns."""
    body = _user("alice", **_acl("Topic:orders", "Pub", "Sub"))
    assert _apply(k8s, namespace, body).returncode == 0
    custom = kubernetes.client.CustomObjectsApi(k8s.api_client)

    user = custom.get_namespaced_custom_object(GROUP, VERSION, namespace, "rocketmqusers", "alice")
    table = k8s.kubectl("get", "rmqu", "-n", namespace).stdout

    assert user["spec"] == {
        "broker": "demo",
        "userType": "Normal",
        "authentication": {"type": "hmac"},
        "authorization": {
            "acls": [
                {
                    "resource": "Topic:orders",
                    "actions": ["Pub", "Sub"],
                    "patternType": "LITERAL",
                    "decision": "Allow",
                }
            ]
        },
    }
    assert table.split()[:6] == ["NAME", "READY", "BROKER", "TYPE", "SECRET", "AGE"]


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (_topic("bad", messageType="STREAM"), 'Unsupported value: "STREAM"'),
        (_topic("bad", queues=-1), "should be greater than or equal to 1"),
        (_topic("bad", perm=7), "Unsupported value: 7"),
        (_topic("Bad_Name"), "metadata.name"),
        (_broker("bad", brokerRole="SYNC_MASTER"), "SYNC_MASTER needs a slave"),
        (_broker("bad", groups=27), "should be less than or equal to 26"),
        (_broker("b" * 41), "at most 40 characters"),
        (_broker("bad", storage={"size": "lots"}), "spec.storage.size"),
        (
            _broker("bad", tls={"mode": "disabled", "issuerRef": {"name": "corp"}}),
            "tls.issuerRef needs tls.mode enforcing or permissive",
        ),
        (
            _broker("bad", tls={"certificateValidityDays": 400, "caValidityDays": 365}),
            "tls.certificateValidityDays may not exceed tls.caValidityDays",
        ),
        (_broker("bad", tls={"clientAuth": "always"}), 'Unsupported value: "always"'),
        (
            {
                "apiVersion": f"{GROUP}/{VERSION}",
                "kind": "ConsumerGroup",
                "metadata": {"name": "bad"},
                "spec": {"broker": "demo", "resetOffset": {"requestId": "1", "to": "Timestamp"}},
            },
            "needs resetOffset.timestamp",
        ),
        (
            _user("bad", authentication={"type": "hmac", "secretRef": {"name": "s", "key": "k"}}),
            "exactly one of type (hmac) and secretRef",
        ),
        (_user("bad", authentication={}), "exactly one of type (hmac) and secretRef"),
        (
            _user("bad", authentication={"secretRef": {"name": "bad", "key": "k"}}),
            "may not name the user's own Secret",
        ),
        (_user("bad", userType="Admin"), 'Unsupported value: "Admin"'),
        (_user("bad", **_acl("Topic:t", "Publish")), 'Unsupported value: "Publish"'),
        (_user("bad", **_acl("Topic:t")), "should have at least 1 items"),
        (_user("bad", **_acl("Queue:t", "Pub")), "spec.authorization.acls[0].resource"),
        (
            _user("bad", **_acl("Cluster", "Get", patternType="PREFIXED")),
            "patternType PREFIXED applies to Topic:<prefix> or Group:<prefix> only",
        ),
        (
            _user(
                "bad",
                authorization={
                    "acls": [
                        {"resource": "Topic:t", "actions": ["Pub"]},
                        {"resource": "Topic:t", "actions": ["Sub"]},
                    ]
                },
            ),
            "each resource (with its patternType) appears once",
        ),
    ],
)
def test_bad_specs_are_refused_with_a_clear_message(
    k8s: cluster.Cluster, namespace: str, crds: list[str], body: dict[str, Any], expected: str
) -> None:
    """The apiserver refuses a bad spec (enum, minimum, CEL rule) and says which field is wrong."""
    result = _apply(k8s, namespace, body, "--dry-run=server")

    assert result.returncode != 0
    assert expected in result.stderr, result.stderr


@pytest.mark.parametrize(
    ("before", "after", "expected"),
    [
        (_topic("t2"), _topic("t2") | {"spec": {"broker": "other"}}, "spec.broker is immutable"),
        (
            _broker("b2", storage={"storageClassName": "standard"}),
            _broker("b2", storage={"storageClassName": "fast"}),
            "storageClassName is immutable",
        ),
        (
            _broker("b3", storage={"size": "5Gi"}),
            _broker("b3", storage={"size": "4Gi"}),
            "never shrink",
        ),
    ],
)
def test_immutable_fields_cannot_change(
    k8s: cluster.Cluster,
    namespace: str,
    crds: list[str],
    before: dict[str, Any],
    after: dict[str, Any],
    expected: str,
) -> None:
    """An update that changes an immutable field (or shrinks storage) is refused by CEL."""
    assert _apply(k8s, namespace, before).returncode == 0

    result = _apply(k8s, namespace, after)

    assert result.returncode != 0
    assert expected in result.stderr, result.stderr


def test_status_fields_survive_pruning(
    k8s: cluster.Cluster, namespace: str, crds: list[str]
) -> None:
    """Conditions, the route and kopf's diff base written to status read back unpruned."""
    assert _apply(k8s, namespace, _topic("t3")).returncode == 0
    custom = kubernetes.client.CustomObjectsApi(k8s.api_client)
    status = {
        "observedGeneration": 1,
        "conditions": [
            {
                "type": "Ready",
                "status": "True",
                "reason": "Created",
                "message": "topic exists on 1 group",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
            }
        ],
        "topicName": "t3",
        "route": [{"brokerName": "demo-a", "readQueues": 8, "writeQueues": 8, "perm": 6}],
        "kopf": {"progress": {}, "last-handled-configuration": '{"spec": {}}'},
        "undeclared": "pruned",
    }

    custom.patch_namespaced_custom_object_status(
        GROUP, VERSION, namespace, "topics", "t3", {"status": status}
    )
    read = custom.get_namespaced_custom_object(GROUP, VERSION, namespace, "topics", "t3")

    expected = {k: v for k, v in status.items() if k != "undeclared"}
    assert read["status"] == expected
    printed = k8s.kubectl("get", "topic", "t3", "-n", namespace).stdout.split()
    assert printed[:6] == ["NAME", "READY", "BROKER", "QUEUES", "TYPE", "AGE"]
    assert printed[6:10] == ["t3", "True", "demo", "8"]


def test_kubectl_explain_documents_the_schema(k8s: cluster.Cluster, crds: list[str]) -> None:
    """``kubectl explain`` shows the field descriptions (the schema is published)."""
    try:
        result = k8s.kubectl("explain", "broker.spec.groups")
    except subprocess.CalledProcessError as error:  # pragma: no cover - diagnostic
        raise AssertionError(error.stderr) from error
    assert "<broker>-a" in result.stdout


def _model_objects(
    k8s: cluster.Cluster, namespace: str, spec: dict[str, Any]
) -> list[dict[str, Any]]:
    """Creates Broker ``demo`` with ``spec`` and returns the model's objects for it."""
    assert _apply(k8s, namespace, _broker("demo", **spec)).returncode == 0
    custom = kubernetes.client.CustomObjectsApi(k8s.api_client)
    broker = custom.get_namespaced_custom_object(GROUP, VERSION, namespace, "brokers", "demo")
    owner = model.Owner(name="demo", namespace=namespace, uid=broker["metadata"]["uid"])
    return model.desired_objects(owner, broker["spec"])


def test_model_objects_pass_server_side_dry_run(
    k8s: cluster.Cluster, namespace: str, crds: list[str]
) -> None:
    """Every object the model renders for a defaulted Broker (two ConfigMaps, two name-server
    Services and the Deployment, three objects per group) is valid for the apiserver."""
    objects = _model_objects(k8s, namespace, {"groups": 2, "replicasPerGroup": 2})
    body = {"apiVersion": "v1", "kind": "List", "items": objects}

    result = k8s.kubectl(
        "apply", "--dry-run=server", "-f", "-", check=False, input_text=json.dumps(body)
    )

    assert result.returncode == 0, result.stderr
    assert result.stdout.count("(server dry run)") == len(objects) == 11


def test_model_objects_run_and_pods_know_their_broker_id(
    k8s: cluster.Cluster, namespace: str, crds: list[str]
) -> None:
    """Applied for real, a group's pods carry the pod-index label the broker id is read from."""
    objects = _model_objects(k8s, namespace, {"replicasPerGroup": 2, "storage": {"size": "1Gi"}})
    body = {"apiVersion": "v1", "kind": "List", "items": objects}
    applied = k8s.kubectl(
        "apply", "--server-side", "-f", "-", check=False, input_text=json.dumps(body)
    )
    assert applied.returncode == 0, applied.stderr
    core = kubernetes.client.CoreV1Api(k8s.api_client)
    selector = f"{model.GROUP_LABEL}=demo-a"

    processes.wait_until(
        lambda: len(core.list_namespaced_pod(namespace, label_selector=selector).items) == 2,
        timeout_s=operator_support.ESTABLISHED_TIMEOUT_S,
        what="2 pods of broker group demo-a",
    )

    pods = core.list_namespaced_pod(namespace, label_selector=selector).items
    indexes = {p.metadata.name: p.metadata.labels.get(model.POD_INDEX_LABEL) for p in pods}
    assert indexes == {"demo-a-0": "0", "demo-a-1": "1"}
    owners = {p.metadata.name: p.metadata.owner_references[0].kind for p in pods}
    assert owners == {"demo-a-0": "StatefulSet", "demo-a-1": "StatefulSet"}
