"""Authentication: who signed a request, and is the signature right (RocketMQ ACL 2.0).

Mirrors ``DefaultAuthenticationContextBuilder`` (reading the credentials of a gRPC call or a
Remoting command) and ``DefaultAuthenticationHandler`` (checking them; security.md §4.1):

1. no credentials at all → MISSING ("username cannot be null.");
2. credentials that cannot be read (no ``x-mq-date-time``, a header without items, bad hex) →
   MALFORMED;
3. an unknown user → UNKNOWN_USER, a disabled one → DISABLED;
4. the recomputed HMAC differs → BAD_SIGNATURE ("check signature failed.").

Every input yields an ``AuthResult``; nothing here raises on client input. The compare is
constant-time (``hmac.compare_digest``, RocketMQ ``MessageDigest.isEqual`` since #8883). There
is no timestamp or replay check, as in RocketMQ (the date-time is only signed, and clients stamp
local time labelled ``Z``): protection against replay is TLS.

``IdentityCache`` remembers verified ``(connection, user, signature)`` triples, bounded, so a
connection re-sending the same header is not re-hashed; unlike RocketMQ's stateful strategy it
keys on the signature too (weakness 3), so a wrong signature is never served from the cache.

Invariants: results and log lines name the user and the reason, never the secret or a
signature; a result is OK only after a successful constant-time compare.
"""

from __future__ import annotations

import collections
import dataclasses
import enum
import hashlib
import hmac
from collections.abc import Mapping
from typing import Protocol

from ariane.security import model, signing

AUTHORIZATION_CHARS_MAX = 1_024
"""Longest ``authorization`` header read, in characters (a real one is ~130); longer is
MALFORMED."""

DATE_TIME_CHARS_MAX = 64
"""Longest ``x-mq-date-time`` value read, in characters; longer is MALFORMED."""

EXT_FIELDS_MAX = 1_024
"""Most Remoting ext fields read for a signature, a count; more is MALFORMED."""

IDENTITY_CACHE_ENTRIES_DEFAULT = 10_000
"""Default bound of an ``IdentityCache`` (RocketMQ ``statefulAuthenticationCacheMaxNum``)."""


class AuthStatus(enum.Enum):
    """What authenticating one request found."""

    OK = "OK"
    MISSING = "MISSING"
    MALFORMED = "MALFORMED"
    UNKNOWN_USER = "UNKNOWN_USER"
    DISABLED = "DISABLED"
    BAD_SIGNATURE = "BAD_SIGNATURE"


@dataclasses.dataclass(frozen=True, slots=True)
class AuthResult:
    """The outcome of authenticating one request.

    Attributes:
        status: OK or why not.
        username: the access key the request claimed, when it could be read.
        message: RocketMQ's text for the outcome, naming the user, never the secret.
        user: the verified user when ``status`` is OK (its type tells Super users apart).
    """

    status: AuthStatus
    username: model.Username | None
    message: str
    user: model.User | None = dataclasses.field(default=None, repr=False)

    @property
    def ok(self) -> bool:
        """Whether the request is authenticated."""
        return self.status is AuthStatus.OK

    @property
    def subject(self) -> model.Subject | None:
        """The authenticated subject (``None`` unless OK)."""
        return self.user.subject if self.user is not None else None


class UserDirectory(Protocol):
    """Where users are looked up (``metadata_store.AuthMetadataStore`` is one)."""

    def find_user(self, username: str) -> model.User | None:
        """The user named ``username`` with its secret, or ``None``."""


@dataclasses.dataclass(frozen=True, slots=True)
class SignedRequest:
    """The credentials read from a request, before they are checked.

    Attributes:
        username: the claimed access key.
        signature: the digest the client sent (raw bytes for gRPC; the base64 text's UTF-8
            bytes for Remoting, compared as RocketMQ compares them).
        content: the bytes the signature should cover.
        remoting: whether the scheme is Remoting (base64) rather than gRPC (hex).
    """

    username: model.Username
    signature: bytes | None
    content: bytes
    remoting: bool


def _missing() -> AuthResult:
    return AuthResult(AuthStatus.MISSING, None, "username cannot be null.")


def _malformed(reason: str, username: str | None = None) -> AuthResult:
    return AuthResult(AuthStatus.MALFORMED, _name(username), reason)


def _name(username: str | None) -> model.Username | None:
    return model.Username(username) if username else None


def read_grpc(authorization: str | None, date_time: str | None) -> SignedRequest | AuthResult:
    """The credentials of a gRPC call's metadata, or why they cannot be read.

    Args:
        authorization: the ``authorization`` metadata value, if present.
        date_time: the ``x-mq-date-time`` metadata value, if present.

    Returns:
        A ``SignedRequest``, or an ``AuthResult`` of status MISSING or MALFORMED.
    """
    if not authorization:
        return _missing()
    if len(authorization) > AUTHORIZATION_CHARS_MAX:
        return _malformed("authentication header is too long.")
    if not date_time:
        return _malformed("datetime is null.")
    if len(date_time) > DATE_TIME_CHARS_MAX:
        return _malformed("datetime is too long.")
    parts = authorization.split(" ", 1)
    if len(parts) != 2:
        return _malformed("authentication header is incorrect.")
    username: str | None = None
    signature: bytes | None = None
    for item in parts[1].split(","):
        key, sep, value = item.strip().partition("=")
        if not sep:
            return _malformed("authentication keyValues length is incorrect.", username)
        if key == "Credential":
            username = value.split("/", 1)[0]
        elif key == "Signature":
            signature = signing.hex_to_digest(value)
            if signature is None:
                return _malformed("create authentication context error.", username)
    if not username:
        return _missing()
    return SignedRequest(model.Username(username), signature, date_time.encode("utf-8"), False)


def read_remoting(
    ext_fields: Mapping[str, str], body: bytes, *, version: int
) -> SignedRequest | AuthResult:
    """The credentials of a Remoting command, or why they cannot be read.

    Args:
        ext_fields: the command's ext fields as received.
        body: the command's body (``b""`` when none).
        version: the command's Remoting ``version``.

    Returns:
        A ``SignedRequest``, or an ``AuthResult`` of status MISSING or MALFORMED.
    """
    username = ext_fields.get(signing.ACCESS_KEY_FIELD)
    if not username:
        return _missing()
    if len(ext_fields) > EXT_FIELDS_MAX:
        return _malformed("too many ext fields.", username)
    sent = ext_fields.get(signing.SIGNATURE_FIELD)
    content = signing.remoting_content(ext_fields, body, version=version)
    signature = sent.encode("utf-8", "surrogatepass") if sent is not None else None
    return SignedRequest(model.Username(username), signature, content, True)


def verify(request: SignedRequest, users: UserDirectory) -> AuthResult:
    """Check read credentials against the user directory (``DefaultAuthenticationHandler``).

    Returns:
        OK with the user, or UNKNOWN_USER, DISABLED or BAD_SIGNATURE.
    """
    name = request.username
    user = users.find_user(name)
    if user is None:
        return AuthResult(AuthStatus.UNKNOWN_USER, name, f"User:{name} is not found.")
    if user.user_status is model.UserStatus.DISABLE:
        return AuthResult(AuthStatus.DISABLED, name, f"User:{name} is disabled.")
    if request.remoting:
        expected = signing.remoting_signature(user.password, request.content).encode("ascii")
    else:
        expected = signing.hmac_sha1(user.password, request.content)
    if request.signature is None or not hmac.compare_digest(expected, request.signature):
        return AuthResult(AuthStatus.BAD_SIGNATURE, name, f"User:{name} check signature failed.")
    return AuthResult(AuthStatus.OK, name, f"User:{name} is authenticated.", user)


def authenticate_grpc(
    users: UserDirectory, *, authorization: str | None, date_time: str | None
) -> AuthResult:
    """Authenticate a gRPC call from its ``authorization`` and ``x-mq-date-time`` metadata.

    The Python client sends ``Credential=`` with an empty access key when it has no
    credentials: that is MISSING, like no header at all.
    """
    read = read_grpc(authorization, date_time)
    return read if isinstance(read, AuthResult) else verify(read, users)


def authenticate_remoting(
    users: UserDirectory, *, ext_fields: Mapping[str, str], body: bytes, version: int
) -> AuthResult:
    """Authenticate a Remoting command from its ``AccessKey``/``Signature`` ext fields."""
    read = read_remoting(ext_fields, body, version=version)
    return read if isinstance(read, AuthResult) else verify(read, users)


class IdentityCache:
    """Verified identities per connection, bounded, least recently used evicted first.

    Keys are ``(connection id, username, signature bytes, content digest)``: a hit means the
    very same credentials over the very same content were verified on this connection before.
    ``clear`` must be called whenever users change (a password edit or a disabled user must
    take effect at once). Not thread-safe: one per event loop.

    Args:
        entries_max: most identities kept, a count (>= 1).
    """

    def __init__(self, *, entries_max: int = IDENTITY_CACHE_ENTRIES_DEFAULT) -> None:
        assert entries_max >= 1, entries_max
        self._entries_max = entries_max
        self._entries: collections.OrderedDict[tuple[str, str, bytes, bytes], model.User] = (
            collections.OrderedDict()
        )

    def __len__(self) -> int:
        return len(self._entries)

    def authenticate(
        self, connection_id: str, request: SignedRequest, users: UserDirectory
    ) -> AuthResult:
        """``verify(request, users)``, served from the cache when this connection already
        proved the same credentials; only OK results are remembered."""
        signature = request.signature if request.signature is not None else b""
        digest = hashlib.sha256(
            request.content
        ).digest()  # a signature replayed on other content misses
        key = (connection_id, request.username, signature, digest)
        user = self._entries.get(key)
        if user is not None:
            self._entries.move_to_end(key)
            name = request.username
            return AuthResult(AuthStatus.OK, name, f"User:{name} is authenticated.", user)
        result = verify(request, users)
        if result.ok and result.user is not None:
            self._entries[key] = result.user
            while len(self._entries) > self._entries_max:
                self._entries.popitem(last=False)
        return result

    def forget_connection(self, connection_id: str) -> None:
        """Drop what a closed connection proved."""
        for key in [k for k in self._entries if k[0] == connection_id]:
            del self._entries[key]

    def clear(self) -> None:
        """Drop everything (users or passwords changed)."""
        self._entries.clear()
