"""The producer's message ids, route cache, broker choice, pipelining bound, retries and
partial failures, without sockets (a fake transport answers)."""

from __future__ import annotations

import asyncio
import itertools
import re

import pytest

from ariane import client
from ariane.client import route_cache
from ariane.common import clock, errors, message, message_id
from ariane.grpcwire import codes, pb
from client_testing import FakeTransport, accept_all, queues

TWO_BROKERS = [("broker-a", "10.0.0.1:8081"), ("broker-b", "10.0.0.2:8081")]


def test_message_ids_follow_the_v5_layout_and_never_repeat_across_factories() -> None:
    """Ids are 34 upper-case hex characters (version, MAC, pid, seconds since 2021, sequence)
    and two factories of one process share the sequence, so they cannot collide."""
    time = clock.ManualClock(start_ms=message_id.EPOCH_MS + 90_000)
    first = message_id.MessageIdFactory(time=time, node=0xA1B2C3D4E5F6, pid=0x12345)
    second = message_id.MessageIdFactory(time=time, node=0xA1B2C3D4E5F6, pid=0x12345)
    made = first.take(3) + second.take(3) + [first.next_id()]
    assert all(re.fullmatch(r"[0-9A-F]{34}", m) for m in made)
    assert len(set(made)) == len(made)
    assert made[0].startswith("01A1B2C3D4E5F62345" + f"{90:08X}")
    time.advance_ms(5_000)
    assert first.next_id()[18:26] == f"{95:08X}"
    own = message_id.MessageIdFactory(time=time, node=1, pid=1, sequence=itertools.count(7))
    assert own.next_id().endswith("00000007")
    with pytest.raises(ValueError, match="count"):
        own.take(-1)


def test_route_cache_refreshes_after_the_interval_and_keeps_the_old_route_when_unreachable() -> (
    None
):
    """A route is fetched once while fresh, again after the interval, served stale when the
    name servers are down, and fetched first thing after ``invalidate``."""
    time = clock.ManualClock()
    fetched: list[str] = []
    down = False

    async def fetch(topic: str) -> route_cache.TopicRoute:
        if down:
            raise client.NameServerUnreachableError("no name server answered")
        fetched.append(topic)
        return route_cache.route_of(topic, queues(topic, TWO_BROKERS[:1]))

    async def main() -> None:
        nonlocal down
        cache = route_cache.RouteCache(fetch, refresh_interval_ms=30_000, topics_max=2, time=time)
        first = await cache.get("t")
        assert len(first.writable) == 4 and first.endpoints == {"10.0.0.1:8081"}
        assert await cache.get("t") is first and fetched == ["t"]
        time.advance_ms(30_000)
        await cache.get("t")
        assert fetched == ["t", "t"]
        down = True
        time.advance_ms(30_000)
        assert (await cache.get("t")).topic == "t"  # stale but served
        with pytest.raises(client.NameServerUnreachableError):
            await cache.get("never-fetched")
        down = False
        cache.invalidate("t")
        await cache.get("t")
        assert fetched == ["t", "t", "t"]
        await cache.get("u")
        await cache.get("v")
        assert len(cache) == 2  # bounded: the least recently used route went

    asyncio.run(main())


def test_batches_split_per_broker_by_message_group_and_receipts_keep_batch_order() -> None:
    """Grouped messages go to the broker their group hashes to (one SendMessage per broker, in
    batch order, typed FIFO), and the receipts come back in the order of the batch."""
    fake = FakeTransport({"t": queues("t", TWO_BROKERS, kind=message.MessageType.MIXED)})

    async def main() -> None:
        async with client.Producer("ns:9876", transport=fake) as producer:
            batch = [
                client.OutgoingMessage(f"m{i}".encode(), message_group=f"g{i % 5}", tag="x")
                for i in range(20)
            ]
            receipts = await producer.send_batch("t", batch)
            sent = fake.sent()
            assert len(sent) == 2
            owner: dict[str, str] = {}
            for endpoint, request in sent:
                bodies = [m.body for m in request.messages]
                assert bodies == sorted(bodies, key=lambda b: int(b[1:]))
                for m in request.messages:
                    system = m.system_properties
                    assert system.message_type == pb.v2.MessageType.FIFO and system.tag == "x"
                    assert owner.setdefault(system.message_group, endpoint) == endpoint
            by_id = {m.system_properties.message_id: m.body for _, r in sent for m in r.messages}
            assert [by_id[r.message_id] for r in receipts] == [m.body for m in batch]

    asyncio.run(main())


def test_at_most_in_flight_max_send_calls_run_at_once() -> None:
    """Twenty concurrent batches with ``in_flight_max=3`` never have more than 3 SendMessage
    calls under way, and all of them complete."""
    running = 0
    peak = 0
    release = asyncio.Event()

    async def slow(
        endpoint: str, request: pb.v2_service.SendMessageRequest
    ) -> pb.v2_service.SendMessageResponse:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await release.wait()
        running -= 1
        return await accept_all(endpoint, request)

    fake = FakeTransport({"t": queues("t", TWO_BROKERS)}, slow)
    settings = client.ProducerSettings(in_flight_max=3)

    async def main() -> None:
        async with client.Producer("ns:9876", settings=settings, transport=fake) as producer:
            sends = [asyncio.create_task(producer.send_batch("t", [b"x"] * 4)) for _ in range(20)]
            for _ in range(1000):
                if running == 3:
                    break
                await asyncio.sleep(0)
            assert running == 3
            release.set()
            done = await asyncio.gather(*sends)
        assert peak == 3 and sum(len(r) for r in done) == 80

    asyncio.run(main())


def test_unreachable_broker_is_retried_on_the_next_one_then_given_up() -> None:
    """A batch whose broker does not answer goes to the other broker; when none answers within
    ``send_attempts`` the caller gets ``BrokerUnreachableError``."""
    failing = {"10.0.0.1:8081"}

    async def flaky(
        endpoint: str, request: pb.v2_service.SendMessageRequest
    ) -> pb.v2_service.SendMessageResponse:
        if endpoint in failing:
            raise client.BrokerUnreachableError(f"{endpoint} did not answer SendMessage")
        return await accept_all(endpoint, request)

    fake = FakeTransport({"t": queues("t", TWO_BROKERS)}, flaky)

    async def main() -> None:
        async with client.Producer("ns:9876", transport=fake) as producer:
            for _ in range(2):  # whichever broker the round-robin picks first
                receipt = await producer.send("t", b"payload")
                assert receipt.broker_name == "broker-b"
            failing.add("10.0.0.2:8081")
            with pytest.raises(client.BrokerUnreachableError):
                await producer.send("t", b"payload")
            assert len(fake.sent()) >= 2 + 3

    asyncio.run(main())


def test_refusals_map_to_error_classes_whole_or_partial() -> None:
    """A batch refused whole raises the code's class; one refused in part raises
    ``PartialSendError`` with receipts of the stored messages and errors of the others; a
    message group to a NORMAL topic is refused before anything is sent."""
    mode = "whole"

    async def refuse(
        endpoint: str, request: pb.v2_service.SendMessageRequest
    ) -> pb.v2_service.SendMessageResponse:
        if mode == "whole":
            return pb.v2_service.SendMessageResponse(
                status=codes.status(errors.Code.MESSAGE_BODY_TOO_LARGE, "too big")
            )
        answer = await accept_all(endpoint, request)
        answer.entries[1].status.CopyFrom(codes.status(errors.Code.ILLEGAL_MESSAGE_TAG, "bad"))
        answer.status.CopyFrom(codes.status(errors.Code.MULTIPLE_RESULTS))
        return answer

    fake = FakeTransport({"t": queues("t", TWO_BROKERS[:1])}, refuse)

    async def main() -> None:
        nonlocal mode
        async with client.Producer("ns:9876", transport=fake) as producer:
            with pytest.raises(errors.MessageBodyTooLargeError, match="too big"):
                await producer.send_batch("t", [b"a", b"b"])
            mode = "partial"
            with pytest.raises(client.PartialSendError) as caught:
                await producer.send_batch("t", [b"a", b"b", b"c"])
            assert [r is None for r in caught.value.receipts] == [False, True, False]
            assert [(i, type(e)) for i, e in caught.value.failures] == [
                (1, errors.IllegalMessageTagError)
            ]
            calls = len(fake.sent())
            with pytest.raises(errors.MessageTypeConflictError):
                await producer.send("t", b"x", message_group="g")
            with pytest.raises(errors.TopicNotFoundError):
                await producer.send("nope", b"x")
            with pytest.raises(ValueError, match="at least one"):
                await producer.send_batch("t", [])
            assert len(fake.sent()) == calls

    asyncio.run(main())


def test_a_delivery_timestamp_sends_a_delay_message_and_is_checked_before_sending() -> None:
    """A message with ``delivery_timestamp_ms`` goes out typed DELAY with the
    ``delivery_timestamp`` system property (as the official clients send it), one without it
    stays NORMAL; a DELAY message to a NORMAL topic is refused before any call, and a delivery
    timestamp with a message group is refused when the message is made."""
    fake = FakeTransport(
        {
            "timers": queues("timers", TWO_BROKERS[:1], kind=message.MessageType.MIXED),
            "plain": queues("plain", TWO_BROKERS[:1]),
        }
    )
    due_ms = 1_900_000_000_123

    async def main() -> None:
        async with client.Producer("ns:9876", transport=fake) as producer:
            await producer.send("timers", b"later", delivery_timestamp_ms=due_ms)
            await producer.send("timers", b"now")
            with pytest.raises(errors.MessageTypeConflictError, match="DELAY"):
                await producer.send("plain", b"later", delivery_timestamp_ms=due_ms)

    asyncio.run(main())
    (later, now) = [r.messages[0].system_properties for _, r in fake.sent()]
    assert later.message_type == pb.v2.MessageType.DELAY
    assert later.delivery_timestamp.ToMilliseconds() == due_ms
    assert now.message_type == pb.v2.MessageType.NORMAL and not now.HasField("delivery_timestamp")
    with pytest.raises(ValueError, match="not both"):
        client.OutgoingMessage(b"x", message_group="g", delivery_timestamp_ms=due_ms)
