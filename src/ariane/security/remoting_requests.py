"""What each Remoting request code needs (broker and name server), row by row.

Each row is ``(code, RocketMQ constant name, rule)``; the rule's ``source`` is the branch of
``DefaultAuthorizationContextBuilder.build(ChannelHandlerContext, RemotingCommand)`` that handles
the code, or the ``@RocketMQAction`` of its header class (``buildContextByAnnotation``), or
"Ariane:" where RocketMQ 5.3.3 checks nothing (security.md §3.2-3.3, weakness 4). Field names
are the header classes' ext field names (``SendMessageRequestHeaderV2`` letters: ``a`` =
producer group, ``b`` = topic). Values decoded from a body (HEART_BEAT's consumer groups and
subscribed topics, LOCK/UNLOCK_BATCH_MQ's group and queue topics, a subscription group config's
name, CHECK_CLIENT_CONFIG's group) are passed as ``BodyResources``.

This module holds numbers, not ``ariane.remoting.codes`` (a higher layer); a test checks every
name against that enum. Invariant: a code missing here needs ``Cluster:Update``
(``requests.DEFAULT_RULE``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from ariane.security import model, requests
from ariane.security.authorization import Permission

A = model.Action
RT = model.ResourceType
need_of = requests.need_of
cluster_need = requests.cluster_need
rule_of = requests.rule_of

_SPECIAL = "DefaultAuthorizationContextBuilder special case"
_RETRY_SUB = frozenset({A.SUB})


def _annotated(header: str) -> str:
    return f"@RocketMQAction on {header}"


@dataclasses.dataclass(frozen=True, slots=True)
class BodyResources:
    """Resource names an adapter decoded from a request body.

    Attributes:
        groups: consumer groups (HEART_BEAT's ``consumerDataSet[].groupName``, LOCK/UNLOCK's
            ``consumerGroup``, UPDATE_AND_CREATE_SUBSCRIPTIONGROUP's ``groupName``,
            CHECK_CLIENT_CONFIG's ``group``).
        topics: topics (HEART_BEAT's subscribed topics, LOCK/UNLOCK's ``mqSet[].topic``).
    """

    groups: tuple[str, ...] = ()
    topics: tuple[str, ...] = ()


_ROWS: Sequence[tuple[int, str, requests.Rule]] = (
    (
        10,
        "SEND_MESSAGE",
        rule_of(
            _SPECIAL,
            need_of(RT.TOPIC, "topic", A.PUB, retry_actions=_RETRY_SUB, retry_group_field="group"),
        ),
    ),
    (
        11,
        "PULL_MESSAGE",
        rule_of(
            _SPECIAL,
            need_of(RT.TOPIC, "topic", A.SUB),
            need_of(RT.GROUP, "consumerGroup", A.SUB),
        ),
    ),
    (12, "QUERY_MESSAGE", rule_of(_SPECIAL, need_of(RT.TOPIC, "topic", A.SUB, A.GET))),
    (
        14,
        "QUERY_CONSUMER_OFFSET",
        rule_of(
            _SPECIAL,
            need_of(RT.TOPIC, "topic", A.SUB, A.GET),
            need_of(RT.GROUP, "consumerGroup", A.SUB, A.GET),
        ),
    ),
    (
        15,
        "UPDATE_CONSUMER_OFFSET",
        rule_of(
            _SPECIAL,
            need_of(RT.TOPIC, "topic", A.SUB, A.UPDATE),
            need_of(RT.GROUP, "consumerGroup", A.SUB, A.UPDATE),
        ),
    ),
    (
        17,
        "UPDATE_AND_CREATE_TOPIC",
        rule_of(
            _annotated("CreateTopicRequestHeader"),
            need_of(RT.TOPIC, "topic", A.CREATE),
        ),
    ),
    (
        21,
        "GET_ALL_TOPIC_CONFIG",
        rule_of(
            "Ariane: GetAllTopicConfigRequestHeader has no resource field",
            cluster_need(A.GET, A.LIST),
        ),
    ),
    (
        25,
        "UPDATE_BROKER_CONFIG",
        rule_of("Ariane: no header class in RocketMQ", cluster_need(A.UPDATE)),
    ),
    (26, "GET_BROKER_CONFIG", rule_of("Ariane: no header class in RocketMQ", cluster_need(A.GET))),
    (
        28,
        "GET_BROKER_RUNTIME_INFO",
        rule_of("Ariane: no header class in RocketMQ", cluster_need(A.GET)),
    ),
    (
        29,
        "SEARCH_OFFSET_BY_TIMESTAMP",
        rule_of(
            _annotated("SearchOffsetRequestHeader"),
            need_of(RT.TOPIC, "topic", A.GET),
        ),
    ),
    (
        30,
        "GET_MAX_OFFSET",
        rule_of(_annotated("GetMaxOffsetRequestHeader"), need_of(RT.TOPIC, "topic", A.GET)),
    ),
    (
        31,
        "GET_MIN_OFFSET",
        rule_of(_annotated("GetMinOffsetRequestHeader"), need_of(RT.TOPIC, "topic", A.GET)),
    ),
    (
        32,
        "GET_EARLIEST_MSG_STORETIME",
        rule_of(
            _annotated("GetEarliestMsgStoretimeRequestHeader"),
            need_of(RT.TOPIC, "topic", A.GET),
        ),
    ),
    (
        33,
        "VIEW_MESSAGE_BY_ID",
        rule_of(
            _annotated("ViewMessageRequestHeader"),
            need_of(RT.TOPIC, "topic", A.GET),
        ),
    ),
    (
        34,
        "HEART_BEAT",
        rule_of(
            _SPECIAL + ": consumers only (a producer-only heartbeat needs nothing)",
            need_of(RT.GROUP, "body.groups", A.SUB, required=False),
            need_of(RT.TOPIC, "body.topics", A.SUB, required=False),
        ),
    ),
    (
        35,
        "UNREGISTER_CLIENT",
        rule_of(
            _SPECIAL + ": only with a consumerGroup",
            need_of(RT.GROUP, "consumerGroup", A.SUB, required=False),
        ),
    ),
    (36, "CONSUMER_SEND_MSG_BACK", rule_of(_SPECIAL, need_of(RT.GROUP, "group", A.SUB))),
    (
        37,
        "END_TRANSACTION",
        rule_of(
            _SPECIAL + ": only with a topic",
            need_of(RT.TOPIC, "topic", A.PUB, required=False),
        ),
    ),
    (
        38,
        "GET_CONSUMER_LIST_BY_GROUP",
        rule_of(
            _SPECIAL,
            need_of(RT.GROUP, "consumerGroup", A.SUB, A.GET),
        ),
    ),
    (
        41,
        "LOCK_BATCH_MQ",
        rule_of(
            _SPECIAL,
            need_of(RT.GROUP, "body.groups", A.SUB),
            need_of(RT.TOPIC, "body.topics", A.SUB, required=False),
        ),
    ),
    (
        42,
        "UNLOCK_BATCH_MQ",
        rule_of(
            _SPECIAL,
            need_of(RT.GROUP, "body.groups", A.SUB),
            need_of(RT.TOPIC, "body.topics", A.SUB, required=False),
        ),
    ),
    (
        46,
        "CHECK_CLIENT_CONFIG",
        rule_of(
            "Ariane: no header class in RocketMQ; the body's group",
            need_of(RT.GROUP, "body.groups", A.SUB),
        ),
    ),
    (100, "PUT_KV_CONFIG", rule_of(_annotated("PutKVConfigRequestHeader"), cluster_need(A.UPDATE))),
    (101, "GET_KV_CONFIG", rule_of(_annotated("GetKVConfigRequestHeader"), cluster_need(A.GET))),
    (
        102,
        "DELETE_KV_CONFIG",
        rule_of(_annotated("DeleteKVConfigRequestHeader"), cluster_need(A.UPDATE)),
    ),
    (
        103,
        "REGISTER_BROKER",
        rule_of(_annotated("RegisterBrokerRequestHeader"), cluster_need(A.UPDATE)),
    ),
    (
        104,
        "UNREGISTER_BROKER",
        rule_of(
            _annotated("UnRegisterBrokerRequestHeader"),
            cluster_need(A.UPDATE),
        ),
    ),
    (
        105,
        "GET_ROUTEINFO_BY_TOPIC",
        rule_of(
            _SPECIAL + " (proxy; RocketMQ's name server checks nothing)",
            need_of(
                RT.TOPIC, "topic", A.PUB, A.SUB, A.GET, retry_actions=frozenset({A.SUB, A.GET})
            ),
        ),
    ),
    (
        106,
        "GET_BROKER_CLUSTER_INFO",
        rule_of("Ariane: no header class in RocketMQ", cluster_need(A.GET)),
    ),
    (
        200,
        "UPDATE_AND_CREATE_SUBSCRIPTIONGROUP",
        rule_of(
            "Ariane: no header class in RocketMQ; the body's groupName",
            need_of(RT.GROUP, "body.groups", A.CREATE, A.UPDATE),
        ),
    ),
    (
        201,
        "GET_ALL_SUBSCRIPTIONGROUP_CONFIG",
        rule_of(
            "Ariane: GetAllSubscriptionGroupRequestHeader has no resource field",
            cluster_need(A.GET, A.LIST),
        ),
    ),
    (
        202,
        "GET_TOPIC_STATS_INFO",
        rule_of(
            _annotated("GetTopicStatsInfoRequestHeader"),
            need_of(RT.TOPIC, "topic", A.GET),
        ),
    ),
    (
        203,
        "GET_CONSUMER_CONNECTION_LIST",
        rule_of(
            _annotated("GetConsumerConnectionListRequestHeader"),
            need_of(RT.GROUP, "consumerGroup", A.GET),
        ),
    ),
    (
        204,
        "GET_PRODUCER_CONNECTION_LIST",
        rule_of(_annotated("GetProducerConnectionListRequestHeader"), cluster_need(A.GET)),
    ),
    (
        205,
        "WIPE_WRITE_PERM_OF_BROKER",
        rule_of(
            _annotated("WipeWritePermOfBrokerRequestHeader"),
            cluster_need(A.UPDATE),
        ),
    ),
    (
        206,
        "GET_ALL_TOPIC_LIST_FROM_NAMESERVER",
        rule_of(
            "Ariane: no header class in RocketMQ",
            cluster_need(A.GET, A.LIST),
        ),
    ),
    (
        207,
        "DELETE_SUBSCRIPTIONGROUP",
        rule_of(
            _annotated("DeleteSubscriptionGroupRequestHeader"),
            need_of(RT.GROUP, "groupName", A.DELETE),
        ),
    ),
    (
        208,
        "GET_CONSUME_STATS",
        rule_of(
            _annotated("GetConsumeStatsRequestHeader"),
            need_of(RT.GROUP, "consumerGroup", A.GET),
            need_of(RT.TOPIC, "topic", A.GET, required=False),
        ),
    ),
    (
        215,
        "DELETE_TOPIC_IN_BROKER",
        rule_of(
            _annotated("DeleteTopicRequestHeader"),
            need_of(RT.TOPIC, "topic", A.DELETE),
        ),
    ),
    (
        216,
        "DELETE_TOPIC_IN_NAMESRV",
        rule_of(
            _annotated("DeleteTopicFromNamesrvRequestHeader"),
            cluster_need(A.UPDATE),
        ),
    ),
    (
        219,
        "GET_KVLIST_BY_NAMESPACE",
        rule_of(
            _annotated("GetKVListByNamespaceRequestHeader"),
            cluster_need(A.GET),
        ),
    ),
    (
        222,
        "INVOKE_BROKER_TO_RESET_OFFSET",
        rule_of(
            _annotated("ResetOffsetRequestHeader"),
            need_of(RT.GROUP, "group", A.UPDATE),
            need_of(RT.TOPIC, "topic", A.UPDATE),
        ),
    ),
    (
        300,
        "QUERY_TOPIC_CONSUME_BY_WHO",
        rule_of(
            _annotated("QueryTopicConsumeByWhoRequestHeader"),
            need_of(RT.TOPIC, "topic", A.GET),
        ),
    ),
    (
        310,
        "SEND_MESSAGE_V2",
        rule_of(
            _SPECIAL,
            need_of(RT.TOPIC, "b", A.PUB, retry_actions=_RETRY_SUB, retry_group_field="a"),
        ),
    ),
    (
        315,
        "VIEW_BROKER_STATS_DATA",
        rule_of(_annotated("ViewBrokerStatsDataRequestHeader"), cluster_need(A.GET)),
    ),
    (
        320,
        "SEND_BATCH_MESSAGE",
        rule_of(
            _SPECIAL,
            need_of(RT.TOPIC, "b", A.PUB, retry_actions=_RETRY_SUB, retry_group_field="a"),
        ),
    ),
    (
        327,
        "ADD_WRITE_PERM_OF_BROKER",
        rule_of(
            _annotated("AddWritePermOfBrokerRequestHeader"),
            cluster_need(A.UPDATE),
        ),
    ),
    (
        351,
        "GET_TOPIC_CONFIG",
        rule_of(
            _annotated("GetTopicConfigRequestHeader"),
            need_of(RT.TOPIC, "topic", A.GET),
        ),
    ),
    (
        352,
        "GET_SUBSCRIPTIONGROUP_CONFIG",
        rule_of(
            _annotated("GetSubscriptionGroupConfigRequestHeader"),
            need_of(RT.GROUP, "group", A.GET),
        ),
    ),
    (
        361,
        "LITE_PULL_MESSAGE",
        rule_of(
            "Ariane: as PULL_MESSAGE (no header class is registered for 361 in RocketMQ)",
            need_of(RT.TOPIC, "topic", A.SUB),
            need_of(RT.GROUP, "consumerGroup", A.SUB),
        ),
    ),
    (
        3001,
        "AUTH_CREATE_USER",
        rule_of(_annotated("CreateUserRequestHeader"), cluster_need(A.UPDATE)),
    ),
    (
        3002,
        "AUTH_UPDATE_USER",
        rule_of(_annotated("UpdateUserRequestHeader"), cluster_need(A.UPDATE)),
    ),
    (
        3003,
        "AUTH_DELETE_USER",
        rule_of(_annotated("DeleteUserRequestHeader"), cluster_need(A.UPDATE)),
    ),
    (3004, "AUTH_GET_USER", rule_of(_annotated("GetUserRequestHeader"), cluster_need(A.GET))),
    (3005, "AUTH_LIST_USER", rule_of(_annotated("ListUsersRequestHeader"), cluster_need(A.GET))),
    (
        3006,
        "AUTH_CREATE_ACL",
        rule_of(_annotated("CreateAclRequestHeader"), cluster_need(A.UPDATE)),
    ),
    (
        3007,
        "AUTH_UPDATE_ACL",
        rule_of(_annotated("UpdateAclRequestHeader"), cluster_need(A.UPDATE)),
    ),
    (
        3008,
        "AUTH_DELETE_ACL",
        rule_of(_annotated("DeleteAclRequestHeader"), cluster_need(A.UPDATE)),
    ),
    (3009, "AUTH_GET_ACL", rule_of(_annotated("GetAclRequestHeader"), cluster_need(A.GET))),
    (3010, "AUTH_LIST_ACL", rule_of(_annotated("ListAclsRequestHeader"), cluster_need(A.GET))),
)

REMOTING_RULES: Mapping[int, requests.Rule] = {code: rule for code, _, rule in _ROWS}
"""Request code -> rule, for every code Ariane's broker and name server serve plus the ACL
admin codes 3001-3010."""

REMOTING_CODE_NAMES: Mapping[int, str] = {code: name for code, name, _ in _ROWS}
"""Request code -> RocketMQ ``RequestCode`` constant name, for the rows above."""


def _fields_of(rule: requests.Rule) -> tuple[str, ...]:
    """The ext fields ``requests.fill`` reads for ``rule`` (its needs' fields and retry group
    fields, body ones excluded), each once, in rule order."""
    names: list[str] = []
    for need in rule.needs:
        for name in (need.field, need.retry_group_field):
            if name and not name.startswith("body.") and name not in names:
                names.append(name)
    return tuple(names)


_FIELDS_READ: Mapping[int, tuple[str, ...]] = {
    code: _fields_of(rule) for code, rule in REMOTING_RULES.items()
}
_DEFAULT_FIELDS_READ = _fields_of(requests.DEFAULT_RULE)


def fields_read(code: int) -> tuple[str, ...]:
    """The ext field names whose values ``remoting_permissions`` reads for ``code`` (with the
    body's names, all that its answer depends on besides the cluster: a decision cache keys on
    their values). Precomputed per known code, so client-chosen codes grow nothing."""
    return _FIELDS_READ.get(code, _DEFAULT_FIELDS_READ)


def remoting_permissions(
    code: int,
    ext_fields: Mapping[str, str],
    *,
    cluster: str,
    body: BodyResources = BodyResources(),
) -> tuple[Permission, ...]:
    """What a Remoting request needs.

    Args:
        code: the request code.
        ext_fields: the request's ext fields as received.
        cluster: this server's cluster name (``Cluster:<name>``).
        body: names the adapter decoded from the body, for the codes whose rule reads one.

    Raises:
        errors.RequestMappingError: a required field is absent or blank, or names an illegal
            resource (answer NO_PERMISSION).
    """
    rule = REMOTING_RULES.get(code, requests.DEFAULT_RULE)
    values: dict[str, Sequence[str]] = {k: (v,) for k, v in ext_fields.items() if v is not None}
    values["body.groups"] = body.groups
    values["body.topics"] = body.topics
    return requests.fill(rule, values, cluster)
