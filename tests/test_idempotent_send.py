"""Idempotent sends against real broker processes: a message with an ``ARIANE_IDEMPOTENCY_KEY``
sent again (a retry, a concurrent try, a repeat within one request, a DELAY message) is stored
once and the repeat answered with the stored message's id and offset (also through
``ariane.client.Producer``'s ``idempotency_key``); the window survives a SIGKILL and restart
of the broker, and a slave promoted by a switchover answers the duplicates
of what it replicated.

Own cluster: each test starts its name server and brokers (they are killed and promoted)."""

from __future__ import annotations

import asyncio
import pathlib
import subprocess
import sys
import time
from collections.abc import Iterator

import grpc
import pytest

import ha_testing as ht
from ariane import client
from ariane.common import errors, idempotency
from ariane.grpcwire import messages, pb, rpc

pytestmark = pytest.mark.slow

OK = int(errors.Code.OK)
TOPIC = "idem-topic"
KEY = idempotency.IDEMPOTENCY_KEY_PROPERTY

Entry = tuple[int, str, int]
"""One answer entry: (status code, message id, queue offset)."""


def _config(tmp: pathlib.Path) -> tuple[str, ...]:
    """The small store of ``ht.SMALL_STORE_TOML`` plus a quick metadata sync and lease."""
    config = tmp / "idem.toml"
    config.write_text(
        ht.SMALL_STORE_TOML + "[slave_sync]\ninterval_ms = 200\n[ha]\nlease_ms = 2000\n"
    )
    return ("--config", str(config))


def _send(
    endpoint: str,
    topic: str,
    keys: list[str | None],
    *,
    tag: str = "",
    delivery_ms: int | None = None,
) -> list[Entry]:
    """One SendMessage request straight to ``endpoint``: a message per key (body = key, a
    fresh client message id each call, the key as ``ARIANE_IDEMPOTENCY_KEY`` unless ``None``);
    each entry's (code, message id, offset)."""
    stamp = time.time_ns()

    def one(position: int, key: str | None) -> pb.v2.Message:
        props = pb.v2.SystemProperties(
            message_id=f"{stamp:x}-{position}",
            message_type=pb.v2.MessageType.DELAY if delivery_ms else pb.v2.MessageType.NORMAL,
            born_timestamp=messages.timestamp(1_700_000_000_000),
            born_host="t",
            body_encoding=pb.v2.Encoding.IDENTITY,
        )
        if tag:
            props.tag = tag
        if delivery_ms is not None:
            props.delivery_timestamp.FromMilliseconds(delivery_ms)
        return pb.v2.Message(
            topic=pb.v2.Resource(name=topic),
            body=(key or f"plain-{stamp}-{position}").encode(),
            system_properties=props,
            user_properties={} if key is None else {KEY: key},
        )

    async def call() -> list[Entry]:
        request = pb.v2_service.SendMessageRequest(messages=[one(i, k) for i, k in enumerate(keys)])
        async with grpc.aio.insecure_channel(endpoint) as channel:
            answer = await rpc.unary_call(
                channel,
                pb.MESSAGING_SERVICE,
                "SendMessage",
                request,
                pb.v2_service.SendMessageResponse,
                timeout_s=20,
                metadata=ht.CLIENT,
            )
        assert answer.entries, answer.status
        return [(int(e.status.code), e.message_id, int(e.offset)) for e in answer.entries]

    return asyncio.run(call())


def _stored(endpoint: str, topic: str = TOPIC) -> int:
    """Messages the topic's two queues hold on ``endpoint``."""
    return ht.queue_end(endpoint, topic, 0) + ht.queue_end(endpoint, topic, 1)


def _producer_receipts(namesrv: str, keys: list[str | None]) -> list[tuple[str, int]]:
    """(message id, queue offset) of each receipt of ``ariane.client.Producer`` sending one
    message per key with ``idempotency_key``."""

    async def main() -> list[tuple[str, int]]:
        batch = [client.OutgoingMessage(str(k).encode(), idempotency_key=k) for k in keys]
        settings = client.ProducerSettings(
            connection=client.ConnectionSettings(request_timeout_s=30)
        )
        async with client.Producer(namesrv, settings=settings) as producer:
            receipts = await producer.send_batch(TOPIC, batch)
        return [(r.message_id, r.queue_offset) for r in receipts]

    return asyncio.run(main())


@pytest.fixture
def namesrv(tmp_path: pathlib.Path) -> Iterator[str]:
    with ht.running_namesrv(tmp_path) as endpoint:
        yield endpoint


def test_a_key_sent_again_is_stored_once_also_after_a_broker_sigkill(
    tmp_path: pathlib.Path, namesrv: str
) -> None:
    """Keys sent again (a later request, two concurrent requests, a repeat inside a request,
    a request mixing old and new keys) are each stored once and answered with the first
    store's id and offset, messages without a key are stored every time, and after a SIGKILL
    and restart on the same store the same keys are still recognised."""
    broker = ht.new_broker(tmp_path, "broker")
    try:
        broker.start(tmp_path, namesrv, "ASYNC_MASTER", broker_id=0, extra=_config(tmp_path))
        ht.create_topic(broker.endpoint, TOPIC)
        keys: list[str | None] = [f"k{i}" for i in range(20)]
        first = _send(broker.endpoint, TOPIC, keys)
        assert {code for code, _, _ in first} == {OK}
        assert _send(broker.endpoint, TOPIC, keys) == first
        assert _stored(broker.endpoint) == 20
        assert [m for _, m, _ in first] == [idempotency.message_id_of(str(k)) for k in keys]

        async def both() -> list[list[Entry]]:
            more: list[str | None] = [f"c{i}" for i in range(30)]
            return list(
                await asyncio.gather(
                    *(asyncio.to_thread(_send, broker.endpoint, TOPIC, more) for _ in range(3))
                )
            )

        a, b, c = asyncio.run(both())
        assert a == b == c
        assert _stored(broker.endpoint) == 50
        mixed = _send(broker.endpoint, TOPIC, ["k3", "n1", "n1", None, "k4", None])
        assert mixed[0] == first[3] and mixed[4] == first[4] and mixed[1] == mixed[2]
        assert _stored(broker.endpoint) == 53  # n1 and the two messages without a key
        broker.kill()
        broker.start(tmp_path, namesrv, "ASYNC_MASTER", broker_id=0, extra=_config(tmp_path))
        assert _send(broker.endpoint, TOPIC, keys) == first
        assert _stored(broker.endpoint) == 53
        assert _producer_receipts(namesrv, keys) == [(m, o) for _, m, o in first]
        assert _stored(broker.endpoint) == 53
    finally:
        broker.stop()


def test_a_delay_message_sent_again_is_parked_once(tmp_path: pathlib.Path, namesrv: str) -> None:
    """A DELAY message with a key sent twice while parked is parked once (the second try is
    answered with the first's id and offset), and sent again once due is not stored again:
    when a marker due just after it arrives, the topic holds it and the marker only."""
    broker = ht.new_broker(tmp_path, "broker")
    try:
        broker.start(tmp_path, namesrv, "ASYNC_MASTER", broker_id=0, extra=_config(tmp_path))
        ht.create_topic(broker.endpoint, TOPIC, message_type="DELAY")
        due_ms = int(time.time() * 1000) + 3_000
        first = _send(broker.endpoint, TOPIC, ["d1"], delivery_ms=due_ms)
        assert first[0][0] == OK
        assert _send(broker.endpoint, TOPIC, ["d1"], delivery_ms=due_ms) == first
        _send(broker.endpoint, TOPIC, [None], delivery_ms=due_ms + 1_000)
        ht.poll(lambda: _stored(broker.endpoint) >= 1, "the parked message to come due")
        assert _send(broker.endpoint, TOPIC, ["d1"], delivery_ms=due_ms)[0][:2] == first[0][:2]
        ht.poll(lambda: _stored(broker.endpoint) >= 2, "the marker to come due")
        assert _stored(broker.endpoint) == 2
    finally:
        broker.stop()


def _promote(namesrv: str, broker_id: int) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "ariane", "admin", "--endpoints", namesrv, "--json"]
    command += ["broker", "promote", "--broker-name", "ha-group", "--broker-id", str(broker_id)]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)


def test_a_promoted_slave_recognises_the_keys_its_master_stored(
    tmp_path: pathlib.Path, namesrv: str
) -> None:
    """After a switchover the promoted slave answers keys the old master stored (and it
    replicated) with the stored ids and offsets, and stores nothing for them."""
    master, slave = ht.new_broker(tmp_path, "master"), ht.new_broker(tmp_path, "slave")
    extra = _config(tmp_path)
    try:
        master.start(tmp_path, namesrv, "SYNC_MASTER", broker_id=0, extra=extra)
        slave.start(tmp_path, namesrv, "SLAVE", broker_id=1, master_ha=master.ha, extra=extra)
        ht.create_topic(master.endpoint, TOPIC)
        keys: list[str | None] = [f"p{i}" for i in range(10)]
        ht.poll(lambda: _send(master.endpoint, TOPIC, keys[:1])[0][0] == OK, "a slave in sync")
        first = _send(master.endpoint, TOPIC, keys)
        assert {code for code, _, _ in first} == {OK}
        done = _promote(namesrv, 1)
        assert done.returncode == 0, done.stderr
        ht.poll(lambda: _send(slave.endpoint, TOPIC, [None])[0][0] == OK, "the new master")
        assert _stored(slave.endpoint) == 11
        assert _send(slave.endpoint, TOPIC, keys) == first
        assert _stored(slave.endpoint) == 11
    finally:
        master.stop()
        slave.stop()
