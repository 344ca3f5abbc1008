"""The gRPC authentication + authorization gate, without sockets: ``GrpcAuthGate`` in the status
guard of ``grpcwire.guard`` (the path both the broker's own server and the front-end relay take),
over a real ``AuthMetadataStore`` in a temp dir."""

from __future__ import annotations

import asyncio
import logging
import pathlib
from collections.abc import AsyncIterator, Iterable
from typing import Any, NoReturn

import grpc
import pytest

from ariane.broker import settings as broker_settings
from ariane.broker.grpc import auth_admin, auth_gate
from ariane.common import errors
from ariane.grpcwire import codes, guard, pb
from ariane.security import metadata_store, model, signing
from ariane.security import settings as auth_settings

AUTH_ON = auth_settings.AuthSettings(authentication_enabled=True, authorization_enabled=True)
DATE = "20250507T101500Z"


class Context:
    """A ``guard.CallContext`` with the given headers and peer."""

    def __init__(self, headers: Iterable[tuple[str, str]], peer: str = "ipv4:10.0.0.7:5000"):
        self._headers = (("x-mq-client-id", "c-1"), *headers)
        self._peer = peer

    def invocation_metadata(self) -> Iterable[tuple[str, str | bytes]]:
        return self._headers

    def peer(self) -> str:
        return self._peer

    def time_remaining(self) -> float | None:
        return None

    async def abort(self, code: grpc.StatusCode, details: str = "") -> NoReturn:
        raise AssertionError(f"aborted {code}: {details}")


def signed(user: str, secret: str, date_time: str = DATE) -> Context:
    return Context(signing.sign_grpc(access_key=user, secret_key=secret, date_time=date_time))


def make_store(tmp_path: pathlib.Path) -> metadata_store.AuthMetadataStore:
    store = metadata_store.AuthMetadataStore.open(tmp_path)
    store.create_user(model.User(model.Username("root"), "root-pw", model.UserType.SUPER))
    store.create_user(model.User(model.Username("alice"), "alice-pw"))
    store.create_user(model.User(model.Username("carol"), "carol-pw"))
    store.put_acl(
        model.acl_from_info(
            {
                "subject": "User:alice",
                "policies": [
                    {
                        "entries": [
                            {"resource": "Topic:orders", "actions": ["Pub", "Sub"],
                             "decision": "Allow"},
                            {"resource": "Group:billing", "actions": ["Sub"], "decision": "Allow"},
                        ]
                    }
                ],
            }
        )
    )  # fmt: skip
    return store


class Recorder:
    """A MessagingService that records which RPCs ran."""

    def __init__(self) -> None:
        self.ran: list[str] = []

    async def send_message(self, request: Any, context: Any) -> Any:
        self.ran.append("send")
        return pb.v2_service.SendMessageResponse(status=codes.ok())

    async def query_route(self, request: Any, context: Any) -> Any:
        self.ran.append("route")
        return pb.v2_service.QueryRouteResponse(status=codes.ok())

    async def heartbeat(self, request: Any, context: Any) -> Any:
        self.ran.append("heartbeat")
        return pb.v2_service.HeartbeatResponse(status=codes.ok())

    async def telemetry(self, requests: AsyncIterator[Any], context: Any) -> AsyncIterator[Any]:
        async for command in requests:
            self.ran.append("telemetry")
            yield pb.v2_service.TelemetryCommand(status=codes.ok(), settings=command.settings)


def guarded(gate: auth_gate.GrpcAuthGate, impl: object) -> dict[str, guard.GuardedMethod]:
    methods = guard.guarded_methods(pb.MESSAGING_SERVICE, impl, gate=gate)
    return {m.path.rpartition("/")[2]: m for m in methods}


def send_request(topic: str) -> Any:
    message = pb.v2.Message(topic=pb.v2.Resource(name=topic), body=b"x")
    return pb.v2_service.SendMessageRequest(messages=[message])


def test_refusals_are_statuses_and_the_handler_never_runs(tmp_path: pathlib.Path) -> None:
    """Missing credentials, an unknown user and a bad signature answer UNAUTHORIZED, a denied
    resource FORBIDDEN naming it; only an allowed call reaches the implementation."""
    gate = auth_gate.GrpcAuthGate(make_store(tmp_path), AUTH_ON, cluster="c")
    impl = Recorder()
    send = guarded(gate, impl)["SendMessage"]

    def answer(context: Context, topic: str = "orders") -> Any:
        return asyncio.run(send.call(send_request(topic), context))

    for context in (Context(()), signed("eve", "x"), signed("alice", "wrong")):
        assert answer(context).status.code == errors.Code.UNAUTHORIZED
    denied = answer(signed("alice", "alice-pw"), "payments")
    assert denied.status.code == errors.Code.FORBIDDEN
    assert "Topic:payments" in denied.status.message and "10.0.0.7" in denied.status.message
    assert answer(signed("carol", "carol-pw")).status.code == errors.Code.FORBIDDEN  # no ACL
    assert impl.ran == []
    assert answer(signed("alice", "alice-pw")).status.code == errors.Code.OK
    assert answer(signed("root", "root-pw"), "anything").status.code == errors.Code.OK
    assert impl.ran == ["send", "send"]
    assert gate.audit.authentications == {"missing": 1, "unknown_user": 1, "bad_signature": 1,
                                          "ok": 4}  # fmt: skip
    assert gate.audit.authorizations == {"no_match": 2, "allowed": 2}


def test_producer_heartbeat_needs_no_group_and_consumer_heartbeat_does(
    tmp_path: pathlib.Path,
) -> None:
    """A producer's heartbeat passes with any authenticated user; a consumer's needs Sub on
    its group (RocketMQ's Heartbeat rule)."""
    gate = auth_gate.GrpcAuthGate(make_store(tmp_path), AUTH_ON, cluster="c")
    heartbeat = guarded(gate, Recorder())["Heartbeat"]
    producer = pb.v2_service.HeartbeatRequest(client_type=pb.v2.ClientType.PRODUCER)
    consumer = pb.v2_service.HeartbeatRequest(
        client_type=pb.v2.ClientType.SIMPLE_CONSUMER, group=pb.v2.Resource(name="other")
    )
    carol = signed("carol", "carol-pw")
    assert asyncio.run(heartbeat.call(producer, carol)).status.code == errors.Code.OK
    assert asyncio.run(heartbeat.call(consumer, carol)).status.code == errors.Code.FORBIDDEN


def test_telemetry_stream_is_refused_with_a_status(tmp_path: pathlib.Path) -> None:
    """A Telemetry stream is authenticated when it opens and each settings command authorized:
    a subscription to a group the user may not read ends the stream with FORBIDDEN."""
    gate = auth_gate.GrpcAuthGate(make_store(tmp_path), AUTH_ON, cluster="c")
    telemetry = guarded(gate, Recorder())["Telemetry"]

    def settings(group: str) -> Any:
        subscription = pb.v2.Subscription(
            group=pb.v2.Resource(name=group),
            subscriptions=[pb.v2.SubscriptionEntry(topic=pb.v2.Resource(name="orders"))],
        )
        return pb.v2_service.TelemetryCommand(settings=pb.v2.Settings(subscription=subscription))

    async def run(context: Context, group: str) -> list[Any]:
        async def commands() -> AsyncIterator[Any]:
            yield settings(group)

        return [r async for r in telemetry.call(commands(), context)]

    alice = signed("alice", "alice-pw")
    assert [r.status.code for r in asyncio.run(run(alice, "billing"))] == [errors.Code.OK]
    refused = asyncio.run(run(alice, "audit"))
    assert [r.status.code for r in refused] == [errors.Code.FORBIDDEN]
    assert "Group:audit" in refused[0].status.message
    unsigned = asyncio.run(run(Context(()), "billing"))
    assert [r.status.code for r in unsigned] == [errors.Code.UNAUTHORIZED]


def test_identity_cache_never_serves_a_wrong_signature(tmp_path: pathlib.Path) -> None:
    """After a good signature on a connection, a wrong one from the same client and peer is
    still refused; a password change (store generation) refuses the old signature at once."""
    store = make_store(tmp_path)
    gate = auth_gate.GrpcAuthGate(store, AUTH_ON, cluster="c")
    request = send_request("orders")
    assert gate.check("apache.rocketmq.v2.MessagingService/SendMessage", request,
                      signed("alice", "alice-pw")) is None  # fmt: skip
    wrong = gate.check(
        "apache.rocketmq.v2.MessagingService/SendMessage", request, signed("alice", "guess")
    )
    assert isinstance(wrong, errors.UnauthorizedError)
    store.update_user("alice", password="new-pw")
    stale = gate.check(
        "apache.rocketmq.v2.MessagingService/SendMessage", request, signed("alice", "alice-pw")
    )
    assert isinstance(stale, errors.UnauthorizedError)


def test_refusals_are_audited_rate_limited(
    tmp_path: pathlib.Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Each refusal is counted; the audit line names user, address, resource and action, never
    the secret, and repeats of one refusal are written once."""
    gate = auth_gate.GrpcAuthGate(make_store(tmp_path), AUTH_ON, cluster="c")
    with caplog.at_level(logging.INFO, logger="ariane.security.audit"):
        for _ in range(5):
            gate.check("apache.rocketmq.v2.MessagingService/SendMessage", send_request("pay"),
                       signed("alice", "alice-pw"))  # fmt: skip
    lines = [r.getMessage() for r in caplog.records if "[AUTHORIZATION]" in r.getMessage()]
    assert len(lines) == 1 and "User:alice" in lines[0] and "Topic:pay" in lines[0]
    assert "Pub" in lines[0] and "alice-pw" not in lines[0]
    assert gate.audit.authorizations["no_match"] == 5


def test_only_a_super_caller_creates_a_super_user(tmp_path: pathlib.Path) -> None:
    """The admin CreateUser RPC refuses a Super user asked by a Normal caller (even one the
    ACLs allow Cluster:Update) and accepts it from a Super caller."""
    settings = broker_settings.from_mapping(
        {"store_dir": str(tmp_path), "auth": {"authentication_enabled": True}}
    )
    stores = auth_gate.AuthStores(settings)
    gate = stores.gate(cluster="c")
    assert gate is not None
    store = stores.get()
    store.create_user(model.User(model.Username("ops"), "ops-pw"))
    store.create_user(model.User(model.Username("root"), "root-pw", model.UserType.SUPER))

    class Admin(auth_admin.AuthAdminRpcs):
        _auth_stores = stores

    wanted = pb.admin.CreateUserRequest(
        user=pb.admin.User(username="boss", password="b-pw", user_type="Super")
    )
    rpc_name = "ariane.admin.v1.Admin/CreateUser"

    async def create(context: Context) -> Any:
        assert gate.check(rpc_name, wanted, context) is None  # authorization is off here
        return await Admin().create_user(wanted, context)

    with pytest.raises(errors.ForbiddenError, match="super user"):
        asyncio.run(create(signed("ops", "ops-pw")))
    answer = asyncio.run(create(signed("root", "root-pw")))
    assert answer.user.user_type == "Super" and not answer.user.password


class V2AdminRecorder:
    """An ``apache.rocketmq.v2.Admin`` implementation that records which RPCs ran."""

    def __init__(self) -> None:
        self.ran: list[str] = []

    async def describe_group_accumulation(self, request: Any, context: Any) -> Any:
        self.ran.append("accumulation")
        return pb.v2_admin.DescribeGroupAccumulationResponse(status=codes.ok())

    async def change_log_level(self, request: Any, context: Any) -> Any:
        self.ran.append("log")
        return pb.v2_admin.ChangeLogLevelResponse(remark="changed")


def test_v2_admin_rpcs_need_their_actions_or_a_super_user(tmp_path: pathlib.Path) -> None:
    """The upstream v2 Admin RPCs pass the gate like the other admin RPCs: an accumulation
    query needs Get on the group and on every topic of its repeated ``topics`` (alice, with
    Sub only, is FORBIDDEN), ChangeLogLevel needs Cluster:Update; the Super user passes both."""
    store = make_store(tmp_path)
    store.put_acl(
        model.acl_from_info(
            {
                "subject": "User:carol",
                "policies": [
                    {
                        "entries": [
                            {"resource": "Group:billing", "actions": ["Get"], "decision": "Allow"},
                            {"resource": "Topic:orders", "actions": ["Get"], "decision": "Allow"},
                        ]
                    }
                ],
            }
        )
    )  # fmt: skip
    gate = auth_gate.GrpcAuthGate(store, AUTH_ON, cluster="c")
    impl = V2AdminRecorder()
    methods = {
        m.path.rpartition("/")[2]: m
        for m in guard.guarded_methods(pb.V2_ADMIN_SERVICE, impl, gate=gate)
    }

    def accumulation(context: Context, *topics: str) -> int:
        request = pb.v2_admin.DescribeGroupAccumulationRequest(
            group=pb.v2.Resource(name="billing"), topics=[pb.v2.Resource(name=t) for t in topics]
        )
        answer = asyncio.run(methods["DescribeGroupAccumulation"].call(request, context))
        return int(answer.status.code)

    alice, carol, root = (
        signed("alice", "alice-pw"),
        signed("carol", "carol-pw"),
        signed("root", "root-pw"),
    )
    assert accumulation(alice, "orders") == errors.Code.FORBIDDEN
    assert accumulation(carol, "orders", "payments") == errors.Code.FORBIDDEN
    assert impl.ran == []
    assert accumulation(carol, "orders") == errors.Code.OK
    assert accumulation(root, "orders", "payments") == errors.Code.OK
    log = pb.v2_admin.ChangeLogLevelRequest(level=pb.v2_admin.ChangeLogLevelRequest.DEBUG)
    # no status field in the response: the refusal is raised (grpc answers a gRPC error)
    with pytest.raises(errors.UnsupportedError, match="Cluster:c"):
        asyncio.run(methods["ChangeLogLevel"].call(log, carol))
    assert asyncio.run(methods["ChangeLogLevel"].call(log, root)).remark == "changed"
    assert impl.ran == ["accumulation", "accumulation", "log"]
