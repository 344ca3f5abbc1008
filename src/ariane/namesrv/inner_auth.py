"""Inner authentication on the name server: only brokers holding the inner credential may change
the route tables (RegisterBroker, BrokerHeartbeat, UnregisterBroker).

RocketMQ's name server checks nothing: anyone reaching port 9876 can REGISTER_BROKER under a
real broker's name and id 0 and take its routes (security.md §3.3, weakness 14), and since
Ariane's registrations carry epochs, a forged one with a higher epoch would even fence the
real master. Ariane closes that: a name server with an ``[auth]``
``inner_client_authentication_credentials`` (the same ``{access_key, secret_key}`` as the
brokers' ``[auth]``, RocketMQ ``innerClientAuthenticationCredentials``) requires those three
calls to be signed with it.

Scheme: the broker signs each call as an official v5 client signs its gRPC calls
(``security.signing.sign_grpc``: ``authorization: MQv2-HMAC-SHA1 Credential=<AK>, ...`` over
``x-mq-date-time``), and the name server verifies it with the security core
(``authentication.authenticate_grpc``) over a one-user directory holding only the inner user.
Because that signature covers only the date-time (weakness 1), the name server also refuses a
date-time further than ``date_time_skew_ms_max`` from its own clock (Ariane brokers stamp real
UTC): a header captured off the wire replays for at most that long, with any body; TLS on the
name-server port is what closes that window (the HA port's handshake, ``store.ha.frames``, is
nonce-based and has no such window).

A refused call answers ``UNAUTHORIZED`` (40100, the code v2 clients map for authentication
failures) with the reason naming the user, never the secret, and leaves the tables untouched;
each refusal is logged, at most once per client host and reason per ``REFUSAL_LOG_INTERVAL_S``.
Route and cluster queries stay open, as RocketMQ's clients query routes unauthenticated.

The same credential guards the Remoting KV writes (100 PUT_KV_CONFIG, 102 DELETE_KV_CONFIG):
when enforced they must carry ``AccessKey``/``Signature`` ext fields signed as
``AclClientRPCHook`` signs (``authentication.authenticate_remoting`` over the same one-user
directory), else they answer 16 NO_PERMISSION and change nothing (``remoting_refusal``);
KV reads stay open, as in RocketMQ (whose name server checks nothing). A Remoting signature
has no date-time, so a captured signed write replays verbatim (same key, same value) until
the credential changes.

Invariants: secrets never appear in a ``repr``, a log line or an answer; with no credential
configured (or ``authentication_enabled = false``) nothing is checked, as in RocketMQ.
"""

from __future__ import annotations

import dataclasses
import datetime
import logging
from collections.abc import Callable, Mapping

from ariane.common import limits, log_limits
from ariane.security import authentication, model, signing
from ariane.security import settings as auth_settings

_log = logging.getLogger(__name__)

REFUSAL_LOG_INTERVAL_S = 30.0
"""Least time between two refusal lines for the same client host and reason, s."""

DATE_TIME_SKEW_MS_DEFAULT = 300_000
"""Default largest distance between a signed date-time and the name server's clock, ms."""


@dataclasses.dataclass(frozen=True, slots=True)
class NameServerAuthSettings:
    """The name server's ``[auth]`` table.

    Raises:
        ValueError: ``authentication_enabled = true`` without a credential, or a bound out of
            range.
    """

    authentication_enabled: bool | None = None
    """Whether RegisterBroker, BrokerHeartbeat and UnregisterBroker must be signed with the
    inner credential; ``None`` (unset): on exactly when a credential is configured. ``false``
    with a credential leaves registration open (a rolling upgrade: brokers sign first)."""

    inner_client_authentication_credentials: auth_settings.InnerCredentials | None = None
    """The credential brokers sign with (their ``[auth]`` table's, RocketMQ
    ``innerClientAuthenticationCredentials``)."""

    date_time_skew_ms_max: int = DATE_TIME_SKEW_MS_DEFAULT
    """Largest distance between a call's signed ``x-mq-date-time`` and this name server's
    clock, ms (5 min); farther is refused (it bounds how long a captured header replays)."""

    def __post_init__(self) -> None:
        if self.authentication_enabled and self.inner_client_authentication_credentials is None:
            raise ValueError(
                "auth.authentication_enabled needs auth.inner_client_authentication_credentials "
                "(the credential brokers sign their registrations with)"
            )
        limits.check_range(
            "auth.date_time_skew_ms_max", self.date_time_skew_ms_max, 1_000, 86_400_000
        )

    @property
    def enforced(self) -> bool:
        """Whether registrations must be signed."""
        credential = self.inner_client_authentication_credentials
        return credential is not None and self.authentication_enabled is not False


class InnerUserDirectory:
    """A ``UserDirectory`` holding only the inner user (Super, enabled)."""

    def __init__(self, credential: auth_settings.InnerCredentials) -> None:
        self._user = model.User(
            model.Username(credential.access_key),
            credential.secret_key,
            model.UserType.SUPER,
        )

    def find_user(self, username: str) -> model.User | None:
        """The inner user when ``username`` is its name, else ``None``."""
        return self._user if username == self._user.username else None


class InnerAuthenticator:
    """Checks the inner-credential signature of registry calls.

    Args:
        settings: the name server's ``[auth]`` table (``enforced`` must be true).
        now: the wall clock (UTC), injectable for tests.
    """

    def __init__(
        self,
        settings: NameServerAuthSettings,
        *,
        now: Callable[[], datetime.datetime] = lambda: datetime.datetime.now(datetime.UTC),
    ) -> None:
        credential = settings.inner_client_authentication_credentials
        assert credential is not None and settings.enforced, "nothing to enforce"
        self._users = InnerUserDirectory(credential)
        self._skew = datetime.timedelta(milliseconds=settings.date_time_skew_ms_max)
        self._now = now
        self._lines = log_limits.LineLimiter(key_interval_s=REFUSAL_LOG_INTERVAL_S)

    def refusal(self, headers: Mapping[str, str], *, peer: str, rpc: str) -> str | None:
        """Why the call whose metadata is ``headers`` is refused, or ``None`` to serve it.

        Args:
            headers: the call's text metadata, keys lower-cased.
            peer: the client's address as gRPC names it (for the log line).
            rpc: the RPC name (for the log line).
        """
        date_time = headers.get(signing.DATE_TIME_HEADER)
        result = authentication.authenticate_grpc(
            self._users,
            authorization=headers.get(signing.AUTHORIZATION_HEADER),
            date_time=date_time,
        )
        reason = None if result.ok else result.message
        if reason is None and date_time is not None:
            reason = self._stale(date_time)
        if reason is not None and self._lines.allow((_host(peer), rpc, reason)):
            _log.warning("refused %s from %s: %s", rpc, peer, reason)
        return reason

    def remoting_refusal(
        self, ext_fields: Mapping[str, str], body: bytes, *, version: int, peer: str, code: int
    ) -> str | None:
        """Why the Remoting write ``code`` is refused (RocketMQ's remark), or ``None``.

        Args:
            ext_fields: the request's ext fields (``AccessKey``, ``Signature``, the rest signed).
            body: the request's body (signed too).
            version: the request's ``version`` (decides how the signature is checked).
            peer: the client's ``host:port`` (for the log line).
            code: the request code (for the log line).
        """
        result = authentication.authenticate_remoting(
            self._users, ext_fields=ext_fields, body=body, version=version
        )
        if result.ok:
            return None
        if self._lines.allow((peer.rpartition(":")[0] or peer, code, result.status)):
            _log.warning("refused Remoting code %d from %s: %s", code, peer, result.message[:256])
        return result.message

    def _stale(self, date_time: str) -> str | None:
        try:
            signed = datetime.datetime.strptime(date_time, signing.DATE_TIME_FORMAT)
        except ValueError:
            return f"datetime {date_time!r} is not {signing.DATE_TIME_FORMAT}."
        distance = abs(self._now() - signed.replace(tzinfo=datetime.UTC))
        if distance > self._skew:
            return f"datetime {date_time} is {distance.total_seconds():.0f} s from this clock."
        return None


def _host(peer: str) -> str:
    """The host part of a gRPC peer string (``ipv4:1.2.3.4:5678`` → ``ipv4:1.2.3.4``)."""
    return peer.rpartition(":")[0] or peer
