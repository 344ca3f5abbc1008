"""Authentication, authorization and the ACL admin codes 3001-3010 on the broker's Remoting port.

Each test runs a ``RemotingService`` over an in-process broker (real store, manual clock, real
sockets on 127.0.0.1) with ``[auth]`` switched on and the bootstrap Super user ``root``, and
sends frames signed as ``AclClientRPCHook`` signs them (``security.signing.sign_remoting``), or
unsigned, or broken. What a refused request would have changed is read back from the broker's
tables and the metadata store.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import pathlib
import random
from collections.abc import Awaitable, Callable

import pytest

import broker_harness
from ariane.broker import settings as broker_settings
from ariane.broker.grpc import auth_gate
from ariane.broker.remoting import service as remoting_service
from ariane.common import errors as common_errors
from ariane.remoting import codes, command, fastjson, security_gate, transport
from ariane.security import audit, metadata_store, model, signing
from ariane.security import settings as auth_settings

RQ = codes.RequestCode
RC = codes.ResponseCode
TOPIC = "auth-topic"
ROOT, ROOT_SECRET = "root", "root-secret"
TIMEOUT_S = 10.0
ON = auth_settings.AuthSettings(
    authentication_enabled=True,
    authorization_enabled=True,
    init_authentication_user=auth_settings.InitUser(ROOT, ROOT_SECRET),
)


@dataclasses.dataclass
class Ctx:
    """A running broker with auth on: its harness, service and one client."""

    h: broker_harness.BrokerHarness
    service: remoting_service.RemotingService
    client: transport.RemotingClient
    addr: str

    @property
    def store(self) -> metadata_store.AuthMetadataStore:
        return self.h.runtime.auth_metadata

    async def call(
        self,
        code: int,
        ext: dict[str, str] | None = None,
        body: bytes = b"",
        *,
        user: tuple[str, str] | None = (ROOT, ROOT_SECRET),
        client: transport.RemotingClient | None = None,
    ) -> command.RemotingCommand:
        """Send ``code`` signed as ``user`` (``None``: unsigned) and return the answer."""
        fields = dict(ext or {})
        if user is not None:
            fields = sign(fields, body, *user)
        request = command.request(code, fields, body)
        return await (client or self.client).invoke(self.addr, request, TIMEOUT_S)

    def topic_exists(self, name: str) -> bool:
        try:
            self.h.processors.admin.existing_topic(name)
        except common_errors.TopicNotFoundError:
            return False
        return True


def sign(ext: dict[str, str], body: bytes, access_key: str, secret_key: str) -> dict[str, str]:
    return signing.sign_remoting(
        ext,
        body,
        access_key=access_key,
        secret_key=secret_key,
        version=codes.ROCKETMQ_VERSION_5_3_3,
    )


def run(
    tmp_path: pathlib.Path,
    scenario: Callable[[Ctx], Awaitable[None]],
    auth: auth_settings.AuthSettings = ON,
    audit_log: audit.AuthAudit | None = None,
) -> None:
    """Run ``scenario`` against a broker with ``auth`` serving Remoting on a free port, its
    gate recording into ``audit_log`` (a new one when ``None``)."""

    async def main() -> None:
        harness = broker_harness.BrokerHarness(tmp_path)
        harness.runtime.auth_metadata.init_users(auth)
        harness.create_topic(TOPIC, queues=4)
        service = remoting_service.RemotingService(
            harness.processors,
            time=harness.clock,
            auth_store=harness.runtime.auth_metadata,
            auth=auth,
            cluster="DefaultCluster",
            audit_log=audit_log,
        )
        host, port = await service.start("127.0.0.1", 0)
        client = transport.RemotingClient()
        try:
            await scenario(Ctx(harness, service, client, f"{host}:{port}"))
        finally:
            await client.close()
            await service.close()
            harness.close()

    asyncio.run(main())


def topic_header(topic: str) -> dict[str, str]:
    """An UPDATE_AND_CREATE_TOPIC header as mqadmin updateTopic writes it."""
    return {
        "topic": topic,
        "defaultTopic": "TBW102",
        "readQueueNums": "4",
        "writeQueueNums": "4",
        "perm": "6",
        "topicFilterType": "SINGLE_TAG",
        "topicSysFlag": "0",
        "order": "false",
    }


def user_body(name: str, password: str, user_type: str = "Normal") -> bytes:
    return fastjson.dumps({"username": name, "password": password, "userType": user_type})


def acl_body(subject: str, resources: list[str], actions: list[str], decision: str) -> bytes:
    entries = [{"resource": r, "actions": actions, "decision": decision} for r in resources]
    return fastjson.dumps(
        {"subject": subject, "policies": [{"policyType": "Custom", "entries": entries}]}
    )


async def add_user(ctx: Ctx, name: str, secret: str, grants: list[tuple[str, list[str]]]) -> None:
    """Create a Normal user with one Allow entry per (resource, actions), as root."""
    answer = await ctx.call(RQ.AUTH_CREATE_USER, {"username": name}, user_body(name, secret))
    assert answer.code == RC.SUCCESS, answer.remark
    for resource, actions in grants:
        body = acl_body(f"User:{name}", [resource], actions, "Allow")
        answer = await ctx.call(RQ.AUTH_CREATE_ACL, {"subject": f"User:{name}"}, body)
        assert answer.code == RC.SUCCESS, answer.remark


def heartbeat_body(group: str, topic: str) -> bytes:
    return fastjson.dumps(
        {
            "clientID": "127.0.0.1@auth",
            "consumerDataSet": [
                {
                    "groupName": group,
                    "consumeType": "CONSUME_PASSIVELY",
                    "messageModel": "CLUSTERING",
                    "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET",
                    "subscriptionDataSet": [
                        {"topic": topic, "subString": "*", "expressionType": "TAG"},
                        {"topic": f"%RETRY%{group}", "subString": "*", "expressionType": "TAG"},
                    ],
                }
            ],
            "producerDataSet": [],
        }
    )


def test_unsigned_or_badly_signed_requests_are_refused_before_any_handler(
    tmp_path: pathlib.Path,
) -> None:
    """Without credentials, with a wrong secret or an unknown user, UPDATE_AND_CREATE_TOPIC
    answers 16 with RocketMQ's text and creates nothing; root's signature creates it."""

    async def scenario(ctx: Ctx) -> None:
        header = topic_header("hole")
        unsigned = await ctx.call(RQ.UPDATE_AND_CREATE_TOPIC, header, user=None)
        assert (unsigned.code, unsigned.remark) == (RC.NO_PERMISSION, "username cannot be null.")
        wrong = await ctx.call(RQ.UPDATE_AND_CREATE_TOPIC, header, user=(ROOT, "guess"))
        assert (wrong.code, wrong.remark) == (RC.NO_PERMISSION, "User:root check signature failed.")
        unknown = await ctx.call(RQ.UPDATE_AND_CREATE_TOPIC, header, user=("bob", "x"))
        assert (unknown.code, unknown.remark) == (RC.NO_PERMISSION, "User:bob is not found.")
        assert not ctx.topic_exists("hole")
        signed = await ctx.call(RQ.UPDATE_AND_CREATE_TOPIC, header)
        assert signed.code == RC.SUCCESS, signed.remark
        assert ctx.topic_exists("hole")
        assert ROOT_SECRET not in (wrong.remark or "")

    run(tmp_path, scenario)


def test_auth_off_ignores_credentials_and_changes_nothing(tmp_path: pathlib.Path) -> None:
    """With ``[auth]`` off (the default) unsigned and garbage-signed requests are served, and
    the ACL admin codes still work (users are prepared before auth is switched on)."""

    async def scenario(ctx: Ctx) -> None:
        assert ctx.service.gate is not None and not ctx.service.gate.enabled
        unsigned = await ctx.call(RQ.UPDATE_AND_CREATE_TOPIC, topic_header("open"), user=None)
        assert unsigned.code == RC.SUCCESS, unsigned.remark
        garbage = {**topic_header("open2"), "AccessKey": "rocketmq2", "Signature": "!!"}
        answer = await ctx.call(RQ.UPDATE_AND_CREATE_TOPIC, garbage, user=None)
        assert answer.code == RC.SUCCESS, answer.remark
        assert ctx.topic_exists("open") and ctx.topic_exists("open2")
        created = await ctx.call(
            RQ.AUTH_CREATE_USER, {"username": "su"}, user_body("su", "pw", "Super"), user=None
        )
        assert created.code == RC.SUCCESS, created.remark

    run(tmp_path, scenario, auth_settings.AuthSettings())


def test_authorization_names_resource_action_and_address(tmp_path: pathlib.Path) -> None:
    """A Normal user with Pub on the topic sends, but is refused a topic creation and a
    heartbeat of a group it has no Sub on, each with the resource in the remark; with Sub on
    the group and topic the heartbeat registers it."""

    async def scenario(ctx: Ctx) -> None:
        alice = ("alice", "alice-secret")
        await add_user(ctx, "alice", "alice-secret", [(f"Topic:{TOPIC}", ["Pub"])])
        created = await ctx.call(RQ.UPDATE_AND_CREATE_TOPIC, topic_header("mine"), user=alice)
        assert created.code == RC.NO_PERMISSION
        assert created.remark == (
            "User:alice has no permission to access Topic:mine from 127.0.0.1, no matched policies."
        )
        assert not ctx.topic_exists("mine")
        beat = await ctx.call(RQ.HEART_BEAT, {}, heartbeat_body("g1", TOPIC), user=alice)
        assert beat.code == RC.NO_PERMISSION and "Group:g1" in (beat.remark or ""), beat.remark
        assert ctx.service.table.consumer_group("g1") is None
        grant = acl_body("User:alice", ["Group:g1", f"Topic:{TOPIC}"], ["Sub"], "Allow")
        answer = await ctx.call(RQ.AUTH_UPDATE_ACL, {"subject": "User:alice"}, grant)
        assert answer.code == RC.SUCCESS, answer.remark
        beat = await ctx.call(RQ.HEART_BEAT, {}, heartbeat_body("g1", TOPIC), user=alice)
        assert beat.code == RC.SUCCESS, beat.remark
        assert ctx.service.table.consumer_group("g1") is not None
        deny = acl_body("User:alice", [f"Topic:{TOPIC}"], ["Sub"], "Deny")
        await ctx.call(RQ.AUTH_UPDATE_ACL, {"subject": "User:alice"}, deny)
        beat = await ctx.call(RQ.HEART_BEAT, {}, heartbeat_body("g1", TOPIC), user=alice)
        assert beat.code == RC.NO_PERMISSION
        assert (beat.remark or "").endswith("the decision is deny."), beat.remark
        broken = await ctx.call(RQ.LOCK_BATCH_MQ, {}, b"{not json", user=alice)
        assert broken.code == RC.NO_PERMISSION, broken.remark

    run(tmp_path, scenario)


def test_refused_oneway_is_dropped_with_rate_limited_audit_lines(
    tmp_path: pathlib.Path, caplog: pytest.LogCaptureFixture
) -> None:
    """An unsigned oneway offset commit gets no answer and commits nothing; every refusal is
    counted in the gate's ``AuthAudit``, and repeats of one refusal write one audit line in
    the format the gRPC gate writes."""

    async def scenario(ctx: Ctx) -> None:
        caplog.set_level(logging.INFO, logger="ariane.security.audit")
        commit = {"consumerGroup": "g", "topic": TOPIC, "queueId": "0", "commitOffset": "5"}
        await ctx.client.invoke_oneway(
            ctx.addr, command.request(RQ.UPDATE_CONSUMER_OFFSET, commit, oneway=True)
        )
        query = {"consumerGroup": "g", "topic": TOPIC, "queueId": "0"}
        answer = await ctx.call(RQ.QUERY_CONSUMER_OFFSET, query)  # after the oneway, same link
        assert answer.code == RC.QUERY_NOT_FOUND, (answer.code, answer.remark)
        for _ in range(10):
            refused = await ctx.call(RQ.GET_BROKER_RUNTIME_INFO, user=None)
            assert refused.code == RC.NO_PERMISSION
        lines = [r.getMessage() for r in caplog.records if r.name == "ariane.security.audit"]
        assert len(lines) == 1, lines
        assert lines[0].startswith("[AUTHENTICATION] User: is authenticated failed"), lines[0]
        assert "(username cannot be null.) from 127.0.0.1:" in lines[0], lines[0]
        assert lines[0].endswith("for request = remoting:15."), lines[0]
        gate = ctx.service.gate
        assert gate is not None
        assert gate.audit.authentications == {"missing": 11, "ok": 1}
        assert gate.audit.suppressed == 10

    run(tmp_path, scenario)


def test_remoting_refusals_count_in_the_grpc_gates_audit(tmp_path: pathlib.Path) -> None:
    """A Remoting refusal and a Remoting authorization denial land in the broker's one
    ``AuthAudit`` (the gRPC gate's, ``AuthStores.audit``), which is what ``/metrics`` reads."""
    settings = broker_settings.from_mapping(
        {"store_dir": str(tmp_path / "grpc"), "auth": {"authentication_enabled": True}}
    )
    stores = auth_gate.AuthStores(settings)
    assert stores.gate(cluster="DefaultCluster") is not None
    shared = stores.audit
    assert shared is not None

    async def scenario(ctx: Ctx) -> None:
        gate = ctx.service.gate
        assert gate is not None and gate.audit is shared
        refused = await ctx.call(RQ.GET_BROKER_RUNTIME_INFO, user=None)
        assert refused.code == RC.NO_PERMISSION
        await add_user(ctx, "alice", "a-pw", [(f"Topic:{TOPIC}", ["Pub"])])
        denied = await ctx.call(
            RQ.UPDATE_AND_CREATE_TOPIC, topic_header("t2"), user=("alice", "a-pw")
        )
        assert denied.code == RC.NO_PERMISSION, denied.remark

    run(tmp_path, scenario, audit_log=shared)
    assert shared.authentications.get("missing") == 1, shared.authentications
    assert shared.authorizations.get("no_match") == 1, shared.authorizations


def test_identity_cache_never_serves_a_wrong_signature_and_follows_changes(
    tmp_path: pathlib.Path,
) -> None:
    """A connection that proved root's signature still has a wrong signature over the same
    request refused; a password change refuses the old signature at once; a closed connection
    leaves nothing in the cache."""

    async def scenario(ctx: Ctx) -> None:
        gate = ctx.service.gate
        assert gate is not None
        ext = sign({}, b"", ROOT, ROOT_SECRET)
        request = command.request(RQ.GET_BROKER_RUNTIME_INFO, ext)
        assert (await ctx.client.invoke(ctx.addr, request, TIMEOUT_S)).code == RC.SUCCESS
        assert gate.cached_identities == 1
        forged = command.request(RQ.GET_BROKER_RUNTIME_INFO, {**ext, "Signature": "AAAA"})
        assert (await ctx.client.invoke(ctx.addr, forged, TIMEOUT_S)).code == RC.NO_PERMISSION
        assert (await ctx.client.invoke(ctx.addr, request, TIMEOUT_S)).code == RC.SUCCESS
        ctx.store.update_user(ROOT, password="new-secret")
        stale = await ctx.client.invoke(ctx.addr, request, TIMEOUT_S)
        assert stale.code == RC.NO_PERMISSION, stale.remark
        answer = await ctx.call(RQ.GET_BROKER_RUNTIME_INFO, user=(ROOT, "new-secret"))
        assert answer.code == RC.SUCCESS and gate.cached_identities == 1
        await ctx.client.close()
        async with asyncio.timeout(TIMEOUT_S):  # the server notices the close on its own
            while gate.cached_identities:  # noqa: ASYNC110 (polling with a deadline)
                await asyncio.sleep(0.02)
        assert gate.cached_identities == 0

    run(tmp_path, scenario)


def test_user_admin_codes_keep_rocketmq_rules_and_never_return_secrets(
    tmp_path: pathlib.Path,
) -> None:
    """3001-3005: root creates users; a Normal admin (Cluster:Update/Get) cannot create,
    promote, update or delete a Super user; get/list show no password; delete takes the ACL
    along; the users survive a reopen of the metadata file."""

    async def scenario(ctx: Ctx) -> None:
        grants = [("Cluster:DefaultCluster", ["Update", "Get"])]
        await add_user(ctx, "ops", "ops-secret", grants)
        ops = ("ops", "ops-secret")
        blank = await ctx.call(RQ.AUTH_CREATE_USER, {"username": " "}, user_body(" ", "x"))
        assert (blank.code, blank.remark) == (RC.INVALID_PARAMETER, "The username is blank")
        superb = user_body("boss", "pw", "Super")
        refused = await ctx.call(RQ.AUTH_CREATE_USER, {"username": "boss"}, superb, user=ops)
        assert refused.code == RC.SYSTEM_ERROR
        assert refused.remark == "The super user can only be create by super user"
        assert ctx.store.find_user("boss") is None
        made = await ctx.call(
            RQ.AUTH_CREATE_USER, {"username": "dev"}, user_body("dev", "d"), user=ops
        )
        assert made.code == RC.SUCCESS, made.remark
        again = await ctx.call(RQ.AUTH_CREATE_USER, {"username": "dev"}, user_body("dev", "d"))
        assert (again.code, again.remark) == (RC.NO_PERMISSION, "The user is existed")
        promote = fastjson.dumps({"userType": "Super"})
        up = await ctx.call(RQ.AUTH_UPDATE_USER, {"username": "dev"}, promote, user=ops)
        assert up.code == RC.SYSTEM_ERROR
        root_edit = fastjson.dumps({"password": "mine"})
        up = await ctx.call(RQ.AUTH_UPDATE_USER, {"username": ROOT}, root_edit, user=ops)
        assert up.code == RC.NO_PERMISSION
        gone = await ctx.call(RQ.AUTH_DELETE_USER, {"username": ROOT}, user=ops)
        assert gone.code == RC.NO_PERMISSION and ctx.store.find_user(ROOT) is not None
        disable = fastjson.dumps({"userStatus": "disable"})
        up = await ctx.call(RQ.AUTH_UPDATE_USER, {"username": "dev"}, disable, user=ops)
        assert up.code == RC.SUCCESS, up.remark
        got = await ctx.call(RQ.AUTH_GET_USER, {"username": "dev"})
        assert json.loads(got.body) == {
            "username": "dev",
            "userType": "Normal",
            "userStatus": "disable",
        }
        listed = await ctx.call(RQ.AUTH_LIST_USER, {"filter": ""})
        names = [u["username"] for u in json.loads(listed.body)]
        assert names == ["dev", "ops", ROOT] and b"password" not in listed.body
        assert (await ctx.call(RQ.AUTH_GET_USER, {"username": "nobody"})).body == b""
        assert (await ctx.call(RQ.AUTH_DELETE_USER, {"username": "ops"})).code == RC.SUCCESS
        assert ctx.store.get_acl(model.Subject(model.Username("ops"))) is None
        assert (await ctx.call(RQ.AUTH_DELETE_USER, {"username": "ops"})).code == RC.SUCCESS
        reopened = metadata_store.AuthMetadataStore.open(ctx.store.path.parent)
        assert [u.username for u in reopened.list_users()] == ["dev", ROOT]

    run(tmp_path, scenario)


def test_acl_admin_codes_merge_delete_get_and_list(tmp_path: pathlib.Path) -> None:
    """3006-3010: entries merge per resource, one resource's entry or the whole ACL is
    deleted, an unknown subject is 16, a bad resource is 16 with the store's text, and an empty
    body is 29."""

    async def scenario(ctx: Ctx) -> None:
        await add_user(ctx, "carol", "c", [("Topic:a", ["Pub"])])
        subject = {"subject": "User:carol"}
        more = acl_body("User:carol", ["Topic:b*", "Group:g"], ["Sub", "Get"], "Allow")
        assert (await ctx.call(RQ.AUTH_CREATE_ACL, subject, more)).code == RC.SUCCESS
        got = json.loads((await ctx.call(RQ.AUTH_GET_ACL, subject)).body)
        assert [e["resource"] for e in got["policies"][0]["entries"]] == [
            "Topic:a",
            "Topic:b*",
            "Group:g",
        ]
        listed = await ctx.call(RQ.AUTH_LIST_ACL, {"subjectFilter": "", "resourceFilter": "Group"})
        assert [a["subject"] for a in json.loads(listed.body)] == ["User:carol"]
        bad = acl_body("User:carol", ["Queue:x"], ["Sub"], "Allow")
        answer = await ctx.call(RQ.AUTH_CREATE_ACL, subject, bad)
        assert (answer.code, answer.remark) == (RC.NO_PERMISSION, "The resource is null.")
        empty = await ctx.call(RQ.AUTH_CREATE_ACL, subject, fastjson.dumps({"policies": []}))
        assert empty.code == RC.INVALID_PARAMETER
        one = {**subject, "resource": "Topic:a"}
        assert (await ctx.call(RQ.AUTH_DELETE_ACL, one)).code == RC.SUCCESS
        got = json.loads((await ctx.call(RQ.AUTH_GET_ACL, subject)).body)
        assert [e["resource"] for e in got["policies"][0]["entries"]] == ["Topic:b*", "Group:g"]
        assert (await ctx.call(RQ.AUTH_DELETE_ACL, subject)).code == RC.SUCCESS
        assert (await ctx.call(RQ.AUTH_GET_ACL, subject)).body == b""
        nothing = await ctx.call(RQ.AUTH_DELETE_ACL, subject)
        assert (nothing.code, nothing.remark) == (RC.NO_PERMISSION, "The acl is not exist.")
        who = await ctx.call(RQ.AUTH_GET_ACL, {"subject": "User:ghost"})
        assert (who.code, who.remark) == (RC.NO_PERMISSION, "The subject is not exist.")

    run(tmp_path, scenario)


def _fuzzed_fields(rng: random.Random) -> dict[str, str]:
    """Ext fields with a malformed, huge, missing or misplaced AccessKey/Signature."""
    pieces = [
        "",
        " ",
        ROOT,
        "root\x00",
        "ü" * rng.randint(1, 40),
        "A" * rng.choice([300, 70_000, 1_000_000]),
        "+/==",
        "\ud800",
        ROOT_SECRET,
    ]
    fields: dict[str, str] = {}
    for key in ("AccessKey", "Signature", "SecurityToken", "topic", "a", "b"):
        if rng.random() < 0.7:
            fields[key] = rng.choice(pieces)
    if rng.random() < 0.2:
        fields["Signature"] = sign({}, b"", ROOT, ROOT_SECRET)["Signature"]  # valid elsewhere
    return fields


def test_fuzzed_credentials_all_get_an_answer_and_change_nothing(tmp_path: pathlib.Path) -> None:
    """Malformed, huge and replayed AccessKey/Signature values on state-changing codes all get
    a refusal (16, or 3 for no such code) with a bounded remark; no topic, group, user or
    offset appears and the metadata store's generation does not move."""

    async def scenario(ctx: Ctx) -> None:
        rng = random.Random(21)
        generation = ctx.store.generation
        codes_tried = (
            RQ.UPDATE_AND_CREATE_TOPIC,
            RQ.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
            RQ.AUTH_CREATE_USER,
            RQ.UPDATE_CONSUMER_OFFSET,
            RQ.SEND_MESSAGE_V2,
            RQ.DELETE_TOPIC_IN_BROKER,
        )
        for i in range(60):
            code = codes_tried[i % len(codes_tried)]
            fields = {**topic_header(f"fz{i}"), **_fuzzed_fields(rng)}
            body = rng.choice([b"", user_body(f"fz{i}", "pw", "Super"), b"\xff" * 1000])
            fields = {k: v for k, v in fields.items() if "\ud800" not in v}  # not UTF-8
            answer = await ctx.call(code, fields, body, user=None)
            assert answer.code in (RC.NO_PERMISSION, RC.REQUEST_CODE_NOT_SUPPORTED), (
                i,
                answer.code,
                answer.remark,
            )
            assert len(answer.remark or "") <= security_gate.TEXT_CHARS_MAX + 40
            assert not ctx.topic_exists(f"fz{i}")
        assert ctx.store.generation == generation
        assert [u.username for u in ctx.store.list_users()] == [ROOT]

    run(tmp_path, scenario)
