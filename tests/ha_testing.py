"""Helpers for replication tests with real processes: a name server, brokers with roles, raw
SendMessage/admin calls that return the exact status code, and CommitLog byte comparison. Calls
take an optional ``user`` (access key, secret key): they are then signed as the official clients
sign (ACL 2.0), for brokers with ``[auth] authentication_enabled``.

Processes start, stop and are waited for through the one process layer,
``e2e.testenv.processes`` (``spawn``, ``running_namesrv_process`` and ``poll`` here are thin
aliases kept because dozens of test files call them)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import pathlib
import signal
import subprocess
from collections.abc import Callable, Iterator
from typing import Any

import grpc
from e2e.testenv import processes
from google.protobuf.message import Message

from ariane import dev
from ariane.client import credentials
from ariane.common import errors
from ariane.grpcwire import codes, convert, messages, pb, registry_client, rpc

DEADLINE_S = 30.0
SMALL_STORE_TOML = (
    "[store]\n"
    "commit_log_file_size_bytes = 1048576\n"
    "consume_queue_file_entries = 4096\n"
    "message_size_bytes_max = 262144\n"
    "[index]\n"
    "hash_slot_count = 1024\n"
    "index_count_max = 4096\n"
)
"""What a broker started without ``--config`` runs with: 1 MiB CommitLog segments, 4,096-unit
ConsumeQueue files and a small key index (RocketMQ's 1 GiB segments and 420 MB index are
nobody's subject here; a test about sizes passes its own ``--config``)."""
CLIENT = (("x-mq-client-id", "ha-test@1"),)

User = tuple[str, str]
"""An access key and its secret key."""


def signed(user: User | None) -> tuple[tuple[str, str], ...]:
    """The v2 signature headers of one call as ``user``, signed now (none for ``None``)."""
    return credentials.Credentials(*user).headers() if user is not None else ()


spawn = processes.spawn_ariane
"""Start ``python -m ariane ARGS`` with output appended to ``log`` (tracked for log tails)."""


def running_namesrv_process(
    tmp: pathlib.Path, extra: tuple[str, ...] = ()
) -> contextlib.AbstractContextManager[tuple[str, subprocess.Popen[bytes]]]:
    """A name server process on a free port (with ``extra`` arguments) for the ``with`` block;
    yields ``HOST:PORT`` and the process (to pause or kill it)."""
    return processes.running_namesrv(tmp / "namesrv.log", extra)


@contextlib.contextmanager
def running_namesrv(tmp: pathlib.Path) -> Iterator[str]:
    """A name server process on a free port for the ``with`` block; yields ``HOST:PORT``."""
    with running_namesrv_process(tmp) as (endpoint, _):
        yield endpoint


@dataclasses.dataclass
class Broker:
    """One broker process of a group and where it listens."""

    name: str
    store: pathlib.Path
    port: int
    ha_port: int
    process: subprocess.Popen[bytes] | None = None
    user: User | None = None
    """Who ``start`` signs its readiness polls as (a broker enforcing authentication)."""

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def ha(self) -> str:
        return f"127.0.0.1:{self.ha_port}"

    def start(
        self,
        tmp: pathlib.Path,
        namesrv: str,
        role: str,
        *,
        broker_id: int,
        master_ha: str = "",
        extra: tuple[str, ...] = (),
        wait_writable: bool = True,
    ) -> None:
        """Start (or restart on the same store) with ``role`` (and ``extra`` arguments); wait
        until gRPC listens and, for a master (unless ``wait_writable`` is False: a stale master
        never takes writes), until it takes writes (a replicated master acknowledges only once
        the name servers renewed its lease: ``store.ha.lease``)."""
        args = [
            "broker",
            "--listen",
            self.endpoint,
            "--store-dir",
            str(self.store),
            "--broker-name",
            "ha-group",
            "--broker-id",
            str(broker_id),
            "--namesrv",
            namesrv,
            "--workers",
            "0",
            "--broker-role",
            role,
            "--ha-listen",
            self.ha,
            "--flush-disk-type",
            "SYNC_FLUSH",
        ]
        if master_ha:
            args += ["--master-ha", master_ha]
        if "--config" not in extra:
            config = tmp / f"{self.name}-small-store.toml"
            config.write_text(SMALL_STORE_TOML)
            args += ["--config", str(config)]
        args += extra
        self.process = spawn(args, tmp / f"{self.name}.log")
        listening_s = processes.loaded_timeout_s(DEADLINE_S)
        dev.wait_until_listening(
            "127.0.0.1", self.port, process=self.process, timeout_s=listening_s
        )
        if role != "SLAVE" and wait_writable:
            poll(
                lambda: stats(self.endpoint, user=self.user).writable,
                f"{self.name} to take writes",
            )

    def kill(self) -> None:
        """SIGKILL and reap."""
        assert self.process is not None
        self.process.kill()
        self.process.wait()
        self.process = None

    def stop(self) -> None:
        """Stop cleanly if running (SIGTERM, then SIGKILL after the grace)."""
        if self.process is not None:
            dev.stop_process(self.process)
            self.process = None


def cluster_masters(namesrv: str, broker_name: str = "ha-group") -> list[tuple[str, int]]:
    """(client endpoint, epoch) of the id-0 member(s) of ``broker_name`` the name server lists."""

    async def call() -> pb.registry.GetClusterInfoResponse:
        async with grpc.aio.insecure_channel(namesrv) as channel:
            return await registry_client.RegistryClient(channel, timeout_s=10).get_cluster_info()

    info = asyncio.run(call())
    return [
        (convert.address_text(m.client_endpoint), int(m.epoch))
        for g in info.broker_groups
        if g.broker_name == broker_name
        for m in g.members
        if m.broker_id == 0
    ]


def reported_in_sync(namesrv: str, broker_id: int = 1, broker_name: str = "ha-group") -> bool:
    """Whether the master's last in-sync report at the name server lists ``broker_id`` in sync
    (a failover promotes no other slave: issue 25)."""

    async def call() -> pb.registry.GetClusterInfoResponse:
        async with grpc.aio.insecure_channel(namesrv) as channel:
            return await registry_client.RegistryClient(channel, timeout_s=10).get_cluster_info()

    return any(
        r.broker_id == broker_id and r.in_sync
        for g in asyncio.run(call()).broker_groups
        if g.broker_name == broker_name
        for r in g.in_sync_report.replicas
    )


def new_broker(tmp: pathlib.Path, name: str, *, user: User | None = None) -> Broker:
    """A broker with fresh ports and its own store directory (``user``: see ``Broker.user``)."""
    return Broker(name, tmp / name, dev.free_port(), dev.free_port(), user=user)


def poll(check: Callable[[], bool], what: str) -> None:
    """Poll ``check`` until true; ``TimeoutError`` naming ``what`` after ``DEADLINE_S`` (a hang
    guard: stretched on a loaded machine, ``processes.loaded_timeout_s``)."""
    processes.wait_until(check, timeout_s=processes.loaded_timeout_s(DEADLINE_S), what=what)


async def _admin(
    endpoint: str, name: str, request: Message, answer: type[Any], *, user: User | None = None
) -> Any:
    async with grpc.aio.insecure_channel(endpoint) as channel:
        return await rpc.unary_call(
            channel,
            pb.ADMIN_SERVICE,
            name,
            request,
            answer,
            timeout_s=10,
            metadata=signed(user),
        )


def admin(
    endpoint: str, name: str, request: Message, answer: type[Any], *, user: User | None = None
) -> Any:
    """One ``ariane.admin.v1.Admin`` call (signed as ``user``); the response, whatever its
    status."""
    return asyncio.run(_admin(endpoint, name, request, answer, user=user))


def create_topic(
    endpoint: str, topic: str, *, message_type: str = "NORMAL", user: User | None = None
) -> None:
    """Create a 2-queue topic of ``message_type`` (NORMAL, TRANSACTION, ...) on a master."""
    request = pb.admin.CreateTopicRequest(
        topic=pb.admin.Topic(
            name=topic,
            read_queue_nums=2,
            write_queue_nums=2,
            perm=6,
            message_type=f"TOPIC_MESSAGE_TYPE_{message_type}",
        )
    )
    answer = admin(endpoint, "CreateTopic", request, pb.admin.CreateTopicResponse, user=user)
    codes.raise_for_status(answer.status)


SLAVE_ROLE = pb.admin.BrokerRole.BROKER_ROLE_SLAVE


def topics(endpoint: str, *, include_system: bool = False, user: User | None = None) -> set[str]:
    """The topic names a broker holds (a slave: those its metadata sync copied)."""
    request = pb.admin.ListTopicsRequest(include_system=include_system)
    answer = admin(endpoint, "ListTopics", request, pb.admin.ListTopicsResponse, user=user)
    codes.raise_for_status(answer.status)
    return {t.name for t in answer.topics}


def stats(endpoint: str, *, user: User | None = None) -> pb.admin.GetBrokerRuntimeStatsResponse:
    """The broker's runtime stats (role, epoch, CommitLog offsets)."""
    request = pb.admin.GetBrokerRuntimeStatsRequest()
    answer = admin(
        endpoint,
        "GetBrokerRuntimeStats",
        request,
        pb.admin.GetBrokerRuntimeStatsResponse,
        user=user,
    )
    assert isinstance(answer, pb.admin.GetBrokerRuntimeStatsResponse)
    return answer


def change_role(
    endpoint: str,
    role: str,
    *,
    epoch: int,
    broker_id: int,
    master_ha: str = "",
    user: User | None = None,
) -> None:
    """ChangeRole on one broker; raises on a non-OK status. A promotion returns once the
    broker takes writes: a master keeps a lease, and a broker just (re)started holds none until
    its first renewal with the name servers (``store.ha.lease``)."""
    request = pb.admin.ChangeRoleRequest(
        role=f"BROKER_ROLE_{role}",
        epoch=epoch,
        broker_id=broker_id,
        master_ha_address=master_ha,
    )
    answer = admin(endpoint, "ChangeRole", request, pb.admin.ChangeRoleResponse, user=user)
    codes.raise_for_status(answer.status)
    if role != "SLAVE":
        poll(lambda: stats(endpoint, user=user).writable, f"{endpoint} to take writes as {role}")


def send(endpoint: str, topic: str, body: bytes, *, user: User | None = None) -> int:
    """SendMessage of one message straight to ``endpoint``; returns the entry's status code."""
    return send_batch(endpoint, topic, [body], user=user)[0]


def send_batch(
    endpoint: str, topic: str, bodies: list[bytes], *, user: User | None = None
) -> list[int]:
    """One SendMessage request carrying ``bodies`` (all-or-nothing on the broker); returns each
    entry's status code (the request's code for each when it has no entries)."""

    def one(body: bytes) -> pb.v2.Message:
        props = pb.v2.SystemProperties(
            message_id=body.decode(),
            message_type=pb.v2.MessageType.NORMAL,
            born_timestamp=messages.timestamp(1_700_000_000_000),
            born_host="t",
            body_encoding=pb.v2.Encoding.IDENTITY,
        )
        return pb.v2.Message(topic=pb.v2.Resource(name=topic), body=body, system_properties=props)

    async def call() -> list[int]:
        async with grpc.aio.insecure_channel(endpoint) as channel:
            answer = await rpc.unary_call(
                channel,
                pb.MESSAGING_SERVICE,
                "SendMessage",
                pb.v2_service.SendMessageRequest(messages=[one(b) for b in bodies]),
                pb.v2_service.SendMessageResponse,
                timeout_s=20,
                metadata=CLIENT + signed(user),
            )
        if answer.entries:
            return [int(entry.status.code) for entry in answer.entries]
        return [int(answer.status.code)] * len(bodies)

    return asyncio.run(call())


def queue_end(endpoint: str, topic: str, queue_id: int) -> int:
    """A queue's max offset (the next one to be written) on ``endpoint`` (QueryOffset END)."""

    async def call() -> int:
        request = pb.v2_service.QueryOffsetRequest(
            message_queue=pb.v2.MessageQueue(topic=pb.v2.Resource(name=topic), id=queue_id),
            query_offset_policy=pb.v2.QueryOffsetPolicy.END,
        )
        async with grpc.aio.insecure_channel(endpoint) as channel:
            answer = await rpc.unary_call(
                channel,
                pb.MESSAGING_SERVICE,
                "QueryOffset",
                request,
                pb.v2_service.QueryOffsetResponse,
                timeout_s=10,
                metadata=CLIENT,
            )
        codes.raise_for_status(answer.status)
        return int(answer.offset)

    return asyncio.run(call())


@contextlib.contextmanager
def synced_pair(
    tmp: pathlib.Path, namesrv: str, topic: str, extra: tuple[str, ...]
) -> Iterator[tuple[Broker, Broker]]:
    """An ASYNC_MASTER and its SLAVE started with ``extra``, ``topic`` created with one message,
    held until the slave has synced the topic and holds the master's bytes, and the master has
    reported it in sync to the name server; both stopped after
    the block (a SIGSTOPped one is continued first)."""
    master, slave = new_broker(tmp, "master"), new_broker(tmp, "slave")
    try:
        master.start(tmp, namesrv, "ASYNC_MASTER", broker_id=0, extra=extra)
        slave.start(tmp, namesrv, "SLAVE", broker_id=1, master_ha=master.ha, extra=extra)
        create_topic(master.endpoint, topic)
        assert send(master.endpoint, topic, b"before") == int(errors.Code.OK)
        poll(lambda: topic in topics(slave.endpoint), "the topic synced to the slave")
        poll(
            lambda: (
                stats(slave.endpoint).commit_log_max_offset
                >= stats(master.endpoint).commit_log_max_offset
            ),
            "the slave to hold the master's bytes",
        )
        poll(lambda: reported_in_sync(namesrv), "the master's report of its in-sync slave")
        yield master, slave
    finally:
        for broker in (master, slave):
            if broker.process is not None:
                broker.process.send_signal(signal.SIGCONT)
            broker.stop()


def small_store_config(tmp: pathlib.Path, name: str, extra_toml: str = "") -> tuple[str, ...]:
    """``--config`` arguments of a broker TOML with 64 KiB CommitLog segments, 64-unit
    ConsumeQueue files and a tiny key index (never 1 GiB files in a test), plus ``extra_toml``."""
    config = tmp / f"{name}.toml"
    config.write_text(
        "[store]\n"
        "commit_log_file_size_bytes = 65536\n"
        "consume_queue_file_entries = 64\n"
        "message_size_bytes_max = 16384\n"
        "write_buffer_bytes = 131072\n"
        "[index]\n"
        "hash_slot_count = 64\n"
        "index_count_max = 256\n" + extra_toml
    )
    return ("--config", str(config))


def commit_log_bytes(store: pathlib.Path, end: int) -> bytes:
    """The first ``end`` bytes of a store's CommitLog, read from its segment files."""
    out = bytearray()
    for segment in sorted((store / "commitlog").iterdir()):
        if segment.name.isdigit():
            out += segment.read_bytes()
        if len(out) >= end:
            break
    return bytes(out[:end])
