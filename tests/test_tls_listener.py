"""The TLS listener on real sockets: each mode's first-byte rule, client certificates, and a
certificate rotated on disk served to new connections while an open one keeps working.

Unit-level (an echo protocol, no broker): the brokers' and name servers' listeners are built on
this one, and their own tests run the official clients through it.
"""

from __future__ import annotations

import asyncio
import hashlib
import pathlib
import ssl

import pytest

from ariane.common import tls, tls_listener
from ariane.security import ca


class _Echo(asyncio.Protocol):
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.transport.write(data)


def _settings(files: ca.LocalTlsFiles, mode: str, **extra: object) -> tls.TlsSettings:
    return tls.TlsSettings(
        server_mode=tls.TlsMode(mode),
        cert_path=str(files.cert_path),
        key_path=str(files.key_path),
        trust_cert_path=str(files.ca_path),
        handshake_timeout_ms=2_000,
        **extra,  # type: ignore[arg-type]
    )


async def _echo_over(port: int, context: ssl.SSLContext | None, payload: bytes) -> bytes:
    reader, writer = await asyncio.open_connection(
        "127.0.0.1", port, ssl=context, server_hostname="localhost" if context else None
    )
    try:
        writer.write(payload)
        await writer.drain()
        return await asyncio.wait_for(reader.readexactly(len(payload)), 5)
    finally:
        writer.close()


async def _closed_without_answer(port: int, context: ssl.SSLContext | None) -> bool:
    """Whether the server closes the connection (no echo) after our first bytes."""
    try:
        got = await _echo_over(port, context, b"\x00\x00\x00\x10hello")
    except (ConnectionError, asyncio.IncompleteReadError, ssl.SSLError, OSError):
        return True
    return got == b""


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> ca.LocalTlsFiles:
    return ca.write_local(tmp_path_factory.mktemp("tls"))


async def _serve(settings: tls.TlsSettings) -> tuple[tls_listener.Listener, int]:
    server = await tls_listener.create_server(_Echo, "127.0.0.1", 0, tls.ServerTls(settings))
    assert isinstance(server, tls_listener.Listener)
    return server, server.sockets[0].getsockname()[1]


def test_enforcing_serves_tls_and_closes_plaintext_before_reading_it(
    files: ca.LocalTlsFiles,
) -> None:
    """Enforcing: a verified TLS client is echoed; a plaintext frame is closed unanswered."""

    async def main() -> None:
        server, port = await _serve(_settings(files, "enforcing"))
        try:
            client = tls.client_context(str(files.ca_path))
            assert await _echo_over(port, client, b"ping") == b"ping"
            assert await _closed_without_answer(port, None)
            assert server.tls_accepted == 1 and server.refused == 1
        finally:
            server.close()
            await server.wait_closed()

    asyncio.run(main())


def test_permissive_serves_both_on_one_port(files: ca.LocalTlsFiles) -> None:
    """Permissive: TLS and plaintext clients are both echoed on the same port."""

    async def main() -> None:
        server, port = await _serve(_settings(files, "permissive"))
        try:
            assert await _echo_over(port, tls.client_context(str(files.ca_path)), b"tls") == b"tls"
            assert await _echo_over(port, None, b"plain") == b"plain"
            assert (server.tls_accepted, server.plaintext_accepted) == (1, 1)
        finally:
            server.close()
            await server.wait_closed()

    asyncio.run(main())


def test_client_that_does_not_trust_the_ca_fails_its_handshake(
    files: ca.LocalTlsFiles, tmp_path: pathlib.Path
) -> None:
    """A client verifying against another CA refuses the server's certificate."""
    other = ca.write_local(tmp_path / "other")

    async def main() -> None:
        server, port = await _serve(_settings(files, "enforcing"))
        try:
            with pytest.raises(ssl.SSLCertVerificationError):
                await _echo_over(port, tls.client_context(str(other.ca_path)), b"x")
        finally:
            server.close()
            await server.wait_closed()

    asyncio.run(main())


def test_require_client_auth_refuses_a_client_without_certificate(
    files: ca.LocalTlsFiles,
) -> None:
    """mTLS (require): a client with the CA's client certificate is echoed, one without is not."""

    async def main() -> None:
        settings = _settings(files, "enforcing", need_client_auth=tls.ClientAuth.REQUIRE)
        server, port = await _serve(settings)
        try:
            with_cert = tls.client_context(
                str(files.ca_path),
                cert_path=str(files.client_cert_path),
                key_path=str(files.client_key_path),
            )
            assert await _echo_over(port, with_cert, b"mtls") == b"mtls"
            assert await _closed_without_answer(port, tls.client_context(str(files.ca_path)))
        finally:
            server.close()
            await server.wait_closed()

    asyncio.run(main())


def test_disabled_mode_refuses_a_tls_hello() -> None:
    """``classify_first_byte``: disabled closes 0x16, enforcing closes anything else."""
    verdict = tls.classify_first_byte
    assert verdict(0x16, tls.TlsMode.DISABLED) is tls.FirstByteVerdict.REFUSE
    assert verdict(0x00, tls.TlsMode.DISABLED) is tls.FirstByteVerdict.PLAINTEXT
    assert verdict(0x16, tls.TlsMode.ENFORCING) is tls.FirstByteVerdict.TLS
    assert verdict(ord("P"), tls.TlsMode.ENFORCING) is tls.FirstByteVerdict.REFUSE
    assert verdict(0x16, tls.TlsMode.PERMISSIVE) is tls.FirstByteVerdict.TLS
    assert verdict(0x00, tls.TlsMode.PERMISSIVE) is tls.FirstByteVerdict.PLAINTEXT


def _served_fingerprint(writer: asyncio.StreamWriter) -> str:
    ssl_object = writer.get_extra_info("ssl_object")
    der = ssl_object.getpeercert(binary_form=True)
    return hashlib.sha256(der).hexdigest()


def test_rotated_certificate_reaches_new_connections_while_an_open_one_keeps_working(
    tmp_path: pathlib.Path,
) -> None:
    """Rotation: new files on disk are served to the next connection after the check interval;
    a connection opened before keeps echoing on its old session."""
    files = ca.write_local(tmp_path)

    async def main() -> None:
        settings = _settings(files, "enforcing", reload_check_interval_ms=0)
        server, port = await _serve(settings)
        client = tls.client_context(str(files.ca_path))
        try:
            reader, old = await asyncio.open_connection(
                "127.0.0.1", port, ssl=client, server_hostname="localhost"
            )
            before = _served_fingerprint(old)
            ca.write_local(tmp_path)  # same CA, a new server key and certificate
            _, new = await asyncio.open_connection(
                "127.0.0.1", port, ssl=client, server_hostname="localhost"
            )
            assert _served_fingerprint(new) != before
            new.close()
            old.write(b"still here")
            await old.drain()
            assert await asyncio.wait_for(reader.readexactly(10), 5) == b"still here"
            old.close()
        finally:
            server.close()
            await server.wait_closed()

    asyncio.run(main())


def test_files_that_do_not_load_leave_the_old_certificate_in_service(
    tmp_path: pathlib.Path,
) -> None:
    """A half-rotated pair (a new certificate, the old key) is not served: the old one stays."""
    files = ca.write_local(tmp_path)
    server_tls = tls.ServerTls(_settings(files, "enforcing", reload_check_interval_ms=0))
    before = server_tls.material().fingerprint
    authority = ca.CertificateAuthority(
        files.ca_path.read_bytes(), (tmp_path / "ca-key.pem").read_bytes()
    )
    ca.write_atomic(
        files.cert_path, authority.issue("x", dns_names=["localhost"]).cert_pem, mode=0o644
    )
    assert server_tls.material().fingerprint == before
    assert server_tls.reload_failures == 1


def test_settings_refuse_a_mode_without_files() -> None:
    """``[tls]`` enforcing without cert/key, or mTLS without a trust file, is refused by name."""
    with pytest.raises(ValueError, match=r"tls\.cert_path"):
        tls.TlsSettings(server_mode=tls.TlsMode.ENFORCING)
    with pytest.raises(ValueError, match="trust_cert_path"):
        tls.TlsSettings(
            server_mode=tls.TlsMode.ENFORCING,
            cert_path="c",
            key_path="k",
            need_client_auth=tls.ClientAuth.REQUIRE,
        )
