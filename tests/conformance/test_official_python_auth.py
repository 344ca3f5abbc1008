"""ACL 2.0 on the broker's gRPC services over TLS, end to end: real name server and broker
processes (``[auth]`` on, TLS **enforcing** on every port, one front-end worker, so every call
crosses the relay to the store owner), the official Python client 5.1.2 with ``Credentials`` and
``tls_enable=True``, ``ariane admin --tls --ca-file`` and Ariane's own client with ``ClientTls``.

The official Python client verifies the server (``grpc.ssl_channel_credentials()``, host name
checked: security.md §8.3) against grpcio's default roots, which
``GRPC_DEFAULT_SSL_ROOTS_FILE_PATH`` points at the cluster's CA; with plaintext every test here
fails (enforcing closes plaintext, and a TLS client meets a plaintext-only cluster with a failed
handshake).

One broker serves the module; each test uses its own users, topics and groups.

Own cluster: the broker runs with [auth] on and its own users and ACLs.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import pathlib
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from ariane import client
from ariane.common import errors
from conformance import acl_cluster
from conformance.acl_cluster import ROOT

pytestmark = pytest.mark.slow

HERE = pathlib.Path(__file__).resolve().parent
DRIVER = HERE / "official_py_driver.py"


class AuthCluster(acl_cluster.AclCluster):
    """The module's ACL cluster (``acl_cluster``) and the official Python driver."""

    def driver(self, credentials: tuple[str, str], *args: str) -> tuple[int, list[dict[str, Any]]]:
        """Run the official-client driver with ``credentials``; its exit code and events."""
        env = {**os.environ, **self.client_env()}
        env["RMQ_DRIVER_ACCESS_KEY"], env["RMQ_DRIVER_SECRET_KEY"] = credentials
        if self.tls_mode == "enforcing":
            env["RMQ_DRIVER_TLS"] = "1"  # tls_enable=True
        done = subprocess.run(
            [sys.executable, str(DRIVER), *args, "--endpoints", self.namesrv],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            env=env,
        )
        events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
        assert done.returncode in (0, 3, 4), done.stderr[-3000:]
        return done.returncode, events


@pytest.fixture(scope="module")
def auth_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AuthCluster]:
    """One ACL-enforcing broker (plus name server), TLS enforcing, for the module; stopped by
    PID after."""
    with acl_cluster.running_as(tmp_path_factory.mktemp("auth"), "enforcing", AuthCluster) as made:
        yield made


def _error(events: list[dict[str, Any]]) -> dict[str, Any]:
    found = [e for e in events if e["event"] == "error"]
    assert found, f"no error event in {events}"
    return found[0]


def test_admin_without_credentials_is_refused_and_deletes_nothing(
    auth_cluster: AuthCluster,
) -> None:
    """An unsigned ``ariane admin topic delete`` is refused UNAUTHORIZED with a fix hint, a
    user without an ACL is refused FORBIDDEN, and the topic survives both."""
    auth_cluster.ok("topic", "create", "kept", "--queues", "2")
    unsigned = auth_cluster.admin("topic", "delete", "kept", credentials=None)
    assert unsigned.returncode == 1, unsigned.stdout
    assert "UNAUTHORIZED" in unsigned.stderr and "--access-key" in unsigned.stderr
    nobody = auth_cluster.user("nobody")
    denied = auth_cluster.admin("topic", "delete", "kept", credentials=nobody)
    assert denied.returncode == 1
    assert "FORBIDDEN" in denied.stderr and "Topic:kept" in denied.stderr
    assert "kept" in auth_cluster.ok("topic", "list")
    listed = auth_cluster.ok("user", "list", "--json")
    assert "secret" not in listed and "nobody" in listed


def test_official_client_sends_and_receives_with_pub_and_sub(auth_cluster: AuthCluster) -> None:
    """A user with Pub on the topic and Sub on topic and group sends and receives with the
    official client."""
    auth_cluster.ok("topic", "create", "orders", "--queues", "2")
    alice = auth_cluster.user("alice", ("Topic:orders", "Pub,Sub"), ("Group:billing", "Sub"))
    code, sent = auth_cluster.driver(alice, "produce", "--topic", "orders", "--count", "5")
    assert code == 0, sent
    code, got = auth_cluster.driver(
        alice, "simple-consume", "--topic", "orders", "--group", "billing", "--count", "5"
    )
    assert code == 0, got
    received = {e["message_id"] for e in got if e["event"] == "received"}
    assert received == {e["message_id"] for e in sent if e["event"] == "sent"}


def test_official_client_refusals(auth_cluster: AuthCluster) -> None:
    """A wrong secret is an authentication error (40100), a user without Sub on the group and a
    user without any ACL are forbidden (40300)."""
    auth_cluster.ok("topic", "create", "refusals", "--queues", "1")
    bob = auth_cluster.user("bob", ("Topic:refusals", "Pub,Sub"))
    carol = auth_cluster.user("carol")
    code, events = auth_cluster.driver(
        ("bob", "wrong-secret"), "produce", "--topic", "refusals", "--count", "1"
    )
    assert code == 4 and _error(events)["type"] == "UnauthorizedException", events
    code, events = auth_cluster.driver(
        bob, "simple-consume", "--topic", "refusals", "--group", "g-bob", "--count", "1",
        "--deadline-s", "20",
    )  # fmt: skip
    assert code == 4 and _error(events)["type"] == "ForbiddenException", events
    assert "Group:g-bob" in _error(events)["message"]
    code, events = auth_cluster.driver(carol, "produce", "--topic", "refusals", "--count", "1")
    assert code == 4 and _error(events)["type"] == "ForbiddenException", events
    text = auth_cluster.metrics()
    assert "rocketmq_authentication_total{" in text and 'result="bad_signature"' in text
    assert 'result="no_match"' in text


def test_super_user_passes_everything(auth_cluster: AuthCluster) -> None:
    """The bootstrap Super user sends and receives without any ACL."""
    auth_cluster.ok("topic", "create", "root-topic", "--queues", "1")
    code, _ = auth_cluster.driver(ROOT, "produce", "--topic", "root-topic", "--count", "2")
    assert code == 0
    code, got = auth_cluster.driver(
        ROOT, "simple-consume", "--topic", "root-topic", "--group", "any-group", "--count", "2"
    )
    assert code == 0, got


def test_only_a_super_user_creates_super_users(auth_cluster: AuthCluster) -> None:
    """A Normal user allowed Cluster:Update still may not create a Super user; root may."""
    admin_user = auth_cluster.user("ops", ("Cluster:*", "Update,Get"))
    done = auth_cluster.admin(
        "user", "create", "-u", "mallory", "-p", "x-secret", "-t", "Super", credentials=admin_user
    )
    assert done.returncode == 1 and "FORBIDDEN" in done.stderr, done.stderr
    auth_cluster.ok("user", "create", "-u", "deputy", "-p", "d-secret", "-t", "Super")
    assert "Super" in auth_cluster.ok("user", "get", "-u", "deputy")


def test_our_client_signs_every_call(auth_cluster: AuthCluster) -> None:
    """Ariane's Producer and SimpleConsumer with credentials send and receive; without them
    the producer is refused UNAUTHORIZED."""
    auth_cluster.ok("topic", "create", "ours", "--queues", "1")
    dave = auth_cluster.user("dave", ("Topic:ours", "Pub,Sub"), ("Group:ours-g", "Sub"))
    tls = auth_cluster.client_tls()
    connection = client.ConnectionSettings(credentials=client.Credentials(*dave), tls=tls)

    async def run() -> None:
        settings = client.ProducerSettings(connection=connection)
        async with client.Producer(auth_cluster.namesrv, settings=settings) as producer:
            receipt = await producer.send("ours", b"signed")
        consuming = client.ConsumerSettings(connection=connection)
        async with client.SimpleConsumer(
            auth_cluster.namesrv, "ours-g", "ours", settings=consuming
        ) as consumer:
            got: list[client.ReceivedMessage] = []
            for _ in range(20):
                got += await consumer.receive(max_messages=4, invisible_duration_s=30)
                if got:
                    break
            await consumer.ack(got)
        assert [m.message_id for m in got] == [receipt.message_id]
        plain = client.ProducerSettings(connection=client.ConnectionSettings(tls=tls))
        async with client.Producer(auth_cluster.namesrv, settings=plain) as unsigned:
            with pytest.raises(errors.UnauthorizedError):
                await unsigned.send("ours", b"unsigned")

    asyncio.run(run())
    with contextlib.suppress(Exception):
        auth_cluster.ok("user", "delete", "-u", "dave")
