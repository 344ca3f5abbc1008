"""The gates' caches (verified signatures, authorization decisions) never let through a request
that the uncached path refuses: a changed secret, a deleted or disabled user, a changed ACL, a
signature replayed over another date-time or content, another source IP are refused by the very
next request; a Hypothesis property checks cached and uncached gates agree over random runs of
requests and user/ACL changes. Both gates (gRPC ``GrpcAuthGate``, Remoting ``RemotingGate``) run
without sockets over one ``AuthMetadataStore`` (its file writes stubbed out for speed where
marked)."""

from __future__ import annotations

import itertools
import pathlib
from collections.abc import Iterable
from typing import Any, NoReturn, cast

import grpc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ariane.broker.grpc import auth_gate
from ariane.common import errors
from ariane.grpcwire import pb
from ariane.remoting import codes, command, security_gate, transport
from ariane.security import authorization, metadata_store, model, remoting_requests, signing
from ariane.security import errors as security_errors
from ariane.security import settings as auth_settings

CACHED = auth_settings.AuthSettings(authentication_enabled=True, authorization_enabled=True)
UNCACHED = auth_settings.AuthSettings(
    authentication_enabled=True, authorization_enabled=True, identity_cache_entries_max=0
)
SEND = "apache.rocketmq.v2.MessagingService/SendMessage"
RECEIVE = "apache.rocketmq.v2.MessagingService/ReceiveMessage"
DATES = ("20250507T101500Z", "20250507T101501Z")
IPS = ("10.0.0.7", "10.0.0.8", "192.168.1.9")
TOPICS = ("orders", "orders-eu", "audit")
USERS = ("alice", "bob", "root")


class Context:
    """A ``guard.CallContext`` with the given headers and peer."""

    def __init__(self, headers: Iterable[tuple[str, str]], peer: str) -> None:
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


class FakeConnection:
    """What ``RemotingGate`` reads of a ``transport.Connection``."""

    def __init__(self, remote_address: str) -> None:
        self.remote_address = remote_address
        self.attributes: dict[str, object] = {}

    def add_close_callback(self, callback: Any) -> None:
        pass


def grpc_context(
    user: str, secret: str, *, ip: str = IPS[0], date: str = DATES[0], signed_date: str = ""
) -> Context:
    """A call signed by ``user`` with ``secret`` over ``signed_date`` (default ``date``),
    sending ``date`` as its ``x-mq-date-time``, from ``ip``."""
    headers = dict(
        signing.sign_grpc(access_key=user, secret_key=secret, date_time=signed_date or date)
    )
    headers[signing.DATE_TIME_HEADER] = date
    return Context(tuple(headers.items()), f"ipv4:{ip}:5000")


def send_request(topic: str) -> Any:
    message = pb.v2.Message(topic=pb.v2.Resource(name=topic), body=b"x")
    return pb.v2_service.SendMessageRequest(messages=[message])


def receive_request(topic: str) -> Any:
    return pb.v2_service.ReceiveMessageRequest(
        group=pb.v2.Resource(name="billing"),
        message_queue=pb.v2.MessageQueue(topic=pb.v2.Resource(name=topic)),
    )


def remoting_send(user: str, secret: str, topic: str, *, born_ms: int = 0) -> Any:
    """A classic SEND_MESSAGE_V2 signed as ``AclClientRPCHook`` signs it."""
    ext = {"a": "producer-group", "b": topic, "c": "TBW102", "d": "4", "e": "0", "g": str(born_ms)}
    fields = signing.sign_remoting(ext, b"body", access_key=user, secret_key=secret, version=0)
    return command.request(codes.RequestCode.SEND_MESSAGE_V2, fields, b"body")


def acl(user: str, *entries: dict[str, Any]) -> model.Acl:
    return model.acl_from_info(
        {"subject": f"User:{user}", "policies": [{"entries": list(entries)}]}
    )


def allow(resource: str, *actions: str, ips: tuple[str, ...] = ()) -> dict[str, Any]:
    entry: dict[str, Any] = {"resource": resource, "actions": list(actions), "decision": "Allow"}
    if ips:
        entry["sourceIps"] = list(ips)
    return entry


def make_store(directory: pathlib.Path, *, fast: bool = False) -> metadata_store.AuthMetadataStore:
    """root (Super), alice (Pub/Sub on orders and Sub on billing from 10.0.0.0/8 only), bob."""
    store = (
        metadata_store.AuthMetadataStore(directory, writer=lambda path, data: None)
        if fast
        else metadata_store.AuthMetadataStore.open(directory)
    )
    store.create_user(model.User(model.Username("root"), "root-pw", model.UserType.SUPER))
    store.create_user(model.User(model.Username("alice"), "alice-pw"))
    store.create_user(model.User(model.Username("bob"), "bob-pw"))
    store.put_acl(
        acl(
            "alice",
            allow("Topic:orders", "Pub", "Sub", ips=("10.0.0.0/8",)),
            allow("Group:billing", "Sub"),
        )
    )
    return store


def verdict(result: errors.ArianeError | None) -> str:
    if result is None:
        return "ok"
    return f"{type(result).__name__}: {result.message}"


@pytest.fixture
def store(tmp_path: pathlib.Path) -> metadata_store.AuthMetadataStore:
    return make_store(tmp_path)


def test_grpc_cached_allow_is_refused_right_after_each_change(
    store: metadata_store.AuthMetadataStore,
) -> None:
    """After alice's send is allowed (and cached), each change refuses her very next identical
    call: a new secret, then a disabled user, a narrowed ACL, a deleted user."""
    gate = auth_gate.GrpcAuthGate(store, CACHED, cluster="c")
    request = send_request("orders")

    def again() -> str:
        for _ in range(2):  # the second one would come from the cache
            result = verdict(gate.check(SEND, request, grpc_context("alice", "alice-pw")))
        return result

    assert again() == "ok"
    store.update_user("alice", password="new-pw")
    assert again().startswith("UnauthorizedError: User:alice check signature failed")
    store.update_user("alice", password="alice-pw")
    assert again() == "ok"
    store.update_user("alice", user_status=model.UserStatus.DISABLE)
    assert again().startswith("UnauthorizedError: User:alice is disabled")
    store.update_user("alice", user_status=model.UserStatus.ENABLE)
    assert again() == "ok"
    store.put_acl(acl("alice", {"resource": "Topic:orders", "actions": ["Pub"],
                                "decision": "Deny"}))  # fmt: skip
    assert again().startswith("ForbiddenError: User:alice has no permission")
    store.put_acl(acl("alice", allow("Topic:orders", "Pub")))
    assert again() == "ok"
    store.delete_user("alice")
    assert again().startswith("UnauthorizedError: User:alice is not found")


def test_grpc_replayed_signature_and_other_source_ip_are_refused(
    store: metadata_store.AuthMetadataStore,
) -> None:
    """A cached signature replayed with another ``x-mq-date-time`` (the client's clock moved,
    the old signature kept) is refused, and an allow cached for 10.0.0.7 does not carry over to
    192.168.1.9, which alice's ACL leaves out."""
    gate = auth_gate.GrpcAuthGate(store, CACHED, cluster="c")
    request = send_request("orders")
    assert gate.check(SEND, request, grpc_context("alice", "alice-pw")) is None
    replay = grpc_context("alice", "alice-pw", date=DATES[1], signed_date=DATES[0])
    assert verdict(gate.check(SEND, request, replay)).startswith(
        "UnauthorizedError: User:alice check signature failed"
    )
    assert gate.check(SEND, request, grpc_context("alice", "alice-pw", date=DATES[1])) is None
    elsewhere = grpc_context("alice", "alice-pw", ip="192.168.1.9")
    assert verdict(gate.check(SEND, request, elsewhere)).startswith(
        "ForbiddenError: User:alice has no permission to access Topic:orders from 192.168.1.9"
    )


def remoting_gate(
    store: metadata_store.AuthMetadataStore, auth: auth_settings.AuthSettings = CACHED
) -> security_gate.RemotingGate:
    return security_gate.RemotingGate(store, auth, cluster="c")


def connection(gate: security_gate.RemotingGate, ip: str = IPS[0]) -> transport.Connection:
    fake = cast(transport.Connection, FakeConnection(f"{ip}:40000"))
    gate.connection_opened(fake)
    return fake


def test_remoting_repeated_request_is_decided_once(
    store: metadata_store.AuthMetadataStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A classic producer's sends on one connection are authorized once per (code, topic,
    user, peer): the ACL walk does not run again for the next message on the same topic, and
    runs again for another topic and after an ACL change."""
    calls: list[object] = []
    real = authorization.authorize

    def counted(*args: Any) -> authorization.AuthzResult:
        calls.append(args)
        return real(*args)

    monkeypatch.setattr(authorization, "authorize", counted)
    gate = remoting_gate(store)
    conn = connection(gate)
    for born_ms in range(5):
        assert gate.check(conn, remoting_send("alice", "alice-pw", "orders", born_ms=born_ms))
    assert len(calls) == 1
    assert not gate.check(conn, remoting_send("alice", "alice-pw", "audit")).allowed
    assert len(calls) == 2
    store.put_acl(acl("alice", allow("Topic:audit", "Pub")))
    assert gate.check(conn, remoting_send("alice", "alice-pw", "audit")).allowed
    assert len(calls) == 3


def test_remoting_cached_allow_is_refused_right_after_each_change(
    store: metadata_store.AuthMetadataStore,
) -> None:
    """Over Remoting too, after alice's sends are allowed each change refuses the very next
    one: a new secret, a narrowed ACL, another source IP, a deleted user; a signature over other
    content (a changed field, the old signature kept) is refused."""
    gate = remoting_gate(store)
    conn = connection(gate)

    def again(ip_conn: transport.Connection = conn) -> tuple[bool, str]:
        for _ in range(2):
            decision = gate.check(ip_conn, remoting_send("alice", "alice-pw", "orders"))
        return decision.allowed, decision.remark

    assert again() == (True, "")
    forged = remoting_send("alice", "alice-pw", "orders")
    forged.ext_fields["b"] = "orders-eu"
    assert gate.check(conn, forged).remark == "User:alice check signature failed."
    store.update_user("alice", password="new-pw")
    assert again() == (False, "User:alice check signature failed.")
    store.update_user("alice", password="alice-pw")
    assert again() == (True, "")
    store.put_acl(acl("alice", allow("Topic:orders", "Sub")))
    assert again()[1].startswith("User:alice has no permission to access Topic:orders")
    store.put_acl(acl("alice", allow("Topic:orders", "Pub", ips=("10.0.0.0/8",))))
    assert again() == (True, "")
    elsewhere = connection(gate, "192.168.1.9")
    assert again(elsewhere)[1].startswith(
        "User:alice has no permission to access Topic:orders from 192.168.1.9"
    )
    store.delete_user("alice")
    assert again() == (False, "User:alice is not found.")


_field_names = st.sampled_from(("a", "b", "c", "topic", "group", "consumerGroup", "groupName",
                                 "queueId", "x"))  # fmt: skip
_field_values = st.sampled_from(
    ("", " ", "orders", "%RETRY%billing", "%RETRY%", "billing", "t" * 300)
)


def _permissions_or_error(code: int, ext: dict[str, str]) -> object:
    try:
        return remoting_requests.remoting_permissions(code, ext, cluster="c")
    except security_errors.SecurityError as exc:
        return type(exc), exc.message


@settings(max_examples=200, deadline=None)
@given(ext=st.dictionaries(_field_names, _field_values, min_size=2, max_size=9))
def test_remoting_decision_key_holds_every_field_the_rule_reads(ext: dict[str, str]) -> None:
    """What a Remoting code needs depends on no ext field outside ``fields_read(code)`` (the
    decision cache's key): keeping only those fields gives the same permissions, or the same
    refusal, for every code (and an unknown one)."""
    for code in [*remoting_requests.REMOTING_RULES, 99_999]:
        kept = {k: v for k, v in ext.items() if k in remoting_requests.fields_read(code)}
        assert _permissions_or_error(code, ext) == _permissions_or_error(code, kept), code


# The property: random requests interleaved with random changes, cached vs uncached gates.

_call = st.tuples(st.sampled_from(("grpc", "remoting")), st.sampled_from(USERS))
SIGNED_DATES = ((DATES[0], DATES[0]), (DATES[1], DATES[1]), (DATES[1], DATES[0]))
"""(``x-mq-date-time`` sent, date-time signed): the last is a replay of an old signature."""
_entry = st.fixed_dictionaries(
    {
        "resource": st.sampled_from(
            ("Topic:orders", "Topic:orders-*", "Topic:*", "Group:billing", "Group:*", "*")
        ),
        "actions": st.lists(
            st.sampled_from(("Pub", "Sub", "All")), min_size=1, max_size=2, unique=True
        ),
        "decision": st.sampled_from(("Allow", "Deny")),
        "sourceIps": st.lists(
            st.sampled_from(("10.0.0.0/8", "192.168.1.9", "10.0.0.8")), max_size=2, unique=True
        ),
    }
)
_target = st.sampled_from((*USERS, "last", "last"))
"""Whose user or ACL a change touches ("last": the user of the last requests, twice as often)."""
_change = st.one_of(
    st.tuples(st.just("password"), _target),
    st.tuples(st.just("status"), _target, st.sampled_from(list(model.UserStatus))),
    st.tuples(st.just("type"), _target, st.sampled_from(list(model.UserType))),
    st.tuples(st.just("delete"), _target),
    st.tuples(
        st.just("acl"),
        _target,
        st.lists(_entry, min_size=1, max_size=3, unique_by=lambda e: str(e["resource"])),
    ),
    st.tuples(st.just("drop-acl"), _target),
)


class _World:
    """One store, a cached and an uncached gate of each protocol over it, and the secrets."""

    def __init__(self, directory: pathlib.Path) -> None:
        self.store = make_store(directory, fast=True)
        self.secrets = {name: [f"{name}-pw"] for name in USERS}
        self.grpc = [auth_gate.GrpcAuthGate(self.store, a, cluster="c") for a in (CACHED, UNCACHED)]
        self.remoting = [remoting_gate(self.store, a) for a in (CACHED, UNCACHED)]
        self.connections = [{ip: connection(g, ip) for ip in IPS} for g in self.remoting]

    def secret(self, user: str, which: str) -> str:
        history = self.secrets[user]
        return {"current": history[-1], "previous": history[-2:][0], "wrong": "guess"}[which]

    def decide(self, call: tuple[Any, ...]) -> list[tuple[str, str]]:
        """(cached, uncached) answers to ``call`` (protocol, user) made with each secret (the
        current one, the one before, a wrong one), from every source IP, on every topic, with
        varied signed content (gRPC: both RPCs, two date-times and a replay; Remoting: three
        born timestamps) in turn, so that anything cached for one request meets every request
        that differs from it in one of these."""
        protocol, user = call
        found = []
        for which, ip, topic in itertools.product(("current", "previous", "wrong"), IPS, TOPICS):
            secret = self.secret(user, which)
            if protocol == "remoting":
                for born_ms in range(3):
                    request = remoting_send(user, secret, topic, born_ms=born_ms)
                    first, second = (
                        gate.check(connections[ip], request)
                        for gate, connections in zip(self.remoting, self.connections, strict=True)
                    )
                    found.append((f"{first.allowed} {first.remark}",
                                  f"{second.allowed} {second.remark}"))  # fmt: skip
                continue
            calls = ((SEND, send_request(topic)), (RECEIVE, receive_request(topic)))
            for date, signed_date in SIGNED_DATES:
                context = grpc_context(user, secret, ip=ip, date=date, signed_date=signed_date)
                for rpc_name, request in calls:
                    cached, uncached = [
                        verdict(g.check(rpc_name, request, context)) for g in self.grpc
                    ]
                    found.append((cached, uncached))
        return found

    def change(self, change: tuple[Any, ...]) -> None:
        kind, user = change[0], change[1]
        if self.store.find_user(user) is None:
            self.store.create_user(model.User(model.Username(user), self.secrets[user][-1]))
        if kind == "password":
            self.secrets[user].append(f"{user}-pw{len(self.secrets[user])}")
            self.store.update_user(user, password=self.secrets[user][-1])
        elif kind == "status":
            self.store.update_user(user, user_status=change[2])
        elif kind == "type":
            self.store.update_user(user, user_type=change[2])
        elif kind == "delete":
            self.store.delete_user(user)
        elif kind == "acl":
            self.store.put_acl(acl(user, *change[2]))
        elif self.store.find_acl(model.Subject(model.Username(user))) is not None:
            self.store.delete_acl(model.Subject(model.Username(user)))


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(steps=st.lists(st.one_of(_call, _change), min_size=2, max_size=30))
def test_cached_and_uncached_gates_always_agree(
    tmp_path: pathlib.Path, steps: list[tuple[Any, ...]]
) -> None:
    """Over any run of gRPC and Remoting requests (right, stale or wrong secrets; each made
    from three source IPs on three topics with varied signed content, replayed date-times
    included) interleaved with user and ACL changes (each followed by the last requests again),
    the gates with their caches answer exactly what gates without caches answer, message
    included."""
    world = _World(tmp_path)
    last_call: tuple[Any, ...] | None = None
    for step in steps:
        if step[0] in ("grpc", "remoting"):
            last_call = step
        else:  # the change, then the last requests again: right after the change
            user = last_call[1] if step[1] == "last" and last_call is not None else step[1]
            world.change((step[0], USERS[0] if user == "last" else user, *step[2:]))
        if last_call is not None:
            for cached, uncached in world.decide(last_call):
                assert cached == uncached, (step, last_call)
