"""ACL 2.0 on the broker's Remoting port with the official tools: ``mqadmin`` 5.3.3 manages users
and ACLs (signing from its ``conf/tools.yml``), and the classic Java client 5.3.3 sends and
consumes with ``AclClientRPCHook`` credentials, against real ``ariane namesrv`` + ``ariane
broker`` processes with ``[auth]`` on (one broker for the module).

Refusals are read as a user sees them: mqadmin prints the broker's ``CODE: 16`` and remark,
the client's send fails with it, a consumer without Sub on its group receives nothing and the
broker's audit log names the group.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import pathlib
import subprocess
import time
from collections.abc import Iterator

import pytest

import ha_testing
from ariane import dev
from ariane.remoting import codes, command, fastjson, transport
from ariane.security import signing
from conformance import classic_driver, classic_java_client
from conformance.classic_java_client import ClassicJava

pytestmark = pytest.mark.slow

RQ = codes.RequestCode
RC = codes.ResponseCode
ROOT, ROOT_SECRET = "root", "root-secret-1"
TOPIC, GROUP = "acl-orders", "acl-billing"
MQADMIN_TIMEOUT_S = 120.0


@dataclasses.dataclass(frozen=True)
class Secured:
    """The running pair: name server, the broker's Remoting address, its log, a scratch dir."""

    namesrv: str
    remoting: str
    broker_log: pathlib.Path
    tmp: pathlib.Path


def call(
    addr: str,
    code: int,
    ext: dict[str, str] | None = None,
    body: bytes = b"",
    *,
    user: tuple[str, str] | None = (ROOT, ROOT_SECRET),
) -> command.RemotingCommand:
    """One raw Remoting request, signed as ``user`` (``None``: unsigned)."""
    fields = dict(ext or {})
    if user is not None:
        fields = signing.sign_remoting(
            fields, body, access_key=user[0], secret_key=user[1], version=479
        )

    async def go() -> command.RemotingCommand:
        client = transport.RemotingClient()
        try:
            return await client.invoke(addr, command.request(code, fields, body), 30.0)
        finally:
            await client.close()

    return asyncio.run(go())


def topic_header(topic: str) -> dict[str, str]:
    return {
        "topic": topic,
        "defaultTopic": "TBW102",
        "readQueueNums": "2",
        "writeQueueNums": "2",
        "perm": "6",
        "topicFilterType": "SINGLE_TAG",
        "topicSysFlag": "0",
        "order": "false",
    }


def wait_routed(namesrv: str, topic: str) -> None:
    deadline = time.monotonic() + ha_testing.DEADLINE_S
    while call(namesrv, RQ.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}, user=None).code != RC.SUCCESS:
        assert time.monotonic() < deadline, f"{topic} never routed"
        time.sleep(0.1)  # polling the name server, with a deadline


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    """A name server and a broker with authentication and authorization on, bootstrap Super
    user ``root``, and the topic ``TOPIC`` created by root over Remoting and routed."""
    tmp = tmp_path_factory.mktemp("secured")
    auth = (
        "[auth]\nauthentication_enabled = true\nauthorization_enabled = true\n"
        f'[auth.init_authentication_user]\nusername = "{ROOT}"\npassword = "{ROOT_SECRET}"\n'
    )
    remoting_port = dev.free_port()
    with ha_testing.running_namesrv(tmp) as namesrv:
        args = [
            "broker",
            *("--listen", f"127.0.0.1:{dev.free_port()}", "--store-dir", str(tmp / "store")),
            *("--namesrv", namesrv, "--workers", "0"),
            *("--remoting-listen", f"127.0.0.1:{remoting_port}"),
            *ha_testing.small_store_config(tmp, "broker", auth),
        ]
        proc = ha_testing.spawn(args, tmp / "broker.log")
        try:
            dev.wait_until_listening(
                "127.0.0.1", remoting_port, process=proc, timeout_s=ha_testing.DEADLINE_S
            )
            remoting = f"127.0.0.1:{remoting_port}"
            created = call(remoting, RQ.UPDATE_AND_CREATE_TOPIC, topic_header(TOPIC))
            assert created.code == RC.SUCCESS, created.remark
            wait_routed(namesrv, TOPIC)
            yield Secured(namesrv, remoting, tmp / "broker.log", tmp)
        finally:
            dev.stop_process(proc)


def test_unsigned_topic_admin_is_refused_and_changes_nothing(secured: Secured) -> None:
    """The hole: an unsigned UPDATE_AND_CREATE_TOPIC and UPDATE_AND_CREATE_SUBSCRIPTIONGROUP
    answer 16 and nothing is created (root's GET_TOPIC_CONFIG still finds no topic)."""
    topic = call(secured.remoting, RQ.UPDATE_AND_CREATE_TOPIC, topic_header("hole"), user=None)
    assert (topic.code, topic.remark) == (RC.NO_PERMISSION, "username cannot be null.")
    group = call(
        secured.remoting,
        RQ.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
        body=fastjson.dumps({"groupName": "hole-g", "consumeEnable": True}),
        user=None,
    )
    assert group.code == RC.NO_PERMISSION
    found = call(secured.remoting, RQ.GET_TOPIC_CONFIG, {"topic": "hole"})
    assert found.code == RC.TOPIC_NOT_EXIST, (found.code, found.remark)
    got = call(secured.remoting, RQ.GET_SUBSCRIPTIONGROUP_CONFIG, {"group": "hole-g"})
    assert got.code != RC.SUCCESS or b"hole-g" not in got.body


@pytest.fixture(scope="module")
def classic(tmp_path_factory: pytest.TempPathFactory) -> classic_driver.ClassicJava:
    """mqadmin's classes (rocketmq-tools 5.3.3), fetched and compiled (cached by a stamp)."""
    return classic_driver.build(pathlib.Path(tmp_path_factory.mktemp("mqadmin-logs")))


def mqadmin(
    classic: classic_driver.ClassicJava,
    secured: Secured,
    command_name: str,
    *args: str,
    home: pathlib.Path,
) -> str:
    """Run ``mqadmin COMMAND -b <broker> ARGS`` with ``rocketmq.home.dir`` = ``home`` (its
    ``conf/tools.yml`` holds the credentials it signs with); stdout and stderr, joined."""
    done = subprocess.run(
        [
            "java",
            f"-Drocketmq.client.logRoot={classic.log_dir}",
            f"-Drocketmq.home.dir={home}",
            *("-cp", classic.classpath, classic_driver.MQADMIN_MAIN),
            *(command_name, "-b", secured.remoting, "-n", secured.namesrv, *args),
        ],
        capture_output=True,
        text=True,
        timeout=MQADMIN_TIMEOUT_S,
        check=False,
    )
    return done.stdout + done.stderr


def test_mqadmin_manages_users_and_acls_signed_from_tools_yml(
    classic: classic_driver.ClassicJava, secured: Secured
) -> None:
    """With root's keys in ``conf/tools.yml``, createUser, createAcl, getUser, listUser, listAcl
    and deleteUser succeed (no password printed); without a tools.yml mqadmin's createUser is
    refused with 16 "username cannot be null." and creates nobody."""
    home = secured.tmp / "mqadmin-home"
    (home / "conf").mkdir(parents=True)
    (home / "conf" / "tools.yml").write_text(f"accessKey: {ROOT}\nsecretKey: {ROOT_SECRET}\n")

    def run(name: str, *args: str) -> str:
        return mqadmin(classic, secured, name, *args, home=home)

    out = run("createUser", "-u", "dana", "-p", "dana-secret")
    assert "create user to" in out and "Exception" not in out, out
    out = run("createAcl", "-s", "User:dana", "-r", f"Topic:{TOPIC},Group:{GROUP}",
              "-a", "Pub,Sub", "-d", "Allow")  # fmt: skip
    assert "create acl to" in out and "Exception" not in out, out
    out = run("getUser", "-u", "dana")
    assert "dana" in out and "Normal" in out and "dana-secret" not in out, out
    out = run("listUser")
    assert "dana" in out and ROOT in out and ROOT_SECRET not in out, out
    out = run("listAcl", "-s", "User:dana")
    assert f"Topic:{TOPIC}" in out and f"Group:{GROUP}" in out and "Allow" in out, out
    out = run("deleteUser", "-u", "dana")
    assert "delete user to" in out and "Exception" not in out, out
    bare = secured.tmp / "mqadmin-bare"
    (bare / "conf").mkdir(parents=True)
    out = mqadmin(classic, secured, "createUser", "-u", "eve", "-p", "x", home=bare)
    assert "CODE: 16" in out and "username cannot be null." in out, out
    listed = call(secured.remoting, RQ.AUTH_LIST_USER, {"filter": ""})
    assert b'"dana"' not in listed.body and b'"eve"' not in listed.body, listed.body


@pytest.fixture(scope="module")
def java(secured: Secured, tmp_path_factory: pytest.TempPathFactory) -> ClassicJava:
    """The classic client driver, fetched and compiled (cached by a stamp)."""
    return ClassicJava(
        classic_java_client.build(), secured.namesrv, tmp_path_factory.mktemp("classic-java")
    )


def _run(java: ClassicJava, scenario: str, *args: str) -> tuple[int, list[dict[str, object]]]:
    """Run a driver scenario whatever its exit code (a refusal may end it with 2 or 3)."""
    proc = java.start(scenario, *args)
    out, _ = proc.communicate(timeout=180)
    return proc.returncode, [json.loads(x) for x in out.splitlines() if x.startswith("{")]


def test_classic_client_sends_and_consumes_with_credentials_and_is_refused_without(
    java: ClassicJava, secured: Secured
) -> None:
    """A Normal user with Pub/Sub on the topic and Sub on the group sends 3 messages and its
    push consumer receives them; the same send with a wrong secret fails with 16 "check
    signature failed."; a consumer of a group it has no Sub on receives nothing and the
    broker's audit log names that group."""
    user = ("app", "app-secret")
    made = call(secured.remoting, RQ.AUTH_CREATE_USER, {"username": user[0]},
                fastjson.dumps({"username": user[0], "password": user[1]}))  # fmt: skip
    assert made.code == RC.SUCCESS, made.remark
    entries = [
        {"resource": f"Topic:{TOPIC}", "actions": ["Pub", "Sub"], "decision": "Allow"},
        {"resource": f"Group:{GROUP}", "actions": ["Sub"], "decision": "Allow"},
    ]
    acl = {"subject": "User:app", "policies": [{"policyType": "Custom", "entries": entries}]}
    granted = call(secured.remoting, RQ.AUTH_CREATE_ACL, {"subject": "User:app"},
                   fastjson.dumps(acl))  # fmt: skip
    assert granted.code == RC.SUCCESS, granted.remark
    creds = ("--access-key", user[0], "--secret-key", user[1])
    code, events = _run(java, "send", "--topic", TOPIC, "--count", "3", "--mode", "sync", *creds)
    assert code == 0, events
    sent = {e["message_id"] for e in events if e["event"] == "sent"}
    assert len(sent) == 3
    code, events = _run(java, "push", "--topic", TOPIC, "--group", GROUP, "--count", "3", *creds)
    assert code == 0, events
    assert {e["message_id"] for e in events if e["event"] == "received"} >= sent
    wrong = ("--access-key", user[0], "--secret-key", "not-it")
    code, events = _run(java, "send", "--topic", TOPIC, "--count", "1", "--mode", "sync", *wrong)
    errors = [str(e.get("message")) for e in events if e["event"] == "error"]
    assert code == 2 and errors, events
    assert "still failed" in errors[0], errors  # the client retries 16, then gives up
    refused = "User:app is authenticated failed (User:app check signature failed.) from 127.0.0.1"
    assert refused in secured.broker_log.read_text()  # the audit line (security.audit)
    code, events = _run(java, "push", "--topic", TOPIC, "--group", "acl-other", "--count", "1",
                        "--deadline-s", "12", *creds)  # fmt: skip
    received = [e for e in events if e["event"] == "received"]
    assert code == 3 and not received, events
    log = secured.broker_log.read_text()
    assert "User:app has no permission to access Group:acl-other" in log
