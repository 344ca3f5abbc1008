"""The e2e translation of the operator's ServiceMonitor into a Prometheus scrape job keeps every
selector of it (as keep/drop rules on the Service's labels) and refuses fields it would drop."""

from __future__ import annotations

import pytest
from e2e import servicemonitor

from ariane.operator import model

SD = {"api_server": "https://10.244.0.1:6443"}


def _monitor() -> dict[str, object]:
    rendered = model.service_monitor(model.Owner(name="demo", namespace="ns1", uid="u"))
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
    """A ServiceMonitor with ``namespaceSelector`` or an endpoint ``tlsConfig`` raises rather
    than being scraped as if the field were not there."""
    monitor = _monitor()
    spec = monitor["spec"]
    assert isinstance(spec, dict)
    with pytest.raises(ValueError, match="namespaceSelector"):
        servicemonitor.scrape_configs({**monitor, "spec": {**spec, "namespaceSelector": {}}}, SD)
    endpoints = [{**spec["endpoints"][0], "tlsConfig": {}}]
    with pytest.raises(ValueError, match="tlsConfig"):
        servicemonitor.scrape_configs({**monitor, "spec": {**spec, "endpoints": endpoints}}, SD)
