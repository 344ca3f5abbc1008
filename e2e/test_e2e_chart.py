"""The Helm chart ``charts/ariane``: lints, renders, and its objects pass the real apiserver."""

from __future__ import annotations

import json
import pathlib
import subprocess
from typing import Any

import kubernetes  # type: ignore[import-untyped]
import pytest
import yaml

from ariane import cli
from ariane.metrics import alerts, dashboard
from e2e import operator_support
from e2e.testenv import cluster

pytestmark = pytest.mark.k8s

CHART = str(operator_support.CHART_DIR)
ROOT = operator_support.CHART_DIR.parents[1]


def _render(k8s: cluster.Cluster, namespace: str, *sets: str) -> list[dict[str, Any]]:
    args = [f"--set={s}" for s in sets]
    text = k8s.helm("template", "rel", CHART, "--namespace", namespace, *args).stdout
    return [doc for doc in yaml.safe_load_all(text) if doc]


def _kinds(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {m["kind"]: m for m in objects}


def test_chart_lints_strictly(k8s: cluster.Cluster) -> None:
    """``helm lint --strict`` passes with the defaults and with the sample Broker on."""
    k8s.helm("lint", "--strict", CHART)
    k8s.helm("lint", "--strict", CHART, "--set", "sampleBroker.enabled=true")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("operator.logLevel=LOUD", "/operator/logLevel"),
        ("sampleBroker.groups=0", "/sampleBroker/groups"),
        ("image.pullPolicy=Sometimes", "/image/pullPolicy"),
        ("operator.colour=blue", "colour"),
    ],
)
def test_schema_refuses_bad_values(k8s: cluster.Cluster, value: str, expected: str) -> None:
    """values.schema.json makes lint fail on a bad value and names the offending key."""
    result = k8s.helm("lint", CHART, "--set", value, check=False)

    assert result.returncode != 0
    assert expected in result.stdout + result.stderr


def test_operator_deployment_is_single_non_root_and_read_only(
    k8s: cluster.Cluster, namespace: str
) -> None:
    """One replica, Recreate, liveness on /healthz, non-root with a read-only root file system."""
    deployment = _kinds(_render(k8s, namespace))["Deployment"]["spec"]
    pod = deployment["template"]["spec"]
    container = pod["containers"][0]

    assert deployment["replicas"] == 1
    assert deployment["strategy"] == {"type": "Recreate"}
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["args"][:2] == ["operator", "--standalone"]
    assert "--all-namespaces" in container["args"]


@pytest.mark.parametrize("sets", [(), ("operator.watchNamespaces={a,b}",)])
def test_rendered_operator_args_parse_with_the_real_cli(
    k8s: cluster.Cluster, namespace: str, sets: tuple[str, ...]
) -> None:
    """The Deployment's args are accepted by ``ariane operator`` (scope, ports, log level)."""
    deployment = _kinds(_render(k8s, namespace, *sets))["Deployment"]["spec"]
    args = cli.build_parser().parse_args(deployment["template"]["spec"]["containers"][0]["args"])

    assert (args.command, args.standalone, args.log_level) == ("operator", True, "info")
    assert args.liveness == "http://0.0.0.0:8080/healthz"
    assert args.metrics_port == 8081
    assert (args.all_namespaces, args.namespace) == (
        (True, []) if not sets else (False, ["a", "b"])
    )


def test_rbac_is_scoped_to_what_the_operator_manages(k8s: cluster.Cluster, namespace: str) -> None:
    """The ClusterRole grants no wildcards and status access only via /status; Secrets in
    exactly one rule, with only get (by name), create and patch (no list, watch or delete)."""
    role = _kinds(_render(k8s, namespace))["ClusterRole"]
    resources = {r for rule in role["rules"] for r in rule["resources"]}
    verbs = {v for rule in role["rules"] for v in rule["verbs"]}

    assert "*" not in resources and "*" not in verbs
    secret_rules = [rule for rule in role["rules"] if "secrets" in rule["resources"]]
    assert len(secret_rules) == 1 and secret_rules[0]["resources"] == ["secrets"], secret_rules
    assert sorted(secret_rules[0]["verbs"]) == ["create", "get", "patch"], secret_rules
    assert {"brokers/status", "statefulsets", "poddisruptionbudgets", "events"} <= resources
    assert {"networkpolicies", "customresourcedefinitions"} <= resources


def test_watch_namespaces_get_roles_and_no_cluster_wide_grant(
    k8s: cluster.Cluster, namespace: str
) -> None:
    """With ``watchNamespaces`` each watched namespace gets a Role and RoleBinding holding the
    operator's rules; the only cluster-wide grant left is reading StorageClasses."""
    objects = _render(k8s, namespace, "operator.watchNamespaces={a,b}")
    roles = [m for m in objects if m["kind"] == "Role"]
    bindings = [m for m in objects if m["kind"] == "RoleBinding"]
    cluster_role = _kinds(objects)["ClusterRole"]
    everywhere = _kinds(_render(k8s, namespace))["ClusterRole"]

    assert sorted(r["metadata"]["namespace"] for r in roles) == ["a", "b"]
    assert sorted(b["metadata"]["namespace"] for b in bindings) == ["a", "b"]
    assert all(b["subjects"][0]["namespace"] == namespace for b in bindings)
    assert cluster_role["rules"] == [
        {"apiGroups": ["storage.k8s.io"], "resources": ["storageclasses"], "verbs": ["get"]}
    ]
    assert roles[0]["rules"] == everywhere["rules"][2:]


def test_operator_network_policy_admits_metrics_and_reaches_admin_ports(
    k8s: cluster.Cluster, namespace: str
) -> None:
    """The operator's NetworkPolicy selects its pod; ingress only to its metrics port from the
    Prometheus namespaces; egress to the apiserver, DNS (the kube-dns pods, plus
    ``networkPolicy.dnsCidrs``) and the admin ports of Ariane's pods in the watched namespaces;
    ``networkPolicy.enabled=false`` drops it."""
    objects = _kinds(_render(k8s, namespace, "operator.watchNamespaces={a}"))
    policy = objects["NetworkPolicy"]["spec"]
    node_dns = _kinds(_render(k8s, namespace, "networkPolicy.dnsCidrs={10.0.0.10/32}"))
    pod_labels = objects["Deployment"]["spec"]["template"]["metadata"]["labels"]
    off = _kinds(_render(k8s, namespace, "networkPolicy.enabled=false"))

    assert policy["podSelector"]["matchLabels"].items() <= pod_labels.items()
    assert policy["policyTypes"] == ["Ingress", "Egress"]
    assert [r["ports"] for r in policy["ingress"]] == [[{"protocol": "TCP", "port": 8081}]]
    dns = policy["egress"][1]["to"]
    assert [p["port"] for p in policy["egress"][1]["ports"]] == [53, 53]
    assert dns[0]["podSelector"] == {"matchLabels": {"k8s-app": "kube-dns"}} and len(dns) == 1
    assert node_dns["NetworkPolicy"]["spec"]["egress"][1]["to"][1:] == [
        {"ipBlock": {"cidr": "10.0.0.10/32"}}
    ]
    admin = policy["egress"][2]
    assert [p["port"] for p in admin["ports"]] == [9876, 8081]
    assert admin["to"][0]["namespaceSelector"]["matchExpressions"][0]["values"] == ["a"]
    assert "NetworkPolicy" not in off


def test_sample_broker_and_test_hook_render_only_when_enabled(
    k8s: cluster.Cluster, namespace: str
) -> None:
    """The sample Broker appears with its flag, secure by default (TLS enforcing, ACL on) with
    the smoke test's RocketMQUser; the helm test pod is a test hook that then signs with that
    user's Secret (endpoints, keys, CA); with ACL off it trusts only the sample Broker's bundle,
    and without TLS it is plaintext; ``extraSpec`` adds fields under the ones the values set."""
    plain = _kinds(_render(k8s, namespace))
    sets = ("sampleBroker.enabled=true", "tests.enabled=true")
    sample = _kinds(_render(k8s, namespace, *sets))
    no_auth = _kinds(_render(k8s, namespace, *sets, "sampleBroker.auth=false"))
    no_tls = _kinds(
        _render(k8s, namespace, *sets, "sampleBroker.auth=false", "sampleBroker.tls=disabled")
    )
    extra = _kinds(
        _render(k8s, namespace, *sets, "sampleBroker.extraSpec.brokerRole=SYNC_MASTER",
                "sampleBroker.extraSpec.tls.mode=disabled", "sampleBroker.extraSpec.groups=3")
    )  # fmt: skip

    assert "Broker" not in plain and "RocketMQUser" not in plain
    assert sample["Broker"]["spec"]["groups"] == 1
    assert sample["Broker"]["spec"]["tls"] == {"mode": "enforcing"}
    assert sample["Broker"]["spec"]["auth"] == {"enabled": True}
    user = sample["RocketMQUser"]
    assert user["metadata"]["name"] == "rel-ariane-smoke" and user["spec"]["broker"] == "demo"
    assert user["spec"]["authorization"]["acls"] == [
        {"resource": "Topic:helm-smoke", "actions": ["Create", "Pub", "Sub"]},
        {"resource": "Group:ariane-round-trip", "actions": ["Sub"]},
        {"resource": "Cluster", "actions": ["Get"]},
    ]
    assert "RocketMQUser" not in no_auth
    pod = sample["Pod"]
    assert pod["metadata"]["annotations"]["helm.sh/hook"] == "test"
    from_secret = [
        {"name": env, "valueFrom": {"secretKeyRef": {"name": "rel-ariane-smoke", "key": key}}}
        for env, key in (
            ("NAMESRV_ADDR", "endpoints"),
            ("ARIANE_ACCESS_KEY", "accessKey"),
            ("ARIANE_SECRET_KEY", "secretKey"),
        )
    ]
    tls_env = [
        {"name": "ARIANE_TLS", "value": "1"},
        {"name": "ARIANE_CA_FILE", "value": "/etc/ariane/tls/ca.crt"},
    ]
    assert pod["spec"]["containers"][0]["env"] == from_secret + tls_env
    items = [{"key": "ca.crt", "path": "ca.crt"}]
    user_ca = {"secretName": "rel-ariane-smoke", "items": items}
    assert {"name": "tls", "secret": user_ca} in pod["spec"]["volumes"]
    address = {"name": "NAMESRV_ADDR", "value": f"demo-namesrv.{namespace}.svc:9876"}
    assert no_auth["Pod"]["spec"]["containers"][0]["env"] == [address, *tls_env]
    bundle = {"secretName": "demo-namesrv-tls", "items": items}
    assert {"name": "tls", "secret": bundle} in no_auth["Pod"]["spec"]["volumes"]
    assert no_tls["Pod"]["spec"]["containers"][0]["env"] == [address]
    spec = extra["Broker"]["spec"]
    assert spec["brokerRole"] == "SYNC_MASTER" and spec["groups"] == 1
    assert spec["tls"] == {"mode": "enforcing"}


def test_rendered_chart_passes_server_side_dry_run(k8s: cluster.Cluster, namespace: str) -> None:
    """With the CRDs installed, every rendered object (sample Broker too) passes the apiserver."""
    operator_support.apply_crds(k8s)
    objects = _render(k8s, namespace, "sampleBroker.enabled=true")
    body = json.dumps({"apiVersion": "v1", "kind": "List", "items": objects})

    result = k8s.kubectl(
        "apply", "-n", namespace, "--dry-run=server", "-f", "-", check=False, input_text=body
    )

    assert result.returncode == 0, result.stderr
    assert result.stdout.count("(server dry run)") == len(objects)


def test_helm_install_creates_the_operator_and_the_sample(
    k8s: cluster.Cluster, namespace: str
) -> None:
    """``helm install`` creates the operator Deployment and the sample Broker, and uninstalls."""
    operator_support.apply_crds(k8s)
    k8s.helm(
        "install", "rel", CHART, "--namespace", namespace, "--set", "sampleBroker.enabled=true"
    )
    apps = kubernetes.client.AppsV1Api(k8s.api_client)
    custom = kubernetes.client.CustomObjectsApi(k8s.api_client)

    deployment = apps.read_namespaced_deployment("rel-ariane", namespace)
    broker = custom.get_namespaced_custom_object(
        "ariane.dev", "v1alpha1", namespace, "brokers", "demo"
    )

    assert deployment.spec.strategy.type == "Recreate"
    assert broker["spec"]["storage"]["deleteClaim"] is False  # defaulted by the CRD
    k8s.helm("uninstall", "rel", "--namespace", namespace)


def test_metrics_toggles_render_the_rules_and_the_dashboard(
    k8s: cluster.Cluster, namespace: str, tmp_path: pathlib.Path
) -> None:
    """With both toggles on, helm renders a PrometheusRule that ``promtool check rules`` accepts
    (the alerts of ``ariane.metrics.alerts``) and the dashboard ConfigMap the Grafana sidecar
    loads; by default only the dashboard renders."""
    plain = _kinds(_render(k8s, namespace))
    both = _kinds(
        _render(
            k8s, namespace, "metrics.prometheusRule.enabled=true", "metrics.dashboard.enabled=true"
        )
    )
    k8s.helm("lint", "--strict", CHART, "--set", "metrics.prometheusRule.enabled=true")

    assert "PrometheusRule" not in plain and "ConfigMap" in plain
    spec = both["PrometheusRule"]["spec"]
    assert spec["groups"][0]["rules"] == alerts.rules(alerts.CHART_SELECTOR)
    rules = tmp_path / "rules.yaml"
    rules.write_text(yaml.safe_dump(spec))
    done = subprocess.run(
        [_promtool(), "check", "rules", str(rules)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stdout + done.stderr
    board = both["ConfigMap"]
    assert board["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(board["data"]["ariane.json"]) == dashboard.dashboard()


def _promtool() -> str:
    """Debian's promtool, fetched by the unit tests' install script on first use."""
    out = subprocess.run(
        ["sh", str(ROOT / "tests" / "prometheus" / "install.sh")],
        capture_output=True, text=True, check=True, timeout=600,
    )  # fmt: skip
    return str(pathlib.Path(out.stdout.strip()) / "promtool")
