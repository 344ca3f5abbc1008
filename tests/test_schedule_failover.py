"""Timer and delay-level messages across a promotion, with real processes (name server,
SYNC_MASTER, SLAVE; 64 KiB CommitLog segments): what the master delivered before it was
SIGKILLed (or switched over) is not delivered again by the promoted slave, and what it had
parked but not delivered is delivered by the promoted slave, each key exactly once.

Own cluster: the master is SIGKILLed or switched over with timers parked."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import pathlib
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from google.protobuf.message import Message

import ha_testing as ht
from ariane import client, dev
from ariane.common import errors
from ariane.grpcwire import codes, convert, messages, pb, rpc
from ariane.remoting import codes as remoting_codes
from ariane.remoting import command, transport
from ariane.remoting import message_codec as remoting_message_codec

pytestmark = pytest.mark.slow

TIMER_TOPIC = "sched-timer"
LEVEL_TOPIC = "sched-level"
PROBE_GROUP = "sched-probe"
K = 12
"""Keys per kind and phase (timer or level; delivered before the kill or still parked)."""
SHORT_LEVEL, LONG_LEVEL = 1, 2
CONFIG = """
[store]
commit_log_file_size_bytes = 65536
[slave_sync]
interval_ms = 200
[schedule]
message_delay_level = "1s 9s"
tick_ms = 50
[ha]
# The slave promoted after the SIGKILL is left alone: it must take the delivery writes.
min_in_sync_replicas = 1
"""
HEADERS = (("x-mq-client-id", "sched-failover@1@0@t"), ("x-mq-language", "PYTHON"))


@pytest.fixture
def namesrv(tmp_path: pathlib.Path) -> Iterator[str]:
    with ht.running_namesrv(tmp_path) as endpoint:
        yield endpoint


def _extra(tmp: pathlib.Path, remoting_port: int) -> tuple[str, ...]:
    config = tmp / "sched.toml"
    config.write_text(CONFIG)
    return ("--config", str(config), "--remoting-listen", f"127.0.0.1:{remoting_port}")


@pytest.fixture
def pair(tmp_path: pathlib.Path, namesrv: str) -> Iterator[tuple[ht.Broker, ht.Broker, str]]:
    """A SYNC_MASTER (with its Remoting address, the third item) and its SLAVE, in sync."""
    master, slave = ht.new_broker(tmp_path, "master"), ht.new_broker(tmp_path, "slave")
    remoting_port = dev.free_port()
    try:
        master.start(
            tmp_path, namesrv, "SYNC_MASTER", broker_id=0, extra=_extra(tmp_path, remoting_port)
        )
        slave_extra = _extra(tmp_path, dev.free_port())
        slave.start(tmp_path, namesrv, "SLAVE", broker_id=1, master_ha=master.ha, extra=slave_extra)
        _create_topic(
            master.endpoint, TIMER_TOPIC, pb.topic.TopicMessageType.TOPIC_MESSAGE_TYPE_DELAY
        )
        _create_topic(
            master.endpoint, LEVEL_TOPIC, pb.topic.TopicMessageType.TOPIC_MESSAGE_TYPE_NORMAL
        )
        _create_group(master.endpoint, PROBE_GROUP)
        ht.poll(
            lambda: ht.send(master.endpoint, LEVEL_TOPIC, b"warm-up") == int(errors.Code.OK),
            "a slave in sync",
        )
        yield master, slave, f"127.0.0.1:{remoting_port}"
    finally:
        master.stop()
        slave.stop()


def _admin(endpoint: str, name: str, request: Message, answer: type[Any]) -> Any:
    response = asyncio.run(ht._admin(endpoint, name, request, answer))
    codes.raise_for_status(response.status)
    return response


def _create_topic(endpoint: str, topic: str, message_type: Any) -> None:
    request = pb.admin.CreateTopicRequest(
        topic=pb.admin.Topic(
            name=topic, read_queue_nums=2, write_queue_nums=2, perm=6, message_type=message_type
        )
    )
    _admin(endpoint, "CreateTopic", request, pb.admin.CreateTopicResponse)


def _create_group(endpoint: str, group: str) -> None:
    request = pb.admin.CreateSubscriptionGroupRequest(
        group=pb.admin.SubscriptionGroup(name=group, max_delivery_attempts=3)
    )
    _admin(endpoint, "CreateSubscriptionGroup", request, pb.admin.CreateSubscriptionGroupResponse)


def _stored(endpoint: str, topic: str) -> int:
    """Messages stored in ``topic`` on ``endpoint`` (the sum of its queues' max offsets)."""
    request = pb.admin.GetConsumerLagRequest(group=PROBE_GROUP, topic=topic)
    lag = _admin(endpoint, "GetConsumerLag", request, pb.admin.GetConsumerLagResponse)
    return sum(q.broker_offset for q in lag.queues)


async def _send_timers(endpoint: str, schedule: dict[str, int]) -> None:
    batch = []
    for key, due_ms in schedule.items():
        msg = pb.v2.Message(topic=convert.resource(TIMER_TOPIC), body=key.encode())
        props = msg.system_properties
        props.message_id = key
        props.message_type = pb.v2.MessageType.DELAY
        props.body_encoding = pb.v2.Encoding.IDENTITY
        props.born_timestamp.CopyFrom(messages.timestamp(int(time.time() * 1000)))
        props.delivery_timestamp.CopyFrom(messages.timestamp(due_ms))
        batch.append(msg)
    async with grpc.aio.insecure_channel(endpoint) as channel:
        answer = await rpc.unary_call(
            channel,
            pb.MESSAGING_SERVICE,
            "SendMessage",
            pb.v2_service.SendMessageRequest(messages=batch),
            pb.v2_service.SendMessageResponse,
            timeout_s=20,
            metadata=HEADERS,
        )
    assert int(answer.status.code) == int(errors.Code.OK), answer.status


async def _send_levels(remoting: str, keys: list[str], level: int) -> None:
    """Classic SEND_MESSAGE_V2 with property DELAY=level (parked in SCHEDULE_TOPIC_XXXX)."""
    remote = transport.RemotingClient({})
    try:
        for i, key in enumerate(keys):
            props = {"DELAY": str(level), "UNIQ_KEY": key, "KEYS": key}
            header = {"a": "p", "b": LEVEL_TOPIC, "c": "TBW102", "d": "2", "e": str(i % 2)}
            header |= {"f": "0", "g": str(int(time.time() * 1000)), "h": "0"}
            header |= {"i": remoting_message_codec.encode_properties(props).decode()}
            header |= {"j": "0", "k": "false", "m": "false"}
            request = command.request(
                remoting_codes.RequestCode.SEND_MESSAGE_V2, header, key.encode()
            )
            answer = await remote.invoke(remoting, request, 10.0)
            assert answer.code == remoting_codes.ResponseCode.SUCCESS, answer.remark
    finally:
        await remote.close()


def _promote(namesrv: str, broker_id: int) -> None:
    command_line = [sys.executable, "-m", "ariane", "admin", "--endpoints", namesrv, "--json"]
    command_line += [
        "broker",
        "promote",
        "--broker-name",
        "ha-group",
        "--broker-id",
        str(broker_id),
    ]
    done = subprocess.run(command_line, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr


async def _read_all(namesrv: str, group: str, topic: str, count: int) -> collections.Counter[str]:
    """Receive (and ack) from ``topic`` as a fresh group until ``count`` keys arrived and a
    receive comes back empty; every copy counted."""
    seen: collections.Counter[str] = collections.Counter()
    deadline = time.monotonic() + ht.DEADLINE_S
    async with client.SimpleConsumer(namesrv, group, topic) as consumer:
        while time.monotonic() < deadline:
            received: list[client.ReceivedMessage] = []
            with contextlib.suppress(errors.ServiceUnavailableError, errors.RequestTimeoutError):
                received = await consumer.receive(32, invisible_duration_s=60)
            seen.update(m.body.decode() for m in received)
            if received:
                await consumer.ack(received)
            elif len(seen) >= count:
                break
    return seen


def _send_all(master: ht.Broker, remoting: str, t0_ms: int) -> tuple[list[str], list[str]]:
    """K timers due soon and K due later; K level-1 (1 s) and K level-2 (9 s) messages.
    Returns (keys due before the kill, keys still parked then)."""
    soon = {f"T-soon-{i}": t0_ms + 1_500 for i in range(K)}
    later = {f"T-late-{i}": t0_ms + 11_000 for i in range(K)}
    asyncio.run(_send_timers(master.endpoint, {**soon, **later}))
    short = [f"L-short-{i}" for i in range(K)]
    long_ = [f"L-long-{i}" for i in range(K)]
    asyncio.run(_send_levels(remoting, short, SHORT_LEVEL))
    asyncio.run(_send_levels(remoting, long_, LONG_LEVEL))
    return [*soon, *short], [*later, *long_]


def _check_exactly_once(namesrv: str, endpoint: str, keys: list[str], group: str) -> None:
    timers = [k for k in keys if k.startswith("T-")]
    levels = [k for k in keys if k.startswith("L-")]
    ht.poll(
        lambda: (
            _stored(endpoint, TIMER_TOPIC) >= len(timers)
            and _stored(endpoint, LEVEL_TOPIC) >= len(levels) + 1
        ),  # + the warm-up
        "every scheduled message delivered by the new master",
    )
    _create_group(endpoint, group)
    got = asyncio.run(_read_all(namesrv, group, TIMER_TOPIC, len(timers)))
    got += asyncio.run(_read_all(namesrv, group, LEVEL_TOPIC, len(levels) + 1))
    got.pop("warm-up", None)
    twice = {k: n for k, n in got.items() if n != 1}
    assert not twice, f"{len(twice)} keys delivered more than once: {sorted(twice.items())[:6]}"
    assert sorted(got) == sorted(keys), f"lost: {sorted(set(keys) - set(got))}"
    assert _stored(endpoint, TIMER_TOPIC) == len(timers)
    assert _stored(endpoint, LEVEL_TOPIC) == len(levels) + 1


def test_a_sigkilled_masters_deliveries_are_not_repeated_by_the_promoted_slave(
    tmp_path: pathlib.Path, namesrv: str, pair: tuple[ht.Broker, ht.Broker, str]
) -> None:
    """Proves K timer and K delay-level messages delivered by a SYNC_MASTER before its SIGKILL
    and K of each still parked then are each read exactly once from the promoted slave."""
    master, slave, remoting = pair
    t0_ms = int(time.time() * 1000)
    delivered, parked = _send_all(master, remoting, t0_ms)
    ht.poll(
        lambda: (
            _stored(master.endpoint, TIMER_TOPIC) == K
            and _stored(master.endpoint, LEVEL_TOPIC) == K + 1
        ),
        "the master delivering the first half",
    )
    ht.poll(
        lambda: (
            ht.stats(slave.endpoint).commit_log_max_offset
            == ht.stats(master.endpoint).commit_log_max_offset
        ),
        "the slave holding the master's deliveries",
    )
    master.kill()
    assert time.time() * 1000 < t0_ms + 8_000, "the second half came due before the kill"
    _promote(namesrv, 1)
    _check_exactly_once(namesrv, slave.endpoint, [*delivered, *parked], "fresh-after-kill")


def test_a_switchover_and_back_delivers_every_key_once(
    tmp_path: pathlib.Path, namesrv: str, pair: tuple[ht.Broker, ht.Broker, str]
) -> None:
    """Proves a clean switchover (slave promoted, old master demoted as its slave) and a switch
    back deliver every timer and delay-level key once: the first half by the first master, the
    second half by the second, nothing again by the first when it is master again."""
    master, slave, remoting = pair
    t0_ms = int(time.time() * 1000)
    delivered, parked = _send_all(master, remoting, t0_ms)
    ht.poll(
        lambda: (
            _stored(master.endpoint, TIMER_TOPIC) == K
            and _stored(master.endpoint, LEVEL_TOPIC) == K + 1
        ),
        "the master delivering the first half",
    )
    _promote(namesrv, 1)  # the old master becomes slave 1 of the new one
    assert ht.stats(master.endpoint).role == ht.SLAVE_ROLE
    _check_exactly_once(namesrv, slave.endpoint, [*delivered, *parked], "fresh-after-switch")
    ht.poll(
        lambda: (
            ht.stats(master.endpoint).commit_log_max_offset
            == ht.stats(slave.endpoint).commit_log_max_offset
        ),
        "the old master replicating the new master's deliveries",
    )
    _promote(namesrv, 1)  # and back: the first master is master again
    assert ht.stats(master.endpoint).broker_id == 0
    marker = {"T-marker": int(time.time() * 1000) + 1_500}
    asyncio.run(_send_timers(master.endpoint, marker))
    ht.poll(  # its schedule loop has followed and delivered since the switch back
        lambda: _stored(master.endpoint, TIMER_TOPIC) >= 2 * K + 1,
        "the marker delivered by the first master",
    )
    assert _stored(master.endpoint, TIMER_TOPIC) == 2 * K + 1
    assert _stored(master.endpoint, LEVEL_TOPIC) == 2 * K + 1
