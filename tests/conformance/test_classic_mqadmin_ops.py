"""The official ``mqadmin`` 5.3.3 (``rocketmq-tools``, unmodified) runs an operator's daily
change commands against a real ``ariane namesrv`` + ``ariane broker`` pair: ``deleteTopic``,
``deleteSubGroup``, ``wipeWritePerm``/``addWritePerm``, ``getBrokerConfig``/
``updateBrokerConfig``.

Each mqadmin run is a JVM of a few seconds, so each test batches the commands of one concern
against the module's one cluster, and asserts on what mqadmin printed as a user reads it
(mqadmin exits 0 even when a command failed).
"""

from __future__ import annotations

import json
import pathlib
import re
from collections.abc import Iterator

import pytest

from ariane import dev
from conformance import classic_driver
from conformance.test_official_classic import _config, _mqadmin, _until

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def java(tmp_path_factory: pytest.TempPathFactory) -> classic_driver.ClassicJava:
    """The classic Java tools, fetched and compiled (cached by a stamp)."""
    return classic_driver.build(pathlib.Path(tmp_path_factory.mktemp("mqadmin-ops-logs")))


@pytest.fixture(scope="module")
def ends(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dev.DevEndpoints]:
    """A name server and a broker serving Remoting, shared by this module's tests."""
    with dev.dev_cluster(tmp_path_factory.mktemp("mqadmin-ops"), namesrv_port=0) as found:
        yield found


def _make_topic(java: classic_driver.ClassicJava, ends: dev.DevEndpoints, topic: str) -> None:
    _mqadmin(java, ends, "updateTopic", "-c", "DefaultCluster", "-t", topic, "-r", "2", "-w", "2")
    _until(
        lambda: java.mqadmin("topicRoute", "-t", topic, namesrv=ends.namesrv_remoting),
        lambda text: '"readQueueNums":2' in text,
    )


def test_mqadmin_deletes_topics_and_groups(
    ends: dev.DevEndpoints, java: classic_driver.ClassicJava
) -> None:
    """deleteTopic -c removes a topic that holds a message from the broker (topics.json) and
    the name server (topicList, topicRoute); deleteSubGroup -c removes a group, and its
    ``%RETRY%``/``%DLQ%`` topics, which do not exist, without an exception."""
    _make_topic(java, ends, "mq-gone")
    out = _mqadmin(java, ends, "sendMessage", "-t", "mq-gone", "-p", "bye")
    assert "SEND_OK" in out, out

    out = _mqadmin(java, ends, "deleteTopic", "-c", "DefaultCluster", "-t", "mq-gone")
    assert "delete topic [mq-gone] from cluster [DefaultCluster] success." in out, out
    assert "delete topic [mq-gone] from NameServer success." in out, out
    assert "mq-gone" not in json.loads(_config(ends, "topics.json"))["topics"]
    assert "mq-gone" not in _mqadmin(java, ends, "topicList").split()
    route = java.mqadmin("topicRoute", "-t", "mq-gone", namesrv=ends.namesrv_remoting)
    assert "No topic route info" in route, route

    out = _mqadmin(java, ends, "updateSubGroup", "-c", "DefaultCluster", "-g", "mq-gone-g")
    assert "success" in out, out
    assert "mq-gone-g" in json.loads(_config(ends, "subscriptionGroup.json"))["groups"]
    out = _mqadmin(java, ends, "deleteSubGroup", "-c", "DefaultCluster", "-g", "mq-gone-g")
    assert (
        f"delete subscription group [mq-gone-g] from broker [{ends.broker_remoting}] in "
        "cluster [DefaultCluster] success." in out
    ), out
    assert "mq-gone-g" not in json.loads(_config(ends, "subscriptionGroup.json"))["groups"]


def _changed(out: str, verb: str, namesrv: str) -> int:
    """The topic count of mqadmin's "<verb> write perm of broker[broker-a] ... OK, N" line
    (-1 when absent)."""
    line = rf"{verb} write perm of broker\[broker-a\] in name server\[{re.escape(namesrv)}\] OK, "
    found = re.search(line + r"(\d+)", out)
    return int(found.group(1)) if found else -1


def test_mqadmin_wipes_and_adds_write_permission(
    ends: dev.DevEndpoints, java: classic_driver.ClassicJava
) -> None:
    """wipeWritePerm -b broker-a, sent to the name server, makes the broker's topics read-only
    (the route shows perm 4, the broker persists it, a send is refused) and reports how many
    topics changed; addWritePerm -b broker-a gives write back (perm 6, a send succeeds)."""
    _make_topic(java, ends, "mq-perm")
    ns = ends.namesrv_remoting
    out = _mqadmin(java, ends, "wipeWritePerm", "-b", "broker-a")
    assert _changed(out, "wipe", ns) >= 1, out
    route = _until(
        lambda: _mqadmin(java, ends, "topicRoute", "-t", "mq-perm"),
        lambda text: '"perm":4' in text,
    )
    assert '"perm":4' in route, route
    assert json.loads(_config(ends, "topics.json"))["topics"]["mq-perm"]["perm"] == 4
    refused = java.mqadmin("sendMessage", "-t", "mq-perm", "-p", "x", namesrv=ns)
    assert "SEND_OK" not in refused, refused

    out = _mqadmin(java, ends, "addWritePerm", "-b", "broker-a")
    assert _changed(out, "add", ns) >= 1, out
    route = _until(
        lambda: _mqadmin(java, ends, "topicRoute", "-t", "mq-perm"),
        lambda text: '"perm":6' in text,
    )
    assert '"perm":6' in route, route
    assert "SEND_OK" in _mqadmin(java, ends, "sendMessage", "-t", "mq-perm", "-p", "y")
