"""RocketMQUser CRs: an ACL 2.0 user, its ACL and its Secret (Strimzi's ``KafkaUser`` for Ariane).

One reconcile (``reconcile_user``), run on every change and every resync:

1. The secret key: ``authentication.secretRef`` → that Secret's key, re-read each time (the
   owner rotates it there); ``type: hmac`` → the key already in the user's own Secret, or a new
   random one (``generate_key``) when there is none or the ``ROTATE_ANNOTATION`` value differs
   from ``status.rotation``.
2. The user on **every** broker group of its Broker (``AdminClient`` fans writes out to masters
   and slaves): created where the masters lack it, updated (key, type, ``enable``) elsewhere.
   Re-applied on every resync, so a group that joined later, or a slave promoted after a
   failover, has it within one resync interval.
3. Its Custom ACL: each ``spec.authorization.acls`` entry put where a master's copy differs;
   resources no entry names any more are deleted.
4. The Secret named after the user (owner reference → garbage-collected with it): ``accessKey``,
   ``secretKey``, ``endpoints`` (the name servers clients bootstrap from), and ``ca.crt`` when
   the Broker has ``spec.tls`` on: its trust bundle (``certs.trust_bundle``: every CA the
   servers' certificates chain to now, old and new during a CA rollover), else the CA the
   operator itself dials the Broker with (``settings.CA_FILE_ENV``).

Deletion (``delete_user``): the user (and with it its ACL) is deleted from every broker;
already-absent is success, verified with ``get_user`` (a partial fan-out could hide a failure).

The operator's own admin calls are signed (``operator_credentials``) when the Broker has
``spec.auth.enabled``: as the Super user whose keys are in the Secret
``operator_secret_name(broker)`` (``accessKey``/``secretKey``), which the operator generates
once per Broker (``reconcile.ensure_operator_secret``, owned by the Broker) and renders as the
brokers' ``[auth.init_authentication_user]`` (``model.auth_toml``, read with ``--auth-config``).

Invariants: every step is idempotent; the username is ``metadata.name``; a secret key is never
logged, put in an event, a condition or ``status``; a Secret the CR does not own is never
overwritten; a paused CR touches neither broker nor Secret.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import datetime
import pathlib
from collections.abc import Mapping, Sequence
from typing import Any, Final, Protocol

from ariane.client import admin_types, auth_admin, credentials
from ariane.common import errors
from ariane.operator import metadata, model, resources, status
from ariane.security import keys

ROTATE_ANNOTATION: Final = "ariane.dev/rotate-secret"
"""Set or change this annotation's value to have the operator generate a new secret key."""

KEY_BYTES: Final = 32
"""Random bytes of a generated secret key (256 bits, URL-safe base64: 43 characters)."""


class SpecProblem(errors.ArianeError):
    """The CR cannot be applied as it stands (a missing or foreign Secret); retried."""


class UserKube(Protocol):
    """The two Kubernetes calls a reconcile makes (``kube.Kube`` has them)."""

    def get(self, api_version: str, kind: str, namespace: str, name: str) -> dict[str, Any]: ...

    def apply(self, manifest: dict[str, Any]) -> dict[str, Any]: ...


class UserAdmin(Protocol):
    """The user and ACL calls a reconcile makes (``admin.AdminClient`` has them)."""

    async def masters(self, broker_names: Sequence[str] = ()) -> list[admin_types.BrokerMaster]: ...

    async def get_user(
        self, username: str, *, broker_names: Sequence[str] = ()
    ) -> list[auth_admin.UserRecord]: ...

    async def create_user(
        self, username: str, password: str, *, user_type: str = "", broker_names: Sequence[str] = ()
    ) -> list[str]: ...

    async def update_user(
        self,
        username: str,
        *,
        password: str = "",
        user_type: str = "",
        user_status: str = "",
        broker_names: Sequence[str] = (),
    ) -> list[str]: ...

    async def delete_user(
        self, username: str, *, broker_names: Sequence[str] = ()
    ) -> list[str]: ...

    async def get_acl(
        self, subject: str, *, broker_names: Sequence[str] = ()
    ) -> list[auth_admin.AclRecord]: ...

    async def put_acl(
        self,
        subject: str,
        *,
        resources: Sequence[str],
        actions: Sequence[str],
        decision: str,
        source_ips: Sequence[str] = (),
        policy_type: str = "",
        broker_names: Sequence[str] = (),
    ) -> list[str]: ...

    async def delete_acl(
        self,
        subject: str,
        *,
        resource: str = "",
        policy_type: str = "",
        broker_names: Sequence[str] = (),
    ) -> list[str]: ...


@dataclasses.dataclass(frozen=True, slots=True)
class AclEntry:
    """One desired ACL entry, as the broker stores it (RocketMQ ``PolicyEntry``).

    Attributes:
        resource: the resource key, e.g. ``Topic:orders``, ``Topic:order-*`` (PREFIXED),
            ``Cluster:*`` or ``*``.
        actions: sorted action names (``Pub``, ``Sub``, ...).
        source_ips: sorted addresses or CIDR ranges (empty: any).
        decision: ``Allow`` or ``Deny``.
    """

    resource: str
    actions: tuple[str, ...]
    source_ips: tuple[str, ...]
    decision: str


def generate_key() -> str:
    """A new random secret key: ``KEY_BYTES`` random bytes, never a leading "-" (``keys``)."""
    return keys.generate_secret_key(KEY_BYTES)


def username(body: Mapping[str, Any]) -> str:
    """The user's access key on the brokers: the CR's ``metadata.name``."""
    return str(body["metadata"]["name"])


def operator_secret_name(broker: str) -> str:
    """The Secret holding the operator's Super user keys for Broker ``broker``."""
    return model.operator_secret_name(broker)


def resource_key(resource: str, pattern_type: str) -> str:
    """The broker's resource key of a CR entry: ``Cluster`` → ``Cluster:*``; PREFIXED adds ``*``.

    ``Topic:order-`` PREFIXED → ``Topic:order-*``; ``Topic:*`` and ``*`` stay as they are.
    """
    if resource == "Cluster":
        return "Cluster:*"
    if pattern_type == "PREFIXED" and not resource.endswith("*"):
        return f"{resource}*"
    return resource


def desired_acl(spec: Mapping[str, Any]) -> dict[str, AclEntry]:
    """``spec.authorization.acls`` as broker entries, by resource key (CRD defaults applied)."""
    wanted: dict[str, AclEntry] = {}
    for acl in spec.get("authorization", {}).get("acls", []):
        key = resource_key(acl["resource"], acl.get("patternType", "LITERAL"))
        wanted[key] = AclEntry(
            key,
            tuple(sorted(set(acl["actions"]))),
            tuple(sorted(set(acl.get("sourceIps", [])))),
            acl.get("decision", "Allow"),
        )
    return wanted


def live_acl(records: Sequence[auth_admin.AclRecord]) -> dict[str, dict[str, AclEntry]]:
    """Custom-policy entries per broker group, by resource key (``get_acl``'s answer)."""
    found: dict[str, dict[str, AclEntry]] = {}
    for record in records:
        entries = found.setdefault(record.broker_name, {})
        for policy_type, policy in record.policies:
            if policy_type.lower() not in ("", "custom"):
                continue
            for e in policy:
                entries[e.resource] = AclEntry(
                    e.resource, tuple(sorted(e.actions)), tuple(sorted(e.source_ips)), e.decision
                )
    return found


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _decoded(secret: Mapping[str, Any], key: str) -> str:
    value = (secret.get("data") or {}).get(key)
    return base64.b64decode(value).decode() if value else ""


def owned_by(obj: Mapping[str, Any], body: Mapping[str, Any]) -> bool:
    """Whether ``obj`` names ``body`` (by uid) among its owner references."""
    uid = body["metadata"].get("uid")
    refs = obj.get("metadata", {}).get("ownerReferences") or []
    return any(ref.get("uid") == uid for ref in refs)


def user_secret(
    body: Mapping[str, Any], secret_key: str, endpoints: str, ca_pem: str
) -> resources.Manifest:
    """The Secret named after the user, owned by it (``ca.crt`` only when ``ca_pem``)."""
    meta = body["metadata"]
    data = {"accessKey": username(body), "secretKey": secret_key, "endpoints": endpoints}
    if ca_pem:
        data["ca.crt"] = ca_pem
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": {
            "name": username(body),
            "namespace": meta["namespace"],
            "labels": {
                "app.kubernetes.io/managed-by": "ariane-operator",
                "app.kubernetes.io/part-of": "ariane",
                "ariane.dev/broker": body["spec"]["broker"],
                "ariane.dev/user": username(body),
            },
            "ownerReferences": [
                {
                    "apiVersion": resources.API_VERSION,
                    "kind": "RocketMQUser",
                    "name": meta["name"],
                    "uid": meta["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "data": {k: _b64(v) for k, v in data.items()},
    }


def rotation_wanted(body: Mapping[str, Any]) -> str:
    """The ``ROTATE_ANNOTATION`` value when it differs from ``status.rotation``, else ``""``."""
    asked = (body["metadata"].get("annotations") or {}).get(ROTATE_ANNOTATION, "")
    return asked if asked and asked != body.get("status", {}).get("rotation", "") else ""


async def secret_key_of(kube: UserKube, body: Mapping[str, Any]) -> str:
    """The secret key the user must have now (step 1 of the module docstring).

    Raises:
        SpecProblem: the referenced Secret or key is missing, or the user's Secret exists and
            is not owned by this CR.
    """
    namespace = str(body["metadata"]["namespace"])
    auth = body.get("spec", {}).get("authentication") or {"type": "hmac"}
    own = await asyncio.to_thread(kube.get, "v1", "Secret", namespace, username(body))
    if own and not owned_by(own, body):
        raise SpecProblem(f"Secret {username(body)!r} exists and is not owned by this RocketMQUser")
    ref = auth.get("secretRef")
    if ref:
        found = await asyncio.to_thread(kube.get, "v1", "Secret", namespace, ref["name"])
        key = _decoded(found, ref["key"]) if found else ""
        if not key:
            raise SpecProblem(f"Secret {ref['name']!r} has no key {ref['key']!r}")
        return key
    kept = _decoded(own, "secretKey") if own else ""
    return generate_key() if not kept or rotation_wanted(body) else kept


async def apply_user(client: UserAdmin, name: str, secret_key: str, user_type: str) -> list[str]:
    """Update the user (key, type, ``enable``) on the groups whose master has it, create it on
    the others (masters and slaves); returns every broker group, sorted.

    Raises:
        ariane.common.errors.ArianeError: a broker or name server refused or did not answer.
    """
    try:
        having = {r.broker_name for r in await client.get_user(name)}
    except errors.NotFoundError:
        having = set()
    groups = sorted({m.broker_name for m in await client.masters()})
    missing = [g for g in groups if g not in having]
    if having:
        await client.update_user(
            name,
            password=secret_key,
            user_type=user_type,
            user_status="enable",
            broker_names=sorted(having),
        )
    if missing:
        await client.create_user(name, secret_key, user_type=user_type, broker_names=missing)
    return groups


async def apply_acl(
    client: UserAdmin, name: str, spec: Mapping[str, Any], groups: Sequence[str]
) -> int:
    """Put every desired entry that the master of one of ``groups`` lacks or holds differently;
    delete the resources no entry names any more. Returns the number of desired entries.

    Raises:
        ariane.common.errors.ArianeError: a broker or name server refused or did not answer.
    """
    wanted = desired_acl(spec)
    try:
        live = live_acl(await client.get_acl(name))
    except errors.NotFoundError:
        live = {}
    for key, entry in wanted.items():
        if all(live.get(group, {}).get(key) == entry for group in groups):
            continue
        await client.put_acl(
            name,
            resources=[key],
            actions=entry.actions,
            decision=entry.decision,
            source_ips=entry.source_ips,
        )
    stale = sorted({key for entries in live.values() for key in entries} - set(wanted))
    for key in stale:
        await client.delete_acl(name, resource=key)
    return len(wanted)


def _ca_pem(ca_file: str) -> str:
    return pathlib.Path(ca_file).read_text() if ca_file else ""


async def reconcile_user(
    client: UserAdmin,
    kube: UserKube,
    body: Mapping[str, Any],
    now: datetime.datetime,
    endpoints: str,
    ca_file: str = "",
    ca_pem: str = "",
) -> dict[str, Any]:
    """Apply the user, its ACL and its Secret (module docstring); returns the status to patch.

    Args:
        endpoints: the name-server address(es) clients use, written to the Secret.
        ca_file: PEM file of the CA the Broker's servers chain to ("": plaintext Broker).
        ca_pem: the Broker's trust bundle (``certs.trust_bundle``: the cluster CA's, or
            cert-manager's ``ca.crt``); wins over ``ca_file`` when set.

    Raises:
        SpecProblem: see ``secret_key_of``.
        ariane.common.errors.ArianeError: a broker or name server refused or did not answer.
        kubernetes.client.ApiException: the Secret could not be read or written.
    """
    if status.is_paused(body["metadata"].get("annotations")):
        generation = int(body["metadata"].get("generation", 0))
        paused = status.condition(status.PAUSED, True, "Paused", "annotation set", generation, now)
        return {"conditions": status.merge(body.get("status", {}).get("conditions", []), [paused])}
    spec = body.get("spec", {})
    name = username(body)
    key = await secret_key_of(kube, body)
    groups = await apply_user(client, name, key, spec.get("userType", "Normal"))
    entries = await apply_acl(client, name, spec, groups)
    secret = user_secret(body, key, endpoints, ca_pem or _ca_pem(ca_file))
    await asyncio.to_thread(kube.apply, secret)
    result: dict[str, Any] = {
        "conditions": metadata.converged_conditions(
            body, now, f"user and {entries} ACL entries on {len(groups)} broker group(s)"
        ),
        "observedGeneration": int(body["metadata"].get("generation", 0)),
        "username": name,
        "secretName": name,
        "brokers": groups,
    }
    asked = (body["metadata"].get("annotations") or {}).get(ROTATE_ANNOTATION, "")
    if asked:
        result["rotation"] = asked
    return result


async def delete_user(client: UserAdmin, name: str) -> None:
    """Delete the user and its ACL from every broker; absent already is success.

    Raises:
        ariane.common.errors.ArianeError: a broker refused, or still holds the user.
    """
    try:
        await client.delete_user(name)
    except errors.NotFoundError:
        try:
            left = await client.get_user(name)
        except errors.NotFoundError:
            return
        raise SpecProblem(f"user still on {[r.broker_name for r in left]}") from None


def operator_credentials(secret: Mapping[str, Any]) -> credentials.Credentials | None:
    """The operator's Super user keys from its per-Broker Secret, ``None`` when it has none.

    Raises:
        ValueError: the keys are blank or malformed (``credentials.Credentials``).
    """
    if not secret:
        return None
    return credentials.Credentials(_decoded(secret, "accessKey"), _decoded(secret, "secretKey"))
