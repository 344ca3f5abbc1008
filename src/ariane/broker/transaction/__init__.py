"""Transactional messages (RocketMQ ``TransactionalMessageServiceImpl``): everything about a
half message in one place.

A *half message* is what a TRANSACTION send stores: the message, parked in the system topic
``RMQ_SYS_TRANS_HALF_TOPIC`` (queue 0) with its real topic and queue in its properties, so no
consumer can see it. The producer then ends the transaction with EndTransaction: COMMIT writes
the message to its real topic (same message id), ROLLBACK drops it; both append an *op record*
to ``RMQ_SYS_TRANS_OP_HALF_TOPIC``. A half left unresolved is *checked back*: the broker asks a
live producer of the topic for its state (Telemetry ``RecoverOrphanedTransactionCommand`` or
Remoting ``CHECK_TRANSACTION_STATE``) and gives it up after ``transaction_check_max`` checks.

Modules: ``processor`` (``TransactionalMessageService``: prepare, EndTransaction, the table of
unresolved halves and its rebuild from the CommitLog), ``records`` (pure: the records a half,
a commit and a check copy are), ``check_service`` (``TransactionCheckService``, the check-back
loop, RocketMQ ``TransactionalMessageCheckService``) and ``settings`` (``TransactionSettings``,
TOML ``[transaction]``). The protocol adapters stay with their protocol
(``grpc.transaction_rpc``, ``remoting.transactions``).

Invariants: every step is a CommitLog record (half, check copy, op record, committed message),
so the table of unresolved halves is rebuilt from the records after any stop or promotion; an
origin is resolved at most once; at most ``half_messages_max`` halves are unresolved; only a
master checks back or moves the check progress. Protocol-neutral: nothing here imports gRPC,
protobuf or a protocol adapter (import-linter).
"""
