"""Users and ACLs reach a slave with real ``ariane namesrv`` and ``ariane broker`` processes
(``[auth]`` on, the inner credential set): a user and an ACL created on the master alone appear
on the slave within a sync round (its password never in a GetUser answer), and after a failover
the official Python client signs in as that user on the promoted slave; the export RPC the copy
uses answers only the inner credential user, not another Super user nor an unsigned caller.

Own cluster: it SIGKILLs the master and promotes the slave."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

import ha_testing as ht
from ariane.common import errors
from ariane.grpcwire import pb

pytestmark = pytest.mark.slow

OK = int(errors.Code.OK)
TOPIC = "auth-sync-topic"
ROOT = ("root", "root-secret")
"""The bootstrap Super user of ``[auth.init_authentication_user]``."""
INNER = ("ariane-inner", "inner-secret-1")
"""``[auth.inner_client_authentication_credentials]`` of both brokers."""
ALICE = ("alice", "alice-secret-1")
"""A Normal user created on the master only."""
DRIVER = pathlib.Path(__file__).resolve().parent / "conformance" / "official_py_driver.py"
AUTH = (
    "[slave_sync]\ninterval_ms = 200\n[ha]\nlease_ms = 2000\n"
    "[auth]\nauthentication_enabled = true\nauthorization_enabled = true\n"
    f'[auth.init_authentication_user]\nusername = "{ROOT[0]}"\npassword = "{ROOT[1]}"\n'
    "[auth.inner_client_authentication_credentials]\n"
    f'access_key = "{INNER[0]}"\nsecret_key = "{INNER[1]}"\n'
)


@pytest.fixture
def namesrv(tmp_path: pathlib.Path) -> Iterator[str]:
    with ht.running_namesrv(tmp_path) as endpoint:
        yield endpoint


def _call(endpoint: str, name: str, request: Any, user: ht.User | None = ROOT) -> Any:
    """One admin call signed as ``user``; the response whatever its status."""
    answer_type = getattr(pb.admin, name + "Response")
    return ht.admin(endpoint, name, request, answer_type, user=user)


def _user_on(endpoint: str, username: str) -> pb.admin.User | None:
    answer = _call(endpoint, "GetUser", pb.admin.GetUserRequest(username=username))
    return answer.user if answer.status.code == OK else None


def _acl_on(endpoint: str, subject: str) -> pb.admin.Acl | None:
    answer = _call(endpoint, "GetAcl", pb.admin.GetAclRequest(subject=subject))
    return answer.acl if answer.status.code == OK else None


def _produce_as(namesrv: str, user: ht.User, tmp: pathlib.Path) -> tuple[int, list[Any]]:
    """One message to ``TOPIC`` by the official Python client signed as ``user``."""
    env = dict(os.environ)
    env["RMQ_DRIVER_ACCESS_KEY"], env["RMQ_DRIVER_SECRET_KEY"] = user
    command = [sys.executable, str(DRIVER), "produce", "--endpoints", namesrv]
    command += ["--topic", TOPIC, "--count", "1"]
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=120, check=False, env=env
    )
    (tmp / "driver.log").write_text(done.stdout + done.stderr)
    events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return done.returncode, events


def test_user_and_acl_reach_the_slave_and_sign_in_after_a_failover(
    tmp_path: pathlib.Path, namesrv: str
) -> None:
    """Proves a user and an ACL created on the master only are on the slave within a sync round
    (GetUser there shows no password), and that after a SIGKILLed master's slave is promoted
    the official Python client produces as that user through the promoted slave."""
    config = ht.small_store_config(tmp_path, "auth", AUTH)
    master = ht.new_broker(tmp_path, "master", user=ROOT)
    slave = ht.new_broker(tmp_path, "slave", user=ROOT)
    try:
        master.start(tmp_path, namesrv, "ASYNC_MASTER", broker_id=0, extra=config)
        slave.start(tmp_path, namesrv, "SLAVE", broker_id=1, master_ha=master.ha, extra=config)
        ht.create_topic(master.endpoint, TOPIC, user=ROOT)
        user = pb.admin.User(username=ALICE[0], password=ALICE[1])
        created = _call(master.endpoint, "CreateUser", pb.admin.CreateUserRequest(user=user))
        assert created.status.code == OK, created.status.message
        entry = pb.admin.AclEntry(resource=f"Topic:{TOPIC}", actions=["Pub"], decision="Allow")
        acl = pb.admin.Acl(subject="User:alice", policies=[pb.admin.AclPolicy(entries=[entry])])
        put = _call(master.endpoint, "CreateAcl", pb.admin.CreateAclRequest(acl=acl))
        assert put.status.code == OK, put.status.message
        assert ht.send(master.endpoint, TOPIC, b"by-alice", user=ALICE) == OK

        ht.poll(lambda: _user_on(slave.endpoint, "alice") is not None, "alice on the slave")
        ht.poll(lambda: _acl_on(slave.endpoint, "User:alice") is not None, "her ACL there")
        copied = _user_on(slave.endpoint, "alice")
        assert copied is not None and copied.password == ""
        assert (copied.user_type, copied.user_status) == ("Normal", "enable")
        copied_acl = _acl_on(slave.endpoint, "User:alice")
        assert copied_acl is not None
        assert [e.resource for e in copied_acl.policies[0].entries] == [f"Topic:{TOPIC}"]
        ht.poll(lambda: TOPIC in ht.topics(slave.endpoint, user=ROOT), "the topic synced")

        master.kill()
        ht.change_role(slave.endpoint, "ASYNC_MASTER", epoch=2, broker_id=0, user=ROOT)
        assert ht.send(slave.endpoint, TOPIC, b"promoted", user=ALICE) == OK
        code, events = _produce_as(namesrv, ALICE, tmp_path)
        assert code == 0, events
        assert [e for e in events if e.get("event") == "sent"], events
        wrong = ("alice", "not-her-secret")
        assert ht.send(slave.endpoint, TOPIC, b"wrong", user=wrong) == int(errors.Code.UNAUTHORIZED)
    finally:
        master.stop()
        slave.stop()


def test_export_answers_only_the_inner_credential_user(
    tmp_path: pathlib.Path, namesrv: str
) -> None:
    """Proves ExportAuthMetadata is refused UNAUTHORIZED without a signature and FORBIDDEN to
    the bootstrap Super user, and gives the inner credential user every user with its secret."""
    master = ht.new_broker(tmp_path, "master", user=ROOT)
    try:
        config = ht.small_store_config(tmp_path, "auth", AUTH)
        master.start(tmp_path, namesrv, "ASYNC_MASTER", broker_id=0, extra=config)
        request = pb.admin.ExportAuthMetadataRequest()
        unsigned = _call(master.endpoint, "ExportAuthMetadata", request, user=None)
        assert unsigned.status.code == int(errors.Code.UNAUTHORIZED), unsigned.status
        assert not unsigned.users
        by_root = _call(master.endpoint, "ExportAuthMetadata", request, user=ROOT)
        assert by_root.status.code == int(errors.Code.FORBIDDEN), by_root.status
        assert not by_root.users and "root" in by_root.status.message
        assert ROOT[1] not in by_root.status.message
        by_inner = _call(master.endpoint, "ExportAuthMetadata", request, user=INNER)
        assert by_inner.status.code == OK, by_inner.status
        assert {(u.username, u.secret_key) for u in by_inner.users} == {ROOT, INNER}
        listed = _call(master.endpoint, "ListUsers", pb.admin.ListUsersRequest())
        assert {u.username for u in listed.users} == {ROOT[0], INNER[0]}
        assert all(u.password == "" for u in listed.users)
    finally:
        master.stop()
