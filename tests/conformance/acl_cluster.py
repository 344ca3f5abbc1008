"""One ACL 2.0 cluster for a conformance module: a real ``ariane namesrv`` and one ``ariane
broker`` process with authentication and authorization on (``[auth]``), its gRPC port, its
Remoting port (explicit, so the classic clients reach it through the name server's routes) and
its ``/metrics``; users and ACLs are made with ``ariane admin`` (``user``, as a user types it) or
with Ariane's ``AdminClient`` in this process (``provision``, one call for a test's topic, user and
ACL), both signed as the bootstrap Super user ``ROOT``.

Transport (``tls_mode``): ``enforcing`` (the production configuration, TLS + ACL: every port of
the name server and the broker refuses plaintext; certificates from ``security.ca.write_local``,
SANs ``localhost``/``127.0.0.1``; every client of the conformance modules has a TLS switch,
classic Go too since its master's ``WithTls``), ``permissive`` (TLS and plaintext on the same
ports) or ``disabled`` (plaintext only: what proves a client's TLS switch is really on, since a
TLS client fails against it). Every helper here (``admin``, ``provision``,
``metrics``, ``client_env``) follows the mode, so a module switches transport in one place.

The cluster's start (settings, flags) lives here only. Each test makes its own users, topics and
groups; the module stops the processes by PID (``running``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pathlib
import ssl
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from typing import TypeVar

import ha_testing
import tls_testing
from ariane import client, dev
from ariane.grpcwire import tls as grpc_tls
from ariane.security import ca

ROOT = ("root", "root-secret")
"""The bootstrap Super user of ``[auth.init_authentication_user]``."""
BROKER_NAME = "auth-a"
ADMIN_TIMEOUT_S = 60.0
TLS_MODES = ("enforcing", "permissive", "disabled")
C = TypeVar("C", bound="AclCluster")


class AclCluster:
    """A broker enforcing ACL 2.0 registered with ``namesrv``, and helpers that drive it.

    Args:
        tmp: the cluster's directory (store, settings, ``broker.log``).
        namesrv: ``HOST:PORT`` of a running name server (serving ``files`` in ``tls_mode``).
        workers: the broker's front-end workers (1: every gRPC call crosses the relay to the
            store owner, the production path).
        tls_mode: the broker's ``[tls] server_mode`` on every port (``TLS_MODES``).
        files: the certificates it serves (required unless ``tls_mode`` is ``disabled``).
    """

    def __init__(
        self,
        tmp: pathlib.Path,
        namesrv: str,
        *,
        workers: int = 1,
        tls_mode: str = "disabled",
        files: ca.LocalTlsFiles | None = None,
    ) -> None:
        assert tls_mode in TLS_MODES, tls_mode
        assert (files is None) == (tls_mode == "disabled"), "certificates iff TLS"
        self.tmp = tmp
        self.namesrv = namesrv
        self.tls_mode = tls_mode
        self.files = files
        """The CA and server certificate (``None``: plaintext only)."""
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
            f'password = "{ROOT[1]}"\n' + (tls_testing.tls_toml(files, tls_mode) if files else "")
        )
        args = ["broker", "--config", str(config), "--listen", f"127.0.0.1:{self.port}"]
        args += ["--remoting-listen", f"127.0.0.1:{self.remoting_port}"]
        args += ["--store-dir", str(tmp / "store"), "--namesrv", namesrv, "--workers", str(workers)]
        self.process = ha_testing.spawn([*args, "--broker-name", BROKER_NAME], self.log)
        dev.wait_until_listening("127.0.0.1", self.port, process=self.process, timeout_s=60)
        dev.wait_until_registered(
            namesrv, BROKER_NAME, process=self.process, timeout_s=60,
            ca_path=None if files is None else files.ca_path,
        )  # fmt: skip

    def admin(
        self, *args: str, credentials: tuple[str, str] | None = ROOT
    ) -> subprocess.CompletedProcess[str]:
        """``python -m ariane admin`` signed as ``credentials`` (unsigned when ``None``)."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("ARIANE_")}
        if credentials is not None:
            env["ARIANE_ACCESS_KEY"], env["ARIANE_SECRET_KEY"] = credentials
        if self.files is not None:  # ``--tls --ca-file`` (TLS whenever the cluster offers it)
            env["ARIANE_TLS"], env["ARIANE_CA_FILE"] = "1", str(self.files.ca_path)
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
            async with client.AdminClient(
                self.namesrv, credentials=root, tls=self.client_tls()
            ) as admin:
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

    def client_tls(self) -> grpc_tls.ClientTls | None:
        """Ariane's client TLS options for this cluster (verifying its CA), ``None`` when it
        serves plaintext only."""
        return None if self.files is None else grpc_tls.ClientTls(ca_file=str(self.files.ca_path))

    def client_env(self) -> dict[str, str]:
        """Environment that makes a grpc client (grpcio's, grpc-js's) verify this cluster's
        certificates: ``GRPC_DEFAULT_SSL_ROOTS_FILE_PATH`` = the CA (empty when plaintext)."""
        if self.files is None:
            return {}
        return {"GRPC_DEFAULT_SSL_ROOTS_FILE_PATH": str(self.files.ca_path)}

    def metrics(self) -> str:
        """The broker's ``/metrics`` text (HTTPS verified by the CA when the cluster serves TLS:
        the metrics port follows ``[tls]``)."""
        context: ssl.SSLContext | None = None
        scheme = "http"
        if self.files is not None:
            context, scheme = tls_testing.client_context(self.files), "https"
        url = f"{scheme}://127.0.0.1:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=10, context=context) as answer:
            return str(answer.read().decode())


@contextlib.contextmanager
def running(tmp: pathlib.Path, tls_mode: str) -> Iterator[AclCluster]:
    """A name server and an ``AclCluster`` in ``tmp``, both serving ``tls_mode`` on every port
    (certificates written to ``tmp/certs``), for the ``with`` block; both stopped by PID after."""
    with running_as(tmp, tls_mode, AclCluster) as made:
        yield made


@contextlib.contextmanager
def running_as(tmp: pathlib.Path, tls_mode: str, kind: type[C]) -> Iterator[C]:
    """``running`` with the cluster made as ``kind`` (a subclass adding a module's helpers)."""
    files = None if tls_mode == "disabled" else ca.write_local(tmp / "certs")
    extra: tuple[str, ...] = ()
    if files is not None:
        config = tmp / "namesrv.toml"
        config.write_text(tls_testing.tls_toml(files, tls_mode))
        extra = ("--config", str(config))
    with ha_testing.running_namesrv_process(tmp, extra) as (namesrv, _):
        made = kind(tmp, namesrv, tls_mode=tls_mode, files=files)
        try:
            yield made
        finally:
            dev.stop_process(made.process)
