"""The pure parts of the NetworkPolicy and least-privilege work: ``operator.netpol`` rendering
choices, the operator's side from its environment, pods without a token, kopf's scope."""

from __future__ import annotations

import pytest

from ariane.operator import __main__ as operator_main
from ariane.operator import model, netpol
from ariane.operator import settings as operator_settings

OWNER = model.Owner(name="demo", namespace="ns", uid="u-1")


def test_operator_side_comes_from_the_charts_environment() -> None:
    """The chart's variables name the operator pod and Prometheus' namespaces; unset: no
    operator pod, ``monitoring``; a malformed value is refused."""
    env = {
        operator_settings.OPERATOR_NAMESPACE_ENV: "ops",
        operator_settings.OPERATOR_LABELS_ENV: '{"app.kubernetes.io/name": "ariane", "x": "y"}',
        operator_settings.PROMETHEUS_NAMESPACES_ENV: '["mon", "obs"]',
    }

    side = operator_settings.OperatorSettings.from_env(env).side

    assert side == netpol.OperatorSide(
        "ops", (("app.kubernetes.io/name", "ariane"), ("x", "y")), ("mon", "obs")
    )
    assert operator_settings.OperatorSettings.from_env({}).side == netpol.OperatorSide()
    assert netpol.operator_peers(netpol.OperatorSide()) == []
    name = operator_settings.PROMETHEUS_NAMESPACES_ENV
    with pytest.raises(ValueError, match=name):
        operator_settings.OperatorSettings.from_env({name: '"monitoring"'})


@pytest.mark.parametrize(
    ("config", "ports"),
    [
        ({}, [8081]),
        ({"remoting_listen": "127.0.0.1:10911"}, [8081]),
        ({"remoting_listen": "0.0.0.0:10911"}, [8081, 10911]),
        ({"remoting_listen": "[::]:10999"}, [8081, 10999]),
    ],
)
def test_client_ports_include_remoting_only_when_bound_for_others(
    config: dict[str, str], ports: list[int]
) -> None:
    """Remoting is a client port when ``spec.config.remoting_listen`` binds a non-loopback
    address (the broker's default is loopback only)."""
    assert netpol.client_ports({"config": config}) == ports


def test_disabled_renders_nothing_and_metrics_default_to_prometheus_namespaces() -> None:
    """``enabled: false`` renders no policy; without ``metricsSelectors`` the metrics port
    admits the operator's Prometheus namespaces, with an empty list nobody."""
    side = netpol.OperatorSide(prometheus_namespaces=("mon",))
    rendered = netpol.policies(OWNER, {}, ["demo-a"], side)
    closed = netpol.policies(OWNER, {}, ["demo-a"], netpol.OperatorSide(prometheus_namespaces=()))

    assert netpol.policies(OWNER, {"networkPolicy": {"enabled": False}}, ["demo-a"], side) == []
    assert [p["metadata"]["name"] for p in rendered] == ["demo-namesrv", "demo-a"]
    metrics_rule = rendered[1]["spec"]["ingress"][2]
    assert metrics_rule["from"][0]["namespaceSelector"]["matchExpressions"][0]["values"] == ["mon"]
    assert [r["ports"][0]["port"] for r in closed[1]["spec"]["ingress"]] == [8081, 10912]


def test_broker_and_name_server_pods_mount_no_service_account_token() -> None:
    """Neither kind of pod talks to the apiserver: no token is mounted."""
    objects = model.desired_objects(OWNER, {})
    templates = [
        o["spec"]["template"]["spec"] for o in objects if o["kind"] in ("StatefulSet", "Deployment")
    ]

    assert len(templates) == 2
    assert all(t["automountServiceAccountToken"] is False for t in templates)


@pytest.mark.parametrize(
    ("namespaces", "exact"),
    [([], False), (["a", "b"], True), (["team-*"], False), (["!kube-system"], False)],
)
def test_kopf_scans_nothing_cluster_wide_for_plain_namespace_names(
    namespaces: list[str], exact: bool
) -> None:
    """Plain names turn kopf's namespace and CRD scanning off (the Roles grant neither);
    globs and every-namespace keep it."""
    assert operator_main.exact_namespaces(namespaces) is exact
