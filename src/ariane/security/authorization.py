"""Authorization: may this subject perform these actions on these resources from this address.

Mirrors RocketMQ's chain ``UserAuthorizationHandler`` → ``AclAuthorizationHandler``
(security.md §2) with the entry order RocketMQ adopted after 5.3.3 (apache/rocketmq #9540,
``comparePolicyEntries`` at HEAD 8fc57f1 and its test ``AuthorizationEvaluatorTest.evaluate9``):

1. A request needs a list of ``Permission``s (one resource, any one of some actions each); **all**
   must pass, and a request needing none passes (RocketMQ: no context → no check).
2. No subject → NO_SUBJECT; an unknown user → UNKNOWN_USER; a disabled user → DISABLED (RocketMQ
   only stops disabled users at authentication; Ariane checks both); a **Super** user → ALLOWED
   without looking at any ACL.
3. For a Normal user, the candidate entries are those matching resource ∧ an action ∧ the client
   IP, from the CUSTOM policy, or from the DEFAULT policy only when CUSTOM has none.
4. The **most specific** candidate decides: LITERAL before PREFIXED (longer prefix first) before
   ``Type:*`` before ``*``. At equal specificity **Deny wins** (RocketMQ's comparator says so in
   a comment but sorts Allow first; ties need two entries on one resource, which a policy cannot
   hold, so it only shows between CUSTOM and DEFAULT, which never mix).
5. No candidate → NO_MATCH (default deny).

Invariants: the result names the subject, resource, actions and client IP, never a secret;
nothing here raises for any subject, ACL or request.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Sequence
from typing import Protocol

from ariane.security import model


@dataclasses.dataclass(frozen=True, slots=True)
class Permission:
    """What a request needs on one resource: any one of ``actions`` (RocketMQ's
    ``DefaultAuthorizationContext`` of one resource and its action list).

    Attributes:
        resource: a literal request-side resource (``Resource.topic``/``group``/``cluster``).
        actions: the actions, any one of which suffices; never empty.
    """

    resource: model.Resource
    actions: frozenset[model.Action]

    def __post_init__(self) -> None:
        assert self.actions, "a permission names at least one action"
        assert self.resource.pattern is model.ResourcePattern.LITERAL, self.resource

    def describe(self) -> str:
        """``Pub,Sub on Topic:T`` for messages and audit lines."""
        names = ",".join(sorted(action.value for action in self.actions))
        return f"{names} on {self.resource.key}"


class AuthzStatus(enum.Enum):
    """The outcome of authorizing one request."""

    ALLOWED = "ALLOWED"
    NO_SUBJECT = "NO_SUBJECT"
    UNKNOWN_USER = "UNKNOWN_USER"
    DISABLED = "DISABLED"
    NO_MATCH = "NO_MATCH"
    DENIED = "DENIED"


@dataclasses.dataclass(frozen=True, slots=True)
class AuthzResult:
    """The outcome of authorizing one request.

    Attributes:
        status: ALLOWED, or why not.
        message: RocketMQ's text, e.g. "User:alice has no permission to access Topic:T from
            10.0.0.7, the decision is deny."
        permission: the first permission refused (``None`` when allowed or refused before any).
        entry: the entry that decided it, when one did.
    """

    status: AuthzStatus
    message: str
    permission: Permission | None = None
    entry: model.PolicyEntry | None = None

    @property
    def allowed(self) -> bool:
        """Whether the request may proceed."""
        return self.status is AuthzStatus.ALLOWED


class AclDirectory(Protocol):
    """Where users and ACLs are looked up (``metadata_store.AuthMetadataStore`` is one)."""

    def find_user(self, username: str) -> model.User | None:
        """The user named ``username``, or ``None``."""

    def find_acl(self, subject: model.Subject) -> model.Acl | None:
        """The subject's ACL, or ``None``."""


def _rank(entry: model.PolicyEntry) -> tuple[int, int, int, int]:
    """Sort key of a candidate: most specific resource first, then Deny before Allow."""
    return (*entry.resource.specificity(), 0 if entry.decision is model.Decision.DENY else 1)


def deciding_entry(
    acl: model.Acl, permission: Permission, client_ip: str | None
) -> model.PolicyEntry | None:
    """The entry of ``acl`` that decides ``permission`` for a client at ``client_ip``, or
    ``None`` when none matches (``AclAuthorizationHandler.matchPolicyEntries`` + sort)."""
    address = model.parse_client_ip(client_ip)
    for policy_type in (model.PolicyType.CUSTOM, model.PolicyType.DEFAULT):
        policy = acl.policy(policy_type)
        if policy is None:
            continue
        candidates = [
            entry
            for entry in policy.entries
            if entry.matches(permission.resource, permission.actions, address)
        ]
        if candidates:
            return min(candidates, key=_rank)
    return None


def authorize(
    directory: AclDirectory,
    subject: model.Subject | None,
    permissions: Sequence[Permission],
    client_ip: str | None,
) -> AuthzResult:
    """Decide a request (see the module docstring for the rules).

    Args:
        directory: users and ACLs.
        subject: who the request acts as (the authenticated user), or ``None``.
        permissions: what the request needs (``requests`` builds them); all must pass.
        client_ip: the client's address without port, or ``None`` when unknown (then only
            entries without source IPs match).

    Returns:
        ALLOWED, or the first refusal with RocketMQ's message.
    """
    if not permissions:
        return AuthzResult(AuthzStatus.ALLOWED, "no resource to check.")
    if subject is None:
        return AuthzResult(
            AuthzStatus.NO_SUBJECT,
            "Authorization failed. Please verify your access rights and try again.",
            permissions[0],
        )
    user = directory.find_user(subject.username)
    if user is None:
        return AuthzResult(AuthzStatus.UNKNOWN_USER, f"{subject.key} not found.", permissions[0])
    if user.user_status is model.UserStatus.DISABLE:
        return AuthzResult(AuthzStatus.DISABLED, f"{subject.key} is disabled.", permissions[0])
    if user.user_type is model.UserType.SUPER:
        return AuthzResult(AuthzStatus.ALLOWED, f"{subject.key} is a super user.")
    acl = directory.find_acl(subject)
    for permission in permissions:
        entry = deciding_entry(acl, permission, client_ip) if acl is not None else None
        if entry is None or entry.decision is model.Decision.DENY:
            status = AuthzStatus.NO_MATCH if entry is None else AuthzStatus.DENIED
            detail = "no matched policies." if entry is None else "the decision is deny."
            message = (
                f"{subject.key} has no permission to access {permission.resource.key} "
                f"from {client_ip or 'an unknown address'}, {detail}"
            )
            return AuthzResult(status, message, permission, entry)
    return AuthzResult(AuthzStatus.ALLOWED, f"{subject.key} is allowed.")
