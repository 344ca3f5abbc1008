"""Transactional half messages across a failover, with real ``ariane namesrv`` and ``ariane broker``
processes (issue 25): a SYNC_MASTER with one SLAVE takes half messages, the master is SIGKILLed,
the slave is promoted with ChangeRole, and every unresolved transaction is pending again on the
promoted master: EndTransaction resolves it under the id the producer got, and the new master
checks the rest back over a producer's Telemetry stream. A demoted old master stops checking.

The brokers run with a 1 s transaction timeout and a 0.3 s check interval (``[transaction]``),
1 MiB CommitLog segments and a 0.2 s metadata sync, so the whole module takes well under a
minute.

Own cluster: the master is SIGKILLed and its slave promoted (1 s transaction timeout).
"""

from __future__ import annotations

import asyncio
import pathlib
from collections.abc import AsyncIterator, Iterator

import grpc
import pytest
from google.protobuf.message import Message

import ha_testing as ht
from ariane import client
from ariane.common import errors
from ariane.grpcwire import messages, pb, rpc

pytestmark = pytest.mark.slow

OK = int(errors.Code.OK)
TOPIC = "ha-tx-topic"
HALVES = 8
PRODUCER = (("x-mq-client-id", "ha-tx-producer@1"),)
BROKER_TOML = """
[store]
commit_log_file_size_bytes = 1048576
consume_queue_file_entries = 10000
[transaction]
transaction_timeout_ms = 1000
transaction_check_interval_ms = 300
transaction_check_max = 1000
[slave_sync]
interval_ms = 200
[ha]
# The promoted slave of the failover test is left alone: it must take the COMMIT writes.
min_in_sync_replicas = 1
"""


@pytest.fixture
def namesrv(tmp_path: pathlib.Path) -> Iterator[str]:
    with ht.running_namesrv(tmp_path) as endpoint:
        yield endpoint


def _config(tmp: pathlib.Path) -> tuple[str, ...]:
    path = tmp / "tx-broker.toml"
    path.write_text(BROKER_TOML)
    return ("--config", str(path))


@pytest.fixture
def pair(tmp_path: pathlib.Path, namesrv: str) -> Iterator[tuple[ht.Broker, ht.Broker]]:
    """A SYNC_MASTER and its SLAVE with a TRANSACTION topic the slave has synced."""
    master, slave = ht.new_broker(tmp_path, "master"), ht.new_broker(tmp_path, "slave")
    extra = _config(tmp_path)
    try:
        master.start(tmp_path, namesrv, "SYNC_MASTER", broker_id=0, extra=extra)
        slave.start(tmp_path, namesrv, "SLAVE", broker_id=1, master_ha=master.ha, extra=extra)
        ht.create_topic(master.endpoint, TOPIC, message_type="TRANSACTION")
        ht.poll(lambda: TOPIC in _topics(slave.endpoint), "the topic synced to the slave")
        yield master, slave
    finally:
        master.stop()
        slave.stop()


def _topics(endpoint: str) -> set[str]:
    request = pb.admin.ListTopicsRequest()
    listed = asyncio.run(ht._admin(endpoint, "ListTopics", request, pb.admin.ListTopicsResponse))
    return {t.name for t in listed.topics}


async def _unary(endpoint: str, name: str, request: Message, answer: type[rpc.M]) -> rpc.M:
    async with grpc.aio.insecure_channel(endpoint) as channel:
        return await rpc.unary_call(
            channel, pb.MESSAGING_SERVICE, name, request, answer, timeout_s=20, metadata=PRODUCER
        )


def _send_half(endpoint: str, body: str) -> tuple[int, str]:
    """One TRANSACTION SendMessage; ``(status code, transaction id)``."""
    props = pb.v2.SystemProperties(
        message_id=body,
        message_type=pb.v2.MessageType.TRANSACTION,
        born_timestamp=messages.timestamp(1_700_000_000_000),
        born_host="t",
        body_encoding=pb.v2.Encoding.IDENTITY,
    )
    msg = pb.v2.Message(
        topic=pb.v2.Resource(name=TOPIC), body=body.encode(), system_properties=props
    )
    request = pb.v2_service.SendMessageRequest(messages=[msg])
    answer = asyncio.run(
        _unary(endpoint, "SendMessage", request, pb.v2_service.SendMessageResponse)
    )
    if not answer.entries:
        return int(answer.status.code), ""
    return int(answer.entries[0].status.code), answer.entries[0].transaction_id


def _end(
    endpoint: str,
    body: str,
    transaction_id: str,
    resolution: pb.v2.TransactionResolution,
    source: pb.v2.TransactionSource = pb.v2.TransactionSource.SOURCE_CLIENT,
) -> tuple[int, str]:
    """EndTransaction of the half message ``body``; ``(status code, message)``."""
    request = pb.v2_service.EndTransactionRequest(
        topic=pb.v2.Resource(name=TOPIC),
        message_id=body,
        transaction_id=transaction_id,
        resolution=resolution,
        source=source,
    )
    answer = asyncio.run(
        _unary(endpoint, "EndTransaction", request, pb.v2_service.EndTransactionResponse)
    )
    return int(answer.status.code), answer.status.message


def _visible(namesrv: str) -> list[str]:
    """The bodies in every queue of the topic, read by offset from the routed master."""

    async def read() -> list[str]:
        async with client.PullConsumer(namesrv) as consumer:
            bodies: list[str] = []
            for queue in await consumer.queues_for_topic(TOPIC):
                batch = await consumer.fetch(queue, 0, max_messages=1024, long_polling_timeout_s=0)
                bodies += [m.body.decode() for m in batch.messages]
            return sorted(bodies)

    return asyncio.run(read())


async def _checks(endpoint: str, wanted: set[str]) -> dict[str, str]:
    """Open a producer Telemetry stream and collect check-backs until every transaction id in
    ``wanted`` was asked about; ``{transaction id: message id}``."""
    settings = pb.v2.Settings(
        client_type=pb.v2.ClientType.PRODUCER,
        publishing=pb.v2.Publishing(topics=[pb.v2.Resource(name=TOPIC)]),
    )
    hello = pb.v2_service.TelemetryCommand(settings=settings)
    stop = asyncio.Event()

    async def requests() -> AsyncIterator[pb.v2_service.TelemetryCommand]:
        yield hello
        await stop.wait()

    asked: dict[str, str] = {}
    async with grpc.aio.insecure_channel(endpoint) as channel:
        telemetry = channel.stream_stream(
            rpc.method_path(pb.MESSAGING_SERVICE, "Telemetry"),
            request_serializer=pb.v2_service.TelemetryCommand.SerializeToString,
            response_deserializer=pb.v2_service.TelemetryCommand.FromString,
        )
        call = telemetry(requests(), metadata=PRODUCER)
        try:
            async with asyncio.timeout(ht.DEADLINE_S):
                async for command in call:
                    if command.WhichOneof("command") != "recover_orphaned_transaction_command":
                        continue
                    check = command.recover_orphaned_transaction_command
                    asked[check.transaction_id] = check.message.system_properties.message_id
                    if wanted <= asked.keys():
                        break
        finally:
            stop.set()
            call.cancel()
    return asked


def _sent_halves(endpoint: str, count: int) -> dict[str, str]:
    """``count`` half messages acked by a SYNC_MASTER (so its slave holds them), after a
    warm-up half that waits for the slave to be in sync; ``{message id: transaction id}``."""
    ht.poll(lambda: _send_half(endpoint, "warm-up")[0] == OK, "a slave in sync")
    sent: dict[str, str] = {}
    for i in range(count):
        code, transaction_id = _send_half(endpoint, f"tx-{i}")
        assert code == OK
        sent[f"tx-{i}"] = transaction_id
    return sent


def test_failover_keeps_half_messages_resolvable_and_checked_back(
    namesrv: str, pair: tuple[ht.Broker, ht.Broker]
) -> None:
    """Proves half messages a SYNC_MASTER acked are pending on the slave promoted after the
    master's SIGKILL: COMMIT by the producer's transaction id delivers once, ROLLBACK keeps the
    message invisible, and the others are checked back by the new master and commit there."""
    master, slave = pair
    sent = _sent_halves(master.endpoint, HALVES)
    assert len(set(sent.values())) == HALVES and all(sent.values())
    master.kill()
    ht.change_role(slave.endpoint, "SYNC_MASTER", epoch=2, broker_id=0)

    bodies = sorted(sent)
    committed, rolled_back, checked = bodies[0], bodies[1], set(bodies[2:])
    commit = pb.v2.TransactionResolution.COMMIT
    assert _end(slave.endpoint, committed, sent[committed], commit) == (OK, "OK")
    rollback = pb.v2.TransactionResolution.ROLLBACK
    assert _end(slave.endpoint, rolled_back, sent[rolled_back], rollback) == (OK, "OK")
    ht.poll(lambda: _visible(namesrv) == [committed], "the committed message delivered")

    asked = asyncio.run(_checks(slave.endpoint, {sent[b] for b in checked}))
    assert {sent[b] for b in checked} <= asked.keys()
    assert sent[committed] not in asked and sent[rolled_back] not in asked
    for body in checked:
        source = pb.v2.TransactionSource.SOURCE_SERVER_CHECK
        assert _end(slave.endpoint, body, sent[body], commit, source)[0] == OK
    assert _visible(namesrv) == sorted({committed, *checked})
    refused = _end(slave.endpoint, rolled_back, sent[rolled_back], commit)[0]
    assert refused == int(errors.Code.INVALID_TRANSACTION_ID)


def test_switchover_and_back_moves_the_transactions_with_the_role(
    namesrv: str, pair: tuple[ht.Broker, ht.Broker]
) -> None:
    """Proves a demoted master drops its transactions (EndTransaction there is FORBIDDEN) while
    the promoted slave resolves and checks them, and that promoting the old master again
    rebuilds the ones still open."""
    old, new = pair
    sent = _sent_halves(old.endpoint, 4)
    ht.change_role(new.endpoint, "SYNC_MASTER", epoch=2, broker_id=0)
    ht.change_role(old.endpoint, "SLAVE", epoch=2, broker_id=1, master_ha=new.ha)
    commit = pb.v2.TransactionResolution.COMMIT
    forbidden = _end(old.endpoint, "tx-0", sent["tx-0"], commit)[0]
    assert forbidden == int(errors.Code.FORBIDDEN)
    ht.poll(lambda: _end(new.endpoint, "tx-0", sent["tx-0"], commit)[0] == OK, "a commit")
    asked = asyncio.run(_checks(new.endpoint, {sent["tx-1"], sent["tx-2"], sent["tx-3"]}))
    assert sent["tx-0"] not in asked
    assert _end(new.endpoint, "tx-1", sent["tx-1"], commit)[0] == OK

    ht.change_role(old.endpoint, "SYNC_MASTER", epoch=3, broker_id=0)
    ht.change_role(new.endpoint, "SLAVE", epoch=3, broker_id=1, master_ha=old.ha)
    assert _end(new.endpoint, "tx-2", sent["tx-2"], commit)[0] == int(errors.Code.FORBIDDEN)
    ht.poll(lambda: _end(old.endpoint, "tx-2", sent["tx-2"], commit)[0] == OK, "a commit")
    asked = asyncio.run(_checks(old.endpoint, {sent["tx-3"]}))
    assert not {sent["tx-0"], sent["tx-1"], sent["tx-2"]} & asked.keys()
    ht.poll(lambda: _visible(namesrv) == ["tx-0", "tx-1", "tx-2"], "the commits delivered")
