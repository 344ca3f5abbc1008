"""The operator issues and renews a Broker's TLS certificates on the real apiserver; loopback
servers serve them and pick up a renewal without a restart.

The Broker's pods are kwok's (nothing runs in them), so a name server and a broker on 127.0.0.1
stand in for them: they read ``[tls]`` (enforcing, client certificates required) from files the
test copies out of the operator's Secrets the way the kubelet updates a Secret volume (a new
timestamped directory, then an atomic ``..data`` symlink swap), and the operator reaches them
through the override seam. A Topic on the Broker proves the operator's own admin calls dial TLS
with the Broker's bundle and present its client certificate. A second Broker with
``spec.tls.issuerRef`` gets cert-manager ``Certificate`` objects, validated by cert-manager's
real CRDs (cert-manager itself is not run here: nothing fills their Secrets).

Own cluster: the loopback servers must serve the operator's certificates; no other module's
cluster does.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import pathlib
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import kubernetes  # type: ignore[import-untyped]
import pytest

from ariane import dev
from ariane.operator import settings as operator_settings
from e2e import operator_support
from e2e.testenv import cluster, processes

pytestmark = pytest.mark.k8s

WAIT_S = 60.0
RESYNC_S = 1
LIFETIME_S = 30
"""Leaf lifetime asked for by annotation: renewed about 19 s after it was issued."""

SMALL_STORE_TOML = """
[store]
commit_log_file_size_bytes = 1048576
consume_queue_file_entries = 1000

[index]
hash_slot_count = 1000
index_count_max = 4000
"""

TLS_TOML = """
[tls]
server_mode = "enforcing"
cert_path = "{d}/tls.crt"
key_path = "{d}/tls.key"
trust_cert_path = "{d}/ca.crt"
need_client_auth = "require"
reload_check_interval_ms = 200
"""


def _custom(k8s: cluster.Cluster) -> Any:
    return kubernetes.client.CustomObjectsApi(k8s.api_client)


def _apply(k8s: cluster.Cluster, namespace: str, body: dict[str, Any]) -> None:
    k8s.kubectl("apply", "-n", namespace, "-f", "-", input_text=json.dumps(body))


def _secret(k8s: cluster.Cluster, namespace: str, name: str) -> dict[str, bytes]:
    core = kubernetes.client.CoreV1Api(k8s.api_client)
    try:
        found = core.read_namespaced_secret(name, namespace)
    except kubernetes.client.ApiException as error:
        if error.status == 404:
            return {}
        raise
    return {k: base64.b64decode(v) for k, v in (found.data or {}).items()}


def _condition(k8s: cluster.Cluster, namespace: str, plural: str, name: str, kind: str) -> str:
    body = _custom(k8s).get_namespaced_custom_object(
        "ariane.dev", "v1alpha1", namespace, plural, name
    )
    for cond in body.get("status", {}).get("conditions", []):
        if cond["type"] == kind:
            return f"{cond['status']}/{cond.get('reason', '')}"
    return ""


def kubelet_sync(data: dict[str, bytes], directory: pathlib.Path) -> None:
    """Write ``data`` as the kubelet's atomic writer updates a Secret volume: the files in a
    new ``..<time>`` directory, ``..data`` swapped to it by one rename, and each key a
    symlink through ``..data``."""
    directory.mkdir(parents=True, exist_ok=True)
    fresh = directory / f"..{time.monotonic_ns()}"
    fresh.mkdir()
    for key, value in data.items():
        (fresh / key).write_bytes(value)
    link = directory / "..data_tmp"
    link.symlink_to(fresh.name)
    os.replace(link, directory / "..data")
    for key in data:
        if not (directory / key).is_symlink():
            (directory / key).symlink_to(f"..data/{key}")


def _ariane(args: list[str], log: pathlib.Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "ariane", *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )


@contextlib.contextmanager
def loopback_servers(
    tmp: pathlib.Path, namesrv: str, broker: str, tls_dirs: tuple[pathlib.Path, pathlib.Path]
) -> Iterator[list[subprocess.Popen[bytes]]]:
    """A name server and a broker (group ``demo-a``) on 127.0.0.1 serving TLS from
    ``tls_dirs`` (name server's, broker's); stopped by PID."""
    (tmp / "namesrv.toml").write_text(TLS_TOML.format(d=tls_dirs[0]))
    (tmp / "broker.toml").write_text(SMALL_STORE_TOML + TLS_TOML.format(d=tls_dirs[1]))
    children = [
        _ariane(
            ["namesrv", "--listen", namesrv, "--config", str(tmp / "namesrv.toml")],
            tmp / "namesrv.log",
        )
    ]
    try:
        dev.wait_until_listening(
            "127.0.0.1", int(namesrv.rsplit(":")[1]), process=children[0], timeout_s=30.0
        )
        args = ["broker", "--config", str(tmp / "broker.toml"), "--store-dir", str(tmp / "store")]
        args += ["--namesrv", namesrv, "--listen", broker, "--broker-name", "demo-a"]
        children.append(_ariane(args, tmp / "broker.log"))
        dev.wait_until_listening(
            "127.0.0.1", int(broker.rsplit(":")[1]), process=children[1], timeout_s=30.0
        )
        yield children
    finally:
        for child in reversed(children):
            dev.stop_process(child)


def served_certificate(address: str, client_dir: pathlib.Path) -> bytes:
    """The DER certificate a new TLS connection to ``address`` is served, verified against
    the bundle in ``client_dir`` (and presenting its client certificate)."""
    context = ssl.create_default_context(cafile=str(client_dir / "ca.crt"))
    context.load_cert_chain(client_dir / "tls.crt", client_dir / "tls.key")
    host, port = address.rsplit(":", 1)
    with (
        socket.create_connection((host, int(port)), timeout=5.0) as raw,
        context.wrap_socket(raw, server_hostname=host) as tls,
    ):
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return der


def _der(pem: bytes) -> bytes:
    return ssl.PEM_cert_to_DER_cert(pem.decode())


@pytest.fixture
def addresses() -> tuple[str, str]:
    """Free loopback addresses for the name server and the broker (known before they run)."""
    return f"127.0.0.1:{dev.free_port()}", f"127.0.0.1:{dev.free_port()}"


@pytest.fixture
def operator(
    k8s: cluster.Cluster, namespace: str, addresses: tuple[str, str], tmp_path: pathlib.Path
) -> Iterator[operator_support.Running]:
    """The operator watching ``namespace``, reaching the loopback name server (once it runs);
    cert-manager's CRDs are installed first."""
    operator_support.apply_crd_files(k8s, operator_support.cert_manager_crd_files())
    env = {operator_settings.NAMESRV_OVERRIDES_ENV: json.dumps({"*": addresses[0]})}
    with operator_support.run_operator(
        k8s, tmp_path / "operator.log", namespace, env=env, resync_s=RESYNC_S
    ) as running:
        yield running


def _broker(name: str, tls: dict[str, Any], annotations: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "ariane.dev/v1alpha1",
        "kind": "Broker",
        "metadata": {"name": name, "annotations": annotations},
        "spec": {"groups": 1, "storage": {"size": "1Gi"}, "tls": tls},
    }


def test_operator_certificates_are_served_and_renewed_without_a_restart(
    k8s: cluster.Cluster,
    namespace: str,
    addresses: tuple[str, str],
    operator: operator_support.Running,
    tmp_path: pathlib.Path,
) -> None:
    """A Broker with TLS enforcing (client certificates required) gets its CA and certificate
    Secrets; servers reading them serve the issued certificate and the operator's TLS admin
    call creates a Topic; a renewal reaches new connections while the same processes run; an
    issuerRef Broker gets cert-manager Certificates."""
    namesrv, broker = addresses
    annotations = {"ariane.dev/tls-certificate-lifetime-seconds": str(LIFETIME_S)}
    _apply(k8s, namespace, _broker("demo", {"clientAuth": "require"}, annotations))
    corp = {"issuerRef": {"name": "corp", "kind": "ClusterIssuer"}}
    _apply(k8s, namespace, _broker("corp", corp, {}))
    names = ("demo-namesrv-tls", "demo-broker-tls", "demo-operator-tls", "demo-cluster-ca")
    processes.wait_until(
        lambda: all(_secret(k8s, namespace, n) for n in names),
        timeout_s=WAIT_S,
        what="the cluster CA and the three certificate Secrets",
    )
    dirs = {n: tmp_path / n for n in names[:3]}
    issued = {n: _secret(k8s, namespace, n) for n in names[:3]}
    for name, data in issued.items():
        kubelet_sync(data, dirs[name])
    with loopback_servers(
        tmp_path, namesrv, broker, (dirs["demo-namesrv-tls"], dirs["demo-broker-tls"])
    ) as children:
        client_dir = dirs["demo-operator-tls"]
        first = served_certificate(broker, client_dir)
        _apply(k8s, namespace, {
            "apiVersion": "ariane.dev/v1alpha1", "kind": "Topic",
            "metadata": {"name": "orders"}, "spec": {"broker": "demo", "queues": 1},
        })  # fmt: skip
        processes.wait_until(
            lambda: _condition(k8s, namespace, "topics", "orders", "Ready").startswith("True"),
            timeout_s=WAIT_S,
            what="Topic orders Ready (the operator's admin calls over mTLS)",
        )
        processes.wait_until(
            lambda: (
                _secret(k8s, namespace, "demo-broker-tls")["tls.crt"]
                != issued["demo-broker-tls"]["tls.crt"]
            ),
            timeout_s=WAIT_S,
            what="the broker certificate renewed by the operator",
        )
        for name in names[:3]:  # the kubelet refreshes every mounted Secret
            kubelet_sync(_secret(k8s, namespace, name), dirs[name])
        renewed = {k: (dirs["demo-broker-tls"] / k).read_bytes() for k in ("tls.crt", "ca.crt")}
        processes.wait_until(
            lambda: served_certificate(broker, client_dir) == _der(renewed["tls.crt"]),
            timeout_s=WAIT_S,
            what="the renewed certificate served to a new connection",
        )
        still_running = [child.poll() for child in children]
    certificates = _custom(k8s).list_namespaced_custom_object(
        "cert-manager.io", "v1", namespace, "certificates"
    )["items"]
    status = _custom(k8s).get_namespaced_custom_object(
        "ariane.dev", "v1alpha1", namespace, "brokers", "demo"
    )["status"]

    assert first == _der(issued["demo-broker-tls"]["tls.crt"])
    assert still_running == [None, None]
    assert renewed["ca.crt"] == issued["demo-broker-tls"]["ca.crt"]  # same CA, no rollover
    assert status["tls"]["issuer"] == "ClusterCA" and status["tls"]["caPhase"] == "Stable"
    assert {c["secretName"] for c in status["tls"]["certificates"]} == set(names[:3])
    assert _condition(k8s, namespace, "brokers", "demo", "CertificatesReady") == "True/Issued"
    by_secret = {c["spec"]["secretName"]: c for c in certificates}
    assert set(by_secret) == {"corp-namesrv-tls", "corp-broker-tls", "corp-operator-tls"}
    spec = by_secret["corp-broker-tls"]["spec"]
    assert spec["issuerRef"] == {
        "name": "corp",
        "kind": "ClusterIssuer",
        "group": "cert-manager.io",
    }
    assert f"*.corp-a.{namespace}.svc" in spec["dnsNames"] and "127.0.0.1" in spec["ipAddresses"]
    assert _condition(k8s, namespace, "brokers", "corp", "CertificatesReady") == (
        "False/WaitingForCertManager"
    )
