"""The e2e translation of the operator's ServiceMonitor into a Prometheus scrape job keeps every
selector of it (as keep/drop rules on the Service's labels) and refuses fields it would drop."""

from __future__ import annotations

import pytest
from e2e import servicemonitor

from ariane.operator import model

SD = {"api_server": "https://10.244.0.1:6443"}


def _monitor() -> dict[str, object]:
    rendered = model.service_monitor(model.Owner(name="demo", namespace="ns1", uid="u"), {})
    return {**rendered, "metadata": {**rendered["metadata"], "namespace": "ns1"}}


def test_the_operators_selectors_and_port_become_relabel_rules() -> None:
    """matchLabels → keep on value and presence, DoesNotExist → drop on presence, the named
    port → keep on the EndpointSlice port name; discovery only in the monitor's namespace."""
    [job] = servicemonitor.scrape_configs(_monitor(), SD, interval="1s")

    rules = job["relabel_configs"]
    label = "__meta_kubernetes_service_label_app_kubernetes_io_"
    present = "__meta_kubernetes_service_labelpresent_"
    assert {"action": "keep", "source_labels": [f"{label}name", f"{present}app_kubernetes_io_name"],
            "regex": "(ariane);true"} in rules  # fmt: skip
    assert {"action": "keep", "source_labels": [f"{label}instance",
            f"{present}app_kubernetes_io_instance"], "regex": "(demo);true"} in rules  # fmt: skip
    assert {"action": "drop", "source_labels": [f"{present}ariane_dev_discovery"],
            "regex": "true"} in rules  # fmt: skip
    assert {"action": "keep", "source_labels": ["__meta_kubernetes_endpointslice_port_name"],
            "regex": "metrics"} in rules  # fmt: skip
    [sd] = job["kubernetes_sd_configs"]
    assert sd == {**SD, "role": "endpointslice", "namespaces": {"names": ["ns1"]}}
    assert job["scrape_interval"] == "1s" and job["metrics_path"] == "/metrics"
    copied = {r["target_label"] for r in rules if r.get("regex") == "(.+)"}
    assert copied == {servicemonitor.label_name(k) for k in model.TARGET_LABELS}


def test_a_field_it_does_not_translate_is_refused() -> None:
    """A ServiceMonitor with ``namespaceSelector``, an endpoint ``tlsConfig`` field not handled
    (``caFile``), a CA from a ConfigMap, Secrets without ``secret_file`` or a relabeling field
    not handled raises rather than being scraped as if the field were not there."""
    monitor = _monitor()
    spec = monitor["spec"]
    assert isinstance(spec, dict)
    with pytest.raises(ValueError, match="namespaceSelector"):
        servicemonitor.scrape_configs({**monitor, "spec": {**spec, "namespaceSelector": {}}}, SD)

    def with_endpoint(**fields: object) -> dict[str, object]:
        return {**monitor, "spec": {**spec, "endpoints": [{**spec["endpoints"][0], **fields}]}}

    def files(name: str, key: str) -> str:
        return f"/s/{name}/{key}"

    with pytest.raises(ValueError, match="caFile"):
        monitor_with_file = with_endpoint(tlsConfig={"caFile": "/x"})
        servicemonitor.scrape_configs(monitor_with_file, SD, secret_file=files)
    configmap_ca = {"ca": {"configMap": {"name": "c", "key": "ca.crt"}}}
    with pytest.raises(ValueError, match="configMap"):
        servicemonitor.scrape_configs(with_endpoint(tlsConfig=configmap_ca), SD, secret_file=files)
    secret_ca = {"ca": {"secret": {"name": "s", "key": "ca.crt"}}}
    with pytest.raises(ValueError, match="secret_file"):
        servicemonitor.scrape_configs(with_endpoint(tlsConfig=secret_ca), SD)
    with pytest.raises(ValueError, match="modulo"):
        servicemonitor.scrape_configs(with_endpoint(relabelings=[{"modulo": 2}]), SD)


def test_the_tls_endpoints_become_https_jobs_reading_the_secrets() -> None:
    """An enforcing Broker's ServiceMonitor → one HTTPS job per component, its ``tls_config``
    reading ``ca.crt`` of that component's leaf Secret and naming its ``serverName``, its keep
    rule on the component label after the generated rules."""
    owner = model.Owner(name="demo", namespace="ns1", uid="u")
    rendered = model.service_monitor(owner, {"tls": {"mode": "enforcing"}})
    monitor = {**rendered, "metadata": {**rendered["metadata"], "namespace": "ns1"}}
    jobs = servicemonitor.scrape_configs(
        monitor, SD, secret_file=lambda name, key: f"/secrets/{name}/{key}"
    )
    assert [job["tls_config"] for job in jobs] == [
        {"ca_file": "/secrets/demo-namesrv-tls/ca.crt", "server_name": "demo-namesrv.ns1.svc"},
        {"ca_file": "/secrets/demo-broker-tls/ca.crt", "server_name": "demo-a.ns1.svc"},
    ]
    assert {job["scheme"] for job in jobs} == {"https"}
    component = "__meta_kubernetes_service_label_app_kubernetes_io_component"
    assert [job["relabel_configs"][-1] for job in jobs] == [
        {"action": "keep", "source_labels": [component], "regex": regex}
        for regex in ("namesrv", "broker")
    ]
