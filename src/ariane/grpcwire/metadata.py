"""Request headers of the v2 protocol (grpc-v2.md §4), read from a gRPC servicer context.

The official clients send ``x-mq-client-id`` (the identity of a client session, tying Telemetry,
Heartbeat, Send and Ack together), language, protocol, client version, date-time, request id,
namespace and ``authorization`` on every call. A call without a client id is answered with
CLIENT_ID_REQUIRED. Values are bounded: a header longer than ``HEADER_CHARS_MAX`` is refused
with REQUEST_HEADER_FIELDS_TOO_LARGE rather than kept.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Protocol

from ariane.common import errors, ids

CLIENT_ID = "x-mq-client-id"
LANGUAGE = "x-mq-language"
PROTOCOL = "x-mq-protocol"
CLIENT_VERSION = "x-mq-client-version"
DATE_TIME = "x-mq-date-time"
REQUEST_ID = "x-mq-request-id"
NAMESPACE = "x-mq-namespace"
AUTHORIZATION = "authorization"
SESSION_TOKEN = "x-mq-session-token"

FORWARDED_HEADERS: tuple[str, ...] = (
    CLIENT_ID,
    LANGUAGE,
    PROTOCOL,
    CLIENT_VERSION,
    DATE_TIME,
    REQUEST_ID,
    NAMESPACE,
    AUTHORIZATION,
    SESSION_TOKEN,
)
"""Headers an access point passes on when it forwards a call to a broker."""

HEADER_CHARS_MAX = 4096
"""Longest header value accepted, in characters."""


class InvocationMetadataSource(Protocol):
    """What this module needs of a ``grpc.aio.ServicerContext``."""

    def invocation_metadata(self) -> Iterable[tuple[str, str | bytes]] | None:
        """The request headers as ``(key, value)`` pairs."""
        ...


@dataclasses.dataclass(frozen=True, slots=True)
class RequestMetadata:
    """The v2 headers of one call; ``None`` where the client sent none.

    Attributes:
        client_id: ``x-mq-client-id``, e.g. ``host@pid@index@base36time``.
        language: ``x-mq-language`` (``PYTHON``, ``JAVA``, ``HTTP`` for Node …).
        protocol: ``x-mq-protocol`` (``GRPC_V2`` or ``v2``).
        client_version: ``x-mq-client-version``.
        date_time: ``x-mq-date-time`` (``yyyyMMddTHHmmssZ``; Python sends local time).
        request_id: ``x-mq-request-id``.
        namespace: ``x-mq-namespace`` (often empty).
        authorization: the ``authorization`` header (ignored while ACL is off).
        session_token: ``x-mq-session-token``.
    """

    client_id: ids.ClientId | None = None
    language: str | None = None
    protocol: str | None = None
    client_version: str | None = None
    date_time: str | None = None
    request_id: str | None = None
    namespace: str | None = None
    authorization: str | None = None
    session_token: str | None = None


def headers(context: InvocationMetadataSource) -> dict[str, str]:
    """The text headers of a call, keys lower-cased; the first value of a repeated key wins.

    Raises:
        RequestHeaderFieldsTooLargeError: if a value is longer than ``HEADER_CHARS_MAX``.
    """
    found: dict[str, str] = {}
    for key, value in context.invocation_metadata() or ():
        if isinstance(value, bytes):  # binary ("-bin") headers carry no v2 fields
            continue
        if len(value) > HEADER_CHARS_MAX:
            raise errors.RequestHeaderFieldsTooLargeError(
                f"header {key!r} is {len(value)} characters; the limit is {HEADER_CHARS_MAX}"
            )
        if not key.islower():  # gRPC hands keys lower-cased already: lower() only if not
            key = key.lower()
        if key not in found:
            found[key] = value
    return found


def read(context: InvocationMetadataSource) -> RequestMetadata:
    """The v2 headers of a call (see ``headers`` for the errors raised)."""
    found = headers(context)
    client_id = found.get(CLIENT_ID) or None
    return RequestMetadata(
        client_id=None if client_id is None else ids.ClientId(client_id),
        language=found.get(LANGUAGE),
        protocol=found.get(PROTOCOL),
        client_version=found.get(CLIENT_VERSION),
        date_time=found.get(DATE_TIME),
        request_id=found.get(REQUEST_ID),
        namespace=found.get(NAMESPACE),
        authorization=found.get(AUTHORIZATION),
        session_token=found.get(SESSION_TOKEN),
    )


def require_client_id(context: InvocationMetadataSource) -> ids.ClientId:
    """The ``x-mq-client-id`` of a call (every handler asks: it reads only that header after
    the checks of ``headers``, without building a whole ``RequestMetadata``).

    Raises:
        ClientIdRequiredError: if the header is missing or empty (CLIENT_ID_REQUIRED).
        RequestHeaderFieldsTooLargeError: as ``headers``.
    """
    client_id = headers(context).get(CLIENT_ID)
    if not client_id:
        raise errors.ClientIdRequiredError(
            f"the {CLIENT_ID} header is missing; every v2 call must identify its client"
        )
    return ids.ClientId(client_id)


def forwardable(context: InvocationMetadataSource) -> tuple[tuple[str, str], ...]:
    """The v2 headers of a call to pass on to a broker, in ``FORWARDED_HEADERS`` order."""
    found = headers(context)
    return tuple((key, found[key]) for key in FORWARDED_HEADERS if key in found)
