"""The check-back loop: ask a live producer about each half message left unresolved.

Mirrors RocketMQ 5.3's ``TransactionalMessageCheckService`` and
``DefaultTransactionalMessageCheckListener``: every ``transaction_check_interval_ms`` a pass
takes the half messages whose check is due (older than ``transaction_timeout_ms`` for the
first, ``transaction_check_interval_ms`` after the previous one), writes each one's check copy
(``TransactionalMessageService.renew``, which gives a half up after ``transaction_check_max``
checks) and hands the check to a ``CheckListener``: the gRPC layer pushes it as a Telemetry
``RecoverOrphanedTransactionCommand`` to a live producer of the topic (grpc-v2.md §6.8). The
producer answers with EndTransaction(SOURCE_SERVER_CHECK). A check that finds no producer
still counts, as in RocketMQ (its channel lookup returns null and the check is lost).

Invariants: the loop writes through ``TransactionalMessageService`` only, so a pass is safe to
interrupt anywhere (cancellation or a crash): what was written is in the CommitLog, the rest
is due again at the next pass. A pass does nothing while the broker is a slave (it runs on every
broker so that a promoted slave checks at once). Protocol-neutral: no gRPC here.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Protocol

from ariane.broker.transaction import processor as transaction
from ariane.common import clock

_log = logging.getLogger(__name__)


class CheckListener(Protocol):
    """Where check-backs go (the producer streams of the gRPC layer)."""

    def send_check(self, check: transaction.HalfCheck) -> bool:
        """Ask one live producer of ``check.message.topic``; False when there is none (or
        every one's outbox is full)."""


class TransactionCheckService:
    """Runs check-back passes until cancelled.

    Args:
        transactions: the unresolved half messages.
        listener: where checks are sent.
        time: the wall clock.
    """

    def __init__(
        self,
        *,
        transactions: transaction.TransactionalMessageService,
        listener: CheckListener,
        time: clock.Clock,
    ) -> None:
        self._transactions = transactions
        self._listener = listener
        self._clock = time
        self.unanswerable = 0
        """Checks that found no live producer, since start."""

    async def run(self) -> None:
        """A pass every ``transaction_check_interval_ms`` until cancelled; a failed pass is
        logged and the next one runs on schedule."""
        interval_s = self._transactions.settings.transaction_check_interval_ms / 1000
        while True:
            await asyncio.sleep(interval_s)
            try:
                await self.check_once()
            except Exception:
                _log.exception("transaction check pass failed; retrying next interval")

    async def check_once(self) -> int:
        """One pass: check every due half message, then commit the check progress; nothing
        while the broker is a slave (RocketMQ starts ``TransactionalMessageCheckService`` only
        on a master, ``BrokerController.startProcessorByHa``).

        Returns:
            how many checks were handed to a producer.
        """
        if not self._transactions.is_master:
            return 0  # the master checks; a slave neither checks nor moves the progress
        sent = 0
        for entry in self._transactions.due(self._clock.now_ms()):
            check = await self._transactions.renew(entry)
            if check is None:
                continue
            if self._listener.send_check(check):
                sent += 1
            else:
                self.unanswerable += 1
                _log.info(
                    "transaction %s of topic %s: no live producer to check with (check %d)",
                    check.transaction_id,
                    check.message.topic,
                    check.check_times,
                )
        self._transactions.commit_progress()
        return sent
