"""The operator's HA calls (``ha.AdminSeam``: broker states, promotion, write permission, lag)
are signed with the operator's Super user of an auth-enabled Broker, read from its
``<broker>-operator-auth`` Secret by the Broker handler."""

from __future__ import annotations

import base64
from typing import Any

import kopf
import pytest

from ariane import client
from ariane.client import admin
from ariane.client import failover as client_failover
from ariane.common import errors
from ariane.operator import ha, handlers, model, reconcile, users
from test_operator_broker_auth import OWNER, SECURED, FakeKube

SUPER = client.Credentials("operator", "s3cret-key")


class _Recorder:
    """Stands in for the client calls the seam makes; keeps the credentials each got."""

    def __init__(self) -> None:
        self.seen: dict[str, client.Credentials | None] = {}

    async def broker_states(self, endpoints: list[str], **kw: Any) -> list[Any]:
        self.seen["broker_states"] = kw["credentials"]
        return [None] * len(endpoints)

    async def promote(self, *args: Any, **kw: Any) -> client_failover.Outcome:
        self.seen["promote"] = kw["credentials"]
        return client_failover.Outcome("g", 1, "e", "SYNC_MASTER", 2, 0, "", False, "failover")

    def admin_client(self, *args: Any, **kw: Any) -> Any:
        self.seen.setdefault("admin_client", kw["credentials"])
        recorder = self

        class _Client:
            async def __aenter__(self) -> _Client:
                return self

            async def __aexit__(self, *exc: object) -> None:
                return None

            async def set_write_perm(self, groups: Any, *, writable: bool) -> dict[str, int]:
                recorder.seen["set_write_perm"] = kw["credentials"]
                return {}

            async def list_groups(self) -> list[Any]:
                recorder.seen["list_groups"] = kw["credentials"]
                return []

        return _Client()


@pytest.fixture
def recorder(monkeypatch: pytest.MonkeyPatch) -> _Recorder:
    fake = _Recorder()
    monkeypatch.setattr(client_failover, "broker_states", fake.broker_states)
    monkeypatch.setattr(client_failover, "promote", fake.promote)
    monkeypatch.setattr(admin, "AdminClient", fake.admin_client)
    return fake


@pytest.mark.parametrize("signed", [SUPER, None])
def test_every_seam_call_carries_the_seams_credentials(
    recorder: _Recorder, signed: client.Credentials | None
) -> None:
    """Members, promote, wipe/restore write permission and the drain's lag check all pass the
    seam's credentials (and ``None`` when it has none)."""
    seam = ha.AdminSeam("ns:9876", {}, signed)

    seam.members("mq", "demo-broker-0", [], 2)
    seam.promote("demo-broker-0", 1)
    seam.set_write_perm(["demo-broker-1"], writable=False)
    seam.unconsumed(["demo-broker-1"])

    assert recorder.seen == {
        "broker_states": signed,
        "promote": signed,
        "admin_client": signed,
        "set_write_perm": signed,
        "list_groups": signed,
    }


def test_refused_states_are_no_answer_not_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """Brokers refusing the operator's stats calls (40100) make members with no role (the
    reconcile then decides no failover), instead of breaking the reconcile."""

    async def refused(endpoints: list[str], **_: Any) -> list[Any]:
        raise errors.UnauthorizedError("refused")

    monkeypatch.setattr(client_failover, "broker_states", refused)
    views = ha.AdminSeam("ns:9876", {}).members("mq", "demo-broker-0", [], 2)
    assert [(v.ordinal, v.role) for v in views] == [(0, ""), (1, "")]


def _body(spec: dict[str, Any]) -> kopf.Body:
    raw = {"metadata": {"name": OWNER.name, "namespace": OWNER.namespace}, "spec": spec}
    return kopf.Body(raw)  # type: ignore[arg-type]


def test_broker_handler_signs_the_seam_with_the_operator_secret() -> None:
    """An auth-enabled Broker's seam gets the keys of its operator Secret; without auth, or
    before the Secret exists, none."""
    kube = FakeKube()
    memo = kopf.Memo(kube=kube)

    assert handlers._seam_credentials(_body(SECURED), memo) is None  # no Secret yet
    reconcile.ensure_operator_secret(kube, OWNER, SECURED)  # type: ignore[arg-type]
    signed = handlers._seam_credentials(_body(SECURED), memo)
    assert handlers._seam_credentials(_body({"groups": 1}), memo) is None

    secret = kube.objects[("Secret", users.operator_secret_name(OWNER.name))]
    assert signed is not None and signed.access_key == model.OPERATOR_USER
    assert signed.secret_key == base64.b64decode(secret["data"]["secretKey"]).decode()
