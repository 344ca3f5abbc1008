"""TLS on the broker's gRPC port and in Ariane's own clients, with real processes: the official
Python client 5.1.2 (``tls_enable=True``, verifying against our CA through
``GRPC_DEFAULT_SSL_ROOTS_FILE_PATH``) sends and receives through an ``enforcing`` broker with a
front-end worker; a plaintext client is refused there; a ``permissive`` broker (in process)
serves both; a certificate rotated on disk reaches new connections while an open producer
keeps sending; ``ariane admin --tls --ca-file`` works and fails clearly without ``--tls``.

The name server process gets ``[tls] enforcing`` too: clients reach it over TLS, and its forwards
to brokers dial TLS.

Own cluster: enforcing and permissive ``[tls]`` processes and a certificate rotated on disk are
the subject.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import pathlib
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from typing import Any

import grpc
import pytest

import ha_testing
import tls_testing
from ariane import client, dev
from ariane.common import tls
from ariane.grpcwire import channel_pool, pb, ports, rpc
from ariane.security import ca

pytestmark = pytest.mark.slow

HERE = pathlib.Path(__file__).resolve().parent
DRIVER = HERE / "conformance" / "official_py_driver.py"
ROTATION_DEADLINE_S = 60.0
"""The issue's bound: a rotated certificate reaches new connections within a minute."""


def _speaks_tls(endpoint: str, ca_path: pathlib.Path) -> bool:
    """Whether ``endpoint`` completes a TLS handshake (the name server once it serves TLS)."""
    host, port = endpoint.rsplit(":", 1)
    context = tls.client_context(str(ca_path))
    with (
        contextlib.suppress(OSError),
        socket.create_connection((host, int(port)), 5) as raw,
        context.wrap_socket(raw, server_hostname=host),
    ):
        return True
    return False


class TlsCluster:
    """A name server, an enforcing broker (one front-end worker) and a permissive one."""

    def __init__(
        self,
        tmp: pathlib.Path,
        files: ca.LocalTlsFiles,
        namesrv: str,
        processes: list[subprocess.Popen[bytes]],
    ) -> None:
        self.tmp = tmp
        self.files = files
        self.namesrv = namesrv
        self.processes = processes
        self.enforcing = self._broker("tls-a", "enforcing", workers=1)
        # a permissive broker dials plaintext (tls-common.md), so the enforcing name server
        # refuses its registration; the tests call it directly
        self.permissive = self._broker("tls-b", "permissive", workers=0)

    def _broker(self, name: str, mode: str, *, workers: int) -> str:
        port = dev.free_port()
        tls_table = tls_testing.tls_toml(self.files, mode, reload_ms=200)
        config = ha_testing.small_store_config(self.tmp, name, tls_table)
        args = ["broker", *config, "--listen", f"127.0.0.1:{port}", "--broker-name", name]
        args += ["--store-dir", str(self.tmp / name), "--namesrv", self.namesrv]
        args += ["--workers", str(workers)]
        process = ha_testing.spawn(args, self.tmp / f"{name}.log")
        self.processes.append(process)
        dev.wait_until_listening("127.0.0.1", port, process=process, timeout_s=60)
        if mode == "enforcing":
            dev.wait_until_registered(
                self.namesrv, name, process=process, timeout_s=60, ca_path=self.files.ca_path
            )
        return f"127.0.0.1:{port}"

    def client_tls(self) -> client.ClientTls:
        return client.ClientTls(ca_file=str(self.files.ca_path))

    def driver(self, *args: str) -> subprocess.Popen[str]:
        """The official client's driver with ``tls_enable=True``, trusting our CA."""
        env = dict(os.environ)
        env["RMQ_DRIVER_TLS"] = "1"
        env["GRPC_DEFAULT_SSL_ROOTS_FILE_PATH"] = str(self.files.ca_path)
        return subprocess.Popen(
            [sys.executable, str(DRIVER), *args, "--endpoints", self.namesrv],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )

    def admin(self, *args: str) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("ARIANE_")}
        return subprocess.run(
            [sys.executable, "-m", "ariane", "admin", "--endpoints", self.namesrv, *args],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            env=env,
        )

    def create_topic(self, topic: str) -> None:
        done = self.admin("--tls", "--ca-file", str(self.files.ca_path), "topic", "create",
                          topic, "--queues", "2")  # fmt: skip
        assert done.returncode == 0, done.stderr


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsCluster]:
    """One TLS cluster for the module; every process stopped by PID after."""
    tmp = tmp_path_factory.mktemp("tlsgrpc")
    files = ca.write_local(tmp / "tls")
    config = tmp / "namesrv.toml"
    config.write_text(tls_testing.tls_toml(files, "enforcing", reload_ms=200))
    extra = ("--config", str(config))
    with ha_testing.running_namesrv_process(tmp, extra) as (namesrv, _):
        assert _speaks_tls(namesrv, files.ca_path), "the enforcing name server answers TLS"
        processes: list[subprocess.Popen[bytes]] = []
        try:
            yield TlsCluster(tmp, files, namesrv, processes)
        finally:
            for process in processes:
                dev.stop_process(process)


def _served_fingerprint(endpoint: str, ca_path: pathlib.Path) -> str:
    """SHA-256 of the leaf certificate a new TLS connection (ALPN h2) to ``endpoint`` gets."""
    host, port = endpoint.rsplit(":", 1)
    context = tls.client_context(str(ca_path))
    context.set_alpn_protocols(["h2"])
    with (
        socket.create_connection((host, int(port)), 10) as raw,
        context.wrap_socket(raw, server_hostname=host) as wrapped,
    ):
        der = wrapped.getpeercert(binary_form=True)
    assert der is not None
    return hashlib.sha256(der).hexdigest()


def _pem_fingerprint(pem: bytes) -> str:
    return hashlib.sha256(ssl.PEM_cert_to_DER_cert(pem.decode())).hexdigest()


async def _stats(
    endpoint: str, credentials: grpc.ChannelCredentials | None
) -> pb.admin.GetBrokerRuntimeStatsResponse:
    pool = channel_pool.ChannelPool(channels_max=1, credentials=credentials)
    try:
        channel = await pool.get(endpoint)
        request = pb.admin.GetBrokerRuntimeStatsRequest()
        return await rpc.unary_call(
            channel, pb.ADMIN_SERVICE, "GetBrokerRuntimeStats", request,
            pb.admin.GetBrokerRuntimeStatsResponse, timeout_s=5.0,
        )  # fmt: skip
    finally:
        await pool.close()


def _events(out: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def test_official_client_sends_and_receives_over_tls(cluster: TlsCluster) -> None:
    """The official Python client with ``tls_enable=True`` sends 20 messages through the
    enforcing broker (front-end worker) and a SimpleConsumer receives all 20."""
    cluster.create_topic("tls-orders")
    with cluster.driver("produce", "--topic", "tls-orders", "--count", "20") as producer:
        out, err = producer.communicate(timeout=120)
    assert producer.returncode == 0, err[-3000:]
    sent = {e["message_id"] for e in _events(out) if e["event"] == "sent"}
    assert len(sent) == 20
    args = ("--group", "tls-readers", "--topic", "tls-orders", "--count", "20")
    with cluster.driver("simple-consume", *args, "--deadline-s", "60") as consumer:
        out, err = consumer.communicate(timeout=120)
    assert consumer.returncode == 0, err[-3000:]
    got = {e["message_id"] for e in _events(out) if e["event"] == "acked"}
    assert got == sent


def test_plaintext_client_against_enforcing_is_refused(cluster: TlsCluster) -> None:
    """A plaintext gRPC call to the enforcing port fails UNAVAILABLE; the same call over TLS
    (verified against the CA) is answered."""
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        asyncio.run(_stats(cluster.enforcing, None))
    assert refused.value.code() is grpc.StatusCode.UNAVAILABLE
    answered = asyncio.run(_stats(cluster.enforcing, cluster.client_tls().credentials()))
    assert answered.broker_name == "tls-a"


def test_permissive_serves_tls_and_plaintext(cluster: TlsCluster) -> None:
    """The permissive broker (in process, behind the first-byte splice) answers a plaintext
    call and a TLS call on the same port, and serves our certificate to the TLS one."""
    plain = asyncio.run(_stats(cluster.permissive, None))
    secure = asyncio.run(_stats(cluster.permissive, cluster.client_tls().credentials()))
    assert plain.broker_name == secure.broker_name == "tls-b"
    served = _served_fingerprint(cluster.permissive, cluster.files.ca_path)
    assert served == _pem_fingerprint(cluster.files.cert_path.read_bytes())


def test_permissive_splices_to_abstract_sockets_that_leave_no_file(cluster: TlsCluster) -> None:
    """The permissive broker's two inner gRPC sockets are Linux abstract ones (listed in
    /proc/net/unix under its pid, no path), so a SIGKILL leaves nothing in the temp directory
    (the private directory they used to live in stayed behind)."""
    pid = cluster.processes[-1].pid  # the permissive broker, started last
    prefix = f"@{ports.SOCKET_NAME_PREFIX}{pid}-"
    names = {
        line.split()[-1]
        for line in pathlib.Path("/proc/net/unix").read_text().splitlines()[1:]
        if line.split()[-1].startswith(prefix)
    }
    assert sorted(name.rsplit("-", 1)[1] for name in names) == ["plain", "tls"], names
    leftovers = [p.name for p in pathlib.Path(tempfile.gettempdir()).glob(f"ariane-grpc-*{pid}*")]
    assert leftovers == []


def test_ariane_clients_and_admin_over_tls(cluster: TlsCluster) -> None:
    """Ariane's Producer and SimpleConsumer with ``ClientTls`` round-trip a message, ``ariane
    admin --tls --ca-file`` lists topics, and without ``--tls`` it fails naming the fix."""
    cluster.create_topic("tls-own")

    async def round_trip() -> bool:
        connection = client.ConnectionSettings(tls=cluster.client_tls())
        settings = client.ProducerSettings(connection=connection)
        async with client.Producer(cluster.namesrv, settings=settings) as sender:
            receipt = await sender.send("tls-own", b"over tls")
        consuming = client.ConsumerSettings(connection=connection)
        async with client.SimpleConsumer(
            cluster.namesrv, "tls-own-readers", "tls-own", settings=consuming
        ) as receiver:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                got = await receiver.receive(max_messages=8, invisible_duration_s=30.0)
                await receiver.ack(got)
                if any(m.message_id == receipt.message_id for m in got):
                    return True
        return False

    assert asyncio.run(round_trip())
    listed = cluster.admin("--tls", "--ca-file", str(cluster.files.ca_path), "topic", "list")
    assert listed.returncode == 0 and "tls-own" in listed.stdout, listed.stderr
    plain = cluster.admin("--timeout", "3", "topic", "list")
    assert plain.returncode != 0
    assert "--tls --ca-file" in plain.stderr, plain.stderr


def test_rotated_certificate_reaches_new_connections_while_producing(cluster: TlsCluster) -> None:
    """New certificate files written over the enforcing broker's are served to new
    connections within 60 s, while an official producer opened before keeps sending: all of
    its messages are acknowledged, some after the rotation was seen."""
    cluster.create_topic("tls-rotate")
    old = _pem_fingerprint(cluster.files.cert_path.read_bytes())
    assert _served_fingerprint(cluster.enforcing, cluster.files.ca_path) == old
    count = 150
    producer = cluster.driver("produce", "--topic", "tls-rotate", "--count", str(count),
                              "--interval-s", "0.05")  # fmt: skip
    lines: list[str] = []
    with producer:
        assert producer.stdout is not None and producer.stderr is not None
        out = producer.stdout
        reader = threading.Thread(target=lambda: lines.extend(iter(out.readline, "")))
        reader.start()
        try:
            ha_testing.poll(lambda: len(lines) >= 5, "the producer to send before the rotation")
            new = _rotate(cluster.files)
            deadline = time.monotonic() + ROTATION_DEADLINE_S
            while _served_fingerprint(cluster.enforcing, cluster.files.ca_path) != new:
                assert time.monotonic() < deadline, "the rotated certificate was not served in 60 s"
                time.sleep(0.2)
            sent_at_rotation = len(lines)
            assert producer.wait(timeout=120) == 0, producer.stderr.read()[-3000:]
        finally:
            if producer.poll() is None:
                producer.kill()
                producer.wait()
            reader.join(30)
    sent = [e for e in _events("".join(lines)) if e["event"] == "sent"]
    assert len(sent) == count
    assert sent_at_rotation < count, "the producer had finished before the rotation was served"


def _rotate(files: ca.LocalTlsFiles) -> str:
    """Write a new server certificate (same CA, same SANs) over ``files``; its fingerprint."""
    authority = ca.CertificateAuthority(
        files.ca_path.read_bytes(), (files.ca_path.parent / "ca-key.pem").read_bytes()
    )
    issued = authority.issue("ariane-rotated", dns_names=["localhost"],
                             ip_addresses=["127.0.0.1"], server=True, client=True)  # fmt: skip
    issued.write(files.cert_path, files.key_path)
    return _pem_fingerprint(issued.cert_pem)
