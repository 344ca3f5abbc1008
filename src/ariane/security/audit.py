"""Audit lines and counters of refused requests, shared by every protocol adapter.

RocketMQ writes each authentication failure and each authorization denial to its
``RocketmqAuthAudit`` logger (``DefaultAuthenticationProvider.doAuditLog``,
``DefaultAuthorizationProvider``; security.md §9) and has no auth metric. Ariane writes the
same facts (user, client address, resource, action, decision, request) to the logger
``ariane.security.audit``, **rate-limited** (``common.log_limits``: one line per
(stage, user, address, resource) per ``AUDIT_KEY_INTERVAL_S``, at most
``AUDIT_LINES_PER_MINUTE_MAX`` lines a minute), because a client can trigger refusals at
will; and it counts every decision for ``/metrics``
(``rocketmq_authentication_total{result}``, ``rocketmq_authorization_total{result}``).

Invariants: a line or a counter label never holds a secret or a signature; a line's user
name, resource and reason are clipped to ``FIELD_CHARS_MAX``; the counter tables
are bounded by the status enums; successes are counted, never logged.
"""

from __future__ import annotations

import logging

from ariane.common import log_limits
from ariane.security import authentication, authorization, model

_log = logging.getLogger(__name__)

AUDIT_KEY_INTERVAL_S = 60.0
"""Least time between two audit lines about the same refusal (stage, user, address,
resource), s."""

AUDIT_LINES_PER_MINUTE_MAX = 60
"""Most audit lines written per minute over all refusals (the rest are counted only)."""

FIELD_CHARS_MAX = 256
"""Longest user name or reason written in a line, in characters: a claimed access key of
megabytes (a Remoting ext field is bounded only by the frame) is clipped, its length told."""


def _clip(text: str) -> str:
    if len(text) <= FIELD_CHARS_MAX:
        return text
    return f"{text[:FIELD_CHARS_MAX]}... ({len(text)} chars)"


class AuthAudit:
    """Counts authentication/authorization outcomes and logs refusals, rate-limited.

    Not thread-safe: one per event loop (the store owner's).

    Attributes:
        authentications: ``AuthStatus`` value (lower case) -> requests, since start.
        authorizations: ``AuthzStatus`` value (lower case) -> requests, since start.
    """

    __slots__ = ("_lines", "authentications", "authorizations")

    def __init__(self) -> None:
        self.authentications: dict[str, int] = {}
        self.authorizations: dict[str, int] = {}
        self._lines = log_limits.LineLimiter(
            key_interval_s=AUDIT_KEY_INTERVAL_S, lines_per_window_max=AUDIT_LINES_PER_MINUTE_MAX
        )

    @property
    def suppressed(self) -> int:
        """Refusal lines not written because of the rate limit."""
        return self._lines.suppressed

    def authenticated(
        self, result: authentication.AuthResult, *, address: str, request: str
    ) -> None:
        """Count one authentication; log it when it failed (``[AUTHENTICATION]`` line)."""
        key = result.status.value.lower()
        self.authentications[key] = self.authentications.get(key, 0) + 1
        if result.ok or not self._lines.allow(("authn", result.username, address)):
            return
        _log.info(
            "[AUTHENTICATION] User:%s is authenticated failed (%s) from %s for request = %s.",
            _clip(result.username or ""),
            _clip(result.message),
            address,
            request,
        )

    def authorized(
        self,
        result: authorization.AuthzResult,
        *,
        subject: model.Subject | None,
        address: str,
        request: str,
    ) -> None:
        """Count one authorization; log it when denied (``[AUTHORIZATION]`` line)."""
        key = result.status.value.lower()
        self.authorizations[key] = self.authorizations.get(key, 0) + 1
        if result.allowed:
            return
        permission = result.permission
        resource = permission.resource.key if permission is not None else ""
        subject_key = subject.key if subject is not None else ""
        if not self._lines.allow(("authz", subject_key, address, resource)):
            return
        actions = (
            ",".join(sorted(a.value for a in permission.actions)) if permission is not None else ""
        )
        _log.info(
            "[AUTHORIZATION] Subject = %s is Deny Action = %s from %s on resource = %s "
            "for request = %s: %s",
            _clip(subject_key),
            actions,
            address,
            _clip(resource),
            request,
            _clip(result.message),
        )
