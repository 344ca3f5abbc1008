"""The name server's ``[auth]`` without processes: ``--config`` TOML parsing refuses unknown keys,
wrong types and a switch without a credential; the credential alone turns enforcement on; and
the inner authenticator accepts only the inner user's signature over a fresh date-time, with
refusal messages that never hold the secret."""

from __future__ import annotations

import datetime
import pathlib

import pytest

from ariane.namesrv import config, inner_auth
from ariane.security import settings as auth_settings
from ariane.security import signing

NOW = datetime.datetime(2026, 5, 7, 10, 15, 0, tzinfo=datetime.UTC)
INNER = auth_settings.InnerCredentials("ariane-inner", "inner-secret-1")
TOML = """\
listen = "127.0.0.1:19876"
[auth.inner_client_authentication_credentials]
access_key = "ariane-inner"
secret_key = "inner-secret-1"
"""


def test_config_file_with_a_credential_enforces_and_flags_win(tmp_path: pathlib.Path) -> None:
    """Proves a TOML ``[auth]`` credential turns enforcement on by default and a flag overrides
    the file's listen address."""
    path = tmp_path / "namesrv.toml"
    path.write_text(TOML)
    settings = config.load(path, listen="127.0.0.1:29876", metrics_listen=None)
    assert settings.listen == "127.0.0.1:29876"
    assert settings.auth.enforced
    assert settings.auth.inner_client_authentication_credentials == INNER
    assert "inner-secret-1" not in repr(settings)
    assert not config.load(None).auth.enforced


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("lisen = 'x'\n", "unknown name-server setting 'lisen'"),
        ("scan_interval_ms = '5'\n", "scan_interval_ms must be a int"),
        ("[auth]\nauthentication_enabled = 1\n", "auth.authentication_enabled must be a bool"),
        ("[auth]\nauthentication_enabled = true\n", "needs auth.inner_client_authentication"),
        ("[auth]\nfoo = true\n", "unknown name-server setting 'auth.foo'"),
        ("[auth.inner_client_authentication_credentials]\naccess_key = 'a'\n", "needs access_key"),
        ("[auth]\ndate_time_skew_ms_max = 5\n", "date_time_skew_ms_max"),
    ],
)
def test_config_refuses_bad_files(text: str, message: str) -> None:
    """Proves each bad ``--config`` content is refused with the key named."""
    import tomllib

    with pytest.raises(ValueError, match=message):
        config.from_mapping(tomllib.loads(text))


def test_switch_off_with_a_credential_leaves_registration_open() -> None:
    """Proves ``authentication_enabled = false`` keeps a configured credential unenforced."""
    settings = inner_auth.NameServerAuthSettings(
        authentication_enabled=False, inner_client_authentication_credentials=INNER
    )
    assert not settings.enforced


def _checker() -> inner_auth.InnerAuthenticator:
    settings = inner_auth.NameServerAuthSettings(inner_client_authentication_credentials=INNER)
    return inner_auth.InnerAuthenticator(settings, now=lambda: NOW)


def _headers(access_key: str, secret: str, when: datetime.datetime) -> dict[str, str]:
    date_time = signing.grpc_date_time(when)
    return dict(signing.sign_grpc(access_key=access_key, secret_key=secret, date_time=date_time))


def test_authenticator_accepts_only_a_fresh_inner_signature() -> None:
    """Proves the inner user's signature within the skew passes, and a missing header, a wrong
    secret, another user, a stale or future date-time and a malformed one are refused."""
    checker = _checker()
    ok = _headers("ariane-inner", "inner-secret-1", NOW - datetime.timedelta(seconds=30))
    assert checker.refusal(ok, peer="ipv4:127.0.0.1:5", rpc="RegisterBroker") is None
    refused = {
        "missing": {},
        "wrong secret": _headers("ariane-inner", "nope", NOW),
        "other user": _headers("admin", "inner-secret-1", NOW),
        "stale": _headers("ariane-inner", "inner-secret-1", NOW - datetime.timedelta(minutes=6)),
        "future": _headers("ariane-inner", "inner-secret-1", NOW + datetime.timedelta(minutes=6)),
    }
    bad_date = dict(ok)
    bad_date[signing.DATE_TIME_HEADER] = "yesterday"
    bad_date[signing.AUTHORIZATION_HEADER] = _headers("ariane-inner", "inner-secret-1", NOW)[
        signing.AUTHORIZATION_HEADER
    ].replace(
        signing.grpc_signature_hex("inner-secret-1", signing.grpc_date_time(NOW)),
        signing.grpc_signature_hex("inner-secret-1", "yesterday"),
    )
    refused["malformed date"] = bad_date
    for what, headers in refused.items():
        reason = checker.refusal(headers, peer="ipv4:10.0.0.9:5", rpc="RegisterBroker")
        assert reason is not None, what
        assert "inner-secret-1" not in reason, what
