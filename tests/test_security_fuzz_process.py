"""Fuzz of the authentication paths against one real ``ariane broker`` process with ACL on
(issue 21, "Done when": the fuzz test).

Malformed, huge, empty, duplicated, non-UTF-8 and tampered credentials -- the v2
``authorization`` / ``x-mq-date-time`` metadata on gRPC calls (SendMessage, QueryRoute,
ReceiveMessage, admin RPCs) and the classic ``AccessKey`` / ``Signature`` ext fields on Remoting
requests (SEND_MESSAGE, UPDATE_AND_CREATE_TOPIC, the auth codes 3001-3010, PULL) -- are each
answered with a code (v2 ``Status`` 40100 UNAUTHORIZED, Remoting NO_PERMISSION, or gRPC's own
RESOURCE_EXHAUSTED for request headers over its 8 KiB metadata limit), within a deadline (a
Remoting connection is never closed unanswered); and none of them stores anything: the
broker's topics, groups, users (secret keys included, read with ``ExportAuthMetadata``), ACLs
and CommitLog max offset, read through the admin API, are unchanged after each test. The broker
is alive and serves a signed request at the end.

The broker runs with one front-end worker (the default path: gRPC calls cross the relay to the
store owner, whose gate decides), a Remoting port and 64 KiB CommitLog segments. Value generators
come from hypothesis with a bounded number of examples (``derandomize``: the same examples on
every run, so a failure reproduces); the unit-level properties of the same parsers are in
tests/test_security_authentication.py, protobuf-level wire fuzz in
tests/conformance/test_hostile_input.py.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import pathlib
import struct
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from google.protobuf import message as pb_message
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ha_testing
import remoting_testing
from ariane import dev
from ariane.common import errors
from ariane.grpcwire import messages, pb, rpc
from ariane.remoting import codes, command, transport
from ariane.security import signing

pytestmark = pytest.mark.slow

RQ = codes.RequestCode
RC = codes.ResponseCode
ROOT = ("root", "root-secret")
INNER = ("inner", "inner-secret")
TOPIC, GROUP = "fuzz-topic", "fuzz-group"
CALL_TIMEOUT_S = 20.0
"""Deadline of one fuzzed call: an answer later than this is a hang."""
EXAMPLES = 150
"""Hypothesis examples per property (each a call on a new connection, ~3-30 ms): < ~10 s each
on a loaded 2-core box."""
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.function_scoped_fixture,  # `unchanged` checks once around all examples
    ],
)
GRPC_OPTIONS = [("grpc.max_send_message_length", 64 * 1024 * 1024)]
GRPC_METADATA_BYTES_MAX = 8 * 1024
"""gRPC's default ``grpc.max_metadata_size``: larger request headers get RESOURCE_EXHAUSTED
from the HTTP/2 layer of the broker (or its front-end worker) before any handler."""


@dataclasses.dataclass(frozen=True)
class Broker:
    """The broker's gRPC and Remoting addresses and its process."""

    grpc: str
    remoting: str
    tmp: pathlib.Path


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    """A name server and one ACL-enforcing broker (root Super user, an inner credential), with
    ``TOPIC`` and ``GROUP`` created; stopped by PID after the module."""
    tmp = tmp_path_factory.mktemp("authfuzz")
    toml = (
        "[auth]\n"
        "authentication_enabled = true\n"
        "authorization_enabled = true\n"
        "[auth.init_authentication_user]\n"
        f'username = "{ROOT[0]}"\npassword = "{ROOT[1]}"\n'
        "[auth.inner_client_authentication_credentials]\n"
        f'access_key = "{INNER[0]}"\nsecret_key = "{INNER[1]}"\n'
    )
    port, remoting_port = dev.free_port(), dev.free_port()
    with ha_testing.running_namesrv(tmp) as namesrv:
        args = [
            "broker",
            *("--listen", f"127.0.0.1:{port}", "--store-dir", str(tmp / "store")),
            *("--remoting-listen", f"127.0.0.1:{remoting_port}"),
            *("--namesrv", namesrv, "--workers", "1", "--broker-name", "fuzz"),
            *ha_testing.small_store_config(tmp, "fuzz", toml),
        ]
        process = ha_testing.spawn(args, tmp / "broker.log")
        try:
            for listening in (port, remoting_port):
                dev.wait_until_listening(
                    "127.0.0.1", listening, process=process, timeout_s=ha_testing.DEADLINE_S
                )
            made = Broker(f"127.0.0.1:{port}", f"127.0.0.1:{remoting_port}", tmp)
            ha_testing.poll(
                lambda: ha_testing.stats(made.grpc, user=ROOT).writable, "the broker to take writes"
            )
            ha_testing.create_topic(made.grpc, TOPIC, user=ROOT)
            group = pb.admin.CreateSubscriptionGroupRequest(
                group=pb.admin.SubscriptionGroup(name=GROUP)
            )
            answer = ha_testing.admin(
                made.grpc,
                "CreateSubscriptionGroup",
                group,
                pb.admin.CreateSubscriptionGroupResponse,
                user=ROOT,
            )
            assert answer.status.code == errors.Code.OK, answer.status.message
            yield made
            assert process.poll() is None, "the broker process died"
        finally:
            dev.stop_process(process)


def _snapshot(broker: Broker) -> dict[str, Any]:
    """Everything a fuzzed request could have changed, read through the admin API: topics
    (system ones too), groups, users with their secret keys and status, ACLs, and the CommitLog
    max offset."""

    def ask(name: str, request: pb_message.Message, answer: type[Any], user: Any = ROOT) -> Any:
        got = ha_testing.admin(broker.grpc, name, request, answer, user=user)
        assert got.status.code == errors.Code.OK, (name, got.status.message)
        return got

    topics = ask(
        "ListTopics", pb.admin.ListTopicsRequest(include_system=True), pb.admin.ListTopicsResponse
    )
    groups = ask(
        "ListSubscriptionGroups",
        pb.admin.ListSubscriptionGroupsRequest(),
        pb.admin.ListSubscriptionGroupsResponse,
    )
    exported = ask(
        "ExportAuthMetadata",
        pb.admin.ExportAuthMetadataRequest(),
        pb.admin.ExportAuthMetadataResponse,
        user=INNER,
    )
    stats = ha_testing.stats(broker.grpc, user=ROOT)
    return {
        "topics": [t.SerializeToString(deterministic=True) for t in topics.topics],
        "groups": [g.SerializeToString(deterministic=True) for g in groups.groups],
        "users": [u.SerializeToString(deterministic=True) for u in exported.users],
        "acls": [a.SerializeToString(deterministic=True) for a in exported.acls],
        "commit_log_max_offset": stats.commit_log_max_offset,
    }


@pytest.fixture
def unchanged(broker: Broker) -> Iterator[Broker]:
    """The broker; after the test, asserts that nothing it holds changed and that it lives."""
    before = _snapshot(broker)
    assert before["commit_log_max_offset"] >= 0
    yield broker
    after = _snapshot(broker)
    assert after == before


# --- gRPC ---------------------------------------------------------------------------------


def _message(topic: str) -> pb.v2.Message:
    props = pb.v2.SystemProperties(
        message_id="FUZZ0001",
        message_type=pb.v2.MessageType.NORMAL,
        born_timestamp=messages.timestamp(1_700_000_000_000),
        born_host="fuzz",
        body_encoding=pb.v2.Encoding.IDENTITY,
    )
    return pb.v2.Message(topic=pb.v2.Resource(name=topic), body=b"fuzz", system_properties=props)


@dataclasses.dataclass(frozen=True)
class GrpcTarget:
    """One RPC the fuzz calls: its service, name, a request that would change the broker if
    served, and whether the response streams."""

    service: Any
    name: str
    request: pb_message.Message
    response: type[Any]
    streaming: bool = False


MS, ADMIN = pb.MESSAGING_SERVICE, pb.ADMIN_SERVICE
GRPC_TARGETS = [
    GrpcTarget(
        MS,
        "SendMessage",
        pb.v2_service.SendMessageRequest(messages=[_message(TOPIC)]),
        pb.v2_service.SendMessageResponse,
    ),
    GrpcTarget(
        MS,
        "QueryRoute",
        pb.v2_service.QueryRouteRequest(topic=pb.v2.Resource(name=TOPIC)),
        pb.v2_service.QueryRouteResponse,
    ),
    GrpcTarget(
        MS,
        "ReceiveMessage",
        pb.v2_service.ReceiveMessageRequest(
            group=pb.v2.Resource(name=GROUP),
            message_queue=pb.v2.MessageQueue(topic=pb.v2.Resource(name=TOPIC), id=0),
            filter_expression=pb.v2.FilterExpression(type=pb.v2.FilterType.TAG, expression="*"),
            batch_size=1,
            invisible_duration=messages.duration(30_000),
            long_polling_timeout=messages.duration(1_000),
        ),
        pb.v2_service.ReceiveMessageResponse,
        streaming=True,
    ),
    GrpcTarget(
        ADMIN,
        "CreateTopic",
        pb.admin.CreateTopicRequest(
            topic=pb.admin.Topic(name="fuzz-made", read_queue_nums=1, write_queue_nums=1, perm=6)
        ),
        pb.admin.CreateTopicResponse,
    ),
    GrpcTarget(
        ADMIN, "DeleteTopic", pb.admin.DeleteTopicRequest(name=TOPIC), pb.admin.DeleteTopicResponse
    ),
    GrpcTarget(
        ADMIN,
        "CreateUser",
        pb.admin.CreateUserRequest(
            user=pb.admin.User(username="mallory", password="m-secret", user_type="Super")
        ),
        pb.admin.CreateUserResponse,
    ),
    GrpcTarget(
        ADMIN,
        "UpdateUser",
        pb.admin.UpdateUserRequest(user=pb.admin.User(username=ROOT[0], password="taken-over")),
        pb.admin.UpdateUserResponse,
    ),
    GrpcTarget(
        ADMIN,
        "CreateAcl",
        pb.admin.CreateAclRequest(
            acl=pb.admin.Acl(
                subject="User:mallory",
                policies=[
                    pb.admin.AclPolicy(
                        entries=[pb.admin.AclEntry(resource="*", actions=["All"], decision="Allow")]
                    )
                ],
            )
        ),
        pb.admin.CreateAclResponse,
    ),
    GrpcTarget(
        ADMIN,
        "ResetOffset",
        pb.admin.ResetOffsetRequest(group=GROUP, topic=TOPIC),
        pb.admin.ResetOffsetResponse,
    ),
    GrpcTarget(
        ADMIN,
        "ExportAuthMetadata",
        pb.admin.ExportAuthMetadataRequest(),
        pb.admin.ExportAuthMetadataResponse,
    ),
]


async def _grpc_answer(address: str, target: GrpcTarget, metadata: list[tuple[str, str]]) -> Any:
    """The v2 status code the broker answered, or the gRPC ``StatusCode`` it failed with."""
    async with grpc.aio.insecure_channel(address, options=GRPC_OPTIONS) as channel:
        path = rpc.method_path(target.service, target.name)
        serialize = type(target.request).SerializeToString
        try:
            if target.streaming:
                stream = channel.unary_stream(path, serialize, target.response.FromString)
                call = stream(target.request, timeout=CALL_TIMEOUT_S, metadata=metadata)
                items = [item async for item in call]
                statuses = [
                    int(i.status.code) for i in items if i.WhichOneof("content") == "status"
                ]
                return statuses[0] if statuses else ("no status", items)
            unary = channel.unary_unary(path, serialize, target.response.FromString)
            got = await unary(target.request, timeout=CALL_TIMEOUT_S, metadata=metadata)
            return int(got.status.code)
        except grpc.aio.AioRpcError as exc:
            return exc.code()


def _assert_grpc_refused(
    broker: Broker, target: GrpcTarget, metadata: list[tuple[str, str]]
) -> Any:
    """Call ``target`` with ``metadata``; assert it was refused, and return the answer (a v2
    code, or the ``grpc.StatusCode`` of a call the HTTP/2 layer refused)."""
    answer = asyncio.run(
        _grpc_answer(broker.grpc, target, [("x-mq-client-id", "fuzz@1"), *metadata])
    )
    assert answer != grpc.StatusCode.DEADLINE_EXCEEDED, (target.name, "hang")
    if isinstance(answer, int):
        # no credential here verifies: authentication refuses before any resource is read
        assert answer == errors.Code.UNAUTHORIZED, (target.name, answer, metadata)
    else:
        # only gRPC's own metadata limit may answer before the gate, and only over it
        size = sum(len(k) + len(v) for k, v in metadata)
        assert answer == grpc.StatusCode.RESOURCE_EXHAUSTED, (target.name, answer)
        assert size > GRPC_METADATA_BYTES_MAX, (target.name, size)
    return answer


_ascii = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=120)
"""What an HTTP/2 header value may hold (gRPC refuses other bytes before sending)."""

_root_signature = signing.grpc_signature_hex(ROOT[1], "20250101T000000Z")
_authorization = st.one_of(
    _ascii,
    st.builds(
        lambda alg, items: f"{alg} " + ", ".join(items),
        st.sampled_from(["MQv2-HMAC-SHA1", "", "MQv2-HMAC-SHA256", "mqv2-hmac-sha1"]),
        st.lists(
            st.builds(
                lambda k, v: f"{k}={v}",
                st.sampled_from(["Credential", "SignedHeaders", "Signature", "credential", ""]),
                st.sampled_from(
                    [
                        ROOT[0],
                        INNER[0],
                        "",
                        "x-mq-date-time",
                        _root_signature,
                        _root_signature.upper(),
                        "0" * 40,
                        "root/extra",
                    ]
                )
                | _ascii,
            ),
            max_size=5,
        ),
    ),
)


@FUZZ
@given(
    target=st.sampled_from(GRPC_TARGETS),
    authorization=st.none() | _authorization,
    date_time=st.none() | st.sampled_from(["20250101T000000Z", "", "2025"]) | _ascii,
)
def test_malformed_grpc_credentials_are_refused_with_a_code(
    unchanged: Broker, target: GrpcTarget, authorization: str | None, date_time: str | None
) -> None:
    """Any ``authorization`` / ``x-mq-date-time`` pair that is not a valid signature (root's
    name and even root's signature of another date-time included) gets UNAUTHORIZED, never a
    hang, and changes nothing."""
    metadata = []
    if authorization is not None:
        metadata.append(("authorization", authorization))
    if date_time is not None:
        metadata.append(("x-mq-date-time", date_time))
    if date_time == "20250101T000000Z" and authorization and _root_signature in authorization:
        return  # could be root's real signature; the tampered cases are below
    _assert_grpc_refused(unchanged, target, metadata)


def _grpc_edge_cases() -> list[tuple[str, list[tuple[str, str]]]]:
    signed = dict(
        signing.sign_grpc(access_key=ROOT[0], secret_key=ROOT[1], date_time="20250101T000000Z")
    )
    good, when = signed["authorization"], signed["x-mq-date-time"]
    big = "A" * 65_536
    return [
        ("empty", [("authorization", ""), ("x-mq-date-time", "")]),
        ("64-KiB-authorization", [("authorization", big), ("x-mq-date-time", when)]),
        ("64-KiB-date-time", [("authorization", good), ("x-mq-date-time", big)]),
        (
            "7-KiB-credential-reaches-the-gate",
            [
                ("authorization", f"MQv2-HMAC-SHA1 Credential={'r' * 7000}, Signature=00"),
                ("x-mq-date-time", when),
            ],
        ),
        (
            "64-KiB-credential",
            [
                (
                    "authorization",
                    f"MQv2-HMAC-SHA1 Credential={big}, SignedHeaders=x-mq-date-time, Signature=00",
                ),
                ("x-mq-date-time", when),
            ],
        ),
        ("root-signature-other-date", [("authorization", good), ("x-mq-date-time", when + "1")]),
        (
            "root-signature-one-digit-off",
            [
                ("authorization", good[:-1] + ("0" if good[-1] != "0" else "1")),
                ("x-mq-date-time", when),
            ],
        ),
        ("root-signature-no-date", [("authorization", good)]),
        (
            "duplicated-bad-authorization",
            [
                ("authorization", "MQv2-HMAC-SHA1 Credential=root"),
                ("authorization", "junk"),
                ("x-mq-date-time", when),
            ],
        ),
        (
            "duplicated-date-time",
            [("authorization", good), ("x-mq-date-time", "x"), ("x-mq-date-time", "y")],
        ),
        (
            "inner-name-root-signature",
            [
                ("authorization", good.replace("Credential=root", f"Credential={INNER[0]}")),
                ("x-mq-date-time", when),
            ],
        ),
        (
            "thousand-items",
            [
                ("authorization", "MQv2-HMAC-SHA1 " + "Credential=root, " * 1000),
                ("x-mq-date-time", when),
            ],
        ),
    ]


def test_huge_empty_duplicated_and_tampered_grpc_credentials_are_refused(unchanged: Broker) -> None:
    """64 KiB values, empty and duplicated headers and root's signature with a changed
    date-time or digit are refused on every target RPC, and change nothing."""
    for name, metadata in _grpc_edge_cases():
        for target in GRPC_TARGETS:
            try:
                answer = _assert_grpc_refused(unchanged, target, metadata)
                assert isinstance(answer, int) or "reaches-the-gate" not in name, answer
            except AssertionError as exc:
                raise AssertionError(f"case {name}: {exc}") from exc


# --- Remoting -----------------------------------------------------------------------------

REMOTING_CODES = [
    RQ.SEND_MESSAGE,
    RQ.SEND_MESSAGE_V2,
    RQ.UPDATE_AND_CREATE_TOPIC,
    RQ.PULL_MESSAGE,
    *range(RQ.AUTH_CREATE_USER, RQ.AUTH_LIST_ACL + 1),
]


def _headers(code: int) -> dict[str, str]:
    """A plausible header of ``code`` (what a real client writes), signed fields aside."""
    if code == RQ.UPDATE_AND_CREATE_TOPIC:
        return {
            "topic": "fuzz-made",
            "defaultTopic": "TBW102",
            "readQueueNums": "1",
            "writeQueueNums": "1",
            "perm": "6",
            "topicFilterType": "SINGLE_TAG",
            "topicSysFlag": "0",
            "order": "false",
        }
    if code == RQ.SEND_MESSAGE:
        return {
            "producerGroup": "p",
            "topic": TOPIC,
            "defaultTopic": "TBW102",
            "defaultTopicQueueNums": "1",
            "queueId": "0",
            "sysFlag": "0",
            "bornTimestamp": "1700000000000",
            "flag": "0",
            "reconsumeTimes": "0",
            "unitMode": "false",
            "batch": "false",
        }
    if code == RQ.SEND_MESSAGE_V2:
        return {
            "a": "p",
            "b": TOPIC,
            "c": "TBW102",
            "d": "1",
            "e": "0",
            "f": "0",
            "g": "1700000000000",
            "h": "0",
            "j": "0",
            "k": "false",
            "m": "false",
        }
    if code == RQ.PULL_MESSAGE:
        return {
            "consumerGroup": GROUP,
            "topic": TOPIC,
            "queueId": "0",
            "queueOffset": "0",
            "maxMsgNums": "1",
            "sysFlag": "0",
            "commitOffset": "0",
            "suspendTimeoutMillis": "0",
            "subscription": "*",
            "subVersion": "0",
        }
    if code in (RQ.AUTH_CREATE_USER, RQ.AUTH_UPDATE_USER, RQ.AUTH_DELETE_USER, RQ.AUTH_GET_USER):
        return {"username": ROOT[0] if code != RQ.AUTH_CREATE_USER else "mallory"}
    if code in (RQ.AUTH_CREATE_ACL, RQ.AUTH_UPDATE_ACL, RQ.AUTH_DELETE_ACL, RQ.AUTH_GET_ACL):
        return {"subject": "User:mallory"}
    return {}


def _body(code: int) -> bytes:
    if code in (RQ.AUTH_CREATE_USER, RQ.AUTH_UPDATE_USER):
        name = "mallory" if code == RQ.AUTH_CREATE_USER else ROOT[0]
        return json.dumps({"username": name, "password": "taken", "userType": "Super"}).encode()
    if code in (RQ.AUTH_CREATE_ACL, RQ.AUTH_UPDATE_ACL):
        entries = [{"resource": "*", "actions": ["All"], "decision": "Allow"}]
        policy = {"policyType": "Custom", "entries": entries}
        return json.dumps({"subject": "User:mallory", "policies": [policy]}).encode()
    if code in (RQ.SEND_MESSAGE, RQ.SEND_MESSAGE_V2):
        return b"fuzz body"
    return b""


def _remoting_refused(answer: command.RemotingCommand, what: object) -> None:
    """The gate's refusal: a response NO_PERMISSION (no credential here verifies)."""
    assert answer.is_response, what
    assert answer.code == RC.NO_PERMISSION, (what, answer.code, answer.remark)


async def _invoke(addr: str, request: command.RemotingCommand) -> command.RemotingCommand:
    client = transport.RemotingClient()
    try:
        return await client.invoke(addr, request, CALL_TIMEOUT_S)
    finally:
        await client.close()


def _root_signed(code: int, ext: dict[str, str], body: bytes) -> dict[str, str]:
    return signing.sign_remoting(
        ext, body, access_key=ROOT[0], secret_key=ROOT[1], version=codes.ROCKETMQ_VERSION_5_3_3
    )


_text = st.text(st.characters(blacklist_categories=["Cs"]), max_size=60)
_values = st.sampled_from([ROOT[0], INNER[0], "", "=", "null", "0" * 28, "AAAA"]) | _text
_ext_fields = st.dictionaries(
    st.sampled_from(["AccessKey", "Signature", "SecurityToken", "topic", "username"]) | _text,
    _values,
    max_size=8,
)


@FUZZ
@given(
    code=st.sampled_from(REMOTING_CODES),
    with_header=st.booleans(),
    fields=_ext_fields,
    version=st.sampled_from([codes.ROCKETMQ_VERSION_5_3_3, 0, 399, -1])
    | st.integers(-32768, 32767),
    body=st.none() | st.binary(max_size=64),
)
def test_malformed_remoting_credentials_are_refused_with_no_permission(
    unchanged: Broker,
    code: int,
    with_header: bool,
    fields: dict[str, str],
    version: int,
    body: bytes | None,
) -> None:
    """Any ext fields (``AccessKey``/``Signature``/``SecurityToken`` absent, empty, unknown or
    root's name with a wrong signature), on a real request header or alone, get NO_PERMISSION,
    never a hang or a closed connection, and change nothing."""
    ext = {**(_headers(code) if with_header else {}), **fields}
    request = command.request(code, ext, _body(code) if body is None else body)
    request = dataclasses.replace(request, version=version)
    _remoting_refused(asyncio.run(_invoke(unchanged.remoting, request)), (code, ext))


@FUZZ
@given(
    code=st.sampled_from(REMOTING_CODES),
    change=st.sampled_from(["value", "add", "drop", "body", "key-case", "version"]),
    pick=st.integers(0, 1000),
    extra=_text,
)
def test_tampered_root_signatures_are_refused(
    unchanged: Broker, code: int, change: str, pick: int, extra: str
) -> None:
    """A request root signed, then changed (one value, an added or dropped field, the body,
    the ``AccessKey``'s case or the version below 400 when that matters), gets NO_PERMISSION
    and changes nothing."""
    header, body = _headers(code), _body(code)
    signed = _root_signed(code, header, body)
    unsigned_keys = sorted(k for k in signed if k not in ("AccessKey", "Signature"))
    version = codes.ROCKETMQ_VERSION_5_3_3
    if change == "value" and unsigned_keys:
        key = unsigned_keys[pick % len(unsigned_keys)]
        if signed[key] + extra == signed[key] or not extra:
            extra = "!"
        signed[key] += extra
    elif change == "add" or (change in ("value", "drop") and not unsigned_keys):
        signed[f"zz{extra}"] = extra or "x"
    elif change == "drop":
        del signed[unsigned_keys[pick % len(unsigned_keys)]]
    elif change == "body":
        body += extra.encode() or b"!"
    elif change == "key-case":
        signed["AccessKey"] = ROOT[0].upper()
    else:
        version = 0  # RocketMQ signs differently below 4.0: the same fields must still fail
        signed["zz"] = "x"
    request = dataclasses.replace(command.request(code, signed, body), version=version)
    _remoting_refused(asyncio.run(_invoke(unchanged.remoting, request)), (code, change, signed))


def _raw_binary_request(code: int, opaque: int, ext: list[tuple[bytes, bytes]]) -> bytes:
    """A ROCKETMQ-serialized request frame whose ext keys and values are raw bytes (non-UTF-8
    allowed)."""
    fixed = struct.pack(">hBhii", code, 0, codes.ROCKETMQ_VERSION_5_3_3, opaque, 0)
    entries = b"".join(
        struct.pack(">h", len(k)) + k + struct.pack(">i", len(v)) + v for k, v in ext
    )
    header = fixed + struct.pack(">i", 0) + struct.pack(">i", len(entries)) + entries
    info = (int(codes.SerializeType.ROCKETMQ) << 24) | len(header)
    return struct.pack(">ii", 4 + len(header), info) + header


def _raw_json_request(code: int, opaque: int, ext_json: bytes) -> bytes:
    """A JSON-serialized request frame with ``ext_json`` as the raw ``extFields`` text
    (duplicated keys, non-UTF-8 bytes allowed)."""
    header = (
        b'{"code":%d,"extFields":%s,"flag":0,"language":"JAVA","opaque":%d,'
        b'"serializeTypeCurrentRPC":"JSON","version":479}' % (code, ext_json, opaque)
    )
    info = (int(codes.SerializeType.JSON) << 24) | len(header)
    return struct.pack(">ii", 4 + len(header), info) + header


def _remoting_edge_frames() -> list[tuple[str, bytes]]:
    code = int(RQ.UPDATE_AND_CREATE_TOPIC)
    signed = _root_signed(code, _headers(code), b"")
    big = "S" * 65_536
    many = {f"k{i:05d}": "v" for i in range(10_000)}
    frames: list[tuple[str, bytes]] = []

    def add(name: str, ext: dict[str, str], serialize: codes.SerializeType) -> None:
        request = command.request(code, ext, b"")
        frames.append((f"{name}/{serialize.name}", command.encode(request, serialize)))

    for serialize in (codes.SerializeType.JSON, codes.SerializeType.ROCKETMQ):
        add("64-KiB-AccessKey", {**_headers(code), "AccessKey": big, "Signature": "x"}, serialize)
        add("64-KiB-Signature", {**signed, "Signature": big}, serialize)
        add("64-KiB-SecurityToken", {**signed, "SecurityToken": big}, serialize)
        add(
            "10k-ext-fields",
            {**many, **_headers(code), "AccessKey": ROOT[0], "Signature": signed["Signature"]},
            serialize,
        )
        add("10k-ext-fields-signed-without-them", {**signed, **many}, serialize)
        add("empty-credentials", {**_headers(code), "AccessKey": "", "Signature": ""}, serialize)
        add("empty-key", {**signed, "": "x"}, serialize)
    non_utf8 = [(b"AccessKey", b"ro\xffot"), (b"Signature", signed["Signature"].encode())]
    frames.append(("non-utf8-AccessKey/ROCKETMQ", _raw_binary_request(code, 7, non_utf8)))
    frames.append(
        (
            "non-utf8-key/ROCKETMQ",
            _raw_binary_request(code, 8, [(b"Access\xc3Key", b"root"), (b"Signature", b"00")]),
        )
    )
    dup = (
        b'{"AccessKey":"nobody","AccessKey":"root","topic":"fuzz-made","Signature":"%s"}'
        % signed["Signature"].encode()
    )
    frames.append(("duplicated-AccessKey/JSON", _raw_json_request(code, 9, dup)))
    frames.append(
        (
            "non-utf8-value/JSON",
            _raw_json_request(code, 10, b'{"AccessKey":"ro\xffot","Signature":"00"}'),
        )
    )
    return frames


async def _answers_on_one_connection(addr: str, frames: list[tuple[str, bytes]]) -> list[Any]:
    """Write each frame on its own raw connection; what came back (a command, or "closed")."""
    host, _, port = addr.rpartition(":")
    found: list[Any] = []
    for name, frame in frames:
        reader, writer = await asyncio.open_connection(host, int(port), limit=64 * 1024 * 1024)
        try:
            writer.write(frame)
            await writer.drain()
            try:
                found.append((name, await remoting_testing.read_command(reader, CALL_TIMEOUT_S)))
            except asyncio.IncompleteReadError:
                found.append((name, "closed"))
        finally:
            writer.close()
            await writer.wait_closed()
    return found


def test_huge_non_utf8_and_duplicated_remoting_credentials_are_refused(unchanged: Broker) -> None:
    """64 KiB credential values, 10 000 ext fields, empty keys, duplicated JSON keys and
    non-UTF-8 bytes in ext fields (both header encodings) are each answered NO_PERMISSION on
    their connection, and change nothing."""
    answers = asyncio.run(_answers_on_one_connection(unchanged.remoting, _remoting_edge_frames()))
    closed = [name for name, answer in answers if answer == "closed"]
    assert not closed, f"connections closed without an answer: {closed}"
    for name, answer in answers:
        _remoting_refused(answer, name)


def test_the_broker_still_serves_a_signed_request(broker: Broker) -> None:
    """After the fuzz, a send signed as root is stored (the max offset grows), the process
    lives and its log holds no traceback."""
    before = ha_testing.stats(broker.grpc, user=ROOT).commit_log_max_offset
    assert ha_testing.send(broker.grpc, TOPIC, b"SIGNED01", user=ROOT) == errors.Code.OK
    assert ha_testing.stats(broker.grpc, user=ROOT).commit_log_max_offset > before
    assert "Traceback" not in (broker.tmp / "broker.log").read_text(errors="replace")
