"""A small certificate authority: a self-signed CA and the server/client certificates it issues.

What ``ariane dev --secure`` writes to ``<data-dir>/tls/`` and what tests use to run brokers and
name servers with TLS; the operator's cluster CA (Strimzi's model: one CA per cluster, a
certificate per component with the SANs of every name clients dial) issues with the same calls.
Keys are ECDSA P-256 (small, fast to sign, accepted by every official client's TLS stack: Java,
Go, Node, grpcio's BoringSSL). Certificates are X.509 v3 with the extensions that strict
verifiers want: ``basicConstraints`` (CA true only on the CA), ``keyUsage``,
``extendedKeyUsage`` (serverAuth and/or clientAuth), ``subjectAltName`` (DNS names and IP
addresses: Python's and Node's clients verify the host they dial against these), and the
subject/authority key identifiers.

Files are written atomically (a temporary file renamed over the target) and private keys with
mode 0600, so a reader — a broker re-reading rotated files — never sees half a file.

Uses ``cryptography`` (a well-kept library; the standard library cannot create certificates).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import ipaddress
import os
import pathlib
import tempfile
from collections.abc import Sequence

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALIDITY_DAYS_MAX = 3650
"""Longest validity issued, days."""


@dataclasses.dataclass(frozen=True, slots=True)
class Issued:
    """A certificate and its private key, PEM."""

    cert_pem: bytes
    key_pem: bytes = dataclasses.field(repr=False)

    def write(self, cert_path: pathlib.Path, key_path: pathlib.Path) -> None:
        """Write both files atomically (key first, mode 0600), so a reader that sees the new
        certificate also finds its key."""
        write_atomic(key_path, self.key_pem, mode=0o600)
        write_atomic(cert_path, self.cert_pem, mode=0o644)


def write_atomic(path: pathlib.Path, data: bytes, *, mode: int) -> None:
    """Replace ``path`` with ``data`` in one rename, with permissions ``mode``.

    Raises:
        OSError: the directory is not writable.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        _unlink_quietly(tmp)
        raise


def _unlink_quietly(path: str) -> None:
    """Remove ``path`` if it exists (cleanup after a failed write)."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _check_days(days: int) -> None:
    if not 1 <= days <= VALIDITY_DAYS_MAX:
        raise ValueError(f"validity of {days} days is outside 1..{VALIDITY_DAYS_MAX}")


LIFETIME_MIN = datetime.timedelta(seconds=10)
"""Shortest validity ``lifetime`` may ask for (tests of renewal use seconds, not days)."""


def _validity(
    days: int, lifetime: datetime.timedelta | None, now: datetime.datetime | None
) -> tuple[datetime.datetime, datetime.datetime]:
    """``(not_before, not_after)``: from ``now`` (default: the clock) for ``lifetime`` when
    given, else ``days``; ``not_before`` is backdated 5 minutes for clock skew (at most a tenth
    of a ``lifetime``: a short lifetime stays about as short as asked)."""
    start = now if now is not None else _now()
    if lifetime is None:
        _check_days(days)
        return start - datetime.timedelta(minutes=5), start + datetime.timedelta(days=days)
    if not LIFETIME_MIN <= lifetime <= datetime.timedelta(days=VALIDITY_DAYS_MAX):
        raise ValueError(f"lifetime {lifetime} is outside {LIFETIME_MIN}..{VALIDITY_DAYS_MAX} days")
    backdate = min(datetime.timedelta(minutes=5), lifetime / 10)
    return start - backdate, start + lifetime


class CertificateAuthority:
    """A CA that issues certificates.

    Args:
        cert_pem: the CA certificate, PEM.
        key_pem: its private key, PEM (unencrypted).

    Raises:
        ValueError: the PEM does not parse, or the certificate is not a CA.
    """

    def __init__(self, cert_pem: bytes, key_pem: bytes) -> None:
        self.cert = x509.load_pem_x509_certificate(cert_pem)
        key = serialization.load_pem_private_key(key_pem, password=None)
        if not isinstance(key, ec.EllipticCurvePrivateKey):
            raise ValueError("the CA key must be an EC private key")
        constraints = self.cert.extensions.get_extension_for_class(x509.BasicConstraints)
        if not constraints.value.ca:
            raise ValueError("the certificate is not a CA (basicConstraints CA:FALSE)")
        self._key = key
        self.cert_pem = cert_pem

    @classmethod
    def create(
        cls,
        common_name: str = "Ariane CA",
        *,
        days: int = 3650,
        lifetime: datetime.timedelta | None = None,
        now: datetime.datetime | None = None,
    ) -> CertificateAuthority:
        """A new self-signed CA valid for ``days`` days (or ``lifetime`` from ``now``).

        Raises:
            ValueError: ``days`` outside 1..3650, or ``lifetime`` outside 10 s..3650 days.
        """
        not_before, not_after = _validity(days, lifetime, now)
        key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
        cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(not_before)
            .not_valid_after(not_after)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), False)
            .sign(key, hashes.SHA256())
        )
        return cls(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))

    @property
    def key_pem(self) -> bytes:
        """The CA's private key, PEM (to persist it; never log it)."""
        return _key_pem(self._key)

    def issue(
        self,
        common_name: str,
        *,
        dns_names: Sequence[str] = (),
        ip_addresses: Sequence[str] = (),
        server: bool = True,
        client: bool = False,
        days: int = 365,
        lifetime: datetime.timedelta | None = None,
        now: datetime.datetime | None = None,
    ) -> Issued:
        """A new key and a certificate for it, signed by this CA.

        Args:
            common_name: the subject's CN.
            dns_names: DNS subjectAltNames (e.g. ``localhost``, a Service's names).
            ip_addresses: IP subjectAltNames (e.g. ``127.0.0.1``).
            server: include the serverAuth usage.
            client: include the clientAuth usage (mTLS client certificates).
            days: validity, days (1..3650).
            lifetime: validity from ``now`` instead of ``days`` (10 s..3650 days; short ones
                for tests of renewal).
            now: the issue time (default: the clock).

        Raises:
            ValueError: no usage, a malformed IP address, or ``days``/``lifetime`` out of range.
        """
        not_before, not_after = _validity(days, lifetime, now)
        if not (server or client):
            raise ValueError("a certificate needs serverAuth, clientAuth or both")
        key = ec.generate_private_key(ec.SECP256R1())
        usages = [ExtendedKeyUsageOID.SERVER_AUTH] * server + [
            ExtendedKeyUsageOID.CLIENT_AUTH
        ] * client
        sans: list[x509.GeneralName] = [x509.DNSName(d) for d in dns_names]
        sans += [x509.IPAddress(ipaddress.ip_address(a)) for a in ip_addresses]
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
            .issuer_name(self.cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(not_before)
            .not_valid_after(not_after)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=True,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=False,
                    crl_sign=False,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self._key.public_key()), False
            )
        )
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        cert = builder.sign(self._key, hashes.SHA256())
        return Issued(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))


@dataclasses.dataclass(frozen=True, slots=True)
class LocalTlsFiles:
    """The files ``write_local`` produced."""

    ca_path: pathlib.Path
    cert_path: pathlib.Path
    key_path: pathlib.Path
    client_cert_path: pathlib.Path
    client_key_path: pathlib.Path


def write_local(directory: pathlib.Path, *, hosts: Sequence[str] = ()) -> LocalTlsFiles:
    """A CA and one server+client certificate for processes on this machine, in ``directory``:
    ``ca.pem``, ``ca-key.pem``, ``server.pem``/``server-key.pem`` (SANs ``localhost``,
    ``127.0.0.1``, ``::1`` and ``hosts``) and ``client.pem``/``client-key.pem``. An existing CA
    in ``directory`` is reused (clients that trust it keep working across restarts).

    Raises:
        OSError: the directory is not writable.
        ValueError: an existing CA does not load.
    """
    ca_path, ca_key_path = directory / "ca.pem", directory / "ca-key.pem"
    if ca_path.exists() and ca_key_path.exists():
        ca = CertificateAuthority(ca_path.read_bytes(), ca_key_path.read_bytes())
    else:
        ca = CertificateAuthority.create("Ariane local CA")
        write_atomic(ca_key_path, ca.key_pem, mode=0o600)
        write_atomic(ca_path, ca.cert_pem, mode=0o644)
    dns = ["localhost", *(h for h in hosts if not _is_ip(h))]
    ips = ["127.0.0.1", "::1", *(h for h in hosts if _is_ip(h))]
    server = ca.issue("ariane-server", dns_names=dns, ip_addresses=ips, server=True, client=True)
    files = LocalTlsFiles(
        ca_path=ca_path,
        cert_path=directory / "server.pem",
        key_path=directory / "server-key.pem",
        client_cert_path=directory / "client.pem",
        client_key_path=directory / "client-key.pem",
    )
    server.write(files.cert_path, files.key_path)
    client = ca.issue("ariane-client", server=False, client=True)
    client.write(files.client_cert_path, files.client_key_path)
    return files


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True
