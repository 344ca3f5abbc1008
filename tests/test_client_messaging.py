"""Producer and SimpleConsumer against a real ``ariane namesrv`` + ``ariane broker``: round trips
deliver every message exactly once, unknown topics raise TopicNotFoundError, FIFO groups keep
their order per message group. The cluster is the session's shared one (``shared_cluster``); the
topics and groups are this module's own."""

from __future__ import annotations

import asyncio

import pytest

from ariane import client, dev
from ariane.common import errors, message
from live_testing import drain, eventually, make_topic

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def namesrv(shared_cluster: dev.DevEndpoints) -> str:
    """The shared name server and broker (``shared_cluster``); the name server's endpoint."""
    return shared_cluster.namesrv


def test_send_and_send_batch_round_trip_exactly_once(namesrv: str) -> None:
    """Messages sent one by one and in batches (tags, keys, properties) are each received once
    with what was sent, acks leave no lag, and a further ack of a used handle is refused."""

    async def main() -> None:
        async with client.AdminClient(namesrv) as admin:
            await make_topic(admin, "round-trip", message.MessageType.NORMAL)
            async with client.Producer(namesrv) as producer:
                singles = [
                    await producer.send(
                        "round-trip",
                        f"single-{i}".encode(),
                        tag="solo",
                        keys=[f"k{i}"],
                        properties={"n": str(i)},
                    )
                    for i in range(5)
                ]
                batch = [f"batch-{i}".encode() for i in range(150)]
                batch_receipts = await producer.send_batch("round-trip", batch)
                batch_receipts += await producer.send_batch(
                    "round-trip", [client.OutgoingMessage(b"tagged", tag="t", keys=("a", "b"))]
                )
            sent = {r.message_id: r for r in singles + batch_receipts}
            assert len(sent) == 156
            async with client.SimpleConsumer(namesrv, "rt-group", "round-trip") as consumer:
                got = await drain(consumer, 156)
                assert sorted(m.message_id for m in got) == sorted(sent)
                by_id = {m.message_id: m for m in got}
                first = by_id[singles[0].message_id]
                assert (first.body, first.tag, first.keys) == (b"single-0", "solo", ("k0",))
                assert first.properties == {"n": "0"} and first.delivery_attempt == 1
                assert not any(m.corrupted for m in got)
                bodies = {by_id[r.message_id].body for r in batch_receipts[:150]}
                assert bodies == set(batch)
                assert by_id[batch_receipts[-1].message_id].keys == ("a", "b")
                with pytest.raises(errors.InvalidReceiptHandleError):
                    await consumer.ack(got[:1])

            async def no_lag() -> bool:
                rows = await admin.consumer_lag("rt-group", "round-trip")
                return sum(r.lag + r.inflight for r in rows) == 0

            await eventually(no_lag)

    asyncio.run(main())


def test_unknown_topic_raises_topic_not_found(namesrv: str) -> None:
    """Sending to or receiving from a topic no broker serves raises TopicNotFoundError."""

    async def main() -> None:
        async with client.Producer(namesrv) as producer:
            with pytest.raises(errors.TopicNotFoundError):
                await producer.send("no-such-topic", b"x")
            with pytest.raises(errors.TopicNotFoundError):
                await producer.send_batch("no-such-topic", [b"x", b"y"])
        async with client.SimpleConsumer(namesrv, "g", "no-such-topic") as consumer:
            with pytest.raises(errors.TopicNotFoundError):
                await consumer.receive()

    asyncio.run(main())


def test_fifo_groups_keep_their_order(namesrv: str) -> None:
    """Messages of a FIFO topic sent in consecutive batches over several message groups reach
    a FIFO consumer group in send order within each group, each exactly once, and a group with
    a message in flight delivers nothing more until it is acked."""
    groups = [f"order-{g}" for g in range(4)]
    per_group = 15

    async def main() -> None:
        async with client.AdminClient(namesrv) as admin:
            await make_topic(admin, "fifo-topic", message.MessageType.FIFO, fifo_group="fifo-g")
        async with client.Producer(namesrv) as producer:
            outgoing = [
                client.OutgoingMessage(f"{group}:{i}".encode(), message_group=group)
                for i in range(per_group)
                for group in groups
            ]
            for start in range(0, len(outgoing), 10):
                await producer.send_batch("fifo-topic", outgoing[start : start + 10])
            with pytest.raises(errors.MessageTypeConflictError):
                await producer.send("fifo-topic", b"no group")
        async with client.SimpleConsumer(namesrv, "fifo-g", "fifo-topic") as consumer:
            first = await consumer.receive(1, invisible_duration_s=30)
            second = await consumer.receive(32, invisible_duration_s=30)
            held = first[0].message_group
            assert second and held not in {m.message_group for m in second}
            await consumer.ack(first + second)
            got = first + second
            got += await drain(consumer, len(outgoing) - len(got), batch=8)
        assert len(got) == len(outgoing)
        for group in groups:
            seen = [m.body.decode() for m in got if m.message_group == group]
            assert seen == [f"{group}:{i}" for i in range(per_group)]

    asyncio.run(main())
