"""``ariane dev --secure`` end to end: the command a newcomer runs starts a name server, a master
and a slave with TLS enforcing on every port and ACL 2.0 on, writes the CA and the Super user's
credentials where the issue says, and the official Python client (``tls_enable=True``, signed)
sends and receives through it while unsigned, plaintext or unverified clients are refused.

Own cluster: the subject is the ``ariane dev --secure`` command itself.
"""

from __future__ import annotations

import json
import os
import pathlib
import signal
import ssl
import stat
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from ariane import dev

pytestmark = pytest.mark.slow

HERE = pathlib.Path(__file__).resolve().parent
DRIVER = HERE / "conformance" / "official_py_driver.py"
START_TIMEOUT_S = 120.0


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """``ariane dev --secure`` running (stopped by PID with SIGTERM after the module)."""
    data_dir = tmp_path_factory.mktemp("devsecure")
    log = (data_dir.parent / f"{data_dir.name}.log").open("wb")
    process = subprocess.Popen(
        [sys.executable, "-m", "ariane", "dev", "--secure", "--data-dir", str(data_dir),
         "--namesrv-port", "0", "--workers", "0"],
        stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        assert process.stdout is not None
        line = process.stdout.readline()  # the endpoints, once everything is up
        assert line, f"ariane dev --secure exited with {process.poll()}; log in {log.name}"
        ends = json.loads(line)
        ends["process"] = process
        yield ends
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stdout is not None:
            process.stdout.close()
        log.close()


def _credentials(ends: dict[str, Any]) -> tuple[str, str]:
    saved = json.loads(pathlib.Path(ends["credentials_path"]).read_text())
    return saved["access_key"], saved["secret_key"]


def _admin(ends: dict[str, Any], *args: str, signed: bool = True, tls: bool = True) -> Any:
    cmd = [sys.executable, "-m", "ariane", "admin", "--endpoints", ends["namesrv"]]
    cmd += ["--tls", "--ca-file", ends["ca_path"]] if tls else []
    if signed:
        access_key, secret_key = _credentials(ends)
        cmd += [f"--access-key={access_key}", f"--secret-key={secret_key}"]  # "-…" keys
    env = {k: v for k, v in os.environ.items() if not k.startswith("ARIANE_")}
    return subprocess.run(
        [*cmd, *args], capture_output=True, text=True, timeout=60, check=False, env=env
    )


def _driver(ends: dict[str, Any], *args: str, secret: str | None = None) -> Any:
    access_key, secret_key = _credentials(ends)
    env = dict(os.environ)
    env.update(
        RMQ_DRIVER_TLS="1",
        GRPC_DEFAULT_SSL_ROOTS_FILE_PATH=ends["ca_path"],
        RMQ_DRIVER_ACCESS_KEY=access_key,
        RMQ_DRIVER_SECRET_KEY=secret if secret is not None else secret_key,
    )
    return subprocess.run(
        [sys.executable, str(DRIVER), *args, "--endpoints", ends["namesrv"]],
        capture_output=True, text=True, timeout=180, check=False, env=env,
    )  # fmt: skip


def _events(out: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def test_secure_dev_writes_the_ca_and_private_credentials(secure: dict[str, Any]) -> None:
    """The CA is at ``<data-dir>/tls/ca.pem``, the Super user in ``credentials.json`` (0600),
    a slave runs, and ``/metrics`` answers over HTTPS verified by that CA only."""
    data_dir = pathlib.Path(secure["data_dir"])
    assert pathlib.Path(secure["ca_path"]) == data_dir / "tls" / "ca.pem"
    assert pathlib.Path(secure["credentials_path"]) == data_dir / "credentials.json"
    mode = stat.S_IMODE(os.stat(secure["credentials_path"]).st_mode)
    assert mode == 0o600, oct(mode)
    assert set(json.loads(pathlib.Path(secure["credentials_path"]).read_text())) == {
        "access_key",
        "secret_key",
    }
    assert len(secure["slaves"]) == 1
    assert secure["broker_metrics"].startswith("https://")
    context = ssl.create_default_context(cafile=secure["ca_path"])
    with urllib.request.urlopen(secure["broker_metrics"], context=context, timeout=10) as page:
        assert b"rocketmq_" in page.read()
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(secure["broker_metrics"], timeout=10)  # system roots: refused


def test_official_client_round_trip_over_tls_with_credentials(secure: dict[str, Any]) -> None:
    """The official Python client, TLS on and signed with the Super user, sends 10 messages and
    a SimpleConsumer acks all 10; with a wrong secret its send is refused."""
    done = _admin(secure, "topic", "create", "secure-orders", "--queues", "2")
    assert done.returncode == 0, done.stderr
    sent_run = _driver(secure, "produce", "--topic", "secure-orders", "--count", "10")
    assert sent_run.returncode == 0, sent_run.stderr[-3000:]
    sent = {e["message_id"] for e in _events(sent_run.stdout) if e["event"] == "sent"}
    assert len(sent) == 10
    args = ("--group", "secure-readers", "--topic", "secure-orders", "--count", "10")
    got_run = _driver(secure, "simple-consume", *args, "--deadline-s", "60")
    assert got_run.returncode == 0, got_run.stderr[-3000:]
    assert {e["message_id"] for e in _events(got_run.stdout) if e["event"] == "acked"} == sent
    wrong = _driver(secure, "produce", "--topic", "secure-orders", "--count", "1", secret="nope")
    assert not any(e["event"] == "sent" for e in _events(wrong.stdout)), wrong.stdout


def test_unsigned_or_plaintext_admin_is_refused(secure: dict[str, Any]) -> None:
    """``ariane admin`` without credentials is refused by the ACL; without ``--tls`` it cannot
    talk to the enforcing name server, and says to pass ``--tls --ca-file``."""
    unsigned = _admin(secure, "topic", "create", "secure-nope", signed=False)
    assert unsigned.returncode != 0
    assert "access-key" in unsigned.stderr, unsigned.stderr
    plaintext = _admin(secure, "topic", "list", tls=False)
    assert plaintext.returncode != 0
    assert "--tls --ca-file" in plaintext.stderr, plaintext.stderr
    listed = _admin(secure, "topic", "list")
    assert listed.returncode == 0 and "secure-nope" not in listed.stdout, listed.stderr


def test_dev_still_starts_plain_without_secure(tmp_path: pathlib.Path) -> None:
    """Plain ``dev_cluster`` writes no CA and no credentials and serves plaintext /metrics."""
    with dev.dev_cluster(tmp_path, namesrv_port=0, workers=0) as ends:
        assert ends.ca_path == "" and ends.credentials_path == ""
        assert not (tmp_path / "tls").exists()
        with urllib.request.urlopen(ends.broker_metrics, timeout=10) as page:
            assert page.status == 200
