"""The test cluster's PKI, made with openssl: one CA, the apiserver serving cert, an admin client.

Layout under the directory given (all PEM): ``ca.{crt,key}``; ``apiserver.{crt,key}`` for
127.0.0.1/localhost (plus the first service IP, which nothing dials); ``admin.{crt,key}`` with
``O=system:masters`` (full access through RBAC's built-in binding); ``sa.{key,pub}``, the
service-account token signing pair. Keys are RSA 2048 and valid ten years: the directory lives
only as long as one test session.
"""

from __future__ import annotations

import dataclasses
import pathlib
import subprocess
from collections.abc import Sequence

VALIDITY_DAYS = 3650
RSA_BITS = 2048


@dataclasses.dataclass(frozen=True, slots=True)
class Pki:
    """Paths of the PEM files of one test cluster."""

    ca_cert: pathlib.Path
    """CA that signs the serving and client certificates (``--client-ca-file``)."""
    ca_key: pathlib.Path
    """Its key (KCM's root CA file is the certificate; the key stays here)."""
    apiserver_cert: pathlib.Path
    """kube-apiserver serving certificate for 127.0.0.1 and localhost."""
    apiserver_key: pathlib.Path
    """Its key."""
    admin_cert: pathlib.Path
    """Client certificate ``CN=admin, O=system:masters`` used by every component and test."""
    admin_key: pathlib.Path
    """Its key."""
    sa_key: pathlib.Path
    """Service-account token signing key (apiserver and KCM)."""
    sa_pub: pathlib.Path
    """Its public half (apiserver ``--service-account-key-file``)."""


def _openssl(cwd: pathlib.Path, *args: str) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def _signed(cwd: pathlib.Path, name: str, subject: str, extensions: str) -> None:
    """Makes ``name.{key,crt}``: a fresh key and a certificate signed by ca.{crt,key}."""
    (cwd / f"{name}.ext").write_text(extensions)
    key_and_request = f"req -newkey rsa:{RSA_BITS} -nodes -keyout {name}.key -out {name}.csr"
    _openssl(cwd, *key_and_request.split(), "-subj", subject)
    sign = (
        f"x509 -req -in {name}.csr -CA ca.crt -CAkey ca.key -CAcreateserial"
        f" -days {VALIDITY_DAYS} -out {name}.crt -extfile {name}.ext"
    )
    _openssl(cwd, *sign.split())


def make_pki(
    directory: pathlib.Path, extra_sans: Sequence[str] = (), node_name: str | None = None
) -> Pki:
    """Creates the cluster's keys and certificates in ``directory`` (created if missing).

    Args:
        directory: where the PEM files go.
        extra_sans: more subjectAltName entries for the apiserver (``IP:...``/``DNS:...``), e.g.
            the bridge IP and service IP of the real test node.
        node_name: also make ``kubelet.{crt,key}``: ``CN=system:node:<name>, O=system:nodes``
            (the Node authorizer's identity), serving and client, for the same addresses.

    Raises:
        subprocess.CalledProcessError: openssl failed.
    """
    directory.mkdir(parents=True, exist_ok=True)
    ca = f"req -x509 -newkey rsa:{RSA_BITS} -nodes -keyout ca.key -out ca.crt -days {VALIDITY_DAYS}"
    _openssl(directory, *ca.split(), "-subj", "/CN=ariane-test-ca")
    _signed(
        directory,
        "apiserver",
        "/CN=kube-apiserver",
        "subjectAltName=IP:127.0.0.1,IP:10.0.0.1,DNS:localhost,DNS:kubernetes.default.svc"
        + "".join(f",{san}" for san in extra_sans)
        + "\nextendedKeyUsage=serverAuth\n",
    )
    if node_name is not None:
        node_ips = ",".join(san for san in extra_sans if san.startswith("IP:"))
        _signed(
            directory,
            "kubelet",
            f"/O=system:nodes/CN=system:node:{node_name}",
            f"subjectAltName=DNS:{node_name},IP:127.0.0.1{',' + node_ips if node_ips else ''}\n"
            "extendedKeyUsage=serverAuth,clientAuth\n",
        )
    _signed(directory, "admin", "/O=system:masters/CN=admin", "extendedKeyUsage=clientAuth\n")
    _openssl(directory, "genrsa", "-out", "sa.key", str(RSA_BITS))
    _openssl(directory, "rsa", "-in", "sa.key", "-pubout", "-out", "sa.pub")
    return Pki(
        ca_cert=directory / "ca.crt",
        ca_key=directory / "ca.key",
        apiserver_cert=directory / "apiserver.crt",
        apiserver_key=directory / "apiserver.key",
        admin_cert=directory / "admin.crt",
        admin_key=directory / "admin.key",
        sa_key=directory / "sa.key",
        sa_pub=directory / "sa.pub",
    )
