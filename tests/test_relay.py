"""The relay between front-end workers and the store owner: its frames and its behaviour.

The codec is checked by properties (round trips, any chunking, refusal of malformed frames);
the relay by real gRPC calls to a worker's ``grpc.aio`` server whose calls reach a test
implementation through ``RelayForwarder`` → Unix socket → ``RelayServer``.
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import relay_testing
from ariane.common import errors
from ariane.grpcwire import codes, guard, pb, relay, relay_codec, rpc

svc = pb.v2_service
CLIENT_ID = (("x-mq-client-id", "relay-test@1"),)

texts = st.text(max_size=40)
open_calls = st.builds(
    relay_codec.OpenCall,
    path=texts,
    peer=texts,
    headers=st.lists(st.tuples(texts, texts), max_size=5).map(tuple),
    deadline_us=st.integers(-1, 2**62),
    message=st.none() | st.binary(max_size=300),
    half_closed=st.booleans(),
)


@settings(max_examples=100, deadline=None)
@given(call=open_calls, call_id=st.integers(0, 2**64 - 1))
def test_open_frames_round_trip(call: relay_codec.OpenCall, call_id: int) -> None:
    """An OPEN frame decodes to the call it was encoded from, call id included."""
    (frame,) = relay_codec.FrameDecoder().feed(relay_codec.encode_open(call_id, call))
    assert (frame.kind, frame.call_id) == (relay_codec.FrameKind.OPEN, call_id)
    assert relay_codec.decode_open(frame.payload) == call


@settings(max_examples=100, deadline=None)
@given(
    payloads=st.lists(st.binary(max_size=200), min_size=1, max_size=8),
    cuts=st.lists(st.integers(0, 2_000), max_size=6),
)
def test_the_decoder_returns_whole_frames_whatever_the_chunking(
    payloads: list[bytes], cuts: list[int]
) -> None:
    """Frames come out whole and in order however the byte stream is split."""
    stream = b"".join(relay_codec.encode_message(i, p) for i, p in enumerate(payloads))
    stream += relay_codec.encode_end(99, 3, "détails")
    decoder = relay_codec.FrameDecoder()
    frames = []
    start = 0
    for cut in [*sorted(c for c in cuts if c <= len(stream)), len(stream)]:
        frames.extend(decoder.feed(stream[start:cut]))
        start = cut
    assert [(f.call_id, f.payload) for f in frames[:-1]] == list(enumerate(payloads))
    assert relay_codec.decode_end(frames[-1].payload) == (3, "détails")
    assert decoder.buffered_bytes == 0


def test_malformed_frames_are_refused() -> None:
    """Oversized lengths, unknown kinds, truncated payloads and bad codes raise FrameError."""
    too_long = struct.pack(">IBQ", relay_codec.FRAME_BYTES_MAX, 3, 1)
    with pytest.raises(relay_codec.FrameError, match="bounds"):
        relay_codec.FrameDecoder().feed(too_long)
    with pytest.raises(relay_codec.FrameError, match="unknown frame kind"):
        relay_codec.FrameDecoder().feed(struct.pack(">IBQ", 9, 77, 1))
    opened = relay_codec.encode_open(
        1, relay_codec.OpenCall("/a/B", "p", (("k", "v"),), -1, None, True)
    )
    (frame,) = relay_codec.FrameDecoder().feed(opened)
    with pytest.raises(relay_codec.FrameError, match="ends inside"):
        relay_codec.decode_open(frame.payload[:-1])
    with pytest.raises(relay_codec.FrameError, match="status code"):
        relay_codec.encode_end(1, 17, "")
    with pytest.raises(relay_codec.FrameError, match="HELLO"):
        relay_codec.decode_hello(b"\x00")
    assert relay_codec.decode_hello(relay_codec.encode_hello(4242, 3)[13:]) == (4242, 3)


class Recorder:
    """A MessagingService that records what its calls saw and can park, abort and echo."""

    def __init__(self) -> None:
        self.seen: dict[str, Any] = {}
        self.parked = asyncio.Event()
        self.cancelled = asyncio.Event()

    async def query_route(self, request: Any, context: guard.CallContext) -> Any:
        self.seen = {
            "headers": dict(context.invocation_metadata() or ()),
            "peer": context.peer(),
            "remaining_s": context.time_remaining(),
            "topic": request.topic.name,
        }
        return svc.QueryRouteResponse(status=codes.ok())

    async def heartbeat(self, request: Any, context: guard.CallContext) -> Any:
        await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "settings are malformed")

    async def receive_message(self, request: Any, context: guard.CallContext) -> AsyncIterator[Any]:
        yield svc.ReceiveMessageResponse(status=codes.ok())
        try:
            self.parked.set()
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            self.cancelled.set()
            raise
        yield svc.ReceiveMessageResponse(status=codes.ok())

    async def telemetry(
        self, requests: AsyncIterator[Any], context: guard.CallContext
    ) -> AsyncIterator[Any]:
        async for command in requests:
            yield svc.TelemetryCommand(status=codes.ok(), settings=command.settings)
        yield svc.TelemetryCommand(status=codes.status(errors.Code.OK, "half-closed"))


def _receive(channel: grpc.aio.Channel) -> Any:
    return channel.unary_stream(
        rpc.method_path(pb.MESSAGING_SERVICE, "ReceiveMessage"),
        request_serializer=svc.ReceiveMessageRequest.SerializeToString,
        response_deserializer=svc.ReceiveMessageResponse.FromString,
    )


async def _failed_call(channel: grpc.aio.Channel, name: str, request: Any) -> grpc.aio.AioRpcError:
    """Make a unary call that must fail at the gRPC level; returns its error."""
    response_type = pb.message_class(pb.MESSAGING_SERVICE.methods_by_name[name].output_type)
    with pytest.raises(grpc.aio.AioRpcError) as failure:
        await rpc.unary_call(
            channel, pb.MESSAGING_SERVICE, name, request, response_type, timeout_s=5
        )
    return failure.value


def test_headers_peer_and_deadline_reach_the_owner() -> None:
    """The owner's context answers the client's headers, address and remaining deadline."""
    recorder = Recorder()

    async def main() -> None:
        async with relay_testing.relayed_server(implementation=recorder) as (channel, _, _):
            request = svc.QueryRouteRequest(topic=pb.v2.Resource(name="orders"))
            response = await rpc.unary_call(
                channel,
                pb.MESSAGING_SERVICE,
                "QueryRoute",
                request,
                svc.QueryRouteResponse,
                timeout_s=7,
                metadata=CLIENT_ID,
            )
            assert response.status.code == 20000

    asyncio.run(main())
    assert recorder.seen["headers"]["x-mq-client-id"] == "relay-test@1"
    assert recorder.seen["peer"].startswith(("ipv4:127.0.0.1:", "ipv6:[::ffff:127.0.0.1]:"))
    # the client's 7 s deadline, less the time to get there; gRPC may round the grpc-timeout
    # header up a little on the way, so allow 0.1 s above it
    assert 5 < recorder.seen["remaining_s"] <= 7.1
    assert recorder.seen["topic"] == "orders"


def test_an_abort_on_the_owner_is_the_clients_grpc_status() -> None:
    """``context.abort`` on the owner ends the client's call with that gRPC code and text."""

    async def main() -> None:
        async with relay_testing.relayed_server(implementation=Recorder()) as (channel, _, _):
            failure = await _failed_call(channel, "Heartbeat", svc.HeartbeatRequest())
            assert failure.code() is grpc.StatusCode.INVALID_ARGUMENT
            assert failure.details() == "settings are malformed"

    asyncio.run(main())


def test_bidirectional_streams_keep_order_and_see_the_half_close() -> None:
    """Telemetry commands are answered in order; the owner sees the client's half-close."""

    async def main() -> None:
        async with relay_testing.relayed_server(implementation=Recorder()) as (channel, _, _):
            telemetry = channel.stream_stream(
                rpc.method_path(pb.MESSAGING_SERVICE, "Telemetry"),
                request_serializer=svc.TelemetryCommand.SerializeToString,
                response_deserializer=svc.TelemetryCommand.FromString,
            )
            commands = [
                svc.TelemetryCommand(
                    settings=pb.v2.Settings(client_type=pb.v2.ClientType.Name(kind))
                )
                for kind in (1, 2, 3, 4)
            ]
            answers = [a async for a in telemetry(iter(commands), timeout=10)]
            assert [a.settings.client_type for a in answers[:4]] == [1, 2, 3, 4]
            assert answers[4].status.message == "half-closed"

    asyncio.run(main())


def test_a_cancelled_call_is_cancelled_on_the_owner() -> None:
    """A client that gives up on a parked receive makes the owner's handler stop."""
    recorder = Recorder()

    async def main() -> None:
        async with relay_testing.relayed_server(implementation=recorder) as (channel, _, _):
            call = _receive(channel)(svc.ReceiveMessageRequest(), timeout=30)
            first = await call.read()
            assert first.status.code == 20000
            await asyncio.wait_for(recorder.parked.wait(), 10)
            call.cancel()
            await asyncio.wait_for(recorder.cancelled.wait(), 10)

    asyncio.run(main())


def test_calls_above_the_owners_limit_are_resource_exhausted() -> None:
    """With ``calls_max`` calls open on the owner, one more is refused, not queued."""
    recorder = Recorder()

    async def main() -> None:
        async with relay_testing.relayed_server(implementation=recorder, calls_max=1) as (
            channel,
            _,
            _,
        ):
            parked = _receive(channel)(svc.ReceiveMessageRequest(), timeout=30)
            await parked.read()
            await asyncio.wait_for(recorder.parked.wait(), 10)
            failure = await _failed_call(channel, "QueryRoute", svc.QueryRouteRequest())
            assert failure.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
            parked.cancel()

    asyncio.run(main())


def test_calls_in_flight_fail_unavailable_when_the_owner_goes_away() -> None:
    """Closing the owner answers the worker's open calls UNAVAILABLE and tells the worker."""
    recorder = Recorder()

    async def main() -> None:
        async with relay_testing.relayed_server(implementation=recorder) as (
            channel,
            owner,
            forwarder,
        ):
            call = _receive(channel)(svc.ReceiveMessageRequest(), timeout=30)
            await call.read()
            await asyncio.wait_for(recorder.parked.wait(), 10)
            await owner.close()
            with pytest.raises(grpc.aio.AioRpcError) as failure:
                await call.read()
            assert failure.value.code() is grpc.StatusCode.UNAVAILABLE
            assert failure.value.details() == relay.OWNER_GONE
            await asyncio.wait_for(forwarder.lost.wait(), 10)

    asyncio.run(main())
