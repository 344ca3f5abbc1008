"""Transactional messages in one process: half messages, EndTransaction, check-backs, restart.

The service runs over a real on-disk ``MessageStore`` and consumer-offset table with a fake
clock, so check schedules are driven by the test and a "restart" reopens the same files.
"""

from __future__ import annotations

import asyncio
import pathlib
from collections.abc import Iterator

import pytest

from ariane.broker import settings as core_settings
from ariane.broker.tables import offsets
from ariane.broker.transaction import check_service
from ariane.broker.transaction import processor as transaction
from ariane.broker.transaction import settings as transaction_settings
from ariane.common import clock, errors, ids, message, topics
from ariane.store import commit_log, message_store
from store_testing import tiny_settings

P = message.Property
Q0 = ids.QueueId(0)
"""The one queue of the transaction system topics."""
SETTINGS = transaction_settings.TransactionSettings(
    transaction_timeout_ms=6_000, transaction_check_interval_ms=1_000, transaction_check_max=3
)
REAL = ids.TopicName("orders")


class Broker:
    """A store, an offset table and the transaction service over them, reopenable."""

    def __init__(self, root: pathlib.Path, time: clock.ManualClock) -> None:
        self.root = root
        self.clock = time
        self.open()

    def open(self) -> None:
        settings = tiny_settings(commit_log_file_size_bytes=1 << 20, message_size_bytes_max=4096)
        self.store = message_store.MessageStore.open(self.root, settings, clock=self.clock)
        self.offsets = offsets.ConsumerOffsetManager(
            self.root / "offsets.json", offset_settings=core_settings.OffsetSettings()
        )
        self.tx = transaction.TransactionalMessageService.open(
            store=self.store,
            offset_table=self.offsets,
            settings=SETTINGS,
            broker_name="broker-a",
            time=self.clock,
        )

    def restart(self) -> None:
        self.offsets.persist()
        self.store.close()
        self.open()

    def prepare(self, message_id: str, *, queue_id: int = 2) -> str:
        props = {P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: message_id, P.TAGS: "tx"}
        original = commit_log.AppendRequest(
            message=message.Message(REAL, f"body-{message_id}".encode(), props),
            queue_id=ids.QueueId(queue_id),
        )
        half = self.tx.to_half(original)
        result = self.store.put_message(half)
        assert result.status.is_stored
        return self.tx.prepared(half, result)

    def real_messages(self, queue_id: int = 2) -> list[message.StoredMessage]:
        got = self.store.get_messages(
            REAL, ids.QueueId(queue_id), ids.QueueOffset(0), max_count=100, max_bytes=1 << 20
        )
        return list(got.messages)

    def end(self, message_id: str, tid: str, resolution: transaction.Resolution) -> None:
        asyncio.run(
            self.tx.end_transaction(
                topic=REAL, message_id=message_id, transaction_id=tid, resolution=resolution
            )
        )


class Recorder:
    """A check listener that records what it was asked and always finds a producer."""

    def __init__(self) -> None:
        self.checks: list[transaction.HalfCheck] = []

    def send_check(self, check: transaction.HalfCheck) -> bool:
        self.checks.append(check)
        return True


@pytest.fixture
def broker(tmp_path: pathlib.Path) -> Iterator[Broker]:
    made = Broker(tmp_path / "store", clock.ManualClock())
    yield made
    made.store.close()


def test_half_message_is_in_the_half_topic_only_until_commit(broker: Broker) -> None:
    """A half message is stored in RMQ_SYS_TRANS_HALF_TOPIC only; COMMIT writes it once to its
    real topic and queue with the same message id, and a repeated COMMIT writes nothing."""
    tid = broker.prepare("M1")
    assert broker.real_messages() == []
    assert broker.store.max_queue_offset(topics.TRANS_HALF_TOPIC, Q0) == 1
    broker.end("M1", tid, transaction.Resolution.COMMIT)
    broker.end("M1", tid, transaction.Resolution.COMMIT)
    [committed] = broker.real_messages()
    assert committed.message.uniq_key == "M1" and committed.body == b"body-M1"
    assert committed.sys_flag & message.TRANSACTION_TYPE_MASK == message.SysFlag.TRANSACTION_COMMIT
    assert P.REAL_TOPIC not in committed.properties and committed.properties[P.TAGS] == "tx"
    assert broker.store.max_queue_offset(topics.TRANS_OP_HALF_TOPIC, Q0) == 1
    with pytest.raises(errors.InvalidTransactionIdError, match="COMMIT"):
        broker.end("M1", tid, transaction.Resolution.ROLLBACK)
    assert len(broker.tx) == 0


def test_rollback_writes_only_the_op_record(broker: Broker) -> None:
    """ROLLBACK discards: nothing reaches the real topic, a repeat is OK, a later COMMIT is
    refused with INVALID_TRANSACTION_ID."""
    tid = broker.prepare("M2")
    broker.end("M2", tid, transaction.Resolution.ROLLBACK)
    broker.end("M2", tid, transaction.Resolution.ROLLBACK)
    with pytest.raises(errors.InvalidTransactionIdError):
        broker.end("M2", tid, transaction.Resolution.COMMIT)
    assert broker.real_messages() == []
    assert broker.store.max_queue_offset(topics.TRANS_OP_HALF_TOPIC, Q0) == 1


@pytest.mark.parametrize(
    ("message_id", "mangle"),
    [
        ("M3", lambda tid: "garbage"),
        ("M3", lambda tid: tid.replace("broker-a", "broker-b")),
        ("M3", lambda tid: "7" + tid),
        ("other-id", lambda tid: tid),
    ],
)
def test_end_transaction_refuses_what_it_did_not_issue(
    broker: Broker, message_id: str, mangle: object
) -> None:
    """A malformed id, another broker's, an unknown origin, or the wrong message id answers
    INVALID_TRANSACTION_ID and leaves the half message open."""
    tid = broker.prepare("M3")
    assert callable(mangle)
    with pytest.raises(errors.InvalidTransactionIdError):
        broker.end(message_id, mangle(tid), transaction.Resolution.COMMIT)
    assert len(broker.tx) == 1 and broker.real_messages() == []


def test_checks_are_spaced_by_the_interval_and_given_up_after_the_max(broker: Broker) -> None:
    """The first check comes after transaction_timeout_ms, the next ones every interval, each
    one restored to the real topic with the same message id; after transaction_check_max
    checks the half is parked in TRANS_CHECK_MAX_TIME_TOPIC and never checked again."""
    tid = broker.prepare("M4")
    recorder = Recorder()
    checker = check_service.TransactionCheckService(
        transactions=broker.tx, listener=recorder, time=broker.clock
    )
    broker.clock.advance_ms(5_999)
    assert asyncio.run(checker.check_once()) == 0
    broker.clock.advance_ms(1)
    assert asyncio.run(checker.check_once()) == 1
    assert asyncio.run(checker.check_once()) == 0  # not again before the interval
    first = recorder.checks[0]
    assert (first.transaction_id, first.message.topic, first.message.queue_id) == (tid, REAL, 2)
    assert first.message.message.uniq_key == "M4" and P.REAL_TOPIC not in first.message.properties
    for _ in range(SETTINGS.transaction_check_max):
        broker.clock.advance_ms(SETTINGS.transaction_check_interval_ms)
        asyncio.run(checker.check_once())
    assert [c.check_times for c in recorder.checks] == [1, 2, 3]
    assert len(broker.tx) == 0 and broker.tx.stats.given_up == 1
    parked = broker.store.get_messages(
        topics.TRANS_CHECK_MAX_TIME_TOPIC, Q0, ids.QueueOffset(0), max_count=10, max_bytes=1 << 20
    )
    assert [m.message.uniq_key for m in parked.messages] == ["M4"]
    with pytest.raises(errors.InvalidTransactionIdError, match="DISCARD"):
        broker.end("M4", tid, transaction.Resolution.COMMIT)


def test_state_survives_a_restart(broker: Broker) -> None:
    """After a restart the unresolved halves (with their check counts) are back, resolved ones
    are not, a repeated EndTransaction still answers as before, and once everything is
    resolved the committed progress leaves nothing to re-read."""
    tids = {mid: broker.prepare(mid) for mid in ("A", "B", "C")}
    broker.end("A", tids["A"], transaction.Resolution.COMMIT)
    checker = check_service.TransactionCheckService(
        transactions=broker.tx, listener=Recorder(), time=broker.clock
    )
    broker.clock.advance_ms(SETTINGS.transaction_timeout_ms)
    asyncio.run(checker.check_once())  # B and C get their first check copy
    broker.end("C", tids["C"], transaction.Resolution.ROLLBACK)
    broker.restart()
    assert sorted(e.transaction_id for e in broker.tx.due(10**15)) == [tids["B"]]
    assert [e.check_times for e in broker.tx.due(10**15)] == [1]
    broker.end("A", tids["A"], transaction.Resolution.COMMIT)  # a repeat, as before
    broker.end("B", tids["B"], transaction.Resolution.COMMIT)
    assert sorted(m.message.uniq_key or "" for m in broker.real_messages()) == ["A", "B"]
    half_at, op_at = broker.tx.commit_progress()
    assert half_at == broker.store.max_queue_offset(topics.TRANS_HALF_TOPIC, Q0)
    assert op_at == broker.store.max_queue_offset(topics.TRANS_OP_HALF_TOPIC, Q0)
    broker.restart()
    assert len(broker.tx) == 0 and broker.tx.due(10**15) == []


def test_a_full_half_table_answers_too_many_requests(tmp_path: pathlib.Path) -> None:
    """Beyond half_messages_max unresolved halves a TRANSACTION send is refused."""
    made = Broker(tmp_path / "store", clock.ManualClock())
    try:
        made.tx.settings = transaction_settings.TransactionSettings(half_messages_max=1)
        made.prepare("X")
        with pytest.raises(errors.TooManyRequestsError, match="half_messages_max"):
            made.prepare("Y")
    finally:
        made.store.close()


def test_a_slave_never_checks_nor_moves_progress_and_a_promotion_rebuilds(
    broker: Broker,
) -> None:
    """On a slave the check pass does nothing and the committed check progress is gone, even
    when it lay past every half (issue 25); become_master rebuilds every unresolved half from
    the queues' first record, with its transaction id, and become_slave drops them again."""
    tids = {mid: broker.prepare(mid) for mid in ("S1", "S2", "S3")}
    broker.end("S1", tids["S1"], transaction.Resolution.ROLLBACK)
    top = broker.store.max_queue_offset(topics.TRANS_HALF_TOPIC, Q0)
    broker.offsets.commit(transaction.CONSUMER_GROUP, topics.TRANS_HALF_TOPIC, Q0, top)
    broker.tx.become_slave()
    assert len(broker.tx) == 0 and not broker.tx.is_master
    checker = check_service.TransactionCheckService(
        transactions=broker.tx, listener=Recorder(), time=broker.clock
    )
    broker.clock.advance_ms(SETTINGS.transaction_timeout_ms)
    assert asyncio.run(checker.check_once()) == 0
    assert broker.offsets.query(transaction.CONSUMER_GROUP, topics.TRANS_HALF_TOPIC, Q0) is None
    with pytest.raises(errors.ForbiddenError):
        broker.end("S2", tids["S2"], transaction.Resolution.COMMIT)
    assert broker.tx.become_master() == 2
    assert sorted(e.transaction_id for e in broker.tx.due(10**15)) == sorted(
        [tids["S2"], tids["S3"]]
    )
    broker.end("S2", tids["S2"], transaction.Resolution.COMMIT)
    assert [m.message.uniq_key for m in broker.real_messages()] == ["S2"]
    broker.tx.become_slave()
    assert len(broker.tx) == 0
