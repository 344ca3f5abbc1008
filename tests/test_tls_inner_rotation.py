"""A server process's inner TLS connections follow its certificate files: a broker whose
certificate is rotated on disk presents the new one on its next connections to the name server,
with no restart (``grpcwire.tls.InnerCredentials`` + ``channel_pool.ChannelPool`` retiring its
channels); before, its channels kept the certificate read at start until the process restarted.

Own cluster: the name server requires client certificates, is restarted on its port with a new
trust bundle, and the broker's certificate files are replaced under it — no shared cluster can
be put through that.
"""

from __future__ import annotations

import asyncio
import contextlib
import pathlib
import subprocess
from collections.abc import Iterator

import grpc
import pytest
from e2e.testenv import processes

import ha_testing
from ariane import dev
from ariane.common import tls
from ariane.grpcwire import channel_pool, registry_client
from ariane.grpcwire import tls as grpc_tls
from ariane.security import ca

REGISTER_TIMEOUT_S = 60.0
"""Longest wait for the broker to be registered with the (restarted) name server, s."""


def _issue(authority: ca.CertificateAuthority, name: str, directory: pathlib.Path) -> None:
    issued = authority.issue(
        name, dns_names=["localhost"], ip_addresses=["127.0.0.1"], server=True, client=True
    )
    issued.write(directory / f"{name}.pem", directory / f"{name}.key")


def _tls_table(directory: pathlib.Path, name: str, trust: pathlib.Path) -> str:
    return (
        "[tls]\n"
        'server_mode = "enforcing"\n'
        f'cert_path = "{directory / f"{name}.pem"}"\n'
        f'key_path = "{directory / f"{name}.key"}"\n'
        f'trust_cert_path = "{trust}"\n'
        'need_client_auth = "require"\n'
        "reload_check_interval_ms = 200\n"
    )


def _registered(namesrv: str, broker_name: str, client: grpc_tls.ClientTls) -> bool:
    async def ask() -> bool:
        async with grpc.aio.secure_channel(namesrv, client.credentials()) as channel:
            info = await registry_client.RegistryClient(channel, timeout_s=2.0).get_cluster_info()
        return any(g.broker_name == broker_name and g.members for g in info.broker_groups)

    with contextlib.suppress(grpc.RpcError):
        return asyncio.run(ask())
    return False


@contextlib.contextmanager
def _namesrv(tmp: pathlib.Path, port: int, config: pathlib.Path) -> Iterator[None]:
    proc = processes.spawn_ariane(
        ["namesrv", "--listen", f"127.0.0.1:{port}", "--config", str(config)],
        tmp / "namesrv.log",
    )
    try:
        dev.wait_until_listening("127.0.0.1", port, process=proc, timeout_s=60)
        yield
    finally:
        dev.stop_process(proc)


def test_a_rotated_broker_certificate_reaches_the_name_server_without_a_restart(
    tmp_path: pathlib.Path,
) -> None:
    """The broker's certificate moves from CA 1 to CA 2 on disk; the name server (mTLS
    ``require``) is restarted trusting CA 2 only: the broker registers again with it, so its
    new connection presented the new certificate."""
    ca1, ca2 = ca.CertificateAuthority.create("CA 1"), ca.CertificateAuthority.create("CA 2")
    both = tmp_path / "both.pem"
    both.write_bytes(ca1.cert_pem + ca2.cert_pem)
    ns_trust = tmp_path / "namesrv-trust.pem"
    ns_trust.write_bytes(ca1.cert_pem)
    for name in ("namesrv", "broker", "client1"):
        _issue(ca1, name, tmp_path)
    _issue(ca2, "client2", tmp_path)
    ns_config = tmp_path / "namesrv.toml"
    ns_config.write_text(_tls_table(tmp_path, "namesrv", ns_trust))
    port = dev.free_port()
    namesrv = f"127.0.0.1:{port}"
    client1, client2 = (
        grpc_tls.ClientTls(str(both), str(tmp_path / f"{c}.pem"), str(tmp_path / f"{c}.key"))
        for c in ("client1", "client2")
    )
    config = ha_testing.small_store_config(tmp_path, "rot", _tls_table(tmp_path, "broker", both))
    broker_port = dev.free_port()
    broker: subprocess.Popen[bytes] | None = None
    try:
        with _namesrv(tmp_path, port, ns_config):
            broker = processes.spawn_ariane(
                ["broker", *config, "--listen", f"127.0.0.1:{broker_port}", "--namesrv",
                 namesrv, "--broker-name", "rot", "--store-dir", str(tmp_path / "store")],
                tmp_path / "broker.log",
            )  # fmt: skip
            processes.wait_until(
                lambda: _registered(namesrv, "rot", client1),
                timeout_s=REGISTER_TIMEOUT_S,
                what="the broker registered over mTLS with its CA 1 certificate",
            )
            _issue(ca2, "broker", tmp_path)  # rotated on disk, the broker keeps running
        ns_trust.write_bytes(ca2.cert_pem)
        with _namesrv(tmp_path, port, ns_config):
            processes.wait_until(
                lambda: _registered(namesrv, "rot", client2),
                timeout_s=REGISTER_TIMEOUT_S,
                what="the broker registered with the name server that trusts CA 2 only",
            )
        assert broker.poll() is None, "the broker was not restarted"
    finally:
        if broker is not None:
            dev.stop_process(broker)


def test_inner_credentials_and_the_pool_follow_a_rotation(tmp_path: pathlib.Path) -> None:
    """``InnerCredentials`` answers a new generation once the files changed (the same
    credentials object until then), and a pool built on it retires its open channels: the
    next ``get`` of the same address is a new channel."""
    files = ca.write_local(tmp_path)
    settings = tls.TlsSettings(
        server_mode=tls.TlsMode.ENFORCING,
        cert_path=str(files.cert_path),
        key_path=str(files.key_path),
        trust_cert_path=str(files.ca_path),
        reload_check_interval_ms=0,
    )
    server_tls = tls.ServerTls(settings)
    inner = grpc_tls.inner_credentials(settings, lambda: server_tls)
    assert inner is not None
    generation, credentials = inner.current()
    assert inner.current() == (generation, credentials)

    async def scenario() -> None:
        pool = channel_pool.ChannelPool(channels_max=2, credentials=inner)
        try:
            first = await pool.get("127.0.0.1:1")
            assert await pool.get("127.0.0.1:1") is first
            ca.write_local(tmp_path)  # a new server certificate from the same CA
            assert inner.current()[0] == generation + 1
            assert await pool.get("127.0.0.1:1") is not first
            assert pool.retired_channels == 1
        finally:
            await pool.close()

    asyncio.run(scenario())


def test_inner_credentials_before_the_files_are_loaded_is_an_error() -> None:
    """A pool asked for an inner TLS channel before the process loaded ``[tls]`` says so."""
    settings = tls.TlsSettings(
        server_mode=tls.TlsMode.ENFORCING, cert_path="/c.pem", key_path="/k.pem"
    )
    inner = grpc_tls.inner_credentials(settings, lambda: None)
    assert inner is not None
    with pytest.raises(RuntimeError, match="before"):
        inner.current()
