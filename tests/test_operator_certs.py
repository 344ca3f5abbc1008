"""The operator's certificates (``operator.certs``): issue, renewal and CA rollover decisions
with the time injected, ``ensure`` over an in-memory apiserver, the TLS the model renders into
the pods, cert-manager Certificates, and the TLS the operator's own calls dial with."""

from __future__ import annotations

import base64
import datetime
import pathlib
import tomllib
from typing import Any

import pytest
from cryptography import x509

from ariane.grpcwire import tls as grpc_tls
from ariane.operator import certs, model, resources
from ariane.security import ca as ca_lib

OWNER = model.Owner("demo", "mq", "uid-1")
T0 = datetime.datetime(2030, 1, 1, tzinfo=datetime.UTC)
TIMES = certs.Lifetimes(
    leaf=datetime.timedelta(seconds=300),
    ca=datetime.timedelta(seconds=3000),
    overlap=datetime.timedelta(seconds=60),
)
ANNOTATIONS = {
    certs.LEAF_LIFETIME_ANNOTATION: "300",
    certs.CA_LIFETIME_ANNOTATION: "3000",
    certs.OVERLAP_ANNOTATION: "60",
}
TLS_SPEC: resources.BrokerSpec = {"groups": 2, "tls": {"mode": "enforcing"}}


class FakeKube:
    """An in-memory apiserver: apply replaces the object (what server-side apply of the whole
    manifest by one manager does), get answers ``{}`` when absent."""

    def __init__(self, served: bool = True) -> None:
        self.objects: dict[tuple[str, str, str], dict[str, Any]] = {}
        self.served = served
        self.applies = 0

    def get(self, api_version: str, kind: str, namespace: str, name: str) -> dict[str, Any]:
        return dict(self.objects.get((kind, namespace, name), {}))

    def apply(self, manifest: dict[str, Any]) -> dict[str, Any]:
        meta = manifest["metadata"]
        self.objects[(manifest["kind"], meta["namespace"], meta["name"])] = manifest
        self.applies += 1
        return manifest

    def serves(self, api_version: str, kind: str) -> bool:
        return self.served

    def secret(self, name: str) -> dict[str, bytes]:
        found = self.objects[("Secret", "mq", name)]
        return {k: base64.b64decode(v) for k, v in found["data"].items()}


def _make_ca(now: datetime.datetime, lifetime: datetime.timedelta) -> ca_lib.CertificateAuthority:
    return ca_lib.CertificateAuthority.create("test CA", lifetime=lifetime, now=now)


def _ensure(kube: FakeKube, now: datetime.datetime, spec: Any = TLS_SPEC) -> certs.Outcome:
    outcome = certs.ensure(kube, OWNER, spec, ANNOTATIONS, now, make_ca=_make_ca)
    assert outcome is not None
    return outcome


def _cert(pem: bytes) -> x509.Certificate:
    return x509.load_pem_x509_certificate(pem)


def _bundle_count(pem: bytes) -> int:
    return pem.count(b"BEGIN CERTIFICATE")


def test_leaves_name_every_service_headless_pod_and_local_name() -> None:
    """The name servers' certificate names their Services, headless pods and localhost; the
    brokers' every group's headless Service and pod names; the operator's is client-only."""
    namesrv, broker, operator = certs.leaves(OWNER, ["demo-a", "demo-b"])
    assert {"demo-namesrv.mq.svc", "demo-namesrv.mq.svc.cluster.local"} <= set(namesrv.dns_names)
    assert {"demo-namesrv-pods.mq.svc", "*.demo-namesrv-pods.mq.svc"} <= set(namesrv.dns_names)
    assert {"*.demo-a.mq.svc", "*.demo-b.mq.svc.cluster.local", "localhost"} <= set(
        broker.dns_names
    )
    assert broker.ip_addresses == ("127.0.0.1", "::1") and broker.server and broker.client
    assert operator.client and not operator.server and not operator.dns_names


def test_ca_rolls_in_three_phases_with_an_overlap() -> None:
    """Stable until 2/3 of the CA's life; then the successor is trusted but does not issue;
    after the overlap it issues and the predecessor stays trusted while leaves of it remain;
    after another overlap with none left the predecessor leaves the bundle."""
    state, change = certs.ca_step(None, T0, TIMES, _make_ca, old_leaves=False)
    assert change == "created the cluster CA" and state.phase is certs.Phase.STABLE
    first = state.cert_pem
    due = certs.renew_at(_cert(first))
    assert due == T0 - TIMES.ca / 10 + (TIMES.ca * 11 / 10) * 2 / 3  # backdated a tenth
    same, change = certs.ca_step(state, due - datetime.timedelta(seconds=1), TIMES, _make_ca,
                                 old_leaves=False)  # fmt: skip
    assert same is state and change == ""
    trusting, change = certs.ca_step(state, due, TIMES, _make_ca, old_leaves=False)
    assert trusting.phase is certs.Phase.TRUSTING and trusting.cert_pem == first
    assert _bundle_count(trusting.bundle()) == 2
    early = due + TIMES.overlap - datetime.timedelta(seconds=1)
    assert certs.ca_step(trusting, early, TIMES, _make_ca, old_leaves=False)[0] is trusting
    swapped, _ = certs.ca_step(trusting, due + TIMES.overlap, TIMES, _make_ca, old_leaves=False)
    assert swapped.phase is certs.Phase.RETIRING
    assert swapped.cert_pem == trusting.next_cert_pem and swapped.previous_cert_pem == first
    assert _bundle_count(swapped.bundle()) == 2
    later = due + TIMES.overlap * 2
    kept, _ = certs.ca_step(swapped, later, TIMES, _make_ca, old_leaves=True)
    assert kept is swapped
    stable, change = certs.ca_step(swapped, later, TIMES, _make_ca, old_leaves=False)
    assert stable.phase is certs.Phase.STABLE and stable.cert_pem == swapped.cert_pem
    assert _bundle_count(stable.bundle()) == 1 and "retired" in change


def test_leaf_reasons() -> None:
    """A leaf is re-issued when missing, from another CA, renamed, or at 2/3 of its life."""
    state, _ = certs.ca_step(None, T0, TIMES, _make_ca, old_leaves=False)
    leaf = certs.leaves(OWNER, ["demo-a"])[1]
    issued = certs.issue(state, leaf, T0, TIMES.leaf)
    assert certs.leaf_reason(b"", state, leaf, T0) == "missing"
    assert certs.leaf_reason(issued.cert_pem, state, leaf, T0) == ""
    due = certs.renew_at(_cert(issued.cert_pem))
    assert T0 < due < T0 + TIMES.leaf * 2 / 3  # backdated a tenth of its life
    assert (
        certs.leaf_reason(issued.cert_pem, state, leaf, due - datetime.timedelta(seconds=1)) == ""
    )
    assert certs.leaf_reason(issued.cert_pem, state, leaf, due).startswith("due for renewal")
    renamed = certs.leaves(OWNER, ["demo-a", "demo-b"])[1]
    assert certs.leaf_reason(issued.cert_pem, state, renamed, T0) == "its names changed"
    other, _ = certs.ca_step(None, T0, TIMES, _make_ca, old_leaves=False)
    assert certs.leaf_reason(issued.cert_pem, other, leaf, T0) == "not issued by the issuing CA"


def test_ensure_issues_renews_in_place_and_rolls_the_ca() -> None:
    """First run: the CA and three leaf Secrets (bundle = the CA); a rerun changes nothing; at
    2/3 of a leaf's life a new key and certificate land in the same Secret, and the pod
    templates are the same objects before and after; a CA rollover re-issues every leaf from
    the successor while both CAs are trusted, then drops the predecessor."""
    kube = FakeKube()
    outcome = _ensure(kube, T0)
    assert outcome.ready and outcome.tls["caPhase"] == "Stable"
    broker = kube.secret("demo-broker-tls")
    ca_pem = kube.secret("demo-cluster-ca")["ca.crt"]
    assert broker["ca.crt"] == ca_pem and certs.issued_by(_cert(broker["tls.crt"]), ca_pem)
    assert kube.objects[("Secret", "mq", "demo-broker-tls")]["type"] == "kubernetes.io/tls"
    assert _ensure(kube, T0 + datetime.timedelta(seconds=10)).notes == []
    assert kube.secret("demo-broker-tls") == broker
    templates = model.desired_objects(OWNER, TLS_SPEC)

    renewed_at = certs.renew_at(_cert(broker["tls.crt"]))
    notes = _ensure(kube, renewed_at).notes
    renewed = kube.secret("demo-broker-tls")
    assert any(n.startswith("issued demo-broker-tls: due for renewal") for n in notes), notes
    assert renewed["tls.key"] != broker["tls.key"] and renewed["ca.crt"] == ca_pem
    assert _cert(renewed["tls.crt"]).not_valid_before_utc >= renewed_at - TIMES.leaf / 10
    assert model.desired_objects(OWNER, TLS_SPEC) == templates

    due = certs.renew_at(_cert(ca_pem))
    assert _ensure(kube, due).tls["caPhase"] == "Trusting"
    assert _bundle_count(kube.secret("demo-broker-tls")["ca.crt"]) == 2
    assert certs.issued_by(_cert(kube.secret("demo-broker-tls")["tls.crt"]), ca_pem)
    assert _ensure(kube, due + TIMES.overlap).tls["caPhase"] == "Retiring"
    new_ca = kube.secret("demo-cluster-ca")["ca.crt"]
    assert new_ca != ca_pem
    for name in ("demo-namesrv-tls", "demo-broker-tls", "demo-operator-tls"):
        assert certs.issued_by(_cert(kube.secret(name)["tls.crt"]), new_ca), name
        assert _bundle_count(kube.secret(name)["ca.crt"]) == 2
    assert _ensure(kube, due + TIMES.overlap * 2).tls["caPhase"] == "Stable"
    assert kube.secret("demo-broker-tls")["ca.crt"] == new_ca


def test_model_renders_tls_into_both_kinds_of_pod() -> None:
    """With spec.tls the brokers' and name servers' TOML has [tls] on the mounted Secret's
    files and both mount their Secret as a directory; without it nothing of TLS appears."""
    objects = {
        (m["kind"], m["metadata"]["name"]): m for m in model.desired_objects(OWNER, TLS_SPEC)
    }
    broker_toml = tomllib.loads(objects[("ConfigMap", "demo-config")]["data"]["broker.toml"])
    assert broker_toml["tls"] == {
        "server_mode": "enforcing",
        "cert_path": "/etc/ariane/tls/tls.crt",
        "key_path": "/etc/ariane/tls/tls.key",
        "trust_cert_path": "/etc/ariane/tls/ca.crt",
        "need_client_auth": "none",
    }
    namesrv_toml = objects[("ConfigMap", "demo-namesrv-config")]["data"]["namesrv.toml"]
    assert tomllib.loads(namesrv_toml)["tls"] == broker_toml["tls"]
    sts = objects[("StatefulSet", "demo-a")]["spec"]["template"]["spec"]
    assert {
        "name": "tls",
        "secret": {"secretName": "demo-broker-tls", "defaultMode": 0o440},
    } in sts["volumes"]
    deployment = objects[("Deployment", "demo-namesrv")]["spec"]["template"]["spec"]
    assert "--config" in deployment["containers"][0]["args"]
    assert any(
        v.get("secret", {}).get("secretName") == "demo-namesrv-tls" for v in deployment["volumes"]
    )
    plain = repr(model.desired_objects(OWNER, {"groups": 2}))
    assert "tls" not in plain
    with pytest.raises(model.SpecError, match="tls"):
        model.desired_objects(OWNER, {"tls": {}, "config": {"tls": {"server_mode": "disabled"}}})


def test_issuer_ref_creates_certificates_instead() -> None:
    """With issuerRef: a cert-manager Certificate per leaf (names, usages, renewBefore a third
    of the duration), no CA Secret; not Ready until cert-manager fills the Secrets, and a
    missing cert-manager is said so."""
    spec: resources.BrokerSpec = {
        "tls": {"issuerRef": {"name": "corp", "kind": "ClusterIssuer"}},
    }
    kube = FakeKube()
    outcome = _ensure(kube, T0, spec)
    assert not outcome.ready and outcome.reason == "WaitingForCertManager"
    cert = kube.objects[("Certificate", "mq", "demo-broker-tls")]
    assert cert["spec"]["secretName"] == "demo-broker-tls"
    assert cert["spec"]["issuerRef"] == {
        "name": "corp",
        "kind": "ClusterIssuer",
        "group": "cert-manager.io",
    }
    assert cert["spec"]["duration"] == "300s" and cert["spec"]["renewBefore"] == "100s"
    assert "*.demo-a.mq.svc" in cert["spec"]["dnsNames"]
    assert "server auth" in cert["spec"]["usages"] and "client auth" in cert["spec"]["usages"]
    assert ("Secret", "mq", "demo-cluster-ca") not in kube.objects
    missing = _ensure(FakeKube(served=False), T0, spec)
    assert missing.reason == "CertManagerMissing"


def test_lifetime_annotations_are_checked() -> None:
    """A malformed or out-of-range lifetime annotation is a spec error, as is a leaf longer
    than the CA."""
    with pytest.raises(model.SpecError, match="seconds"):
        certs.lifetimes({}, {certs.LEAF_LIFETIME_ANNOTATION: "soon"})
    with pytest.raises(model.SpecError, match="exceeds"):
        certs.lifetimes({}, {certs.CA_LIFETIME_ANNOTATION: "60"})


def test_operator_client_tls_follows_the_broker(tmp_path: pathlib.Path) -> None:
    """ARIANE_TLS wins; an enforcing Broker is dialled with its bundle and the operator's
    client certificate written to files; permissive or disabled Brokers plaintext."""
    kube = FakeKube()
    _ensure(kube, T0)
    broker = {"metadata": {"name": "demo", "uid": OWNER.uid}, "spec": TLS_SPEC}
    dialled = certs.client_tls(kube, "mq", "demo", broker, directory=tmp_path)
    assert dialled is not None
    assert pathlib.Path(dialled.ca_file).read_bytes() == kube.secret("demo-operator-tls")["ca.crt"]
    assert (
        pathlib.Path(dialled.cert_path).read_bytes() == kube.secret("demo-operator-tls")["tls.crt"]
    )
    override = grpc_tls.ClientTls(ca_file="/x.pem")
    from_env = certs.client_tls(kube, "mq", "demo", broker, directory=tmp_path, override=override)
    assert from_env == override
    permissive = {"spec": {"tls": {"mode": "permissive"}}}
    assert certs.client_tls(kube, "mq", "demo", permissive, directory=tmp_path) is None
    assert (
        certs.trust_bundle(kube, "mq", broker) == kube.secret("demo-cluster-ca")["ca.crt"].decode()
    )


def test_a_secret_the_broker_does_not_own_is_neither_trusted_nor_overwritten(
    tmp_path: pathlib.Path,
) -> None:
    """A cluster-CA Secret planted by someone else (no ownerReference to the Broker) stops the
    issuing with SecretNotOwned and is left as it was; a planted operator or name-server Secret
    is not dialled with nor handed out as the bundle; with ``issuerRef`` a Secret cert-manager
    wrote for the Certificate of that name is the Broker's."""
    kube = FakeKube()
    planted = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "demo-cluster-ca", "namespace": "mq"},
        "data": {"ca.crt": "cGxhbnRlZA==", "ca.key": "cGxhbnRlZA=="},
    }
    kube.apply(dict(planted))
    outcome = _ensure(kube, T0)
    assert (outcome.ready, outcome.reason) == (False, "SecretNotOwned")
    assert "demo-cluster-ca" in outcome.message
    assert kube.objects[("Secret", "mq", "demo-cluster-ca")] == planted
    assert ("Secret", "mq", "demo-broker-tls") not in kube.objects

    fresh = FakeKube()
    _ensure(fresh, T0)
    for name in ("demo-operator-tls", "demo-namesrv-tls"):
        fresh.objects[("Secret", "mq", name)]["metadata"]["ownerReferences"] = [{"uid": "other"}]
    broker = {"metadata": {"name": "demo", "uid": OWNER.uid}, "spec": TLS_SPEC}
    assert certs.client_tls(fresh, "mq", "demo", broker, directory=tmp_path) is None
    assert certs.trust_bundle(fresh, "mq", broker) == ""

    by_cert_manager = {"metadata": {"name": "demo-broker-tls", "annotations": {
        certs.CERT_MANAGER_NAME_ANNOTATION: "demo-broker-tls"}}}  # fmt: skip
    assert not certs.foreign(by_cert_manager, OWNER.uid, cert_manager=True)
    assert certs.foreign(by_cert_manager, OWNER.uid)
    assert not certs.foreign({}, OWNER.uid)
