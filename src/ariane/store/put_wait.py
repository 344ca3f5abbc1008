"""Waiting for an append's conditions: the flush, then (SYNC_MASTER) the slave.

``MessageStore`` appends a batch under its put lock and gets back a future that completes when
the flush condition holds (at once under ASYNC_FLUSH, after the group commit under SYNC_FLUSH).
This module waits for it, then for the ``ReplicationGate``'s ack rule when the broker
replicates, each wait bounded by ``sync_flush_timeout_ms`` (RocketMQ ``CommitLog.handleDiskFlush``
then ``CommitLog.handleHA``).

Invariant: a wait never changes what was stored, only the status it is answered with: a stored
message whose flush did not complete in time is FLUSH_DISK_TIMEOUT, one whose slave condition
did not hold is FLUSH_SLAVE_TIMEOUT or SLAVE_NOT_AVAILABLE; messages not stored keep their
status. What the gate refuses before the append (``ReplicationGate.refusal``) never reaches a
wait: it was not stored.
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
Durable = concurrent.futures.Future[bool] | asyncio.Future[bool]
"""Completes with ``True`` once the flush condition holds, ``False`` if the sync failed: a
concurrent future, or for a coroutine an asyncio future of its loop (the group commit completes
those on the loop, one wake-up per sync)."""


class ReplicationGate(Protocol):
    """What a master's HA service decides about appends (``store.ha.service.HAService``)."""

    def refusal(self) -> PutMessageStatus | None:
        """Asked under the put lock before a batch is appended: ``None`` to append it, or the
        status every message of the batch is refused with, nothing stored:
        SERVICE_NOT_AVAILABLE on a slave or a fenced old master, IN_SYNC_REPLICAS_NOT_ENOUGH
        on a SYNC_MASTER with too few in-sync replicas (RocketMQ controller mode)."""
        ...

    def replicated(self, end_offset: int) -> concurrent.futures.Future[PutMessageStatus]:
        """Completes with PUT_OK once the ack rule holds for bytes up to ``end_offset``, or
        with SLAVE_NOT_AVAILABLE (a fenced master); the caller turns a wait past its timeout into
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
    durable: Durable,
    gate: ReplicationGate | None,
    *,
    timeout_ms: int,
) -> Results:
    """``wait_blocking`` for asyncio code, on the append's own ``durable`` future.

    No await when a condition already holds (ASYNC_FLUSH); otherwise the task awaits the
    future itself under ``asyncio.timeout``, so the group commit's completion resumes it
    directly (no wrapped future, no ``wait_for`` waiter in between).

    Args:
        results: the append's results.
        durable: its flush condition (``MessageStore._append``); a sync that failed
            (``False``) or did not complete in ``timeout_ms`` answers FLUSH_DISK_TIMEOUT.
        gate: the replication gate, ``None`` when the broker does not replicate.
        timeout_ms: bound of each wait, in ms (``sync_flush_timeout_ms``).
    """
    timeout_s = timeout_ms / 1000
    if durable.done():  # ASYNC_FLUSH: no thread handoff, no wake-up of the event loop
        synced = durable.result()
    else:
        waitable = durable if isinstance(durable, asyncio.Future) else asyncio.wrap_future(durable)
        try:
            async with asyncio.timeout(timeout_s):
                synced = await waitable
        except TimeoutError:
            return flush_timed_out(results, timeout_ms)
    done = results if synced else flush_timed_out(results)
    waited = _replica_wait(gate, done)
    if waited is None:
        return done
    if waited.done():
        return _with_replica_status(done, waited.result())
    try:
        async with asyncio.timeout(timeout_s):
            status = await asyncio.wrap_future(waited)
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
