"""A Broker's TLS certificates: the operator's cluster CA and the leaves it issues, or
cert-manager ``Certificate`` objects (``spec.tls.issuerRef``). Strimzi's model, with cert-manager.

Three leaves per Broker (``leaves``), each in a ``kubernetes.io/tls`` Secret with ``tls.crt``,
``tls.key`` and ``ca.crt`` (the trust bundle; cert-manager writes the same keys): the name
servers' (``<b>-namesrv-tls``: the name-server Services, the headless Service and its pods'
names, ``.svc`` and ``.svc.cluster.local`` forms), the brokers' (``<b>-broker-tls``: every
group's headless Service and ``*.<group>.<ns>.svc`` pod names), both serverAuth + clientAuth (a
server's inner connections present it), plus ``localhost``/``127.0.0.1``/``::1`` for probes and
local tools; and the operator's client certificate (``<b>-operator-tls``, for ``clientAuth:
require``).

Without ``issuerRef`` (``ensure``): the CA lives in ``<b>-cluster-ca`` (owned by the Broker):
``ca.crt``/``ca.key`` (the issuing CA), ``next-ca.crt``/``next-ca.key`` while a successor is
being trusted, ``previous-ca.crt`` while its predecessor is retired, ``ca-bundle.crt`` (every CA
trusted now). The CA rolls in three phases (``ca_step``; time injected, pure):

1. **Stable** → at ``RENEW_FRACTION`` of the CA's life a successor is made; **Trusting**: the
   bundle holds both, leaves are still issued by the old CA.
2. After ``overlap`` (the bundle has reached every pod: the kubelet refreshes Secret volumes
   within about a minute) → **Retiring**: the successor issues; every leaf of the old CA is
   re-issued at once (its peers already trust the new CA), and the retirement clock restarts
   whenever such a leaf is re-issued.
3. After ``overlap`` more with no leaf of the old CA left → **Stable**: the old CA leaves the
   bundle (every peer presents a new-CA leaf by then).

A leaf is (re-)issued (``leaf_reason``) when missing, unreadable, not issued by the issuing CA,
its names differ from the wanted ones, or at ``RENEW_FRACTION`` of its life; its lifetime is
capped at the CA's end. Renewal only rewrites the Secret: pod templates name Secrets, never a
certificate's hash, so no pod restarts; the servers re-read the files (``common.tls``).

With ``issuerRef``: one ``cert-manager.io/v1`` ``Certificate`` per leaf (same names, usages,
``secretName``, ``duration``, ``renewBefore`` = a third of it); cert-manager issues, renews and
writes ``ca.crt``; no cluster CA. Missing cert-manager CRDs: the condition says so.

Lifetimes: ``spec.tls.certificateValidityDays``/``caValidityDays``; for tests the annotations
``LEAF_LIFETIME_ANNOTATION``, ``CA_LIFETIME_ANNOTATION`` and ``OVERLAP_ANNOTATION`` (seconds)
override them. RocketMQ has no issuing at all (operators hand-mount a keystore; ``tls.*``
properties, security.md §8): Ariane renews and rolls without a restart.

Ownership (``foreign``): a Secret of one of these names that already exists and is not the
Broker's (its ownerReferences lack the Broker's uid; with ``issuerRef``, also not written by
cert-manager for that Certificate) is never read as ours nor overwritten: whoever can create
Secrets in the namespace could otherwise plant a CA whose key they hold (the operator would
issue from it and trust it, and clients would trust it through ``ca.crt``). The condition says
which Secret and how to fix it; ``client_tls`` and ``trust_bundle`` dial plaintext / hand out no
bundle until then. RBAC cannot restrict Secret reads by a name unknown at install time, so this
check is where the limit is enforced.

Invariants: a private key is never logged, put in status, an event or a condition; a leaf is
only re-issued for a ``leaf_reason``; the bundle in every leaf Secret is the CA Secret's; the
old CA stays trusted until no leaf it issued is served (after ``overlap``); no foreign Secret is
read as a CA, a certificate or a bundle, nor overwritten.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime
import enum
import logging
import pathlib
import tempfile
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, Protocol

from cryptography import x509
from cryptography.exceptions import InvalidSignature

from ariane.grpcwire import tls as grpc_tls
from ariane.operator import model, resources, status
from ariane.security import ca as ca_lib

_log = logging.getLogger(__name__)

RENEW_FRACTION: Final = 2 / 3
"""Part of a certificate's life after which it is renewed (a leaf) or succeeded (the CA)."""
LEAF_LIFETIME_ANNOTATION: Final = "ariane.dev/tls-certificate-lifetime-seconds"
CA_LIFETIME_ANNOTATION: Final = "ariane.dev/tls-ca-lifetime-seconds"
OVERLAP_ANNOTATION: Final = "ariane.dev/tls-trust-overlap-seconds"
"""Annotations (seconds) overriding the leaf and CA lifetimes and the trust overlap."""
DEFAULT_OVERLAP_S: Final = 300
"""Seconds a CA change waits for the bundle to reach every pod (kubelet Secret refresh)."""
PHASE_SINCE_ANNOTATION: Final = "ariane.dev/ca-phase-since"
"""On the CA Secret: when the CA's current phase began (UTC, RFC 3339)."""
CONDITION: Final = "CertificatesReady"
"""Condition type: True when every certificate Secret holds a valid certificate."""
CERT_MANAGER_API: Final = "cert-manager.io/v1"
LIFETIME_S_MAX: Final = ca_lib.VALIDITY_DAYS_MAX * 86_400


class Phase(enum.Enum):
    """Where the cluster CA is in its rollover (module docstring)."""

    STABLE = "Stable"
    TRUSTING = "Trusting"
    RETIRING = "Retiring"


@dataclasses.dataclass(frozen=True, slots=True)
class Lifetimes:
    """How long certificates live and how long a CA change waits."""

    leaf: datetime.timedelta
    ca: datetime.timedelta
    overlap: datetime.timedelta


@dataclasses.dataclass(frozen=True, slots=True)
class Leaf:
    """One certificate the Broker needs: its Secret, subject and usages."""

    secret_name: str
    common_name: str
    dns_names: tuple[str, ...]
    ip_addresses: tuple[str, ...]
    server: bool
    client: bool


@dataclasses.dataclass(frozen=True, slots=True)
class CaState:
    """The cluster CA Secret's content (PEM bytes)."""

    cert_pem: bytes
    key_pem: bytes = dataclasses.field(repr=False)
    since: datetime.datetime
    next_cert_pem: bytes = b""
    next_key_pem: bytes = dataclasses.field(default=b"", repr=False)
    previous_cert_pem: bytes = b""

    @property
    def phase(self) -> Phase:
        """TRUSTING while a successor waits, RETIRING while a predecessor is trusted."""
        if self.next_cert_pem:
            return Phase.TRUSTING
        return Phase.RETIRING if self.previous_cert_pem else Phase.STABLE

    def bundle(self) -> bytes:
        """Every CA certificate trusted now (issuing, successor, predecessor), PEM."""
        parts = (self.cert_pem, self.next_cert_pem, self.previous_cert_pem)
        return b"".join(p if p.endswith(b"\n") else p + b"\n" for p in parts if p)

    def authority(self) -> ca_lib.CertificateAuthority:
        """The issuing CA."""
        return ca_lib.CertificateAuthority(self.cert_pem, self.key_pem)


def _seconds(annotations: Mapping[str, str], key: str, default_s: int) -> datetime.timedelta:
    text = annotations.get(key, "")
    if not text:
        return datetime.timedelta(seconds=default_s)
    if not text.isdigit() or not 10 <= int(text) <= LIFETIME_S_MAX:
        raise model.SpecError(f"annotation {key}={text!r}: seconds in 10..{LIFETIME_S_MAX}")
    return datetime.timedelta(seconds=int(text))


def lifetimes(spec: resources.BrokerSpec, annotations: Mapping[str, str] | None) -> Lifetimes:
    """The Broker's lifetimes (``spec.tls`` days, annotations in seconds win).

    Raises:
        model.SpecError: an annotation is not a number of seconds in range, or a leaf would
            outlive a third of the CA (it could not be renewed before the CA rolls).
    """
    tls = spec.get("tls") or {}
    notes = annotations or {}
    leaf_days = tls.get("certificateValidityDays", resources.DEFAULT_CERTIFICATE_VALIDITY_DAYS)
    ca_days = tls.get("caValidityDays", resources.DEFAULT_CA_VALIDITY_DAYS)
    result = Lifetimes(
        leaf=_seconds(notes, LEAF_LIFETIME_ANNOTATION, leaf_days * 86_400),
        ca=_seconds(notes, CA_LIFETIME_ANNOTATION, ca_days * 86_400),
        overlap=_seconds(notes, OVERLAP_ANNOTATION, DEFAULT_OVERLAP_S),
    )
    if result.leaf > result.ca:
        raise model.SpecError(f"certificate lifetime {result.leaf} exceeds the CA's {result.ca}")
    return result


def _service_names(name: str, namespace: str) -> list[str]:
    base = [name, f"{name}.{namespace}", f"{name}.{namespace}.svc"]
    return [*base, f"{name}.{namespace}.svc.cluster.local"]


def _pod_names(service: str, namespace: str) -> list[str]:
    return [f"*.{service}.{namespace}.svc", f"*.{service}.{namespace}.svc.cluster.local"]


LOCAL_DNS: Final = ("localhost",)
LOCAL_IPS: Final = ("127.0.0.1", "::1")


def leaves(owner: model.Owner, groups: Sequence[str]) -> list[Leaf]:
    """The name servers', the brokers' (every group in ``groups``) and the operator's
    certificate (module docstring)."""
    ns, name = owner.namespace, owner.name
    headless = model.namesrv_headless_name(name)
    namesrv_dns = _service_names(model.namesrv_name(name), ns) + _service_names(headless, ns)
    namesrv_dns += _pod_names(headless, ns)
    broker_dns = [n for g in groups for n in _service_names(g, ns) + _pod_names(g, ns)]
    return [
        Leaf(
            model.namesrv_tls_secret_name(name),
            model.namesrv_name(name),
            (*namesrv_dns, *LOCAL_DNS),
            LOCAL_IPS,
            server=True,
            client=True,
        ),
        Leaf(
            model.broker_tls_secret_name(name),
            f"{name}-broker",
            (*broker_dns, *LOCAL_DNS),
            LOCAL_IPS,
            server=True,
            client=True,
        ),
        Leaf(model.operator_tls_secret_name(name), "ariane-operator", (), (), False, True),
    ]


def _load(pem: bytes) -> x509.Certificate | None:
    try:
        return x509.load_pem_x509_certificate(pem)
    except ValueError:
        return None


def renew_at(cert: x509.Certificate) -> datetime.datetime:
    """When ``cert`` is due: ``RENEW_FRACTION`` of the way from notBefore to notAfter."""
    start, end = cert.not_valid_before_utc, cert.not_valid_after_utc
    return start + (end - start) * RENEW_FRACTION


def _names(cert: x509.Certificate) -> tuple[set[str], set[str]]:
    try:
        sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return set(), set()
    dns = set(sans.get_values_for_type(x509.DNSName))
    ips = {str(ip) for ip in sans.get_values_for_type(x509.IPAddress)}
    return dns, ips


def issued_by(cert: x509.Certificate, ca_pem: bytes) -> bool:
    """Whether ``ca_pem``'s key signed ``cert`` (its issuer name matches, signature verifies)."""
    authority = _load(ca_pem)
    if authority is None:
        return False
    try:
        cert.verify_directly_issued_by(authority)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def leaf_reason(cert_pem: bytes, state: CaState, leaf: Leaf, now: datetime.datetime) -> str:
    """Why ``leaf`` must be (re-)issued now, or ``""`` when its certificate stands."""
    if not cert_pem:
        return "missing"
    cert = _load(cert_pem)
    if cert is None:
        return "unreadable"
    if not issued_by(cert, state.cert_pem):
        return "not issued by the issuing CA"
    if _names(cert) != (set(leaf.dns_names), set(leaf.ip_addresses)):
        return "its names changed"
    if now >= renew_at(cert):
        return f"due for renewal (expires {_timestamp(cert.not_valid_after_utc)})"
    return ""


CaFactory = Callable[[datetime.datetime, datetime.timedelta], ca_lib.CertificateAuthority]


def _new_ca(owner: model.Owner) -> CaFactory:
    def make(now: datetime.datetime, lifetime: datetime.timedelta) -> ca_lib.CertificateAuthority:
        name = f"Ariane cluster CA {owner.namespace}/{owner.name} {now:%Y%m%dT%H%M%S}"
        return ca_lib.CertificateAuthority.create(name, lifetime=lifetime, now=now)

    return make


def ca_step(
    state: CaState | None,
    now: datetime.datetime,
    times: Lifetimes,
    make_ca: CaFactory,
    *,
    old_leaves: bool,
) -> tuple[CaState, str]:
    """The CA's next state (module docstring) and what changed (``""``: nothing).

    Args:
        state: the CA Secret's content, ``None`` when there is none.
        now: the time of this reconcile.
        times: the lifetimes and overlap.
        make_ca: makes a CA valid from ``now`` for a lifetime.
        old_leaves: some leaf Secret still holds a certificate the predecessor issued (the
            predecessor stays trusted).
    """
    if state is None:
        made = make_ca(now, times.ca)
        return CaState(made.cert_pem, made.key_pem, now), "created the cluster CA"
    phase, waited = state.phase, now - state.since
    if phase is Phase.STABLE:
        cert = _load(state.cert_pem)
        if cert is not None and now < renew_at(cert):
            return state, ""
        made = make_ca(now, times.ca)
        trusting = dataclasses.replace(
            state, since=now, next_cert_pem=made.cert_pem, next_key_pem=made.key_pem
        )
        return trusting, "made a successor CA; trusting both until the bundle propagated"
    if phase is Phase.TRUSTING:
        if waited < times.overlap:
            return state, ""
        swapped = CaState(state.next_cert_pem, state.next_key_pem, now, b"", b"", state.cert_pem)
        return swapped, "the successor CA issues now; re-issuing the leaves"
    if waited < times.overlap or old_leaves:
        return state, ""
    return CaState(state.cert_pem, state.key_pem, now), "retired the previous CA from the bundle"


def issue(
    state: CaState, leaf: Leaf, now: datetime.datetime, lifetime: datetime.timedelta
) -> ca_lib.Issued:
    """A new certificate for ``leaf`` from the issuing CA, living ``lifetime`` but never past
    the CA's own end."""
    authority = state.authority()
    left = authority.cert.not_valid_after_utc - now
    return authority.issue(
        leaf.common_name,
        dns_names=leaf.dns_names,
        ip_addresses=leaf.ip_addresses,
        server=leaf.server,
        client=leaf.client,
        lifetime=max(ca_lib.LIFETIME_MIN, min(lifetime, left)),
        now=now,
    )


def _timestamp(when: datetime.datetime) -> str:
    return when.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse_time(text: str) -> datetime.datetime | None:
    try:
        return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def _data(secret: Mapping[str, Any], key: str) -> bytes:
    value = (secret.get("data") or {}).get(key)
    return base64.b64decode(value) if value else b""


def _encoded(data: Mapping[str, bytes]) -> dict[str, str]:
    return {k: base64.b64encode(v).decode() for k, v in data.items() if v}


def ca_state(secret: Mapping[str, Any], now: datetime.datetime) -> CaState | None:
    """The CA Secret's content, ``None`` when absent or without ``ca.crt``/``ca.key``."""
    cert, key = _data(secret, "ca.crt"), _data(secret, "ca.key")
    if not cert or not key:
        return None
    since_text = (secret.get("metadata", {}).get("annotations") or {}).get(PHASE_SINCE_ANNOTATION)
    since = _parse_time(since_text or "") or now
    return CaState(
        cert,
        key,
        since,
        _data(secret, "next-ca.crt"),
        _data(secret, "next-ca.key"),
        _data(secret, "previous-ca.crt"),
    )


def _metadata(owner: model.Owner, name: str) -> dict[str, Any]:
    return {
        "name": name,
        "namespace": owner.namespace,
        "labels": model.labels(owner, "tls"),
        "ownerReferences": [owner.reference()],
    }


def ca_secret(owner: model.Owner, state: CaState) -> resources.Manifest:
    """The cluster CA Secret of ``state`` (owned by the Broker)."""
    metadata = _metadata(owner, model.cluster_ca_secret_name(owner.name))
    metadata["annotations"] = {PHASE_SINCE_ANNOTATION: _timestamp(state.since)}
    data = {
        "ca.crt": state.cert_pem,
        "ca.key": state.key_pem,
        "next-ca.crt": state.next_cert_pem,
        "next-ca.key": state.next_key_pem,
        "previous-ca.crt": state.previous_cert_pem,
        "ca-bundle.crt": state.bundle(),
    }
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": metadata,
        "data": _encoded(data),
    }


def leaf_secret(
    owner: model.Owner, leaf: Leaf, cert_pem: bytes, key_pem: bytes, bundle: bytes
) -> resources.Manifest:
    """A leaf's ``kubernetes.io/tls`` Secret: ``tls.crt``, ``tls.key``, ``ca.crt`` (bundle)."""
    data = {model.TLS_CERT_FILE: cert_pem, model.TLS_KEY_FILE: key_pem, model.TLS_CA_FILE: bundle}
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/tls",
        "metadata": _metadata(owner, leaf.secret_name),
        "data": _encoded(data),
    }


def certificate(
    owner: model.Owner, leaf: Leaf, issuer: resources.IssuerRefSpec, times: Lifetimes
) -> resources.Manifest:
    """The cert-manager ``Certificate`` of ``leaf`` (renewed at ``RENEW_FRACTION``)."""
    usages = ["digital signature", "key encipherment"]
    usages += ["server auth"] * leaf.server + ["client auth"] * leaf.client
    spec: dict[str, Any] = {
        "secretName": leaf.secret_name,
        "commonName": leaf.common_name,
        "duration": f"{int(times.leaf.total_seconds())}s",
        "renewBefore": f"{int(times.leaf.total_seconds() * (1 - RENEW_FRACTION))}s",
        "privateKey": {"algorithm": "ECDSA", "size": 256, "rotationPolicy": "Always"},
        "usages": usages,
        "issuerRef": {
            "name": issuer["name"],
            "kind": issuer.get("kind", "Issuer"),
            "group": issuer.get("group", "cert-manager.io"),
        },
    }
    if leaf.dns_names:
        spec["dnsNames"] = list(leaf.dns_names)
    if leaf.ip_addresses:
        spec["ipAddresses"] = list(leaf.ip_addresses)
    return {
        "apiVersion": CERT_MANAGER_API,
        "kind": "Certificate",
        "metadata": _metadata(owner, leaf.secret_name),
        "spec": spec,
    }


class CertKube(Protocol):
    """The Kubernetes calls ``ensure`` makes (``kube.Kube`` has them)."""

    def get(self, api_version: str, kind: str, namespace: str, name: str) -> dict[str, Any]: ...

    def apply(self, manifest: dict[str, Any]) -> dict[str, Any]: ...

    def serves(self, api_version: str, kind: str) -> bool: ...


@dataclasses.dataclass(slots=True)
class Outcome:
    """What ``ensure`` did: the ``status.tls`` to write, its condition, the events to post."""

    tls: dict[str, Any]
    ready: bool
    reason: str
    message: str
    notes: list[str] = dataclasses.field(default_factory=list)


CERT_MANAGER_NAME_ANNOTATION: Final = "cert-manager.io/certificate-name"
"""The annotation cert-manager puts on a Secret it writes: the Certificate's name."""


def foreign(secret: Mapping[str, Any], owner_uid: str, *, cert_manager: bool = False) -> bool:
    """Whether an existing ``secret`` is not this Broker's (``{}``: absent, not foreign): its
    ownerReferences lack ``owner_uid`` and, when ``cert_manager``, cert-manager did not write it
    for the Certificate of the same name (the operator names each Certificate after its Secret).
    """
    meta = secret.get("metadata") or {}
    if not meta:
        return False
    if any(ref.get("uid") == owner_uid for ref in meta.get("ownerReferences") or []):
        return False
    made_by = (meta.get("annotations") or {}).get(CERT_MANAGER_NAME_ANNOTATION)
    return not (cert_manager and made_by == meta.get("name"))


def _refused(issuer: str, names: Sequence[str]) -> Outcome:
    message = (
        f"Secret(s) {', '.join(names)} exist but are not owned by this Broker: the operator "
        "neither trusts nor overwrites them; delete them (or rename the Broker) and the next "
        "reconcile issues its own"
    )
    return Outcome({"issuer": issuer, "certificates": []}, False, "SecretNotOwned", message)


def _cert_status(name: str, cert_pem: bytes) -> dict[str, Any]:
    cert = _load(cert_pem)
    if cert is None:
        return {"secretName": name}
    return {
        "secretName": name,
        "notAfter": _timestamp(cert.not_valid_after_utc),
        "renewAfter": _timestamp(renew_at(cert)),
        "issuer": cert.issuer.rfc4514_string()[:256],
    }


def ensure(
    client: CertKube,
    owner: model.Owner,
    spec: resources.BrokerSpec,
    annotations: Mapping[str, str] | None,
    now: datetime.datetime,
    make_ca: CaFactory | None = None,
) -> Outcome | None:
    """Brings the Broker's certificates to where ``spec.tls`` wants them (module docstring);
    ``None`` when TLS is disabled.

    Raises:
        model.SpecError: a lifetime annotation is malformed.
        kubernetes.client.ApiException: a read or an apply failed (retried next reconcile).
    """
    tls = model.tls_spec(spec)
    if tls["mode"] == "disabled":
        return None
    times = lifetimes(spec, annotations)
    groups = model.group_names(owner.name, spec.get("groups", resources.DEFAULT_GROUPS))
    wanted = leaves(owner, groups)
    if "issuerRef" in tls:
        return _ensure_cert_manager(client, owner, tls["issuerRef"], wanted, times)
    return _ensure_cluster_ca(client, owner, wanted, times, now, make_ca or _new_ca(owner))


def _ensure_cluster_ca(
    client: CertKube,
    owner: model.Owner,
    wanted: Sequence[Leaf],
    times: Lifetimes,
    now: datetime.datetime,
    make_ca: CaFactory,
) -> Outcome:
    ns = owner.namespace
    live = {leaf.secret_name: client.get("v1", "Secret", ns, leaf.secret_name) for leaf in wanted}
    ca_name = model.cluster_ca_secret_name(owner.name)
    ca_live = client.get("v1", "Secret", ns, ca_name)
    alien = [n for n, s in {ca_name: ca_live, **live}.items() if foreign(s, owner.uid)]
    if alien:
        return _refused("ClusterCA", alien)
    before = ca_state(ca_live, now)
    old_leaves = before is not None and any(
        (cert := _load(_data(s, model.TLS_CERT_FILE))) is not None
        and issued_by(cert, before.previous_cert_pem)
        for s in live.values()
    )
    state, change = ca_step(before, now, times, make_ca, old_leaves=old_leaves)
    notes = [change] if change else []
    reissued_old = False
    certificates = []
    for leaf in wanted:
        cert_pem, key_pem = _data(live[leaf.secret_name], model.TLS_CERT_FILE), b""
        reason = leaf_reason(cert_pem, state, leaf, now)
        if reason:
            old = _load(cert_pem)
            reissued_old |= old is not None and issued_by(old, state.previous_cert_pem)
            issued = issue(state, leaf, now, times.leaf)
            cert_pem, key_pem = issued.cert_pem, issued.key_pem
            notes.append(f"issued {leaf.secret_name}: {reason}")
        else:
            key_pem = _data(live[leaf.secret_name], model.TLS_KEY_FILE)
        client.apply(leaf_secret(owner, leaf, cert_pem, key_pem, state.bundle()))
        certificates.append(_cert_status(leaf.secret_name, cert_pem))
    if reissued_old and state.phase is Phase.RETIRING:
        state = dataclasses.replace(state, since=now)  # the overlap starts again
    client.apply(ca_secret(owner, state))  # after the leaves: a crash re-runs the same step
    for note in notes:
        _log.info("broker %s/%s: %s", owner.namespace, owner.name, note)
    ca_cert = state.authority().cert
    result = {
        "issuer": "ClusterCA",
        "caSecretName": model.cluster_ca_secret_name(owner.name),
        "caNotAfter": _timestamp(ca_cert.not_valid_after_utc),
        "caPhase": state.phase.value,
        "certificates": certificates,
    }
    message = f"{len(certificates)} certificates from the cluster CA ({state.phase.value})"
    return Outcome(result, True, "Issued", message, notes)


def _ensure_cert_manager(
    client: CertKube,
    owner: model.Owner,
    issuer: resources.IssuerRefSpec,
    wanted: Sequence[Leaf],
    times: Lifetimes,
) -> Outcome:
    where = f"{issuer.get('kind', 'Issuer')}/{issuer['name']}"
    result: dict[str, Any] = {"issuer": where, "certificates": []}
    if not client.serves(CERT_MANAGER_API, "Certificate"):
        message = "spec.tls.issuerRef is set but the cert-manager CRDs are not installed"
        return Outcome(result, False, "CertManagerMissing", message)
    live = {
        s: client.get("v1", "Secret", owner.namespace, s) for s in (f.secret_name for f in wanted)
    }
    alien = [n for n, s in live.items() if foreign(s, owner.uid, cert_manager=True)]
    if alien:
        return _refused(where, alien)
    missing = []
    for leaf in wanted:
        client.apply(certificate(owner, leaf, issuer, times))
        secret = client.get("v1", "Secret", owner.namespace, leaf.secret_name)
        cert_pem = _data(secret, model.TLS_CERT_FILE)
        if not cert_pem:
            missing.append(leaf.secret_name)
        result["certificates"].append(_cert_status(leaf.secret_name, cert_pem))
    if missing:
        message = f"waiting for cert-manager ({where}) to fill {', '.join(missing)}"
        return Outcome(result, False, "WaitingForCertManager", message)
    return Outcome(result, True, "Issued", f"{len(wanted)} certificates from {where}")


def condition(outcome: Outcome, generation: int, now: datetime.datetime) -> dict[str, Any]:
    """The ``CONDITION`` condition of ``outcome``."""
    return status.condition(
        CONDITION, outcome.ready, outcome.reason, outcome.message, generation, now
    )


CLIENT_FILES_DIR: Final = pathlib.Path(tempfile.gettempdir()) / "ariane-operator-tls"
"""Where the operator writes each Broker's bundle and client certificate for its own calls
(``<dir>/<namespace>/<broker>/``; ``/tmp`` is an emptyDir in the chart's Deployment)."""


def client_tls(
    client: CertKube,
    namespace: str,
    name: str,
    broker: Mapping[str, Any],
    *,
    directory: pathlib.Path = CLIENT_FILES_DIR,
    override: grpc_tls.ClientTls | None = None,
) -> grpc_tls.ClientTls | None:
    """The TLS the operator's own calls to Broker ``name`` use (blocking: a Kubernetes read).

    ``override`` (``OperatorSettings.client_tls``: ``ARIANE_TLS`` set, in tests and
    out-of-cluster runs): that. Else a Broker with
    ``spec.tls.mode: enforcing`` is dialled with its trust bundle and the operator's client
    certificate (``<b>-operator-tls``, written to files under ``directory``, rewritten only
    when they change); ``permissive``/``disabled``: plaintext (``None``), as is an enforcing
    Broker whose Secret is not there yet (the next reconcile dials TLS).

    Raises:
        kubernetes.client.ApiException: the Secret could not be read.
        OSError: ``directory`` is not writable.
    """
    if override is not None:
        return override
    spec = broker.get("spec", {})
    if model.tls_spec(spec)["mode"] != "enforcing":
        return None
    secret = client.get("v1", "Secret", namespace, model.operator_tls_secret_name(name))
    uid = str((broker.get("metadata") or {}).get("uid", ""))
    if foreign(secret, uid, cert_manager="issuerRef" in model.tls_spec(spec)):
        _log.warning(
            "broker %s/%s: its operator TLS Secret is not its own; plaintext", namespace, name
        )
        return None
    files = {
        key: _data(secret, key)
        for key in (model.TLS_CA_FILE, model.TLS_CERT_FILE, model.TLS_KEY_FILE)
    }
    if not all(files.values()):
        _log.info("broker %s/%s: no client certificate yet; plaintext", namespace, name)
        return None
    where = directory / namespace / name
    for key, content in files.items():
        path = where / key
        if not path.exists() or path.read_bytes() != content:
            ca_lib.write_atomic(path, content, mode=0o600)
    return grpc_tls.ClientTls(
        ca_file=str(where / model.TLS_CA_FILE),
        cert_path=str(where / model.TLS_CERT_FILE),
        key_path=str(where / model.TLS_KEY_FILE),
    )


def trust_bundle(client: CertKube, namespace: str, broker: Mapping[str, Any]) -> str:
    """The trust bundle clients of ``broker`` (the Broker object) verify its servers with
    (``ca.crt`` of its name servers' Secret, the same in every leaf Secret), ``""`` when there
    is none yet or that Secret is not the Broker's (``foreign``).

    Raises:
        kubernetes.client.ApiException: the Secret could not be read.
    """
    meta = broker.get("metadata") or {}
    name = str(meta.get("name", ""))
    secret = client.get("v1", "Secret", namespace, model.namesrv_tls_secret_name(name))
    cert_manager = "issuerRef" in model.tls_spec(broker.get("spec", {}))
    if foreign(secret, str(meta.get("uid", "")), cert_manager=cert_manager):
        _log.warning("broker %s/%s: its name servers' TLS Secret is not its own", namespace, name)
        return ""
    return _data(secret, model.TLS_CA_FILE).decode()
