"""The operator's settings are read once, at start-up, from its environment: every variable in
one frozen ``OperatorSettings``, and a bad value refused with the variable's name before kopf or
the Kubernetes client is loaded."""

from __future__ import annotations

import dataclasses

import pytest

from ariane import cli
from ariane.grpcwire import tls as grpc_tls
from ariane.operator import netpol
from ariane.operator import settings as operator_settings

RESYNC_ENV = operator_settings.RESYNC_ENV


@pytest.mark.parametrize("value", ["abc", "0", "nan"])
def test_ariane_operator_refuses_a_bad_resync_interval_by_name(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], value: str
) -> None:
    """``ariane operator`` with a resync interval that is no number of seconds in 1..3600 exits
    2 with a line naming the variable and the value (no traceback, nothing started)."""
    monkeypatch.setenv(RESYNC_ENV, value)

    assert cli.main(["operator", "--standalone"]) == 2

    err = capsys.readouterr().err
    assert err.startswith("ariane operator: ") and RESYNC_ENV in err and repr(value) in err, err


def test_every_variable_is_read_into_one_frozen_settings_object() -> None:
    """Each variable of the operator lands in its field, unset ones take the in-cluster
    defaults, and the settings (and their override maps) cannot be changed afterwards."""
    env = {
        operator_settings.RESYNC_ENV: "2.5",
        operator_settings.NAMESRV_OVERRIDES_ENV: '{"*": "127.0.0.1:9876"}',
        operator_settings.POD_OVERRIDES_ENV: '{"mq/demo-a-0": "127.0.0.1:8081"}',
        operator_settings.TLS_ENV: "yes",
        operator_settings.CA_FILE_ENV: " /ca.pem ",
        operator_settings.OPERATOR_NAMESPACE_ENV: "ops",
        operator_settings.OPERATOR_LABELS_ENV: '{"app": "op"}',
        operator_settings.PROMETHEUS_NAMESPACES_ENV: "[]",
    }

    found = operator_settings.OperatorSettings.from_env(env)

    assert found == operator_settings.OperatorSettings(
        resync_interval_s=2.5,
        namesrv_overrides={"*": "127.0.0.1:9876"},
        pod_overrides={"mq/demo-a-0": "127.0.0.1:8081"},
        client_tls=grpc_tls.ClientTls(ca_file="/ca.pem"),
        side=netpol.OperatorSide("ops", (("app", "op"),), ()),
    )
    assert operator_settings.OperatorSettings.from_env({}) == operator_settings.OperatorSettings()
    assert operator_settings.OperatorSettings().resync_interval_s == 60.0
    with pytest.raises(dataclasses.FrozenInstanceError):
        found.resync_interval_s = 1.0  # type: ignore[misc]
    with pytest.raises(TypeError):
        found.pod_overrides["x"] = "y"  # type: ignore[index]


@pytest.mark.parametrize(
    ("variable", "value", "problem"),
    [
        (operator_settings.RESYNC_ENV, "1e9", "1..3600"),
        (operator_settings.NAMESRV_OVERRIDES_ENV, "{", "is not JSON"),
        (operator_settings.NAMESRV_OVERRIDES_ENV, '{"*": 9876}', "JSON object of strings"),
        (operator_settings.POD_OVERRIDES_ENV, "[1]", "JSON object of strings"),
        (operator_settings.OPERATOR_LABELS_ENV, '{"app": 1}', "JSON object of strings"),
        (operator_settings.PROMETHEUS_NAMESPACES_ENV, '"monitoring"', "JSON list of strings"),
        (operator_settings.PROMETHEUS_NAMESPACES_ENV, "[1]", "JSON list of strings"),
        (operator_settings.NAMESRV_OVERRIDES_ENV, "{" + " " * 70_000 + "}", "longer than"),
    ],
)
def test_a_bad_value_is_refused_naming_its_variable(
    variable: str, value: str, problem: str
) -> None:
    """Every malformed variable raises ``SettingsError`` whose message starts with the
    variable's name and says what is wrong (a bad JSON map used to surface as a bare
    ``JSONDecodeError`` from inside kopf's start-up)."""
    with pytest.raises(operator_settings.SettingsError) as caught:
        operator_settings.OperatorSettings.from_env({variable: value})

    assert caught.value.variable == variable
    assert str(caught.value).startswith(variable) and problem in str(caught.value)


def test_handlers_read_the_settings_from_kopfs_memo() -> None:
    """The handlers take the settings ``ariane operator`` put in kopf's memo: a Broker's seam
    dials with the settings' TLS (``ARIANE_TLS``), read once, not the environment's now."""
    pytest.importorskip("kopf")
    import kopf

    from ariane.operator import handlers

    tls = grpc_tls.ClientTls(ca_file="/ca.pem")
    settings = operator_settings.OperatorSettings(
        namesrv_overrides={"*": "127.0.0.1:1"}, client_tls=tls
    )
    memo = kopf.Memo(settings=settings, kube=None)
    body = kopf.Body({"metadata": {"name": "demo", "namespace": "mq"}, "spec": {}})

    assert handlers._seam_tls(body, memo) == tls
    assert handlers._settings(memo) is settings
