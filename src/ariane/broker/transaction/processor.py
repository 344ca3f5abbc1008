"""Transactional (half) messages: prepare, EndTransaction, and the table of unresolved halves.

Mirrors RocketMQ 5.3's ``TransactionalMessageServiceImpl``, ``TransactionalMessageBridge``
and ``EndTransactionProcessor`` (rocketmq-reference.md "Transactional (half) message";
grpc-v2.md §6.3, §6.8). Everything is in the CommitLog, so it survives any stop:

* **half message**: a TRANSACTION send is stored in ``RMQ_SYS_TRANS_HALF_TOPIC`` queue 0 with its
  real topic and queue in ``REAL_TOPIC``/``REAL_QID`` and ``TRAN_MSG=true`` (RocketMQ
  ``parseHalfMessageInner``). Consumers never read system topics, so it is invisible.
* **check copy**: each check-back first appends a copy of the half message to the same queue
  with ``TRANSACTION_CHECK_TIMES`` = n, ``TRAN_PREPARED_QUEUE_OFFSET`` = the original's queue
  offset (its *origin*) and ``__transactionId__`` (RocketMQ ``putBackHalfMsgQueue``), so the
  check count and the schedule survive a restart.
* **op record**: ``RMQ_SYS_TRANS_OP_HALF_TOPIC`` queue 0, body = the origin as decimal text, tag
  ``d`` (RocketMQ ``REMOVE_TAG``), plus what was decided (``TRAN_RESOLUTION``: COMMIT, ROLLBACK
  or DISCARD). COMMIT first writes the message to its real topic and queue, same body and
  properties, same message id (``UNIQ_KEY``), SYSFLAG ``TRANSACTION_COMMIT``; ROLLBACK writes
  the op record only; a half message checked ``transaction_check_max`` times is copied to
  ``TRANS_CHECK_MAX_TIME_TOPIC`` and gets a DISCARD op record.
* **progress**: the committed offsets of group ``CID_RMQ_SYS_TRANS`` on both queues in the
  consumer-offset table (RocketMQ ``TransactionalMessageUtil.buildConsumerGroup``), persisted
  with the other offsets.

Invariants: (1) the half progress offset is at most the queue offset of the newest record of
every unresolved origin, and the op progress offset is at most the offset of every op record
whose origin has a record at or past the half progress offset; so rebuilding the table from
the records past both offsets (``open``) gives back every unresolved half message with its
check count, and never one that was resolved. (2) An origin is resolved at most once: the
table entry is claimed before the store is awaited, a repeat of the same resolution answers OK
without writing, a different one INVALID_TRANSACTION_ID. (3) At most ``half_messages_max``
halves are unresolved (a TRANSACTION send beyond answers TOO_MANY_REQUESTS). The op window
(op records not yet behind the progress offset) holds the ops written since the oldest
unresolved half was stored, which is given up after ``transaction_check_max`` checks. (4) Only
a master owns transactions: a slave's table is empty, it never checks back, never moves the
progress and holds none in its offset table (``become_slave``).

Roles (issue 25). As in RocketMQ, the half and op topics are ordinary CommitLog records, so they
replicate, and a slave runs no check-backs (``BrokerController.startProcessorByHa`` starts
``TransactionalMessageCheckService`` on a master only). RocketMQ's promoted slave then resumes
from the ``CID_RMQ_SYS_TRANS`` offsets its ``SlaveSynchronize`` copied last. Ariane goes
further and trusts no progress at a promotion: a copied one may lie past records the slave does
not hold yet, and a demoted master's own one past records its new master's history replaced.
``become_master`` rebuilds the table from the first record of the half and op queues, so every
unresolved half is pending again under the transaction id its producer got (the id names the
broker group and replicated offsets, equal on both brokers) and is checked back by the new
master; the cost is one scan of the retained half and op records at each promotion.
"""

from __future__ import annotations

import collections
import dataclasses
import enum
import logging
from collections.abc import Iterator, Mapping

from ariane.broker.tables import offsets
from ariane.broker.transaction import records as transaction_records
from ariane.broker.transaction import settings as transaction_settings
from ariane.common import clock, errors, ids, message, topics
from ariane.store import commit_log, message_store

_log = logging.getLogger(__name__)

P = message.Property

CONSUMER_GROUP = ids.GroupName("CID_RMQ_SYS_TRANS")
"""The group whose committed offsets are the check progress (RocketMQ's name)."""
HALF_QUEUE = transaction_records.HALF_QUEUE
"""The one queue of the half and op topics."""
OP_REMOVE_TAG = "d"
"""Tag of op records (RocketMQ ``TransactionalMessageUtil.REMOVE_TAG``)."""
PREPARED_QUEUE_OFFSET = transaction_records.PREPARED_QUEUE_OFFSET
TRANSACTION_ID = transaction_records.TRANSACTION_ID
RESOLUTION = "TRAN_RESOLUTION"
"""Property of an op record: what ended the transaction (Ariane's; RocketMQ keeps none)."""
READ_BATCH = 256
"""Records read per ``get_messages`` call while rebuilding the table."""


class Resolution(enum.Enum):
    """How a transaction ended (``TransactionResolution`` plus the broker's give-up)."""

    COMMIT = "COMMIT"
    ROLLBACK = "ROLLBACK"
    DISCARD = "DISCARD"
    """Given up after ``transaction_check_max`` checks (RocketMQ ``resolveDiscardMsg``)."""


@dataclasses.dataclass(slots=True)
class HalfEntry:
    """One unresolved half message.

    Attributes:
        origin: queue offset of the original half record (the key; op records name it).
        transaction_id: the id the producer was given.
        commit_log_offset: CommitLog offset of its newest record (original or last copy).
        queue_offset: half-queue offset of that newest record.
        check_times: check-backs sent so far.
        due_ms: wall-clock ms at which the next check is due.
    """

    origin: int
    transaction_id: str
    commit_log_offset: int
    queue_offset: int
    check_times: int
    due_ms: int


@dataclasses.dataclass(frozen=True, slots=True)
class HalfCheck:
    """A check-back to send to a producer of ``message.topic``.

    Attributes:
        transaction_id: what the producer answers with.
        message: the half message restored to its real topic and queue.
        check_times: which check this is, 1-based.
    """

    transaction_id: str
    message: message.StoredMessage
    check_times: int


@dataclasses.dataclass(slots=True)
class TransactionStats:
    """Totals since start (``rocketmq_half_messages``, commit/rollback counters)."""

    prepared: int = 0
    committed: int = 0
    rolled_back: int = 0
    checks: int = 0
    given_up: int = 0


def transaction_id_of(broker: str, origin: int, commit_log_offset: int) -> str:
    """The transaction id of a half message: its origin and CommitLog offset in hex, then
    ``@`` and the broker name (grpc-v2.md §8: ids encode the broker name)."""
    return f"{origin:x}-{commit_log_offset:x}@{broker}"


def origin_of(transaction_id: str, broker: str) -> int:
    """The origin queue offset a transaction id of this broker names.

    Raises:
        InvalidTransactionIdError: the id is malformed or names another broker.
    """
    head, _, owner = transaction_id.rpartition("@")
    origin, _, offset = head.partition("-")
    try:
        if owner != broker or int(offset, 16) < 0:
            raise ValueError(owner)
        return int(origin, 16)
    except ValueError:
        raise errors.InvalidTransactionIdError(
            f"transaction id {transaction_id[:80]!r} is not one this broker ({broker}) issued"
        ) from None


class TransactionalMessageService:
    """The unresolved half messages of one broker and the writes that resolve them.

    Build it with ``open`` (which rebuilds the table from the CommitLog).

    Args:
        store: the message store.
        offset_table: the consumer-offset table holding the check progress.
        settings: the transaction settings.
        broker_name: this broker's name (transaction ids carry it).
        time: the wall clock (due times compare with STORETIMESTAMP).
    """

    def __init__(
        self,
        *,
        store: message_store.MessageStore,
        offset_table: offsets.ConsumerOffsetManager,
        settings: transaction_settings.TransactionSettings,
        broker_name: str,
        time: clock.Clock,
    ) -> None:
        self._store = store
        self._offsets = offset_table
        self.settings = settings
        self._broker = broker_name
        self._clock = time
        self._pending: dict[int, HalfEntry] = {}
        self._resolved: collections.OrderedDict[int, Resolution] = collections.OrderedDict()
        self._op_window: collections.deque[tuple[int, HalfEntry]] = collections.deque()
        """``(op record queue offset, the resolved entry)`` in op order; the entry's
        ``queue_offset`` is its origin's newest half record (a check copy written while it was
        being resolved still moves it)."""
        self.stats = TransactionStats()
        self._master = True
        self._term = 0
        """Counts role changes: a write awaited across one does not touch the new table."""

    @classmethod
    def open(
        cls,
        *,
        store: message_store.MessageStore,
        offset_table: offsets.ConsumerOffsetManager,
        settings: transaction_settings.TransactionSettings,
        broker_name: str,
        time: clock.Clock,
        master: bool = True,
    ) -> TransactionalMessageService:
        """The service of a master with its table rebuilt from the records past the check
        progress; of a slave (``master`` False) with an empty table (``become_slave``)."""
        service = cls(
            store=store,
            offset_table=offset_table,
            settings=settings,
            broker_name=broker_name,
            time=time,
        )
        if not master:
            service.become_slave()
            return service
        service._rebuild()
        if service._pending:
            _log.info("%d unresolved half messages after start", len(service._pending))
        return service

    def __len__(self) -> int:
        return len(self._pending)

    # -- role ---------------------------------------------------------------------------------

    @property
    def is_master(self) -> bool:
        """Whether this broker owns its transactions now (checks them, resolves them)."""
        return self._master

    def become_slave(self) -> None:
        """Stop owning transactions: forget the table and the check progress.

        A slave's master owns its half messages (RocketMQ runs no
        ``TransactionalMessageCheckService`` on a slave). The progress is removed from the
        offset table, so whatever reads it next (a promotion, a restart as master) starts
        at the queues' first record: a slave's own old progress may name records its
        master's history replaced (a demoted master's diverged tail is cut).
        """
        self._master = False
        self._term += 1
        self._pending.clear()
        self._resolved.clear()
        self._op_window.clear()
        self._offsets.remove_group(CONSUMER_GROUP)

    def become_master(self) -> int:
        """A promoted slave: rebuild the table of unresolved halves from the replicated half
        and op queues, from the check progress (the queues' first record, as
        ``become_slave`` left it), so every unresolved transaction is pending again under its
        transaction id and due for a check. Nothing when already a master.

        Returns:
            how many half messages are unresolved.
        """
        if not self._master:
            self._master = True
            self._term += 1
            self._rebuild()
            _log.warning("promoted: %d unresolved half messages", len(self._pending))
        return len(self._pending)

    # -- prepare (the send path) --------------------------------------------------------------

    def to_half(self, request: commit_log.AppendRequest) -> commit_log.AppendRequest:
        """The append request of the half message for a TRANSACTION send (RocketMQ
        ``parseHalfMessageInner``).

        Raises:
            TooManyRequestsError: ``half_messages_max`` halves are unresolved.
        """
        if len(self._pending) >= self.settings.half_messages_max:
            raise errors.TooManyRequestsError(
                f"{len(self._pending)} transactions are unresolved on this broker "
                "(half_messages_max); commit or roll back before sending more"
            )
        original = request.message
        props = dict(original.properties)
        props[P.REAL_TOPIC] = original.topic
        props[P.REAL_QUEUE_ID] = str(request.queue_id)
        props[P.TRANSACTION_PREPARED] = "true"
        return dataclasses.replace(
            request,
            message=message.Message(topics.TRANS_HALF_TOPIC, original.body, props, original.flag),
            queue_id=HALF_QUEUE,
            sys_flag=request.sys_flag & ~message.TRANSACTION_TYPE_MASK,
        )

    def prepared(self, half: commit_log.AppendRequest, result: commit_log.PutMessageResult) -> str:
        """Record a stored half message; returns its transaction id."""
        origin = result.queue_offset
        transaction_id = transaction_id_of(self._broker, origin, result.commit_log_offset)
        self._pending[origin] = HalfEntry(
            origin=origin,
            transaction_id=transaction_id,
            commit_log_offset=result.commit_log_offset,
            queue_offset=origin,
            check_times=0,
            due_ms=self._first_due_ms(half.message.properties, result.store_timestamp_ms),
        )
        self.stats.prepared += 1
        return transaction_id

    def _first_due_ms(self, props: Mapping[str, str], stored_ms: int) -> int:
        immunity = props.get(P.CHECK_IMMUNITY_TIME_IN_SECONDS, "")
        if immunity.isdigit():  # RocketMQ: the producer's own first-check delay
            return stored_ms + max(int(immunity) * 1000, self.settings.transaction_timeout_ms)
        return stored_ms + self.settings.transaction_timeout_ms

    # -- EndTransaction -----------------------------------------------------------------------

    def issued_transaction_id(self, transaction_id: str, commit_log_offset: int) -> str:
        """``transaction_id`` when this broker issued it, else the id of the half message whose
        record (original or check copy) starts at ``commit_log_offset``.

        RocketMQ's ``EndTransactionProcessor`` finds the half message by ``commitLogOffset``
        alone, and the classic Go client v2 relies on it: it answers a check-back with the
        message's ``UNIQ_KEY`` as ``transactionId`` (its check header decoder drops the id).

        Raises:
            InvalidTransactionIdError: the id is not this broker's and no half message is
                stored at ``commit_log_offset``.
        """
        try:
            origin_of(transaction_id, self._broker)
            return transaction_id
        except errors.InvalidTransactionIdError:
            if commit_log_offset < 0:
                raise
        half = self._store.get_message(ids.CommitLogOffset(commit_log_offset)).message
        if half is None or half.topic != topics.TRANS_HALF_TOPIC:
            raise errors.InvalidTransactionIdError(
                f"transaction id {transaction_id[:80]!r} is not this broker's and no half "
                f"message is stored at CommitLog offset {commit_log_offset}"
            )
        origin = int(half.properties.get(PREPARED_QUEUE_OFFSET, half.queue_offset))
        entry = self._pending.get(origin)
        if entry is not None:
            return entry.transaction_id
        return transaction_id_of(self._broker, origin, half.commit_log_offset)

    async def end_transaction(
        self, *, topic: str | None, message_id: str, transaction_id: str, resolution: Resolution
    ) -> None:
        """Commit or roll back one half message (RocketMQ ``EndTransactionProcessor``).

        ``topic`` ``None`` skips the topic check (a classic END_TRANSACTION sent in answer to a
        check-back names no topic).

        COMMIT writes the message to its real topic and queue (same message id) and an op
        record; ROLLBACK writes only the op record. Repeating the resolution a transaction
        already got answers OK and writes nothing.

        Raises:
            InvalidTransactionIdError: the id is unknown, resolved differently, or its half
                message is not ``message_id`` of ``topic``.
            BadRequestError: ``resolution`` is DISCARD (only the broker gives up).
            ArianeError: the store refused the write (its code); the transaction stays open.
        """
        if resolution is Resolution.DISCARD:
            raise errors.BadRequestError("resolution must be COMMIT or ROLLBACK")
        if not self._master:  # RocketMQ: "store is slave mode, so end transaction is forbidden"
            raise errors.ForbiddenError(
                "this broker is a slave; end the transaction on its group's master"
            )
        origin = origin_of(transaction_id, self._broker)
        entry = self._pending.get(origin)
        if entry is None or entry.transaction_id != transaction_id:
            if self._resolved.get(origin) is resolution and entry is None:
                return  # a repeat (a lost reply, a late check answer): already done
            ended = self._resolved.get(origin)
            raise errors.InvalidTransactionIdError(
                f"transaction {transaction_id!r} is unknown or already ended"
                + (f" with {ended.value}" if ended is not None and entry is None else "")
            )
        half = self._read(entry)
        props = half.properties
        if props.get(P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX) != message_id or topic not in (
            None,
            props[P.REAL_TOPIC],
        ):
            raise errors.InvalidTransactionIdError(
                f"transaction {transaction_id!r} is not message {message_id!r} of topic {topic!r}"
            )
        writes = [self._op_request(origin, resolution)]
        if resolution is Resolution.COMMIT:
            writes.insert(0, transaction_records.commit_request(half))
        await self._resolve(entry, writes, resolution)
        if resolution is Resolution.COMMIT:
            self.stats.committed += 1
        else:
            self.stats.rolled_back += 1

    async def _resolve(
        self, entry: HalfEntry, writes: list[commit_log.AppendRequest], resolution: Resolution
    ) -> None:
        del self._pending[entry.origin]  # claimed: a concurrent EndTransaction sees it gone
        term = self._term
        try:
            results = await self._store.put_messages(writes, atomic=True)
            failed = next((r for r in results if not r.status.is_stored), None)
            if failed is not None:
                raise errors.ServiceUnavailableError(
                    f"the store refused the transaction's records: {failed.status.value}"
                )
        except BaseException:
            if term == self._term:  # else the table was dropped or rebuilt meanwhile
                self._pending[entry.origin] = entry
            raise
        if term == self._term:
            self._remember(entry, resolution, results[-1].queue_offset)

    def _remember(self, entry: HalfEntry, resolution: Resolution, op_offset: int) -> None:
        self._resolved[entry.origin] = resolution
        if len(self._resolved) > self.settings.resolved_remembered_max:
            self._resolved.popitem(last=False)
        self._op_window.append((op_offset, entry))

    def _op_request(self, origin: int, resolution: Resolution) -> commit_log.AppendRequest:
        props = {P.TAGS: OP_REMOVE_TAG, RESOLUTION: resolution.value}
        body = str(origin).encode()
        return commit_log.AppendRequest(
            message=message.Message(topics.TRANS_OP_HALF_TOPIC, body, props),
            queue_id=HALF_QUEUE,
            born_timestamp_ms=self._clock.now_ms(),
        )

    def _read(self, entry: HalfEntry) -> message.StoredMessage:
        found = self._store.get_message(ids.CommitLogOffset(entry.commit_log_offset))
        if found.message is None:
            raise errors.InvalidTransactionIdError(
                f"the half message of transaction {entry.transaction_id!r} is gone "
                f"({found.status.value}: deleted by retention or unreadable)"
            )
        return found.message

    # -- check-back ---------------------------------------------------------------------------

    def due(self, now_ms: int) -> list[HalfEntry]:
        """Unresolved halves whose next check is due, oldest first, at most
        ``checks_per_pass_max``."""
        ready = [e for e in self._pending.values() if e.due_ms <= now_ms]
        ready.sort(key=lambda e: e.due_ms)
        return ready[: self.settings.checks_per_pass_max]

    async def renew(self, entry: HalfEntry) -> HalfCheck | None:
        """Count one more check of ``entry``: append its check copy and return the check to
        send, or give it up after ``transaction_check_max`` checks (``None``).

        RocketMQ ``TransactionalMessageServiceImpl.check``: the copy is written before the
        producer is asked, so a restart never forgets a check. An entry resolved meanwhile,
        or whose record is unreadable, is skipped (``None``).
        """
        if self._pending.get(entry.origin) is not entry:
            return None
        try:
            half = self._read(entry)
        except errors.InvalidTransactionIdError as exc:
            _log.error("transaction check skipped: %s", exc.message)
            return None
        if entry.check_times >= self.settings.transaction_check_max:
            await self._give_up(entry, half)
            return None
        checks = entry.check_times + 1
        copy = transaction_records.check_copy(
            half, origin=entry.origin, transaction_id=entry.transaction_id, checks=checks
        )
        result = (await self._store.put_messages([copy]))[0]
        if not result.status.is_stored:
            return None  # the next pass tries again
        entry.commit_log_offset = result.commit_log_offset
        entry.queue_offset = result.queue_offset  # also when resolved meanwhile (op window)
        if self._pending.get(entry.origin) is not entry:
            return None  # resolved while the copy was written: nothing to ask
        entry.check_times = checks
        entry.due_ms = result.store_timestamp_ms + self.settings.transaction_check_interval_ms
        self.stats.checks += 1
        return HalfCheck(entry.transaction_id, transaction_records.restored(half), checks)

    async def _give_up(self, entry: HalfEntry, half: message.StoredMessage) -> None:
        parked = commit_log.AppendRequest(
            message=message.Message(
                topics.TRANS_CHECK_MAX_TIME_TOPIC, half.body, half.properties, half.message.flag
            ),
            queue_id=HALF_QUEUE,
            sys_flag=half.sys_flag & message.SysFlag.COMPRESSED,
            born_timestamp_ms=half.born_timestamp_ms,
            born_host=half.born_host,
        )
        writes = [parked, self._op_request(entry.origin, Resolution.DISCARD)]
        await self._resolve(entry, writes, Resolution.DISCARD)
        self.stats.given_up += 1
        _log.warning(
            "transaction %s (message %s of %s) given up after %d checks; kept in %s",
            entry.transaction_id,
            half.properties.get(P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX, ""),
            half.properties.get(P.REAL_TOPIC, ""),
            entry.check_times,
            topics.TRANS_CHECK_MAX_TIME_TOPIC,
        )

    def commit_progress(self) -> tuple[int, int]:
        """Move the check progress past what no restart needs, into the offset table.

        A slave never moves it (its master owns it): it answers the progress as it is.

        Returns:
            ``(half progress, op progress)`` queue offsets.
        """
        if not self._master:
            return self._progress(topics.TRANS_HALF_TOPIC), self._progress(
                topics.TRANS_OP_HALF_TOPIC
            )
        half_top = self._store.max_queue_offset(topics.TRANS_HALF_TOPIC, HALF_QUEUE)
        half_at = min((e.queue_offset for e in self._pending.values()), default=half_top)
        window = self._op_window
        while window and window[0][1].queue_offset < half_at:
            window.popleft()
        op_top = self._store.max_queue_offset(topics.TRANS_OP_HALF_TOPIC, HALF_QUEUE)
        op_at = window[0][0] if window else op_top
        commit = self._offsets.commit
        commit(CONSUMER_GROUP, topics.TRANS_HALF_TOPIC, HALF_QUEUE, ids.QueueOffset(half_at))
        commit(CONSUMER_GROUP, topics.TRANS_OP_HALF_TOPIC, HALF_QUEUE, ids.QueueOffset(op_at))
        return half_at, op_at

    # -- rebuild --------------------------------------------------------------------------------

    def _rebuild(self) -> None:
        ops: dict[int, tuple[Resolution, int]] = {}
        op_top = self._store.max_queue_offset(topics.TRANS_OP_HALF_TOPIC, HALF_QUEUE)
        op_from = self._progress(topics.TRANS_OP_HALF_TOPIC)
        # The newest ops before the progress too: a repeated EndTransaction after a restart
        # still answers as the first one did (up to ``resolved_remembered_max`` of them).
        remembered_from = max(0, min(op_from, op_top - self.settings.resolved_remembered_max))
        for op in self._records(topics.TRANS_OP_HALF_TOPIC, remembered_from):
            try:
                origin, resolution = int(op.body), Resolution(op.properties[RESOLUTION])
            except (KeyError, ValueError):
                _log.error("op record at %d is malformed; ignored", op.commit_log_offset)
                continue
            ops[origin] = (resolution, op.queue_offset)
        newest: dict[int, int] = {}
        half_from = self._progress(topics.TRANS_HALF_TOPIC)
        for half in self._records(topics.TRANS_HALF_TOPIC, half_from):
            origin = int(half.properties.get(PREPARED_QUEUE_OFFSET, half.queue_offset))
            newest[origin] = half.queue_offset
            if origin not in ops:
                self._pending[origin] = self._entry_of(half, origin)
        for origin, (resolution, op_offset) in sorted(ops.items(), key=lambda kv: kv[1][1]):
            self._resolved[origin] = resolution
            if op_offset >= op_from:
                placeholder = HalfEntry(origin, "", -1, newest.get(origin, -1), 0, 0)
                self._op_window.append((op_offset, placeholder))
        while len(self._resolved) > self.settings.resolved_remembered_max:
            self._resolved.popitem(last=False)

    def _entry_of(self, half: message.StoredMessage, origin: int) -> HalfEntry:
        props = half.properties
        checks = int(props.get(P.TRANSACTION_CHECK_TIMES, "0") or 0)
        if checks:
            due_ms = half.store_timestamp_ms + self.settings.transaction_check_interval_ms
            transaction_id = props.get(TRANSACTION_ID, "")
        else:
            due_ms = self._first_due_ms(props, half.store_timestamp_ms)
            transaction_id = transaction_id_of(self._broker, origin, half.commit_log_offset)
        return HalfEntry(
            origin, transaction_id, half.commit_log_offset, half.queue_offset, checks, due_ms
        )

    def _progress(self, topic: ids.TopicName) -> int:
        """The committed check progress on ``topic`` (its min offset when none)."""
        committed = self._offsets.query(CONSUMER_GROUP, topic, HALF_QUEUE)
        return max(committed or 0, self._store.min_queue_offset(topic, HALF_QUEUE))

    def _records(self, topic: ids.TopicName, start: int) -> Iterator[message.StoredMessage]:
        """Every readable record of ``topic`` queue 0 from ``start``."""
        at = ids.QueueOffset(max(start, self._store.min_queue_offset(topic, HALF_QUEUE)))
        top = self._store.max_queue_offset(topic, HALF_QUEUE)
        while at < top:
            got = self._store.get_messages(
                topic, HALF_QUEUE, at, max_count=READ_BATCH, max_bytes=64 * 1024 * 1024
            )
            yield from got.messages
            if got.next_begin_offset <= at:
                break
            at = got.next_begin_offset
