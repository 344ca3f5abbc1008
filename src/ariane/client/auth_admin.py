"""Users and ACLs of a cluster's brokers, for ``AdminClient`` (RocketMQ ``mqadmin`` auth commands).

``AuthAdminCalls`` is mixed into ``admin.AdminClient``. Writes (create/update/delete of users
and ACLs) go to **every** live broker, masters and slaves, as ``mqadmin createUser -c`` does
(RocketMQ brokers copy none, security.md §7; Ariane's slaves with authentication on also copy
their master's every sync round, ``broker.services.slave_sync``); reads go to the masters.
Each value names the broker it came from. Passwords are sent on create/update only and never
come back.

Errors are those of ``AdminClient``: a refusal raises its status code's class
(``UnauthorizedError``, ``ForbiddenError``, ``BadRequestError`` for an invalid user or ACL,
``NotFoundError``), its message prefixed with the broker.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, Protocol

from ariane.client import admin_types as types
from ariane.common import errors
from ariane.grpcwire import pb, rpc


@dataclasses.dataclass(frozen=True, slots=True)
class UserRecord:
    """A user as one broker holds it (no password).

    Attributes:
        broker_name: the broker group it came from.
        username: the access key.
        user_type: ``Super`` or ``Normal``.
        user_status: ``enable`` or ``disable``.
    """

    broker_name: str
    username: str
    user_type: str
    user_status: str


@dataclasses.dataclass(frozen=True, slots=True)
class AclEntryRecord:
    """One entry of a policy: resource, actions, source IPs (empty: any) and decision."""

    resource: str
    actions: tuple[str, ...]
    source_ips: tuple[str, ...]
    decision: str


@dataclasses.dataclass(frozen=True, slots=True)
class AclRecord:
    """A subject's ACL as one broker holds it.

    Attributes:
        broker_name: the broker group it came from.
        subject: ``User:<name>``.
        policies: ``(policy type, entries)`` pairs (``Custom``, ``Default``).
    """

    broker_name: str
    subject: str
    policies: tuple[tuple[str, tuple[AclEntryRecord, ...]], ...]


def _user(broker_name: str, user: pb.admin.User) -> UserRecord:
    return UserRecord(broker_name, user.username, user.user_type, user.user_status)


def _acl(broker_name: str, acl: pb.admin.Acl) -> AclRecord:
    return AclRecord(
        broker_name,
        acl.subject,
        tuple(
            (
                policy.policy_type,
                tuple(
                    AclEntryRecord(e.resource, tuple(e.actions), tuple(e.source_ips), e.decision)
                    for e in policy.entries
                ),
            )
            for policy in acl.policies
        ),
    )


def subject_of(user_or_subject: str) -> str:
    """``User:alice`` for ``alice`` or ``User:alice`` (mqadmin's ``-s`` takes the key)."""
    return user_or_subject if ":" in user_or_subject else f"User:{user_or_subject}"


class _Client(Protocol):
    async def masters(self, broker_names: Sequence[str] = ()) -> list[types.BrokerMaster]: ...

    async def members(self, broker_names: Sequence[str] = ()) -> list[types.BrokerMaster]: ...

    async def _fan_out(
        self,
        masters: Sequence[types.BrokerMaster],
        rpc_name: str,
        request: Any,
        response_type: type[rpc.M],
        *,
        skip: frozenset[errors.Code] = frozenset(),
    ) -> list[tuple[types.BrokerMaster, rpc.M]]: ...


class AuthAdminCalls:
    """User and ACL calls (mixed into ``AdminClient``, whose discovery and fan-out they use)."""

    async def create_user(
        self: _Client,
        username: str,
        password: str,
        *,
        user_type: str = "",
        broker_names: Sequence[str] = (),
    ) -> list[str]:
        """Create a user on every broker (``mqadmin createUser -u -p [-t]``); returns where.
        Only a Super caller may create a Super user."""
        user = pb.admin.User(username=username, password=password, user_type=user_type)
        done = await self._fan_out(
            await self.members(broker_names),
            "CreateUser",
            pb.admin.CreateUserRequest(user=user),
            pb.admin.CreateUserResponse,
        )
        return [m.broker_name for m, _ in done]

    async def update_user(
        self: _Client,
        username: str,
        *,
        password: str = "",
        user_type: str = "",
        user_status: str = "",
        broker_names: Sequence[str] = (),
    ) -> list[str]:
        """Change a user's password, type or status on every broker (``mqadmin updateUser``);
        empty values are kept."""
        user = pb.admin.User(
            username=username, password=password, user_type=user_type, user_status=user_status
        )
        done = await self._fan_out(
            await self.members(broker_names),
            "UpdateUser",
            pb.admin.UpdateUserRequest(user=user),
            pb.admin.UpdateUserResponse,
        )
        return [m.broker_name for m, _ in done]

    async def delete_user(
        self: _Client, username: str, *, broker_names: Sequence[str] = ()
    ) -> list[str]:
        """Delete a user and its ACL on every broker (``mqadmin deleteUser``)."""
        done = await self._fan_out(
            await self.members(broker_names),
            "DeleteUser",
            pb.admin.DeleteUserRequest(username=username),
            pb.admin.DeleteUserResponse,
        )
        return [m.broker_name for m, _ in done]

    async def get_user(
        self: _Client, username: str, *, broker_names: Sequence[str] = ()
    ) -> list[UserRecord]:
        """The user on each master that has it (``mqadmin getUser``).

        Raises:
            NotFoundError: no master has it.
        """
        done = await self._fan_out(
            await self.masters(broker_names),
            "GetUser",
            pb.admin.GetUserRequest(username=username),
            pb.admin.GetUserResponse,
            skip=frozenset({errors.Code.NOT_FOUND}),
        )
        return [_user(m.broker_name, r.user) for m, r in done]

    async def list_users(
        self: _Client, name_filter: str = "", *, broker_names: Sequence[str] = ()
    ) -> list[UserRecord]:
        """Users whose name contains ``name_filter``, per master (``mqadmin listUser -f``)."""
        done = await self._fan_out(
            await self.masters(broker_names),
            "ListUsers",
            pb.admin.ListUsersRequest(filter=name_filter),
            pb.admin.ListUsersResponse,
        )
        return [_user(m.broker_name, u) for m, r in done for u in r.users]

    async def put_acl(
        self: _Client,
        subject: str,
        *,
        resources: Sequence[str],
        actions: Sequence[str],
        decision: str,
        source_ips: Sequence[str] = (),
        policy_type: str = "",
        broker_names: Sequence[str] = (),
    ) -> list[str]:
        """Add or replace one entry per resource in ``subject``'s ACL on every broker
        (``mqadmin createAcl``/``updateAcl -s -r -a -d [-i]``: both merge per resource)."""
        entries = [
            pb.admin.AclEntry(
                resource=r, actions=list(actions), source_ips=list(source_ips), decision=decision
            )
            for r in resources
        ]
        acl = pb.admin.Acl(
            subject=subject_of(subject),
            policies=[pb.admin.AclPolicy(policy_type=policy_type, entries=entries)],
        )
        done = await self._fan_out(
            await self.members(broker_names),
            "CreateAcl",
            pb.admin.CreateAclRequest(acl=acl),
            pb.admin.CreateAclResponse,
        )
        return [m.broker_name for m, _ in done]

    async def delete_acl(
        self: _Client,
        subject: str,
        *,
        resource: str = "",
        policy_type: str = "",
        broker_names: Sequence[str] = (),
    ) -> list[str]:
        """Delete one resource's entry, or the whole ACL, on every broker (``mqadmin
        deleteAcl -s [-r]``)."""
        request = pb.admin.DeleteAclRequest(
            subject=subject_of(subject), policy_type=policy_type, resource=resource
        )
        done = await self._fan_out(
            await self.members(broker_names), "DeleteAcl", request, pb.admin.DeleteAclResponse
        )
        return [m.broker_name for m, _ in done]

    async def get_acl(
        self: _Client, subject: str, *, broker_names: Sequence[str] = ()
    ) -> list[AclRecord]:
        """The subject's ACL on each master that has one (``mqadmin getAcl -s``).

        Raises:
            NotFoundError: no master has one.
        """
        done = await self._fan_out(
            await self.masters(broker_names),
            "GetAcl",
            pb.admin.GetAclRequest(subject=subject_of(subject)),
            pb.admin.GetAclResponse,
            skip=frozenset({errors.Code.NOT_FOUND}),
        )
        return [_acl(m.broker_name, r.acl) for m, r in done]

    async def list_acls(
        self: _Client,
        subject_filter: str = "",
        resource_filter: str = "",
        *,
        broker_names: Sequence[str] = (),
    ) -> list[AclRecord]:
        """ACLs filtered by subject and resource text, per master (``mqadmin listAcl``)."""
        done = await self._fan_out(
            await self.masters(broker_names),
            "ListAcls",
            pb.admin.ListAclsRequest(
                subject_filter=subject_filter, resource_filter=resource_filter
            ),
            pb.admin.ListAclsResponse,
        )
        return [_acl(m.broker_name, a) for m, r in done for a in r.acls]
