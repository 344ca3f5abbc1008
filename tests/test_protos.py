"""Our protos are the upstream v2 wire contract, and the committed generated code is up to date."""

from __future__ import annotations

import pathlib

import pytest
from google.protobuf import descriptor

from ariane.common import errors
from ariane.grpcwire import pb, protogen, rpc

MESSAGING_RPCS = [
    ("QueryRoute", False, False),
    ("Heartbeat", False, False),
    ("SendMessage", False, False),
    ("QueryAssignment", False, False),
    ("ReceiveMessage", False, True),
    ("AckMessage", False, False),
    ("ForwardMessageToDeadLetterQueue", False, False),
    ("PullMessage", False, True),
    ("UpdateOffset", False, False),
    ("GetOffset", False, False),
    ("QueryOffset", False, False),
    ("EndTransaction", False, False),
    ("Telemetry", True, True),
    ("NotifyClientTermination", False, False),
    ("ChangeInvisibleDuration", False, False),
    ("RecallMessage", False, False),
    ("SyncLiteSubscription", False, False),
]
"""The 17 RPCs of grpc-v2.md §2.1 in upstream order: (name, client streaming, server streaming)."""

OPTIONAL = "optional"
REPEATED = "repeated"
MAP = "map"
PLAIN = ""

# (message, field) -> (number, presence) checked against upstream definition.proto/service.proto.
FIELDS: dict[tuple[str, str], tuple[int, str]] = {
    ("Resource", "resource_namespace"): (1, PLAIN),
    ("Resource", "name"): (2, PLAIN),
    ("Address", "host"): (1, PLAIN),
    ("Address", "port"): (2, PLAIN),
    ("Endpoints", "scheme"): (1, PLAIN),
    ("Endpoints", "addresses"): (2, REPEATED),
    ("Broker", "name"): (1, PLAIN),
    ("Broker", "id"): (2, PLAIN),
    ("Broker", "endpoints"): (3, PLAIN),
    ("MessageQueue", "topic"): (1, PLAIN),
    ("MessageQueue", "id"): (2, PLAIN),
    ("MessageQueue", "permission"): (3, PLAIN),
    ("MessageQueue", "broker"): (4, PLAIN),
    ("MessageQueue", "accept_message_types"): (5, REPEATED),
    ("Message", "topic"): (1, PLAIN),
    ("Message", "user_properties"): (2, MAP),
    ("Message", "system_properties"): (3, PLAIN),
    ("Message", "body"): (4, PLAIN),
    ("Status", "code"): (1, PLAIN),
    ("Status", "message"): (2, PLAIN),
    ("Settings", "client_type"): (1, OPTIONAL),
    ("Settings", "access_point"): (2, OPTIONAL),
    ("Settings", "backoff_policy"): (3, OPTIONAL),
    ("Settings", "request_timeout"): (4, OPTIONAL),
    ("Settings", "publishing"): (5, PLAIN),
    ("Settings", "subscription"): (6, PLAIN),
    ("Settings", "user_agent"): (7, PLAIN),
    ("Settings", "metric"): (8, PLAIN),
    ("Settings", "client_properties"): (9, MAP),
    ("Publishing", "topics"): (1, REPEATED),
    ("Publishing", "max_body_size"): (2, PLAIN),
    ("Publishing", "validate_message_type"): (3, PLAIN),
    ("Subscription", "group"): (1, OPTIONAL),
    ("Subscription", "subscriptions"): (2, REPEATED),
    ("Subscription", "fifo"): (3, OPTIONAL),
    ("Subscription", "receive_batch_size"): (4, OPTIONAL),
    ("Subscription", "long_polling_timeout"): (5, OPTIONAL),
    ("Subscription", "lite_subscription_quota"): (6, OPTIONAL),
    ("Subscription", "max_lite_topic_size"): (7, OPTIONAL),
    ("RetryPolicy", "max_attempts"): (1, PLAIN),
    ("RetryPolicy", "exponential_backoff"): (2, PLAIN),
    ("RetryPolicy", "customized_backoff"): (3, PLAIN),
    ("Metric", "on"): (1, PLAIN),
    ("Metric", "endpoints"): (2, OPTIONAL),
    ("DeadLetterQueue", "topic"): (1, PLAIN),
    ("DeadLetterQueue", "message_id"): (2, PLAIN),
    ("OffsetOption", "policy"): (1, PLAIN),
    ("OffsetOption", "offset"): (2, PLAIN),
    ("OffsetOption", "tail_n"): (3, PLAIN),
    ("OffsetOption", "timestamp"): (4, PLAIN),
}

# grpc-v2.md §3: SystemProperties field numbers; "?" marks explicit presence.
SYSTEM_PROPERTIES = (
    "tag?1 keys*2 message_id3 body_digest4 body_encoding5 message_type6 born_timestamp7 "
    "born_host8 store_timestamp?9 store_host10 delivery_timestamp?11 receipt_handle?12 "
    "queue_id13 queue_offset?14 invisible_duration?15 delivery_attempt?16 message_group?17 "
    "trace_context?18 orphaned_transaction_recovery_duration?19 dead_letter_queue?20 "
    "lite_topic?21 priority?22"
)

SERVICE_FIELDS: dict[tuple[str, str], tuple[int, str]] = {
    ("QueryRouteRequest", "topic"): (1, PLAIN),
    ("QueryRouteRequest", "endpoints"): (2, PLAIN),
    ("QueryRouteResponse", "status"): (1, PLAIN),
    ("QueryRouteResponse", "message_queues"): (2, REPEATED),
    ("SendResultEntry", "recall_handle"): (5, PLAIN),
    ("ReceiveMessageRequest", "invisible_duration"): (5, OPTIONAL),
    ("ReceiveMessageRequest", "auto_renew"): (6, PLAIN),
    ("ReceiveMessageRequest", "long_polling_timeout"): (7, OPTIONAL),
    ("ReceiveMessageRequest", "attempt_id"): (8, OPTIONAL),
    ("ReceiveMessageResponse", "delivery_timestamp"): (3, PLAIN),
    ("AckMessageEntry", "lite_topic"): (3, OPTIONAL),
    ("HeartbeatRequest", "group"): (1, OPTIONAL),
    ("TelemetryCommand", "status"): (1, OPTIONAL),
    ("TelemetryCommand", "settings"): (2, PLAIN),
    ("TelemetryCommand", "recover_orphaned_transaction_command"): (5, PLAIN),
    ("TelemetryCommand", "notify_unsubscribe_lite_command"): (9, PLAIN),
    ("ChangeInvisibleDurationRequest", "suspend"): (7, OPTIONAL),
    ("ChangeInvisibleDurationResponse", "receipt_handle"): (2, PLAIN),
    ("RecallMessageRequest", "recall_handle"): (2, PLAIN),
    ("RecallMessageResponse", "message_id"): (2, PLAIN),
    ("SyncLiteSubscriptionRequest", "offset_option"): (6, OPTIONAL),
}

ENUMS: dict[str, dict[str, int]] = {
    "TransactionResolution": {"TRANSACTION_RESOLUTION_UNSPECIFIED": 0, "COMMIT": 1, "ROLLBACK": 2},
    "TransactionSource": {"SOURCE_UNSPECIFIED": 0, "SOURCE_CLIENT": 1, "SOURCE_SERVER_CHECK": 2},
    "Permission": {
        "PERMISSION_UNSPECIFIED": 0,
        "NONE": 1,
        "READ": 2,
        "WRITE": 3,
        "READ_WRITE": 4,
    },
    "FilterType": {"FILTER_TYPE_UNSPECIFIED": 0, "TAG": 1, "SQL": 2},
    "AddressScheme": {"ADDRESS_SCHEME_UNSPECIFIED": 0, "IPv4": 1, "IPv6": 2, "DOMAIN_NAME": 3},
    "MessageType": {
        "MESSAGE_TYPE_UNSPECIFIED": 0,
        "NORMAL": 1,
        "FIFO": 2,
        "DELAY": 3,
        "TRANSACTION": 4,
        "LITE": 5,
        "PRIORITY": 6,
    },
    "DigestType": {"DIGEST_TYPE_UNSPECIFIED": 0, "CRC32": 1, "MD5": 2, "SHA1": 3},
    "ClientType": {
        "CLIENT_TYPE_UNSPECIFIED": 0,
        "PRODUCER": 1,
        "PUSH_CONSUMER": 2,
        "SIMPLE_CONSUMER": 3,
        "PULL_CONSUMER": 4,
        "LITE_PUSH_CONSUMER": 5,
        "LITE_SIMPLE_CONSUMER": 6,
    },
    "Encoding": {"ENCODING_UNSPECIFIED": 0, "IDENTITY": 1, "GZIP": 2},
    "Language": {
        "LANGUAGE_UNSPECIFIED": 0,
        "JAVA": 1,
        "CPP": 2,
        "DOT_NET": 3,
        "GOLANG": 4,
        "RUST": 5,
        "PYTHON": 6,
        "PHP": 7,
        "NODE_JS": 8,
        "RUBY": 9,
        "OBJECTIVE_C": 10,
        "DART": 11,
        "KOTLIN": 12,
    },
    "QueryOffsetPolicy": {"BEGINNING": 0, "END": 1, "TIMESTAMP": 2},
    "LiteSubscriptionAction": {
        "PARTIAL_ADD": 0,
        "PARTIAL_REMOVE": 1,
        "COMPLETE_ADD": 2,
        "COMPLETE_REMOVE": 3,
    },
}


def _presence(field: descriptor.FieldDescriptor) -> str:
    if field.message_type is not None and field.message_type.GetOptions().map_entry:
        return MAP
    if field.is_repeated:
        return REPEATED
    oneof = field.containing_oneof
    if oneof is not None and oneof.name == "_" + field.name:
        return OPTIONAL  # proto3 `optional` is a synthetic one-field oneof named _<field>
    return PLAIN


def _check_fields(
    module_descriptor: descriptor.FileDescriptor, table: dict[tuple[str, str], tuple[int, str]]
) -> None:
    for (message_name, field_name), (number, presence) in table.items():
        field = module_descriptor.message_types_by_name[message_name].fields_by_name[field_name]
        assert (field.number, _presence(field)) == (number, presence), (message_name, field_name)


def test_committed_generated_code_is_byte_for_byte_up_to_date(tmp_path: pathlib.Path) -> None:
    """Regenerating from the protos reproduces the committed gen/ tree exactly (`make protos`)."""
    protogen.generate(tmp_path / "gen")
    fresh = protogen.generated_files(tmp_path / "gen")
    committed = protogen.generated_files(protogen.GEN_DIR)
    assert sorted(fresh) == sorted(committed)
    stale = [name for name in fresh if fresh[name] != committed[name]]
    assert stale == [], "run `make protos` and commit the result"


def test_messaging_service_has_every_rpc_at_its_upstream_path() -> None:
    """The service full name, the 17 RPCs, their order, streaming kinds and method paths."""
    service = pb.MESSAGING_SERVICE
    assert service.full_name == "apache.rocketmq.v2.MessagingService"
    assert service.file.name == "apache/rocketmq/v2/service.proto"
    found = [(m.name, m.client_streaming, m.server_streaming) for m in service.methods]
    assert found == MESSAGING_RPCS
    assert (
        rpc.method_path(service, "QueryRoute") == "/apache.rocketmq.v2.MessagingService/QueryRoute"
    )
    for method in service.methods:
        assert method.input_type.name == method.name + "Request" or method.name == "Telemetry"
        assert "status" in method.output_type.fields_by_name, method.name


def test_key_field_numbers_and_presence_match_upstream() -> None:
    """Field numbers and optional/repeated/map labels of the messages clients depend on."""
    _check_fields(pb.v2.DESCRIPTOR, FIELDS)
    _check_fields(pb.v2_service.DESCRIPTOR, SERVICE_FIELDS)
    settings = pb.v2.DESCRIPTOR.message_types_by_name["Settings"]
    assert [f.name for f in settings.oneofs_by_name["pub_sub"].fields] == [
        "publishing",
        "subscription",
    ]


def test_every_system_property_of_the_spec_has_its_number_and_presence() -> None:
    """SystemProperties fields 1..22 as listed in grpc-v2.md §3, and nothing else."""
    fields = pb.v2.DESCRIPTOR.message_types_by_name["SystemProperties"].fields_by_name
    expected = {}
    for item in SYSTEM_PROPERTIES.split():
        name = item.rstrip("0123456789").rstrip("?*")
        presence = OPTIONAL if "?" in item else REPEATED if "*" in item else PLAIN
        expected[name] = (int(item[len(item.rstrip("0123456789")) :]), presence)
    assert {n: (f.number, _presence(f)) for n, f in fields.items()} == expected


def test_enums_have_the_upstream_values() -> None:
    """Every enum of grpc-v2.md §3 with exactly its names and numbers."""
    for enum_name, values in ENUMS.items():
        enum = pb.v2.DESCRIPTOR.enum_types_by_name[enum_name]
        assert {v.name: v.number for v in enum.values} == values, enum_name
    policy = pb.v2.DESCRIPTOR.message_types_by_name["OffsetOption"].enum_types_by_name["Policy"]
    assert {v.name: v.number for v in policy.values} == {"LAST": 0, "MIN": 1, "MAX": 2}


def test_v2_code_enum_equals_arianes_code() -> None:
    """apache.rocketmq.v2.Code and ariane.common.errors.Code agree name for name."""
    wire = {v.name: v.number for v in pb.v2.DESCRIPTOR.enum_types_by_name["Code"].values}
    assert wire == {c.name: int(c) for c in errors.Code}


def test_file_options_and_admin_service_match_upstream() -> None:
    """Package, Java outer class names and the v2 Admin service's RPC set."""
    options = {
        "definition": pb.v2.DESCRIPTOR,
        "service": pb.v2_service.DESCRIPTOR,
        "admin": pb.v2_admin.DESCRIPTOR,
    }
    outer = {"definition": "MQDomain", "service": "MQService", "admin": "MQAdmin"}
    for key, file in options.items():
        assert file.package == "apache.rocketmq.v2"
        assert file.GetOptions().java_outer_classname == outer[key]
        assert file.GetOptions().java_multiple_files
    assert [m.name for m in pb.V2_ADMIN_SERVICE.methods] == [
        "ChangeLogLevel",
        "DescribeTopicStatus",
        "ListSubscription",
        "DescribeSubscription",
        "DeleteSubscription",
        "DescribeGroupAccumulation",
        "ListConsumerConnection",
        "ResetGroupOffset",
        "QueryMessage",
        "PrintThreadStackTrace",
        "VerifyMessage",
        "AdminSendMessage",
        "GetConsumerRunningInfo",
        "GetTopicRoute",
        "QueryTimeSpan",
        "GetProxyRuntimeStats",
    ]
    listing = pb.v2_admin.DESCRIPTOR.message_types_by_name["ListMessageRequest"]
    lite_topic = listing.fields_by_name["lite_topic"]
    assert lite_topic.number == 14
    assert lite_topic.containing_oneof is not None
    assert lite_topic.containing_oneof.name == "search_key"


@pytest.mark.parametrize(
    "service", [pb.REGISTRY_SERVICE, pb.ADMIN_SERVICE], ids=["registry", "admin"]
)
def test_arianes_own_services_answer_a_status_from_every_rpc(
    service: descriptor.ServiceDescriptor,
) -> None:
    """Every Registry and ariane.admin.v1 response carries an apache.rocketmq.v2.Status first."""
    for method in service.methods:
        status = method.output_type.fields_by_name["status"]
        assert status.message_type is not None
        assert (status.number, status.message_type.full_name) == (1, "apache.rocketmq.v2.Status")
    assert pb.REGISTRY_SERVICE.full_name == "ariane.namesrv.v1.Registry"
    assert pb.ADMIN_SERVICE.full_name == "ariane.admin.v1.Admin"


def test_ingest_service_streams_v2_send_messages_both_ways() -> None:
    """ariane.ingest.v1.Ingest/SendStream is bidi over the v2 SendMessage request and response."""
    service = pb.INGEST_SERVICE
    assert service.full_name == "ariane.ingest.v1.Ingest"
    assert [(m.name, m.client_streaming, m.server_streaming) for m in service.methods] == [
        ("SendStream", True, True)
    ]
    method = service.methods_by_name["SendStream"]
    assert method.input_type.full_name == "apache.rocketmq.v2.SendMessageRequest"
    assert method.output_type.full_name == "apache.rocketmq.v2.SendMessageResponse"
    assert rpc.method_path(service, "SendStream") == "/ariane.ingest.v1.Ingest/SendStream"
