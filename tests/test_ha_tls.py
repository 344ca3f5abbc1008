"""TLS on the HA port (issue 21 item 6; RocketMQ's HA port is plain NIO): with ``[tls]
server_mode = "enforcing"`` on both brokers the slave dials its master over TLS (verifying the
master against ``trust_cert_path``, presenting its own certificate) and replicates the master's
CommitLog byte for byte, while a raw plaintext connection to the HA port is closed before a
single byte is sent to it.

One module-scoped group: a permissive name server (the brokers register with it whatever their
gRPC transport), an ASYNC_MASTER and a SLAVE, both enforcing, with 64 KiB CommitLog segments.
Messages go in over the master's TLS Remoting port (no plaintext gRPC to an enforcing broker).

Own cluster: a master and a slave with ``[tls]`` enforcing and their own certificates are the
subject.
"""

from __future__ import annotations

import asyncio
import dataclasses
import pathlib
import socket
import struct
import time
from collections.abc import Iterator

import pytest

import ha_testing
import tls_testing
from ariane import dev
from ariane.remoting import command, transport
from ariane.security import ca
from tls_testing import RC, RQ

TOPIC = "ha-tls"
SEGMENT_BYTES = 65536


@dataclasses.dataclass(frozen=True)
class Group:
    """The running master and slave."""

    master: ha_testing.Broker
    slave: ha_testing.Broker
    master_remoting: str
    files: ca.LocalTlsFiles


def _start(
    tmp: pathlib.Path,
    broker: ha_testing.Broker,
    namesrv: str,
    role: str,
    toml: str,
    master_ha: str = "",
) -> tuple[str, int]:
    """Spawn ``broker`` with ``role`` and a Remoting port (its process set; a slave follows
    ``master_ha``); the Remoting ``HOST:PORT`` and port."""
    remoting_port = dev.free_port()
    args = [
        "broker",
        *("--listen", broker.endpoint, "--store-dir", str(broker.store)),
        *("--broker-name", "ha-group", "--broker-id", "0" if role != "SLAVE" else "1"),
        *("--namesrv", namesrv, "--workers", "0", "--broker-role", role),
        *("--ha-listen", broker.ha, "--flush-disk-type", "SYNC_FLUSH"),
        *("--remoting-listen", f"127.0.0.1:{remoting_port}"),
        *ha_testing.small_store_config(tmp, broker.name, toml),
        *(("--master-ha", master_ha) if master_ha else ()),
    ]
    broker.process = ha_testing.spawn(args, tmp / f"{broker.name}.log")
    return f"127.0.0.1:{remoting_port}", remoting_port


@pytest.fixture(scope="module")
def group(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Group]:
    """A permissive name server and an enforcing ASYNC_MASTER + SLAVE pair."""
    tmp = tmp_path_factory.mktemp("ha-tls")
    files = ca.write_local(tmp / "certs")
    config = tmp / "namesrv.toml"
    config.write_text(tls_testing.tls_toml(files, "permissive"))
    toml = tls_testing.tls_toml(files, "enforcing")
    master, slave = ha_testing.new_broker(tmp, "master"), ha_testing.new_broker(tmp, "slave")
    with ha_testing.running_namesrv_process(tmp, ("--config", str(config))) as (namesrv, _):
        try:
            master_remoting, port = _start(tmp, master, namesrv, "ASYNC_MASTER", toml)
            assert master.process is not None
            dev.wait_until_listening(
                "127.0.0.1", port, process=master.process, timeout_s=ha_testing.DEADLINE_S
            )
            _, port = _start(tmp, slave, namesrv, "SLAVE", toml, master.ha)
            assert slave.process is not None
            dev.wait_until_listening(
                "127.0.0.1", port, process=slave.process, timeout_s=ha_testing.DEADLINE_S
            )
            yield Group(master, slave, master_remoting, files)
        finally:
            master.stop()
            slave.stop()


def _send_until_stored(group: Group, count: int) -> None:
    """Create the topic over TLS, then send ``count`` messages (the first retried until the
    master holds its lease and takes writes)."""
    context = tls_testing.client_context(group.files)

    async def go() -> None:
        client = transport.RemotingClient(ssl_context=context)
        try:
            header = tls_testing.topic_header(TOPIC)
            made = await client.invoke(
                group.master_remoting, command.request(RQ.UPDATE_AND_CREATE_TOPIC, header), 10.0
            )
            assert made.code == RC.SUCCESS, made.remark
            deadline, sent = time.monotonic() + ha_testing.DEADLINE_S, 0
            while sent < count:
                request = command.request(
                    RQ.SEND_MESSAGE_V2, tls_testing.send_header(TOPIC, f"k{sent}"), b"x" * 100
                )
                answer = await client.invoke(group.master_remoting, request, 10.0)
                if answer.code == RC.SUCCESS:
                    sent += 1
                    continue
                assert time.monotonic() < deadline, f"the master never took writes: {answer}"
                await asyncio.sleep(0.1)  # polling for the master's lease, with a deadline
        finally:
            await client.close()

    asyncio.run(go())


def test_slave_replicates_from_an_enforcing_master_over_tls(group: Group) -> None:
    """Messages sent to the enforcing master appear byte for byte in the enforcing slave's
    CommitLog (the HA port refuses plaintext, so the copy went over TLS)."""
    _send_until_stored(group, 3)
    expected = ha_testing.commit_log_bytes(group.master.store, SEGMENT_BYTES)
    assert expected.count(b"x" * 100) == 3
    ha_testing.poll(
        lambda: (
            ha_testing.commit_log_bytes(group.slave.store, SEGMENT_BYTES)
            == ha_testing.commit_log_bytes(group.master.store, SEGMENT_BYTES)
        ),
        "the slave to hold the master's CommitLog bytes",
    )


def test_a_raw_plaintext_connection_to_the_ha_port_is_closed_unserved(group: Group) -> None:
    """A plaintext HELLO (kind 1, epoch 0, offset 0: what streamed the whole CommitLog before)
    to the enforcing master's HA port is answered by a close, with no byte sent back."""
    with socket.create_connection(("127.0.0.1", group.master.ha_port), timeout=10) as raw:
        raw.sendall(struct.pack(">Bqq", 1, 0, 0))
        try:
            first = raw.recv(65536)
        except ConnectionResetError:
            first = b""  # closed with our HELLO unread
        except TimeoutError:
            pytest.fail("the HA port kept the plaintext connection open for 10 s")
    assert first == b"", f"the HA port answered plaintext with {len(first)} bytes"
