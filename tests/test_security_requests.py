"""What each gRPC RPC and Remoting code needs, row by row, and that no served request is missing.

Expected rows are RocketMQ's ``DefaultAuthorizationContextBuilder`` branches and
``@RocketMQAction`` annotations (read at apache/rocketmq 8fc57f1), plus Ariane's rules for the
requests RocketMQ 5.3.3 leaves unchecked (security.md §3.3).
"""

from __future__ import annotations

import inspect
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ariane.broker.remoting import admin as broker_admin
from ariane.broker.remoting import service as broker_service
from ariane.grpcwire import pb
from ariane.namesrv import remoting_service
from ariane.remoting import codes
from ariane.security import authorization, errors, model, remoting_requests, requests

CLUSTER = "DefaultCluster"
V2 = requests.V2
ADMIN = requests.ADMIN


def _show(found: tuple[authorization.Permission, ...]) -> list[str]:
    """``["Topic:T Pub|Sub", ...]`` in the order found."""
    return [f"{p.resource.key} {'|'.join(sorted(a.value for a in p.actions))}" for p in found]


GRPC_ROWS = [
    (V2 + "QueryRoute", {"topics": ["T"]}, ["Topic:T Pub|Sub"]),
    (V2 + "SendMessage", {"topics": ["T", "U", "T"]}, ["Topic:T Pub", "Topic:U Pub"]),
    (V2 + "SendMessage", {"topics": ["%RETRY%G"]}, ["Group:G Pub"]),
    (V2 + "RecallMessage", {"topics": ["T"]}, ["Topic:T Pub"]),
    (V2 + "EndTransaction", {"topics": ["T"]}, ["Topic:T Pub"]),
    (V2 + "ReceiveMessage", {"topics": ["T"], "group": "G"}, ["Group:G Sub", "Topic:T Sub"]),
    (V2 + "AckMessage", {"topics": ["T"], "group": "G"}, ["Group:G Sub", "Topic:T Sub"]),
    (
        V2 + "ForwardMessageToDeadLetterQueue",
        {"topics": ["T"], "group": "G"},
        ["Group:G Sub", "Topic:T Sub"],
    ),
    (V2 + "QueryAssignment", {"topics": ["T"], "group": "G"}, ["Group:G Sub", "Topic:T Sub"]),
    (V2 + "ChangeInvisibleDuration", {"group": "G", "topics": ["T"]}, ["Group:G Sub"]),
    (V2 + "Heartbeat", {"group": "G"}, ["Group:G Sub"]),
    (V2 + "Heartbeat", {}, []),  # a producer's heartbeat needs nothing
    (V2 + "NotifyClientTermination", {"group": "G"}, ["Group:G Sub"]),
    (V2 + "NotifyClientTermination", {"group": " "}, []),  # #8230: blank group, no check
    (V2 + "Telemetry", {"topics": ["T"], "group": "G"}, []),  # Settings: telemetry_permissions
    (V2 + "PullMessage", {"topics": ["T"], "group": "G"}, ["Group:G Sub", "Topic:T Sub"]),
    (
        V2 + "UpdateOffset",
        {"topics": ["T"], "group": "G"},
        ["Group:G Sub|Update", "Topic:T Sub|Update"],
    ),
    (V2 + "GetOffset", {"topics": ["T"], "group": "G"}, ["Group:G Get|Sub", "Topic:T Get|Sub"]),
    (V2 + "QueryOffset", {"topics": ["T"]}, ["Topic:T Get|Sub"]),
    (V2 + "SyncLiteSubscription", {"topics": ["T"], "group": "G"}, ["Group:G Sub", "Topic:T Sub"]),
    (ADMIN + "CreateTopic", {"topics": ["T"]}, ["Topic:T Create"]),
    (ADMIN + "UpdateTopic", {"topics": ["T"]}, ["Topic:T Update"]),
    (ADMIN + "DeleteTopic", {"topics": ["T"]}, ["Topic:T Delete"]),
    (ADMIN + "ListTopics", {}, ["Cluster:DefaultCluster Get|List"]),
    (ADMIN + "CreateSubscriptionGroup", {"group": "G"}, ["Group:G Create"]),
    (ADMIN + "UpdateSubscriptionGroup", {"group": "G"}, ["Group:G Update"]),
    (ADMIN + "DeleteSubscriptionGroup", {"group": "G"}, ["Group:G Delete"]),
    (ADMIN + "ListSubscriptionGroups", {}, ["Cluster:DefaultCluster Get|List"]),
    (ADMIN + "GetConsumerLag", {"group": "G"}, ["Group:G Get"]),
    (ADMIN + "GetConsumerLag", {"group": "G", "topics": ["T"]}, ["Group:G Get", "Topic:T Get"]),
    (ADMIN + "ResetOffset", {"group": "G", "topics": ["T"]}, ["Group:G Update", "Topic:T Update"]),
    (ADMIN + "QueryMessageById", {"topics": ["T"]}, ["Topic:T Get"]),
    (ADMIN + "QueryMessageByKey", {"topics": ["T"]}, ["Topic:T Get|Sub"]),
    (ADMIN + "GetBrokerRuntimeStats", {}, ["Cluster:DefaultCluster Get"]),
    (ADMIN + "ChangeRole", {}, ["Cluster:DefaultCluster Update"]),
    (ADMIN + "WipeWritePerm", {}, ["Cluster:DefaultCluster Update"]),
    (ADMIN + "AddWritePerm", {}, ["Cluster:DefaultCluster Update"]),
    (ADMIN + "ListDeadLetters", {"group": "G"}, ["Group:G Get"]),
    (ADMIN + "ResendDeadLetters", {"group": "G"}, ["Group:G Update"]),
    (requests.REGISTRY + "RegisterBroker", {}, ["Cluster:DefaultCluster Update"]),
    (requests.REGISTRY + "UnregisterBroker", {}, ["Cluster:DefaultCluster Update"]),
    (requests.REGISTRY + "BrokerHeartbeat", {}, ["Cluster:DefaultCluster Update"]),
    (requests.REGISTRY + "GetClusterInfo", {}, ["Cluster:DefaultCluster Get"]),
    (requests.REGISTRY + "GetTopicRoute", {"topics": ["T"]}, ["Topic:T Get|Pub|Sub"]),
    (requests.REGISTRY + "GetTopicRoute", {"topics": ["%RETRY%G"]}, ["Group:G Get|Sub"]),
    (requests.INGEST + "SendStream", {"topics": ["T"]}, ["Topic:T Pub"]),
    (requests.V2_ADMIN + "AdminSendMessage", {"topics": ["T"]}, ["Topic:T Pub"]),
    (requests.V2_ADMIN + "GetConsumerRunningInfo", {"group": "G"}, ["Group:G Get"]),
    (requests.V2_ADMIN + "PrintThreadStackTrace", {"group": "G"}, ["Group:G Get"]),
    (
        requests.V2_ADMIN + "VerifyMessage",
        {"group": "G", "topics": ["T"]},
        ["Group:G Sub", "Topic:T Sub"],
    ),
    ("/unknown.Service/Method", {}, ["Cluster:DefaultCluster Update"]),
]


@pytest.mark.parametrize(("rpc", "values", "expected"), GRPC_ROWS)
def test_grpc_rows(rpc: str, values: dict[str, object], expected: list[str]) -> None:
    """Each RPC needs exactly its row's permissions."""
    found = requests.grpc_permissions(rpc, cluster=CLUSTER, **values)  # type: ignore[arg-type]
    assert _show(found) == expected


@pytest.mark.parametrize(
    ("rpc", "values"),
    [
        (V2 + "SendMessage", {}),
        (V2 + "QueryRoute", {"topics": [""]}),
        (V2 + "ReceiveMessage", {"topics": ["T"]}),
        (V2 + "AckMessage", {"group": "G"}),
        (ADMIN + "CreateTopic", {}),
        (requests.V2_ADMIN + "PrintThreadStackTrace", {}),
        (requests.V2_ADMIN + "VerifyMessage", {"topics": ["T"]}),
        (requests.V2_ADMIN + "VerifyMessage", {"group": "G", "topics": [""]}),
        (V2 + "QueryRoute", {"topics": ["%RETRY%"]}),
        (V2 + "QueryRoute", {"topics": ["x" * 300]}),
    ],
)
def test_grpc_requests_without_their_resource_are_refused(
    rpc: str, values: dict[str, object]
) -> None:
    """A required topic or group that is absent, blank or not a name raises the documented
    ``RequestMappingError`` instead of needing nothing."""
    with pytest.raises(errors.RequestMappingError):
        requests.grpc_permissions(rpc, cluster=CLUSTER, **values)  # type: ignore[arg-type]


def test_telemetry_settings() -> None:
    """Publishing settings need Pub on each topic; a subscription needs Sub on its group and
    topics; settings with neither are refused (RocketMQ's ``AclException``)."""
    pub = requests.telemetry_permissions(publishing_topics=["T", "U"])
    assert _show(pub) == ["Topic:T Pub", "Topic:U Pub"]
    sub = requests.telemetry_permissions(subscription_group="G", subscription_topics=["T"])
    assert _show(sub) == ["Group:G Sub", "Topic:T Sub"]
    with pytest.raises(errors.RequestMappingError):
        requests.telemetry_permissions()


@pytest.mark.parametrize(
    "service",
    [
        pb.MESSAGING_SERVICE,
        pb.admin.DESCRIPTOR.services_by_name["Admin"],
        pb.REGISTRY_SERVICE,
        pb.ingest.DESCRIPTOR.services_by_name["Ingest"],
    ],
    ids=lambda s: s.full_name,
)
def test_every_grpc_method_has_a_row(service: object) -> None:
    """Every method of the gRPC services Ariane serves is in ``GRPC_RULES``, and nothing else."""
    methods = {f"{service.full_name}/{m.name}" for m in service.methods}  # type: ignore[attr-defined]
    ours = {k for k in requests.GRPC_RULES if k.startswith(service.full_name + "/")}  # type: ignore[attr-defined]
    assert methods == ours


RT = codes.RequestCode
REMOTING_ROWS = [
    (RT.SEND_MESSAGE, {"topic": "T"}, (), ["Topic:T Pub"]),
    (RT.SEND_MESSAGE, {"topic": "%RETRY%G"}, (), ["Group:G Sub"]),
    (RT.SEND_MESSAGE, {"topic": "%RETRY%G", "group": "H"}, (), ["Group:H Sub"]),
    (RT.SEND_MESSAGE_V2, {"b": "T", "a": "P"}, (), ["Topic:T Pub"]),
    (
        RT.SEND_MESSAGE_V2,
        {"b": "%RETRY%G", "a": "CLIENT_INNER_PRODUCER"},
        (),
        ["Group:CLIENT_INNER_PRODUCER Sub"],
    ),
    (RT.SEND_BATCH_MESSAGE, {"b": "T", "a": "P"}, (), ["Topic:T Pub"]),
    (RT.PULL_MESSAGE, {"topic": "T", "consumerGroup": "G"}, (), ["Topic:T Sub", "Group:G Sub"]),
    (RT.PULL_MESSAGE, {"topic": "%RETRY%G", "consumerGroup": "G"}, (), ["Group:G Sub"]),
    (
        RT.LITE_PULL_MESSAGE,
        {"topic": "T", "consumerGroup": "G"},
        (),
        ["Topic:T Sub", "Group:G Sub"],
    ),
    (RT.QUERY_MESSAGE, {"topic": "T"}, (), ["Topic:T Get|Sub"]),
    (
        RT.QUERY_CONSUMER_OFFSET,
        {"topic": "T", "consumerGroup": "G"},
        (),
        ["Topic:T Get|Sub", "Group:G Get|Sub"],
    ),
    (
        RT.UPDATE_CONSUMER_OFFSET,
        {"topic": "T", "consumerGroup": "G"},
        (),
        ["Topic:T Sub|Update", "Group:G Sub|Update"],
    ),
    (RT.UPDATE_AND_CREATE_TOPIC, {"topic": "T"}, (), ["Topic:T Create"]),
    (RT.GET_ALL_TOPIC_CONFIG, {}, (), ["Cluster:DefaultCluster Get|List"]),
    (RT.GET_BROKER_CONFIG, {}, (), ["Cluster:DefaultCluster Get"]),
    (RT.GET_BROKER_RUNTIME_INFO, {}, (), ["Cluster:DefaultCluster Get"]),
    (RT.SEARCH_OFFSET_BY_TIMESTAMP, {"topic": "T"}, (), ["Topic:T Get"]),
    (RT.GET_MAX_OFFSET, {"topic": "T"}, (), ["Topic:T Get"]),
    (RT.GET_MIN_OFFSET, {"topic": "%RETRY%G"}, (), ["Group:G Get"]),
    (RT.GET_EARLIEST_MSG_STORETIME, {"topic": "T"}, (), ["Topic:T Get"]),
    (RT.VIEW_MESSAGE_BY_ID, {"topic": "T", "offset": "1"}, (), ["Topic:T Get"]),
    (
        RT.HEART_BEAT,
        {},
        (("G", "H"), ("T", "%RETRY%G")),
        ["Group:G Sub", "Group:H Sub", "Topic:T Sub"],
    ),
    (RT.HEART_BEAT, {}, ((), ()), []),  # producer-only
    (RT.UNREGISTER_CLIENT, {"clientID": "c", "consumerGroup": "G"}, (), ["Group:G Sub"]),
    (RT.UNREGISTER_CLIENT, {"clientID": "c", "producerGroup": "P"}, (), []),
    (RT.CONSUMER_SEND_MSG_BACK, {"group": "G", "offset": "1"}, (), ["Group:G Sub"]),
    (RT.END_TRANSACTION, {"topic": "T"}, (), ["Topic:T Pub"]),
    (RT.END_TRANSACTION, {"producerGroup": "P"}, (), []),  # RocketMQ: only with a topic
    (RT.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "G"}, (), ["Group:G Get|Sub"]),
    (RT.LOCK_BATCH_MQ, {}, (("G",), ("T", "U")), ["Group:G Sub", "Topic:T Sub", "Topic:U Sub"]),
    (RT.UNLOCK_BATCH_MQ, {}, (("G",), ()), ["Group:G Sub"]),
    (RT.CHECK_CLIENT_CONFIG, {}, (("G",), ()), ["Group:G Sub"]),
    (RT.PUT_KV_CONFIG, {"namespace": "n"}, (), ["Cluster:DefaultCluster Update"]),
    (RT.GET_KV_CONFIG, {}, (), ["Cluster:DefaultCluster Get"]),
    (RT.DELETE_KV_CONFIG, {}, (), ["Cluster:DefaultCluster Update"]),
    (RT.GET_KVLIST_BY_NAMESPACE, {}, (), ["Cluster:DefaultCluster Get"]),
    (RT.REGISTER_BROKER, {}, (), ["Cluster:DefaultCluster Update"]),
    (RT.UNREGISTER_BROKER, {}, (), ["Cluster:DefaultCluster Update"]),
    (RT.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"}, (), ["Topic:T Get|Pub|Sub"]),
    (RT.GET_ROUTEINFO_BY_TOPIC, {"topic": "%RETRY%G"}, (), ["Group:G Get|Sub"]),  # #9073
    (RT.GET_BROKER_CLUSTER_INFO, {}, (), ["Cluster:DefaultCluster Get"]),
    (RT.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {}, (("G",), ()), ["Group:G Create|Update"]),
    (RT.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, {}, (), ["Cluster:DefaultCluster Get|List"]),
    (RT.GET_TOPIC_STATS_INFO, {"topic": "T"}, (), ["Topic:T Get"]),
    (RT.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": "G"}, (), ["Group:G Get"]),
    (RT.GET_ALL_TOPIC_LIST_FROM_NAMESERVER, {}, (), ["Cluster:DefaultCluster Get|List"]),
    (RT.DELETE_SUBSCRIPTIONGROUP, {"groupName": "G"}, (), ["Group:G Delete"]),
    (RT.GET_CONSUME_STATS, {"consumerGroup": "G"}, (), ["Group:G Get"]),
    (
        RT.GET_CONSUME_STATS,
        {"consumerGroup": "G", "topic": "T"},
        (),
        ["Group:G Get", "Topic:T Get"],
    ),
    (RT.DELETE_TOPIC_IN_BROKER, {"topic": "T"}, (), ["Topic:T Delete"]),
    (RT.DELETE_TOPIC_IN_NAMESRV, {"topic": "T"}, (), ["Cluster:DefaultCluster Update"]),
    (
        RT.INVOKE_BROKER_TO_RESET_OFFSET,
        {"group": "G", "topic": "T"},
        (),
        ["Group:G Update", "Topic:T Update"],
    ),
    (RT.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": "T"}, (), ["Topic:T Get"]),
    (RT.GET_TOPIC_CONFIG, {"topic": "T"}, (), ["Topic:T Get"]),
    (RT.GET_SUBSCRIPTIONGROUP_CONFIG, {"group": "G"}, (), ["Group:G Get"]),
    (25, {}, (), ["Cluster:DefaultCluster Update"]),  # UPDATE_BROKER_CONFIG
    *(
        (code, {"username": "u"}, (), ["Cluster:DefaultCluster Update"])
        for code in (3001, 3002, 3003, 3006, 3007, 3008)
    ),
    *((code, {}, (), ["Cluster:DefaultCluster Get"]) for code in (3004, 3005, 3009, 3010)),
    (99999, {"topic": "T"}, (), ["Cluster:DefaultCluster Update"]),  # unmapped: admins only
]


@pytest.mark.parametrize(("code", "ext", "body", "expected"), REMOTING_ROWS)
def test_remoting_rows(
    code: int, ext: dict[str, str], body: tuple[tuple[str, ...], ...], expected: list[str]
) -> None:
    """Each Remoting code needs exactly its row's permissions."""
    resources = (
        remoting_requests.BodyResources(*body) if body else remoting_requests.BodyResources()
    )
    found = remoting_requests.remoting_permissions(code, ext, cluster=CLUSTER, body=resources)
    assert _show(found) == expected


@pytest.mark.parametrize(
    ("code", "ext"),
    [
        (RT.SEND_MESSAGE, {}),
        (RT.SEND_MESSAGE_V2, {"a": "P"}),
        (RT.PULL_MESSAGE, {"topic": "T"}),
        (RT.CONSUMER_SEND_MSG_BACK, {"group": ""}),
        (RT.LOCK_BATCH_MQ, {}),
        (RT.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {}),
        (RT.GET_ROUTEINFO_BY_TOPIC, {}),
    ],
)
def test_remoting_requests_without_their_resource_are_refused(
    code: int, ext: dict[str, str]
) -> None:
    """A required field that is absent or blank raises ``RequestMappingError``."""
    with pytest.raises(errors.RequestMappingError):
        remoting_requests.remoting_permissions(code, ext, cluster=CLUSTER)


def _served_codes() -> set[int]:
    """The request codes the broker and the name server register handlers for."""
    sources = [
        inspect.getsource(broker_service.RemotingService.handlers),
        inspect.getsource(broker_service),  # SLAVE_REFUSED_CODES
        inspect.getsource(broker_admin.AdminHandler.table),
        inspect.getsource(remoting_service.RemotingNameService.handlers),
    ]
    names = {m for src in sources for m in re.findall(r"\b(?:RQ|rq|request)\.([A-Z_0-9]+)\b", src)}
    return {RT.__members__[name] for name in names if name in RT.__members__}


def test_every_served_code_has_a_row() -> None:
    """Every code Ariane's broker or name server serves has its own row (none falls back to
    the default rule by omission)."""
    served = _served_codes()
    assert len(served) > 30  # the scan found the tables
    assert served - set(remoting_requests.REMOTING_RULES) == set()


def test_row_names_are_rocketmqs() -> None:
    """Each row's name is RocketMQ's ``RequestCode`` constant for its number."""
    rocketmq_only = {25: "UPDATE_BROKER_CONFIG"} | {
        3001 + i: n
        for i, n in enumerate(
            [
                "AUTH_CREATE_USER",
                "AUTH_UPDATE_USER",
                "AUTH_DELETE_USER",
                "AUTH_GET_USER",
                "AUTH_LIST_USER",
                "AUTH_CREATE_ACL",
                "AUTH_UPDATE_ACL",
                "AUTH_DELETE_ACL",
                "AUTH_GET_ACL",
                "AUTH_LIST_ACL",
            ]
        )
    }
    for code, name in remoting_requests.REMOTING_CODE_NAMES.items():
        expected = RT(code).name if code in RT._value2member_map_ else rocketmq_only[code]
        assert name == expected, code
    for rule in [*remoting_requests.REMOTING_RULES.values(), *requests.GRPC_RULES.values()]:
        assert rule.source  # every row cites where it comes from


@pytest.mark.parametrize(
    ("address", "ip"),
    [
        ("10.0.0.7:51234", "10.0.0.7"),
        ("ipv4:10.0.0.7:51234", "10.0.0.7"),
        ("ipv6:[::1]:5", "::1"),
        ("[fd00::1]:5", "fd00::1"),
        ("10.0.0.7", "10.0.0.7"),
        ("unix:/tmp/x.sock", None),
        ("", None),
    ],
)
def test_source_ip_of_peer_addresses(address: str, ip: str | None) -> None:
    """The client IP is read from Remoting and gRPC peer strings, port and scheme removed."""
    context = requests.RequestContext(None, requests.Transport.TLS, "c", address, (), "34")
    assert context.source_ip == ip == requests.source_ip_of(address)


@settings(max_examples=300, deadline=None)
@given(
    code=st.sampled_from(sorted(remoting_requests.REMOTING_RULES)) | st.integers(),
    ext=st.dictionaries(
        st.sampled_from(["topic", "b", "a", "group", "consumerGroup", "groupName"])
        | st.text(max_size=5),
        st.text(max_size=300),
        max_size=5,
    ),
)
def test_any_remoting_request_maps_or_raises_the_documented_error(
    code: int, ext: dict[str, str]
) -> None:
    """Arbitrary ext fields yield permissions on literal resources or ``RequestMappingError``."""
    try:
        found = remoting_requests.remoting_permissions(code, ext, cluster=CLUSTER)
    except errors.RequestMappingError:
        return
    assert all(p.resource.pattern is model.ResourcePattern.LITERAL for p in found)
