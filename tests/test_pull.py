"""Pull by offset against real ``ariane namesrv`` + ``ariane broker`` processes: v2 PullMessage,
GetOffset, UpdateOffset and QueryOffset through ``ariane.client.PullConsumer``, on the session's
shared cluster (``shared_cluster``) with this module's own ``pull-*`` topics.

Own cluster: the committed-offsets test stops its broker and starts it again on the same store.
"""

from __future__ import annotations

import asyncio
import pathlib
import time

import pytest

from ariane import client, dev
from ariane.common import errors, message
from ariane.grpcwire import pb
from live_testing import make_topic, wait_routed

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def namesrv(shared_cluster: dev.DevEndpoints) -> str:
    """The shared name server and broker (``shared_cluster``); the name server's endpoint."""
    return shared_cluster.namesrv


async def _one_queue_topic(namesrv: str, name: str) -> None:
    async with client.AdminClient(namesrv) as admin:
        await admin.create_topic(name, write_queue_nums=1)
        await wait_routed(admin, name)


def test_pull_reads_exact_ranges_and_repeats_them(namesrv: str) -> None:
    """A pull returns exactly the offsets ``[start, next_offset)`` of its queue, the same range
    read twice gives the same messages, and a read at the end answers empty at the max offset."""

    async def main() -> None:
        await _one_queue_topic(namesrv, "pull-range")
        async with client.Producer(namesrv) as producer:
            await producer.send_batch("pull-range", [f"m{i}".encode() for i in range(50)])
        async with client.PullConsumer(namesrv) as consumer:
            (queue,) = await consumer.queues_for_topic("pull-range")
            assert (await consumer.end_offsets([queue]))[queue] == 50
            first = await consumer.fetch(queue, 10, max_messages=5)
            again = await consumer.fetch(queue, 10, max_messages=5)
            assert [m.queue_offset for m in first.messages] == [10, 11, 12, 13, 14]
            assert [m.body for m in first.messages] == [f"m{i}".encode() for i in range(10, 15)]
            assert first.next_offset == 15
            assert again == first
            whole = await consumer.fetch(queue, 0, max_messages=1024)
            assert [m.body for m in whole.messages] == [f"m{i}".encode() for i in range(50)]
            assert whole.next_offset == 50
            end = await consumer.fetch(queue, 50, long_polling_timeout_s=0)
            assert end == client.PullBatch((), 50)

    asyncio.run(main())


def test_long_poll_answers_with_a_message_sent_while_it_waits(namesrv: str) -> None:
    """A pull parked at the end of a queue returns the message sent while it waits, before its
    long-polling time ends."""

    async def main() -> None:
        await _one_queue_topic(namesrv, "pull-wake")
        async with client.PullConsumer(namesrv) as consumer:
            (queue,) = await consumer.queues_for_topic("pull-wake")
            started = time.monotonic()
            parked = asyncio.create_task(consumer.fetch(queue, 0, long_polling_timeout_s=15))
            async with client.Producer(namesrv) as producer:
                await producer.send("pull-wake", b"wake up")
            got = await parked
            assert [m.body for m in got.messages] == [b"wake up"]
            assert got.next_offset == 1
            assert time.monotonic() - started < 15

    asyncio.run(main())


def test_filters_skip_offsets_and_the_next_offset_still_advances(namesrv: str) -> None:
    """Tag and SQL92 filters return only matching messages, and offsets they skip still move
    the next offset, also when nothing in the queue matches."""

    async def main() -> None:
        await _one_queue_topic(namesrv, "pull-filter")
        outgoing = [
            client.OutgoingMessage(
                f"m{i}".encode(), tag="a" if i % 2 else "b", properties={"n": str(i)}
            )
            for i in range(20)
        ]
        async with client.Producer(namesrv) as producer:
            await producer.send_batch("pull-filter", outgoing)
        async with client.PullConsumer(namesrv, tag_expression="a") as tags:
            (queue,) = await tags.queues_for_topic("pull-filter")
            got = await tags.fetch(queue, 0)
            assert [m.queue_offset for m in got.messages] == list(range(1, 20, 2))
            assert got.next_offset == 20
        async with client.PullConsumer(namesrv, sql_expression="n >= 15") as sql:
            got = await sql.fetch(queue, 3)
            assert [m.body for m in got.messages] == [f"m{i}".encode() for i in range(15, 20)]
        async with client.PullConsumer(namesrv, tag_expression="none") as nothing:
            got = await nothing.fetch(queue, 0, long_polling_timeout_s=0)
            assert got == client.PullBatch((), 20)

    asyncio.run(main())


def test_out_of_range_offsets_answer_illegal_offset_with_the_corrected_offset(
    namesrv: str,
) -> None:
    """A pull above the max offset (or beyond an empty queue) raises OffsetOutOfRangeError
    with the broker's corrected offset, and a commit outside [min, max] raises
    IllegalOffsetError."""

    async def main() -> None:
        await _one_queue_topic(namesrv, "pull-range-bad")
        await _one_queue_topic(namesrv, "pull-empty")
        async with client.Producer(namesrv) as producer:
            await producer.send_batch("pull-range-bad", [b"x"] * 3)
        async with client.PullConsumer(namesrv, "bad-offsets") as consumer:
            (queue,) = await consumer.queues_for_topic("pull-range-bad")
            with pytest.raises(client.OffsetOutOfRangeError) as raised:
                await consumer.fetch(queue, 9)
            assert (raised.value.offset, raised.value.next_offset) == (9, 3)
            assert raised.value.code is errors.Code.ILLEGAL_OFFSET
            (empty,) = await consumer.queues_for_topic("pull-empty")
            with pytest.raises(client.OffsetOutOfRangeError) as raised:
                await consumer.fetch(empty, 4)
            assert raised.value.next_offset == 0
            with pytest.raises(errors.IllegalOffsetError):
                await consumer.commit({queue: 4})
            assert await consumer.committed(queue) is None

    asyncio.run(main())


def test_offsets_for_times_at_the_edges(namesrv: str) -> None:
    """QueryOffset TIMESTAMP gives the min offset before the first message, the max offset
    after the last, and the first offset stored at or after an exact store time."""

    async def main() -> None:
        await _one_queue_topic(namesrv, "pull-time")
        async with client.Producer(namesrv) as producer:
            for i in range(6):
                await producer.send("pull-time", f"t{i}".encode())
        async with client.PullConsumer(namesrv) as consumer:
            (queue,) = await consumer.queues_for_topic("pull-time")
            stored = (await consumer.fetch(queue, 0)).messages
            stamps = [m.store_timestamp_ms for m in stored]
            assert stamps == sorted(stamps)
            first, last = stamps[0], stamps[-1]
            found = await consumer.offsets_for_times({queue: first - 1})
            assert found == {queue: 0}
            assert await consumer.offsets_for_times({queue: last + 1}) == {queue: 6}
            for position, stamp in enumerate(stamps):
                expected = min(i for i, s in enumerate(stamps) if s >= stamp)
                assert await consumer.offsets_for_times({queue: stamp}) == {queue: expected}
                assert expected <= position
            assert await consumer.beginning_offsets([queue]) == {queue: 0}

    asyncio.run(main())


def test_committed_offsets_survive_a_broker_restart(tmp_path: pathlib.Path) -> None:
    """Offsets committed with UpdateOffset read back with GetOffset, and still do after the
    broker is stopped and started again on the same store."""
    commits = {0: 3, 1: 0, 2: 7, 3: 5}

    async def write(namesrv: str) -> None:
        async with client.AdminClient(namesrv) as admin:
            await make_topic(admin, "pull-commit", message.MessageType.NORMAL)
        async with client.Producer(namesrv) as producer:
            await producer.send_batch("pull-commit", [b"c"] * 80)
        async with client.PullConsumer(namesrv, "committer") as consumer:
            queues = await consumer.assign("pull-commit")
            assert [await consumer.committed(q) for q in queues] == [None] * 4
            await consumer.commit({q: commits[q.queue_id] for q in queues})
            assert {q.queue_id: await consumer.committed(q) for q in queues} == commits

    async def read(namesrv: str) -> dict[int, int | None]:
        async with client.AdminClient(namesrv) as admin:
            await wait_routed(admin, "pull-commit")
        async with client.PullConsumer(namesrv, "committer") as consumer:
            queues = await consumer.assign("pull-commit")
            positions = {q.queue_id: await consumer.position(q) for q in queues}
            assert positions == commits
            return {q.queue_id: await consumer.committed(q) for q in queues}

    with dev.dev_cluster(tmp_path, namesrv_port=0) as endpoints:
        asyncio.run(write(endpoints.namesrv))
    with dev.dev_cluster(tmp_path, namesrv_port=0) as endpoints:
        assert asyncio.run(read(endpoints.namesrv)) == commits


def test_pull_consumer_reads_ten_thousand_messages_from_four_queues_exactly_once(
    namesrv: str,
) -> None:
    """A PullConsumer assigned the four queues of a topic reads 10,000 messages with getmany,
    each exactly once, and its commits leave the group no lag."""
    total = 10_000

    async def main() -> None:
        async with client.AdminClient(namesrv) as admin:
            await make_topic(admin, "pull-many", message.MessageType.NORMAL)
            async with client.Producer(namesrv) as producer:
                sent: list[str] = []
                for start in range(0, total, 500):
                    bodies = [f"{i}".encode() for i in range(start, start + 500)]
                    sent += [r.message_id for r in await producer.send_batch("pull-many", bodies)]
            got: list[client.ReceivedMessage] = []
            settings = client.PullSettings(long_polling_timeout_s=1)
            async with client.PullConsumer(namesrv, "many-group", settings=settings) as consumer:
                queues = await consumer.assign("pull-many")
                assert len(queues) == 4
                deadline = time.monotonic() + 120
                while len(got) < total:
                    assert time.monotonic() < deadline, f"read {len(got)} of {total} in time"
                    batches = await consumer.getmany()
                    got += [m for batch in batches.values() for m in batch]
                await consumer.commit()
                assert await consumer.getmany() == {}
            assert len(got) == total
            assert sorted(m.message_id for m in got) == sorted(sent)
            assert len({m.queue_id for m in got}) == 4
            rows = await admin.consumer_lag("many-group", "pull-many")
            assert sum(r.lag for r in rows) == 0

    asyncio.run(main())


def test_malformed_pull_family_requests_answer_their_codes(namesrv: str) -> None:
    """Raw requests an Ariane client never sends get RocketMQ codes: a queue id the topic does
    not have or a zero batch size BAD_REQUEST, a negative offset ILLEGAL_OFFSET, TIMESTAMP
    without a time BAD_REQUEST, an unknown group on GetOffset OFFSET_NOT_FOUND."""

    async def main() -> list[int]:
        await _one_queue_topic(namesrv, "pull-raw")
        transport = client.transport.Transport(timeout_s=10)
        try:
            found = await client.route_cache.query_route(transport, [namesrv], "pull-raw")
            (route,) = found.readable
            wrong_queue = pb.v2.MessageQueue()
            wrong_queue.CopyFrom(route.message_queue)
            wrong_queue.id = 7
            pulls = [
                pb.v2_service.PullMessageRequest(message_queue=wrong_queue, batch_size=1),
                pb.v2_service.PullMessageRequest(message_queue=route.message_queue),
                pb.v2_service.PullMessageRequest(
                    message_queue=route.message_queue, batch_size=1, offset=-1
                ),
            ]
            got = []
            for request in pulls:
                (answer,) = await transport.stream(
                    route.endpoint,
                    "PullMessage",
                    request,
                    pb.v2_service.PullMessageResponse,
                    timeout_s=10,
                    responses_max=4,
                )
                got.append(answer.status.code)
            query = await transport.unary(
                route.endpoint,
                "QueryOffset",
                pb.v2_service.QueryOffsetRequest(
                    message_queue=route.message_queue,
                    query_offset_policy=pb.v2.QueryOffsetPolicy.TIMESTAMP,
                ),
                pb.v2_service.QueryOffsetResponse,
            )
            offset = await transport.unary(
                route.endpoint,
                "GetOffset",
                pb.v2_service.GetOffsetRequest(
                    group=pb.v2.Resource(name="never-committed"),
                    message_queue=route.message_queue,
                ),
                pb.v2_service.GetOffsetResponse,
            )
            return [*got, query.status.code, offset.status.code]
        finally:
            await transport.close()

    assert asyncio.run(main()) == [
        errors.Code.BAD_REQUEST,
        errors.Code.BAD_REQUEST,
        errors.Code.ILLEGAL_OFFSET,
        errors.Code.BAD_REQUEST,
        errors.Code.OFFSET_NOT_FOUND,
    ]
