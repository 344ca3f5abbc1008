"""Names, codes and values of ``ariane.common`` behave as RocketMQ's do."""

from __future__ import annotations

import os
import pathlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ariane.common import clock, delay, errors, ids, message, process, topics


def test_topic_rules_accept_legal_and_reject_illegal_names() -> None:
    """TopicValidator's rules: charset, 127 chars, 255 for retry/DLQ, system topics reserved."""
    assert topics.validate_topic("orders_2013-NYC") == "orders_2013-NYC"
    assert topics.validate_topic("a" * 127) == "a" * 127
    for bad in ["", "a" * 128, "has space", "dot.ted", "semi;colon", "SCHEDULE_TOPIC_XXXX"]:
        with pytest.raises(errors.IllegalTopicError):
            topics.validate_topic(bad)
    with pytest.raises(errors.IllegalTopicError):
        topics.validate_topic("rmq_sys_anything")
    assert topics.validate_topic("SCHEDULE_TOPIC_XXXX", allow_system=True)
    long_retry = "%RETRY%" + "g" * 200
    assert topics.validate_topic(long_retry) == long_retry


@given(st.text(alphabet="%abcXYZ019_-", min_size=1, max_size=127))
def test_every_name_of_the_legal_alphabet_is_accepted(name: str) -> None:
    """Any 1..127-character name drawn from the legal alphabet passes unless reserved."""
    if topics.is_system_topic(name):
        return
    assert topics.validate_topic(name) == name


def test_retry_and_dlq_topics_round_trip_to_their_group() -> None:
    """%RETRY%<group> and %DLQ%<group> name the group back."""
    group = topics.validate_group("billing")
    assert topics.retry_topic(group) == "%RETRY%billing"
    assert topics.dlq_topic(group) == "%DLQ%billing"
    assert topics.group_of_retry_or_dlq(topics.dlq_topic(group)) == group
    assert topics.group_of_retry_or_dlq("orders") is None


def test_pop_retry_topics_are_per_group_and_topic_and_stay_valid_names() -> None:
    """A POP group's retry topic is %RETRY%<group>_<topic> (KeyBuilder V1); one that would
    pass 255 characters is cut and ends in the CRC32 of the full name, a valid retry topic."""
    group, topic = topics.validate_group("billing"), topics.validate_topic("orders")
    assert topics.pop_retry_topic(group, topic) == "%RETRY%billing_orders"
    assert topics.is_retry_topic(topics.pop_retry_topic(group, topic))
    long_group = topics.validate_group("g" * 255)
    names = {topics.pop_retry_topic(long_group, topics.validate_topic(t)) for t in ("a", "b")}
    assert len(names) == 2
    for name in names:
        assert len(name) == topics.RETRY_OR_DLQ_TOPIC_CHARS_MAX
        assert topics.validate_topic(name) == name


def test_tags_with_separator_or_blank_are_illegal() -> None:
    """A tag may not be blank or contain '|' (it separates tags in subscriptions)."""
    assert topics.validate_tag("TagA") == "TagA"
    for bad in ["", "  ", "a|b", "x" * 256]:
        with pytest.raises(errors.IllegalMessageTagError):
            topics.validate_tag(bad)


def test_delay_levels_are_clamped_like_rocketmq() -> None:
    """Level 3 is 10 s, levels above 18 clamp to 2 h, level 0 means no delay."""
    assert delay.delay_ms_of_level(3) == 10_000
    assert delay.delay_ms_of_level(99) == 7_200_000
    assert delay.delay_ms_of_level(0) == 0
    with pytest.raises(errors.IllegalDeliveryTimeError):
        delay.check_delivery_timestamp(delivery_ms=delay.TIMER_DELAY_MS_MAX + 2, now_ms=1)


def test_every_code_maps_to_an_error_of_that_code_or_its_family() -> None:
    """The registry turns a status code back into the class that carries it."""
    for code in errors.Code:
        if code in (errors.Code.OK, errors.Code.MULTIPLE_RESULTS):
            with pytest.raises(ValueError, match="success"):
                errors.error_for_code(code, "x")
            continue
        err = errors.error_for_code(code, "boom")
        if code in errors.ERROR_CLASSES:
            assert type(err).code is code
        elif 40000 <= code < 40100:
            assert isinstance(err, errors.BadRequestError)
    assert isinstance(errors.error_for_code(40402, "t"), errors.TopicNotFoundError)
    assert errors.error_for_code(40402, "t").retriable is False
    assert errors.error_for_code(42900, "t").retriable is True
    assert type(errors.error_for_code(12345, "odd")) is errors.ArianeError


def test_manual_clock_moves_only_forward() -> None:
    """The injected clock advances on request and refuses to go back."""
    c = clock.ManualClock(start_ms=1000)
    c.advance_ms(250)
    assert (c.now_ms(), c.monotonic_ms()) == (1250, 250)
    with pytest.raises(ValueError, match="backwards"):
        c.advance_ms(-1)


def test_message_accessors_read_rocketmq_properties() -> None:
    """Tags, keys, message group and UNIQ_KEY come from RocketMQ's property names."""
    msg = message.Message(
        topic=ids.TopicName("t"),
        body=b"x",
        properties={"TAGS": "AA", "KEYS": "k1 k2", "__SHARDINGKEY": "g", "UNIQ_KEY": "ID"},
    )
    assert (msg.tags, msg.keys, msg.message_group, msg.uniq_key) == ("AA", ("k1", "k2"), "g", "ID")
    assert message.MessageType.MIXED.accepts(message.MessageType.FIFO)
    assert not message.MessageType.NORMAL.accepts(message.MessageType.FIFO)


def test_available_cpus_honours_a_cgroup_quota(tmp_path: pathlib.Path) -> None:
    """A cpu.max quota caps the count at ceil(quota/period); "max" or no file leaves affinity."""
    affinity = len(os.sched_getaffinity(0))
    cpu_max = tmp_path / "cpu.max"
    cpu_max.write_text("50000 100000\n")
    assert process.available_cpus(cpu_max) == 1
    cpu_max.write_text("150000 100000\n")
    assert process.available_cpus(cpu_max) == min(affinity, 2)
    cpu_max.write_text("max 100000\n")
    assert process.available_cpus(cpu_max) == affinity
    assert process.available_cpus(tmp_path / "missing") == affinity
