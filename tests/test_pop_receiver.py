"""The POP seam's contract (``pop.receiver.PopReceiver``): one receive pass reads each queue
through one store read and marks each message once (in flight, done, or held), in-process
over a real store in a temp dir (small segments) and a manual clock."""

from __future__ import annotations

import asyncio
import dataclasses
import pathlib
import sys
import types
from collections.abc import Iterator
from typing import Any

import pytest

import broker_harness
from ariane.broker import filters
from ariane.broker.pop import receiver as pop_receiver
from ariane.broker.tables import subscriptions
from ariane.common import ids, message
from ariane.store import results as store_results
from broker_harness import incoming

T = ids.TopicName("orders")
G = ids.GroupName("g")
Q0 = ids.QueueId(0)


class _Retries:
    """A ``receiver.RetryWriter`` that records what it is asked to write."""

    def __init__(self) -> None:
        self.failed: list[tuple[bytes, int, int | None]] = []
        self.moved: list[bytes] = []

    async def retry_failed(
        self,
        group: subscriptions.SubscriptionGroupConfig,
        stored: message.StoredMessage,
        *,
        failed_attempt: int,
        delay_ms: int | None = None,
    ) -> None:
        self.failed.append((stored.body, failed_attempt, delay_ms))

    async def move_to_pop_retry(self, group: ids.GroupName, stored: message.StoredMessage) -> None:
        self.moved.append(stored.body)


@dataclasses.dataclass
class _Seam:
    """A receiver over the harness's real store and POP service, with counting spies."""

    harness: broker_harness.BrokerHarness
    receiver: pop_receiver.PopReceiver
    retries: _Retries
    reads: list[dict[str, Any]]
    checkpoints: list[int]
    dones: list[int]

    def send(self, *messages: message.IncomingMessage) -> None:
        asyncio.run(self.harness.processors.sender.send(list(messages), born_ip="10.1.2.3"))

    def receive(
        self,
        group: subscriptions.SubscriptionGroupConfig,
        message_filter: filters.MessageFilter = pop_receiver.EVERYTHING,
        *,
        topic: ids.TopicName = T,
        batch_size: int = 32,
    ) -> list[pop_receiver.Popped]:
        request = pop_receiver.PopRequest(
            group=group,
            sources=[pop_receiver.Source(topic, Q0, message_filter)],
            batch_size=batch_size,
            invisible_ms=10_000,
        )
        self.reads.clear()
        self.checkpoints.clear()
        self.dones.clear()
        return asyncio.run(self.receiver.receive(request))


@pytest.fixture
def seam(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[_Seam]:
    harness = broker_harness.BrokerHarness(tmp_path)
    harness.create_topic(T, queues=1)
    runtime = harness.runtime
    retries = _Retries()
    made = _Seam(
        harness,
        pop_receiver.PopReceiver(
            pop_service=runtime.pop_service,
            topic_table=runtime.topics,
            group_table=runtime.groups,
            retrier=retries,
            broker_name=runtime.broker_name,
        ),
        retries,
        [],
        [],
        [],
    )
    get_messages = runtime.store.get_messages
    checkpoint, done = runtime.pop_service.checkpoint, runtime.pop_service.done

    def counted_get(*args: Any, **kwargs: Any) -> store_results.GetMessageResult:
        made.reads.append(kwargs)
        return get_messages(*args, **kwargs)

    def counted_checkpoint(group: ids.GroupName, entry: Any) -> None:
        made.checkpoints.append(entry.queue_offset)
        checkpoint(group, entry)

    def counted_done(group: ids.GroupName, topic: ids.TopicName, queue_id: Any, at: int) -> None:
        made.dones.append(at)
        done(group, topic, queue_id, at)

    monkeypatch.setattr(runtime.store, "get_messages", counted_get)
    monkeypatch.setattr(runtime.pop_service, "checkpoint", counted_checkpoint)
    monkeypatch.setattr(runtime.pop_service, "done", counted_done)
    yield made
    harness.close()


def _tagged(body: bytes, tag: str) -> message.IncomingMessage:
    return dataclasses.replace(incoming(T, body), tag=tag, user_properties={"color": tag})


def _group(seam: _Seam, *, orderly: bool = False) -> subscriptions.SubscriptionGroupConfig:
    config = subscriptions.SubscriptionGroupConfig(G, consume_orderly=orderly)
    return seam.harness.runtime.groups.create_or_update(config)


@pytest.mark.parametrize(
    ("kind", "expression"),
    [(filters.FilterKind.TAG, "red"), (filters.FilterKind.SQL92, "color = 'red'")],
)
def test_a_pass_reads_once_and_a_filtered_message_is_done_not_in_flight(
    seam: _Seam, kind: filters.FilterKind, expression: str
) -> None:
    """One store read serves the pass; the matching messages get one checkpoint each, the
    filtered one none and no journal record (it is done: acking the first message moves the
    committed offset over it)."""
    group = _group(seam)
    seam.send(_tagged(b"r0", "red"), _tagged(b"b1", "blue"), _tagged(b"r2", "red"))
    popped = seam.receive(group, filters.compile_filter(kind, expression))
    assert [p.stored.body for p in popped] == [b"r0", b"r2"]
    assert [p.delivery.attempt for p in popped] == [1, 1]
    assert len(seam.reads) == 1
    assert seam.checkpoints == [0, 2]
    assert seam.dones == []
    state = seam.harness.runtime.pop_service.existing_state(G)
    assert state is not None
    assert state.in_flight(T, Q0, ids.QueueOffset(1)) is None
    assert state.scan_offset(T, Q0) == 3
    assert seam.receiver.ack(G, T, popped[0].delivery.receipt_handle) is None
    assert state.committed_offset(T, Q0) == 2


def test_a_pass_stops_at_the_batch_size_and_marks_nothing_beyond(seam: _Seam) -> None:
    """With batch size 2 of 5 messages the read asks for 2, two are marked in flight and the
    next pass starts at the third."""
    group = _group(seam)
    seam.send(*(incoming(T, bytes([i])) for i in range(5)))
    first = seam.receive(group, batch_size=2)
    assert [p.stored.body for p in first] == [b"\x00", b"\x01"]
    assert [r["max_count"] for r in seam.reads] == [2]
    assert seam.checkpoints == [0, 1]
    assert seam.dones == []
    second = seam.receive(group, batch_size=2)
    assert [p.stored.body for p in second] == [b"\x02", b"\x03"]


def test_a_fifo_queue_with_a_message_in_flight_yields_nothing(seam: _Seam) -> None:
    """An orderly group gets the head of a message group; the next message of that group is
    held (no checkpoint) and no pass yields it until the head is acked."""
    fifo_topic = ids.TopicName("fifo")
    seam.harness.create_topic(fifo_topic, queues=1, kind=message.MessageType.FIFO)
    group = _group(seam, orderly=True)
    seam.send(*(incoming(fifo_topic, body, group="mg") for body in (b"m0", b"m1")))
    (head,) = seam.receive(group, topic=fifo_topic)
    assert head.stored.body == b"m0"
    assert seam.checkpoints == [0]
    assert seam.receive(group, topic=fifo_topic) == []
    assert seam.checkpoints == []
    assert len(seam.reads) == 1  # the scan past the held one; the held one is not read
    assert seam.receiver.ack(G, fifo_topic, head.delivery.receipt_handle) == fifo_topic
    (then,) = seam.receive(group, topic=fifo_topic)
    assert (then.stored.body, then.delivery.attempt) == (b"m1", 1)
    assert seam.checkpoints == [1]


def test_an_expired_delivery_goes_to_the_retry_writer_not_out(seam: _Seam) -> None:
    """A concurrent group's delivery whose invisible time ran out is handed to the injected
    retry writer once (failed attempt 1, due now) and settled, not delivered again."""
    group = _group(seam)
    seam.send(incoming(T, b"late"))
    (popped,) = seam.receive(group)
    seam.harness.clock.advance_ms(10_001)
    assert seam.receive(group) == []
    assert seam.retries.failed == [(b"late", 1, 0)]
    assert seam.dones == [0]
    assert seam.receive(group) == []
    assert seam.retries.failed == [(b"late", 1, 0)]
    assert not seam.receiver.holds(G, T, popped.delivery.receipt_handle)


def _module_crossings(run: Any) -> set[tuple[str, str]]:
    """(caller module, callee module) of every Python call that crosses a module while
    ``run()`` runs (``sys.setprofile``; a resumed coroutine's caller is its awaiter)."""
    crossings: set[tuple[str, str]] = set()

    def profile(frame: types.FrameType, event: str, _arg: object) -> None:
        if event == "call" and frame.f_back is not None:
            callee = frame.f_globals.get("__name__", "")
            caller = frame.f_back.f_globals.get("__name__", "")
            if callee != caller:
                crossings.add((caller, callee))

    sys.setprofile(profile)
    try:
        run()
    finally:
        sys.setprofile(None)
    return crossings


def test_a_receive_crosses_into_the_pop_seam_once_and_nothing_calls_back_up(seam: _Seam) -> None:
    """The v2 receive path (``ConsumeProcessor.receive``, here with an expiry revived into a
    retry copy on the way) enters POP state only through the receiver, never reads the store
    itself, and nothing below calls back into the consume processor."""
    harness = seam.harness
    consumer = harness.processors.consumer
    seam.send(incoming(T, b"a"))
    assert len(asyncio.run(consumer.receive(harness.receive_request("g", T)))) == 1
    harness.clock.advance_ms(10_001)
    seam.send(incoming(T, b"b"))
    crossings = _module_crossings(
        lambda: asyncio.run(consumer.receive(harness.receive_request("g", T)))
    )
    consume = "ariane.broker.processors.consume"
    assert ("ariane.broker.pop.receiver", "ariane.broker.processors.retry") in crossings
    below = {callee for caller, callee in crossings if caller == consume}
    assert "ariane.broker.pop.receiver" in below
    assert not {m for m in below if m.startswith(("ariane.broker.pop.", "ariane.store."))} - {
        "ariane.broker.pop.receiver"
    }
    callers_of_consume = {caller for caller, callee in crossings if callee == consume}
    assert not {m for m in callers_of_consume if m.startswith("ariane.")}
