"""``send_stream.StreamSender`` over fake stream calls: answers are matched in order, unanswered
requests are written again in their order on a new stream, a request out of attempts fails with
the stream's error, an overdue answer counts as a failure, and the window bounds what is pending."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from ariane.client import send_stream, transport
from ariane.common import errors
from ariane.grpcwire import codes, pb

Response = pb.v2_service.SendMessageResponse


def request(name: str) -> pb.v2_service.SendMessageRequest:
    """A request recognisable by its one message's id."""
    out = pb.v2_service.SendMessageRequest()
    out.messages.add().system_properties.message_id = name
    return out


def name_of(message: pb.v2_service.SendMessageRequest | Response) -> str:
    """The id a fake answer or a request carries."""
    if isinstance(message, Response):
        return message.entries[0].message_id
    return message.messages[0].system_properties.message_id


class FakeCall(transport.SendStreamCall):
    """A stream call the test drives: records writes, answers or fails on demand."""

    def __init__(self, *, answer_writes: bool) -> None:  # no gRPC call behind it
        self.written: list[str] = []
        self.answer_writes = answer_writes
        self.outbox: asyncio.Queue[Response | errors.ArianeError] = asyncio.Queue()
        self.broken: errors.ArianeError | None = None
        self.cancelled = False

    async def write(self, request: pb.v2_service.SendMessageRequest) -> None:
        if self.broken is not None:
            raise self.broken
        self.written.append(name_of(request))
        if self.answer_writes:
            self.answer(name_of(request))

    async def read(self) -> Response:
        item = await self.outbox.get()
        if isinstance(item, errors.ArianeError):
            raise item
        return item

    async def done_writing(self) -> None:
        """Nothing to flush."""

    def cancel(self) -> None:
        self.cancelled = True

    def answer(self, name: str) -> None:
        """Queue an OK answer for the request ``name``."""
        entry = pb.v2_service.SendResultEntry(status=codes.ok(), message_id=name)
        self.outbox.put_nowait(Response(status=codes.ok(), entries=[entry]))

    def fail(self, text: str) -> None:
        """Break the call: the pending read and every later write fail."""
        self.broken = transport.BrokerUnreachableError(text)
        self.outbox.put_nowait(self.broken)


class FakeTransport(transport.Transport):
    """Hands out the fake calls of ``calls`` in order."""

    def __init__(self, calls: list[FakeCall]) -> None:
        super().__init__(timeout_s=5)
        self.calls = calls
        self.opened: list[FakeCall] = []

    async def open_send_stream(self, endpoint: str) -> transport.SendStreamCall:
        call = self.calls[len(self.opened)]
        self.opened.append(call)
        return call


def sender(
    calls: list[FakeCall], *, window_max: int = 8, attempts: int = 3, timeout_s: float = 5.0
) -> tuple[send_stream.StreamSender, FakeTransport]:
    """A sender over ``calls`` that reopens without pausing."""
    fake = FakeTransport(calls)
    made = send_stream.StreamSender(
        fake,
        "broker:1",
        window_max=window_max,
        attempts=attempts,
        timeout_s=timeout_s,
        backoff_s=lambda failures: 0.0,
    )
    return made, fake


async def until(check: Callable[[], bool]) -> None:
    """Yield to the loop until ``check()`` holds (bounded number of turns)."""
    for _ in range(1000):
        if check():
            return
        await asyncio.sleep(0)
    raise AssertionError("condition not reached")


def test_unanswered_requests_are_written_again_in_order_on_a_new_stream() -> None:
    """After the first stream answers one request and breaks, the other four are written again
    on the second stream in their original order, each caller gets its own answer, and the
    second stream is the last one opened."""

    async def main() -> None:
        first, second = FakeCall(answer_writes=False), FakeCall(answer_writes=True)
        made, _ = sender([first, second])
        names = [f"r{i}" for i in range(5)]
        sends = [asyncio.ensure_future(made.send(request(n))) for n in names]
        await until(lambda: len(first.written) == 5)
        first.answer("r0")
        await until(sends[0].done)
        first.fail("broker restarted")
        answers = await asyncio.gather(*sends)
        assert [name_of(a) for a in answers] == names
        assert first.written == names and second.written == names[1:]
        assert first.cancelled and made.streams_opened == 2 and made.answered == 5
        assert made.pending == 0
        await made.close()

    asyncio.run(main())


def test_a_request_out_of_attempts_fails_with_the_streams_error() -> None:
    """With two attempts, a request whose two streams both break fails with
    BrokerUnreachableError; a later request opens a third stream and is answered."""

    async def main() -> None:
        calls = [FakeCall(answer_writes=False) for _ in range(2)]
        calls.append(FakeCall(answer_writes=True))
        for call in calls[:2]:
            call.fail("down")
        made, fake = sender(calls, attempts=2)
        with pytest.raises(transport.BrokerUnreachableError, match="down"):
            await made.send(request("lost"))
        assert name_of(await made.send(request("later"))) == "later"
        assert len(fake.opened) == 3
        await made.close()

    asyncio.run(main())


def test_an_overdue_answer_breaks_the_stream() -> None:
    """A stream that never answers fails its request with RequestTimeoutError once the request
    has waited ``timeout_s`` on each of its attempts."""

    async def main() -> None:
        calls = [FakeCall(answer_writes=False), FakeCall(answer_writes=False)]
        made, _ = sender(calls, attempts=2, timeout_s=0.1)
        with pytest.raises(errors.RequestTimeoutError):
            await made.send(request("slow"))
        assert all(c.written == ["slow"] and c.cancelled for c in calls)
        await made.close()

    asyncio.run(main())


def test_the_window_bounds_pending_requests() -> None:
    """With a window of two, a third request is not written until an answer frees a slot, and
    closing lets the pending requests be answered first."""

    async def main() -> None:
        call = FakeCall(answer_writes=False)
        made, _ = sender([call], window_max=2)
        sends = [asyncio.ensure_future(made.send(request(f"w{i}"))) for i in range(3)]
        await until(lambda: len(call.written) == 2)
        for _ in range(10):
            await asyncio.sleep(0)
        assert call.written == ["w0", "w1"] and made.pending == 2
        call.answer("w0")
        await until(lambda: len(call.written) == 3)
        closing = asyncio.ensure_future(made.close())
        call.answer("w1")
        call.answer("w2")
        await closing
        assert [name_of(a) for a in await asyncio.gather(*sends)] == ["w0", "w1", "w2"]
        with pytest.raises(errors.ArianeError, match="closed"):
            await made.send(request("after"))

    asyncio.run(main())
