"""What each request needs: tables from RPCs and Remoting codes to (resource type, actions).

The rows follow RocketMQ's ``DefaultAuthorizationContextBuilder`` (its special cases for gRPC
and Remoting) and the ``@RocketMQAction``/``@RocketMQResource`` annotations of the Remoting
header classes it falls back to (security.md §3); every row's ``source`` names which. Where
RocketMQ 5.3.3 checks nothing (no header class, no annotated field: 25, 26, 28, 200, 201, 21,
43, 45, 361, 46, the name server's codes, ...) Ariane requires a Cluster permission, or the
group/topic named in the body, and the row says "Ariane:" (weakness 4). A code or RPC missing
from the tables needs ``Cluster:Update`` (deny by default, where RocketMQ allows).

A rule is a tuple of ``Need``s; each names a resource type, the actions (any one suffices) and
the request field its names come from. Adapters pass plain values (topic and group strings,
ext fields, what they decoded from a body), so this module imports no gRPC and no Remoting
codec:

* ``grpc_permissions("apache.rocketmq.v2.MessagingService/SendMessage", topics=[...])``
* ``remoting_permissions(code, ext_fields, cluster=..., body=BodyResources(...))``

Field rules (``Resource.ofGroup`` and the annotation builder): a topic value starting with
``%RETRY%`` is checked as the *group* it names (or as the group of ``retry_group_field``), with
``retry_actions`` when the row gives them; a blank value counts as absent; an absent value of a
required need raises ``errors.RequestMappingError`` (answer it as a denial), an absent optional
one needs nothing.

Invariant: a row never yields an empty permission list for a request that names a resource
it should be checked on; only optional needs (a producer's heartbeat, a termination without a
group, an END_TRANSACTION without a topic, as in RocketMQ) may make a request need nothing.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable, Iterable, Mapping, Sequence

from ariane.common import topics as topic_names
from ariane.security import errors, model
from ariane.security.authorization import Permission

A = model.Action
RT = model.ResourceType


class Transport(enum.Enum):
    """How the request arrived."""

    PLAINTEXT = "PLAINTEXT"
    TLS = "TLS"


@dataclasses.dataclass(frozen=True, slots=True)
class Need:
    """One permission a rule needs.

    Attributes:
        resource_type: TOPIC, GROUP or CLUSTER.
        actions: any one of these suffices.
        field: where the names come from: an ext field name (Remoting), ``topic``/``group``
            (gRPC values), ``body.topics``/``body.groups`` (decoded bodies); unused for CLUSTER
            (the server's own cluster name).
        required: whether an absent value is an error (else the need is skipped).
        retry_actions: the actions a ``%RETRY%`` topic's group needs (default: ``actions``).
        retry_group_field: where a ``%RETRY%`` topic's group is read first (a send's
            ``group``/``a``); its own name without the prefix otherwise.
    """

    resource_type: model.ResourceType
    actions: frozenset[model.Action]
    field: str = ""
    required: bool = True
    retry_actions: frozenset[model.Action] | None = None
    retry_group_field: str = ""


@dataclasses.dataclass(frozen=True, slots=True)
class Rule:
    """What one RPC or code needs, and where the rule comes from (``source``)."""

    needs: tuple[Need, ...]
    source: str


def need_of(
    kind: model.ResourceType,
    field: str,
    *actions: model.Action,
    required: bool = True,
    retry_actions: frozenset[model.Action] | None = None,
    retry_group_field: str = "",
) -> Need:
    """A topic or group ``Need`` read from ``field`` (any one of ``actions``)."""
    return Need(kind, frozenset(actions), field, required, retry_actions, retry_group_field)


def cluster_need(*actions: model.Action) -> Need:
    """A ``Need`` on this server's cluster (any one of ``actions``)."""
    return Need(RT.CLUSTER, frozenset(actions))


def rule_of(source: str, *needs: Need) -> Rule:
    """A rule of ``needs``, citing ``source`` (the RocketMQ builder branch or annotation)."""
    return Rule(needs, source)


@dataclasses.dataclass(frozen=True, slots=True)
class RequestContext:
    """A request as the security core sees it, whatever the protocol.

    Attributes:
        subject: the authenticated subject, or ``None`` (authentication off or failed).
        transport: PLAINTEXT or TLS.
        client_id: the client's id (``x-mq-client-id``, or a Remoting ``clientID``), or "".
        client_address: the peer as the transport gives it (``10.0.0.7:51234``,
            ``ipv4:10.0.0.7:51234``, ``ipv6:[::1]:5``, ``[::1]:5``).
        permissions: what the request needs (from ``grpc_permissions``/``remoting_permissions``).
        rpc: the RPC full name or the Remoting code as a decimal string (audit, whitelists).
    """

    subject: model.Subject | None
    transport: Transport
    client_id: str
    client_address: str
    permissions: tuple[Permission, ...]
    rpc: str

    @property
    def source_ip(self) -> str | None:
        """The client's IP without port or scheme, or ``None`` when unreadable."""
        return source_ip_of(self.client_address)


def source_ip_of(address: str) -> str | None:
    """The IP of a peer address (RocketMQ ``substringBeforeLast(addr, ":")`` plus gRPC's
    ``ipv4:``/``ipv6:`` prefixes and brackets), or ``None`` when it holds none (a Unix socket)."""
    text = address.strip()
    for scheme in ("ipv4:", "ipv6:"):
        if text.startswith(scheme):
            text = text[len(scheme) :]
    if text.startswith("["):
        text = text[1:].partition("]")[0]
    elif text.count(":") == 1:
        text = text.partition(":")[0]
    if model.parse_client_ip(text) is None:
        return None
    return text


V2 = "apache.rocketmq.v2.MessagingService/"
ADMIN = "ariane.admin.v1.Admin/"
V2_ADMIN = "apache.rocketmq.v2.Admin/"
REGISTRY = "ariane.namesrv.v1.Registry/"
INGEST = "ariane.ingest.v1.Ingest/"

_B = "DefaultAuthorizationContextBuilder.build(Metadata)"

GRPC_RULES: Mapping[str, Rule] = {
    V2 + "QueryRoute": rule_of(_B, need_of(RT.TOPIC, "topic", A.PUB, A.SUB)),
    V2 + "Heartbeat": rule_of(
        _B + ": consumers only (pass no group for a producer)",
        need_of(RT.GROUP, "group", A.SUB, required=False),
    ),
    V2 + "SendMessage": rule_of(
        _B + "; Ariane checks every message's topic, RocketMQ only messages[0]",
        need_of(RT.TOPIC, "topic", A.PUB),
    ),
    V2 + "QueryAssignment": rule_of(
        _B, need_of(RT.GROUP, "group", A.SUB), need_of(RT.TOPIC, "topic", A.SUB)
    ),
    V2 + "ReceiveMessage": rule_of(
        _B, need_of(RT.GROUP, "group", A.SUB), need_of(RT.TOPIC, "topic", A.SUB)
    ),
    V2 + "AckMessage": rule_of(
        _B, need_of(RT.GROUP, "group", A.SUB), need_of(RT.TOPIC, "topic", A.SUB)
    ),
    V2 + "ForwardMessageToDeadLetterQueue": rule_of(
        _B, need_of(RT.GROUP, "group", A.SUB), need_of(RT.TOPIC, "topic", A.SUB)
    ),
    V2 + "PullMessage": rule_of(
        "Ariane: as PULL_MESSAGE (the 5.3.3 proxy maps no pull RPC)",
        need_of(RT.GROUP, "group", A.SUB),
        need_of(RT.TOPIC, "topic", A.SUB),
    ),
    V2 + "UpdateOffset": rule_of(
        "Ariane: as UPDATE_CONSUMER_OFFSET",
        need_of(RT.GROUP, "group", A.SUB, A.UPDATE),
        need_of(RT.TOPIC, "topic", A.SUB, A.UPDATE),
    ),
    V2 + "GetOffset": rule_of(
        "Ariane: as QUERY_CONSUMER_OFFSET",
        need_of(RT.GROUP, "group", A.SUB, A.GET),
        need_of(RT.TOPIC, "topic", A.SUB, A.GET),
    ),
    V2 + "QueryOffset": rule_of(
        "Ariane: as GET_MAX_OFFSET (@RocketMQAction Topic:Get) or Sub",
        need_of(RT.TOPIC, "topic", A.SUB, A.GET),
    ),
    V2 + "EndTransaction": rule_of(_B, need_of(RT.TOPIC, "topic", A.PUB)),
    V2 + "Telemetry": rule_of(_B + ": nothing but a Settings command (telemetry_permissions)"),
    V2 + "NotifyClientTermination": rule_of(
        _B + ": only a non-blank group (#8230)", need_of(RT.GROUP, "group", A.SUB, required=False)
    ),
    V2 + "ChangeInvisibleDuration": rule_of(_B, need_of(RT.GROUP, "group", A.SUB)),
    V2 + "RecallMessage": rule_of(_B, need_of(RT.TOPIC, "topic", A.PUB)),
    V2 + "SyncLiteSubscription": rule_of(
        "Ariane: as a subscription",
        need_of(RT.GROUP, "group", A.SUB),
        need_of(RT.TOPIC, "topic", A.SUB),
    ),
    # ariane.admin.v1.Admin: the Remoting code each RPC stands for, or Ariane's own rule.
    ADMIN + "CreateTopic": rule_of(
        "@RocketMQAction UPDATE_AND_CREATE_TOPIC", need_of(RT.TOPIC, "topic", A.CREATE)
    ),
    ADMIN + "UpdateTopic": rule_of(
        "Ariane: Topic:Update (RocketMQ: UPDATE_AND_CREATE_TOPIC, Create)",
        need_of(RT.TOPIC, "topic", A.UPDATE),
    ),
    ADMIN + "DeleteTopic": rule_of(
        "@RocketMQAction DELETE_TOPIC_IN_BROKER", need_of(RT.TOPIC, "topic", A.DELETE)
    ),
    ADMIN + "ListTopics": rule_of(
        "Ariane: GET_ALL_TOPIC_CONFIG is unchecked in RocketMQ", cluster_need(A.GET, A.LIST)
    ),
    ADMIN + "ListLiteTopics": rule_of(
        "Ariane: as reading the parent topic's status", need_of(RT.TOPIC, "parent", A.GET)
    ),
    ADMIN + "CreateSubscriptionGroup": rule_of(
        "Ariane: UPDATE_AND_CREATE_SUBSCRIPTIONGROUP is unchecked in RocketMQ",
        need_of(RT.GROUP, "group", A.CREATE),
    ),
    ADMIN + "UpdateSubscriptionGroup": rule_of(
        "Ariane: UPDATE_AND_CREATE_SUBSCRIPTIONGROUP is unchecked in RocketMQ",
        need_of(RT.GROUP, "group", A.UPDATE),
    ),
    ADMIN + "DeleteSubscriptionGroup": rule_of(
        "@RocketMQAction DELETE_SUBSCRIPTIONGROUP", need_of(RT.GROUP, "group", A.DELETE)
    ),
    ADMIN + "ListSubscriptionGroups": rule_of(
        "Ariane: GET_ALL_SUBSCRIPTIONGROUP_CONFIG is unchecked in RocketMQ",
        cluster_need(A.GET, A.LIST),
    ),
    ADMIN + "GetConsumerLag": rule_of(
        "@RocketMQAction GET_CONSUME_STATS",
        need_of(RT.GROUP, "group", A.GET),
        need_of(RT.TOPIC, "topic", A.GET, required=False),
    ),
    ADMIN + "ResetOffset": rule_of(
        "@RocketMQAction INVOKE_BROKER_TO_RESET_OFFSET",
        need_of(RT.GROUP, "group", A.UPDATE),
        need_of(RT.TOPIC, "topic", A.UPDATE),
    ),
    ADMIN + "QueryMessageById": rule_of(
        "@RocketMQAction VIEW_MESSAGE_BY_ID", need_of(RT.TOPIC, "topic", A.GET)
    ),
    ADMIN + "QueryMessageByKey": rule_of(
        "@RocketMQAction QUERY_MESSAGE", need_of(RT.TOPIC, "topic", A.SUB, A.GET)
    ),
    ADMIN + "GetBrokerRuntimeStats": rule_of(
        "Ariane: GET_BROKER_RUNTIME_INFO is unchecked in RocketMQ", cluster_need(A.GET)
    ),
    ADMIN + "ChangeRole": rule_of(
        "Ariane: as NOTIFY_BROKER_ROLE_CHANGED (Cluster:Update)", cluster_need(A.UPDATE)
    ),
    ADMIN + "WipeWritePerm": rule_of(
        "@RocketMQAction WIPE_WRITE_PERM_OF_BROKER", cluster_need(A.UPDATE)
    ),
    ADMIN + "AddWritePerm": rule_of(
        "@RocketMQAction ADD_WRITE_PERM_OF_BROKER", cluster_need(A.UPDATE)
    ),
    ADMIN + "ListDeadLetters": rule_of(
        "Ariane: reading a group's dead letters", need_of(RT.GROUP, "group", A.GET)
    ),
    ADMIN + "ResendDeadLetters": rule_of(
        "Ariane: re-delivering a group's dead letters", need_of(RT.GROUP, "group", A.UPDATE)
    ),
    **{
        ADMIN + rpc_name: rule_of(f"@RocketMQAction {code}", cluster_need(A.UPDATE))
        for rpc_name, code in (
            ("CreateUser", "AUTH_CREATE_USER"),
            ("UpdateUser", "AUTH_UPDATE_USER"),
            ("DeleteUser", "AUTH_DELETE_USER"),
            ("CreateAcl", "AUTH_CREATE_ACL"),
            ("UpdateAcl", "AUTH_UPDATE_ACL"),
            ("DeleteAcl", "AUTH_DELETE_ACL"),
        )
    },
    **{
        ADMIN + rpc_name: rule_of(f"@RocketMQAction {code}", cluster_need(A.GET))
        for rpc_name, code in (
            ("GetUser", "AUTH_GET_USER"),
            ("ListUsers", "AUTH_LIST_USER"),
            ("GetAcl", "AUTH_GET_ACL"),
            ("ListAcls", "AUTH_LIST_ACL"),
        )
    },
    ADMIN + "ExportAuthMetadata": rule_of(
        "Ariane: a slave's copy of users and ACLs; the handler answers the inner credential"
        " user alone",
        cluster_need(A.GET),
    ),
    # apache.rocketmq.v2.Admin: the Remoting code each RPC stands for (RIP-2 proxy admin).
    V2_ADMIN + "ChangeLogLevel": rule_of(
        "Ariane: as UPDATE_BROKER_CONFIG (RIP-2: proxy.admin.config Update)",
        cluster_need(A.UPDATE),
    ),
    V2_ADMIN + "GetProxyRuntimeStats": rule_of(
        "Ariane: as GET_BROKER_RUNTIME_INFO", cluster_need(A.GET)
    ),
    V2_ADMIN + "DescribeTopicStatus": rule_of(
        "@RocketMQAction GET_TOPIC_STATS_INFO", need_of(RT.TOPIC, "topic", A.GET)
    ),
    V2_ADMIN + "GetTopicRoute": rule_of(
        "as GET_ROUTEINFO_BY_TOPIC", need_of(RT.TOPIC, "topic", A.PUB, A.SUB, A.GET)
    ),
    V2_ADMIN + "ListSubscription": rule_of(
        "Ariane: every live subscription (RIP-2: proxy.admin.client List)",
        cluster_need(A.GET, A.LIST),
    ),
    V2_ADMIN + "DescribeSubscription": rule_of(
        "Ariane: every live subscription with its clients (RIP-2: proxy.admin.client Get)",
        cluster_need(A.GET, A.LIST),
    ),
    V2_ADMIN + "DeleteSubscription": rule_of(
        "@RocketMQAction DELETE_SUBSCRIPTIONGROUP", need_of(RT.GROUP, "group", A.DELETE)
    ),
    V2_ADMIN + "ListConsumerConnection": rule_of(
        "@RocketMQAction GET_CONSUMER_CONNECTION_LIST", need_of(RT.GROUP, "group", A.GET)
    ),
    V2_ADMIN + "DescribeGroupAccumulation": rule_of(
        "@RocketMQAction GET_CONSUME_STATS",
        need_of(RT.GROUP, "group", A.GET),
        need_of(RT.TOPIC, "topic", A.GET, required=False),
    ),
    V2_ADMIN + "QueryTimeSpan": rule_of(
        "@RocketMQAction QUERY_CONSUME_TIME_SPAN",
        need_of(RT.GROUP, "group", A.GET),
        need_of(RT.TOPIC, "topic", A.GET, required=False),
    ),
    V2_ADMIN + "ResetGroupOffset": rule_of(
        "@RocketMQAction INVOKE_BROKER_TO_RESET_OFFSET",
        need_of(RT.GROUP, "group", A.UPDATE),
        need_of(RT.TOPIC, "topic", A.UPDATE),
    ),
    V2_ADMIN + "QueryMessage": rule_of(
        "@RocketMQAction QUERY_MESSAGE", need_of(RT.TOPIC, "topic", A.SUB, A.GET)
    ),
    V2_ADMIN + "AdminSendMessage": rule_of(
        "as SEND_MESSAGE (the proxy sends it as a producer would)",
        need_of(RT.TOPIC, "topic", A.PUB),
    ),
    V2_ADMIN + "GetConsumerRunningInfo": rule_of(
        "@RocketMQAction GET_CONSUMER_RUNNING_INFO", need_of(RT.GROUP, "group", A.GET)
    ),
    V2_ADMIN + "PrintThreadStackTrace": rule_of(
        "@RocketMQAction GET_CONSUMER_RUNNING_INFO (as mqadmin consumerStatus -s, jstackEnable)",
        need_of(RT.GROUP, "group", A.GET),
    ),
    V2_ADMIN + "VerifyMessage": rule_of(
        "@RocketMQAction CONSUME_MESSAGE_DIRECTLY; Ariane requires the topic (RocketMQ:"
        " nullable): the message is read by id in it",
        need_of(RT.GROUP, "group", A.SUB),
        need_of(RT.TOPIC, "topic", A.SUB),
    ),
    # ariane.namesrv.v1.Registry (RocketMQ's name server checks nothing: weakness 14).
    REGISTRY + "RegisterBroker": rule_of("@RocketMQAction REGISTER_BROKER", cluster_need(A.UPDATE)),
    REGISTRY + "UnregisterBroker": rule_of(
        "@RocketMQAction UNREGISTER_BROKER", cluster_need(A.UPDATE)
    ),
    REGISTRY + "BrokerHeartbeat": rule_of(
        "@RocketMQAction BROKER_HEARTBEAT", cluster_need(A.UPDATE)
    ),
    REGISTRY + "GetClusterInfo": rule_of(
        "Ariane: GET_BROKER_CLUSTER_INFO is unchecked in RocketMQ", cluster_need(A.GET)
    ),
    REGISTRY + "GetTopicRoute": rule_of(
        "as GET_ROUTEINFO_BY_TOPIC",
        need_of(RT.TOPIC, "topic", A.PUB, A.SUB, A.GET, retry_actions=frozenset({A.SUB, A.GET})),
    ),
    INGEST + "SendStream": rule_of(
        "Ariane: as SendMessage, per message", need_of(RT.TOPIC, "topic", A.PUB)
    ),
}
"""gRPC method full name (``/package.Service/Method`` without the leading slash) -> rule.
``topic`` may carry several values (SendMessage's messages); ``group`` one."""

DEFAULT_RULE = Rule((cluster_need(A.UPDATE),), "Ariane: an unmapped request needs Cluster:Update")
"""The rule of an RPC or code no table names: administrators only (RocketMQ: no check)."""


def grpc_permissions(
    rpc: str,
    *,
    cluster: str,
    topics: Iterable[str] = (),
    group: str | None = None,
) -> tuple[Permission, ...]:
    """What a gRPC call needs.

    Args:
        rpc: the method's full name, e.g. ``apache.rocketmq.v2.MessagingService/SendMessage``
            (a leading ``/`` is ignored).
        cluster: this server's cluster name (``Cluster:<name>`` for admin RPCs).
        topics: the topic names the request carries (``Resource.name``; SendMessage: every
            message's; ``topic.name`` of a ``Topic`` admin message).
        group: the group name the request carries (``Resource.name``), if any; leave it out
            for a producer's Heartbeat.

    Raises:
        errors.RequestMappingError: a required topic or group is absent or blank.
        errors.AuthLimitError: a name longer than ``model.RESOURCE_NAME_CHARS_MAX``.
    """
    rule = GRPC_RULES.get(rpc.lstrip("/"), DEFAULT_RULE)
    values = {"topic": tuple(topics), "group": (group,) if group else ()}
    return fill(rule, values, cluster)


def telemetry_permissions(
    *,
    publishing_topics: Sequence[str] = (),
    subscription_group: str | None = None,
    subscription_topics: Sequence[str] = (),
) -> tuple[Permission, ...]:
    """What a Telemetry ``Settings`` command needs (``newContext(Metadata, TelemetryCommand)``):
    Pub on each publishing topic; Sub on the subscription's group and on each of its topics.
    Commands other than settings need nothing (pass nothing and do not call this).

    Raises:
        errors.RequestMappingError: settings with neither publishing nor a subscription group
            (RocketMQ answers these with an ``AclException``).
    """
    if not publishing_topics and not subscription_group:
        raise errors.RequestMappingError("settings without publishing or subscription.")
    values = {
        "topic": tuple(publishing_topics),
        "group": (subscription_group,) if subscription_group else (),
        "subscription": tuple(subscription_topics) if subscription_group else (),
    }
    return fill(_TELEMETRY_RULE, values, "")


_TELEMETRY_RULE = rule_of(
    _B + ": Telemetry settings",
    need_of(RT.TOPIC, "topic", A.PUB, required=False),
    need_of(RT.GROUP, "group", A.SUB, required=False),
    need_of(RT.TOPIC, "subscription", A.SUB, required=False),
)


def _topic_or_group(
    name: str, retry_group_field: str, values: Mapping[str, Sequence[str]]
) -> model.Resource:
    """A topic value as a resource: a ``%RETRY%`` topic is its group (``Resource.ofGroup``),
    read from ``retry_group_field`` first when the request names one."""
    if not topic_names.is_retry_topic(name):
        return model.Resource.topic(name)
    explicit = [v for v in values.get(retry_group_field, ()) if v.strip()]
    return model.Resource.group(explicit[0] if explicit else name)


def fill(rule: Rule, values: Mapping[str, Sequence[str]], cluster: str) -> tuple[Permission, ...]:
    """The permissions ``rule`` needs for the request's named ``values`` (field -> names; see
    the module docstring), without duplicates, in the rule's order.

    Raises:
        errors.RequestMappingError: a required value is absent or blank, or a name is not a
            valid resource name (a bare ``%RETRY%``, a name over the bound).
    """
    found: list[Permission] = []
    for need in rule.needs:
        if need.resource_type is RT.CLUSTER:
            found.append(Permission(_resource(model.Resource.cluster, cluster), need.actions))
            continue
        names = [v for v in values.get(need.field, ()) if v.strip()]
        if not names and need.required:
            raise errors.RequestMappingError(f"{need.field} is null.")
        for name in names:
            if need.resource_type is RT.GROUP:
                found.append(Permission(_resource(model.Resource.group, name), need.actions))
                continue
            try:
                resource = _topic_or_group(name, need.retry_group_field, values)
            except errors.AuthMetadataError:
                raise errors.RequestMappingError(f"{need.field} {name!r} is illegal.") from None
            actions = need.actions
            if resource.resource_type is RT.GROUP and need.retry_actions is not None:
                actions = need.retry_actions
            found.append(Permission(resource, actions))
    return tuple(dict.fromkeys(found))


def _resource(make: Callable[[str], model.Resource], name: str) -> model.Resource:
    try:
        return make(name)
    except errors.AuthMetadataError:
        raise errors.RequestMappingError(f"the resource {name!r} is illegal.") from None
