"""The RocketMQUser reconcile against fakes of the admin API and the Kubernetes API."""

from __future__ import annotations

import asyncio
import base64
import datetime
from collections.abc import Sequence
from typing import Any

import pytest

from ariane.client import admin_types, auth_admin
from ariane.common import errors
from ariane.operator import status, users

NOW = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
UID = "uid-1"


class FakeAdmin:
    """Broker groups holding users and Custom ACL entries; records every write."""

    def __init__(self, groups: Sequence[str]) -> None:
        self.groups = list(groups)
        self.users: dict[str, dict[str, tuple[str, str]]] = {g: {} for g in groups}
        self.acls: dict[str, dict[str, dict[str, auth_admin.AclEntryRecord]]] = {
            g: {} for g in groups
        }
        self.writes: list[str] = []

    def _pick(self, broker_names: Sequence[str]) -> list[str]:
        return [g for g in self.groups if not broker_names or g in broker_names]

    async def masters(self, broker_names: Sequence[str] = ()) -> list[admin_types.BrokerMaster]:
        return [admin_types.BrokerMaster("c", g, "127.0.0.1:1") for g in self._pick(broker_names)]

    async def get_user(
        self, username: str, *, broker_names: Sequence[str] = ()
    ) -> list[auth_admin.UserRecord]:
        found = [
            auth_admin.UserRecord(g, username, self.users[g][username][1], "enable")
            for g in self._pick(broker_names)
            if username in self.users[g]
        ]
        if not found:
            raise errors.NotFoundError("no user")
        return found

    async def create_user(
        self, username: str, password: str, *, user_type: str = "", broker_names: Sequence[str] = ()
    ) -> list[str]:
        self.writes.append(f"create {username} on {broker_names}")
        for g in self._pick(broker_names):
            if username in self.users[g]:
                raise errors.BadRequestError("The user is existed")
            self.users[g][username] = (password, user_type)
        return self._pick(broker_names)

    async def update_user(
        self,
        username: str,
        *,
        password: str = "",
        user_type: str = "",
        user_status: str = "",
        broker_names: Sequence[str] = (),
    ) -> list[str]:
        self.writes.append(f"update {username} on {broker_names}")
        for g in self._pick(broker_names):
            self.users[g][username] = (password, user_type)
        return self._pick(broker_names)

    async def delete_user(self, username: str, *, broker_names: Sequence[str] = ()) -> list[str]:
        self.writes.append(f"delete {username}")
        held = [g for g in self._pick(broker_names) if username in self.users[g]]
        for g in held:
            del self.users[g][username]
            self.acls[g].pop(username, None)
        if len(held) < len(self._pick(broker_names)):
            raise errors.NotFoundError("no user")
        return held

    async def get_acl(
        self, subject: str, *, broker_names: Sequence[str] = ()
    ) -> list[auth_admin.AclRecord]:
        found = [
            auth_admin.AclRecord(
                g, f"User:{subject}", (("Custom", tuple(self.acls[g][subject].values())),)
            )
            for g in self._pick(broker_names)
            if self.acls[g].get(subject)
        ]
        if not found:
            raise errors.NotFoundError("no acl")
        return found

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
    ) -> list[str]:
        self.writes.append(f"put {subject} {list(resources)}")
        for g in self._pick(broker_names):
            for r in resources:
                entry = auth_admin.AclEntryRecord(r, tuple(actions), tuple(source_ips), decision)
                self.acls[g].setdefault(subject, {})[r] = entry
        return self._pick(broker_names)

    async def delete_acl(
        self,
        subject: str,
        *,
        resource: str = "",
        policy_type: str = "",
        broker_names: Sequence[str] = (),
    ) -> list[str]:
        self.writes.append(f"delete-acl {subject} {resource}")
        for g in self._pick(broker_names):
            self.acls[g].get(subject, {}).pop(resource, None)
        return self._pick(broker_names)


class FakeKube:
    """Secrets by name in one namespace."""

    def __init__(self) -> None:
        self.secrets: dict[str, dict[str, Any]] = {}

    def get(self, api_version: str, kind: str, namespace: str, name: str) -> dict[str, Any]:
        assert (api_version, kind) == ("v1", "Secret")
        return self.secrets.get(name, {})

    def apply(self, manifest: dict[str, Any]) -> dict[str, Any]:
        self.secrets[manifest["metadata"]["name"]] = manifest
        return manifest


def _decoded(secret: dict[str, Any], key: str) -> str:
    return base64.b64decode(secret["data"][key]).decode()


def _user(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "ariane.dev/v1alpha1",
        "kind": "RocketMQUser",
        "metadata": {"name": "alice", "namespace": "ns", "uid": UID, "generation": 1},
        "spec": {"broker": "demo", "userType": "Normal", **spec},
    }


ACLS = {
    "acls": [
        {"resource": "Topic:orders", "patternType": "LITERAL", "actions": ["Pub", "Sub"]},
        {"resource": "Group:billing-", "patternType": "PREFIXED", "actions": ["Sub"]},
    ]
}


def _run(client: FakeAdmin, kube: FakeKube, body: dict[str, Any]) -> dict[str, Any]:
    return asyncio.run(users.reconcile_user(client, kube, body, NOW, "127.0.0.1:9876"))


def test_new_user_gets_a_generated_key_acl_and_an_owned_secret_on_every_group() -> None:
    """A new hmac user is created on every broker group with a random key, its ACL entries
    as broker keys (PREFIXED adds '*'), and an owned Secret holding keys and endpoints."""
    client, kube = FakeAdmin(["demo-a", "demo-b"]), FakeKube()

    result = _run(client, kube, _user(authorization=ACLS))

    secret = kube.secrets["alice"]
    key = _decoded(secret, "secretKey")
    assert len(key) >= 43 and _decoded(secret, "accessKey") == "alice"
    assert _decoded(secret, "endpoints") == "127.0.0.1:9876" and "ca.crt" not in secret["data"]
    assert secret["metadata"]["ownerReferences"][0]["uid"] == UID
    assert client.users == {g: {"alice": (key, "Normal")} for g in ("demo-a", "demo-b")}
    assert sorted(client.acls["demo-b"]["alice"]) == ["Group:billing-*", "Topic:orders"]
    assert result["secretName"] == "alice" and result["brokers"] == ["demo-a", "demo-b"]
    assert [c["status"] for c in result["conditions"] if c["type"] == status.READY] == ["True"]
    assert key not in repr(result)


def test_resync_keeps_the_key_and_writes_nothing_when_converged() -> None:
    """A second reconcile reuses the Secret's key and, with every broker up to date, only
    re-asserts the user (no ACL writes)."""
    client, kube = FakeAdmin(["demo-a"]), FakeKube()
    body = _user(authorization=ACLS)
    _run(client, kube, body)
    key = _decoded(kube.secrets["alice"], "secretKey")
    client.writes.clear()

    _run(client, kube, body)

    assert _decoded(kube.secrets["alice"], "secretKey") == key
    assert client.writes == ["update alice on ['demo-a']"]


def test_a_group_that_joins_later_gets_the_user_and_acl() -> None:
    """A broker group the user is not on yet (joined later, or a fresh promoted master) is
    given the user (create) and its ACL on the next resync."""
    client, kube = FakeAdmin(["demo-a"]), FakeKube()
    body = _user(authorization=ACLS)
    _run(client, kube, body)
    client.groups.append("demo-b")
    client.users["demo-b"], client.acls["demo-b"] = {}, {}

    result = _run(client, kube, body)

    key = _decoded(kube.secrets["alice"], "secretKey")
    assert client.users["demo-b"] == {"alice": (key, "Normal")}
    assert sorted(client.acls["demo-b"]["alice"]) == ["Group:billing-*", "Topic:orders"]
    assert result["brokers"] == ["demo-a", "demo-b"]


def test_rotate_annotation_changes_the_key_once() -> None:
    """A new ariane.dev/rotate-secret value yields a new key on brokers and Secret, recorded in
    status.rotation so the next resync keeps it."""
    client, kube = FakeAdmin(["demo-a"]), FakeKube()
    body = _user()
    _run(client, kube, body)
    old = _decoded(kube.secrets["alice"], "secretKey")
    body["metadata"]["annotations"] = {users.ROTATE_ANNOTATION: "2026-01-02"}

    body["status"] = _run(client, kube, body)
    new = _decoded(kube.secrets["alice"], "secretKey")
    _run(client, kube, body)

    assert new != old and client.users["demo-a"]["alice"][0] == new
    assert body["status"]["rotation"] == "2026-01-02"
    assert _decoded(kube.secrets["alice"], "secretKey") == new


def test_removed_acl_entries_are_deleted_and_changed_ones_replaced() -> None:
    """An entry dropped from the spec is deleted from the broker; a changed one is put again."""
    client, kube = FakeAdmin(["demo-a"]), FakeKube()
    body = _user(authorization=ACLS)
    _run(client, kube, body)
    body["spec"]["authorization"] = {
        "acls": [{"resource": "Topic:orders", "actions": ["Pub"], "decision": "Deny"}]
    }

    _run(client, kube, body)

    entries = client.acls["demo-a"]["alice"]
    assert list(entries) == ["Topic:orders"]
    assert entries["Topic:orders"].actions == ("Pub",)
    assert entries["Topic:orders"].decision == "Deny"


def test_secret_ref_key_is_used_and_a_missing_one_is_a_clear_error() -> None:
    """With authentication.secretRef the key comes from that Secret; without it the reconcile
    fails naming the Secret and key (never a key)."""
    client, kube = FakeAdmin(["demo-a"]), FakeKube()
    body = _user(authentication={"secretRef": {"name": "mine", "key": "password"}})
    with pytest.raises(users.SpecProblem, match="'mine' has no key 'password'"):
        _run(client, kube, body)
    kube.secrets["mine"] = {"data": {"password": base64.b64encode(b"s3cret-key").decode()}}

    _run(client, kube, body)

    assert client.users["demo-a"]["alice"] == ("s3cret-key", "Normal")
    assert _decoded(kube.secrets["alice"], "secretKey") == "s3cret-key"


def test_a_foreign_secret_with_the_users_name_is_never_overwritten() -> None:
    """A Secret named after the user that this CR does not own stops the reconcile."""
    client, kube = FakeAdmin(["demo-a"]), FakeKube()
    kube.secrets["alice"] = {"metadata": {"name": "alice"}, "data": {}}

    with pytest.raises(users.SpecProblem, match="not owned"):
        _run(client, kube, _user())

    assert client.writes == [] and kube.secrets["alice"]["data"] == {}


def test_paused_user_touches_nothing() -> None:
    """A paused RocketMQUser says so and calls neither broker nor Kubernetes."""
    client, kube = FakeAdmin(["demo-a"]), FakeKube()
    body = _user()
    body["metadata"]["annotations"] = {status.PAUSE_ANNOTATION: "true"}

    result = _run(client, kube, body)

    assert client.writes == [] and kube.secrets == {}
    assert result["conditions"][0]["type"] == status.PAUSED


def test_delete_removes_the_user_everywhere_and_absent_is_fine() -> None:
    """Deletion removes user and ACL from every group; a second deletion is a no-op."""
    client, kube = FakeAdmin(["demo-a", "demo-b"]), FakeKube()
    _run(client, kube, _user(authorization=ACLS))
    client.users["demo-b"].clear()  # already gone from one group (with its ACL)
    client.acls["demo-b"].clear()

    asyncio.run(users.delete_user(client, "alice"))
    asyncio.run(users.delete_user(client, "alice"))

    assert client.users == {"demo-a": {}, "demo-b": {}}
    assert all("alice" not in acl for acl in client.acls.values())


@pytest.mark.parametrize(
    ("resource", "pattern", "key"),
    [
        ("Topic:orders", "LITERAL", "Topic:orders"),
        ("Topic:order-", "PREFIXED", "Topic:order-*"),
        ("Topic:*", "LITERAL", "Topic:*"),
        ("Cluster", "LITERAL", "Cluster:*"),
        ("*", "LITERAL", "*"),
    ],
)
def test_resource_keys(resource: str, pattern: str, key: str) -> None:
    """CR resources map onto the broker's ACL 2.0 resource keys."""
    assert users.resource_key(resource, pattern) == key


def test_operator_credentials_from_its_secret() -> None:
    """The operator signs with its per-Broker Secret's keys; no Secret, no signing."""
    secret = {
        "data": {
            "accessKey": base64.b64encode(b"ariane-operator").decode(),
            "secretKey": base64.b64encode(b"k" * 43).decode(),
        }
    }

    signed = users.operator_credentials(secret)

    assert signed is not None and signed.access_key == "ariane-operator"
    assert users.operator_credentials({}) is None
    assert users.operator_secret_name("demo") == "demo-operator-auth"
