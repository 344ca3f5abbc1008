"""A prometheus-operator ServiceMonitor as a Prometheus scrape job (``kubernetes_sd_configs``).

The e2e tests run Debian's Prometheus as a host process, without prometheus-operator; this does
what the operator's config generator does for one ServiceMonitor endpoint, for the subset of the
ServiceMonitor API Ariane's operator renders (``ariane.operator.model.service_monitor``):
``selector`` (``matchLabels`` and ``matchExpressions`` with In, NotIn, Exists, DoesNotExist) on
the Services' labels, the ServiceMonitor's own namespace only (no ``namespaceSelector``), each
endpoint's named ``port``, ``path``, ``interval``, ``scheme``, ``relabelings`` (after the
generated rules, as prometheus-operator puts them) and ``tlsConfig`` (``ca``/``cert`` from a
Secret, ``keySecret``, ``serverName``, ``insecureSkipVerify``; the Secrets' keys read through a
caller-given ``secret_file``, as prometheus-operator mounts them), and the ``targetLabels``
copied from the Service. Discovery uses ``role: endpointslice``, as prometheus-operator does by
default since v0.73, and the same target labels it adds (``namespace``, ``service``, ``pod``,
``container``, ``endpoint``, ``job`` = the Service's name).

Invariants: every selector of the ServiceMonitor becomes a keep/drop rule on the discovered
Service's labels (nothing is hand-written); a field this translation does not know raises
``ValueError`` instead of being ignored.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

_HANDLED_SPEC = frozenset({"selector", "endpoints", "targetLabels"})
_HANDLED_ENDPOINT = frozenset({"port", "path", "interval", "scheme", "relabelings", "tlsConfig"})
_HANDLED_TLS = frozenset({"ca", "cert", "keySecret", "serverName", "insecureSkipVerify"})
_RELABEL_KEYS = {
    "sourceLabels": "source_labels",
    "separator": "separator",
    "targetLabel": "target_label",
    "regex": "regex",
    "modulus": "modulus",
    "replacement": "replacement",
    "action": "action",
}

SecretFile = Callable[[str, str], str]
"""``(secret name, key)`` → the path of a file holding that key of that Secret (in the
ServiceMonitor's namespace)."""


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


def relabelings(rules: list[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """prometheus-operator ``RelabelConfig``s as Prometheus ``relabel_configs``.

    Raises:
        ValueError: a field of a rule this translation does not know.
    """
    out = []
    for rule in rules:
        if unknown := set(rule) - set(_RELABEL_KEYS):
            raise ValueError(f"relabeling fields not translated: {sorted(unknown)}")
        out.append({_RELABEL_KEYS[k]: (v.lower() if k == "action" else v) for k, v in rule.items()})
    return out


def _secret_key(selector: Mapping[str, Any], what: str) -> tuple[str, str]:
    if set(selector) != {"secret"}:
        raise ValueError(f"tlsConfig.{what}: only a Secret is translated, got {sorted(selector)}")
    return selector["secret"]["name"], selector["secret"]["key"]


def tls_config(tls: Mapping[str, Any], secret_file: SecretFile | None) -> dict[str, Any]:
    """A ``SafeTLSConfig`` as Prometheus' ``tls_config`` with files read from the Secrets.

    Raises:
        ValueError: a field not translated, a ``configMap`` CA, or no ``secret_file``.
    """
    if unknown := set(tls) - _HANDLED_TLS:
        raise ValueError(f"tlsConfig fields not translated: {sorted(unknown)}")
    if secret_file is None and {"ca", "cert", "keySecret"} & set(tls):
        raise ValueError("tlsConfig references Secrets: pass secret_file")
    out: dict[str, Any] = {}
    for field, option in (("ca", "ca_file"), ("cert", "cert_file")):
        if field in tls:
            assert secret_file is not None
            out[option] = secret_file(*_secret_key(tls[field], field))
    if "keySecret" in tls:
        assert secret_file is not None
        out["key_file"] = secret_file(tls["keySecret"]["name"], tls["keySecret"]["key"])
    if "serverName" in tls:
        out["server_name"] = tls["serverName"]
    if "insecureSkipVerify" in tls:
        out["insecure_skip_verify"] = tls["insecureSkipVerify"]
    return out


def scrape_configs(
    monitor: Mapping[str, Any],
    sd: Mapping[str, Any],
    *,
    interval: str | None = None,
    secret_file: SecretFile | None = None,
) -> list[dict[str, Any]]:
    """One scrape job per endpoint of the live ServiceMonitor ``monitor``.

    Args:
        monitor: the ServiceMonitor as the apiserver returns it (``metadata.namespace`` set).
        sd: the connection part of a ``kubernetes_sd_configs`` entry (``api_server``,
            ``tls_config``, ``authorization``); role and namespaces are added here.
        interval: overrides every endpoint's ``interval`` (tests scrape every second).
        secret_file: where the Secrets a ``tlsConfig`` references are read from.

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
                *relabelings(endpoint.get("relabelings", [])),
            ],
            **({"tls_config": tls_config(endpoint["tlsConfig"], secret_file)}
               if "tlsConfig" in endpoint else {}),
        })  # fmt: skip
    return jobs
