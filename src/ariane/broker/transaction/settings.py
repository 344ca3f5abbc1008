"""Settings of transactional messages: when half messages are checked back and how often.

One frozen dataclass, included in ``broker.settings.BrokerSettings`` as ``transaction`` (TOML table
``[transaction]``). The defaults are RocketMQ 5.3's ``BrokerConfig`` code defaults, not the
documentation's (rocketmq-reference.md: the docs say 60 s, the code 30 s); every value has a
bound, refused with ``ValueError`` at load time.
"""

from __future__ import annotations

import dataclasses

from ariane.common import limits


@dataclasses.dataclass(frozen=True, slots=True)
class TransactionSettings:
    """Half-message bookkeeping and the check-back schedule (RocketMQ
    ``TransactionalMessageCheckService``)."""

    transaction_timeout_ms: int = 6_000
    """Age of a half message at which its first check-back is due, ms (``transactionTimeOut``
    = 6 s)."""

    transaction_check_interval_ms: int = 30_000
    """Pause between check-back passes, and between two checks of one half message, ms
    (``transactionCheckInterval`` = 30 s)."""

    transaction_check_max: int = 15
    """Checks after which an unresolved half message is given up: copied to
    ``TRANS_CHECK_MAX_TIME_TOPIC``, logged and counted (``transactionCheckMax`` = 15)."""

    half_messages_max: int = 100_000
    """Most unresolved half messages held at once, a count; one more TRANSACTION send answers
    TOO_MANY_REQUESTS (RocketMQ bounds them only by disk)."""

    resolved_remembered_max: int = 100_000
    """Most resolved transactions whose outcome is remembered so that a repeated EndTransaction
    answers as the first one did, a count (the oldest are forgotten first)."""

    checks_per_pass_max: int = 10_000
    """Most half messages checked in one pass, a count; the rest wait for the next pass
    (RocketMQ bounds a pass by ``MAX_PROCESS_TIME_LIMIT`` = 60 s instead)."""

    def __post_init__(self) -> None:
        limits.check_range("transaction_timeout_ms", self.transaction_timeout_ms, 0, 86_400_000)
        limits.check_range(
            "transaction_check_interval_ms", self.transaction_check_interval_ms, 50, 3_600_000
        )
        limits.check_range("transaction_check_max", self.transaction_check_max, 1, 1_000)
        limits.check_range("half_messages_max", self.half_messages_max, 1, 10_000_000)
        limits.check_range("resolved_remembered_max", self.resolved_remembered_max, 1, 10_000_000)
        limits.check_range("checks_per_pass_max", self.checks_per_pass_max, 1, 1_000_000)
