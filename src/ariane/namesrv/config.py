"""``ariane namesrv --config FILE``: the name server's TOML settings file.

Layout (every key optional; flags given on the command line win over the file)::

    listen = "0.0.0.0:9876"
    remoting_listen = ""
    metrics_listen = "0.0.0.0:5557"
    scan_interval_ms = 5000
    forward_timeout_ms = 3000
    broker_channels_max = 256
    kv_entries_max = 100000
    [auth]
    authentication_enabled = true          # default: on when a credential is set
    date_time_skew_ms_max = 300000
    [auth.inner_client_authentication_credentials]
    access_key = "ariane-inner"            # the brokers' [auth] credential
    secret_key = "..."
    [tls]
    server_mode = "enforcing"              # disabled | permissive | enforcing
    cert_path = "/etc/ariane/tls/tls.crt"
    key_path = "/etc/ariane/tls/tls.key"
    trust_cert_path = "/etc/ariane/tls/ca.crt"
    need_client_auth = "none"              # none | optional | require

Unknown keys and values of the wrong type are refused with the key's dotted path; values out of
bounds are refused by the settings' own checks. Keep the file readable by the name server only
(it holds the secret key).
"""

from __future__ import annotations

import pathlib
import tomllib
from collections.abc import Mapping
from typing import Any

from ariane.common import tls
from ariane.namesrv import inner_auth, server
from ariane.security import settings as auth_settings

_TOP_LEVEL: dict[str, type] = {
    "listen": str,
    "remoting_listen": str,
    "metrics_listen": str,
    "scan_interval_ms": int,
    "forward_timeout_ms": int,
    "broker_channels_max": int,
    "kv_entries_max": int,
}
_AUTH: dict[str, type] = {"authentication_enabled": bool, "date_time_skew_ms_max": int}
_CREDENTIAL: dict[str, type] = {"access_key": str, "secret_key": str}
_CREDENTIAL_KEY = "inner_client_authentication_credentials"
_TLS: dict[str, type] = {
    "server_mode": str,
    "cert_path": str,
    "key_path": str,
    "trust_cert_path": str,
    "need_client_auth": str,
    "handshake_timeout_ms": int,
    "reload_check_interval_ms": int,
}


def load(path: pathlib.Path | None, **overrides: Any) -> server.NameServerSettings:
    """Settings from the TOML file at ``path`` (``None``: none) with ``overrides`` (top-level
    keys; ``None`` values are ignored) applied over it.

    Raises:
        ValueError: unknown keys, wrong types or values out of bounds.
        OSError: the file cannot be read.
    """
    raw: Mapping[str, Any] = tomllib.loads(path.read_text()) if path is not None else {}
    return from_mapping(raw, **overrides)


def from_mapping(raw: Mapping[str, Any], **overrides: Any) -> server.NameServerSettings:
    """Settings from a parsed TOML mapping (see ``load``)."""
    values = _scalars(raw, _TOP_LEVEL, "", extra={"auth", "tls"})
    values.update({k: v for k, v in overrides.items() if v is not None})
    auth = raw.get("auth", {})
    if not isinstance(auth, Mapping):
        raise ValueError("[auth] must be a table")
    auth_values: dict[str, Any] = _scalars(auth, _AUTH, "auth", extra={_CREDENTIAL_KEY})
    credential = auth.get(_CREDENTIAL_KEY)
    if credential is not None:
        where = f"auth.{_CREDENTIAL_KEY}"
        if not isinstance(credential, Mapping):
            raise ValueError(f"[{where}] must be a table")
        keys = _scalars(credential, _CREDENTIAL, where, extra=set())
        if set(keys) != set(_CREDENTIAL):
            raise ValueError(f"[{where}] needs access_key and secret_key")
        auth_values[_CREDENTIAL_KEY] = auth_settings.InnerCredentials(**keys)
    return server.NameServerSettings(
        **values, auth=inner_auth.NameServerAuthSettings(**auth_values), tls=_tls(raw)
    )


def _tls(raw: Mapping[str, Any]) -> tls.TlsSettings:
    """The ``[tls]`` table (``ValueError`` naming a bad key or value)."""
    table = raw.get("tls", {})
    if not isinstance(table, Mapping):
        raise ValueError("[tls] must be a table")
    values: dict[str, Any] = _scalars(table, _TLS, "tls", extra=set())
    for key, kind in (("server_mode", tls.TlsMode), ("need_client_auth", tls.ClientAuth)):
        if key in values:
            try:
                values[key] = kind(values[key])
            except ValueError:
                choices = "|".join(m.value for m in kind)
                raise ValueError(f"tls.{key}={values[key]!r} is not one of {choices}") from None
    return tls.TlsSettings(**values)


def _scalars(
    raw: Mapping[str, Any], known: Mapping[str, type], path: str, *, extra: set[str]
) -> dict[str, Any]:
    """The scalar keys of one table, type-checked; tables named in ``extra`` are skipped."""
    values: dict[str, Any] = {}
    for key, value in raw.items():
        where = f"{path}.{key}" if path else key
        if key in extra:
            continue
        kind = known.get(key)
        if kind is None:
            names = sorted({*known, *extra})
            raise ValueError(f"unknown name-server setting {where!r}; known here: {names}")
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise ValueError(f"{where} must be a {kind.__name__}, not {value!r}")
        values[key] = value
    return values
