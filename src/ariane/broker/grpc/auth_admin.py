"""The user and ACL RPCs of ``ariane.admin.v1.Admin`` (RocketMQ AUTH_* codes 3001-3010).

``AuthAdminRpcs`` is mixed into ``admin_service.AdminService``: each RPC converts the request to
the security core's model (``model.user_from_info``/``acl_from_info``), calls the broker's
``AuthMetadataStore`` and converts back. What a caller may do at all is decided before, by the
gRPC gate (``auth_gate``: writes need ``Cluster:Update``, reads ``Cluster:Get``); the one rule
left here is RocketMQ's ``AdminBrokerProcessor.isNotSuperUserLogin``: only a Super user may
create a Super user, make a user Super, or change or delete a Super user (RocketMQ answers
SYSTEM_ERROR / NO_PERMISSION; Ariane FORBIDDEN). With authentication off there is no caller
and, as in RocketMQ, no such check.

``ExportAuthMetadata`` (Ariane only) gives a slave its master's users, secrets included, and
ACLs (``services.slave_sync``); it answers the broker's inner credential user alone.

Invariant: a reply never carries a password (``UserView`` has none), except
``ExportAuthMetadata``'s to the inner credential user (``UserSecret``).
"""

from __future__ import annotations

from ariane.broker.grpc import auth_gate
from ariane.common import errors
from ariane.grpcwire import codes, guard, pb
from ariane.security import metadata_store, model

SUPER_ONLY = "The super user can only be create by super user"
"""RocketMQ's text when a non-Super caller creates or promotes a Super user."""


def user_message(view: model.UserView) -> pb.admin.User:
    """The ``User`` message of a user, without its password."""
    return pb.admin.User(
        username=view.username,
        user_type=view.user_type.value,
        user_status=view.user_status.value,
    )


def acl_message(acl: model.Acl) -> pb.admin.Acl:
    """The ``Acl`` message of an ACL."""
    return pb.admin.Acl(
        subject=acl.subject.key,
        policies=[
            pb.admin.AclPolicy(
                policy_type=policy.policy_type.value,
                entries=[
                    pb.admin.AclEntry(
                        resource=entry.resource.key,
                        actions=sorted(a.value for a in entry.actions),
                        source_ips=[str(net) for net in entry.source_ips],
                        decision=entry.decision.value,
                    )
                    for entry in policy.entries
                ],
            )
            for policy in acl.policies
        ],
    )


def acl_of(message: pb.admin.Acl) -> model.Acl:
    """The ACL of an ``Acl`` message.

    Raises:
        security.errors.AuthMetadataError: a bad subject, resource, action, IP or decision.
    """
    return model.acl_from_info(
        {
            "subject": message.subject,
            "policies": [
                {
                    "policyType": policy.policy_type,
                    "entries": [
                        {
                            "resource": entry.resource,
                            "actions": list(entry.actions),
                            "sourceIps": list(entry.source_ips),
                            "decision": entry.decision,
                        }
                        for entry in policy.entries
                    ],
                }
                for policy in message.policies
            ],
        }
    )


def _is_super(user_type: str) -> bool:
    return bool(user_type) and model.UserType.of(user_type) is model.UserType.SUPER


def user_secret_message(user: model.User) -> pb.admin.UserSecret:
    """The ``UserSecret`` message of a user, secret key included (``ExportAuthMetadata``)."""
    return pb.admin.UserSecret(
        username=user.username,
        secret_key=user.password,
        user_type=user.user_type.value,
        user_status=user.user_status.value,
    )


def user_of_secret(message: pb.admin.UserSecret) -> model.User:
    """The user of a ``UserSecret`` message.

    Raises:
        security.errors.AuthMetadataError: a bad name, a blank secret, an unknown type/status.
    """
    return model.user_from_info(
        {
            "username": message.username,
            "password": message.secret_key,
            "userType": message.user_type,
            "userStatus": message.user_status,
        }
    )


def _require_super() -> None:
    """Refuse a caller that is authenticated but not Super (no caller: auth off, allowed)."""
    caller = auth_gate.caller()
    if caller is not None and caller.user_type is not model.UserType.SUPER:
        raise errors.ForbiddenError(f"{SUPER_ONLY} (caller User:{caller.username})")


class AuthAdminRpcs:
    """User and ACL RPCs over ``self._auth_stores`` (set by the class mixing this in)."""

    _auth_stores: auth_gate.AuthStores | None

    def _store(self) -> metadata_store.AuthMetadataStore:
        if self._auth_stores is None:
            raise errors.UnsupportedError("this broker keeps no users or ACLs")
        return self._auth_stores.get()

    async def create_user(
        self, request: pb.admin.CreateUserRequest, context: guard.CallContext
    ) -> pb.admin.CreateUserResponse:
        """CreateUser (AUTH_CREATE_USER): a new user; Normal and enabled unless told."""
        wanted = request.user
        if _is_super(wanted.user_type):
            _require_super()
        user = model.user_from_info(
            {
                "username": wanted.username,
                "password": wanted.password,
                "userType": wanted.user_type,
                "userStatus": wanted.user_status,
            }
        )
        self._store().create_user(user)
        return pb.admin.CreateUserResponse(status=codes.ok(), user=user_message(user.view()))

    async def update_user(
        self, request: pb.admin.UpdateUserRequest, context: guard.CallContext
    ) -> pb.admin.UpdateUserResponse:
        """UpdateUser (AUTH_UPDATE_USER): change the given fields, keep the empty ones."""
        wanted = request.user
        store = self._store()
        current = store.get_user(wanted.username)
        if current is None:
            raise errors.NotFoundError(f"The user {wanted.username!r} is not exist")
        if _is_super(wanted.user_type) or current.user_type is model.UserType.SUPER:
            _require_super()
        view = store.update_user(
            wanted.username,
            password=wanted.password or None,
            user_type=model.UserType.of(wanted.user_type) if wanted.user_type else None,
            user_status=model.UserStatus.of(wanted.user_status) if wanted.user_status else None,
        )
        return pb.admin.UpdateUserResponse(status=codes.ok(), user=user_message(view))

    async def delete_user(
        self, request: pb.admin.DeleteUserRequest, context: guard.CallContext
    ) -> pb.admin.DeleteUserResponse:
        """DeleteUser (AUTH_DELETE_USER): the user and its ACL; an absent user is a success."""
        store = self._store()
        current = store.get_user(request.username)
        if current is not None and current.user_type is model.UserType.SUPER:
            _require_super()
        store.delete_user(request.username)
        return pb.admin.DeleteUserResponse(status=codes.ok())

    async def get_user(
        self, request: pb.admin.GetUserRequest, context: guard.CallContext
    ) -> pb.admin.GetUserResponse:
        """GetUser (AUTH_GET_USER): the user without its password, or NOT_FOUND."""
        view = self._store().get_user(request.username)
        if view is None:
            raise errors.NotFoundError(f"The user {request.username!r} is not exist")
        return pb.admin.GetUserResponse(status=codes.ok(), user=user_message(view))

    async def list_users(
        self, request: pb.admin.ListUsersRequest, context: guard.CallContext
    ) -> pb.admin.ListUsersResponse:
        """ListUsers (AUTH_LIST_USER): users whose name contains ``filter``, by name."""
        views = self._store().list_users(request.filter)
        return pb.admin.ListUsersResponse(status=codes.ok(), users=[user_message(v) for v in views])

    async def create_acl(
        self, request: pb.admin.CreateAclRequest, context: guard.CallContext
    ) -> pb.admin.CreateAclResponse:
        """CreateAcl (AUTH_CREATE_ACL): merge the entries into the subject's ACL."""
        stored = self._store().put_acl(acl_of(request.acl))
        return pb.admin.CreateAclResponse(status=codes.ok(), acl=acl_message(stored))

    async def update_acl(
        self, request: pb.admin.UpdateAclRequest, context: guard.CallContext
    ) -> pb.admin.UpdateAclResponse:
        """UpdateAcl (AUTH_UPDATE_ACL): the same upsert as CreateAcl."""
        stored = self._store().put_acl(acl_of(request.acl))
        return pb.admin.UpdateAclResponse(status=codes.ok(), acl=acl_message(stored))

    async def delete_acl(
        self, request: pb.admin.DeleteAclRequest, context: guard.CallContext
    ) -> pb.admin.DeleteAclResponse:
        """DeleteAcl (AUTH_DELETE_ACL): one resource's entry, or the whole ACL."""
        subject = model.Subject.parse(request.subject)
        policy_type = model.PolicyType.of(request.policy_type or model.PolicyType.CUSTOM.value)
        resource = model.Resource.parse(request.resource) if request.resource else None
        self._store().delete_acl(subject, policy_type=policy_type, resource=resource)
        return pb.admin.DeleteAclResponse(status=codes.ok())

    async def get_acl(
        self, request: pb.admin.GetAclRequest, context: guard.CallContext
    ) -> pb.admin.GetAclResponse:
        """GetAcl (AUTH_GET_ACL): the subject's ACL, or NOT_FOUND."""
        acl = self._store().get_acl(model.Subject.parse(request.subject))
        if acl is None:
            raise errors.NotFoundError(f"The acl of {request.subject} is not exist.")
        return pb.admin.GetAclResponse(status=codes.ok(), acl=acl_message(acl))

    async def list_acls(
        self, request: pb.admin.ListAclsRequest, context: guard.CallContext
    ) -> pb.admin.ListAclsResponse:
        """ListAcls (AUTH_LIST_ACL): ACLs filtered by subject and resource text."""
        acls = self._store().list_acls(request.subject_filter, request.resource_filter)
        return pb.admin.ListAclsResponse(status=codes.ok(), acls=[acl_message(a) for a in acls])

    async def export_auth_metadata(
        self, request: pb.admin.ExportAuthMetadataRequest, context: guard.CallContext
    ) -> pb.admin.ExportAuthMetadataResponse:
        """ExportAuthMetadata (Ariane only): every user with its secret key, by name, and every
        ACL, by subject, for a slave's metadata sync (``services.slave_sync``).

        RocketMQ 5.3 has nothing like it: ``SlaveSynchronize.syncAll`` copies topics, offsets,
        delay offsets, groups and request modes but no user or ACL; ``mqadmin createUser -c``
        writes every master and slave one by one, so a slave that was down or added later
        lacks them when promoted. Ariane's slaves copy them every round instead.

        Only the user of ``[auth.inner_client_authentication_credentials]`` may call it, not
        any Super user: the answer holds every secret. Without TLS on the channel the copy,
        secrets included, crosses the network in plaintext, like every other inner call.

        Raises:
            UnauthorizedError: no verified caller (authentication is off on this broker).
            ForbiddenError: the caller is not the inner credential user, or this broker has
                none configured.
        """
        user = auth_gate.caller()
        if user is None:
            raise errors.UnauthorizedError(
                "ExportAuthMetadata needs the inner credential: authentication is off here"
            )
        inner = self._auth_stores.inner_access_key if self._auth_stores is not None else None
        if inner is None or user.username != inner:
            raise errors.ForbiddenError(
                "ExportAuthMetadata answers only the inner credential user,"
                f" not User:{user.username}"
            )
        users, acls = self._store().export()
        return pb.admin.ExportAuthMetadataResponse(
            status=codes.ok(),
            users=[user_secret_message(u) for u in users],
            acls=[acl_message(a) for a in acls],
        )
