"""The POP journal in the replicated CommitLog (``broker.pop.replica``), in process: its chunks
cut on record boundaries, and a broker promoted over a copy of a master's store (the bytes a
slave holds) rebuilds that master's POP state from the CommitLog alone: FIFO order, old
receipts, done offsets and the newest snapshot as the replay start."""

from __future__ import annotations

import asyncio
import pathlib
import shutil

import pytest

import broker_harness
from ariane.broker.pop import journal as pop_journal
from ariane.broker.pop import journal_file as pop_journal_file
from ariane.broker.pop import replica
from ariane.broker.tables import subscriptions
from ariane.common import ids, message
from broker_harness import incoming

T = "replica-topic"
G = ids.GroupName("replica-group")


def _records(count: int) -> list[pop_journal.Record]:
    return [
        pop_journal.Ack(G, ids.TopicName(T), ids.QueueId(0), ids.QueueOffset(i))
        for i in range(count)
    ]


def test_chunks_are_cut_on_record_boundaries_and_decode_back() -> None:
    """Proves ``split`` never cuts a record: every chunk decodes whole, in order, each within
    the bound (one record per chunk when the bound is below a record's size)."""
    records = _records(50)
    data = pop_journal.encode_all(records)
    size = len(pop_journal.encode(records[0]))
    for bound in (1, size, 3 * size + 1, len(data)):
        chunks = replica.split(data, bound)
        assert b"".join(chunks) == data
        decoded = [pop_journal.decode(c) for c in chunks]
        assert all(d.problem is None for d in decoded)
        assert [r for d in decoded for r in d.records] == records
        assert all(len(c) <= max(bound, size) for c in chunks)


def _master(root: pathlib.Path) -> broker_harness.BrokerHarness:
    harness = broker_harness.BrokerHarness(root)
    harness.runtime.pop_service.start_replicating()
    harness.create_topic(T, queues=1, kind=message.MessageType.FIFO)
    harness.runtime.groups.create_or_update(
        subscriptions.SubscriptionGroupConfig(G, consume_orderly=True)
    )
    return harness


def _promoted_copy(
    master: broker_harness.BrokerHarness, tmp: pathlib.Path
) -> broker_harness.BrokerHarness:
    """A broker over a copy of the master's store without its file journal and its offsets
    for the group (what a slave holds), promoted."""
    master.close()
    shutil.copytree(tmp / "master", tmp / "slave")
    (tmp / "slave" / "store" / pop_journal_file.DIR_NAME / pop_journal_file.FILE_NAME).unlink()
    promoted = broker_harness.BrokerHarness(tmp / "slave", time=master.clock)
    promoted.runtime.offsets.remove_group(G)
    assert promoted.runtime.pop_service.become_master() > 0
    return promoted


@pytest.mark.parametrize("snapshot", [False, True])
def test_a_promoted_copy_keeps_fifo_order_old_receipts_and_acks(
    tmp_path: pathlib.Path, snapshot: bool
) -> None:
    """Proves a broker promoted over a master's CommitLog holds back a FIFO group's next
    message while the first is in flight, acks the master's receipt of it, then delivers the
    next one, never an acked one again (with and without a snapshot before the deltas)."""
    master = _master(tmp_path / "master")
    sender, consumer = master.processors.sender, master.processors.consumer
    bodies = [b"a0", b"a1", b"a2"]
    asyncio.run(sender.send([incoming(T, b, group="a") for b in bodies], born_ip="10.1.2.3"))
    (first,) = asyncio.run(consumer.receive(master.receive_request(G, T)))
    consumer.ack(G, T, first.delivery.receipt_handle)
    if snapshot:
        assert master.runtime.pop_service.compact()
    (second,) = asyncio.run(consumer.receive(master.receive_request(G, T)))
    assert [first.stored.body, second.stored.body] == bodies[:2]

    promoted = _promoted_copy(master, tmp_path)
    try:
        consumer = promoted.processors.consumer
        assert asyncio.run(consumer.receive(promoted.receive_request(G, T))) == []
        consumer.ack(G, T, second.delivery.receipt_handle)
        got = asyncio.run(consumer.receive(promoted.receive_request(G, T)))
        assert [r.stored.body for r in got] == [b"a2"]
        assert got[0].delivery.attempt == 1
    finally:
        promoted.close()
