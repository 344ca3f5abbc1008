"""The one authentication + authorization step of a Remoting server, before any handler runs.

Mirrors RocketMQ's broker request pipeline (``BrokerController.initialRequestPipeline``:
``AuthenticationPipeline`` then ``AuthorizationPipeline`` then the processor; security.md §3-§5)
over the protocol-neutral core (``ariane.security``):

1. **authentication** (``auth.authentication_enabled``): the ``AccessKey``/``Signature`` ext
   fields over the other ext fields' values and the body (``authentication.read_remoting``),
   verified against the metadata store, through a per-connection ``IdentityCache`` keyed on the
   signature and a digest of the signed content (so a wrong signature is never served from it;
   RocketMQ's stateful strategy would, weakness 3). The cache is cleared whenever the store's
   ``generation`` moves (a password edit or a disabled user takes effect at once) and forgets a
   connection when it closes;
2. **authorization** (``auth.authorization_enabled``): what the code needs
   (``remoting_requests.remoting_permissions``, with the names decoded from the body for the
   codes whose topic or group is there: ``BODY_RESOURCES``), decided for the authenticated
   subject and the peer's IP (``authorization.authorize``), through a bounded decision cache
   (``security.cache.GenerationCache``) keyed by everything the decision reads -- the code, the
   values of the ext fields its rule names (``remoting_requests.fields_read``), the body's
   names, the user and the peer -- and valid for one store generation, so a producer's next
   message on the same topic skips the permission mapping and the ACL walk, and a changed ACL
   or user is decided afresh by the very next request;
3. a refusal answers **16 NO_PERMISSION** with RocketMQ's text as the remark ("User:alice is
   not found.", "User:alice check signature failed.", "User:alice has no permission to access
   Topic:T from 10.0.0.7, no matched policies."), and a oneway request is dropped;
4. every decision is counted, and every refusal logged (rate-limited), in the broker's one
   ``security.audit.AuthAudit`` -- the object its gRPC gate records into -- so
   ``rocketmq_authentication_total{result}`` / ``rocketmq_authorization_total{result}`` on
   ``/metrics`` count both protocols and the audit lines have one format (the request is named
   ``remoting:<code>``). Allowed requests are counted, never logged.

With both switches off the handler table is returned unchanged: nothing reads ``AccessKey``.

Invariants: no handler in a wrapped table runs for a request the gate refused; no line, remark
or counter holds a secret or a signature; a request whose body cannot be decoded gets the
resources it can name (a required one missing is a refusal, never an exception).
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from ariane.common import topics
from ariane.remoting import codes, fastjson, transport
from ariane.remoting import command as cmd_mod
from ariane.security import (
    audit,
    authentication,
    authorization,
    cache,
    errors,
    model,
    remoting_requests,
    requests,
)
from ariane.security import settings as auth_settings

_log = logging.getLogger(__name__)

CONNECTION_ID_KEY = "auth.connection_id"
"""Where a connection's id for the identity cache lives in ``Connection.attributes``."""

NAMES_PER_BODY_MAX = 1_024
"""Most topic or group names read from one body (a heartbeat of 1 024 subscriptions)."""

TEXT_CHARS_MAX = 512
"""Longest remark or audit line, in characters: a claimed access key of megabytes is clipped
(its length told) rather than echoed."""

BodyDecoder = Callable[[bytes], remoting_requests.BodyResources]
"""Reads the resource names of one code's body; never raises (absent names on bad input)."""


class Directory(authentication.UserDirectory, authorization.AclDirectory, Protocol):
    """The users and ACLs (``metadata_store.AuthMetadataStore``), and its change counter."""

    @property
    def generation(self) -> int:
        """Bumped by every change of users or ACLs."""


@dataclasses.dataclass(frozen=True, slots=True)
class Decision:
    """The gate's answer for one request.

    Attributes:
        allowed: whether the handler may run.
        remark: RocketMQ's text when refused ("" when allowed).
        username: the authenticated (or claimed) access key, "" when none.
    """

    allowed: bool
    remark: str = ""
    username: str = ""


ALLOWED = Decision(True)


class RemotingGate:
    """Authentication and authorization in front of a Remoting handler table.

    Args:
        directory: users and ACLs.
        auth: the ``[auth]`` switches and the identity cache bound.
        cluster: the server's cluster name (``Cluster:<name>`` resources).
        audit_log: where decisions are counted and refusals logged -- the broker's gRPC gate's
            (``AuthStores.audit``) so both protocols share counters; a new one when ``None``.
        body_resources: code -> reader of the names its body holds (``BODY_RESOURCES``).
    """

    def __init__(
        self,
        directory: Directory,
        auth: auth_settings.AuthSettings,
        *,
        cluster: str,
        audit_log: audit.AuthAudit | None = None,
        body_resources: Mapping[int, BodyDecoder] | None = None,
    ) -> None:
        self._directory = directory
        self._auth = auth
        self._cluster = cluster
        self._bodies = dict(BODY_RESOURCES if body_resources is None else body_resources)
        entries = auth.identity_cache_entries_max
        self._cache = authentication.IdentityCache(entries_max=entries) if entries else None
        self._decided: cache.GenerationCache[authorization.AuthzResult] | None = (
            cache.GenerationCache(entries) if entries else None
        )
        """(code, read ext values, body names, user, peer) -> decision (module docstring)."""
        self._generation = directory.generation
        self._ids = itertools.count(1)
        self.audit = audit_log if audit_log is not None else audit.AuthAudit()
        """Decision counters and rate-limited refusal lines (shared with the gRPC gate)."""

    @property
    def cached_identities(self) -> int:
        """How many verified identities the cache holds (0 with the cache off)."""
        return len(self._cache) if self._cache is not None else 0

    @property
    def enabled(self) -> bool:
        """Whether any check runs (authentication on)."""
        return self._auth.authentication_enabled

    def wrap(self, handlers: Mapping[int, transport.Handler]) -> dict[int, transport.Handler]:
        """``handlers`` each preceded by ``check``; the table itself when the gate is off."""
        if not self.enabled:
            return dict(handlers)
        return {code: self._guarded(handler) for code, handler in handlers.items()}

    def _guarded(self, handler: transport.Handler) -> transport.Handler:
        async def guarded(
            connection: transport.Connection, request: cmd_mod.RemotingCommand
        ) -> cmd_mod.RemotingCommand | None:
            decision = self.check(connection, request)
            if decision.allowed:
                return await handler(connection, request)
            if request.is_oneway:
                return None
            return cmd_mod.response(
                request, codes.ResponseCode.NO_PERMISSION, remark=clip(decision.remark)
            )

        return guarded

    def connection_opened(self, connection: transport.Connection) -> None:
        """Give ``connection`` its cache id and forget what it proved once it closes (register
        as, or call from, the server's ``on_connect``)."""
        connection.attributes[CONNECTION_ID_KEY] = str(next(self._ids))
        connection.add_close_callback(self._connection_closed)

    def _connection_closed(self, connection: transport.Connection) -> None:
        if self._cache is not None:
            self._cache.forget_connection(_connection_id(connection))

    def check(self, connection: transport.Connection, request: cmd_mod.RemotingCommand) -> Decision:
        """Authenticate, then authorize ``request`` (module docstring); never raises."""
        if not self.enabled:
            return ALLOWED
        if self._directory.generation != self._generation and self._cache is not None:
            self._cache.clear()
        self._generation = self._directory.generation
        peer = connection.remote_address
        result = self._authenticate(connection, request)
        self.audit.authenticated(result, address=peer, request=_request_name(request))
        name = result.username or ""
        if not result.ok:
            return Decision(False, result.message, name)
        if not self._auth.authorization_enabled:
            return Decision(True, "", name)
        return self._authorize(request, result, peer)

    def _authenticate(
        self, connection: transport.Connection, request: cmd_mod.RemotingCommand
    ) -> authentication.AuthResult:
        read = authentication.read_remoting(
            request.ext_fields, request.body, version=request.version
        )
        if isinstance(read, authentication.AuthResult):
            return read
        if self._cache is None:
            return authentication.verify(read, self._directory)
        return self._cache.authenticate(_connection_id(connection), read, self._directory)

    def _authorize(
        self,
        request: cmd_mod.RemotingCommand,
        result: authentication.AuthResult,
        peer: str,
    ) -> Decision:
        name = result.username or ""
        decode = self._bodies.get(request.code)
        body = decode(request.body) if decode is not None else remoting_requests.BodyResources()
        generation = self._directory.generation
        decided: authorization.AuthzResult | None = None
        key: tuple[object, ...] = ()
        if self._decided is not None:
            ext = request.ext_fields
            read = tuple(ext.get(f) for f in remoting_requests.fields_read(request.code))
            key = (request.code, read, body, name, peer)
            decided = self._decided.get(key, generation)
        if decided is None:
            decided = self._decide(request, body, result.subject, peer)
            if self._decided is not None:
                self._decided.put(key, decided, generation)
        self.audit.authorized(
            decided, subject=result.subject, address=peer, request=_request_name(request)
        )
        if decided.allowed:
            return Decision(True, "", name)
        return Decision(False, decided.message, name)

    def _decide(
        self,
        request: cmd_mod.RemotingCommand,
        body: remoting_requests.BodyResources,
        subject: model.Subject | None,
        peer: str,
    ) -> authorization.AuthzResult:
        """The uncached decision: the code's permissions, then the ACL walk."""
        try:
            needed = remoting_requests.remoting_permissions(
                request.code, request.ext_fields, cluster=self._cluster, body=body
            )
        except errors.SecurityError as exc:
            return authorization.AuthzResult(authorization.AuthzStatus.DENIED, exc.message)
        return authorization.authorize(
            self._directory, subject, needed, requests.source_ip_of(peer)
        )


def _request_name(request: cmd_mod.RemotingCommand) -> str:
    """How audit lines name a Remoting request (gRPC lines name the RPC path)."""
    return f"remoting:{request.code}"


def clip(text: str) -> str:
    """``text`` cut to ``TEXT_CHARS_MAX`` characters, saying how long it was."""
    if len(text) <= TEXT_CHARS_MAX:
        return text
    return f"{text[:TEXT_CHARS_MAX]}... ({len(text)} chars)"


def _connection_id(connection: transport.Connection) -> str:
    value = connection.attributes.get(CONNECTION_ID_KEY)
    return value if isinstance(value, str) else f"unregistered-{id(connection)}"


# Body readers: the names RocketMQ's DefaultAuthorizationContextBuilder reads from bodies.


def _json_object(body: bytes) -> Mapping[str, Any]:
    if not body:
        return {}
    try:
        data = fastjson.loads(body)
    except fastjson.JsonError:
        return {}
    return data if isinstance(data, Mapping) else {}


def _objects(value: object) -> list[Mapping[str, Any]]:
    if not isinstance(value, list):
        return []
    return [v for v in value[:NAMES_PER_BODY_MAX] if isinstance(v, Mapping)]


def _names(values: list[object], *, skip_retry: bool = False) -> tuple[str, ...]:
    names = [v for v in values if isinstance(v, str) and v.strip()]
    if skip_retry:
        names = [v for v in names if not topics.is_retry_topic(v)]
    return tuple(dict.fromkeys(names[:NAMES_PER_BODY_MAX]))


def heartbeat_resources(body: bytes) -> remoting_requests.BodyResources:
    """34 HEART_BEAT: every consumer group, and every non-retry topic they subscribe to
    (``HeartbeatData.consumerDataSet[].groupName`` / ``.subscriptionDataSet[].topic``)."""
    consumers = _objects(_json_object(body).get("consumerDataSet"))
    subscribed: list[object] = []
    for consumer in consumers:
        subscribed += [s.get("topic") for s in _objects(consumer.get("subscriptionDataSet"))]
    return remoting_requests.BodyResources(
        groups=_names([c.get("groupName") for c in consumers]),
        topics=_names(subscribed, skip_retry=True),
    )


def lock_resources(body: bytes) -> remoting_requests.BodyResources:
    """41/42 LOCK/UNLOCK_BATCH_MQ: ``consumerGroup`` and each non-retry ``mqSet[].topic``."""
    data = _json_object(body)
    queues = data.get("mqSet")
    queue_topics: list[object] = []
    for queue in queues[:NAMES_PER_BODY_MAX] if isinstance(queues, list) else []:
        if isinstance(queue, fastjson.MessageQueue):
            queue_topics.append(queue.topic)
        elif isinstance(queue, Mapping):
            queue_topics.append(queue.get("topic"))
    return remoting_requests.BodyResources(
        groups=_names([data.get("consumerGroup")]),
        topics=_names(queue_topics, skip_retry=True),
    )


def _body_group(key: str) -> BodyDecoder:
    def decode(body: bytes) -> remoting_requests.BodyResources:
        return remoting_requests.BodyResources(groups=_names([_json_object(body).get(key)]))

    return decode


BODY_RESOURCES: Mapping[int, BodyDecoder] = {
    codes.RequestCode.HEART_BEAT: heartbeat_resources,
    codes.RequestCode.LOCK_BATCH_MQ: lock_resources,
    codes.RequestCode.UNLOCK_BATCH_MQ: lock_resources,
    codes.RequestCode.CHECK_CLIENT_CONFIG: _body_group("group"),
    codes.RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: _body_group("groupName"),
}
"""The codes whose rule reads names from the body (``remoting_requests`` ``body.*`` fields)."""
