"""Reading from a slave (RocketMQ ``slaveReadEnable`` / ``suggestWhichBrokerId``): the pure
rules of ``processors.slave_read``, and the classic protocol of an in-process broker acting as
a master or as a slave (its id set to 1, its master's HA stream up or down)."""

from __future__ import annotations

import asyncio
import dataclasses
import pathlib

import pytest

import broker_harness
from ariane.broker import assembly, runtime
from ariane.broker import settings as broker_settings
from ariane.broker.processors import slave_read
from ariane.broker.remoting import replies
from ariane.broker.remoting import service as remoting_service
from ariane.broker.tables import topic_config
from ariane.common import clock, ids, message
from ariane.remoting import codes, command, transport

RQ = codes.RequestCode
RC = codes.ResponseCode
TOPIC = "slave-read-topic"
TIMEOUT_S = 10.0
MEMORY_BYTES = 1_000
"""A tiny "physical memory": the in-memory window is 40 % of it, 400 bytes (a few records)."""


@pytest.mark.parametrize(
    ("enable", "broker_id", "cold", "master_online", "expected"),
    [
        (False, 0, True, False, slave_read.Suggestion(ids.BrokerId(0))),  # default: master
        (True, 0, True, False, slave_read.Suggestion(ids.BrokerId(1))),  # cold: the slave
        (True, 0, False, False, slave_read.Suggestion(ids.BrokerId(0))),  # in memory
        (True, 1, False, True, slave_read.Suggestion(ids.BrokerId(0), retry_immediately=True)),
        (True, 1, False, False, slave_read.Suggestion(ids.BrokerId(0))),  # master away: stay
        (True, 1, True, True, slave_read.Suggestion(ids.BrokerId(1))),  # cold: keep reading here
    ],
)
def test_suggestion_rule(
    enable: bool, broker_id: int, cold: bool, master_online: bool, expected: object
) -> None:
    """``suggestWhichBrokerId`` follows RocketMQ's PullMessageProcessor: the slave (1) only for
    cold pulls with slaveReadEnable; a slave sends caught-up consumers back to an online
    master (0 and retry immediately)."""
    got = slave_read.suggest(
        slave_read_enable=enable, broker_id=broker_id, cold=cold, master_online=master_online
    )
    assert got == expected


def test_in_memory_rule_is_forty_percent_of_memory() -> None:
    """A pull is cold when the CommitLog's end is more than 40 % of memory past the last
    message it read (DefaultMessageStore.getMessage); a pull that read nothing is never cold."""
    window = slave_read.in_memory_window_bytes(
        MEMORY_BYTES, slave_read.ACCESS_MESSAGE_IN_MEMORY_MAX_RATIO_PERCENT
    )
    assert window == 400
    rule = slave_read.suggest_pulling_from_slave
    assert rule(commit_log_max_offset=1_401, pulled_commit_log_offset=1_000, window_bytes=window)
    assert not rule(commit_log_max_offset=1_400, pulled_commit_log_offset=1_000, window_bytes=400)
    assert not rule(commit_log_max_offset=10**9, pulled_commit_log_offset=None, window_bytes=400)
    assert not slave_read.rejects_pull(slave_read_enable=False, broker_id=0)
    assert slave_read.rejects_pull(slave_read_enable=False, broker_id=1)
    assert not slave_read.rejects_pull(slave_read_enable=True, broker_id=1)


class Broker:
    """An in-process broker serving the classic protocol, and one client connection to it."""

    def __init__(self, root: pathlib.Path, *, slave_read_enable: bool) -> None:
        self.clock = clock.ManualClock()
        settings = broker_settings.BrokerSettings(
            store_dir=root / "store",
            store=broker_harness.SMALL_STORE,
            slave_read_enable=slave_read_enable,
            receive=broker_settings.ReceiveSettings(physical_memory_bytes=MEMORY_BYTES),
        )
        self.runtime = runtime.BrokerRuntime(settings, time=self.clock)
        self.processors = assembly.build(self.runtime, time=self.clock)
        self.processors.admin.create_topic(
            topic_config.TopicConfig(
                ids.TopicName(TOPIC),
                read_queue_nums=1,
                write_queue_nums=1,
                message_type=message.MessageType.NORMAL,
            )
        )
        self.service = remoting_service.RemotingService(self.processors, time=self.clock)
        self.client = transport.RemotingClient({})
        self.addr = ""

    async def start(self) -> None:
        host, port = await self.service.start("127.0.0.1", 0)
        self.addr = f"{host}:{port}"

    async def close(self) -> None:
        await self.client.close()
        await self.service.close()
        self.runtime.close()

    def become_slave(self, *, master_online: bool) -> None:
        """Act as slave 1 of the group (what ``ReplicationService.demote`` sets)."""
        self.runtime.broker_id = ids.BrokerId(1)
        self.runtime.master_online = lambda: master_online

    async def call(
        self, code: int, ext: dict[str, str], body: bytes = b""
    ) -> command.RemotingCommand:
        request = command.request(code, ext, body)
        return await self.client.invoke(self.addr, request, TIMEOUT_S)

    async def send(self, body: bytes) -> command.RemotingCommand:
        header = {"a": "p", "b": TOPIC, "c": "TBW102", "d": "1", "e": "0", "f": "0"}
        header |= {"g": "1700000000000", "h": "0", "i": "", "j": "0", "k": "false", "m": "false"}
        return await self.call(RQ.SEND_MESSAGE_V2, header, body)

    async def pull(self, offset: int, *, count: int = 1) -> command.RemotingCommand:
        return await self.call(
            RQ.PULL_MESSAGE,
            {
                "consumerGroup": "slave-read-g",
                "topic": TOPIC,
                "queueId": "0",
                "queueOffset": str(offset),
                "maxMsgNums": str(count),
                "sysFlag": "4",
                "commitOffset": "0",
                "suspendTimeoutMillis": "0",
                "subscription": "*",
                "subVersion": "0",
                "expressionType": "TAG",
            },
        )


def run(tmp_path: pathlib.Path, slave_read_enable: bool, scenario: object) -> None:
    """Run ``scenario(broker)`` against a started broker with 10 stored messages."""

    async def main() -> None:
        broker = Broker(tmp_path, slave_read_enable=slave_read_enable)
        await broker.start()
        try:
            for i in range(10):
                assert (await broker.send(b"m-%d" % i)).code == RC.SUCCESS
            await scenario(broker)  # type: ignore[operator]
        finally:
            await broker.close()

    asyncio.run(main())


def test_master_suggests_the_slave_for_cold_pulls_only_with_slave_read_enable(
    tmp_path: pathlib.Path,
) -> None:
    """With slave_read_enable a master answers suggestWhichBrokerId 1 to a pull far behind the
    CommitLog's end and 0 to one near it; without it, 0 to both."""

    async def scenario(broker: Broker) -> None:
        enabled = broker.runtime.settings.slave_read_enable
        cold, warm = await broker.pull(0), await broker.pull(9)
        assert cold.code == warm.code == RC.SUCCESS
        assert cold.ext_fields["suggestWhichBrokerId"] == ("1" if enabled else "0")
        assert warm.ext_fields["suggestWhichBrokerId"] == "0"

    run(tmp_path / "on", True, scenario)
    run(tmp_path / "off", False, scenario)


def test_slave_refuses_sends_and_without_slave_read_enable_pulls(tmp_path: pathlib.Path) -> None:
    """A slave answers a send, and (slave_read_enable off) a pull, with SYSTEM_BUSY and
    RocketMQ's "[REJECTREQUEST]" remark; it still serves offsets and offset queries."""

    async def scenario(broker: Broker) -> None:
        broker.become_slave(master_online=False)
        for refused in (await broker.send(b"x"), await broker.pull(0)):
            assert refused.code == RC.SYSTEM_BUSY
            assert refused.remark == replies.REJECT_REQUEST_REMARK
        queue = {"topic": TOPIC, "queueId": "0"}
        assert (await broker.call(RQ.GET_MAX_OFFSET, queue)).ext_fields["offset"] == "10"

    run(tmp_path, False, scenario)


def test_slave_serves_the_read_path_and_sends_caught_up_consumers_to_its_master(
    tmp_path: pathlib.Path,
) -> None:
    """A slave with slave_read_enable serves pulls, min/max/by-time offsets and group offsets
    (an update is kept locally); a caught-up pull with its master online answers
    PULL_RETRY_IMMEDIATELY and suggestWhichBrokerId 0, with the master away PULL_NOT_FOUND."""

    async def scenario(broker: Broker) -> None:
        broker.become_slave(master_online=False)
        found = await broker.pull(0, count=10)
        assert found.code == RC.SUCCESS and found.ext_fields["nextBeginOffset"] == "10"
        queue = {"topic": TOPIC, "queueId": "0"}
        assert (await broker.call(RQ.GET_MIN_OFFSET, queue)).ext_fields["offset"] == "0"
        by_time = await broker.call(RQ.SEARCH_OFFSET_BY_TIMESTAMP, {**queue, "timestamp": "0"})
        assert by_time.ext_fields["offset"] == "0"
        where = {"consumerGroup": "slave-read-g", **queue}
        updated = await broker.call(RQ.UPDATE_CONSUMER_OFFSET, {**where, "commitOffset": "7"})
        assert updated.code == RC.SUCCESS, updated.remark
        assert (await broker.call(RQ.QUERY_CONSUMER_OFFSET, where)).ext_fields["offset"] == "7"
        away = await broker.pull(10)
        assert away.code == RC.PULL_NOT_FOUND and away.ext_fields["suggestWhichBrokerId"] == "0"
        broker.become_slave(master_online=True)
        back = await broker.pull(10)
        assert back.code == RC.PULL_RETRY_IMMEDIATELY
        assert back.ext_fields["suggestWhichBrokerId"] == "0"
        cold = await broker.pull(0)  # far behind: stay on the slave
        assert cold.code == RC.SUCCESS and cold.ext_fields["suggestWhichBrokerId"] == "1"

    run(tmp_path, True, scenario)


def test_settings_default_to_rocketmq() -> None:
    """slave_read_enable is off and the ratio 40 % by default, as RocketMQ's."""
    settings = broker_settings.BrokerSettings(store_dir=pathlib.Path("/nonexistent"))
    assert settings.slave_read_enable is False
    assert settings.receive.access_message_in_memory_max_ratio_percent == 40
    with pytest.raises(ValueError, match="access_message_in_memory_max_ratio_percent"):
        dataclasses.replace(settings.receive, access_message_in_memory_max_ratio_percent=101)
