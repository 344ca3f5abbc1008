"""``ReceiptRenewalService``: the loop that keeps push consumers' messages invisible.

The schedule of the RocketMQ 5 proxy's ``DefaultReceiptHandleManager`` (``scheduleRenewTask``
every ``renewSchedulePeriodMillis``, 5 s): every ``renew_period_ms`` one
``ReceiptRenewals.renew_once`` pass renews the tracked handles whose message would soon become
visible, and releases those of clients that went away (``processors.renewal`` keeps the table
and the policy; this module only says when).

Invariant: a failed pass is logged and the next one runs on schedule, so one bad handle never
ends renewal for every consumer.
"""

from __future__ import annotations

import asyncio
import logging

from ariane.broker.processors import renewal

_log = logging.getLogger(__name__)


class ReceiptRenewalService:
    """Runs ``renewals.renew_once`` every ``renew_period_ms`` until cancelled.

    Args:
        renewals: the tracked receipt handles.
        period_ms: pause before each pass, ms (``[renewal] renew_period_ms``).
    """

    def __init__(self, renewals: renewal.ReceiptRenewals, *, period_ms: int) -> None:
        self._renewals = renewals
        self._period_ms = period_ms

    async def run(self) -> None:
        """Sleep ``renew_period_ms``, then one pass (a failure is logged); until cancelled."""
        while True:
            await asyncio.sleep(self._period_ms / 1000)
            try:
                self._renewals.renew_once()
            except Exception:  # one bad pass must not end renewal for everyone
                _log.exception("renewal pass failed")
