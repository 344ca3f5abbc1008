"""The ACL 2.0 model: users, subjects, resources, actions, policy entries, policies and ACLs.

Mirrors RocketMQ 5.3's ``auth`` module (``User``, ``Subject``, ``Resource``, ``Action``,
``PolicyEntry``, ``Policy``, ``Acl``; security.md §1) as frozen values, and their JSON forms
(``UserInfo``/``AclInfo`` bodies of request codes 3001-3010, fastjson names, enum *names*).

* A **user** is a username and a password, which is the secret key both signature schemes use
  as the HMAC key (so it must be kept, not hashed), a type (Super bypasses authorization) and a
  status (a disabled user fails authentication).
* A **resource** is a type (``Cluster``/``Namespace``/``Topic``/``Group``, or ``*``), a name and
  a pattern: ``Topic:orders`` (LITERAL), ``Topic:order-*`` (PREFIXED, only a trailing ``*``),
  ``Topic:*`` (ANY), ``*`` (every resource). Request-side resources are always LITERAL; a
  ``%RETRY%G`` topic is checked as ``Group:G`` (``Resource.ofGroup``).
* A **policy entry** grants or denies actions on one resource pattern, optionally only from some
  source IP ranges; an **ACL** holds at most one CUSTOM and one DEFAULT policy of a subject, and a
  policy at most one entry per resource.

Invariants: every value here is valid once built (``__post_init__`` refuses anything RocketMQ's
managers refuse, plus Ariane's bounds, with ``errors.AuthMetadataError``/``AuthLimitError``);
the password is never part of a ``repr`` and never part of a ``UserView``.
"""

from __future__ import annotations

import dataclasses
import enum
import ipaddress
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NewType

from ariane.common import topics
from ariane.security import errors

Username = NewType("Username", str)
"""A user's name, which is also the access key (``AccessKey``, ``Credential=``) it signs with."""

IpNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
"""A source IP range of a policy entry (a single address is a /32 or /128)."""

USERS_MAX = 10_000
"""Most users one metadata store holds, a count (RocketMQ: unbounded RocksDB)."""

USERNAME_CHARS_MAX = 256
"""Longest username, in characters."""

PASSWORD_CHARS_MAX = 256
"""Longest password (secret key), in characters."""

ENTRIES_PER_ACL_MAX = 1_024
"""Most policy entries one ACL holds over its policies, a count."""

RESOURCE_NAME_CHARS_MAX = 255
"""Longest resource name or prefix, in characters (RocketMQ's group name limit)."""

SOURCE_IPS_PER_ENTRY_MAX = 64
"""Most source addresses/CIDR ranges one policy entry lists, a count."""

USERNAME_FORBIDDEN_CHARS = frozenset(" ,/")
"""Characters a username may not hold: the v2 ``authorization`` header splits its items at
``,``, trims spaces and cuts the credential at ``/`` (RocketMQ accepts them, then can never
authenticate such a user over gRPC)."""


class _Named(enum.Enum):
    """An enum whose values are RocketMQ's names, parsed case-insensitively (``getByName``)."""

    @classmethod
    def of(cls, name: str) -> Any:
        """The member named ``name`` (any case).

        Raises:
            errors.AuthMetadataError: no member has that name.
        """
        for member in cls:
            if member.value.lower() == name.lower():
                return member
        raise errors.AuthMetadataError(f"The {cls.__name__} {name!r} is illegal.")


class UserType(_Named):
    """RocketMQ ``UserType``: a Super user bypasses authorization."""

    SUPER = "Super"
    NORMAL = "Normal"


class UserStatus(_Named):
    """RocketMQ ``UserStatus``: a disabled user fails authentication."""

    ENABLE = "enable"
    DISABLE = "disable"


class ResourceType(_Named):
    """RocketMQ ``ResourceType`` (``ANY`` is the ``*`` resource; no request names a Namespace)."""

    ANY = "Any"
    CLUSTER = "Cluster"
    NAMESPACE = "Namespace"
    TOPIC = "Topic"
    GROUP = "Group"


class ResourcePattern(enum.Enum):
    """RocketMQ ``ResourcePattern``: how an entry's name matches a request's resource name."""

    ANY = "ANY"
    LITERAL = "LITERAL"
    PREFIXED = "PREFIXED"


class Action(_Named):
    """RocketMQ ``Action`` as stored in entries (``ALL`` grants every action; RocketMQ's
    request-only ``Any`` is refused in entries: "The actions can not be Any.")."""

    ALL = "All"
    PUB = "Pub"
    SUB = "Sub"
    CREATE = "Create"
    UPDATE = "Update"
    DELETE = "Delete"
    GET = "Get"
    LIST = "List"


class Decision(_Named):
    """RocketMQ ``Decision`` of a policy entry."""

    ALLOW = "Allow"
    DENY = "Deny"


class PolicyType(_Named):
    """RocketMQ ``PolicyType``: DEFAULT entries apply only when no CUSTOM entry matches."""

    CUSTOM = "Custom"
    DEFAULT = "Default"


def check_username(name: str) -> Username:
    """``name`` as a ``Username`` if it is a usable one.

    Raises:
        errors.AuthMetadataError: blank (RocketMQ "username can not be blank"), longer than
            ``USERNAME_CHARS_MAX``, or holding a control or ``USERNAME_FORBIDDEN_CHARS`` char.
    """
    if not name.strip():
        raise errors.AuthMetadataError("The username is blank")
    if len(name) > USERNAME_CHARS_MAX:
        raise errors.AuthLimitError(f"The username is longer than {USERNAME_CHARS_MAX} chars")
    if any(c in USERNAME_FORBIDDEN_CHARS or not c.isprintable() for c in name):
        raise errors.AuthMetadataError(f"The username {name!r} holds a space, ',' or '/'")
    return Username(name)


@dataclasses.dataclass(frozen=True, slots=True)
class User:
    """One user (RocketMQ ``User``): name, secret key, type and status.

    Attributes:
        username: the access key clients sign with.
        password: the secret key (HMAC key of both signature schemes); hidden from ``repr``.
        user_type: Super users bypass authorization.
        user_status: a disabled user fails authentication.

    Raises:
        errors.AuthMetadataError: a bad username, or a blank or too long password.
    """

    username: Username
    password: str = dataclasses.field(repr=False)
    user_type: UserType = UserType.NORMAL
    user_status: UserStatus = UserStatus.ENABLE

    def __post_init__(self) -> None:
        check_username(self.username)
        if not self.password.strip():
            raise errors.AuthMetadataError("The password is blank")
        if len(self.password) > PASSWORD_CHARS_MAX:
            raise errors.AuthLimitError(f"The password is longer than {PASSWORD_CHARS_MAX} chars")

    @property
    def subject(self) -> Subject:
        """The subject this user acts as (``User:<username>``)."""
        return Subject(self.username)

    def view(self) -> UserView:
        """This user without its secret (what get/list answers show)."""
        return UserView(self.username, self.user_type, self.user_status)


@dataclasses.dataclass(frozen=True, slots=True)
class UserView:
    """A user as shown to administrators: everything but the secret key."""

    username: Username
    user_type: UserType
    user_status: UserStatus

    def to_info(self) -> dict[str, str]:
        """The ``UserInfo`` JSON object without ``password`` (fastjson omits nulls)."""
        return {
            "username": self.username,
            "userType": self.user_type.value,
            "userStatus": self.user_status.value,
        }


SUBJECT_PREFIX = "User:"
"""A subject key's prefix: ``User`` is RocketMQ's only ``SubjectType``."""


@dataclasses.dataclass(frozen=True, slots=True)
class Subject:
    """Who a request acts as (RocketMQ ``Subject``, always a user): key ``User:<username>``."""

    username: Username

    @property
    def key(self) -> str:
        """RocketMQ's subject key, e.g. ``User:alice``."""
        return SUBJECT_PREFIX + self.username

    @classmethod
    def parse(cls, key: str) -> Subject:
        """The subject of a key such as ``User:alice`` (type name in any case).

        Raises:
            errors.AuthMetadataError: not a ``User:`` key, or a bad username.
        """
        kind, sep, name = key.partition(":")
        if not sep or kind.lower() != "user":
            raise errors.AuthMetadataError(f"The subject {key!r} is illegal.")
        return cls(check_username(name))


@dataclasses.dataclass(frozen=True, slots=True)
class Resource:
    """A resource or resource pattern (RocketMQ ``Resource``).

    Attributes:
        resource_type: ANY (the ``*`` resource), CLUSTER, NAMESPACE, TOPIC or GROUP.
        name: the literal name or prefix; ``""`` when the pattern is ANY.
        pattern: LITERAL, PREFIXED or ANY (``ANY`` whenever ``resource_type`` is ANY).

    Raises:
        errors.AuthMetadataError: an inconsistent pattern, or a name over the bound.
    """

    resource_type: ResourceType
    name: str
    pattern: ResourcePattern = ResourcePattern.LITERAL

    def __post_init__(self) -> None:
        is_any = self.pattern is ResourcePattern.ANY
        if self.resource_type is ResourceType.ANY and not is_any:
            raise errors.AuthMetadataError("The resource is null.")
        if is_any == bool(self.name):  # ANY has no name; LITERAL and PREFIXED need one
            raise errors.AuthMetadataError("The resource is null.")
        if len(self.name) > RESOURCE_NAME_CHARS_MAX:
            raise errors.AuthLimitError(f"The resource name is over {RESOURCE_NAME_CHARS_MAX}")

    @classmethod
    def parse(cls, key: str) -> Resource:
        """The resource of a string (RocketMQ ``Resource.of(String)``).

        ``*`` is every resource; ``Type:*`` every one of a type; ``Type:name*`` a prefix (only a
        trailing ``*``); ``Type:name`` one resource. The type name is case-insensitive.

        Raises:
            errors.AuthMetadataError: "The resource is null." for a blank key, an unknown type
                or an empty name.
        """
        if key == "*":
            return cls(ResourceType.ANY, "", ResourcePattern.ANY)
        kind, sep, name = key.partition(":")
        try:
            resource_type = ResourceType.of(kind)
        except errors.AuthMetadataError:
            raise errors.AuthMetadataError("The resource is null.") from None
        if not sep or not name or resource_type is ResourceType.ANY:
            raise errors.AuthMetadataError("The resource is null.")
        if name == "*":
            return cls(resource_type, "", ResourcePattern.ANY)
        if name.endswith("*"):
            return cls(resource_type, name[:-1], ResourcePattern.PREFIXED)
        return cls(resource_type, name, ResourcePattern.LITERAL)

    @classmethod
    def topic(cls, name: str) -> Resource:
        """A request's topic, literally (``Resource.ofTopic``)."""
        return cls(ResourceType.TOPIC, name)

    @classmethod
    def group(cls, name: str) -> Resource:
        """A request's group; a ``%RETRY%`` name loses its prefix (``Resource.ofGroup``)."""
        if topics.is_retry_topic(name):
            name = name[len(topics.RETRY_GROUP_TOPIC_PREFIX) :]
        return cls(ResourceType.GROUP, name)

    @classmethod
    def cluster(cls, name: str) -> Resource:
        """The cluster a request administers (``Resource.ofCluster``)."""
        return cls(ResourceType.CLUSTER, name)

    @property
    def key(self) -> str:
        """RocketMQ's resource key: ``*``, ``Topic:*``, ``Topic:order-*`` or ``Topic:orders``."""
        if self.resource_type is ResourceType.ANY:
            return "*"
        suffix = {ResourcePattern.ANY: "*", ResourcePattern.PREFIXED: "*"}.get(self.pattern, "")
        return f"{self.resource_type.value}:{self.name}{suffix}"

    def matches(self, requested: Resource) -> bool:
        """Whether this pattern covers the request's literal resource (``Resource.isMatch``)."""
        if self.resource_type is ResourceType.ANY:
            return True
        if self.resource_type is not requested.resource_type:
            return False
        if self.pattern is ResourcePattern.ANY:
            return True
        if self.pattern is ResourcePattern.PREFIXED:
            return requested.name.startswith(self.name)
        return requested.name == self.name

    def specificity(self) -> tuple[int, int, int]:
        """Sort key, most specific first: LITERAL, then PREFIXED (longer first), then
        ``Type:*``, then ``*`` (RocketMQ's ``comparePolicyEntries`` after #9540)."""
        if self.resource_type is ResourceType.ANY:
            return (1, 2, 0)
        rank = {ResourcePattern.LITERAL: 0, ResourcePattern.PREFIXED: 1}.get(self.pattern, 2)
        return (0, rank, -len(self.name))


def parse_source_ip(text: str) -> IpNetwork:
    """One source address or CIDR range of an entry (``IPAddressUtils.isValidIPOrCidr``).

    Raises:
        errors.AuthMetadataError: "The source ip is empty." / "The source ip is invalid.".
    """
    if not text.strip():
        raise errors.AuthMetadataError("The source ip is empty.")
    try:
        return ipaddress.ip_network(text.strip(), strict=False)
    except ValueError:
        raise errors.AuthMetadataError("The source ip is invalid.") from None


def parse_client_ip(text: str | None) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """A request's source IP, or ``None`` when absent or unparsable (IPv4-mapped IPv6 becomes
    IPv4, so ``::ffff:10.0.0.7`` matches ``10.0.0.0/8``)."""
    if not text:
        return None
    try:
        address = ipaddress.ip_address(text.strip().strip("[]"))
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


@dataclasses.dataclass(frozen=True, slots=True)
class PolicyEntry:
    """One rule (RocketMQ ``PolicyEntry``): a decision on some actions on a resource pattern.

    Attributes:
        resource: the pattern the entry covers.
        actions: the actions it decides (``ALL`` = every action); never empty.
        decision: ALLOW or DENY.
        source_ips: client ranges it applies to; empty = every client (``Environment``).

    Raises:
        errors.AuthMetadataError: no actions, or more than ``SOURCE_IPS_PER_ENTRY_MAX`` ranges.
    """

    resource: Resource
    actions: frozenset[Action]
    decision: Decision
    source_ips: tuple[IpNetwork, ...] = ()

    def __post_init__(self) -> None:
        if not self.actions:
            raise errors.AuthMetadataError("The actions is empty.")
        if len(self.source_ips) > SOURCE_IPS_PER_ENTRY_MAX:
            raise errors.AuthLimitError(f"More than {SOURCE_IPS_PER_ENTRY_MAX} source ips")

    @classmethod
    def of(
        cls,
        resource: str,
        actions: Iterable[str],
        decision: str,
        source_ips: Iterable[str] = (),
    ) -> PolicyEntry:
        """An entry from its string forms, e.g. ``of("Topic:t*", ["Pub"], "Allow")``.

        Raises:
            errors.AuthMetadataError: a bad resource, action ("The actions can not be Any."
                for ``Any``), decision or source IP.
        """
        names = list(actions)
        if any(name.lower() == "any" for name in names):
            raise errors.AuthMetadataError("The actions can not be Any.")
        return cls(
            Resource.parse(resource),
            frozenset(Action.of(name) for name in names),
            Decision.of(decision),
            tuple(parse_source_ip(ip) for ip in source_ips),
        )

    def matches(
        self,
        resource: Resource,
        actions: frozenset[Action],
        client_ip: ipaddress.IPv4Address | ipaddress.IPv6Address | None,
    ) -> bool:
        """Whether the entry applies to a request: resource, any one action, and the client IP
        (``isMatchResource`` ∧ ``isMatchAction`` ∧ ``isMatchEnvironment``); an unknown IP
        matches only entries without source ranges."""
        if not self.resource.matches(resource):
            return False
        if Action.ALL not in self.actions and not (self.actions & actions):
            return False
        if not self.source_ips:
            return True
        return client_ip is not None and any(
            client_ip.version == net.version and client_ip in net for net in self.source_ips
        )

    def to_info(self) -> dict[str, Any]:
        """The ``PolicyEntryInfo`` JSON object."""
        info: dict[str, Any] = {
            "resource": self.resource.key,
            "actions": sorted(a.value for a in self.actions),
            "decision": self.decision.value,
        }
        if self.source_ips:
            info["sourceIps"] = [str(net) for net in self.source_ips]
        return info


@dataclasses.dataclass(frozen=True, slots=True)
class Policy:
    """A subject's entries of one type (RocketMQ ``Policy``), at most one per resource."""

    policy_type: PolicyType
    entries: tuple[PolicyEntry, ...]

    def __post_init__(self) -> None:
        keys = [entry.resource for entry in self.entries]
        if len(set(keys)) != len(keys):
            raise errors.AuthMetadataError("The policy holds two entries for one resource.")
        if len(keys) > ENTRIES_PER_ACL_MAX:
            raise errors.AuthLimitError(f"More than {ENTRIES_PER_ACL_MAX} entries")

    def merged(self, entries: Iterable[PolicyEntry]) -> Policy:
        """This policy with ``entries`` added, each replacing the entry of its resource
        (``Policy.updateEntry``: actions, source IPs and decision are replaced)."""
        table = {entry.resource: entry for entry in self.entries}
        for entry in entries:
            table[entry.resource] = entry
        return Policy(self.policy_type, tuple(table.values()))

    def to_info(self) -> dict[str, Any]:
        """The ``PolicyInfo`` JSON object."""
        return {
            "policyType": self.policy_type.value,
            "entries": [entry.to_info() for entry in self.entries],
        }


@dataclasses.dataclass(frozen=True, slots=True)
class Acl:
    """A subject's policies (RocketMQ ``Acl``): at most one per type, none empty, at most
    ``ENTRIES_PER_ACL_MAX`` entries in all.

    Raises:
        errors.AuthMetadataError: no policies, an empty policy, or two policies of one type.
    """

    subject: Subject
    policies: tuple[Policy, ...]

    def __post_init__(self) -> None:
        if not self.policies:
            raise errors.AuthMetadataError("The policies is empty.")
        if any(not policy.entries for policy in self.policies):
            raise errors.AuthMetadataError("The policy entries is empty.")
        kinds = [policy.policy_type for policy in self.policies]
        if len(set(kinds)) != len(kinds):
            raise errors.AuthMetadataError("The acl holds two policies of one type.")
        if sum(len(policy.entries) for policy in self.policies) > ENTRIES_PER_ACL_MAX:
            raise errors.AuthLimitError(f"More than {ENTRIES_PER_ACL_MAX} entries in the acl")

    def policy(self, policy_type: PolicyType) -> Policy | None:
        """The policy of ``policy_type``, if any."""
        return next((p for p in self.policies if p.policy_type is policy_type), None)

    def merged(self, other: Acl) -> Acl:
        """This ACL with ``other``'s entries upserted per policy type and resource (what
        AUTH_CREATE_ACL and AUTH_UPDATE_ACL both do)."""
        table = {p.policy_type: p for p in self.policies}
        for policy in other.policies:
            current = table.get(policy.policy_type)
            table[policy.policy_type] = current.merged(policy.entries) if current else policy
        return Acl(self.subject, tuple(table.values()))

    def without(self, policy_type: PolicyType, resource: Resource | None) -> Acl | None:
        """This ACL minus one resource's entry (of ``policy_type``), or minus everything when
        ``resource`` is ``None``; ``None`` once nothing is left (AUTH_DELETE_ACL)."""
        if resource is None:
            return None
        policies = []
        for policy in self.policies:
            entries = policy.entries
            if policy.policy_type is policy_type:
                entries = tuple(e for e in entries if e.resource != resource)
            if entries:
                policies.append(Policy(policy.policy_type, entries))
        return Acl(self.subject, tuple(policies)) if policies else None

    def to_info(self) -> dict[str, Any]:
        """The ``AclInfo`` JSON object."""
        return {"subject": self.subject.key, "policies": [p.to_info() for p in self.policies]}


def acl_from_info(info: Mapping[str, Any]) -> Acl:
    """An ACL from an ``AclInfo`` JSON object (policy type absent = Custom, source IPs
    optional).

    Raises:
        errors.AuthMetadataError: any field missing, of the wrong type or invalid.
    """
    try:
        subject = Subject.parse(_text(info, "subject"))
        policies = []
        for policy_info in _sequence(info, "policies"):
            kind = policy_info.get("policyType") or PolicyType.CUSTOM.value
            entries = tuple(_entry_from_info(e) for e in _sequence(policy_info, "entries"))
            policies.append(Policy(PolicyType.of(str(kind)), entries))
        return Acl(subject, tuple(policies))
    except (AttributeError, TypeError):
        raise errors.AuthMetadataError("The acl is malformed.") from None


def _entry_from_info(info: Mapping[str, Any]) -> PolicyEntry:
    actions = info.get("actions")
    if not isinstance(actions, list) or not all(isinstance(a, str) for a in actions):
        raise errors.AuthMetadataError("The actions is empty.")
    ips = info.get("sourceIps") or []
    if not isinstance(ips, list) or not all(isinstance(ip, str) for ip in ips):
        raise errors.AuthMetadataError("The source ip is invalid.")
    decision = info.get("decision")
    if not isinstance(decision, str):
        raise errors.AuthMetadataError("The decision is null or illegal.")
    return PolicyEntry.of(_text(info, "resource"), actions, decision, ips)


def user_from_info(info: Mapping[str, Any]) -> User:
    """A user from a ``UserInfo`` JSON object (type absent = Normal, status absent = enable).

    Raises:
        errors.AuthMetadataError: a missing or invalid field.
    """
    kind = info.get("userType") or UserType.NORMAL.value
    status = info.get("userStatus") or UserStatus.ENABLE.value
    return User(
        check_username(_text(info, "username")),
        _text(info, "password"),
        UserType.of(str(kind)),
        UserStatus.of(str(status)),
    )


def user_to_info(user: User) -> dict[str, str]:
    """The full ``UserInfo`` JSON object, password included: for the metadata file only."""
    return {**user.view().to_info(), "password": user.password}


def _text(info: Mapping[str, Any], key: str) -> str:
    value = info.get(key)
    if not isinstance(value, str):
        raise errors.AuthMetadataError(f"The {key} is missing or not a string.")
    return value


def _sequence(info: Mapping[str, Any], key: str) -> Sequence[Mapping[str, Any]]:
    value = info.get(key)
    if not isinstance(value, list) or not all(isinstance(v, Mapping) for v in value):
        raise errors.AuthMetadataError(f"The {key} is missing or not a list of objects.")
    return value
