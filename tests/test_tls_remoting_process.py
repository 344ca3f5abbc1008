"""TLS on the asyncio listeners of real processes (issue 21 item 6): an ``enforcing`` broker's
Remoting port closes a plaintext client before executing its request and serves TLS clients, a
``permissive`` one serves both, an ``enforcing`` name server's shared port serves Remoting and
gRPC over TLS (the front terminates TLS, then sniffs) and closes plaintext, and a certificate
rotated on disk is served to new connections within 60 s while an open connection keeps
sending.

One module-scoped set of processes: an enforcing name server, an enforcing broker and a
permissive broker (no gRPC TLS is needed here: every request goes over Remoting or the name
server's front).

Own cluster: enforcing and permissive ``[tls]`` processes and a certificate rotated on disk
are the subject.
"""

from __future__ import annotations

import asyncio
import dataclasses
import http.client
import pathlib
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

import grpc
import pytest

import ha_testing
import tls_testing
from ariane import dev
from ariane.grpcwire import registry_client
from ariane.remoting import command, transport
from ariane.security import ca
from tls_testing import RC, RQ

TOPIC = "tls-orders"


@dataclasses.dataclass(frozen=True)
class Processes:
    """The running processes' addresses and the certificate files they serve."""

    namesrv_port: int
    enforcing: str
    enforcing_port: int
    permissive: str
    files: ca.LocalTlsFiles
    metrics_port: int
    """The enforcing broker's ``/metrics`` (HTTPS)."""


def _broker(
    tmp: pathlib.Path, name: str, namesrv: str, toml: str, *extra: str
) -> tuple[list[str], int]:
    """``ariane broker`` arguments with a Remoting port, ``toml`` (small store) and ``extra``;
    the Remoting port."""
    remoting_port = dev.free_port()
    return [
        "broker",
        *extra,
        *("--listen", f"127.0.0.1:{dev.free_port()}", "--store-dir", str(tmp / name)),
        *("--namesrv", namesrv, "--workers", "0", "--broker-name", name),
        *("--remoting-listen", f"127.0.0.1:{remoting_port}"),
        *ha_testing.small_store_config(tmp, name, toml),
    ], remoting_port


@pytest.fixture(scope="module")
def processes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Processes]:
    """An enforcing name server (shared port), an enforcing and a permissive broker."""
    tmp = tmp_path_factory.mktemp("tls")
    files = ca.write_local(tmp / "certs")
    config = tmp / "namesrv.toml"
    config.write_text(tls_testing.tls_toml(files, "enforcing"))
    with ha_testing.running_namesrv_process(tmp, ("--config", str(config))) as (namesrv, _):
        metrics_port = dev.free_port()
        enforcing_args, enforcing_port = _broker(
            tmp,
            "enforcing",
            namesrv,
            tls_testing.tls_toml(files, "enforcing"),
            *("--metrics-listen", f"127.0.0.1:{metrics_port}"),
        )
        permissive_args, permissive_port = _broker(
            tmp, "permissive", namesrv, tls_testing.tls_toml(files, "permissive")
        )
        procs = [
            ha_testing.spawn(enforcing_args, tmp / "enforcing.log"),
            ha_testing.spawn(permissive_args, tmp / "permissive.log"),
        ]
        try:
            for proc, port in zip(procs, (enforcing_port, permissive_port), strict=True):
                dev.wait_until_listening(
                    "127.0.0.1", port, process=proc, timeout_s=ha_testing.DEADLINE_S
                )
            yield Processes(
                int(namesrv.rpartition(":")[2]),
                f"127.0.0.1:{enforcing_port}",
                enforcing_port,
                f"127.0.0.1:{permissive_port}",
                files,
                metrics_port,
            )
        finally:
            for proc in procs:
                dev.stop_process(proc)


def test_enforcing_broker_closes_a_plaintext_client_without_executing_its_request(
    processes: Processes,
) -> None:
    """The hole: a plaintext UPDATE_AND_CREATE_TOPIC to an enforcing Remoting port gets a closed
    connection and creates nothing (RocketMQ bug #10110 executed it), while the same request
    over TLS is served."""
    header = tls_testing.topic_header("hole-topic")
    code = RQ.UPDATE_AND_CREATE_TOPIC
    hole = tls_testing.closed_without_answer(processes.enforcing, code, header)
    assert hole
    context = tls_testing.client_context(processes.files)
    found = tls_testing.call(
        processes.enforcing, RQ.GET_TOPIC_CONFIG, {"topic": "hole-topic"}, context=context
    )
    assert found.code == RC.TOPIC_NOT_EXIST, (found.code, found.remark)
    made = tls_testing.call(
        processes.enforcing, RQ.UPDATE_AND_CREATE_TOPIC, header, context=context
    )
    assert made.code == RC.SUCCESS, made.remark


def _create_topic(processes: Processes) -> None:
    """Create ``TOPIC`` on the enforcing broker over TLS (idempotent)."""
    made = tls_testing.call(
        processes.enforcing,
        RQ.UPDATE_AND_CREATE_TOPIC,
        tls_testing.topic_header(TOPIC),
        context=tls_testing.client_context(processes.files),
    )
    assert made.code == RC.SUCCESS, made.remark


def test_enforcing_broker_sends_and_reads_offsets_over_tls(processes: Processes) -> None:
    """Over TLS a client creates a topic, sends two messages on one connection and reads the
    queue's max offset 2 (a whole classic round trip through the decrypted stream)."""
    context = tls_testing.client_context(processes.files)
    _create_topic(processes)

    async def go() -> int:
        client = transport.RemotingClient(ssl_context=context)
        try:
            for key in ("k1", "k2"):
                request = command.request(
                    RQ.SEND_MESSAGE_V2, tls_testing.send_header(TOPIC, key), key.encode()
                )
                sent = await client.invoke(processes.enforcing, request, 10.0)
                assert sent.code == RC.SUCCESS, sent.remark
            request = command.request(RQ.GET_MAX_OFFSET, {"topic": TOPIC, "queueId": "0"})
            answer = await client.invoke(processes.enforcing, request, 10.0)
            assert answer.code == RC.SUCCESS, answer.remark
            return int(answer.ext_fields["offset"])
        finally:
            await client.close()

    assert asyncio.run(go()) == 2


def test_permissive_broker_serves_plaintext_and_tls_on_one_port(processes: Processes) -> None:
    """A permissive Remoting port answers the same request in plaintext and over TLS."""
    header = tls_testing.topic_header("both-ways")
    plain = tls_testing.call(processes.permissive, RQ.UPDATE_AND_CREATE_TOPIC, header, context=None)
    assert plain.code == RC.SUCCESS, plain.remark
    context = tls_testing.client_context(processes.files)
    found = tls_testing.call(
        processes.permissive, RQ.GET_TOPIC_CONFIG, {"topic": "both-ways"}, context=context
    )
    assert found.code == RC.SUCCESS, (found.code, found.remark)


def test_enforcing_name_server_serves_remoting_and_grpc_over_tls_on_its_shared_port(
    processes: Processes,
) -> None:
    """The name server's one port: plaintext Remoting is closed unanswered, TLS Remoting
    (GET_BROKER_CLUSTER_INFO) is answered, gRPC over TLS (ALPN h2, spliced to the internal
    server) is answered and plaintext gRPC fails."""
    addr = f"127.0.0.1:{processes.namesrv_port}"
    assert tls_testing.closed_without_answer(addr, RQ.GET_BROKER_CLUSTER_INFO, {})
    context = tls_testing.client_context(processes.files)
    info = tls_testing.call(addr, RQ.GET_BROKER_CLUSTER_INFO, {}, context=context)
    assert info.code == RC.SUCCESS, info.remark

    async def grpc_call(credentials: grpc.ChannelCredentials | None) -> object:
        if credentials is None:
            channel = grpc.aio.insecure_channel(addr)
        else:
            channel = grpc.aio.secure_channel(addr, credentials)
        async with channel:
            return await registry_client.RegistryClient(channel, timeout_s=5).get_cluster_info()

    roots = processes.files.ca_path.read_bytes()
    asyncio.run(grpc_call(grpc.ssl_channel_credentials(roots)))
    with pytest.raises(grpc.aio.AioRpcError):
        asyncio.run(grpc_call(None))


def _scrape(url: str, context: ssl.SSLContext | None) -> str:
    with urllib.request.urlopen(url, timeout=10, context=context) as answer:
        return str(answer.read().decode())


def test_enforcing_broker_serves_metrics_over_https_only(processes: Processes) -> None:
    """``/metrics`` of an enforcing broker answers over HTTPS (verified against the CA) and a
    plain HTTP scrape gets no answer."""
    context = tls_testing.client_context(processes.files)
    body = _scrape(f"https://127.0.0.1:{processes.metrics_port}/metrics", context)
    assert "rocketmq_" in body
    with pytest.raises((urllib.error.URLError, ConnectionError, http.client.HTTPException)):
        _scrape(f"http://127.0.0.1:{processes.metrics_port}/metrics", None)


def test_rotated_certificate_is_served_within_60_s_while_an_open_connection_keeps_sending(
    processes: Processes,
) -> None:
    """A new certificate written over the enforcing broker's files is what new TLS connections
    get within 60 s (polled), while one connection opened before keeps sending throughout and
    after (established sessions are not dropped)."""
    files = processes.files
    _create_topic(processes)
    before = tls_testing.served_fingerprint(processes.enforcing_port, files)
    assert before == tls_testing.file_fingerprint(files)
    context = tls_testing.client_context(files)

    async def go() -> tuple[str, int]:
        client = transport.RemotingClient(ssl_context=context)
        try:
            opened = await client.connection(processes.enforcing)
            ca.write_local(files.ca_path.parent)  # same CA, a fresh server certificate
            rotated = tls_testing.file_fingerprint(files)
            assert rotated != before
            deadline, served, sent = time.monotonic() + 60, before, 0
            while served != rotated:
                assert time.monotonic() < deadline, "the rotated certificate was never served"
                request = command.request(
                    RQ.SEND_MESSAGE_V2, tls_testing.send_header(TOPIC, f"r{sent}"), b"rotating"
                )
                answer = await opened.request(request, 10.0)
                assert answer.code == RC.SUCCESS, answer.remark
                sent += 1
                served = await asyncio.to_thread(
                    tls_testing.served_fingerprint, processes.enforcing_port, files
                )
                await asyncio.sleep(0.2)  # polling the served certificate, with a deadline
            answer = await opened.request(
                command.request(
                    RQ.SEND_MESSAGE_V2, tls_testing.send_header(TOPIC, "after"), b"after"
                ),
                10.0,
            )
            assert answer.code == RC.SUCCESS and not opened.closed, answer.remark
            return served, sent
        finally:
            await client.close()

    served, sent = asyncio.run(go())
    assert served == tls_testing.file_fingerprint(files) and sent >= 1
    ha_testing.poll(  # the metrics port shares the process's certificate (reload interval)
        lambda: tls_testing.served_fingerprint(processes.metrics_port, files) == served,
        "/metrics to serve the rotated certificate",
    )
