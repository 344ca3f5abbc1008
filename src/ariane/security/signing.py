"""The two request signatures of RocketMQ ACL 2.0, byte-exact, both sides (pure: no I/O, no clock).

**gRPC v2** (official v5 clients; server ``DefaultAuthenticationContextBuilder.build(Metadata)``)::

    x-mq-date-time: 20250507T101500Z                      (yyyyMMdd'T'HHmmss'Z')
    authorization:  MQv2-HMAC-SHA1 Credential=<AK>, SignedHeaders=x-mq-date-time, Signature=<hex>

    Signature = hex(HMAC-SHA1(key = UTF-8(SK), data = UTF-8(x-mq-date-time value)))

Python and Go clients write lower-case hex, Java and Node upper-case; the server decodes either.
Java, Python and Go stamp *local* time with a literal ``Z``; nothing checks the value's format or
age (security.md §4.2, weakness 1). Go sends ``Credential=<AK>//Rocketmq``: the access key is the
text before the first ``/``.

**Remoting** (classic clients' ``AclClientRPCHook``; server ``build(ChannelHandlerContext)``)::

    ext fields += AccessKey=<AK> [, SecurityToken=<token>]
    content     = UTF-8(concat of the *values* of every ext field but Signature, by key in Java
                  String order) ++ body            (AclUtils.combineRequestContent)
    Signature   = base64(HMAC-SHA1(key = UTF-8(SK), data = content))

A request of ``version`` <= 399 (V4_9_3) leaves ``_UNIQUE_KEY_QUERY`` out of the content (#5310).
Keys are not in the content, so ``{a:"xy", b:""}`` and ``{a:"x", b:"y"}`` sign alike, and
``code``, ``opaque``, ``flag`` and ``remark`` are not signed (weakness 2): verify, don't fix.

Invariants: the signing side produces exactly what the official clients send, and the verifying
side (``authentication``) recomputes with these same functions, so a round trip cannot drift.
"""

from __future__ import annotations

import base64
import binascii
import datetime
import hashlib
import hmac
from collections.abc import Mapping

GRPC_ALGORITHM = "MQv2-HMAC-SHA1"
"""The algorithm token that opens the v2 ``authorization`` header (RocketMQ never checks it)."""

AUTHORIZATION_HEADER = "authorization"
"""gRPC metadata key of the v2 signature header."""

DATE_TIME_HEADER = "x-mq-date-time"
"""gRPC metadata key of the signed date-time."""

DATE_TIME_FORMAT = "%Y%m%dT%H%M%SZ"
"""``x-mq-date-time`` format (Java ``yyyyMMdd'T'HHmmss'Z'``)."""

ACCESS_KEY_FIELD = "AccessKey"
"""Remoting ext field of the access key (``SessionCredentials.ACCESS_KEY``)."""

SIGNATURE_FIELD = "Signature"
"""Remoting ext field of the base64 signature (``SessionCredentials.SIGNATURE``)."""

SECURITY_TOKEN_FIELD = "SecurityToken"
"""Remoting ext field of the optional STS token (``SessionCredentials.SECURITY_TOKEN``)."""

UNIQUE_KEY_QUERY_FIELD = "_UNIQUE_KEY_QUERY"
"""Ext field left out of the signed content for requests of version <= ``V4_9_3_VERSION``."""

V4_9_3_VERSION = 399
"""``MQVersion.Version.V4_9_3.ordinal()``: the Remoting version up to which the unique-key
query flag is not signed."""


def hmac_sha1(secret_key: str, data: bytes) -> bytes:
    """HMAC-SHA1 of ``data`` keyed by the UTF-8 bytes of ``secret_key`` (``AclSigner.sign``);
    20 bytes."""
    return hmac.new(secret_key.encode("utf-8"), data, hashlib.sha1).digest()


def grpc_date_time(now: datetime.datetime) -> str:
    """The ``x-mq-date-time`` value for ``now``, in UTC (Ariane stamps real UTC; the official
    clients stamp local time, which verifies the same since the value is only signed)."""
    if now.tzinfo is not None:
        now = now.astimezone(datetime.UTC)
    return now.strftime(DATE_TIME_FORMAT)


def grpc_signature_hex(secret_key: str, date_time: str) -> str:
    """The lower-case hex signature of a ``x-mq-date-time`` value (Python client ``sign``)."""
    return hmac_sha1(secret_key, date_time.encode("utf-8")).hex()


def sign_grpc(*, access_key: str, secret_key: str, date_time: str) -> tuple[tuple[str, str], ...]:
    """The metadata a v5 client adds to sign a gRPC call, exactly as the Python client sends it.

    Args:
        access_key: the user name.
        secret_key: the user's password.
        date_time: the ``x-mq-date-time`` value (``grpc_date_time(now)``).

    Returns:
        ``((DATE_TIME_HEADER, date_time), (AUTHORIZATION_HEADER, "MQv2-HMAC-SHA1 ..."))``.
    """
    signature = grpc_signature_hex(secret_key, date_time)
    header = (
        f"{GRPC_ALGORITHM} Credential={access_key}, "
        f"SignedHeaders={DATE_TIME_HEADER}, Signature={signature}"
    )
    return ((DATE_TIME_HEADER, date_time), (AUTHORIZATION_HEADER, header))


def _java_order(key: str) -> bytes:
    """Java ``String.compareTo`` order (UTF-16 code units), which ``TreeMap`` sorts keys by;
    it differs from Python's code-point order only for keys beyond the BMP."""
    return key.encode("utf-16-be", "surrogatepass")


def remoting_content(ext_fields: Mapping[str, str], body: bytes, *, version: int) -> bytes:
    """The bytes a Remoting signature covers (``AclUtils.combineRequestContent``).

    Args:
        ext_fields: every ext field of the request as received (``Signature`` is skipped).
        body: the request body (``b""`` when none).
        version: the request's Remoting ``version`` (the unique-key rule, #5310).
    """
    keys = sorted(ext_fields)
    if not "".join(keys).isascii():  # code-point and UTF-16 orders differ beyond the BMP only
        keys.sort(key=_java_order)
    values = [
        ext_fields[key]
        for key in keys
        if key != SIGNATURE_FIELD
        and not (key == UNIQUE_KEY_QUERY_FIELD and version <= V4_9_3_VERSION)
    ]
    return "".join(values).encode("utf-8", "surrogatepass") + body


def remoting_signature(secret_key: str, content: bytes) -> str:
    """The base64 signature of Remoting content (``AclSigner.calSignature``)."""
    return base64.b64encode(hmac_sha1(secret_key, content)).decode("ascii")


def sign_remoting(
    ext_fields: Mapping[str, str],
    body: bytes,
    *,
    access_key: str,
    secret_key: str,
    version: int,
    security_token: str | None = None,
) -> dict[str, str]:
    """A request's ext fields signed as ``AclClientRPCHook.doBeforeRequest`` signs them.

    Args:
        ext_fields: the request's ext fields (its custom header already flattened).
        body: the request body.
        access_key: the user name (added as ``AccessKey``).
        secret_key: the user's password.
        version: the request's Remoting version.
        security_token: added as ``SecurityToken`` (and signed) when given.

    Returns:
        A new mapping: ``ext_fields`` plus ``AccessKey``, ``SecurityToken`` when given, and
        ``Signature``; ``ext_fields`` itself is left unchanged.
    """
    fields = {k: v for k, v in ext_fields.items() if k != SIGNATURE_FIELD}
    fields[ACCESS_KEY_FIELD] = access_key
    if security_token is not None:
        fields[SECURITY_TOKEN_FIELD] = security_token
    content = remoting_content(fields, body, version=version)
    fields[SIGNATURE_FIELD] = remoting_signature(secret_key, content)
    return fields


def hex_to_digest(text: str) -> bytes | None:
    """The bytes of a hex signature (either case; commons-codec ``Hex.decodeHex``), or ``None``
    when it is not hex (odd length, or any other character: whitespace is refused too)."""
    if len(text) % 2:
        return None
    try:
        return binascii.unhexlify(text.encode("ascii"))
    except (UnicodeEncodeError, binascii.Error):
        return None
