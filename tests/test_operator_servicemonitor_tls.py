"""The operator's ServiceMonitor follows ``spec.tls``: plain HTTP for a disabled or permissive
Broker, HTTPS per component for an enforcing one, verifying each server against its own leaf
Secret's bundle and a name that leaf carries, with no client certificate."""

from __future__ import annotations

import re

import pytest

from ariane.operator import certs, model, resources

OWNER = model.Owner(name="demo", namespace="mq", uid="1234-abcd")
COMPONENT_META = "__meta_kubernetes_service_label_app_kubernetes_io_component"


def _monitor(spec: resources.BrokerSpec) -> resources.Manifest:
    objects = model.desired_objects(OWNER, {**spec, "metrics": {"serviceMonitor": True}})
    (monitor,) = [o for o in objects if o["kind"] == "ServiceMonitor"]
    return monitor


def _kept(endpoint: dict[str, object], service: resources.Manifest) -> bool:
    """Whether ``endpoint``'s keep relabelings (on the component label) keep ``service``."""
    component = service["metadata"]["labels"]["app.kubernetes.io/component"]
    rules = endpoint.get("relabelings", [])
    assert isinstance(rules, list)
    for rule in rules:
        assert rule["action"] == "keep" and rule["sourceLabels"] == [COMPONENT_META]
        if not re.fullmatch(rule["regex"], component):
            return False
    return True


@pytest.mark.parametrize("mode", [None, "disabled", "permissive"])
def test_plain_http_unless_enforcing(mode: str | None) -> None:
    """Without TLS, and with ``permissive`` (whose processes serve ``/metrics`` over plain
    HTTP), one endpoint with neither ``scheme`` nor ``tlsConfig`` scrapes every Service."""
    spec: resources.BrokerSpec = {} if mode is None else {"tls": {"mode": mode}}
    (endpoint,) = _monitor(spec)["spec"]["endpoints"]
    assert endpoint == {"port": "metrics", "path": "/metrics", "interval": "30s"}


@pytest.mark.parametrize("client_auth", ["none", "optional", "require"])
@pytest.mark.parametrize("groups", [1, 3])
def test_enforcing_scrapes_each_component_over_verified_https(
    client_auth: str, groups: int
) -> None:
    """Under ``enforcing``: every selected Service is kept by exactly one endpoint, which
    scrapes HTTPS, trusts ``ca.crt`` of the leaf Secret that Service's pods mount and expects a
    ``serverName`` among that leaf's DNS names; no client certificate or key is referenced,
    whatever ``clientAuth`` is."""
    spec: resources.BrokerSpec = {
        "groups": groups,
        "tls": {"mode": "enforcing", "clientAuth": client_auth},
    }
    monitor = _monitor(spec)
    endpoints = monitor["spec"]["endpoints"]
    leaves = {
        leaf.secret_name: leaf for leaf in certs.leaves(OWNER, model.group_names("demo", groups))
    }
    wanted = monitor["spec"]["selector"]["matchLabels"]
    services = [
        o for o in model.desired_objects(OWNER, spec)
        if o["kind"] == "Service" and wanted.items() <= o["metadata"]["labels"].items()
        and model.DISCOVERY_LABEL not in o["metadata"]["labels"]
    ]  # fmt: skip
    assert len(services) == 1 + groups
    mounted = {
        "namesrv": model.namesrv_tls_secret_name("demo"),
        "broker": model.broker_tls_secret_name("demo"),
    }
    for service in services:
        (endpoint,) = [e for e in endpoints if _kept(e, service)]
        assert endpoint["scheme"] == "https" and endpoint["port"] == "metrics"
        tls = endpoint["tlsConfig"]
        assert set(tls) == {"ca", "serverName"}  # no cert / keySecret / insecureSkipVerify
        secret = mounted[service["metadata"]["labels"]["app.kubernetes.io/component"]]
        assert tls["ca"] == {"secret": {"name": secret, "key": model.TLS_CA_FILE}}
        assert tls["serverName"] in leaves[secret].dns_names


def test_cert_manager_leaves_have_the_same_secrets_and_names() -> None:
    """With ``issuerRef`` the Certificates' ``secretName`` and ``dnsNames`` are the leaves'
    too, so the same ServiceMonitor verifies cert-manager's certificates."""
    spec: resources.BrokerSpec = {
        "tls": {"mode": "enforcing", "issuerRef": {"name": "ca", "kind": "ClusterIssuer"}},
    }
    endpoints = _monitor(spec)["spec"]["endpoints"]
    times = certs.lifetimes(spec, None)
    issuer = spec["tls"]["issuerRef"]
    made = {
        c["spec"]["secretName"]: c["spec"].get("dnsNames", [])
        for c in (
            certs.certificate(OWNER, leaf, issuer, times)
            for leaf in certs.leaves(OWNER, model.group_names("demo", 1))
        )
    }
    for endpoint in endpoints:
        tls = endpoint["tlsConfig"]
        assert tls["serverName"] in made[tls["ca"]["secret"]["name"]]
