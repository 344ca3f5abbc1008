"""RocketMQ 5 POP consumption: per-message invisible time, attempts, FIFO order, receipts.

``group_state`` (one group's invisible-time bookkeeping, pure), ``delivery`` (a delivery record,
its outcomes and its journal records), ``done_window`` (done flags above the committed offset),
``fifo`` (per message group delivery order), ``receipt`` (the receipt-handle codec), ``journal``
(the POP journal's record codec: checkpoint/ack records as RocketMQ's CK/ACK), ``journal_file``
(its append-only file), ``replica`` (the journal in the replicated CommitLog, so a promoted
slave carries the POP state), ``service`` (``PopService``, the one owner of group states,
queue opening, start offsets and offset commits, and ``PopReviveService``, RocketMQ's
``PopReviveService``), ``reader`` (``QueueReader``, the one place the POP path reads messages)
and ``receiver`` (``PopReceiver``, the POP seam: a receive pass's read-and-mark and the
receipt checks of ack and ChangeInvisibleDuration; ``processors.consume`` keeps the policy).

Invariants: POP state (deliveries in flight, done offsets) survives a restart through the
journal and a failover through its copy in the CommitLog (``replica``), so an unacked delivery
is still revived and a stale handle still refused; a concurrent group's attempts live in its
``%RETRY%<group>_<topic>`` copies (``processors.retry``), an orderly group's (redelivered in
place) in the journal, so neither can dodge ``%DLQ%<group>`` by a restart or a failover.
"""
