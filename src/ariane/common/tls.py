"""TLS for every listener: the ``[tls]`` settings, certificate files re-read when they change,
client contexts, and the first-byte rule that tells TLS from plaintext on one port.

RocketMQ (``TlsSystemConfig``, ``NettyRemotingServer.TlsModeHandler``; security.md §8.1) serves
one port in one of three modes: ``disabled`` (plaintext only; a TLS hello is closed),
``permissive`` (both, told apart by peeking one byte: ``0x16`` starts a TLS handshake record)
and ``enforcing`` (TLS only; a plaintext byte closes the connection). Client certificates are
``none``, ``optional`` or ``require`` (``tls.server.need.client.auth``). The broker re-reads its
files when their hashes change (every 500 ms); the proxy's gRPC port hourly, and not at all in
5.3.3. Ariane keeps the modes and the byte rule (a plaintext Remoting frame whose first byte is
``0x16`` would declare ≥ 369 MB, over the frame limit, and an HTTP/2 preface starts with ``P``),
and re-reads lazily: at most once per ``reload_check_interval_ms`` a new connection's handshake
compares the files' size, mtime and inode, and only then their bytes. A rotated certificate is
served to the next connection after the check interval; connections already open keep the
session they negotiated. Files that do not load (a certificate written before its key, a
truncated file) leave the previous certificate in service and are tried again at the next check.

The ``/metrics`` listener (``metrics.exposition``, HTTPS under ``enforcing``) has its own context
(``ServerTls.metrics_context``): the same certificate, re-read with it, but no client certificate
asked for even under ``need_client_auth = "require"`` — the series are read-only (RocketMQ's
exporter serves them over plain HTTP), and a scraper then needs only the CA bundle, never a
client key that would also pass the mTLS of the broker's and name server's service ports.

Invariants: a ``ServerTls`` never hands out a context built from a cert and a key of different
generations (bytes read before and after loading must match); the private key's bytes are held
only to hand them to grpcio (which takes PEM bytes) and never appear in a ``repr`` or a log.

The standard library only (``ssl``): the asyncio listener is in ``common.tls_listener``, the
grpcio credentials in ``grpcwire.tls``.
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import logging
import os
import ssl
import threading
import time
from collections.abc import Callable

_log = logging.getLogger(__name__)

TLS_HANDSHAKE_RECORD = 0x16
"""The first byte of a TLS connection: a handshake record (RFC 8446 §5.1)."""

PEM_FILE_BYTES_MAX = 1 << 20
"""Largest certificate, key or trust file read, bytes (a chain of a few certificates is ~10 KiB)."""

RELOAD_CHECK_INTERVAL_MS_MAX = 60_000
"""Slowest accepted re-read check, ms: a rotated certificate is served within a minute."""


class TlsMode(enum.Enum):
    """What a listener accepts (RocketMQ ``tls.server.mode``)."""

    DISABLED = "disabled"
    """Plaintext only; a TLS hello is closed."""
    PERMISSIVE = "permissive"
    """TLS and plaintext on the same port, told apart by the first byte (a migration mode)."""
    ENFORCING = "enforcing"
    """TLS only; a plaintext first byte closes the connection before any request is read."""


class ClientAuth(enum.Enum):
    """Client certificates (RocketMQ ``tls.server.need.client.auth``)."""

    NONE = "none"
    """Not requested."""
    OPTIONAL = "optional"
    """Requested and verified against ``trust_cert_path`` when sent; a client may send none."""
    REQUIRE = "require"
    """Mutual TLS: a handshake without a certificate the trust file vouches for fails."""


class FirstByteVerdict(enum.Enum):
    """What a listener does with a connection, from its first byte."""

    TLS = "tls"
    PLAINTEXT = "plaintext"
    REFUSE = "refuse"


@dataclasses.dataclass(frozen=True, slots=True)
class TlsSettings:
    """The ``[tls]`` settings group of a broker or name server (RocketMQ's ``tls.server.*``)::

        [tls]
        server_mode = "enforcing"          # disabled | permissive | enforcing
        cert_path = "/etc/ariane/tls/tls.crt"
        key_path = "/etc/ariane/tls/tls.key"
        trust_cert_path = "/etc/ariane/tls/ca.crt"
        need_client_auth = "none"          # none | optional | require

    ``trust_cert_path`` also verifies the servers this process dials (name servers, the master's
    HA port, other brokers) when those are TLS.

    Raises:
        ValueError: a mode other than ``disabled`` without ``cert_path`` and ``key_path``; client
            certificates without ``trust_cert_path``; a bound out of range.
    """

    server_mode: TlsMode = TlsMode.DISABLED
    """What every listener of the process accepts (default ``disabled``, as plain ``ariane dev``;
    RocketMQ's default is ``permissive`` with a self-signed test certificate, which Ariane does
    not ship: a certificate nobody checks protects nothing)."""

    cert_path: str = ""
    """PEM certificate chain served, leaf first (RocketMQ ``tls.server.certPath``)."""

    key_path: str = ""
    """PEM private key of the leaf certificate, unencrypted (``tls.server.keyPath``)."""

    trust_cert_path: str = ""
    """PEM CA bundle that verifies client certificates and the servers this process dials."""

    need_client_auth: ClientAuth = ClientAuth.NONE
    """Client certificates: ``none``, ``optional`` or ``require`` (mTLS)."""

    handshake_timeout_ms: int = 10_000
    """Longest TLS handshake, and longest wait for a new connection's first byte, ms."""

    reload_check_interval_ms: int = 1_000
    """Least time between two checks of the files for a change, ms (at most 60 000)."""

    def __post_init__(self) -> None:
        if self.server_mode is not TlsMode.DISABLED and not (self.cert_path and self.key_path):
            raise ValueError(
                f"tls.server_mode={self.server_mode.value} needs tls.cert_path and tls.key_path "
                "(PEM files of the certificate this server presents)"
            )
        if self.need_client_auth is not ClientAuth.NONE and not self.trust_cert_path:
            raise ValueError(
                f"tls.need_client_auth={self.need_client_auth.value} needs tls.trust_cert_path "
                "(the CA that signed the client certificates)"
            )
        if not 100 <= self.handshake_timeout_ms <= 120_000:
            raise ValueError(
                f"tls.handshake_timeout_ms={self.handshake_timeout_ms} is outside 100..120000"
            )
        if not 0 <= self.reload_check_interval_ms <= RELOAD_CHECK_INTERVAL_MS_MAX:
            raise ValueError(
                f"tls.reload_check_interval_ms={self.reload_check_interval_ms} is outside "
                f"0..{RELOAD_CHECK_INTERVAL_MS_MAX}"
            )

    @property
    def enabled(self) -> bool:
        """Whether listeners accept TLS at all (``permissive`` or ``enforcing``)."""
        return self.server_mode is not TlsMode.DISABLED


def classify_first_byte(first: int, mode: TlsMode) -> FirstByteVerdict:
    """What a listener in ``mode`` does with a connection whose first byte is ``first``
    (RocketMQ ``TlsModeHandler``, without its bug #10110: under ``enforcing`` a plaintext frame
    is closed and never executed)."""
    if first == TLS_HANDSHAKE_RECORD:
        return FirstByteVerdict.REFUSE if mode is TlsMode.DISABLED else FirstByteVerdict.TLS
    return FirstByteVerdict.REFUSE if mode is TlsMode.ENFORCING else FirstByteVerdict.PLAINTEXT


def _read_pem(path: str, what: str) -> bytes:
    """The bytes of the PEM file at ``path`` (``OSError``/``ValueError`` naming ``what``)."""
    with open(path, "rb") as handle:
        data = handle.read(PEM_FILE_BYTES_MAX + 1)
    if len(data) > PEM_FILE_BYTES_MAX:
        raise ValueError(f"{what} {path} is larger than {PEM_FILE_BYTES_MAX} bytes")
    if b"-----BEGIN" not in data:
        raise ValueError(f"{what} {path} holds no PEM block")
    return data


@dataclasses.dataclass(frozen=True, slots=True)
class CertificateMaterial:
    """One consistent generation of a server's PEM files, as read from disk."""

    cert_chain_pem: bytes
    """The certificate chain served."""

    private_key_pem: bytes = dataclasses.field(repr=False)
    """Its private key (never logged)."""

    trust_pem: bytes | None
    """The CA bundle for client certificates, or ``None`` without one."""

    generation: int
    """1 for the files read at start, +1 per reload."""

    @property
    def fingerprint(self) -> str:
        """SHA-256 of the certificate chain, hex (what logs and metrics name)."""
        return hashlib.sha256(self.cert_chain_pem).hexdigest()


def _stamp(paths: tuple[str, ...]) -> tuple[tuple[int, int, int], ...]:
    """Size, mtime and inode of each path (a missing file stamps as zeros)."""
    stamps = []
    for path in paths:
        try:
            st = os.stat(path)
        except OSError:
            stamps.append((0, 0, 0))
            continue
        stamps.append((st.st_size, st.st_mtime_ns, st.st_ino))
    return tuple(stamps)


def _server_context(settings: TlsSettings, material: CertificateMaterial) -> ssl.SSLContext:
    """An ``ssl`` server context for ``material`` loaded from ``settings``' paths."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(settings.cert_path, settings.key_path)
    if settings.trust_cert_path:
        context.load_verify_locations(cafile=settings.trust_cert_path)
    context.verify_mode = {
        ClientAuth.NONE: ssl.CERT_NONE,
        ClientAuth.OPTIONAL: ssl.CERT_OPTIONAL,
        ClientAuth.REQUIRE: ssl.CERT_REQUIRED,
    }[settings.need_client_auth]
    # gRPC clients insist on ALPN "h2"; Remoting clients offer none and are served as well
    context.set_alpn_protocols(["h2"])
    return context


def _metrics_context(settings: TlsSettings) -> ssl.SSLContext:
    """The ``/metrics`` listener's context: the same certificate, no client certificate asked
    (whatever ``need_client_auth`` says; module docstring), HTTP/1.1 (the metrics server speaks
    no HTTP/2)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(settings.cert_path, settings.key_path)
    context.verify_mode = ssl.CERT_NONE
    context.set_alpn_protocols(["http/1.1"])
    return context


class ServerTls:
    """The certificate a process serves, re-read when its files change (thread-safe: grpcio
    asks from its own threads).

    Args:
        settings: the ``[tls]`` group (must be enabled).
        clock: monotonic seconds (``time.monotonic``).

    Raises:
        ValueError: ``settings`` disabled, or the files at start do not load (named).
        OSError: a file cannot be read at start.
    """

    def __init__(
        self, settings: TlsSettings, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if not settings.enabled:
            raise ValueError("ServerTls needs tls.server_mode permissive or enforcing")
        self.settings = settings
        self._clock = clock
        self._lock = threading.Lock()
        self._paths = tuple(
            p for p in (settings.cert_path, settings.key_path, settings.trust_cert_path) if p
        )
        self._stamp = _stamp(self._paths)
        self._checked_at = clock()
        self.reload_failures = 0
        """Checks that found changed files which did not load (the old ones stayed)."""
        loaded = self._load(generation=1)
        if loaded is None:
            raise ValueError(
                f"TLS files changed while being read ({settings.cert_path}); try again"
            )
        self._material, self._context, self._metrics_context = loaded
        _log.info(
            "TLS %s: serving certificate %s (sha256 %.16s)",
            settings.server_mode.value,
            settings.cert_path,
            self._material.fingerprint,
        )

    @property
    def mode(self) -> TlsMode:
        """The listeners' mode."""
        return self.settings.server_mode

    def _read(self, generation: int) -> CertificateMaterial:
        trust = self.settings.trust_cert_path
        return CertificateMaterial(
            cert_chain_pem=_read_pem(self.settings.cert_path, "tls.cert_path"),
            private_key_pem=_read_pem(self.settings.key_path, "tls.key_path"),
            trust_pem=_read_pem(trust, "tls.trust_cert_path") if trust else None,
            generation=generation,
        )

    def _load(
        self, generation: int
    ) -> tuple[CertificateMaterial, ssl.SSLContext, ssl.SSLContext] | None:
        """Read, load, read again; ``None`` when the files changed in between.

        Raises:
            OSError, ValueError, ssl.SSLError: files that do not read or load.
        """
        before = self._read(generation)
        try:
            context = _server_context(self.settings, before)
            metrics_context = _metrics_context(self.settings)
        except ssl.SSLError as exc:
            raise ValueError(
                f"TLS files {self.settings.cert_path} / {self.settings.key_path} do not load: "
                f"{exc.reason or exc} (a certificate and the key of another one?)"
            ) from None
        after = self._read(generation)
        if (before.cert_chain_pem, before.private_key_pem, before.trust_pem) != (
            after.cert_chain_pem,
            after.private_key_pem,
            after.trust_pem,
        ):
            return None
        return before, context, metrics_context

    def _maybe_reload(self) -> None:
        """Re-read the files if the check interval passed and their stamps changed."""
        now = self._clock()
        if now - self._checked_at < self.settings.reload_check_interval_ms / 1000:
            return
        self._checked_at = now
        stamp = _stamp(self._paths)
        if stamp == self._stamp:
            return
        try:
            loaded = self._load(self._material.generation + 1)
        except (OSError, ValueError) as exc:
            self.reload_failures += 1
            _log.warning("TLS files changed but do not load, still serving the old ones: %s", exc)
            return
        if loaded is None:
            return  # being written: the next check tries again
        material, context, metrics_context = loaded
        if (material.cert_chain_pem, material.private_key_pem, material.trust_pem) == (
            self._material.cert_chain_pem,
            self._material.private_key_pem,
            self._material.trust_pem,
        ):
            self._stamp = stamp  # touched, not changed
            return
        self._stamp = stamp
        self._material, self._context = material, context
        self._metrics_context = metrics_context
        _log.info(
            "TLS: reloaded %s, generation %d (sha256 %.16s)",
            self.settings.cert_path,
            material.generation,
            material.fingerprint,
        )

    def context(self) -> ssl.SSLContext:
        """The server context for the next handshake (the files re-checked when due)."""
        with self._lock:
            self._maybe_reload()
            return self._context

    def metrics_context(self) -> ssl.SSLContext:
        """The ``/metrics`` listener's context for the next handshake: the certificate of
        ``context``, but no client certificate asked for, ALPN ``http/1.1``."""
        with self._lock:
            self._maybe_reload()
            return self._metrics_context

    def material(self) -> CertificateMaterial:
        """The PEM bytes in service (the files re-checked when due), for grpcio."""
        with self._lock:
            self._maybe_reload()
            return self._material


def client_context(
    trust_cert_path: str | None,
    *,
    cert_path: str = "",
    key_path: str = "",
    check_hostname: bool = True,
) -> ssl.SSLContext:
    """An ``ssl`` client context that verifies servers against ``trust_cert_path`` (``None``:
    the system's roots), presenting ``cert_path``/``key_path`` when the server asks (mTLS).

    Unlike RocketMQ's classic clients (which never verify the server unless told to), Ariane's
    own clients and inner connections always verify the certificate chain; the host name is
    checked unless ``check_hostname`` is false.

    Raises:
        OSError, ssl.SSLError: files that do not read or load.
    """
    context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=trust_cert_path)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.check_hostname = check_hostname
    if cert_path:
        context.load_cert_chain(cert_path, key_path or None)
    return context


def peer_client_context(settings: TlsSettings) -> ssl.SSLContext | None:
    """The context a server process dials its peers with (a slave → its master's HA port, a
    Remoting client inside a server), or ``None`` for plaintext.

    After RocketMQ's ``NettyClientConfig.useTLS = tls.enable || enforcing``: TLS
    exactly when this process's own ``server_mode`` is ``enforcing`` (a permissive process
    dials plaintext, which every peer in a mixed rollout still accepts), verifying the peer
    against ``trust_cert_path`` (the system roots when empty; host names checked) and
    presenting ``cert_path``/``key_path`` as the client certificate, so peers with
    ``need_client_auth = "require"`` accept inner traffic too. Build one per connection to pick
    up rotated files.

    Raises:
        OSError, ssl.SSLError: files that do not read or load.
    """
    if settings.server_mode is not TlsMode.ENFORCING:
        return None
    return client_context(
        settings.trust_cert_path or None, cert_path=settings.cert_path, key_path=settings.key_path
    )


def process_server_tls(settings: TlsSettings) -> ServerTls | None:
    """The one ``ServerTls`` of a process, for every listener: ``None`` when ``server_mode`` is
    ``disabled`` (plaintext everywhere).

    Raises:
        OSError: the files do not read or load (named; a ``ValueError`` of ``ServerTls`` is
            raised as an ``OSError`` so that the process's runner logs it and exits 1).
    """
    if not settings.enabled:
        return None
    try:
        return ServerTls(settings)
    except ValueError as exc:
        raise OSError(f"[tls]: {exc}") from None
