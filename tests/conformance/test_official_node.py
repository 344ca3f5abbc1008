"""The official ``rocketmq-client-nodejs`` (npm 1.0.8), unmodified, sends, receives and acks."""

from __future__ import annotations

import fcntl
import json
import pathlib
import shutil
import subprocess

import pytest

from conformance.conftest import Cluster

pytestmark = pytest.mark.slow

NODE_DIR = pathlib.Path(__file__).resolve().parent / "node"


@pytest.fixture(scope="module")
def node_client() -> pathlib.Path:
    """The Node driver with its pinned dependencies installed (``npm ci``, one install at a
    time: an flock on ``node_modules.lock`` beside it keeps parallel workers off each other)."""
    npm = shutil.which("npm")
    assert npm is not None, "npm is required (Node 20 is part of this machine's toolchain)"
    with (NODE_DIR / "node_modules.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (NODE_DIR / "node_modules" / "rocketmq-client-nodejs").is_dir():
            subprocess.run(
                [npm, "ci", "--no-audit", "--no-fund"],
                cwd=NODE_DIR,
                check=True,
                timeout=600,
                capture_output=True,
            )
    return NODE_DIR / "driver.mjs"


def test_node_client_sends_receives_and_acks(cluster: Cluster, node_client: pathlib.Path) -> None:
    """Five messages sent by the Node producer come back to its SimpleConsumer and are acked."""
    cluster.admin("topic", "create", "from-node", "--queues", "2", "--type", "NORMAL")
    done = subprocess.run(
        ["node", str(node_client), cluster.namesrv, "from-node", "node-group", "5"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert done.returncode == 0, done.stderr[-2000:]
    sent = {e["message_id"] for e in events if e["event"] == "sent"}
    received = [e for e in events if e["event"] == "received"]
    assert len(sent) == 5
    assert {e["message_id"] for e in received} == sent
    assert all(e["tag"] == "node" and e["attempt"] == 1 for e in received)
    assert events[-1]["missing"] == []
