"""Flush services: when CommitLog bytes become durable (RocketMQ ``FlushCommitLogService``s).

- ``AsyncFlushService`` (ASYNC_FLUSH, RocketMQ ``FlushRealTimeService``): every
  ``flush_interval_ms`` it syncs if at least ``flush_least_pages`` pages are dirty, and syncs
  whatever is dirty at least every ``flush_thorough_interval_ms``. Appends do not wait.
- ``GroupCommitService`` (SYNC_FLUSH): an append registers the offset its bytes end at and gets
  a ``concurrent.futures.Future``, or from a coroutine an ``asyncio.Future`` of its loop
  (``request_durable(end, loop)``); one flusher thread takes every waiter queued so far,
  runs ONE sync covering every byte written so far (``fdatasync`` releases the GIL, so
  appenders go on), then completes every future it covered with ``True``: the asyncio ones
  with one ``call_soon_threadsafe`` per loop per sync, not one wake-up of the loop per waiter.
  A failed sync completes them with ``False`` and marks the CommitLog unwritable (a failed
  fsync cannot be retried safely). The waiting list is bounded by ``sync_flush_waiters_max``.
- ``PeriodicService``: a named thread running an action on an interval (also used for the
  ConsumeQueue flush and checkpoint).

Every service has explicit ``start``/``stop``; threads are named ``ariane-store-…``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import queue
import threading
from collections.abc import Callable

from ariane.common import clock as clock_mod
from ariane.store import commit_log, settings

_log = logging.getLogger(__name__)


def completed_future(value: bool) -> concurrent.futures.Future[bool]:
    """A future already resolved to ``value`` (no wait needed)."""
    future: concurrent.futures.Future[bool] = concurrent.futures.Future()
    future.set_result(value)
    return future


def _resolve(future: concurrent.futures.Future[bool], value: bool) -> None:
    # A waiter may have cancelled (asyncio.wait_for on a wrapped future); that is fine.
    with contextlib.suppress(concurrent.futures.InvalidStateError):
        future.set_result(value)


def _resolve_all(futures: list[asyncio.Future[bool]], value: bool) -> None:
    # On the futures' loop; a waiter that timed out (its task cancelled the future) is skipped.
    for future in futures:
        if not future.done():
            future.set_result(value)


_Waiter = tuple[
    int, asyncio.AbstractEventLoop | None, "concurrent.futures.Future[bool] | asyncio.Future[bool]"
]
"""(end offset, loop, future) of an append waiting for a sync: ``loop`` ``None`` for a
``concurrent.futures.Future`` (a thread waits), else an asyncio future of that loop."""


class PeriodicService:
    """Runs ``action`` every ``interval_ms`` in a thread named ``name`` until ``stop``.

    Exceptions from ``action`` are logged and the loop goes on.
    """

    def __init__(self, name: str, interval_ms: int, action: Callable[[], None]) -> None:
        self.name = name
        self._interval_s = interval_ms / 1000
        self._action = action
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start the thread."""
        assert self._thread is None, f"{self.name} already started"
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._interval_s):
            try:
                self._action()
            except Exception:
                _log.exception("%s failed; continuing", self.name)

    def stop(self) -> None:
        """Stop and join the thread (the action is not run again)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None


class AsyncFlushService:
    """ASYNC_FLUSH: periodic CommitLog sync; durability requests complete at once.

    Args:
        log: the CommitLog to flush.
        config: flush intervals and thresholds.
        clock: monotonic time for the thorough-flush interval.
    """

    def __init__(
        self, log: commit_log.CommitLog, config: settings.StoreSettings, clock: clock_mod.Clock
    ) -> None:
        self._log = log
        self._settings = config
        self._clock = clock
        self._last_thorough_ms = clock.monotonic_ms()
        self._service = PeriodicService(
            "ariane-store-flush-commitlog", config.flush_interval_ms, self.run_once
        )
        self.flush_count = 0

    def run_once(self) -> None:
        """Flush if enough pages are dirty or the thorough interval has passed."""
        now = self._clock.monotonic_ms()
        dirty = self._log.log.unflushed_bytes
        thorough = now - self._last_thorough_ms >= self._settings.flush_thorough_interval_ms
        if thorough:
            self._last_thorough_ms = now
        if dirty > 0 and (thorough or dirty >= self._settings.flush_least_bytes):
            try:
                self._log.flush()
                self.flush_count += 1
            except OSError:
                _log.exception("CommitLog flush failed")

    def request_durable(
        self, end_offset: int, loop: asyncio.AbstractEventLoop | None = None
    ) -> concurrent.futures.Future[bool] | None:
        """ASYNC_FLUSH does not wait: an already completed future (whatever ``loop``)."""
        return completed_future(True)

    def start(self) -> None:
        """Start the flush thread."""
        self._service.start()

    def stop(self) -> None:
        """Stop the flush thread."""
        self._service.stop()


class GroupCommitService:
    """SYNC_FLUSH group commit: many waiters, one sync.

    Waiters go through a ``queue.SimpleQueue`` (implemented in C: a put appends and wakes the
    blocked flusher, whose wait releases the GIL), not a ``threading.Condition`` (Python code
    that allocates a lock per wait); at one producer every message pays this hand-off.

    Args:
        log: the CommitLog to flush.
        config: ``sync_flush_waiters_max``.
    """

    def __init__(self, log: commit_log.CommitLog, config: settings.StoreSettings) -> None:
        self._log = log
        self._waiters_max = config.sync_flush_waiters_max
        self._queue: queue.SimpleQueue[_Waiter | None] = queue.SimpleQueue()
        self._state_lock = threading.Lock()  # orders the stop marker after every waiter
        self._stopping = False
        self._thread: threading.Thread | None = None
        self.flush_count = 0
        """How many syncs ran (each covers every waiter registered before it started)."""

    def has_room(self) -> bool:
        """Whether one more waiter fits (else appends answer OS_PAGE_CACHE_BUSY)."""
        return self._queue.qsize() < self._waiters_max

    def request_durable(
        self, end_offset: int, loop: asyncio.AbstractEventLoop | None = None
    ) -> concurrent.futures.Future[bool] | asyncio.Future[bool] | None:
        """A future that becomes ``True`` once every byte below ``end_offset`` is synced.

        Args:
            end_offset: the CommitLog offset the caller's bytes end at.
            loop: for a coroutine, its event loop (call from that loop): the future is then an
                asyncio future of ``loop``, completed on it by one ``call_soon_threadsafe`` per
                sync for every future of that loop the sync covered (one wake-up per group
                commit, not one per put); a future cancelled meanwhile (its waiter gave up) is
                left alone. Without it, a ``concurrent.futures.Future``.

        Returns:
            the future (``False`` if the sync failed), or ``None`` if the service is stopped.
        """
        future: concurrent.futures.Future[bool] | asyncio.Future[bool] = (
            concurrent.futures.Future() if loop is None else loop.create_future()
        )
        if self._log.flushed_offset >= end_offset:
            future.set_result(True)
            return future
        with self._state_lock:
            if self._stopping or self._thread is None:
                return None
            self._queue.put((end_offset, loop, future))
        return future

    def start(self) -> None:
        """Start the flusher thread."""
        assert self._thread is None, "already started"
        self._stopping = False
        self._queue = queue.SimpleQueue()
        self._thread = threading.Thread(
            target=self._run, name="ariane-store-group-commit", daemon=True
        )
        self._thread.start()

    def _run(self) -> None:
        while True:
            first = self._queue.get()  # blocks without the GIL until a waiter (or the stop)
            batch: list[_Waiter] = []
            stopping = first is None
            if first is not None:
                batch.append(first)
            while True:  # everything queued so far: one sync covers it all
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is None:
                    stopping = True
                else:
                    batch.append(item)
            if batch:
                self._commit(batch)
            if stopping:
                return

    def _commit(self, batch: list[_Waiter]) -> None:
        try:
            flushed = self._log.flush()
            self.flush_count += 1
            ok = True
        except OSError:
            _log.exception("group commit sync failed; the CommitLog stops taking writes")
            self._log.writable = False
            ok = False
        by_loop: dict[asyncio.AbstractEventLoop, list[asyncio.Future[bool]]] = {}
        for end_offset, loop, waiting in batch:
            assert not ok or flushed >= end_offset, "a sync covers every byte written before it"
            if loop is None:
                assert isinstance(waiting, concurrent.futures.Future)
                _resolve(waiting, ok)
            else:
                assert isinstance(waiting, asyncio.Future)
                by_loop.setdefault(loop, []).append(waiting)
        for loop, futures in by_loop.items():
            with contextlib.suppress(RuntimeError):  # the loop closed: nobody waits any more
                loop.call_soon_threadsafe(_resolve_all, futures, ok)

    def stop(self) -> None:
        """Complete the waiting appends with a last sync, then stop the thread."""
        with self._state_lock:
            if self._stopping or self._thread is None:
                return
            self._stopping = True
            self._queue.put(None)
        if self._thread is not None:
            self._thread.join()
            self._thread = None
