"""Ariane's protocol-neutral security core: RocketMQ ACL 2.0 authentication and authorization.

Standard library only, no I/O but the metadata file, no gRPC and no Remoting codec, so every
adapter (gRPC messaging and admin, Remoting broker and name server) calls the same code:

* ``model``: users, subjects, resources, actions, policy entries, policies, ACLs (+ JSON forms);
* ``signing``: both signature schemes (gRPC ``MQv2-HMAC-SHA1`` header, Remoting
  ``AccessKey``/``Signature``), signing side and the content the verifier recomputes;
* ``authentication``: credentials → ``AuthResult`` (OK, MISSING, MALFORMED, UNKNOWN_USER,
  DISABLED, BAD_SIGNATURE), plus a bounded per-connection ``IdentityCache``;
* ``authorization``: (subject, permissions, client IP) → ``AuthzResult``, most specific entry wins;
* ``requests`` and ``remoting_requests``: what each gRPC RPC / Remoting code needs, and the
  protocol-neutral ``RequestContext``;
* ``metadata_store``: users and ACLs in one atomic, mode-0600 metadata file, bootstrap users;
* ``settings``: the ``[auth]`` settings group;
* ``errors``: the refused-input error tree;
* ``audit``: rate-limited audit lines and counters of every decision.

Invariant: no secret (password, secret key) or signature reaches a log line, a ``repr``, a
result message or a get/list view. Import the modules, not their names.
"""

from ariane.security import (
    audit,
    authentication,
    authorization,
    errors,
    metadata_store,
    model,
    remoting_requests,
    requests,
    settings,
    signing,
)

__all__ = [
    "audit",
    "authentication",
    "authorization",
    "errors",
    "metadata_store",
    "model",
    "remoting_requests",
    "requests",
    "settings",
    "signing",
]
