"""The official ``rocketmq-client-nodejs`` (npm 1.0.8), unmodified, sends, receives and acks."""

from __future__ import annotations

import json
import pathlib
import subprocess

import pytest

from conformance import polyglot
from conformance.conftest import Cluster

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def node_client() -> pathlib.Path:
    """The Node driver with its pinned dependencies installed (``npm ci``)."""
    return polyglot.node_driver()


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
