"""``ariane dev --slaves 1 --broker-role SYNC_MASTER`` starts a master/slave pair: it prints the
slave's address and the master's HA address, the SYNC_MASTER acks (which it does only with its
slave in sync), the slave holds the bytes, and SIGTERM stops every child."""

from __future__ import annotations

import json
import pathlib
import signal
import subprocess
import sys

import pytest

import ha_testing as ht
from ariane.common import errors

pytestmark = pytest.mark.slow


def test_dev_with_a_slave_runs_a_replicating_sync_master_pair(tmp_path: pathlib.Path) -> None:
    """Proves the pair replicates: a SYNC_MASTER ack, then the slave's CommitLog end equals the
    master's; both addresses are printed; the command exits 0 on SIGTERM."""
    command = [sys.executable, "-m", "ariane", "dev", "--data-dir", str(tmp_path)]
    command += ["--namesrv-port", "0", "--workers", "0", "--slaves", "1"]
    command += ["--broker-role", "SYNC_MASTER"]
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as proc:
        _check_pair(proc)


def _check_pair(proc: subprocess.Popen[str]) -> None:
    try:
        assert proc.stdout is not None and proc.stderr is not None
        ends = json.loads(proc.stdout.readline())
        assert ends["broker_role"] == "SYNC_MASTER"
        assert len(ends["slaves"]) == 1 and ends["master_ha"]
        lines = [proc.stderr.readline(), proc.stderr.readline()]
        assert ends["slaves"][0] in lines[1] and ends["master_ha"] in lines[1], lines
        master, slave = ends["broker"], ends["slaves"][0]
        ht.create_topic(master, "dev-pair")
        ok = int(errors.Code.OK)
        ht.poll(lambda: ht.send(master, "dev-pair", b"replicated") == ok, "a SYNC_MASTER ack")
        end = ht.stats(master).commit_log_max_offset
        assert ht.stats(slave).commit_log_max_offset >= end
        assert ht.stats(slave).role == ht.SLAVE_ROLE
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0


def test_dev_with_an_inner_credential_authenticates_registration_and_replication(
    tmp_path: pathlib.Path,
) -> None:
    """Proves ``--inner-credential`` reaches the name server, master and slave: the pair still
    replicates (a SYNC_MASTER ack needs the authenticated slave), the name server enforces the
    credential, and the config files holding the secret are private (0600)."""
    command = [sys.executable, "-m", "ariane", "dev", "--data-dir", str(tmp_path)]
    command += ["--namesrv-port", "0", "--workers", "0", "--slaves", "1"]
    command += ["--broker-role", "SYNC_MASTER", "--inner-credential", "dev-inner:dev-secret-1"]
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as proc:
        _check_pair(proc)
    assert (
        "broker registration requires the inner credential"
        in (tmp_path / "namesrv.log").read_text()
    )
    for name in ("namesrv.toml", "broker.toml"):
        path = tmp_path / name
        assert "dev-secret-1" in path.read_text() and path.stat().st_mode & 0o077 == 0
    assert "refused" not in (tmp_path / "broker.log").read_text()
