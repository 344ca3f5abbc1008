"""One ACL 2.0 cluster for a conformance module: a real ``ariane namesrv`` and one ``ariane
broker`` process with authentication and authorization on (``[auth]``), its gRPC port, its
Remoting port (explicit, so the classic clients reach it through the name server's routes) and
its ``/metrics``; users and ACLs are made with ``ariane admin`` (``user``, as a user types it) or
with Ariane's ``AdminClient`` in this process (``provision``, one call for a test's topic, user and
ACL), both signed as the bootstrap Super user ``ROOT``.

The cluster's start (settings, flags) lives here only, so a transport switch (TLS) is one more
parameter of ``AclCluster`` for every module that uses it. Each test makes its own users, topics
and groups; the module stops the processes by PID (``running``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pathlib
import subprocess
import sys
import urllib.request
from collections.abc import Iterator

import ha_testing
from ariane import client, dev

ROOT = ("root", "root-secret")
"""The bootstrap Super user of ``[auth.init_authentication_user]``."""
BROKER_NAME = "auth-a"
ADMIN_TIMEOUT_S = 60.0


class AclCluster:
    """A broker enforcing ACL 2.0 registered with ``namesrv``, and helpers that drive it.

    Args:
        tmp: the cluster's directory (store, settings, ``broker.log``).
        namesrv: ``HOST:PORT`` of a running name server.
        workers: the broker's front-end workers (1: every gRPC call crosses the relay to the
            store owner, the production path).
    """

    def __init__(self, tmp: pathlib.Path, namesrv: str, *, workers: int = 1) -> None:
        self.tmp = tmp
        self.namesrv = namesrv
        self.port = dev.free_port()
        self.remoting_port = dev.free_port()
        self.metrics_port = dev.free_port()
        self.log = tmp / "broker.log"
        config = tmp / "broker.toml"
        config.write_text(
            f'metrics_listen = "127.0.0.1:{self.metrics_port}"\n'
            "[store]\n"
            "commit_log_file_size_bytes = 1048576\n"
            "consume_queue_file_entries = 1024\n"
            "[index]\n"
            "hash_slot_count = 64\n"
            "index_count_max = 256\n"
            "[auth]\n"
            "authentication_enabled = true\n"
            "authorization_enabled = true\n"
            "[auth.init_authentication_user]\n"
            f'username = "{ROOT[0]}"\n'
            f'password = "{ROOT[1]}"\n'
        )
        args = ["broker", "--config", str(config), "--listen", f"127.0.0.1:{self.port}"]
        args += ["--remoting-listen", f"127.0.0.1:{self.remoting_port}"]
        args += ["--store-dir", str(tmp / "store"), "--namesrv", namesrv, "--workers", str(workers)]
        self.process = ha_testing.spawn([*args, "--broker-name", BROKER_NAME], self.log)
        dev.wait_until_listening("127.0.0.1", self.port, process=self.process, timeout_s=60)
        dev.wait_until_registered(namesrv, BROKER_NAME, process=self.process, timeout_s=60)

    def admin(
        self, *args: str, credentials: tuple[str, str] | None = ROOT
    ) -> subprocess.CompletedProcess[str]:
        """``python -m ariane admin`` signed as ``credentials`` (unsigned when ``None``)."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("ARIANE_")}
        if credentials is not None:
            env["ARIANE_ACCESS_KEY"], env["ARIANE_SECRET_KEY"] = credentials
        return subprocess.run(
            [sys.executable, "-m", "ariane", "admin", "--endpoints", self.namesrv, *args],
            capture_output=True,
            text=True,
            timeout=ADMIN_TIMEOUT_S,
            check=False,
            env=env,
        )

    def ok(self, *args: str) -> str:
        """Run an admin command as root; fail the test if it fails."""
        done = self.admin(*args)
        assert done.returncode == 0, f"admin {args}: {done.stderr}"
        return done.stdout

    def user(self, name: str, *acls: tuple[str, str]) -> tuple[str, str]:
        """Create user ``name`` with one Allow entry per (resources, actions); its keys."""
        secret = f"{name}-secret"
        self.ok("user", "create", "-u", name, "-p", secret)
        for resources, actions in acls:
            self.ok("acl", "create", "-s", f"User:{name}", "-r", resources, "-a", actions,
                    "-d", "Allow")  # fmt: skip
        return name, secret

    def provision(self, topic: str, name: str, *acls: tuple[str, str]) -> tuple[str, str]:
        """Create ``topic`` (one queue) and user ``name`` with one Allow entry per (resource,
        actions) through Ariane's ``AdminClient`` as root; the user's keys."""
        secret = f"{name}-secret"

        async def run() -> None:
            root = client.Credentials(*ROOT)
            async with client.AdminClient(self.namesrv, credentials=root) as admin:
                await admin.create_topic(topic, read_queue_nums=1, write_queue_nums=1)
                await admin.create_user(name, secret)
                for resource, actions in acls:
                    await admin.put_acl(
                        f"User:{name}",
                        resources=[resource],
                        actions=actions.split(","),
                        decision="Allow",
                    )

        asyncio.run(run())
        return name, secret

    def metrics(self) -> str:
        """The broker's ``/metrics`` text."""
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=10) as answer:
            return str(answer.read().decode())


@contextlib.contextmanager
def running(tmp: pathlib.Path) -> Iterator[AclCluster]:
    """A name server and an ``AclCluster`` in ``tmp`` for the ``with`` block; both stopped by
    PID after."""
    with ha_testing.running_namesrv(tmp) as namesrv:
        made = AclCluster(tmp, namesrv)
        try:
            yield made
        finally:
            dev.stop_process(made.process)
