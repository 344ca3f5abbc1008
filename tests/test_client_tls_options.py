"""The TLS options of Ariane's own clients parse as documented: ``ariane admin --tls
--ca-file`` (and ``ARIANE_TLS``/``ARIANE_CA_FILE``), the Spark connector's ``tls``/``caFile``,
the operator's environment, ``ClientTls`` bounds and the workers' ``[tls]`` hand-over."""

from __future__ import annotations

import argparse
import pathlib

import pytest

from ariane import admin_cli
from ariane.admin_cli import arguments as admin_arguments
from ariane.broker.grpc import frontend
from ariane.common import tls
from ariane.connectors.spark import options
from ariane.grpcwire import tls as grpc_tls
from ariane.operator import settings as operator_settings


def _admin_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    admin_cli.add_arguments(parser)
    return parser.parse_args(argv)


def test_admin_tls_flags_and_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """``--tls --ca-file`` gives ``ClientTls(ca_file)``; no ``--tls`` is plaintext even with
    ``ARIANE_CA_FILE`` set; ``ARIANE_TLS=1`` turns it on."""
    args = _admin_args(["--tls", "--ca-file", "/ca.pem", "topic", "list"])
    assert admin_arguments.client_tls(args) == grpc_tls.ClientTls(ca_file="/ca.pem")
    monkeypatch.setenv("ARIANE_CA_FILE", "/env-ca.pem")
    assert admin_arguments.client_tls(_admin_args(["topic", "list"])) is None
    monkeypatch.setenv("ARIANE_TLS", "1")
    assert admin_arguments.client_tls(_admin_args(["topic", "list"])) == grpc_tls.ClientTls(
        "/env-ca.pem"
    )


def test_spark_tls_options() -> None:
    """``tls=true`` + ``caFile`` reach both read and write options; ``caFile`` alone is refused
    with the fix named; a bad boolean is refused."""
    read = options.read_options(
        {"endpoints": "h:1", "topics": "t", "tls": "true", "caFile": "/ca.pem"}, streaming=False
    )
    assert read.tls == grpc_tls.ClientTls(ca_file="/ca.pem")
    write = options.write_options({"endpoints": "h:1", "TLS": "true"})
    assert write.tls == grpc_tls.ClientTls()
    assert options.write_options({"endpoints": "h:1"}).tls is None
    with pytest.raises(options.OptionError, match="caFile needs tls=true"):
        options.write_options({"endpoints": "h:1", "caFile": "/ca.pem"})
    with pytest.raises(options.OptionError, match="tls"):
        options.write_options({"endpoints": "h:1", "tls": "maybe"})


def test_operator_tls_from_environment() -> None:
    """The operator's admin calls use TLS exactly when ``ARIANE_TLS`` says so."""
    read = operator_settings.OperatorSettings.from_env
    assert read({}).client_tls is None
    assert read({"ARIANE_CA_FILE": "/ca.pem"}).client_tls is None
    found = read({"ARIANE_TLS": "true", "ARIANE_CA_FILE": "/ca.pem"}).client_tls
    assert found == grpc_tls.ClientTls(ca_file="/ca.pem")


def test_client_tls_bounds(tmp_path: pathlib.Path) -> None:
    """A client certificate without its key is refused; a CA file that is not PEM is named."""
    with pytest.raises(ValueError, match="both"):
        grpc_tls.ClientTls(cert_path="/c.pem")
    bad = tmp_path / "ca.pem"
    bad.write_text("not a certificate")
    with pytest.raises(ValueError, match="CA file"):
        grpc_tls.ClientTls(ca_file=str(bad)).credentials()
    with pytest.raises(OSError, match="missing"):
        grpc_tls.ClientTls(ca_file=str(tmp_path / "missing.pem")).credentials()


def test_worker_tls_settings_round_trip() -> None:
    """The ``[tls]`` settings a broker hands its front-end workers come back equal."""
    settings = tls.TlsSettings(
        server_mode=tls.TlsMode.PERMISSIVE,
        cert_path="/c.pem",
        key_path="/k.pem",
        trust_cert_path="/ca.pem",
        need_client_auth=tls.ClientAuth.REQUIRE,
        reload_check_interval_ms=250,
    )
    assert frontend.tls_from_json(frontend.tls_to_json(settings)) == settings


def test_inner_credentials_only_when_enforcing() -> None:
    """A server process dials its peers over TLS only when its own mode is ``enforcing``."""
    assert grpc_tls.inner_credentials(tls.TlsSettings(), lambda: None) is None
    permissive = tls.TlsSettings(
        server_mode=tls.TlsMode.PERMISSIVE, cert_path="/c.pem", key_path="/k.pem"
    )
    assert grpc_tls.inner_credentials(permissive, lambda: None) is None
