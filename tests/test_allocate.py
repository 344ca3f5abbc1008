"""Queue allocation strategies match RocketMQ's, queue for queue, and share every queue once."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ariane.common import allocate, ids, route

Strategy = allocate.AllocateStrategy
SHARING = [Strategy.AVG, Strategy.AVG_BY_CIRCLE, Strategy.CONSISTENT_HASH]


def _queues(topic: str, brokers: str, per_broker: int) -> list[route.MessageQueue]:
    return [
        route.MessageQueue(ids.TopicName(topic), ids.BrokerName(b), ids.QueueId(i))
        for b in brokers.split(",")
        for i in range(per_broker)
    ]


def _shares(
    strategy: Strategy, queues: list[route.MessageQueue], members: list[str]
) -> dict[str, str]:
    return {
        m: " ".join(
            f"{q.broker_name}:{q.queue_id}" for q in allocate.allocate(strategy, queues, members, m)
        )
        for m in members
    }


def test_averagely_matches_rocketmq_worked_example() -> None:
    """RocketMQ's AllocateMessageQueueAveragelyTest: 10 queues over 4 consumers are 3, 3, 2, 2
    contiguous queues."""
    queues = _queues("topic", "brokerName", 10)
    members = [f"CID_PREFIX{i}" for i in range(4)]
    got = [
        [q.queue_id for q in allocate.allocate(Strategy.AVG, queues, members, m)] for m in members
    ]
    assert got == [[0, 1, 2], [3, 4, 5], [6, 7], [8, 9]]


def test_by_circle_matches_rocketmq_worked_example() -> None:
    """RocketMQ's AllocateMessageQueueAveragelyByCircleTest: 0,4,8 / 1,5,9 / 2,6 / 3,7, and
    nothing for a client not in the list."""
    queues = _queues("topic", "brokerName", 10)
    members = [f"CID_PREFIX{i}" for i in range(4)]
    got = [
        [q.queue_id for q in allocate.allocate(Strategy.AVG_BY_CIRCLE, queues, members, m)]
        for m in members
    ]
    assert got == [[0, 4, 8], [1, 5, 9], [2, 6], [3, 7]]
    assert allocate.allocate(Strategy.AVG_BY_CIRCLE, queues, members, "CID_PREFIX") == []


# Printed by RocketMQ 5.3.3's own classes (rocketmq-client-5.3.3.jar,
# AllocateMessageQueueConsistentHash(), AllocateMessageQueueAveragely(),
# AllocateMessageQueueAveragelyByCircle()) over sorted queue and client-id lists.
JAVA_CONSISTENT_HASH = [
    (
        ("TopicA", "broker-a,broker-b", 4, ["c1", "c2", "c3"]),
        {
            "c1": "broker-a:0 broker-b:0 broker-b:2 broker-b:3",
            "c2": "broker-a:1 broker-a:2 broker-a:3 broker-b:1",
            "c3": "",
        },
    ),
    (
        ("orders", "broker-a", 8, ["127.0.0.1@1234@0@abc", "127.0.0.1@1235@0@abd"]),
        {
            "127.0.0.1@1234@0@abc": "broker-a:1 broker-a:4 broker-a:6 broker-a:7",
            "127.0.0.1@1235@0@abd": "broker-a:0 broker-a:2 broker-a:3 broker-a:5",
        },
    ),
    (
        (
            "orders",
            "broker-a",
            8,
            ["127.0.0.1@1234@0@abc", "127.0.0.1@1235@0@abd", "127.0.0.1@1236@0@abe"],
        ),
        {
            "127.0.0.1@1234@0@abc": "broker-a:6",
            "127.0.0.1@1235@0@abd": "broker-a:3",
            "127.0.0.1@1236@0@abe": "broker-a:0 broker-a:1 broker-a:2 broker-a:4 broker-a:5 "
            "broker-a:7",
        },
    ),
    (
        ("t", "b0,b1,b2", 3, ["x", "y", "z", "w", "v"]),
        {"v": "", "w": "b0:2 b2:2", "x": "", "y": "b1:0 b1:2 b2:1", "z": "b0:0 b0:1 b1:1 b2:0"},
    ),
]


@pytest.mark.parametrize(("case", "expected"), JAVA_CONSISTENT_HASH)
def test_consistent_hash_matches_rocketmq_java(
    case: tuple[str, str, int, list[str]], expected: dict[str, str]
) -> None:
    """The ring (10 virtual nodes, MD5 hash, MessageQueue.toString keys) gives the queues
    RocketMQ's Java AllocateMessageQueueConsistentHash gives."""
    topic, brokers, per_broker, members = case
    assert _shares(Strategy.CONSISTENT_HASH, _queues(topic, brokers, per_broker), members) == (
        expected
    )


def test_averagely_and_by_circle_match_rocketmq_java_over_brokers() -> None:
    """Nine queues on three brokers over five members: AVG and AVG_BY_CIRCLE as Java prints."""
    queues = _queues("t", "b0,b1,b2", 3)
    members = ["x", "y", "z", "w", "v"]
    assert _shares(Strategy.AVG, queues, members) == {
        "v": "b0:0 b0:1",
        "w": "b0:2 b1:0",
        "x": "b1:1 b1:2",
        "y": "b2:0 b2:1",
        "z": "b2:2",
    }
    assert _shares(Strategy.AVG_BY_CIRCLE, queues, members) == {
        "v": "b0:0 b1:2",
        "w": "b0:1 b2:0",
        "x": "b0:2 b2:1",
        "y": "b1:0 b2:2",
        "z": "b1:1",
    }


def test_ring_hash_is_the_first_four_md5_bytes() -> None:
    """The hash of "" is MD5's d41d8cd9..., read as the unsigned number 0xd41d8cd9."""
    assert allocate.ring_hash("") == 0xD41D8CD9


def test_config_gives_the_configured_queues_that_exist() -> None:
    """CONFIG hands its fixed list to whoever asks, minus queues the topic does not have."""
    queues = _queues("t", "b", 4)
    configured = [queues[3], queues[1], *_queues("t", "gone", 1)]
    for member in ("a", "b"):
        got = allocate.allocate(
            Strategy.CONFIG, queues, ["a", "b"], member, config_queues=configured
        )
        assert got == [queues[1], queues[3]]


_NAMES = st.text(alphabet="abcdefghij0123456789@.-", min_size=1, max_size=12)


@given(
    strategy=st.sampled_from(SHARING),
    brokers=st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, max_size=3, unique=True),
    per_broker=st.integers(min_value=1, max_value=16),
    members=st.lists(_NAMES, min_size=1, max_size=12, unique=True),
    seed=st.randoms(use_true_random=False),
)
def test_every_queue_goes_to_exactly_one_member_whatever_the_input_order(
    strategy: Strategy,
    brokers: list[str],
    per_broker: int,
    members: list[str],
    seed: object,
) -> None:
    """Each sharing strategy partitions the queues over the members, and shuffled inputs give
    the same shares."""
    queues = _queues("T", ",".join(brokers), per_broker)
    shares = {m: allocate.allocate(strategy, queues, members, m) for m in members}
    handed = [q for share in shares.values() for q in share]
    assert sorted(handed) == sorted(queues)
    shuffled_queues, shuffled_members = list(queues), list(members)
    seed.shuffle(shuffled_queues)  # type: ignore[attr-defined]
    seed.shuffle(shuffled_members)  # type: ignore[attr-defined]
    for m in members:
        assert allocate.allocate(strategy, shuffled_queues, shuffled_members, m) == shares[m]
        assert shares[m] == sorted(shares[m])
    if strategy is not Strategy.CONSISTENT_HASH:  # the averaging ones differ by at most one
        sizes = [len(s) for s in shares.values()]
        assert max(sizes) - min(sizes) <= 1


def test_no_queue_or_unknown_member_gets_nothing() -> None:
    """An empty queue list, or a member outside the list, gets an empty share (no error)."""
    for strategy in Strategy:
        assert allocate.allocate(strategy, [], ["a"], "a") == []
        assert allocate.allocate(strategy, _queues("t", "b", 2), ["a"], "z") == []
