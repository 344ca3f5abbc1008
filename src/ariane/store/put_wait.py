"""Waiting for an append's conditions: the flush, then (SYNC_MASTER) the slave.

``MessageStore`` appends a batch under its put lock and gets back a future that completes when
the flush condition holds (at once under ASYNC_FLUSH, after the group commit under SYNC_FLUSH).
This module waits for it, then for the ``ReplicationGate``'s ack rule when the broker
replicates, each wait bounded by ``sync_flush_timeout_ms`` (RocketMQ ``CommitLog.handleDiskFlush``
then ``CommitLog.handleHA``).

Invariant: a wait never changes what was stored, only the status it is answered with: a stored
message whose flush did not complete in time is FLUSH_DISK_TIMEOUT, one whose slave condition
did not hold is FLUSH_SLAVE_TIMEOUT or SLAVE_NOT_AVAILABLE; messages not stored keep their
status.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import logging
from typing import Protocol

from ariane.store import commit_log

_log = logging.getLogger(__name__)

PutMessageStatus = commit_log.PutMessageStatus
Results = list[commit_log.PutMessageResult]
"""One result per appended message, in order."""


class ReplicationGate(Protocol):
    """What a master's HA service decides about appends (``store.ha.service.HAService``)."""

    def refuses_writes(self) -> bool:
        """True on a slave or a fenced old master: appends answer SERVICE_NOT_AVAILABLE."""
        ...

    def replicated(self, end_offset: int) -> concurrent.futures.Future[PutMessageStatus]:
        """Completes with PUT_OK once the ack rule holds for bytes up to ``end_offset``, or
        with SLAVE_NOT_AVAILABLE; the caller turns a wait past its timeout into
        FLUSH_SLAVE_TIMEOUT (RocketMQ ``CommitLog.handleHA``)."""
        ...


def wait_blocking(
    results: Results,
    flushed: concurrent.futures.Future[Results],
    gate: ReplicationGate | None,
    *,
    timeout_ms: int,
) -> Results:
    """Block the calling thread until both conditions hold or time out.

    Args:
        results: the append's results (answered as FLUSH_DISK_TIMEOUT if the flush times out).
        flushed: completes with the results once the flush condition holds.
        gate: the replication gate, ``None`` when the broker does not replicate.
        timeout_ms: bound of each wait, in ms (``sync_flush_timeout_ms``).
    """
    timeout_s = timeout_ms / 1000
    try:
        done = flushed.result(timeout=timeout_s)
    except concurrent.futures.TimeoutError:
        flushed.cancel()
        return flush_timed_out(results, timeout_ms)
    waited = _replica_wait(gate, done)
    if waited is None:
        return done
    try:
        status = waited.result(timeout=timeout_s)
    except concurrent.futures.TimeoutError:
        status = PutMessageStatus.FLUSH_SLAVE_TIMEOUT
    return _with_replica_status(done, status)


async def wait(
    results: Results,
    flushed: concurrent.futures.Future[Results],
    gate: ReplicationGate | None,
    *,
    timeout_ms: int,
) -> Results:
    """``wait_blocking`` for asyncio code: one await per condition, none when already done."""
    timeout_s = timeout_ms / 1000
    if flushed.done():  # ASYNC_FLUSH: no thread handoff, no wake-up of the event loop
        done = flushed.result()
    else:
        try:
            done = await asyncio.wait_for(asyncio.wrap_future(flushed), timeout_s)
        except TimeoutError:
            return flush_timed_out(results, timeout_ms)
    waited = _replica_wait(gate, done)
    if waited is None:
        return done
    if waited.done():
        return _with_replica_status(done, waited.result())
    try:
        status = await asyncio.wait_for(asyncio.wrap_future(waited), timeout_s)
    except TimeoutError:
        status = PutMessageStatus.FLUSH_SLAVE_TIMEOUT
    return _with_replica_status(done, status)


def flush_timed_out(results: Results, timeout_ms: int | None = None) -> Results:
    """``results`` with every PUT_OK turned into FLUSH_DISK_TIMEOUT (logged when
    ``timeout_ms`` is given: a waiter gave up, rather than a failed sync)."""
    if timeout_ms is not None:
        _log.warning("SYNC_FLUSH did not complete within %d ms", timeout_ms)
    return _with_replica_status(results, PutMessageStatus.FLUSH_DISK_TIMEOUT)


def _replica_wait(
    gate: ReplicationGate | None, flushed: Results
) -> concurrent.futures.Future[PutMessageStatus] | None:
    # SYNC_MASTER: after the flush condition, the slave condition (``ReplicationGate``).
    ends = [r.commit_log_offset + r.wrote_bytes for r in flushed if r.status.is_stored]
    if gate is None or not ends:
        return None
    return gate.replicated(max(ends))


def _with_replica_status(results: Results, status: PutMessageStatus) -> Results:
    if status is PutMessageStatus.PUT_OK:
        return results
    return [
        dataclasses.replace(r, status=status) if r.status is PutMessageStatus.PUT_OK else r
        for r in results
    ]
