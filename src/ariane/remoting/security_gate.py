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
   subject and the peer's IP (``authorization.authorize``);
3. a refusal answers **16 NO_PERMISSION** with RocketMQ's text as the remark ("User:alice is
   not found.", "User:alice check signature failed.", "User:alice has no permission to access
   Topic:T from 10.0.0.7, no matched policies."), and a oneway request is dropped; each refusal
   writes one line to the ``ariane.auth_audit`` logger, at most ``AUDIT_LINES_PER_S`` a second
   (the lines left out are counted in the next one). Allowed requests are not logged.

With both switches off the handler table is returned unchanged: nothing reads ``AccessKey``.

Invariants: no handler in a wrapped table runs for a request the gate refused; no line, remark
or counter holds a secret or a signature; a request whose body cannot be decoded gets the
resources it can name (a required one missing is a refusal, never an exception).
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
import logging
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from ariane.common import clock as clock_mod
from ariane.common import topics
from ariane.remoting import codes, fastjson, transport
from ariane.remoting import command as cmd_mod
from ariane.security import authentication, authorization, errors, remoting_requests, requests
from ariane.security import settings as auth_settings

_log = logging.getLogger(__name__)
_audit = logging.getLogger("ariane.auth_audit")

AUDIT_LINES_PER_S = 10
"""Most audit lines written per second; more refusals in the same second are only counted."""

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


class AuditLog:
    """Rate-limited refusal lines on the ``ariane.auth_audit`` logger (RocketMQ writes
    ``RocketmqAuthAudit`` lines, unbounded; security.md §9).

    Args:
        time: the clock (``monotonic_ms``).
        lines_per_s: most lines per second.
    """

    def __init__(self, *, time: clock_mod.Clock, lines_per_s: int = AUDIT_LINES_PER_S) -> None:
        assert lines_per_s >= 1, lines_per_s
        self._time = time
        self._lines_per_s = lines_per_s
        self._second = -1
        self._written = 0
        self.suppressed = 0
        """Refusals not written since the last line (reported in the next one)."""

    def refused(self, line: str) -> bool:
        """Write ``line`` unless this second's budget is spent; whether it was written."""
        second = self._time.monotonic_ms() // 1000
        if second != self._second:
            self._second, self._written = second, 0
        if self._written >= self._lines_per_s:
            self.suppressed += 1
            return False
        self._written += 1
        left_out, self.suppressed = self.suppressed, 0
        suffix = f" ({left_out} earlier refusals not logged)" if left_out else ""
        _audit.info("%s%s", clip(line), suffix)
        return True


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
        time: the clock of the audit budget.
        body_resources: code -> reader of the names its body holds (``BODY_RESOURCES``).
    """

    def __init__(
        self,
        directory: Directory,
        auth: auth_settings.AuthSettings,
        *,
        cluster: str,
        time: clock_mod.Clock,
        body_resources: Mapping[int, BodyDecoder] | None = None,
    ) -> None:
        self._directory = directory
        self._auth = auth
        self._cluster = cluster
        self._bodies = dict(BODY_RESOURCES if body_resources is None else body_resources)
        entries = auth.identity_cache_entries_max
        self._cache = authentication.IdentityCache(entries_max=entries) if entries else None
        self._generation = directory.generation
        self._ids = itertools.count(1)
        self.audit = AuditLog(time=time)
        self.counts: collections.Counter[str] = collections.Counter()
        """``authentication.<status>`` and ``authorization.<status>`` per request checked."""

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
        self.counts[f"authentication.{result.status.value}"] += 1
        name = result.username or ""
        if not result.ok:
            self.audit.refused(
                f"[AUTHENTICATION] User:{name or '-'} is authenticated failed from {peer} "
                f"for request = {request.code}: {result.message}"
            )
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
        try:
            needed = remoting_requests.remoting_permissions(
                request.code, request.ext_fields, cluster=self._cluster, body=body
            )
        except errors.SecurityError as exc:
            self.counts["authorization.UNMAPPABLE"] += 1
            self.audit.refused(
                f"[AUTHORIZATION] Subject = User:{name} is Deny from {peer} "
                f"for request = {request.code}: {exc.message}"
            )
            return Decision(False, exc.message, name)
        decided = authorization.authorize(
            self._directory, result.subject, needed, requests.source_ip_of(peer)
        )
        self.counts[f"authorization.{decided.status.value}"] += 1
        if decided.allowed:
            return Decision(True, "", name)
        what = decided.permission.describe() if decided.permission else "-"
        self.audit.refused(
            f"[AUTHORIZATION] Subject = User:{name} is Deny Action = {what} from sourceIp = "
            f"{requests.source_ip_of(peer) or peer} for request = {request.code}: "
            f"{decided.message}"
        )
        return Decision(False, decided.message, name)


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
