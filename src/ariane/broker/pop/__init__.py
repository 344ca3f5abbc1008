"""RocketMQ 5 POP consumption: per-message invisible time, attempts, FIFO order, receipts.

``group_state`` (one group's invisible-time bookkeeping, pure), ``delivery`` (a delivery record,
its outcomes and its journal records), ``done_window`` (done flags above the committed offset),
``fifo`` (per message group delivery order), ``receipt`` (the receipt-handle codec), ``journal``
(the POP journal's record codec: checkpoint/ack records as RocketMQ's CK/ACK), ``journal_file``
(its append-only file) and ``service`` (``PopService``, the one owner of group states, queue
opening, start offsets and offset commits, and ``PopReviveService``, RocketMQ's
``PopReviveService``).


Invariant: POP state survives a restart through the journal, so delivery attempts keep counting
and a message cannot dodge ``%DLQ%<group>`` by a broker restart.
"""
