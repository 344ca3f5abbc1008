"""POP state survives a broker crash: real ``ariane namesrv`` and ``ariane broker`` processes,
the broker SIGKILLed between deliveries of a message nobody acks.

RocketMQ keeps POP checkpoints in its store, so a poison message cannot dodge the DLQ by a
broker restart; Ariane's POP journal must give the same guarantee.

Own cluster: the broker is SIGKILLed and restarted on its store.
"""

from __future__ import annotations

import asyncio
import contextlib
import pathlib
import time

import pytest

from ariane import client, dev
from ariane.common import errors
from live_testing import kill, namesrv_process, start_broker, wait_registered, wait_routed

pytestmark = pytest.mark.slow

DEADLINE_S = 60.0
TOPIC = "poison"
GROUP = "poison-group"
ATTEMPTS_MAX = 3


async def _setup(namesrv: str) -> str:
    async with client.AdminClient(namesrv) as admin:
        await wait_registered(admin)
        await admin.create_topic(TOPIC, write_queue_nums=1)
        await admin.create_group(GROUP, max_delivery_attempts=ATTEMPTS_MAX)
        await wait_routed(admin, TOPIC)
    async with client.Producer(namesrv) as producer:
        return (await producer.send(TOPIC, b"poison")).message_id


async def _receive_one(namesrv: str) -> client.ReceivedMessage:
    """Receive (and never ack) until the message shows up again; fail after the deadline."""
    deadline = time.monotonic() + DEADLINE_S
    async with client.SimpleConsumer(namesrv, GROUP, TOPIC) as consumer:
        while True:
            assert time.monotonic() < deadline, "the message was not delivered again in time"
            with contextlib.suppress(errors.ServiceUnavailableError, errors.RequestTimeoutError):
                got = await consumer.receive(1, invisible_duration_s=10)
                if got:
                    return got[0]


async def _dead_lettered(namesrv: str, message_id: str) -> list[client.MessageRecord]:
    deadline = time.monotonic() + DEADLINE_S
    async with client.AdminClient(namesrv) as admin:
        while True:
            assert time.monotonic() < deadline, "the message did not reach the DLQ in time"
            with contextlib.suppress(errors.NotFoundError):
                found = await admin.query_message_by_id(message_id, topic=f"%DLQ%{GROUP}")
                if found:
                    return found
            await asyncio.sleep(0.2)


def test_delivery_attempts_survive_sigkill_and_the_dlq_follows_the_maximum(
    tmp_path: pathlib.Path,
) -> None:
    """A message received and never acked, with the broker SIGKILLed and restarted after each
    delivery, comes back with attempt 1, 2, 3 and then lands in ``%DLQ%<group>``."""
    with namesrv_process(tmp_path) as namesrv:
        port = dev.free_port()
        broker = start_broker(tmp_path, namesrv, port)
        try:
            message_id = asyncio.run(_setup(namesrv))
            attempts = []
            for _ in range(ATTEMPTS_MAX):
                received = asyncio.run(_receive_one(namesrv))
                assert received.message_id == message_id
                attempts.append(received.delivery_attempt)
                kill(broker)
                broker = start_broker(tmp_path, namesrv, port)
            assert attempts == [1, 2, 3]
            (dead,) = asyncio.run(_dead_lettered(namesrv, message_id))
            assert dead.body == b"poison"
        finally:
            assert dev.stop_process(broker) in (0, -9)
