"""Helpers for replication tests with real processes: a name server, brokers with roles, raw
SendMessage/admin calls that return the exact status code, and CommitLog byte comparison."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import pathlib
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import grpc
from google.protobuf.message import Message

from ariane import dev
from ariane.grpcwire import codes, convert, messages, pb, rpc

DEADLINE_S = 30.0
CLIENT = (("x-mq-client-id", "ha-test@1"),)


def spawn(args: list[str], log: pathlib.Path) -> subprocess.Popen[bytes]:
    """Start ``python -m ariane ARGS`` with output appended to ``log``."""
    with log.open("ab") as out:
        return subprocess.Popen([sys.executable, "-m", "ariane", *args], stdout=out, stderr=out)


@contextlib.contextmanager
def running_namesrv_process(
    tmp: pathlib.Path,
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """A name server process on a free port for the ``with`` block; yields ``HOST:PORT`` and
    the process (to pause or kill it)."""
    port = dev.free_port()
    proc = spawn(["namesrv", "--listen", f"127.0.0.1:{port}"], tmp / "namesrv.log")
    try:
        dev.wait_until_listening("127.0.0.1", port, process=proc, timeout_s=DEADLINE_S)
        yield f"127.0.0.1:{port}", proc
    finally:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGCONT)  # a paused one must be able to stop
        dev.stop_process(proc)


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
    ) -> None:
        """Start (or restart on the same store) with ``role`` (and ``extra`` arguments); wait
        until gRPC listens and, for a master, until it takes writes (a replicated master
        acknowledges only once the name servers renewed its lease: ``store.ha.lease``)."""
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
        args += extra
        self.process = spawn(args, tmp / f"{self.name}.log")
        dev.wait_until_listening("127.0.0.1", self.port, process=self.process, timeout_s=DEADLINE_S)
        if role != "SLAVE":
            poll(lambda: stats(self.endpoint).writable, f"{self.name} to take writes")

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
            return await rpc.RegistryClient(channel, timeout_s=10).get_cluster_info()

    info = asyncio.run(call())
    return [
        (convert.address_text(m.client_endpoint), int(m.epoch))
        for g in info.broker_groups
        if g.broker_name == broker_name
        for m in g.members
        if m.broker_id == 0
    ]


def new_broker(tmp: pathlib.Path, name: str) -> Broker:
    """A broker with fresh ports and its own store directory."""
    return Broker(name, tmp / name, dev.free_port(), dev.free_port())


def poll(check: Callable[[], bool], what: str) -> None:
    """Poll ``check`` until true; fail after ``DEADLINE_S``."""
    deadline = time.monotonic() + DEADLINE_S
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


async def _admin(endpoint: str, name: str, request: Message, answer: type[Any]) -> Any:
    async with grpc.aio.insecure_channel(endpoint) as channel:
        return await rpc.unary_call(channel, pb.ADMIN_SERVICE, name, request, answer, timeout_s=10)


def create_topic(endpoint: str, topic: str) -> None:
    """Create a 2-queue NORMAL topic on a master."""
    request = pb.admin.CreateTopicRequest(
        topic=pb.admin.Topic(
            name=topic,
            read_queue_nums=2,
            write_queue_nums=2,
            perm=6,
            message_type=pb.topic.TopicMessageType.TOPIC_MESSAGE_TYPE_NORMAL,
        )
    )
    answer = asyncio.run(_admin(endpoint, "CreateTopic", request, pb.admin.CreateTopicResponse))
    codes.raise_for_status(answer.status)


SLAVE_ROLE = pb.admin.BrokerRole.BROKER_ROLE_SLAVE


def topics(endpoint: str) -> set[str]:
    """The topic names a broker holds (a slave: those its metadata sync copied)."""
    request = pb.admin.ListTopicsRequest()
    answer = asyncio.run(_admin(endpoint, "ListTopics", request, pb.admin.ListTopicsResponse))
    codes.raise_for_status(answer.status)
    return {t.name for t in answer.topics}


def stats(endpoint: str) -> pb.admin.GetBrokerRuntimeStatsResponse:
    """The broker's runtime stats (role, epoch, CommitLog offsets)."""
    request = pb.admin.GetBrokerRuntimeStatsRequest()
    answer = asyncio.run(
        _admin(endpoint, "GetBrokerRuntimeStats", request, pb.admin.GetBrokerRuntimeStatsResponse)
    )
    assert isinstance(answer, pb.admin.GetBrokerRuntimeStatsResponse)
    return answer


def change_role(
    endpoint: str, role: str, *, epoch: int, broker_id: int, master_ha: str = ""
) -> None:
    """ChangeRole on one broker; raises on a non-OK status."""
    request = pb.admin.ChangeRoleRequest(
        role=f"BROKER_ROLE_{role}",
        epoch=epoch,
        broker_id=broker_id,
        master_ha_address=master_ha,
    )
    answer = asyncio.run(_admin(endpoint, "ChangeRole", request, pb.admin.ChangeRoleResponse))
    codes.raise_for_status(answer.status)


def send(endpoint: str, topic: str, body: bytes) -> int:
    """SendMessage of one message straight to ``endpoint``; returns the entry's status code."""

    async def call() -> int:
        props = pb.v2.SystemProperties(
            message_id=body.decode(),
            message_type=pb.v2.MessageType.NORMAL,
            born_timestamp=messages.timestamp(1_700_000_000_000),
            born_host="t",
            body_encoding=pb.v2.Encoding.IDENTITY,
        )
        msg = pb.v2.Message(topic=pb.v2.Resource(name=topic), body=body, system_properties=props)
        async with grpc.aio.insecure_channel(endpoint) as channel:
            answer = await rpc.unary_call(
                channel,
                pb.MESSAGING_SERVICE,
                "SendMessage",
                pb.v2_service.SendMessageRequest(messages=[msg]),
                pb.v2_service.SendMessageResponse,
                timeout_s=20,
                metadata=CLIENT,
            )
        if answer.entries:
            return int(answer.entries[0].status.code)
        return int(answer.status.code)

    return asyncio.run(call())


def commit_log_bytes(store: pathlib.Path, end: int) -> bytes:
    """The first ``end`` bytes of a store's CommitLog, read from its segment files."""
    out = bytearray()
    for segment in sorted((store / "commitlog").iterdir()):
        if segment.name.isdigit():
            out += segment.read_bytes()
        if len(out) >= end:
            break
    return bytes(out[:end])
