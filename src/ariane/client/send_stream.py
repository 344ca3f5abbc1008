"""``StreamSender``: the producer's ``ariane.ingest.v1.Ingest/SendStream`` to one broker.

A gRPC-Python call costs a broker about half a millisecond of CPU, so a producer in streaming
mode keeps one long-lived bidi stream per broker and writes each SendMessageRequest on it; the
broker answers every request with what unary SendMessage would, one response per request, in
request order, processing the requests of a stream one after another (the proto's contract).

One pump task per stream owns the gRPC call: it opens the call when the first request arrives,
writes requests in the order ``send`` was called, and a reader task matches each response to
the oldest unanswered request. When the stream fails (a gRPC error, the broker ending the
call, a write or the oldest request's answer taking over ``timeout_s``), every unanswered
request is written again, in its original order, on a new stream opened after a backoff, ahead
of requests never written: delivery is at least once (a batch the broker stored just before the
failure is stored twice), and batches written on one stream keep their order through retries,
so a message group (always sent to the same broker) keeps its order. A request written
``attempts`` times without an answer fails with the stream's error.

Invariants: at most ``window_max`` requests are pending per stream (written and unanswered, or
waiting to be written; more callers wait); one gRPC call at a time; responses are matched by
position only.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import logging
import time
from collections.abc import Callable

from ariane.client import transport as transport_mod
from ariane.common import errors
from ariane.grpcwire import pb

_log = logging.getLogger(__name__)

WINDOW_MAX_LIMIT = 1024
"""Upper bound of a stream's window, requests."""

Response = pb.v2_service.SendMessageResponse


@dataclasses.dataclass(slots=True, eq=False)
class _Pending:
    """One request of the stream and the future its caller awaits."""

    request: pb.v2_service.SendMessageRequest
    answer: asyncio.Future[Response]
    writes: int = 0
    written_at_s: float = 0.0


class StreamSender:
    """Sends SendMessageRequests to one broker over ``Ingest/SendStream``.

    Use it from one event loop; ``close()`` ends it.

    Args:
        transport: opens the stream calls (the producer's transport: channels and headers).
        endpoint: the broker's ``host:port``.
        window_max: most requests pending on the stream (1 .. 1024).
        attempts: most writes of one request (1 .. 16), the first included.
        timeout_s: how long the oldest written request may wait for its answer, seconds.
        backoff_s: pause before the n-th reopening (n = 0, 1, ...) after a failure, seconds.

    Raises:
        ValueError: ``window_max`` or ``attempts`` out of range.
    """

    def __init__(
        self,
        transport: transport_mod.Transport,
        endpoint: str,
        *,
        window_max: int,
        attempts: int,
        timeout_s: float,
        backoff_s: Callable[[int], float],
    ) -> None:
        if not 1 <= window_max <= WINDOW_MAX_LIMIT:
            raise ValueError(f"window_max must be 1..{WINDOW_MAX_LIMIT}, not {window_max}")
        if not 1 <= attempts <= 16:
            raise ValueError(f"attempts must be 1..16, not {attempts}")
        transport_mod.check_timeout_s("timeout_s", timeout_s)
        self.endpoint = endpoint
        self._transport = transport
        self._attempts = attempts
        self._timeout_s = timeout_s
        self._backoff_s = backoff_s
        self._window = asyncio.Semaphore(window_max)
        self._unsent: collections.deque[_Pending] = collections.deque()
        self._unanswered: collections.deque[_Pending] = collections.deque()
        self._wake = asyncio.Event()
        self._pump: asyncio.Task[None] | None = None
        self._closing = False
        self.streams_opened = 0
        """How many gRPC calls this sender has opened (1 unless the stream failed)."""
        self.answered = 0
        """How many responses the broker sent back."""

    @property
    def pending(self) -> int:
        """Requests not answered yet (written or waiting to be written)."""
        return len(self._unsent) + len(self._unanswered)

    async def send(self, request: pb.v2_service.SendMessageRequest) -> Response:
        """Write ``request`` on the stream and return the broker's answer to it.

        Returns:
            what SendMessage would answer (statuses inside are the caller's to read).

        Raises:
            BrokerUnreachableError: the stream failed ``attempts`` times with this request
                unanswered.
            RequestTimeoutError: the same, the last failure being an overdue answer.
            ArianeError: the sender is closed.
        """
        if self._closing:
            raise errors.ArianeError(f"the stream to {self.endpoint} is closed")
        await self._window.acquire()
        item = _Pending(request, asyncio.get_running_loop().create_future())
        self._unsent.append(item)
        self._wake.set()
        if self._pump is None or self._pump.done():
            self._pump = asyncio.create_task(self._run(), name=f"send-stream {self.endpoint}")
        return await item.answer

    async def close(self) -> None:
        """Let pending requests be answered (up to ``timeout_s``), then end the stream.

        Requests still pending after that fail with ``ArianeError``. Idempotent.
        """
        self._closing = True
        self._wake.set()
        pump = self._pump
        if pump is None:
            return
        try:
            await asyncio.wait_for(asyncio.shield(pump), self._timeout_s)
        except (TimeoutError, errors.ArianeError):
            pass
        finally:
            pump.cancel()
            with contextlib.suppress(asyncio.CancelledError, errors.ArianeError):
                await pump
            closed = errors.ArianeError(f"the stream to {self.endpoint} was closed")
            for item in [*self._unanswered, *self._unsent]:
                self._finish(item, closed)
            self._unanswered.clear()
            self._unsent.clear()

    # -- the pump ------------------------------------------------------------------------------

    async def _run(self) -> None:
        """Open, serve, and after a failure reopen the stream, until closed and drained; on an
        unexpected error, fail every pending request rather than leave its caller waiting."""
        try:
            await self._pump_streams()
        except BaseException as exc:
            failure = errors.ArianeError(
                f"the stream to {self.endpoint} stopped: {type(exc).__name__} {exc}"
            )
            for item in [*self._unanswered, *self._unsent]:
                self._finish(item, failure)
            self._unanswered.clear()
            self._unsent.clear()
            raise

    async def _pump_streams(self) -> None:
        failures = 0
        while True:
            while not self._unsent and not self._closing:  # reopen lazily, when needed
                self._wake.clear()
                await self._wake.wait()
            if self._closing and not self._unsent:
                return
            call = await self._transport.open_send_stream(self.endpoint)
            self.streams_opened += 1
            answered = self.answered
            try:
                await self._serve(call)
                return
            except errors.ArianeError as exc:
                call.cancel()
                self._requeue(exc)
                _log.warning(
                    "stream to %s failed (%d requests to write again): %s",
                    self.endpoint,
                    len(self._unsent),
                    exc.message,
                )
            failures = 0 if self.answered > answered else failures + 1
            await asyncio.sleep(self._backoff_s(failures))

    async def _serve(self, call: transport_mod.SendStreamCall) -> None:
        """Write requests as they come while a reader matches answers; return once closing and
        drained.

        Raises:
            ArianeError: the stream failed (``BrokerUnreachableError``, ``RequestTimeoutError``).
        """
        reader = asyncio.create_task(self._read(call))
        try:
            while True:
                await self._write_unsent(call)
                if self._closing and not self._unanswered:
                    await call.done_writing()
                    return
                self._wake.clear()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self._wait_s()):
                        await self._wake.wait()
                if reader.done():
                    reader.result()  # raises the stream's error
                self._check_overdue()
        finally:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, errors.ArianeError):
                await reader

    async def _write_unsent(self, call: transport_mod.SendStreamCall) -> None:
        while self._unsent:
            item = self._unsent.popleft()
            if item.answer.done():  # its caller gave up before it was written
                self._window.release()
                continue
            item.writes += 1
            item.written_at_s = time.monotonic()
            self._unanswered.append(item)
            try:
                async with asyncio.timeout(self._timeout_s):  # a broker that stopped reading
                    await call.write(item.request)
            except TimeoutError:
                raise errors.RequestTimeoutError(
                    f"{self.endpoint} did not take a SendStream request within {self._timeout_s} s"
                ) from None

    async def _read(self, call: transport_mod.SendStreamCall) -> None:
        """Match each response to the oldest unanswered request; wake the pump on failure."""
        try:
            while True:
                response = await call.read()
                if not self._unanswered:
                    raise errors.ArianeError(
                        f"{self.endpoint} answered a request that was never written"
                    )
                self._finish(self._unanswered.popleft(), response)
                self.answered += 1
                self._wake.set()
        finally:
            self._wake.set()

    def _wait_s(self) -> float | None:
        """Seconds until the oldest written request is overdue, or ``None`` when none is."""
        if not self._unanswered:
            return None
        return max(self._unanswered[0].written_at_s + self._timeout_s - time.monotonic(), 0.0)

    def _check_overdue(self) -> None:
        wait_s = self._wait_s()
        if wait_s is not None and wait_s <= 0:
            raise errors.RequestTimeoutError(
                f"{self.endpoint} did not answer a SendStream request within {self._timeout_s} s"
            )

    def _requeue(self, failure: errors.ArianeError) -> None:
        """Put unanswered requests back before the unsent ones; fail those out of attempts."""
        again: list[_Pending] = []
        for item in self._unanswered:
            if item.answer.done() or item.writes >= self._attempts:
                self._finish(item, failure)
            else:
                again.append(item)
        self._unanswered.clear()
        self._unsent.extendleft(reversed(again))

    def _finish(self, item: _Pending, outcome: Response | errors.ArianeError) -> None:
        """Resolve ``item`` (unless its caller gave up) and free its window slot."""
        if not item.answer.done():
            if isinstance(outcome, errors.ArianeError):
                item.answer.set_exception(outcome)
            else:
                item.answer.set_result(outcome)
        self._window.release()
