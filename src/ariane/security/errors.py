"""The security core's errors: refused metadata changes and unmappable requests.

Expected outcomes of checking a request (an unknown user, a bad signature, a denial) are never
exceptions: ``authentication.AuthResult`` and ``authorization.AuthzResult`` carry a status. The
exceptions below are for administrative writes that break a rule and for requests too broken to
name the resources they touch. They join Ariane's tree (``ariane.common.errors``)::

    BadRequestError                    (ariane.common.errors; code BAD_REQUEST)
    └── SecurityError                  any refused security input
        ├── AuthMetadataError          a user/ACL write breaks a rule (RocketMQ's manager texts)
        │   └── AuthLimitError         a bound (users_max, entries per ACL, ...) would be passed
        └── RequestMappingError        a request lacks a field its permissions are read from

Invariant: no message built here contains a password, secret key or signature.
"""

from __future__ import annotations

from ariane.common import errors


class SecurityError(errors.BadRequestError):
    """Root of the security core's errors (a bad request: retrying it as is cannot succeed)."""


class AuthMetadataError(SecurityError):
    """A user or ACL write is refused; the message is RocketMQ's text where one exists
    (``AuthenticationMetadataManagerImpl``/``AuthorizationMetadataManagerImpl``: "The user is
    existed", "The user is not exist", "The source ip is invalid.", ...)."""


class AuthLimitError(AuthMetadataError):
    """A write would pass one of the bounds of ``model`` (``USERS_MAX``, ...); nothing changed."""


class RequestMappingError(SecurityError):
    """A request lacks a field that names a resource it needs permission on (RocketMQ's
    ``AuthorizationException("topic is null.")`` and the like); answer it as a denial."""
