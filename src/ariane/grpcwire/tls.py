"""grpcio credentials from Ariane's ``[tls]`` settings: what gRPC servers serve and what
channels trust.

Server side, ``server_credentials(server_tls)`` is ``grpc.dynamic_ssl_server_credentials``:
grpcio calls its fetcher before every new connection's handshake (from its own threads); the
fetcher asks ``ServerTls.material()`` (which re-reads the files at most once per
``reload_check_interval_ms``) and hands grpcio a new ``ssl_server_certificate_configuration``
only when the generation changed, else ``None`` (keep the current one). A certificate rotated
on disk is served to the next connection after the check interval, with no restart; open
connections keep the session they negotiated. TLS is done by grpcio's C core: no Python in the
data path.

Client certificates. grpcio's Python API has two settings only:
``require_client_authentication`` false (the server does not request a certificate; C core's
``GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE``) or true (request, require and verify against the
root certificates). So ``need_client_auth``: ``none`` → not requested; ``require`` → mTLS;
``optional`` → **not requested on the gRPC port** (grpcio cannot "request but accept none"; a
client without a certificate must still get in, and the gRPC gate authenticates by the
signature, never by the certificate). The asyncio listeners (Remoting, HA) honour ``optional``
as RocketMQ does.

Client side, ``channel_credentials`` trusts a CA file (``None``: the system's roots, as the
official Python client) and presents an optional client certificate; ``inner_credentials`` is
what a server process dials its peers with: TLS exactly when its own ``server_mode`` is
``enforcing`` (RocketMQ: ``NettyClientConfig.useTLS = tls.enable || enforcing``), verifying
against ``trust_cert_path`` and presenting ``cert_path``/``key_path`` (so ``require`` works for
inner traffic too). RocketMQ's clients trust every server by default; Ariane's always verify the
chain and the host name (the certificate's SANs must name every address clients dial).

Inner credentials follow the process's ``ServerTls`` (``InnerCredentials``): when the files
change, the channel pools retire their channels and dial again with the new certificate.

Invariants: the fetcher never raises into grpcio (a failure keeps the certificate in service);
the key files of Ariane's own clients (``ClientTls``) are read once, when the credentials are
made; a server process's inner credentials are re-read with its served certificate.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Callable

import grpc

from ariane.common import tls

_log = logging.getLogger(__name__)


def _certificate_configuration(
    material: tls.CertificateMaterial,
) -> grpc.ServerCertificateConfiguration:
    return grpc.ssl_server_certificate_configuration(
        [(material.private_key_pem, material.cert_chain_pem)],
        root_certificates=material.trust_pem,
    )


class _Fetcher:
    """grpcio's certificate fetcher: the new configuration when ``ServerTls`` reloaded."""

    def __init__(self, server_tls: tls.ServerTls, served_generation: int) -> None:
        self._tls = server_tls
        self._lock = threading.Lock()
        self.served_generation = served_generation
        """The generation grpcio was last given."""

    def __call__(self) -> grpc.ServerCertificateConfiguration | None:
        try:
            material = self._tls.material()
            with self._lock:
                if material.generation == self.served_generation:
                    return None
                self.served_generation = material.generation
            _log.info("gRPC TLS: serving certificate generation %d", material.generation)
            return _certificate_configuration(material)
        except Exception:  # grpcio logs and drops the connection: keep serving instead
            _log.exception("gRPC TLS: certificate check failed; the current one stays")
            return None


def server_credentials(server_tls: tls.ServerTls) -> grpc.ServerCredentials:
    """grpcio server credentials serving ``server_tls``'s certificate, reloaded on change.

    ``need_client_auth``: ``require`` → mTLS against ``trust_cert_path``; ``none`` and
    ``optional`` → no certificate requested (module docstring: grpcio's limit).
    """
    material = server_tls.material()
    require = server_tls.settings.need_client_auth is tls.ClientAuth.REQUIRE
    return grpc.dynamic_ssl_server_credentials(
        _certificate_configuration(material),
        # grpc's stubs omit the documented ``None`` (= keep the current configuration)
        _Fetcher(server_tls, material.generation),  # type: ignore[arg-type]
        require_client_authentication=require,
    )


def _read(path: str, what: str) -> bytes:
    """A PEM file's bytes (``OSError`` or ``ValueError`` naming ``what`` and ``path``)."""
    try:
        with open(path, "rb") as handle:
            data = handle.read(tls.PEM_FILE_BYTES_MAX + 1)
    except OSError as exc:
        raise OSError(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    if len(data) > tls.PEM_FILE_BYTES_MAX or b"-----BEGIN" not in data:
        raise ValueError(f"{what} {path} is not a PEM file of at most {tls.PEM_FILE_BYTES_MAX} B")
    return data


def channel_credentials(
    ca_file: str | None, *, cert_path: str = "", key_path: str = ""
) -> grpc.ChannelCredentials:
    """Channel credentials verifying servers against ``ca_file`` (``None`` or "": the system's
    roots, or ``GRPC_DEFAULT_SSL_ROOTS_FILE_PATH``), presenting ``cert_path``/``key_path``
    when given (both or neither).

    Raises:
        OSError: a file cannot be read.
        ValueError: a file is not PEM, or only one of ``cert_path``/``key_path``.
    """
    if bool(cert_path) != bool(key_path):
        raise ValueError("a client certificate needs both its certificate and key files")
    return grpc.ssl_channel_credentials(
        root_certificates=_read(ca_file, "CA file") if ca_file else None,
        private_key=_read(key_path, "client key") if key_path else None,
        certificate_chain=_read(cert_path, "client certificate") if cert_path else None,
    )


@dataclasses.dataclass(frozen=True, slots=True)
class ClientTls:
    """TLS options of Ariane's own clients (``ariane admin --tls --ca-file``, producers,
    consumers, the operator, the Spark connector).

    The server is always verified (chain and host name); RocketMQ's Java and Go clients trust
    any certificate by default.
    """

    ca_file: str = ""
    """PEM CA bundle that signed the servers' certificates; "": the system's roots."""

    cert_path: str = ""
    """PEM client certificate for brokers with ``need_client_auth = require``; "": none."""

    key_path: str = ""
    """Its private key (with ``cert_path``)."""

    def __post_init__(self) -> None:
        if bool(self.cert_path) != bool(self.key_path):
            raise ValueError("a client certificate needs both cert_path and key_path")

    def credentials(self) -> grpc.ChannelCredentials:
        """grpcio channel credentials for these options (files read now).

        Raises:
            OSError, ValueError: as ``channel_credentials``.
        """
        return channel_credentials(
            self.ca_file or None, cert_path=self.cert_path, key_path=self.key_path
        )


class InnerCredentials:
    """The channel credentials a server process dials its peers with, following the
    process's ``ServerTls``: the same files (``trust_cert_path`` verifies the peer,
    ``cert_path``/``key_path`` are presented), re-read when they change, so a rotated
    certificate reaches new inner connections without a restart (a
    ``channel_pool.CredentialsSource`` for ``channel_pool.ChannelPool``). Thread-safe.

    Args:
        server_tls: the process's ``ServerTls`` (enforcing), or ``None`` while it is not
            loaded yet (a name server loads it when it starts serving).
    """

    def __init__(self, server_tls: Callable[[], tls.ServerTls | None]) -> None:
        self._tls = server_tls
        self._lock = threading.Lock()
        self._generation = 0
        self._credentials: grpc.ChannelCredentials | None = None

    def current(self) -> tuple[int, grpc.ChannelCredentials]:
        """``(generation, credentials)`` for a new channel (files re-checked when due).

        Raises:
            RuntimeError: the process has not loaded its ``[tls]`` files yet.
        """
        server_tls = self._tls()
        if server_tls is None:
            raise RuntimeError("an inner TLS channel was asked for before [tls] was loaded")
        material = server_tls.material()
        with self._lock:
            if self._credentials is None or material.generation != self._generation:
                self._credentials = grpc.ssl_channel_credentials(
                    root_certificates=material.trust_pem,
                    private_key=material.private_key_pem,
                    certificate_chain=material.cert_chain_pem,
                )
                self._generation = material.generation
            return self._generation, self._credentials


def inner_credentials(
    settings: tls.TlsSettings, server_tls: Callable[[], tls.ServerTls | None]
) -> InnerCredentials | None:
    """What a server process dials name servers and brokers with: TLS when ``settings`` is
    ``enforcing`` (``InnerCredentials`` over the process's ``server_tls``), else ``None``
    (plaintext; ``permissive`` is the migration mode whose peers may be plaintext)."""
    if settings.server_mode is not tls.TlsMode.ENFORCING:
        return None
    return InnerCredentials(server_tls)
