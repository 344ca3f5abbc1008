"""The ``[auth]`` settings group: switches, bootstrap users and bounds of the security core.

Mirrors RocketMQ's ``AuthConfig`` keys (``authenticationEnabled``, ``authorizationEnabled``,
``initAuthenticationUser``, ``innerClientAuthenticationCredentials``; security.md §7) as a
frozen dataclass a TOML ``[auth]`` table maps onto::

    [auth]
    authentication_enabled = true
    authorization_enabled = true
    identity_cache_entries_max = 10000
    [auth.init_authentication_user]
    username = "admin"
    password = "..."
    [auth.inner_client_authentication_credentials]
    access_key = "ariane-inner"
    secret_key = "..."

Invariants: secrets never appear in a ``repr``; authorization cannot be on while authentication
is off (RocketMQ then fails every request, #9138: Ariane refuses the configuration instead).
"""

from __future__ import annotations

import dataclasses

from ariane.security import errors, model

IDENTITY_CACHE_ENTRIES_LIMIT = 1_000_000
"""Largest accepted ``identity_cache_entries_max``, a count."""


def _check_user(where: str, username: str, password: str) -> None:
    """Refuse a bootstrap user the metadata store would refuse (``ValueError`` naming it)."""
    try:
        model.User(model.check_username(username), password)
    except errors.SecurityError as exc:
        raise ValueError(f"{where}: {exc.message}") from None


@dataclasses.dataclass(frozen=True, slots=True)
class InitUser:
    """The bootstrap administrator (RocketMQ ``initAuthenticationUser`` JSON
    ``{"username":..., "password":...}``): created as Super at start **only if absent**; later
    edits of the password here are ignored (change it with AUTH_UPDATE_USER)."""

    username: str
    """Its name (access key)."""

    password: str = dataclasses.field(repr=False)
    """Its secret key; never logged."""

    def __post_init__(self) -> None:
        _check_user("auth.init_authentication_user", self.username, self.password)


@dataclasses.dataclass(frozen=True, slots=True)
class InnerCredentials:
    """The credentials this server signs its own calls with (name servers, master↔slave,
    admin CLI on the same host; RocketMQ ``innerClientAuthenticationCredentials``
    ``{"accessKey":..., "secretKey":...}``); that user is created as Super at start if absent."""

    access_key: str
    """The inner user's name."""

    secret_key: str = dataclasses.field(repr=False)
    """The inner user's secret key; never logged."""

    def __post_init__(self) -> None:
        _check_user(
            "auth.inner_client_authentication_credentials", self.access_key, self.secret_key
        )


@dataclasses.dataclass(frozen=True, slots=True)
class AuthSettings:
    """Authentication and authorization switches and bounds (``[auth]``).

    Raises:
        ValueError: authorization enabled without authentication, or a bound out of range.
    """

    authentication_enabled: bool = False
    """Verify the signature of every request (RocketMQ ``authenticationEnabled``, default
    false); off, ``AccessKey``/``Signature``/``authorization`` are ignored."""

    authorization_enabled: bool = False
    """Check every request against the ACLs (RocketMQ ``authorizationEnabled``, default false);
    needs ``authentication_enabled``, which tells who the subject is."""

    init_authentication_user: InitUser | None = None
    """The bootstrap Super user, created at start if absent; ``None`` = none."""

    inner_client_authentication_credentials: InnerCredentials | None = None
    """What this server signs its own outgoing calls with (also created as Super if absent)."""

    identity_cache_entries_max: int = 10_000
    """Most entries of each of a gate's caches, a count: verified (connection, user,
    signature) identities, verified gRPC headers, authorization decisions
    (``security.cache``); 0 turns them all off (RocketMQ ``statefulAuthenticationCacheMaxNum``
    and ``statefulAuthorizationCacheMaxNum``, both 10000)."""

    users_max: int = model.USERS_MAX
    """Most users the metadata store holds, a count (at most ``model.USERS_MAX``)."""

    def __post_init__(self) -> None:
        if self.authorization_enabled and not self.authentication_enabled:
            raise ValueError(
                "auth.authorization_enabled needs auth.authentication_enabled "
                "(the subject of a request is its authenticated user)"
            )
        if not 0 <= self.identity_cache_entries_max <= IDENTITY_CACHE_ENTRIES_LIMIT:
            raise ValueError(
                f"auth.identity_cache_entries_max={self.identity_cache_entries_max} is outside "
                f"0..{IDENTITY_CACHE_ENTRIES_LIMIT}"
            )
        if not 1 <= self.users_max <= model.USERS_MAX:
            raise ValueError(f"auth.users_max={self.users_max} is outside 1..{model.USERS_MAX}")
