"""A broker with ``namesrv_resolve_all`` (how the operator's pods find every name-server pod
behind a headless Service) registers over TLS with a name server whose certificate names only
the DNS name, not the address it resolved to: the name is what is verified. Before, the
resolved IP was the verified host, and a certificate without IP SANs (the operator's, which
cannot know pod IPs) refused every registration.

Own cluster: a name server whose certificate lacks the IP SAN is the subject.
"""

from __future__ import annotations

import pathlib

from e2e.testenv import processes

from ariane import dev
from ariane.grpcwire import tls as grpc_tls
from ariane.security import ca
from test_tls_inner_rotation import _namesrv, _registered, _tls_table

REGISTER_TIMEOUT_S = 30.0


def test_resolved_name_server_is_verified_by_its_dns_name(tmp_path: pathlib.Path) -> None:
    """The broker dials ``localhost:PORT`` resolved to 127.0.0.1 and registers, though the
    name server's certificate names ``localhost`` only."""
    authority = ca.CertificateAuthority.create("resolve-all CA")
    (tmp_path / "ca.pem").write_bytes(authority.cert_pem)
    for name in ("namesrv", "broker", "client"):
        issued = authority.issue(name, dns_names=["localhost"], server=True, client=True)
        issued.write(tmp_path / f"{name}.pem", tmp_path / f"{name}.key")
    trust = tmp_path / "ca.pem"
    (tmp_path / "namesrv.toml").write_text(_tls_table(tmp_path, "namesrv", trust))
    broker_toml = tmp_path / "broker.toml"
    broker_toml.write_text(
        "namesrv_resolve_all = true\n"
        "[store]\ncommit_log_file_size_bytes = 65536\nconsume_queue_file_entries = 64\n"
        "[index]\nhash_slot_count = 64\nindex_count_max = 256\n"
        + _tls_table(tmp_path, "broker", trust)
    )
    port = dev.free_port()
    client = grpc_tls.ClientTls(
        str(trust), str(tmp_path / "client.pem"), str(tmp_path / "client.key")
    )
    with _namesrv(tmp_path, port, tmp_path / "namesrv.toml"):
        broker = processes.spawn_ariane(
            ["broker", "--config", str(broker_toml), "--listen", f"127.0.0.1:{dev.free_port()}",
             "--namesrv", f"localhost:{port}", "--broker-name", "resolved",
             "--store-dir", str(tmp_path / "store")],
            tmp_path / "broker.log",
        )  # fmt: skip
        try:
            processes.wait_until(
                lambda: _registered(f"localhost:{port}", "resolved", client),
                timeout_s=REGISTER_TIMEOUT_S,
                what="the broker registered with the name server it resolved",
            )
        finally:
            dev.stop_process(broker)
