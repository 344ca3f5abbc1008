"""``Broker.spec.auth.enabled``: the operator's Super user Secret and the brokers' ``[auth]``."""

from __future__ import annotations

import argparse
import base64
import pathlib
from typing import Any

from ariane.broker import __main__ as broker_main
from ariane.operator import model, reconcile, users

OWNER = model.Owner(name="demo", namespace="mq", uid="1234-abcd")
SECURED: dict[str, Any] = {"groups": 1, "auth": {"enabled": True}}


class FakeKube:
    """Objects by (kind, name); counts applies."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str], dict[str, Any]] = {}
        self.applies = 0

    def get(self, api_version: str, kind: str, namespace: str, name: str) -> dict[str, Any]:
        return self.objects.get((kind, name), {})

    def apply(self, manifest: dict[str, Any]) -> dict[str, Any]:
        self.applies += 1
        self.objects[(manifest["kind"], manifest["metadata"]["name"])] = manifest
        return manifest


def _statefulset(spec: dict[str, Any]) -> dict[str, Any]:
    objects = model.desired_objects(OWNER, spec)  # type: ignore[arg-type]
    return next(o for o in objects if o["kind"] == "StatefulSet")


def _data(secret: dict[str, Any], key: str) -> str:
    return base64.b64decode(secret["data"][key]).decode()


def test_secret_is_generated_once_and_then_kept() -> None:
    """The first reconcile of an auth-enabled Broker creates its operator Secret (owned by the
    Broker, random keys); later ones never change it; without auth there is none."""
    kube = FakeKube()

    reconcile.ensure_operator_secret(kube, OWNER, SECURED)  # type: ignore[arg-type]
    first = dict(kube.objects[("Secret", "demo-operator-auth")])
    reconcile.ensure_operator_secret(kube, OWNER, SECURED)  # type: ignore[arg-type]
    reconcile.ensure_operator_secret(kube, model.Owner("open", "mq", "u"), {})  # type: ignore[arg-type]

    assert kube.applies == 1 and kube.objects[("Secret", "demo-operator-auth")] == first
    assert first["metadata"]["ownerReferences"][0]["uid"] == "1234-abcd"
    assert _data(first, "accessKey") == model.OPERATOR_USER
    assert len(_data(first, "secretKey")) >= 43
    assert users.operator_secret_name("demo") == "demo-operator-auth"


def test_brokers_read_auth_toml_from_the_secret_only_when_enabled() -> None:
    """With auth on, the broker container gets ``--auth-config`` and a read-only mount of only
    the Secret's ``auth.toml``, and its pod template hash changes (a roll); off, neither."""
    secured, plain = _statefulset(SECURED), _statefulset({"groups": 1})
    container = secured["spec"]["template"]["spec"]["containers"][0]
    volumes = {v["name"]: v for v in secured["spec"]["template"]["spec"]["volumes"]}

    assert container["args"][-2:] == ["--auth-config", "/etc/ariane/auth/auth.toml"]
    assert {"name": "auth", "mountPath": "/etc/ariane/auth", "readOnly": True} in container[
        "volumeMounts"
    ]
    assert volumes["auth"]["secret"]["secretName"] == "demo-operator-auth"
    assert volumes["auth"]["secret"]["items"] == [{"key": "auth.toml", "path": "auth.toml"}]
    assert "--auth-config" not in plain["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "auth" not in {v["name"] for v in plain["spec"]["template"]["spec"]["volumes"]}
    hashes = [
        s["spec"]["template"]["metadata"]["annotations"][model.CONFIG_HASH_ANNOTATION]
        for s in (secured, plain)
    ]
    assert hashes[0] != hashes[1]


def test_broker_turns_acl_on_with_the_operator_as_init_user(tmp_path: pathlib.Path) -> None:
    """``ariane broker --config C --auth-config A`` takes ``[auth]`` from A: authentication and
    authorization on, the operator's Super user as init user, the inner credential set."""
    secret = model.operator_secret(OWNER, "k" * 43, "i" * 43)
    config, auth = tmp_path / "broker.toml", tmp_path / "auth.toml"
    config.write_text('store_dir = "/tmp/x"\n[auth]\nauthentication_enabled = false\n')
    auth.write_text(_data(secret, "auth.toml"))
    parser = argparse.ArgumentParser()
    broker_main.add_arguments(parser)

    settings = broker_main.settings_from_args(
        parser.parse_args(["--config", str(config), "--auth-config", str(auth)])
    )
    unsecured = broker_main.settings_from_args(parser.parse_args(["--config", str(config)]))

    assert settings.auth.authentication_enabled and settings.auth.authorization_enabled
    assert settings.auth.init_authentication_user is not None
    assert settings.auth.init_authentication_user.username == model.OPERATOR_USER
    assert settings.auth.init_authentication_user.password == "k" * 43
    assert settings.auth.inner_client_authentication_credentials is not None
    assert not unsecured.auth.authentication_enabled
