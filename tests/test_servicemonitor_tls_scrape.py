"""A real Prometheus, configured from the operator's ServiceMonitor (``e2e/servicemonitor.py``),
scrapes TLS-enforcing (client certificates required) name-server and broker processes on
127.0.0.1 serving the certificates the operator's ``certs`` code issues: the ServiceMonitor of a
TLS Broker scrapes them (``up == 1``), the plain one (what the operator rendered before: no
``scheme``/``tlsConfig``) does not (``up == 0``).

Discovery: Debian's Prometheus has no ``kubernetes_sd_configs``, so each translated job's
discovery is replaced by ``static_configs`` carrying the ``__meta_kubernetes_*`` labels Kubernetes
discovery would give the two endpoints (taken from the operator's rendered Services); every
relabel rule of the translation runs unchanged on them.

Own cluster: the processes serve certificates issued here, with the operator's names.
"""

from __future__ import annotations

import contextlib
import datetime
import pathlib
import time
from collections.abc import Iterator
from typing import Any

import pytest
from e2e import servicemonitor
from e2e.testenv import processes

import prometheus_testing
from ariane import dev
from ariane.operator import certs, model, resources
from ariane.security import ca as ca_lib

OWNER = model.Owner(name="demo", namespace="ns1", uid="u")
TLS_SPEC: resources.BrokerSpec = {
    "groups": 1,
    "tls": {"mode": "enforcing", "clientAuth": "require"},
    "metrics": {"serviceMonitor": True},
}
PLAIN_SPEC: resources.BrokerSpec = {"groups": 1, "metrics": {"serviceMonitor": True}}
START_TIMEOUT_S = 60.0
SCRAPED_TIMEOUT_S = 30.0
"""Longest wait for Prometheus to have scraped both targets (every second)."""

TLS_TOML = """
[tls]
server_mode = "enforcing"
cert_path = "{d}/tls.crt"
key_path = "{d}/tls.key"
trust_cert_path = "{d}/ca.crt"
need_client_auth = "require"
"""
SMALL_STORE_TOML = """
[store]
commit_log_file_size_bytes = 1048576
consume_queue_file_entries = 1000

[index]
hash_slot_count = 1000
index_count_max = 4000
"""


def _write_secrets(root: pathlib.Path) -> None:
    """The operator's leaf Secrets (cluster CA mode) as ``root/<secret>/<key>`` files."""
    now = datetime.datetime.now(datetime.UTC)
    times = certs.lifetimes(TLS_SPEC, None)

    def make_ca(at: datetime.datetime, life: datetime.timedelta) -> ca_lib.CertificateAuthority:
        return ca_lib.CertificateAuthority.create("test cluster CA", lifetime=life, now=at)

    state, _ = certs.ca_step(None, now, times, make_ca, old_leaves=False)
    groups = model.group_names(OWNER.name, 1)
    for leaf in certs.leaves(OWNER, groups):
        issued = certs.issue(state, leaf, now, times.leaf)
        directory = root / leaf.secret_name
        directory.mkdir(parents=True)
        (directory / model.TLS_CERT_FILE).write_bytes(issued.cert_pem)
        (directory / model.TLS_KEY_FILE).write_bytes(issued.key_pem)
        (directory / model.TLS_CA_FILE).write_bytes(state.bundle())


@contextlib.contextmanager
def _servers(tmp: pathlib.Path, secrets: pathlib.Path) -> Iterator[dict[str, str]]:
    """Name server and broker (group ``demo-a``) on 127.0.0.1, TLS enforcing from the operator's
    Secrets; yields Service name → metrics address; stopped by PID."""
    ns_port, ns_metrics, br_port, br_metrics = (dev.free_port() for _ in range(4))
    ns_dir = secrets / model.namesrv_tls_secret_name(OWNER.name)
    br_dir = secrets / model.broker_tls_secret_name(OWNER.name)
    (tmp / "namesrv.toml").write_text(TLS_TOML.format(d=ns_dir))
    (tmp / "broker.toml").write_text(SMALL_STORE_TOML + TLS_TOML.format(d=br_dir))
    namesrv = f"127.0.0.1:{ns_port}"
    children = [processes.spawn_ariane(
        ["namesrv", "--listen", namesrv, "--config", str(tmp / "namesrv.toml"),
         "--metrics-listen", f"127.0.0.1:{ns_metrics}"], tmp / "namesrv.log",
    )]  # fmt: skip
    try:
        dev.wait_until_listening(
            "127.0.0.1", ns_metrics, process=children[0], timeout_s=START_TIMEOUT_S
        )
        children.append(processes.spawn_ariane(
            ["broker", "--config", str(tmp / "broker.toml"), "--store-dir", str(tmp / "store"),
             "--namesrv", namesrv, "--listen", f"127.0.0.1:{br_port}",
             "--broker-name", "demo-a", "--workers", "0",
             "--metrics-listen", f"127.0.0.1:{br_metrics}"], tmp / "broker.log",
        ))  # fmt: skip
        dev.wait_until_listening(
            "127.0.0.1", br_metrics, process=children[1], timeout_s=START_TIMEOUT_S
        )
        yield {
            model.namesrv_name(OWNER.name): f"127.0.0.1:{ns_metrics}",
            "demo-a": f"127.0.0.1:{br_metrics}",
        }
    finally:
        for child in reversed(children):
            assert dev.stop_process(child) == 0, f"exit status of {child.args!r}"


@pytest.fixture(scope="module")
def served(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[pathlib.Path, dict[str, str]]]:
    """The operator's Secrets on disk and the running servers' metrics addresses."""
    tmp = tmp_path_factory.mktemp("smtls")
    _write_secrets(tmp / "secrets")
    with _servers(tmp, tmp / "secrets") as addresses:
        yield tmp / "secrets", addresses


def _discovered(addresses: dict[str, str], spec: resources.BrokerSpec) -> list[dict[str, Any]]:
    """``static_configs`` with the meta labels endpointslice discovery gives each Service's
    ``metrics`` endpoint (the Services' labels as the operator renders them)."""
    services = [model.namesrv_service(OWNER, spec), model.group_service(OWNER, "demo-a", spec)]
    groups = []
    for service in services:
        name = service["metadata"]["name"]
        meta = "__meta_kubernetes_"
        labels = {
            f"{meta}namespace": OWNER.namespace,
            f"{meta}service_name": name,
            f"{meta}pod_name": f"{name}-pod",
            f"{meta}pod_container_name": "ariane",
            f"{meta}endpointslice_port_name": "metrics",
        }
        for key, value in service["metadata"]["labels"].items():
            labels[f"{meta}service_label_{servicemonitor.label_name(key)}"] = value
            labels[f"{meta}service_labelpresent_{servicemonitor.label_name(key)}"] = "true"
        groups.append({"targets": [addresses[name]], "labels": labels})
    return groups


def _jobs(
    spec: resources.BrokerSpec, secrets: pathlib.Path, addresses: dict[str, str]
) -> list[dict[str, Any]]:
    """The rendered ServiceMonitor(s) of ``spec`` as scrape jobs discovering the servers."""
    jobs = []
    for monitor in [o for o in model.desired_objects(OWNER, spec) if o["kind"] == "ServiceMonitor"]:
        live = {**monitor, "metadata": {**monitor["metadata"], "namespace": OWNER.namespace}}
        translated = servicemonitor.scrape_configs(
            live, {}, interval="1s", secret_file=lambda name, key: str(secrets / name / key)
        )
        for job in translated:
            del job["kubernetes_sd_configs"]
            jobs.append({**job, "static_configs": _discovered(addresses, spec)})
    return jobs


def _up(url: str) -> dict[str, float]:
    """Service → ``up`` of its last scrape."""
    result = prometheus_testing.api(url, "query", query="up")["result"]
    return {r["metric"]["service"]: float(r["value"][1]) for r in result}


def _scraped(url: str, services: set[str]) -> dict[str, float]:
    """Polls until every service in ``services`` has been scraped; its ``up`` values."""
    deadline = time.monotonic() + SCRAPED_TIMEOUT_S
    while set(up := _up(url)) != services or (0.0 in up.values() and time.monotonic() < deadline):
        assert time.monotonic() < deadline, f"scraped so far: {up}"
        time.sleep(0.2)
    return up


def test_the_tls_servicemonitor_scrapes_enforcing_servers(
    served: tuple[pathlib.Path, dict[str, str]], tmp_path: pathlib.Path
) -> None:
    """With ``tls.mode: enforcing`` and ``clientAuth: require``, Prometheus configured from the
    operator's ServiceMonitor scrapes both the name server and the broker over HTTPS, verifying
    each against the bundle of its Secret and a name its certificate carries: ``up == 1``."""
    secrets, addresses = served
    jobs = _jobs(TLS_SPEC, secrets, addresses)
    assert {job["scheme"] for job in jobs} == {"https"}
    with prometheus_testing.prometheus(tmp_path, [], [], scrape_configs=jobs) as url:
        up = _scraped(url, set(addresses))
    log = (tmp_path / "prometheus.log").read_text()
    assert up == {service: 1.0 for service in addresses}, f"up: {up}; log: {log[-1500:]}"


def test_the_plain_servicemonitor_cannot_scrape_enforcing_servers(
    served: tuple[pathlib.Path, dict[str, str]], tmp_path: pathlib.Path
) -> None:
    """The ServiceMonitor of a plaintext Broker (no ``scheme``/``tlsConfig``: what the operator
    rendered for every Broker before) scrapes HTTP: against the same servers every target is
    down, which is why a TLS Broker needs its own."""
    secrets, addresses = served
    jobs = _jobs(PLAIN_SPEC, secrets, addresses)
    assert {job["scheme"] for job in jobs} == {"http"}
    with prometheus_testing.prometheus(tmp_path, [], [], scrape_configs=jobs) as url:
        deadline = time.monotonic() + SCRAPED_TIMEOUT_S
        while set(up := _up(url)) != set(addresses):
            assert time.monotonic() < deadline, f"scraped so far: {up}"
            time.sleep(0.2)
    assert up == {service: 0.0 for service in addresses}
