"""The one authentication + authorization step of the broker's gRPC services (issue 21).

``GrpcAuthGate.check`` runs in the status guard of ``grpcwire.guard`` before any handler, for
every RPC of ``MessagingService``, ``ariane.admin.v1.Admin``, ``Ingest`` and the upstream
``apache.rocketmq.v2.Admin``, whether the
broker's own gRPC server or a front-end worker's relay brought the call (both end in the same
guard on the store owner, which holds the users and ACLs). It builds a
``security.requests.RequestContext`` from the call:

* metadata ``authorization`` and ``x-mq-date-time`` → ``authentication.read_grpc``, verified
  through a bounded ``IdentityCache`` keyed by (``x-mq-client-id`` + peer, user, signature,
  content): a wrong signature is never served from it (unlike RocketMQ's stateful strategy,
  which skips re-verification per connection for 60 s); the cache is cleared whenever the
  store's ``generation`` moves (a password edit or a disabled user takes effect at once);
* the resources the request names (``requests.grpc_permissions`` / ``telemetry_permissions``,
  read from the request message by ``resources_of``) and the peer's IP →
  ``authorization.authorize``.

The official v5 clients sign ``x-mq-date-time``, one value per second, so every call of a
client within a second repeats one ``authorization`` header: ``check`` remembers (client id,
peer, ``authorization``, ``x-mq-date-time``) → the verified user, and (RPC, names, user, peer)
→ the decision, in ``security.cache.GenerationCache``s valid for one store generation, so a
single send pays neither an HMAC, a header parse, a permission mapping nor an ACL walk, and any
change of a user or an ACL is decided afresh by the very next call (tested against an uncached
gate by a Hypothesis property, ``tests/test_security_cache_safety.py``).

Refusals are statuses, as RocketMQ's proxy answers (security.md §5): authentication failures
UNAUTHORIZED 40100, denials FORBIDDEN 40300 naming the resource and action; a request whose
required resource is missing is a denial. A client-streaming call (Telemetry, SendStream) is
authenticated when it opens and each request is authorized as it is read (RocketMQ re-checks
every Telemetry command with the stream's opening headers); a refused one ends the stream with
a response carrying the status. Each decision is counted and each refusal logged,
rate-limited (``security.audit``).

The authenticated user of the call in progress is readable by handlers through ``caller()``
(a context variable set by ``check``): the admin user RPCs use it for "only a Super user may
create or promote a Super user". No handler checks credentials itself.

Invariants: with authentication off no gate exists (the guard pays one ``is None`` test);
``check`` never raises for client input; no secret or signature reaches a status or a log.
"""

from __future__ import annotations

import contextvars
import functools
import logging
from collections.abc import Callable
from typing import Any

from ariane.broker import runtime
from ariane.broker import settings as broker_settings
from ariane.common import errors
from ariane.grpcwire import guard, metadata, pb
from ariane.security import (
    audit,
    authentication,
    authorization,
    cache,
    metadata_store,
    model,
    requests,
    settings,
)

_log = logging.getLogger(__name__)

_CALLER: contextvars.ContextVar[model.User | None] = contextvars.ContextVar(
    "ariane_grpc_caller", default=None
)


def caller() -> model.User | None:
    """The authenticated user of the gRPC call being handled (``None`` with authentication
    off). Valid inside a handler the guard runs after ``GrpcAuthGate.check``."""
    return _CALLER.get()


Names = tuple[tuple[str, ...], str | None]
"""What a request names: its topics and its group (or ``None``)."""

_CONSUMER_TYPES = frozenset(
    {
        pb.v2.ClientType.PUSH_CONSUMER,
        pb.v2.ClientType.SIMPLE_CONSUMER,
        pb.v2.ClientType.PULL_CONSUMER,
        pb.v2.ClientType.LITE_PUSH_CONSUMER,
        pb.v2.ClientType.LITE_SIMPLE_CONSUMER,
    }
)


@functools.cache
def _fields_of(request_class: Any) -> frozenset[str]:
    """The field names of a request class (read once per class: descriptor lookups cost)."""
    return frozenset(request_class.DESCRIPTOR.fields_by_name)


def _resource_name(request: Any, field: str, fields: frozenset[str]) -> str | None:
    """``request.<field>.name`` for a ``Resource``/``Topic``/``SubscriptionGroup`` field, or a
    plain string field's value; ``None`` when the request has no such field."""
    if field not in fields:
        return None
    value = getattr(request, field)
    return value if isinstance(value, str) else str(value.name)


def _generic_names(request: Any) -> Names:
    """Topic and group of a v2 or admin request, read by field name: ``topic``,
    ``message_queue.topic``, ``messages[].topic``; ``group``."""
    fields = _fields_of(request.__class__)
    topics: list[str] = []
    topic = _resource_name(request, "topic", fields)
    if topic is not None:
        topics.append(topic)
    if "message_queue" in fields:
        topics.append(request.message_queue.topic.name)
    if "messages" in fields:
        topics.extend(m.topic.name for m in request.messages)
    return tuple(topics), _resource_name(request, "group", fields)


def _heartbeat_names(request: Any) -> Names:
    group = request.group.name if request.client_type in _CONSUMER_TYPES else None
    return (), group


def _named_topic(request: Any) -> Names:
    return (request.name,), None


def _named_group(request: Any) -> Names:
    return (), request.name


def _topics_and_group(request: Any) -> Names:
    """A v2 Admin request naming its topics in the repeated ``topics`` field."""
    return tuple(t.name for t in request.topics), request.group.name


_V2 = requests.V2
_ADMIN = requests.ADMIN
_V2_ADMIN = requests.V2_ADMIN

NAMES_OF: dict[str, Callable[[Any], Names]] = {
    _V2 + "Heartbeat": _heartbeat_names,
    _ADMIN + "DeleteTopic": _named_topic,
    _ADMIN + "DeleteSubscriptionGroup": _named_group,
    _V2_ADMIN + "DescribeGroupAccumulation": _topics_and_group,
    _V2_ADMIN + "QueryTimeSpan": _topics_and_group,
}
"""RPCs whose names are not read by field name (``_generic_names`` reads the others)."""


def permissions_of(
    rpc_name: str, request: Any, cluster: str
) -> tuple[authorization.Permission, ...]:
    """What one request of ``rpc_name`` needs (``requests.grpc_permissions``; a Telemetry
    command: only a ``settings`` one needs anything).

    Raises:
        security.errors.RequestMappingError: a required topic or group is absent.
    """
    if rpc_name == _V2 + "Telemetry":
        return _telemetry_permissions(request)
    topics, group = NAMES_OF.get(rpc_name, _generic_names)(request)
    return requests.grpc_permissions(rpc_name, cluster=cluster, topics=topics, group=group)


def _telemetry_permissions(command: Any) -> tuple[authorization.Permission, ...]:
    if command.WhichOneof("command") != "settings":
        return ()
    reported = command.settings
    kind = reported.WhichOneof("pub_sub")
    if kind == "publishing":
        names = [t.name for t in reported.publishing.topics]
        return requests.telemetry_permissions(publishing_topics=names)
    if kind == "subscription":
        subscription = reported.subscription
        return requests.telemetry_permissions(
            subscription_group=subscription.group.name,
            subscription_topics=[s.topic.name for s in subscription.subscriptions],
        )
    return requests.telemetry_permissions()  # raises: neither publishing nor subscription


def _headers(context: guard.CallContext) -> tuple[str | None, str | None, str]:
    """``authorization``, ``x-mq-date-time`` and ``x-mq-client-id`` of a call (first value of
    each, text headers only)."""
    authorization_value = date_time = None
    client_id = ""
    for key, value in context.invocation_metadata() or ():
        if not isinstance(value, str):
            continue
        key = key if key.islower() else key.lower()
        if key == metadata.AUTHORIZATION and authorization_value is None:
            authorization_value = value
        elif key == metadata.DATE_TIME and date_time is None:
            date_time = value
        elif key == metadata.CLIENT_ID and not client_id:
            client_id = value
    return authorization_value, date_time, client_id


class GrpcAuthGate:
    """Authenticates and authorizes gRPC calls against one broker's users and ACLs.

    Args:
        store: the broker's users and ACLs.
        auth: the ``[auth]`` settings (authorization may be off while authentication is on).
        cluster: this broker's cluster name (``Cluster:<name>`` of admin RPCs).
        audit_log: where decisions are counted and refusals logged (a new one when ``None``).
    """

    def __init__(
        self,
        store: metadata_store.AuthMetadataStore,
        auth: settings.AuthSettings,
        *,
        cluster: str,
        audit_log: audit.AuthAudit | None = None,
    ) -> None:
        assert auth.authentication_enabled, "no gate without authentication"
        self.store = store
        self.audit = audit_log if audit_log is not None else audit.AuthAudit()
        self._authorize = auth.authorization_enabled
        self._cluster = cluster
        entries = auth.identity_cache_entries_max
        self._cache = authentication.IdentityCache(entries_max=entries) if entries else None
        self._verified: cache.GenerationCache[model.User] | None = (
            cache.GenerationCache(entries) if entries else None
        )
        """(connection, ``authorization``, ``x-mq-date-time``) -> user: a request repeating
        headers already verified on its connection skips parsing them (same key as the
        identity cache: signature and signed content)."""
        self._decided: cache.GenerationCache[authorization.AuthzResult] | None = (
            cache.GenerationCache(entries) if entries else None
        )
        """(RPC, names, user, peer) -> ``AuthzResult`` (RocketMQ's stateful authorization
        cache key: channel, subject, resource, actions, IP)."""
        self._generation = store.generation

    def check(
        self, rpc_name: str, request: Any | None, context: guard.CallContext
    ) -> errors.ArianeError | None:
        """Decide one call (``request`` = ``None``: a stream opening, authentication only).

        Args:
            rpc_name: ``package.Service/Method``.
            request: the request message, or ``None``.
            context: the call's context (metadata and peer).

        Returns:
            ``None`` when the call may proceed, else the error to answer (UNAUTHORIZED or
            FORBIDDEN).
        """
        peer = context.peer() or ""
        user = self._authenticate(rpc_name, context, peer)
        if isinstance(user, errors.ArianeError):
            return user
        _CALLER.set(user)
        if not self._authorize or request is None:
            return None
        return self._authorized(rpc_name, request, user, peer)

    def _authenticate(
        self, rpc_name: str, context: guard.CallContext, peer: str
    ) -> model.User | errors.ArianeError:
        generation = self.store.generation
        if generation != self._generation:
            self._forget_all()
        header, date_time, client_id = _headers(context)
        key = (client_id, peer, header, date_time)
        verified = self._verified
        if verified is not None and (known := verified.get(key, generation)) is not None:
            self.audit.authentications["ok"] = self.audit.authentications.get("ok", 0) + 1
            return known
        read = authentication.read_grpc(header, date_time)
        if isinstance(read, authentication.AuthResult):
            result = read
        elif self._cache is not None:
            result = self._cache.authenticate(f"{client_id}\x00{peer}", read, self.store)
        else:
            result = authentication.verify(read, self.store)
        self.audit.authenticated(result, address=peer, request=rpc_name)
        if result.user is None:
            return errors.UnauthorizedError(result.message)
        if verified is not None:
            verified.put(key, result.user, generation)
        return result.user

    def _forget_all(self) -> None:
        """Users or ACLs changed: nothing verified or decided before still holds."""
        self._generation = self.store.generation
        for remembered in (self._cache, self._verified, self._decided):
            if remembered is not None:
                remembered.clear()

    def _authorized(
        self, rpc_name: str, request: Any, user: model.User, peer: str
    ) -> errors.ArianeError | None:
        subject = user.subject
        generation = self.store.generation
        decided = self._decided if rpc_name != _V2 + "Telemetry" else None
        key: tuple[Any, ...] = ()
        result: authorization.AuthzResult | None = None
        if decided is not None:
            key = (rpc_name, NAMES_OF.get(rpc_name, _generic_names)(request), user.username, peer)
            result = decided.get(key, generation)
        if result is None:
            result = self._decide(rpc_name, request, subject, peer)
            if decided is not None:
                decided.put(key, result, generation)
        self.audit.authorized(result, subject=subject, address=peer, request=rpc_name)
        if result.allowed:
            return None
        return errors.ForbiddenError(result.message)

    def _decide(
        self, rpc_name: str, request: Any, subject: model.Subject, peer: str
    ) -> authorization.AuthzResult:
        try:
            needed = permissions_of(rpc_name, request, self._cluster)
        except errors.BadRequestError as exc:  # RequestMappingError, AuthLimitError
            return authorization.AuthzResult(
                authorization.AuthzStatus.DENIED, f"{subject.key}: {exc.message}"
            )
        return authorization.authorize(self.store, subject, needed, requests.source_ip_of(peer))


class AuthStores:
    """A broker's users and ACLs, opened at start when authentication is on, else on first
    use by an admin user/ACL RPC (so a broker with auth off touches no auth file).

    Args:
        settings: the broker's settings (``store_dir``, ``[auth]``).
    """

    def __init__(self, settings: broker_settings.BrokerSettings) -> None:
        self._settings = settings
        self._store: metadata_store.AuthMetadataStore | None = None
        self.audit: audit.AuthAudit | None = None
        """The gate's decision counters once ``gate`` made one (``None``: auth off)."""

    @property
    def inner_access_key(self) -> str | None:
        """The user name of ``[auth.inner_client_authentication_credentials]`` (the one caller
        ``ExportAuthMetadata`` answers), or ``None`` when none is configured."""
        inner = self._settings.auth.inner_client_authentication_credentials
        return inner.access_key if inner is not None else None

    def use(self, store: metadata_store.AuthMetadataStore) -> None:
        """Serve ``store``, already opened (the runtime's, which the Remoting gate and the
        auth admin codes share), so both protocols see one table of users and ACLs."""
        self._store = store

    def get(self) -> metadata_store.AuthMetadataStore:
        """The store, opened (and its bootstrap users created) on first call.

        Raises:
            security.errors.AuthMetadataError: the file is corrupt or over a bound.
            OSError: the directory or file cannot be created, read or written.
        """
        if self._store is None:
            self._store = runtime.open_auth_metadata(self._settings)
        return self._store

    def gate(self, *, cluster: str) -> GrpcAuthGate | None:
        """The gate of the gRPC services, or ``None`` when authentication is off (then the
        store is not opened here)."""
        if not self._settings.auth.authentication_enabled:
            return None
        gate = GrpcAuthGate(self.get(), self._settings.auth, cluster=cluster)
        self.audit = gate.audit
        return gate
