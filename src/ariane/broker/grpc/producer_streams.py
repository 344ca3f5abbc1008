"""Live Telemetry streams, so the broker can push commands to clients (grpc-v2.md §6.2, §6.8).

A Telemetry call is the only server→client channel of the v2 protocol. ``serve`` turns one call
into a loop that yields both the replies to the client's settings and the commands the broker
pushes (``RecoverOrphanedTransactionCommand``), from one bounded outbox per stream.
``ProducerStreams`` keeps the outboxes of the open streams by client id and, as the transaction
check listener, picks a live producer of a topic round-robin (RocketMQ
``ProducerManager.getAvailableChannel``) and queues the check there.

Invariants: one outbox per client id (a reopened stream replaces the old one); an outbox is
removed when its stream ends; at most ``streams_max`` streams and ``OUTBOX_COMMANDS_MAX``
queued commands each: a check that finds every outbox full is not sent (it is due again at the
next pass).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator, Awaitable, Callable

from ariane.broker.tables import clients
from ariane.broker.transaction import processor as transaction
from ariane.common import errors, ids, message
from ariane.grpcwire import messages, pb

OUTBOX_COMMANDS_MAX = 1_024
"""Most commands queued for one stream and not yet written to it."""

_NO_DELIVERY = message.Delivery(receipt_handle="", invisible_ms=0, attempt=1)
"""A check-back shows the message, not a delivery: no receipt handle, first attempt."""

Command = pb.v2_service.TelemetryCommand
Outbox = asyncio.Queue[Command]
Answer = Callable[[Command], Awaitable[Command | None]]
"""The reply to one command the client wrote, or ``None`` for no reply."""


class ProducerStreams:
    """The outboxes of the open Telemetry streams.

    Args:
        client_registry: the client sessions (type and topics come from their settings).
        streams_max: most open streams.
    """

    def __init__(
        self, client_registry: clients.ClientRegistry, *, streams_max: int = clients.CLIENTS_MAX
    ) -> None:
        self._clients = client_registry
        self._streams_max = streams_max
        self._outboxes: dict[ids.ClientId, Outbox] = {}
        self._turn = itertools.count()

    def __len__(self) -> int:
        return len(self._outboxes)

    def open(self, client_id: ids.ClientId) -> Outbox:
        """A new outbox for the stream of ``client_id`` (replacing an older stream's).

        Raises:
            TooManyRequestsError: ``streams_max`` streams are open.
        """
        if client_id not in self._outboxes and len(self._outboxes) >= self._streams_max:
            raise errors.TooManyRequestsError("too many Telemetry streams open on this broker")
        outbox: Outbox = asyncio.Queue(OUTBOX_COMMANDS_MAX)
        self._outboxes[client_id] = outbox
        return outbox

    def close(self, client_id: ids.ClientId, outbox: Outbox) -> None:
        """Forget the stream that owned ``outbox`` (a newer stream of the client stays)."""
        if self._outboxes.get(client_id) is outbox:
            del self._outboxes[client_id]

    def producers_of(self, topic: str) -> list[ids.ClientId]:
        """Clients with an open stream whose settings say they produce to ``topic``."""
        found = []
        for client_id in self._outboxes:
            session = self._clients.get(client_id)
            if session is None or session.client_type != "PRODUCER":
                continue
            if topic in session.topics:
                found.append(client_id)
        return found

    def push(self, client_id: ids.ClientId, command: Command) -> bool:
        """Queue ``command`` on the open stream of ``client_id`` (the v2 Admin's
        ``PrintThreadStackTrace`` and ``VerifyMessage``); False when it has no stream or its
        outbox is full."""
        outbox = self._outboxes.get(client_id)
        if outbox is None:
            return False
        try:
            outbox.put_nowait(command)
        except asyncio.QueueFull:
            return False
        return True

    def send_check(self, check: transaction.HalfCheck) -> bool:
        """Queue a ``RecoverOrphanedTransactionCommand`` for one live producer of the topic.

        Returns:
            False when no producer of the topic has a stream with room.
        """
        candidates = self.producers_of(check.message.topic)
        if not candidates:
            return False
        command = Command(
            recover_orphaned_transaction_command=pb.v2_service.RecoverOrphanedTransactionCommand(
                message=messages.outgoing(check.message, _NO_DELIVERY),
                transaction_id=check.transaction_id,
            )
        )
        start = next(self._turn)
        for step in range(len(candidates)):
            outbox = self._outboxes[candidates[(start + step) % len(candidates)]]
            with contextlib.suppress(asyncio.QueueFull):
                outbox.put_nowait(command)
                return True
        return False


async def serve(
    requests: AsyncIterator[Command], outbox: Outbox, answer: Answer
) -> AsyncIterator[Command]:
    """The responses of one Telemetry call: replies to the client's commands and pushed
    commands, in the order they were queued, until the client ends its side.

    Raises:
        Exception: whatever ``answer`` raised (the call ends with it).
    """
    reader = asyncio.ensure_future(_read(requests, outbox, answer))
    getter: asyncio.Future[Command] | None = None
    try:
        while True:
            getter = asyncio.ensure_future(outbox.get())
            await asyncio.wait({getter, reader}, return_when=asyncio.FIRST_COMPLETED)
            if getter.done():
                yield getter.result()
                continue
            getter.cancel()
            reader.result()  # the client ended its side (or ``answer`` raised: re-raised)
            while not outbox.empty():
                yield outbox.get_nowait()
            return
    finally:
        if getter is not None:
            getter.cancel()
        reader.cancel()
        with contextlib.suppress(BaseException):
            await reader


async def _read(requests: AsyncIterator[Command], outbox: Outbox, answer: Answer) -> None:
    async for command in requests:
        reply = await answer(command)
        if reply is not None:
            await outbox.put(reply)
