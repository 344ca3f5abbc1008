"""The Remoting transport against real loopback sockets: dispatch, concurrency, flags, bad frames.

Each test runs a ``RemotingServer`` on a free port and talks to it with a ``RemotingClient`` or a
raw socket, so what is checked is what a Java client would see on the wire.
"""

from __future__ import annotations

import asyncio
import socket
import struct

import pytest

import remoting_testing as rt
from ariane.remoting import codes, command, transport

SLOW, FAST, BOOM = 900, 901, 902


async def _echo(
    _conn: transport.Connection, req: command.RemotingCommand
) -> command.RemotingCommand:
    return command.response(req, ext_fields={"echo": req.ext_fields.get("v", "")}, body=req.body)


def test_response_copies_opaque_and_sets_the_response_flag() -> None:
    """A response carries the request's opaque, flag bit 0, and whatever the handler returned."""

    async def main() -> None:
        async with rt.running_server({FAST: _echo}) as (_, addr):
            host, port = addr.split(":")
            reader, writer = await asyncio.open_connection(host, int(port))
            req = command.request(FAST, {"v": "x"}, b"body", opaque=77)
            writer.write(command.encode(req))
            reply = await rt.read_command(reader)
            assert (reply.opaque, reply.flag, reply.code) == (77, 1, 0)
            assert reply.ext_fields == {"echo": "x"} and reply.body == b"body"
            writer.close()

    asyncio.run(main())


def test_a_slow_handler_does_not_block_other_requests_on_the_connection() -> None:
    """While one request waits in its handler (a long poll), a later one on the same
    connection is answered; the slow one is answered when it finishes, matched by opaque."""

    async def main() -> None:
        entered, release = asyncio.Event(), asyncio.Event()

        async def slow(
            _c: transport.Connection, req: command.RemotingCommand
        ) -> command.RemotingCommand:
            entered.set()
            await release.wait()
            return command.response(req, remark="slow")

        async with rt.running_server({SLOW: slow, FAST: _echo}) as (_, addr):
            client = transport.RemotingClient()
            slow_call = asyncio.ensure_future(client.invoke(addr, command.request(SLOW), 10))
            async with asyncio.timeout(5):
                await entered.wait()  # the slow request is in its handler before the next one
            fast = await client.invoke(addr, command.request(FAST, {"v": "1"}), 5)
            assert fast.ext_fields == {"echo": "1"} and not slow_call.done()
            release.set()
            assert (await slow_call).remark == "slow"
            await client.close()

    asyncio.run(main())


def test_oneway_requests_are_handled_but_never_answered() -> None:
    """A oneway request reaches its handler and produces no frame; the next reply on the
    connection is the one for the following two-way request."""

    async def main() -> None:
        seen: list[str] = []

        async def record(
            _c: transport.Connection, req: command.RemotingCommand
        ) -> command.RemotingCommand:
            seen.append(req.ext_fields["v"])
            return command.response(req)

        async with rt.running_server({FAST: record}) as (_, addr):
            host, port = addr.split(":")
            reader, writer = await asyncio.open_connection(host, int(port))
            writer.write(command.encode(command.request(FAST, {"v": "a"}, opaque=1, oneway=True)))
            writer.write(command.encode(command.request(FAST, {"v": "b"}, opaque=2)))
            reply = await rt.read_command(reader)
            assert reply.opaque == 2
            assert sorted(seen) == ["a", "b"]
            writer.close()

    asyncio.run(main())


def test_unknown_codes_and_failing_handlers_get_error_codes() -> None:
    """An unregistered code gets REQUEST_CODE_NOT_SUPPORTED; a handler that raises gets
    SYSTEM_ERROR with the exception in the remark, and the connection keeps serving."""

    async def main() -> None:
        async def boom(_c: transport.Connection, _r: command.RemotingCommand) -> None:
            raise RuntimeError("disk on fire")

        async with rt.running_server({BOOM: boom, FAST: _echo}) as (_, addr):
            client = transport.RemotingClient()
            unknown = await client.invoke(addr, command.request(12345), 5)
            assert unknown.code == codes.ResponseCode.REQUEST_CODE_NOT_SUPPORTED
            failed = await client.invoke(addr, command.request(BOOM), 5)
            assert failed.code == codes.ResponseCode.SYSTEM_ERROR
            assert failed.remark is not None and "disk on fire" in failed.remark
            ok = await client.invoke(addr, command.request(FAST, {"v": "still"}), 5)
            assert ok.ext_fields == {"echo": "still"}
            await client.close()

    asyncio.run(main())


def test_requests_above_the_in_flight_bound_get_system_busy() -> None:
    """With one request allowed in flight per connection, a second one while the first is
    held is answered SYSTEM_BUSY at once."""

    async def main() -> None:
        entered, release = asyncio.Event(), asyncio.Event()

        async def slow(
            _c: transport.Connection, req: command.RemotingCommand
        ) -> command.RemotingCommand:
            entered.set()
            await release.wait()
            return command.response(req)

        settings = transport.TransportSettings(in_flight_requests_max=1)
        async with rt.running_server({SLOW: slow}, settings=settings) as (_, addr):
            client = transport.RemotingClient()
            held = asyncio.ensure_future(client.invoke(addr, command.request(SLOW), 10))
            async with asyncio.timeout(5):
                await entered.wait()
            busy = await client.invoke(addr, command.request(SLOW), 5)
            assert busy.code == codes.ResponseCode.SYSTEM_BUSY
            release.set()
            assert (await held).code == codes.ResponseCode.SUCCESS
            await client.close()

    asyncio.run(main())


def test_the_server_sends_requests_and_oneways_to_a_connected_client() -> None:
    """Over a client's connection the server asks CHECK_TRANSACTION_STATE-like requests and
    gets the client handler's answer, and sends oneways that the client handles."""

    async def main() -> None:
        connections: list[transport.Connection] = []
        notified = asyncio.Event()

        async def on_check(
            _c: transport.Connection, req: command.RemotingCommand
        ) -> command.RemotingCommand:
            return command.response(req, ext_fields={"state": "COMMIT"})

        async def on_notify(_c: transport.Connection, _r: command.RemotingCommand) -> None:
            notified.set()

        client_handlers: dict[int, transport.Handler] = {
            codes.RequestCode.CHECK_TRANSACTION_STATE: on_check,
            codes.RequestCode.NOTIFY_CONSUMER_IDS_CHANGED: on_notify,
        }
        async with rt.running_server({FAST: _echo}, on_connect=connections.append) as (_, addr):
            client = transport.RemotingClient(client_handlers)
            await client.invoke(addr, command.request(FAST), 5)
            (conn,) = connections
            check = command.request(codes.RequestCode.CHECK_TRANSACTION_STATE)
            answer = await conn.request(check, timeout_s=5)
            assert answer.ext_fields == {"state": "COMMIT"} and answer.is_response
            await conn.send_oneway(command.request(codes.RequestCode.NOTIFY_CONSUMER_IDS_CHANGED))
            async with asyncio.timeout(5):
                await notified.wait()
            await client.close()

    asyncio.run(main())


def test_close_callbacks_run_when_the_client_goes_away() -> None:
    """A close callback registered on connect runs once when the client's socket closes."""

    async def main() -> None:
        gone: list[str] = []
        closed = asyncio.Event()

        def on_close(conn: transport.Connection) -> None:
            gone.append(conn.remote_address)
            closed.set()

        def on_connect(conn: transport.Connection) -> None:
            conn.add_close_callback(on_close)

        async with rt.running_server({FAST: _echo}, on_connect=on_connect) as (server, addr):
            client = transport.RemotingClient()
            await client.invoke(addr, command.request(FAST), 5)
            assert len(server.connections) == 1
            await client.close()
            async with asyncio.timeout(5):
                await closed.wait()
            assert len(gone) == 1 and gone[0].startswith("127.0.0.1:")

    asyncio.run(main())


def test_requests_take_effect_after_their_client_closed_but_long_polls_are_cancelled() -> None:
    """Requests read in full run to their end after the client closed the connection: a
    oneway, and a two-way request whose reply is moot (a Go producer's oneway sends carry no
    oneway flag and come right before it closes). A code in ``cancel_on_close_codes`` (a
    long poll) is cancelled at once."""

    async def main() -> None:
        release, all_in, cancelled = asyncio.Event(), asyncio.Event(), asyncio.Event()
        entered: list[int] = []
        ended: list[str] = []

        async def held(
            _c: transport.Connection, req: command.RemotingCommand
        ) -> command.RemotingCommand:
            entered.append(req.opaque)
            if len(entered) == 3:
                all_in.set()
            try:
                await release.wait()
                ended.append("oneway done" if req.is_oneway else "two-way done")
            except asyncio.CancelledError:
                ended.append(f"{req.code} cancelled")
                cancelled.set()
                raise
            return command.response(req)

        closed = asyncio.Event()

        def on_connect(conn: transport.Connection) -> None:
            conn.add_close_callback(lambda _c: closed.set())

        settings = transport.TransportSettings(cancel_on_close_codes=frozenset({BOOM}))
        handlers = {SLOW: held, BOOM: held}
        async with rt.running_server(handlers, settings=settings, on_connect=on_connect) as (
            _,
            addr,
        ):
            host, port = addr.split(":")
            reader, writer = await asyncio.open_connection(host, int(port))
            writer.write(command.encode(command.request(SLOW, opaque=1)))
            writer.write(command.encode(command.request(SLOW, opaque=2, oneway=True)))
            writer.write(command.encode(command.request(BOOM, opaque=3)))
            await writer.drain()
            async with asyncio.timeout(5):
                await all_in.wait()
            writer.close()
            async with asyncio.timeout(5):
                await cancelled.wait()  # the connection ended; the long poll is moot
                assert ended == [f"{BOOM} cancelled"]
                release.set()
                await closed.wait()
            assert sorted(ended) == sorted([f"{BOOM} cancelled", "two-way done", "oneway done"])
            del reader

    asyncio.run(main())


def test_frames_unread_when_a_reply_finds_the_peer_gone_are_handled() -> None:
    """The Go producer's shutdown race: a two-way request is in its handler, the client sends
    oneways and closes; the reply then fails (the peer reset) before the server read the
    oneways. They were delivered to the server's socket, so they still run (asyncio alone
    would drop the socket's unread input on the failed write); a frame cut short does not."""

    async def main() -> None:
        seen: list[str] = []
        entered, release, closed = asyncio.Event(), asyncio.Event(), asyncio.Event()

        async def held(
            _c: transport.Connection, req: command.RemotingCommand
        ) -> command.RemotingCommand:
            entered.set()
            await release.wait()
            return command.response(req, body=b"x" * 4096)

        async def record(
            _c: transport.Connection, req: command.RemotingCommand
        ) -> command.RemotingCommand:
            seen.append(req.ext_fields["v"])
            return command.response(req)

        def on_connect(conn: transport.Connection) -> None:
            conn.add_close_callback(lambda _c: closed.set())

        handlers = {SLOW: held, FAST: record}
        async with rt.running_server(handlers, on_connect=on_connect) as (_, addr):
            host, port = addr.split(":")
            with socket.create_connection((host, int(port))) as sock:
                sock.sendall(command.encode(command.request(SLOW, opaque=1)))
                async with asyncio.timeout(5):
                    await entered.wait()
                # from here the loop does not run until the reply is due: the server has
                # neither read the oneways nor seen the reset when it writes the reply
                oneways = [
                    command.encode(command.request(FAST, {"v": str(i)}, opaque=2 + i, oneway=True))
                    for i in range(3)
                ]
                cut = command.encode(command.request(FAST, {"v": "cut"}, opaque=9, oneway=True))
                sock.sendall(b"".join(oneways) + cut[:-3])
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            release.set()
            async with asyncio.timeout(5):
                await closed.wait()
            assert seen == ["0", "1", "2"]

    asyncio.run(main())


def test_a_request_without_response_times_out() -> None:
    """``invoke`` raises ``RequestTimeoutError`` when the handler takes longer than the timeout."""

    async def main() -> None:
        async def never(_c: transport.Connection, _r: command.RemotingCommand) -> None:
            await asyncio.Event().wait()

        async with rt.running_server({SLOW: never}) as (_, addr):
            client = transport.RemotingClient()
            with pytest.raises(transport.RequestTimeoutError):
                await client.invoke(addr, command.request(SLOW), 0.2)
            await client.close()

    asyncio.run(main())


def _frame(header: bytes, kind: int = 0, body: bytes = b"") -> bytes:
    return (
        struct.pack(">ii", 4 + len(header) + len(body), (kind << 24) | len(header)) + header + body
    )


_GOOD = command.encode(command.request(FAST, {"v": "ok"}, opaque=5))

BAD_FRAMES = {
    "truncated frame": _GOOD[:-10],
    "truncated length prefix": _GOOD[:2],
    "oversize length": struct.pack(">i", command.FRAME_BYTES_MAX) + b"\x00" * 8,
    "negative length": struct.pack(">i", -5) + b"\x00" * 8,
    "length below the header-info word": struct.pack(">i", 2) + b"\x00\x00",
    "wrong serialize type": _frame(b'{"code":901}', kind=7),
    "garbage JSON": _frame(b'{"code":901,'),
    "JSON that is not an object": _frame(b"[1,2]"),
    "header length past the frame": struct.pack(">ii", 8, 500) + b"{}{}",
    "binary header that does not add up": _frame(b"\x00\x01\x00", kind=1),
}


@pytest.mark.parametrize("name", sorted(BAD_FRAMES))
def test_a_bad_frame_closes_only_its_connection(name: str) -> None:
    """A malformed frame makes the server close that connection (as Java's decoder does),
    with no response, and the server goes on serving a new connection."""

    async def main() -> None:
        async with rt.running_server({FAST: _echo}) as (server, addr):
            host, port = addr.split(":")
            reader, writer = await asyncio.open_connection(host, int(port))
            writer.write(BAD_FRAMES[name])
            await writer.drain()
            if name.startswith("truncated"):
                writer.write_eof()
            assert await rt.closed_by_peer(reader)
            writer.close()
            client = transport.RemotingClient()
            reply = await client.invoke(addr, command.request(FAST, {"v": "next"}), 5)
            assert reply.ext_fields == {"echo": "next"}
            await client.close()
            assert len(server.connections) <= 1

    asyncio.run(main())
