"""Lite topics (RocketMQ 5.5, RIP-83) with the official Python client 5.1.2 (``Message.lite_topic``,
``LitePushConsumer``, ``LiteSimpleConsumer``; own process) against real processes: a LITE parent
made with ``ariane admin topic create --type LITE``, lite topics created by the producer's
sends, each lite consumer receiving exactly the lite topics it subscribed, and the name rules
and quotas answering their codes.

Own cluster: the quota test needs a broker whose ``[lite]`` quotas are small (two lite topics,
one lite subscription per client), which would refuse other tests' lite sends on a shared one."""

from __future__ import annotations

import pathlib
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from conformance.conftest import Cluster, ProcessCluster

TOPIC = "py-lite"
QUOTA_TOML = """
[lite]
lite_topics_max = 2
subscription_quota = 1
"""


def _lite(cluster: Cluster, *args: str) -> tuple[int, list[dict[str, Any]]]:
    return cluster.run_driver("lite", "--topic", TOPIC, "--deadline-s", "30", *args)


def _received(events: list[dict[str, Any]]) -> Counter[tuple[str, str]]:
    return Counter(
        (e["lite_topic"], e["body"]) for e in events if e["event"] in ("received", "consumed")
    )


@pytest.fixture(scope="module")
def lite_parent(cluster: Cluster) -> Cluster:
    """The shared cluster with the module's LITE parent topic."""
    cluster.admin("topic", "create", TOPIC, "--queues", "4", "--type", "LITE")
    return cluster


@pytest.mark.parametrize("kind", ["simple", "push"])
def test_a_lite_consumer_receives_the_lite_topics_it_subscribed(
    lite_parent: Cluster, kind: str
) -> None:
    """A LiteSimpleConsumer / LitePushConsumer subscribed to two lite topics gets the three
    messages the producer sent to them, each with its ``lite_topic``, and not the one sent to a
    third lite topic (created by that send all the same)."""
    code, events = _lite(
        lite_parent, "--group", f"lite-{kind}", "--consumer", kind,
        "--subscribe", f"{kind}-a,{kind}-b", "--send", f"{kind}-a,{kind}-c,{kind}-b,{kind}-a",
        "--count", "3",
    )  # fmt: skip
    assert code == 0, events
    (subscribed,) = [e for e in events if e["event"] == "subscribed"]
    assert subscribed["lite_topics"] == [f"{kind}-a", f"{kind}-b"]
    assert [e["lite_topic"] for e in events if e["event"] == "sent"] == [
        f"{kind}-a", f"{kind}-c", f"{kind}-b", f"{kind}-a",
    ]  # fmt: skip
    assert _received(events) == Counter(
        {(f"{kind}-a", f"{kind}-a-0"): 1, (f"{kind}-b", f"{kind}-b-2"): 1,
         (f"{kind}-a", f"{kind}-a-3"): 1}
    )  # fmt: skip


def test_bad_lite_topic_names_answer_illegal_lite_topic(lite_parent: Cluster) -> None:
    """Sends to lite topics with a dot, a space, or 65 characters answer ILLEGAL_LITE_TOPIC
    (40020) to the official producer; a good name next to them is stored."""
    bad = ["a.b", "a b", "x" * 65]
    code, events = _lite(
        lite_parent, "--group", "lite-names", "--consumer", "simple",
        "--send", ",".join([*bad, "fine"]), "--count", "0",
    )  # fmt: skip
    assert code == 0, events
    errors = [e for e in events if e["event"] == "error"]
    assert [e["lite_topic"] for e in errors] == bad
    assert all("40020" in e["message"] for e in errors), errors
    assert [e["lite_topic"] for e in events if e["event"] == "sent"] == ["fine"]


@pytest.fixture(scope="module")
def quota_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProcessCluster]:
    """A cluster of its own whose broker holds 2 lite topics and 1 subscription per client."""
    made = ProcessCluster(
        pathlib.Path(tmp_path_factory.mktemp("lite-quota")), broker_toml=QUOTA_TOML
    )
    try:
        made.admin("topic", "create", TOPIC, "--queues", "2", "--type", "LITE")
        yield made
    finally:
        made.stop()


def test_lite_quotas_answer_their_codes(quota_cluster: ProcessCluster) -> None:
    """With ``lite_topics_max = 2`` a third new lite topic answers LITE_TOPIC_QUOTA_EXCEEDED
    (42901) to the official producer while the two existing ones still take messages; with
    ``subscription_quota = 1`` announced in the settings reply the official consumer refuses a
    second subscription with LiteSubscriptionQuotaExceededException (42902) and keeps the
    first, which still receives. (One-letter names: 5.1.2's ``subscribe_lite`` sends a name's
    letters as the set, which a quota of 1 refuses for longer names.)"""
    code, events = _lite(
        quota_cluster, "--group", "lite-quota", "--consumer", "simple",
        "--subscribe", "p,q", "--send", "p,q,r,p", "--count", "2",
    )  # fmt: skip
    assert code == 0, events
    errors = [e for e in events if e["event"] == "error"]
    assert [(e["type"], e["lite_topic"]) for e in errors] == [
        ("LiteSubscriptionQuotaExceededException", "q"),
        ("LiteTopicQuotaExceededException", "r"),
    ], events
    assert "42902" in errors[0]["message"] and "42901" in errors[1]["message"], errors
    (subscribed,) = [e for e in events if e["event"] == "subscribed"]
    assert subscribed["lite_topics"] == ["p"]
    assert [e["lite_topic"] for e in events if e["event"] == "sent"] == ["p", "q", "p"]
    assert _received(events) == Counter({("p", "p-0"): 1, ("p", "p-3"): 1})
