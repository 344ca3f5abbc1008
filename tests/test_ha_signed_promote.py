"""A failover on a cluster with TLS enforcing and ACL 2.0 on (``dev.dev_cluster(secure=True)``):
once the master process is stopped, ``failover.promote`` signed with the Super user's keys makes
the slave the master and a signed send to it succeeds; the same promotion unsigned is refused
with an authentication error and leaves the slave a slave.

Own cluster: the master process is stopped (a failover), so no shared cluster can be used.
"""

from __future__ import annotations

import asyncio
import json
import os
import pathlib
import signal
import time

import pytest

import ha_testing as ht
from ariane import client, dev
from ariane.client import failover
from ariane.common import errors

pytestmark = pytest.mark.slow

TOPIC = "signed-failover"
STOP_TIMEOUT_S = 30.0


def _child_pid(listen: str) -> int:
    """The PID of the child of this process started with ``--listen <listen>``."""
    for children in pathlib.Path("/proc/self/task").glob("*/children"):
        for pid in map(int, children.read_text().split()):
            argv = pathlib.Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            if b"--listen" in argv and argv[argv.index(b"--listen") + 1] == listen.encode():
                return pid
    raise AssertionError(f"no child of ours listens on {listen}")


def _gone(pid: int) -> bool:
    """True once ``pid`` has exited (a zombie until ``dev_cluster`` reaps it)."""
    try:
        return pathlib.Path(f"/proc/{pid}/stat").read_text().split(")")[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


async def _send(ends: dev.DevEndpoints, signed: client.Credentials) -> None:
    """Create the topic on the (new) master and send one message there, signed."""
    tls = client.ClientTls(ca_file=ends.ca_path)
    async with client.AdminClient(ends.namesrv, credentials=signed, tls=tls) as admin:
        await admin.create_topic(TOPIC)
    connection = client.ConnectionSettings(credentials=signed, tls=tls)
    settings = client.ProducerSettings(connection=connection)
    async with client.Producer(ends.namesrv, settings=settings) as producer:
        await producer.send(TOPIC, b"after the failover")


def _reported_in_sync(ends: dev.DevEndpoints, tls: client.ClientTls) -> bool:
    """Whether the master's last in-sync report lists slave 1 in sync."""
    report = asyncio.run(failover.last_in_sync_report((ends.namesrv,), "broker-a", tls=tls))
    return report is not None and any(r[1] == 1 and r[2] for r in report.replicas)


def test_signed_failover_promotes_the_slave_and_unsigned_is_refused(
    tmp_path: pathlib.Path,
) -> None:
    """Proves promote signs every call: unsigned it fails with 40100 (slave untouched), signed
    it promotes the slave of a stopped master, which then takes a signed send."""
    with dev.dev_cluster(tmp_path, namesrv_port=0, workers=0, slaves=1, secure=True) as ends:
        saved = json.loads(pathlib.Path(ends.credentials_path).read_text())
        signed = client.Credentials(saved["access_key"], saved["secret_key"])
        tls = client.ClientTls(ca_file=ends.ca_path)
        ht.poll(  # a failover promotes only a slave its master reported in sync (issue 25)
            lambda: _reported_in_sync(ends, tls), "the master's report of its in-sync slave"
        )
        master_pid = _child_pid(ends.broker)
        os.kill(master_pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT_S
        while not _gone(master_pid):
            assert time.monotonic() < deadline, "the master did not stop"
            time.sleep(0.05)

        with pytest.raises(errors.UnauthorizedError):
            asyncio.run(failover.promote((ends.namesrv,), "broker-a", 1, tls=tls, timeout_s=1.0))
        states = asyncio.run(failover.broker_states([ends.slaves[0]], tls=tls, credentials=signed))
        assert states[0] is not None and states[0].role == "SLAVE"

        outcome = asyncio.run(
            failover.promote(
                (ends.namesrv,), "broker-a", 1, role="ASYNC_MASTER", tls=tls, credentials=signed
            )
        )  # ASYNC: a lone SYNC_MASTER refuses sends (min_in_sync_replicas)
        assert outcome.endpoint == ends.slaves[0]
        assert outcome.role == "ASYNC_MASTER" and outcome.old_master == ""

        def sent() -> bool:
            try:
                asyncio.run(_send(ends, signed))
            except errors.ArianeError:
                return False
            return True

        ht.poll(sent, "a signed send to the promoted slave")
