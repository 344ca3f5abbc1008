"""ACL 2.0 on the broker's Remoting port over TLS with the official tools: ``mqadmin`` 5.3.3
manages users and ACLs (signing from its ``conf/tools.yml``), and the classic Java client 5.3.3
sends and consumes with ``AclClientRPCHook`` credentials as a user ``mqadmin`` created, against
real ``ariane namesrv`` + ``ariane broker`` processes with ``[auth]`` on and TLS **enforcing** on
every port (``acl_cluster``, one cluster for the module).

Both Java tools speak TLS with ``-Dtls.enable=true`` (``mqadmin``: what ``JAVA_OPT`` passes) and
trust any server certificate (``tls.test.mode.enable`` defaults to true: security.md §8.3), so
they prove the wire, not verification; our raw Remoting calls verify the cluster's CA. Without
the switch every test here fails: the enforcing ports close plaintext connections unanswered.

Refusals are read as a user sees them: mqadmin prints the broker's ``CODE: 16`` and remark,
the client's send fails with it, a consumer without Sub on its group receives nothing and the
broker's audit log names the group.
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
import ssl
import subprocess
import time
from collections.abc import Iterator

import pytest

import ha_testing
import tls_testing
from ariane.remoting import codes, command, fastjson
from ariane.security import signing
from conformance import acl_cluster, classic_java_client
from conformance.acl_cluster import ROOT
from conformance.classic_java_client import ClassicJava

pytestmark = pytest.mark.slow

RQ = codes.RequestCode
RC = codes.ResponseCode
TOPIC, GROUP = "acl-orders", "acl-billing"
MQADMIN_TIMEOUT_S = 120.0
TLS_JVM = {"tls.enable": "true"}
"""The classic Java tools' TLS switch (``TlsSystemConfig``: ``ClientConfig.useTLS``)."""


@dataclasses.dataclass(frozen=True)
class Secured:
    """The running cluster: name server, the broker's Remoting address, its log, a scratch dir,
    and the client TLS context that verifies its CA."""

    namesrv: str
    remoting: str
    broker_log: pathlib.Path
    tmp: pathlib.Path
    context: ssl.SSLContext


def call(
    secured: Secured,
    addr: str,
    code: int,
    ext: dict[str, str] | None = None,
    body: bytes = b"",
    *,
    user: tuple[str, str] | None = ROOT,
) -> command.RemotingCommand:
    """One raw Remoting request over TLS, signed as ``user`` (``None``: unsigned)."""
    fields = dict(ext or {})
    if user is not None:
        fields = signing.sign_remoting(
            fields, body, access_key=user[0], secret_key=user[1], version=479
        )
    return tls_testing.call(addr, code, fields, body, context=secured.context, timeout_s=30.0)


def wait_routed(secured: Secured, topic: str) -> None:
    """Poll the name server over TLS until ``topic`` has a route."""
    deadline = time.monotonic() + ha_testing.DEADLINE_S
    header, route = {"topic": topic}, RQ.GET_ROUTEINFO_BY_TOPIC
    while call(secured, secured.namesrv, route, header, user=None).code != RC.SUCCESS:
        assert time.monotonic() < deadline, f"{topic} never routed"
        time.sleep(0.1)  # polling the name server, with a deadline


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    """A name server and a broker with authentication and authorization on and TLS enforcing,
    bootstrap Super user ``root``, and the topic ``TOPIC`` created by root over Remoting (TLS)
    and routed."""
    tmp = tmp_path_factory.mktemp("secured")
    with acl_cluster.running(tmp, "enforcing") as cluster:
        assert cluster.files is not None
        secured = Secured(
            cluster.namesrv,
            f"127.0.0.1:{cluster.remoting_port}",
            cluster.log,
            tmp,
            tls_testing.client_context(cluster.files),
        )
        made = call(
            secured, secured.remoting, RQ.UPDATE_AND_CREATE_TOPIC, tls_testing.topic_header(TOPIC)
        )
        assert made.code == RC.SUCCESS, made.remark
        wait_routed(secured, TOPIC)
        yield secured


def test_unsigned_topic_admin_is_refused_and_changes_nothing(secured: Secured) -> None:
    """The hole: an unsigned UPDATE_AND_CREATE_TOPIC and UPDATE_AND_CREATE_SUBSCRIPTIONGROUP
    answer 16 and nothing is created (root's GET_TOPIC_CONFIG still finds no topic)."""
    topic = call(
        secured,
        secured.remoting,
        RQ.UPDATE_AND_CREATE_TOPIC,
        tls_testing.topic_header("hole"),
        user=None,
    )
    assert (topic.code, topic.remark) == (RC.NO_PERMISSION, "username cannot be null.")
    group = call(
        secured,
        secured.remoting,
        RQ.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
        body=fastjson.dumps({"groupName": "hole-g", "consumeEnable": True}),
        user=None,
    )
    assert group.code == RC.NO_PERMISSION
    found = call(secured, secured.remoting, RQ.GET_TOPIC_CONFIG, {"topic": "hole"})
    assert found.code == RC.TOPIC_NOT_EXIST, (found.code, found.remark)
    got = call(secured, secured.remoting, RQ.GET_SUBSCRIPTIONGROUP_CONFIG, {"group": "hole-g"})
    assert got.code != RC.SUCCESS or b"hole-g" not in got.body


@pytest.fixture(scope="module")
def classic(secured: Secured, tmp_path_factory: pytest.TempPathFactory) -> ClassicJava:
    """mqadmin's classes (rocketmq-tools 5.3.3), fetched and compiled (cached by a stamp)."""
    return ClassicJava(
        classic_java_client.build(), secured.namesrv, tmp_path_factory.mktemp("mqadmin-logs")
    )


def tools_home(secured: Secured, name: str, credentials: tuple[str, str] | None) -> pathlib.Path:
    """A ``rocketmq.home.dir`` whose ``conf/tools.yml`` holds ``credentials`` (``None``: no
    tools.yml, so mqadmin signs nothing)."""
    home = secured.tmp / name
    (home / "conf").mkdir(parents=True, exist_ok=True)
    if credentials is not None:
        (home / "conf" / "tools.yml").write_text(
            f"accessKey: {credentials[0]}\nsecretKey: {credentials[1]}\n"
        )
    return home


def mqadmin(
    classic: ClassicJava,
    secured: Secured,
    command_name: str,
    *args: str,
    home: pathlib.Path,
) -> str:
    """Run ``mqadmin COMMAND -b <broker> -n <namesrv> ARGS`` over TLS (``-Dtls.enable=true``)
    with ``rocketmq.home.dir`` = ``home`` (its ``conf/tools.yml`` holds the credentials it signs
    with); stdout and stderr, joined."""
    done = subprocess.run(
        [
            *classic.java(
                classic_java_client.MQADMIN_MAIN,
                f"-Drocketmq.home.dir={home}",
                *(f"-D{key}={value}" for key, value in TLS_JVM.items()),
            ),
            *(command_name, "-b", secured.remoting, "-n", secured.namesrv, *args),
        ],
        capture_output=True,
        text=True,
        timeout=MQADMIN_TIMEOUT_S,
        check=False,
    )
    return done.stdout + done.stderr


def test_mqadmin_manages_users_and_acls_signed_from_tools_yml(
    classic: ClassicJava, secured: Secured
) -> None:
    """Over TLS, with root's keys in ``conf/tools.yml``, createUser, createAcl, getUser,
    listUser, listAcl and deleteUser succeed (no password printed); without a tools.yml
    mqadmin's createUser is refused with 16 "username cannot be null." and creates nobody."""
    home = tools_home(secured, "mqadmin-home", ROOT)

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
    assert "dana" in out and ROOT[0] in out and ROOT[1] not in out, out
    out = run("listAcl", "-s", "User:dana")
    assert f"Topic:{TOPIC}" in out and f"Group:{GROUP}" in out and "Allow" in out, out
    out = run("deleteUser", "-u", "dana")
    assert "delete user to" in out and "Exception" not in out, out
    bare = tools_home(secured, "mqadmin-bare", None)
    out = mqadmin(classic, secured, "createUser", "-u", "eve", "-p", "x", home=bare)
    assert "CODE: 16" in out and "username cannot be null." in out, out
    listed = call(secured, secured.remoting, RQ.AUTH_LIST_USER, {"filter": ""})
    assert b'"dana"' not in listed.body and b'"eve"' not in listed.body, listed.body


@pytest.fixture(scope="module")
def java(secured: Secured, tmp_path_factory: pytest.TempPathFactory) -> ClassicJava:
    """The classic client driver over TLS (``-Dtls.enable=true``), fetched and compiled
    (cached by a stamp)."""
    return ClassicJava(
        classic_java_client.build(),
        secured.namesrv,
        tmp_path_factory.mktemp("classic-java"),
        properties=TLS_JVM,
    )


def _run(java: ClassicJava, scenario: str, *args: str) -> tuple[int, list[dict[str, object]]]:
    """Run a driver scenario whatever its exit code (a refusal may end it with 2 or 3)."""
    proc = java.start(scenario, *args)
    out, _ = proc.communicate(timeout=180)
    return proc.returncode, [json.loads(x) for x in out.splitlines() if x.startswith("{")]


def test_classic_client_sends_and_consumes_with_credentials_and_is_refused_without(
    classic: ClassicJava, java: ClassicJava, secured: Secured
) -> None:
    """Over TLS, a Normal user that mqadmin created with Pub/Sub on the topic and Sub on the
    group sends 3 messages and its push consumer receives them; the same send with a wrong
    secret fails with 16 "check signature failed."; a consumer of a group it has no Sub on
    receives nothing and the broker's audit log names that group."""
    user = ("app", "app-secret")
    home = tools_home(secured, "mqadmin-app", ROOT)
    out = mqadmin(classic, secured, "createUser", "-u", user[0], "-p", user[1], home=home)
    assert "create user to" in out and "Exception" not in out, out
    out = mqadmin(classic, secured, "createAcl", "-s", f"User:{user[0]}",
                  "-r", f"Topic:{TOPIC},Group:{GROUP}", "-a", "Pub,Sub", "-d", "Allow",
                  home=home)  # fmt: skip
    assert "create acl to" in out and "Exception" not in out, out
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
