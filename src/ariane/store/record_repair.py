"""A master's damaged CommitLog record fetched back from an in-sync slave (Ariane's addition).

Every read of a record checks its CRCs (``record_reader``); a record that fails them is never
returned. A slave cuts such a record on a clean start and re-fetches from its master, and after
an unclean stop keeps it when sound records follow (``store.recovery``: its master may hold the
same damaged bytes); a master cannot cut (the records after it were acknowledged), so when a
read meets one, ``RecordRepairs.corrupt`` asks its replication (the HA service, ``fetcher``)
for the same bytes from a slave that holds them; the slave answers with its own record at that
offset (``record_bytes``, CRC-checked there) and ``RecordRepairs.apply`` checks it again (CRCs,
PHYSICALOFFSET equal to the offset, the whole record inside one written segment), writes it
in place and syncs the segment. Replication is byte-identical, so the slave's record occupies
exactly the damaged range. Until then reads of the record answer CORRUPT and queue reads stop
at it (``queue_read``: the consumer's offset stays on it), so nothing is silently skipped.

RocketMQ has no such repair: its reads skip a record that fails its checks (``getMessage``
moves past it), so a consumer silently never gets that message.

Invariants: a record is rewritten only with bytes that pass every check at its own offset, and
only while it still fails them; one fetch per record at a time (asked again after
``REFETCH_INTERVAL_S``); at most ``PENDING_MAX`` records are awaited and ``LOGGED_MAX``
remembered as logged; without a slave to ask, a record is counted and logged once (then reads
keep answering CORRUPT: the queue waits at it until a slave can repair it or an operator
moves the consumer's offset).

Counters (the store's ``StoreStats``): ``corrupt_read_count`` (reads that met a damaged
record), ``repaired_record_count``, ``repair_unavailable_count`` (damaged records no slave
could be asked for).
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable, MutableMapping

from ariane.store import commit_log, message_codec, record_reader

_log = logging.getLogger(__name__)

Fetcher = Callable[[int], bool]
"""``commit_log_offset -> asked``: ask a slave for the record there; False if none can be."""

PENDING_MAX = 1024
"""Records awaited from a slave at once; more are asked for once some were answered."""
LOGGED_MAX = 4096
"""Damaged records remembered as logged (so each is logged once)."""
REFETCH_INTERVAL_S = 2.0
"""Least time between two fetches of the same record (a lost answer is asked again), s."""


class RecordRepairs:
    """The damaged records of one store's CommitLog and their repair from a slave.

    Args:
        log: the store's CommitLog.
        counts: the store's counters (``corrupt_read_count``, ``repaired_record_count``,
            ``repair_unavailable_count`` are incremented here).
        monotonic_s: the clock of ``REFETCH_INTERVAL_S``.
    """

    def __init__(
        self,
        log: commit_log.CommitLog,
        counts: MutableMapping[str, int],
        monotonic_s: Callable[[], float] = time.monotonic,
    ) -> None:
        self._log = log
        self._counts = counts
        self._monotonic_s = monotonic_s
        self._lock = threading.Lock()
        self._pending: dict[int, float] = {}
        self._logged: collections.OrderedDict[int, None] = collections.OrderedDict()
        self.fetcher: Fetcher | None = None
        """Set by the broker while it replicates as a master; ``None``: no slave to ask."""

    def corrupt(self, offset: int, reason: str) -> None:
        """A read met the damaged record at ``offset``: count it, log it (once per record) and
        ask a slave for it (unless asked within ``REFETCH_INTERVAL_S``)."""
        now = self._monotonic_s()
        with self._lock:
            self._counts["corrupt_read_count"] += 1
            first = offset not in self._logged
            if first:
                self._logged[offset] = None
                if len(self._logged) > LOGGED_MAX:
                    self._logged.popitem(last=False)
            asked = self._pending.get(offset)
            due = (asked is None and len(self._pending) < PENDING_MAX) or (
                asked is not None and now - asked >= REFETCH_INTERVAL_S
            )
            if due:
                self._pending[offset] = now
        fetcher = self.fetcher
        sent = due and fetcher is not None and fetcher(offset)
        if due and not sent:
            with self._lock:
                self._pending.pop(offset, None)
        if first:
            self._log_first(offset, reason, sent)

    def _log_first(self, offset: int, reason: str, sent: bool) -> None:
        if sent:
            _log.error(
                "corrupt CommitLog record at %d (%s): fetching it from a slave", offset, reason
            )
            return
        with self._lock:
            self._counts["repair_unavailable_count"] += 1
        _log.error(
            "corrupt CommitLog record at %d (%s) and no in-sync slave holding it to repair it "
            "from: reads stop at it (its queue's consumers wait there)",
            offset,
            reason,
        )

    def apply(self, offset: int, data: bytes) -> bool:
        """A slave's bytes for the record at ``offset``: checked, written in place and synced.

        Returns:
            whether the record was rewritten (False: not awaited, already sound, or the bytes
            fail a check; each logged).

        Raises:
            OSError: the write or the sync failed.
        """
        with self._lock:
            awaited = offset in self._pending
        if not awaited:
            _log.warning("ignored a record for offset %d that was not asked for", offset)
            return False
        problem = self._check(offset, data)
        if problem:
            _log.warning("a slave's record for offset %d refused: %s", offset, problem)
            return False
        segment = self._log.log.find(offset)
        assert segment is not None  # _check found it
        segment.overwrite(offset - segment.start_offset, data)
        segment.flush()
        with self._lock:
            self._pending.pop(offset, None)
            self._logged.pop(offset, None)
            self._counts["repaired_record_count"] += 1
        _log.warning("CommitLog record at %d (%d bytes) repaired from a slave", offset, len(data))
        return True

    def _check(self, offset: int, data: bytes) -> str:
        """Why ``data`` may not replace the record at ``offset`` ("" if it may)."""
        if not data:
            return "the slave has no sound record there"
        decoded = message_codec.decode(
            memoryview(data), record_bytes_max=self._log.record_bytes_max, check_crc=True
        )
        if decoded.status is not message_codec.DecodeStatus.OK or decoded.message is None:
            return f"it fails its checks ({decoded.reason or decoded.status.value})"
        if decoded.size != len(data) or decoded.message.commit_log_offset != offset:
            return "it is not one whole record of that offset"
        segment = self._log.log.find(offset)
        if segment is None or offset + len(data) > min(segment.end_offset, self._log.max_offset):
            return "it does not fit inside the written segment"
        current = self._log.read(offset, len(data))
        if current.status is record_reader.LookupStatus.FOUND:
            with self._lock:
                self._pending.pop(offset, None)
            return "the record here is sound already"
        return ""


def record_bytes(log: commit_log.CommitLog, offset: int) -> bytes:
    """A slave's answer to a fetch: the bytes of its record at ``offset`` if it passes its
    checks there (CRCs, PHYSICALOFFSET), else ``b""``."""
    found = log.read(offset)
    if found.status is not record_reader.LookupStatus.FOUND or found.message is None:
        return b""
    segment = log.log.find(offset)
    if segment is None:
        return b""
    data = segment.read(offset - segment.start_offset, found.message.store_size_bytes)
    return data if data is not None and len(data) == found.message.store_size_bytes else b""
