"""A prometheus-operator ServiceMonitor as a Prometheus scrape job (``kubernetes_sd_configs``).

The e2e tests run Debian's Prometheus as a host process, without prometheus-operator; this does
what the operator's config generator does for one ServiceMonitor endpoint, for the subset of the
ServiceMonitor API Ariane's operator renders (``ariane.operator.model.service_monitor``):
``selector`` (``matchLabels`` and ``matchExpressions`` with In, NotIn, Exists, DoesNotExist) on
the Services' labels, the ServiceMonitor's own namespace only (no ``namespaceSelector``), each
endpoint's named ``port``, ``path``, ``interval``, ``scheme`` and the ``targetLabels`` copied from
the Service. Discovery uses ``role: endpointslice``, as prometheus-operator does by default since
v0.73, and the same target labels it adds (``namespace``, ``service``, ``pod``, ``container``,
``endpoint``, ``job`` = the Service's name).

Invariants: every selector of the ServiceMonitor becomes a keep/drop rule on the discovered
Service's labels (nothing is hand-written); a field this translation does not know raises
``ValueError`` instead of being ignored.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

_HANDLED_SPEC = frozenset({"selector", "endpoints", "targetLabels"})
_HANDLED_ENDPOINT = frozenset({"port", "path", "interval", "scheme"})


def label_name(kubernetes_label: str) -> str:
    """A Kubernetes label key as Prometheus' service discovery spells it in meta labels
    (``app.kubernetes.io/name`` → ``app_kubernetes_io_name``)."""
    return re.sub(r"[^a-zA-Z0-9_]", "_", kubernetes_label)


def _service_label(key: str) -> str:
    return f"__meta_kubernetes_service_label_{label_name(key)}"


def _present(key: str) -> str:
    return f"__meta_kubernetes_service_labelpresent_{label_name(key)}"


def selector_rules(selector: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Keep/drop relabel rules equivalent to a Kubernetes label selector on the Service.

    Raises:
        ValueError: an operator other than In, NotIn, Exists, DoesNotExist.
    """
    rules: list[dict[str, Any]] = [
        {"action": "keep", "source_labels": [_service_label(k), _present(k)],
         "regex": f"({re.escape(v)});true"}
        for k, v in sorted(selector.get("matchLabels", {}).items())
    ]  # fmt: skip
    for expression in selector.get("matchExpressions", []):
        key, operator = expression["key"], expression["operator"]
        values = "|".join(re.escape(v) for v in expression.get("values", []))
        if operator == "Exists":
            rules.append({"action": "keep", "source_labels": [_present(key)], "regex": "true"})
        elif operator == "DoesNotExist":
            rules.append({"action": "drop", "source_labels": [_present(key)], "regex": "true"})
        elif operator == "In":
            rules.append({"action": "keep", "source_labels": [_service_label(key), _present(key)],
                          "regex": f"({values});true"})  # fmt: skip
        elif operator == "NotIn":
            rules.append({"action": "drop", "source_labels": [_service_label(key), _present(key)],
                          "regex": f"({values});true"})  # fmt: skip
        else:
            raise ValueError(f"selector operator {operator!r} is not translated")
    return rules


def _target_label_rules(monitor: Mapping[str, Any], port: str) -> list[dict[str, Any]]:
    """The labels prometheus-operator puts on every target, then the ``targetLabels``."""
    meta = "__meta_kubernetes_"
    rules: list[dict[str, Any]] = [
        {"source_labels": [f"{meta}namespace"], "target_label": "namespace"},
        {"source_labels": [f"{meta}service_name"], "target_label": "service"},
        {"source_labels": [f"{meta}pod_name"], "target_label": "pod"},
        {"source_labels": [f"{meta}pod_container_name"], "target_label": "container"},
        {"source_labels": [f"{meta}service_name"], "target_label": "job"},
        {"target_label": "endpoint", "replacement": port},
    ]
    for key in monitor["spec"].get("targetLabels", []):
        rules.append({"source_labels": [_service_label(key)], "target_label": label_name(key),
                      "regex": "(.+)", "replacement": "${1}"})  # fmt: skip
    return rules


def scrape_configs(
    monitor: Mapping[str, Any], sd: Mapping[str, Any], *, interval: str | None = None
) -> list[dict[str, Any]]:
    """One scrape job per endpoint of the live ServiceMonitor ``monitor``.

    Args:
        monitor: the ServiceMonitor as the apiserver returns it (``metadata.namespace`` set).
        sd: the connection part of a ``kubernetes_sd_configs`` entry (``api_server``,
            ``tls_config``, ``authorization``); role and namespaces are added here.
        interval: overrides every endpoint's ``interval`` (tests scrape every second).

    Raises:
        ValueError: the ServiceMonitor uses a field this translation does not handle.
    """
    spec, namespace = monitor["spec"], monitor["metadata"]["namespace"]
    if unknown := set(spec) - _HANDLED_SPEC:
        raise ValueError(f"ServiceMonitor fields not translated: {sorted(unknown)}")
    jobs = []
    for index, endpoint in enumerate(spec["endpoints"]):
        if unknown := set(endpoint) - _HANDLED_ENDPOINT:
            raise ValueError(f"ServiceMonitor endpoint fields not translated: {sorted(unknown)}")
        port = endpoint["port"]
        name = monitor["metadata"]["name"]
        jobs.append({
            "job_name": f"serviceMonitor/{namespace}/{name}/{index}",
            "honor_labels": False,
            "scrape_interval": interval or endpoint.get("interval", "30s"),
            "metrics_path": endpoint.get("path", "/metrics"),
            "scheme": endpoint.get("scheme", "http"),
            "kubernetes_sd_configs": [
                {**sd, "role": "endpointslice", "namespaces": {"names": [namespace]}}
            ],
            "relabel_configs": [
                *selector_rules(spec["selector"]),
                {"action": "keep", "source_labels": ["__meta_kubernetes_endpointslice_port_name"],
                 "regex": re.escape(port)},
                *_target_label_rules(monitor, port),
            ],
        })  # fmt: skip
    return jobs
